#include "kbuild/sync_planner.hpp"

#include <algorithm>

#include "isa/dtype.hpp"

namespace trn::kbuild::detail {

using isa::MemSpace;

bool Access::overlaps(const Access &o) const {
  if (space != o.space || (space == MemSpace::kHbm && arg != o.arg)) return false;
  if (space != MemSpace::kHbm && (p1 <= o.p0 || o.p1 <= p0)) return false;
  return b0 < o.b1 && o.b0 < b1;
}

bool Access::covers(const Access &o) const {
  if (space != o.space || (space == MemSpace::kHbm && arg != o.arg)) return false;
  if (space != MemSpace::kHbm && (p0 > o.p0 || p1 < o.p1)) return false;
  return b0 <= o.b0 && o.b1 <= b1;
}

Access access_of(const isa::AccessPattern &ap, bool write) {
  Access a;
  a.space = ap.space;
  a.write = write;
  const int64_t es = isa::dtype_size(ap.dtype);
  int64_t lo = 0, hi = 0;  // element offsets reached, relative to the start
  for (uint32_t d = 0; d < ap.num_dims && d < isa::kMaxFreeDims; ++d) {
    if (ap.dims[d].count == 0) continue;
    const int64_t reach = int64_t{ap.dims[d].stride} * (ap.dims[d].count - 1);
    (reach < 0 ? lo : hi) += reach;
  }
  if (ap.space == MemSpace::kHbm) {
    a.arg = ap.arg;
    if (ap.partition_count > 0) {
      const int64_t reach = ap.partition_stride * (int64_t{ap.partition_count} - 1);
      (reach < 0 ? lo : hi) += reach;
    }
  } else {
    a.p0 = ap.partition_start;
    a.p1 = ap.partition_start + ap.partition_count;
  }
  const int64_t base = static_cast<int64_t>(ap.offset);
  a.b0 = static_cast<uint64_t>(std::max<int64_t>(0, base + lo * es));
  a.b1 = static_cast<uint64_t>(std::max<int64_t>(0, base + (hi + 1) * es));
  return a;
}

SyncPlanner::SyncPlanner()
    : clocks_(kAgentCount, std::vector<uint32_t>(kAgentCount, 0)),
      snapshots_(kAgentCount),
      ends_(kAgentCount),
      counts_(kAgentCount, 0) {}

std::vector<SyncPlanner::Record> &SyncPlanner::records_for(const Access &a) {
  return a.space == MemSpace::kSbuf ? sbuf_ : a.space == MemSpace::kPsum ? psum_ : hbm_;
}
const std::vector<SyncPlanner::Record> &SyncPlanner::records_for(const Access &a) const {
  return a.space == MemSpace::kSbuf ? sbuf_ : a.space == MemSpace::kPsum ? psum_ : hbm_;
}

// How far `agent`'s next instruction is ordered after agent `of`: a DMA transfer starts after
// its issue, so it knows what its queue knew and what the issuing engine knows.
uint32_t SyncPlanner::known(Agent agent, isa::Engine issuer, Agent of) const {
  if (of == agent) return UINT32_MAX;  // in order within an agent
  uint32_t k = clocks_[agent][of];
  if (is_dma_agent(agent)) k = std::max(k, clocks_[engine_agent(issuer)][of]);
  return k;
}

const uint32_t *SyncPlanner::snapshot(Event e) const {
  return snapshots_[e.agent].data() + size_t{e.ordinal - 1} * kAgentCount;
}

double SyncPlanner::end_estimate(Event e) const {
  return e.ordinal ? ends_[e.agent][e.ordinal - 1] : 0.0;
}

std::vector<Event> SyncPlanner::plan(Agent agent, isa::Engine issuer,
                                     std::span<const Access> accesses) const {
  std::vector<uint32_t> need(kAgentCount, 0);
  for (const Access &a : accesses) {
    if (a.space == MemSpace::kNone) continue;
    for (const Record &r : records_for(a)) {
      if (!(a.write || r.access.write) || !a.overlaps(r.access)) continue;
      if (known(agent, issuer, r.event.agent) >= r.event.ordinal) continue;
      need[r.event.agent] = std::max(need[r.event.agent], r.event.ordinal);
    }
  }
  std::vector<Event> events;
  for (Agent b = 0; b < kAgentCount; ++b)
    if (need[b]) events.push_back({b, need[b]});
  // Drop every event another one already implies (waiting for that one orders after this one).
  std::vector<Event> kept;
  for (const Event &e : events) {
    bool implied = false;
    for (const Event &o : events)
      if (o.agent != e.agent && snapshot(o)[e.agent] >= e.ordinal) implied = true;
    if (!implied) kept.push_back(e);
  }
  return kept;
}

double SyncPlanner::ready_time(Agent agent, std::span<const Access> accesses) const {
  double t = 0;
  for (const Access &a : accesses) {
    if (a.space == MemSpace::kNone) continue;
    for (const Record &r : records_for(a))
      if ((a.write || r.access.write) && r.event.agent != agent && a.overlaps(r.access))
        t = std::max(t, end_estimate(r.event));
  }
  return t;
}

void SyncPlanner::waited(isa::Engine issuer, Event event) {
  auto &clock = clocks_[engine_agent(issuer)];
  const uint32_t *snap = snapshot(event);
  for (uint32_t b = 0; b < kAgentCount; ++b) clock[b] = std::max(clock[b], snap[b]);
}

Event SyncPlanner::record(Agent agent, isa::Engine issuer, std::span<const Access> accesses,
                          double end_estimate) {
  auto &clock = clocks_[agent];
  if (is_dma_agent(agent)) {
    const auto &issuer_clock = clocks_[engine_agent(issuer)];
    for (uint32_t b = 0; b < kAgentCount; ++b) clock[b] = std::max(clock[b], issuer_clock[b]);
  }
  const Event event{agent, ++counts_[agent]};
  clock[agent] = event.ordinal;
  snapshots_[agent].insert(snapshots_[agent].end(), clock.begin(), clock.end());
  ends_[agent].push_back(end_estimate);

  for (const Access &a : accesses) {
    if (a.space == MemSpace::kNone) continue;
    auto &records = records_for(a);
    // A write orders everything it covers before every later conflicting access (they all
    // wait for it); a later read by the same agent stands for its earlier reads.
    std::erase_if(records, [&](const Record &r) {
      if (!a.covers(r.access)) return false;
      return a.write || (!r.access.write && r.event.agent == agent);
    });
    records.push_back({a, event});
  }
  if (++recorded_since_prune_ >= 256) prune();
  return event;
}

// Every later access is ordered after what all engines already know of (a DMA transfer inherits
// its issuing engine's clock), so those records can no longer need a wait.
void SyncPlanner::prune() {
  recorded_since_prune_ = 0;
  std::vector<uint32_t> floor(kAgentCount, UINT32_MAX);
  for (uint32_t e = 0; e < isa::kEngineCount; ++e)
    for (uint32_t b = 0; b < kAgentCount; ++b)
      floor[b] = std::min(floor[b], b == e ? counts_[b] : clocks_[e][b]);
  for (auto *records : {&sbuf_, &psum_, &hbm_})
    std::erase_if(*records,
                  [&](const Record &r) { return r.event.ordinal <= floor[r.event.agent]; });
}

}  // namespace trn::kbuild::detail
