// Race detection for the simulated NeuronCore ("a thread sanitizer for kernels"): vector clocks
// over the agents that access memory (the five engines, and one agent per (issuing engine, DMA
// queue) pair), advanced by what the program guarantees — program order on an engine, FIFO
// order of one engine's transfers on one queue, semaphore waits and barriers — never by
// simulated time. Every access an instruction makes is checked against the earlier accesses it
// is not ordered after; two that share bytes, come from different agents and include a write are
// reported (docs/ISA.md, "Race detection").
//
// State stays bounded: an access record is dropped once each engine that has work left is
// ordered after it (every future access, DMA included, inherits some engine's clock) or cannot
// touch its bytes any more (the bounding box of the rest of its stream), or once a later access
// of the same bytes makes it redundant (a write, or a read by the same agent).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "exec/exec_context.hpp"
#include "isa/program.hpp"
#include "isa/target.hpp"

namespace trn::sim::exec {

// Room for the most DMA queues any core has (validation keeps a program's queues below its own).
constexpr uint32_t kRaceDmaQueues = isa::kMaxDmaQueues;
// Agents: engines 0..4, then the DMA agent of (issuer e, queue q) at 5 + e * kRaceDmaQueues + q.
constexpr uint32_t kRaceAgents = isa::kEngineCount * (1 + kRaceDmaQueues);
constexpr uint32_t kNoClock = UINT32_MAX;

class RaceChecker {
 public:
  RaceChecker(const isa::Program &program, std::span<const HbmBinding> args, uint32_t semaphores);
  ~RaceChecker();

  // The wait of an instruction that `engine` is about to issue holds: order the engine after the
  // semaphore updates that made it hold.
  void wait(uint32_t engine, const isa::SemWait &w);
  // Checks the memory accesses of instruction `index` of `engine` (resolved through `ctx`) and
  // records them. Returns the race report, or nothing. Call once per issued instruction.
  std::optional<std::string> execute(uint32_t engine, uint32_t index, const isa::Instruction &inst,
                                     const ExecContext &ctx);
  // The clock the instruction just executed carries to its semaphore update (an id to pass to
  // update()), or kNoClock when it has none.
  uint32_t release(uint32_t engine, const isa::Instruction &inst);
  // A semaphore update lands (in landing order) with the clock release() gave it.
  void update(const isa::SemUpdate &u, uint32_t clock);
  // All engines leave a barrier: each is ordered after everything every engine and DMA did.
  void barrier();
  // `engine` has finished its stream: it makes no more accesses.
  void finish(uint32_t engine);

  struct Access;  // one recorded access (race_check.cpp)

  struct Stats {
    uint64_t accesses = 0, peak_records = 0, pruned_dominated = 0, pruned_covered = 0;
    uint64_t peak_kept = 0;  // the most records a prune could not drop
  };
  const Stats &stats() const { return stats_; }

 private:
  using Clock = std::array<uint32_t, kRaceAgents>;
  struct Entry {
    uint32_t value;  // the semaphore after this update
    Clock prefix;    // join of this update and every earlier one in the history
  };
  struct History {
    std::vector<Entry> entries;
    size_t head = 0;        // entries before it were pruned (all engines are ordered after them)
    bool base_free = true;  // waits for value <= base need no join
    uint32_t base = 0;
    bool monotonic = true;  // false after an add wrapped: waits join the whole history
    uint32_t value = 0;     // the semaphore now
  };

  // What instructions [i, end) of an engine's stream may touch, per memory (SBUF, PSUM, HBM):
  // partitions [p0, p1) x bytes [lo, hi) (HBM: host addresses). A record nothing there overlaps
  // cannot race with that engine's future accesses, its transfers' included.
  struct Box {
    uint32_t p0 = UINT32_MAX, p1 = 0;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
  };
  using Boxes = std::array<Box, 3>;

  static void join(Clock &into, const Clock &from);
  void plan(const isa::Program &program);
  uint32_t begin(uint32_t agent);  // the agent's next epoch
  std::optional<std::string> check(Access &a);
  void prune();
  std::string describe(const Access &a) const;
  std::string memory_text(const Access &a, int64_t lo, int64_t hi, uint32_t p0, uint32_t p1) const;

  const isa::Program &program_;
  std::span<const HbmBinding> args_;
  std::array<Clock, kRaceAgents> clocks_{};
  std::array<bool, isa::kEngineCount> live_{};
  std::array<uint32_t, isa::kEngineCount> next_{};  // the first instruction not yet executed
  std::array<std::vector<Boxes>, isa::kEngineCount> ahead_;  // ahead_[e][i]: see Box
  // The last instruction of each engine that waits on each semaphore, plus one (0: none).
  std::array<std::vector<uint32_t>, isa::kEngineCount> last_wait_;
  std::vector<History> sems_;
  std::vector<Clock> pool_;  // clocks carried by updates in flight
  std::vector<uint32_t> free_;
  std::array<std::vector<Access>, 3> records_;  // SBUF, PSUM, HBM
  uint64_t record_count_ = 0, prune_at_ = 256;  // records and semaphore history entries
  Stats stats_;
};

}  // namespace trn::sim::exec
