// What one NeuronCore of each Trainium generation is: the ISA limits a program is validated
// against, the engine clocks and the DMA rate that the cost model turns cycles and bytes into time
// with. This is the one definition of these facts: the simulated device reports them, the cost
// model and the validator read them, and the kernel builder gets them back through the runtime's
// device properties. Every number is from docs/hardware.md (its section in brackets).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "isa/opcodes.hpp"

namespace trn::isa {

// Trainium generations, numbered as trn_generation_t numbers them (trn.h; the kernel builder
// checks that they agree).
enum class Generation : uint32_t { kTrn1 = 1, kTrn2 = 2, kTrn3 = 3 };
// What an unknown generation is treated as, everywhere: the simulated device's default.
constexpr Generation kDefaultGeneration = Generation::kTrn2;

// The most DMA queues (one per DMA engine) any NeuronCore has: the length of every per-queue
// array. Each generation's own count is its Target::dma_queues, never more than this [§1.5].
constexpr uint32_t kMaxDmaQueues = 16;

// The limits of a core that the ISA rules depend on. All zero by default: a target is a
// generation's (core_spec()) or a device's (its reported properties), never made up.
struct Target {
  uint32_t core_version = 0;  // NeuronCore-v2 (trn1), v3 (trn2), v4 (trn3) [§1.1]
  uint32_t partitions = 0;
  uint32_t sbuf_bytes_per_partition = 0;
  uint32_t psum_bytes_per_partition = 0;
  uint32_t psum_banks = 0;
  uint32_t semaphores = 0;
  uint32_t dma_queues = 0;  // one per DMA engine of the core
};

// A core as execution and its cost see it: the limits, plus what the compiler may fill of SBUF,
// the engine clocks and one DMA engine's achievable rate.
struct CoreSpec : Target {
  uint32_t sbuf_usable_bytes_per_partition = 0;  // what compilers leave themselves [§1.3]
  uint64_t tensor_hz = 0, vector_hz = 0, scalar_hz = 0, gpsimd_hz = 0;  // [§1.2]
  uint64_t dma_engine_bytes_per_s = 0;  // achievable per-engine rate (17/23/33 B/ns) [§1.5]

  const Target &target() const { return *this; }
  uint64_t clock_hz(Engine e) const;  // the Sync sequencer runs at the Scalar clock
};

// The core of a generation; nullptr for a generation this library does not know.
const CoreSpec *core_spec(Generation g);
// The same, with an unknown generation treated as kDefaultGeneration (the one fallback).
const CoreSpec &core_spec_or_default(uint32_t generation);

// "trn1", "trn2", "trn3"; nullptr for an unknown generation.
const char *generation_name(Generation g);
std::optional<Generation> parse_generation(std::string_view name);
bool is_known_generation(uint32_t value);

// Dense flops per TensorE cycle: a 128x128 stationary times a 128x512 moving tile (2*128*128*512
// flops) takes 512 cycles in bf16 and four times that in fp32 [§1.2, §3.1].
constexpr uint64_t kBf16FlopsPerTensorCycle = 2ull * 128 * 128;
constexpr uint64_t kFp32FlopsPerTensorCycle = kBf16FlopsPerTensorCycle / 4;

}  // namespace trn::isa
