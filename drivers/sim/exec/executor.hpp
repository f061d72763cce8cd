// One simulated NeuronCore running a program: a deterministic discrete-event simulation of its
// five engines and its DMA queues (docs/ISA.md, "Execution"). Each engine issues its stream in
// order; an instruction issues when its engine is free and its semaphore wait holds, executes
// functionally at issue, and its semaphore update lands when it completes. Same program and
// inputs give the same outputs and the same simulated time, every run.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "exec/core_memory.hpp"
#include "exec/exec_context.hpp"
#include "isa/cost_model.hpp"
#include "isa/program.hpp"

namespace trn::sim::exec {

// A core's figures and the cost model are the ISA's (isa/target.hpp, isa/cost_model.hpp).
using isa::CoreSpec;
// Per-queue arrays hold the most queues any core has; a core's own count is spec.dma_queues.
constexpr uint32_t kDmaQueues = isa::kMaxDmaQueues;
// Trace tracks: the five engines, then one per DMA queue.
constexpr uint32_t kTrackCount = isa::kEngineCount + kDmaQueues;

struct TraceRecord {
  uint8_t track;  // engine index, or kEngineCount + DMA queue
  isa::Opcode opcode;
  uint8_t engine;  // the issuing engine (for DMA tracks too)
  uint32_t index;  // instruction index in the engine's stream
  uint64_t start_ps, end_ps;
  uint64_t wait_ps;  // time the engine was free but the semaphore wait did not hold
  uint64_t bytes;    // DMA bytes
  uint64_t flops;
};

struct EngineCounters {
  uint64_t instructions = 0;
  uint64_t busy_ps = 0;  // sum of instruction costs
  uint64_t wait_ps = 0;  // free, waiting on a semaphore or barrier
  uint64_t cycles = 0;   // busy, in the engine's own cycles
};

struct Counters {
  std::array<EngineCounters, isa::kEngineCount> engines{};
  std::array<uint64_t, kDmaQueues> dma_busy_ps{};
  uint64_t dma_transfers = 0;
  uint64_t dma_bytes = 0;
  uint64_t flops = 0;
  uint64_t total_ps = 0;  // from start to the last completion
  // Race check (when on): accesses checked, and the most records held at once (accesses not
  // yet known to be ordered before every engine, plus semaphore history).
  uint64_t race_accesses = 0;
  uint64_t race_records_peak = 0;
  uint64_t race_records_kept = 0;  // the most that pruning could not drop
};

enum class RunStatus { kOk, kFault, kDeadlock };

struct RunReport {
  RunStatus status = RunStatus::kOk;
  // Fault: the instruction that faulted. Deadlock: the first blocked engine.
  isa::Engine engine = isa::Engine::kSync;
  uint32_t index = 0;
  isa::Opcode opcode = isa::Opcode::kNop;
  std::string message;  // fault reason, or one line per blocked engine for a deadlock
  uint64_t at_ps = 0;
};

struct RunOptions {
  bool trace = false;
  // Report accesses of different engines / DMA queues to the same bytes that no semaphore or
  // barrier orders (docs/ISA.md, "Race detection"): the run stops with a fault at the later one.
  bool race_check = true;
};

struct RunResult {
  RunReport report;
  Counters counters;
  std::vector<TraceRecord> trace;
};

class Executor {
 public:
  explicit Executor(const CoreSpec &spec);

  const CoreSpec &spec() const { return spec_; }
  CoreMemory &memory() { return memory_; }

  // Runs a program that validate_program accepted for spec().target(). SBUF, PSUM and
  // semaphores start at zero (clear_memory = false keeps SBUF/PSUM from the previous run).
  RunResult run(const isa::Program &program, std::span<const HbmBinding> args,
                const RunOptions &options = {}, bool clear_memory = true);

 private:
  CoreSpec spec_;
  CoreMemory memory_;
};

const char *run_status_name(RunStatus s);

}  // namespace trn::sim::exec
