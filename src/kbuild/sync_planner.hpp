// Which semaphore waits an instruction needs. Every engine and every (issuing engine, DMA queue)
// pair is an agent whose instructions complete in order; the planner keeps, per agent, a vector
// clock of what it is known to be ordered after, and per on-chip memory and HBM argument the
// accesses that a later one may conflict with. A new access that overlaps an earlier one by
// another agent (one of them a write: read-after-write, write-after-read, write-after-write)
// needs a wait on that instruction unless the clocks already order them — so no wait is
// inserted twice, nor one implied by another.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "isa/instruction.hpp"
#include "isa/target.hpp"

namespace trn::kbuild::detail {

// Room for the most DMA queues any core has; a target's own count is its core.dma_queues.
constexpr uint32_t kDmaQueues = isa::kMaxDmaQueues;
constexpr uint32_t kAgentCount = isa::kEngineCount * (1 + kDmaQueues);
using Agent = uint16_t;

inline Agent engine_agent(isa::Engine e) {
  return static_cast<Agent>(e);
}
inline Agent dma_agent(isa::Engine issuer, uint32_t queue) {
  return static_cast<Agent>(isa::kEngineCount + static_cast<uint32_t>(issuer) * kDmaQueues + queue);
}
inline bool is_dma_agent(Agent a) {
  return a >= isa::kEngineCount;
}

// Bytes an operand touches: on-chip, partitions [p0, p1) x bytes [b0, b1) of each; HBM, bytes
// [b0, b1) of argument `arg` (p0 = p1 = 0). A bounding range: strided views count as dense.
struct Access {
  isa::MemSpace space = isa::MemSpace::kNone;
  uint16_t arg = 0;
  uint32_t p0 = 0, p1 = 0;
  uint64_t b0 = 0, b1 = 0;
  bool write = false;

  bool overlaps(const Access &o) const;
  bool covers(const Access &o) const;
};
Access access_of(const isa::AccessPattern &ap, bool write);

// An instruction of an agent: its 1-based position among the agent's instructions.
struct Event {
  Agent agent = 0;
  uint32_t ordinal = 0;
};

class SyncPlanner {
 public:
  SyncPlanner();

  // The events the next instruction of `agent`, issued by engine `issuer`, must wait for before
  // it touches `accesses`: none already ordered, none implied by another.
  std::vector<Event> plan(Agent agent, isa::Engine issuer, std::span<const Access> accesses) const;
  // The latest estimated completion time of the earlier accesses `accesses` conflict with (those
  // of other agents), for choosing where an instruction goes.
  double ready_time(Agent agent, std::span<const Access> accesses) const;
  // The issuing engine waited for `event`: it is now ordered after everything the event was.
  void waited(isa::Engine issuer, Event event);
  // Records the instruction; returns its event. `end_estimate` is when it is expected to finish.
  Event record(Agent agent, isa::Engine issuer, std::span<const Access> accesses,
               double end_estimate);

  double end_estimate(Event e) const;

 private:
  struct Record {
    Access access;
    Event event;
  };
  uint32_t known(Agent agent, isa::Engine issuer, Agent of) const;
  const uint32_t *snapshot(Event e) const;
  std::vector<Record> &records_for(const Access &a);
  const std::vector<Record> &records_for(const Access &a) const;
  void prune();

  std::vector<std::vector<uint32_t>> clocks_;     // per agent, kAgentCount entries
  std::vector<std::vector<uint32_t>> snapshots_;  // per agent: its clock after each instruction
  std::vector<std::vector<double>> ends_;         // per agent: estimated end of each instruction
  std::vector<uint32_t> counts_;
  std::vector<Record> sbuf_, psum_, hbm_;
  uint64_t recorded_since_prune_ = 0;
};

}  // namespace trn::kbuild::detail
