#include "exec/race_check.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "isa/validate.hpp"

namespace trn::sim::exec {

namespace {

using Run = std::pair<int64_t, int64_t>;  // bytes [first, second)

enum Space : uint8_t { kSbuf = 0, kPsum = 1, kHbm = 2 };

constexpr uint32_t kMaxShapeDims = isa::kMaxFreeDims + 1;  // HBM rows, then the free dims

}  // namespace

// One access of one instruction: which agent, when (its epoch), and exactly which bytes. SBUF
// and PSUM: the same byte set in each partition of [p0, p1). HBM: host addresses (p0 = 0,
// p1 = 1), so two arguments bound to the same memory meet. The byte set is runs of `run` bytes
// at base + sum(i_d * stride_d); with no dims left it is the single run [lo, hi).
struct RaceChecker::Access {
  uint8_t agent = 0, engine = 0, queue = 0;
  bool write = false, dma = false;
  uint8_t space = kSbuf;
  isa::Opcode opcode = isa::Opcode::kNop;
  uint16_t arg = 0;
  uint32_t index = 0, epoch = 0;
  uint32_t p0 = 0, p1 = 0;
  int64_t lo = 0, hi = 0;  // bounding bytes
  int64_t run = 0;
  uint32_t ndims = 0;
  std::array<uint32_t, kMaxShapeDims> counts{};
  std::array<int64_t, kMaxShapeDims> strides{};
  std::vector<Run> runs;  // merged and sorted, computed when first needed (non-contiguous only)

  bool contiguous() const { return ndims == 0; }

  // Normalises dims (count, byte stride) of `elem`-byte elements starting at `base`: drops
  // single counts, makes strides positive, and folds the innermost dims that leave no gap into
  // one run.
  void shape(int64_t base, int64_t elem, std::span<const std::pair<uint32_t, int64_t>> dims) {
    std::array<std::pair<int64_t, uint32_t>, kMaxShapeDims> d{};  // (stride, count)
    uint32_t n = 0;
    for (auto [count, stride] : dims) {
      if (count <= 1) continue;
      if (stride < 0) {
        base += stride * (count - 1);
        stride = -stride;
      }
      d[n++] = {stride, count};
    }
    for (uint32_t i = 1; i < n; ++i)  // by stride (insertion: at most 5)
      for (uint32_t j = i; j > 0 && d[j].first < d[j - 1].first; --j) std::swap(d[j], d[j - 1]);
    run = elem;
    uint32_t i = 0;
    for (; i < n && d[i].first <= run; ++i) run += d[i].first * (d[i].second - 1);
    lo = base;
    hi = base + run;
    ndims = 0;
    for (uint32_t j = n; j-- > i;) {  // outermost (largest stride) first
      counts[ndims] = d[j].second;
      strides[ndims] = d[j].first;
      hi += d[j].first * (d[j].second - 1);
      ++ndims;
    }
  }

  const std::vector<Run> &exact() {
    if (!runs.empty() || contiguous()) return runs;
    std::array<uint32_t, kMaxShapeDims> c{1, 1, 1, 1, 1};
    std::array<int64_t, kMaxShapeDims> s{};
    for (uint32_t d = 0; d < ndims; ++d) {  // right-aligned into 5 loop levels
      c[kMaxShapeDims - ndims + d] = counts[d];
      s[kMaxShapeDims - ndims + d] = strides[d];
    }
    std::vector<Run> all;
    bool sorted = true;
    for (uint32_t a = 0; a < c[0]; ++a)
      for (uint32_t b = 0; b < c[1]; ++b)
        for (uint32_t e = 0; e < c[2]; ++e)
          for (uint32_t f = 0; f < c[3]; ++f)
            for (uint32_t g = 0; g < c[4]; ++g) {
              const int64_t at = lo + a * s[0] + b * s[1] + e * s[2] + f * s[3] + g * s[4];
              if (!all.empty() && at < all.back().first) sorted = false;
              all.push_back({at, at + run});
            }
    if (!sorted) std::sort(all.begin(), all.end());
    for (const Run &r : all) {
      if (!runs.empty() && r.first <= runs.back().second)
        runs.back().second = std::max(runs.back().second, r.second);
      else
        runs.push_back(r);
    }
    return runs;
  }
};

namespace {

using Access = RaceChecker::Access;

// The hull of the bytes two accesses share (within a partition for SBUF/PSUM), if any.
std::optional<Run> shared_bytes(Access &a, Access &b) {
  const int64_t first = std::max(a.lo, b.lo), last = std::min(a.hi, b.hi);
  if (first >= last) return std::nullopt;
  if (a.contiguous() && b.contiguous()) return Run{first, last};
  const Run whole_a{a.lo, a.hi}, whole_b{b.lo, b.hi};
  std::span<const Run> ra = a.contiguous() ? std::span<const Run>(&whole_a, 1) : a.exact();
  std::span<const Run> rb = b.contiguous() ? std::span<const Run>(&whole_b, 1) : b.exact();
  size_t i = 0, j = 0;
  std::optional<Run> hull;
  while (i < ra.size() && j < rb.size()) {
    const int64_t lo = std::max(ra[i].first, rb[j].first),
                  hi = std::min(ra[i].second, rb[j].second);
    if (lo < hi) {
      if (!hull) hull = Run{lo, hi};
      hull->second = hi;
    }
    (ra[i].second < rb[j].second ? i : j)++;
  }
  return hull;
}

// Whether every byte of `inner` is a byte of `outer` (partitions aside).
bool covers(Access &outer, Access &inner) {
  if (inner.lo < outer.lo || inner.hi > outer.hi) return false;
  if (outer.contiguous()) return true;
  const std::vector<Run> &ro = outer.exact();
  const Run whole{inner.lo, inner.hi};
  std::span<const Run> ri = inner.contiguous() ? std::span<const Run>(&whole, 1) : inner.exact();
  for (const Run &r : ri) {
    // The merged run of outer that starts at or before r.first must reach r.second.
    auto it = std::upper_bound(ro.begin(), ro.end(), r.first,
                               [](int64_t v, const Run &o) { return v < o.first; });
    if (it == ro.begin() || std::prev(it)->second < r.second) return false;
  }
  return true;
}

}  // namespace

RaceChecker::RaceChecker(const isa::Program &program, std::span<const HbmBinding> args,
                         uint32_t semaphores)
    : program_(program), args_(args), sems_(semaphores) {
  live_.fill(true);
  plan(program);
}

// The suffix boxes of every stream and where each engine last waits on each semaphore, from the
// access patterns alone (bounding, so a pattern that will fault only widens them).
void RaceChecker::plan(const isa::Program &program) {
  for (uint32_t e = 0; e < isa::kEngineCount; ++e) {
    const auto &stream = program.streams[e];
    last_wait_[e].assign(sems_.size(), 0);
    ahead_[e].assign(stream.size() + 1, Boxes{});
    for (size_t i = stream.size(); i-- > 0;) {
      const isa::Instruction &inst = stream[i];
      Boxes boxes = ahead_[e][i + 1];
      if (inst.wait.cmp != isa::SemCmp::kNone && inst.wait.sem < sems_.size() &&
          last_wait_[e][inst.wait.sem] == 0)
        last_wait_[e][inst.wait.sem] = static_cast<uint32_t>(i + 1);
      for (const isa::AccessPattern *ap :
           {&inst.dst, &inst.dst2, &inst.src0, &inst.src1, &inst.src2}) {
        if (ap->space != isa::MemSpace::kSbuf && ap->space != isa::MemSpace::kPsum &&
            ap->space != isa::MemSpace::kHbm)
          continue;
        if (ap->space == isa::MemSpace::kHbm && ap->arg == isa::kConstantsArg) continue;
        const int64_t elem = isa::dtype_size(ap->dtype);
        int64_t lo = 0, hi = elem;
        auto widen = [&](int64_t stride, uint64_t count) {
          if (count == 0) return;
          const int64_t span = stride * elem * static_cast<int64_t>(count - 1);
          (span < 0 ? lo : hi) += span;
        };
        for (uint32_t d = 0; d < std::min(ap->num_dims, isa::kMaxFreeDims); ++d)
          widen(ap->dims[d].stride, ap->dims[d].count);
        Box b;
        if (ap->space == isa::MemSpace::kHbm) {
          widen(ap->partition_stride, ap->partition_count);
          b.p0 = 0;
          b.p1 = 1;
          if (ap->arg < args_.size() && args_[ap->arg].data != nullptr) {
            const auto base =
                static_cast<int64_t>(reinterpret_cast<uintptr_t>(args_[ap->arg].data) + ap->offset);
            b.lo = base + lo;
            b.hi = base + hi;
          } else {
            b.lo = INT64_MIN;  // faults when it runs; anything
            b.hi = INT64_MAX;
          }
        } else {
          b.p0 = ap->partition_start;
          b.p1 = ap->partition_start + ap->partition_count;
          b.lo = static_cast<int64_t>(ap->offset) + lo;
          b.hi = static_cast<int64_t>(ap->offset) + hi;
        }
        Box &into = boxes[ap->space == isa::MemSpace::kSbuf   ? kSbuf
                          : ap->space == isa::MemSpace::kPsum ? kPsum
                                                              : kHbm];
        into.p0 = std::min(into.p0, b.p0);
        into.p1 = std::max(into.p1, b.p1);
        into.lo = std::min(into.lo, b.lo);
        into.hi = std::max(into.hi, b.hi);
      }
      ahead_[e][i] = boxes;
    }
  }
}

RaceChecker::~RaceChecker() = default;

void RaceChecker::join(Clock &into, const Clock &from) {
  for (uint32_t i = 0; i < kRaceAgents; ++i) into[i] = std::max(into[i], from[i]);
}

uint32_t RaceChecker::begin(uint32_t agent) {
  return ++clocks_[agent][agent];
}

void RaceChecker::finish(uint32_t engine) {
  live_[engine] = false;
}

// Which updates a satisfied wait is ordered after. With adds only, the value never falls, so
// the wait needed exactly the updates up to the first one that brought the value to the
// condition: their prefix join, one binary search away. Later updates (other producers that
// happened to land before the waiter looked) are not needed and do not order the waiter:
// joining the whole history would hide races on the bytes those producers wrote. A set starts
// the history again from its setter.
void RaceChecker::wait(uint32_t engine, const isa::SemWait &w) {
  if (w.cmp == isa::SemCmp::kNone || w.sem >= sems_.size()) return;
  if (w.cmp == isa::SemCmp::kGe && w.value == 0) return;  // holds whatever happened
  History &h = sems_[w.sem];
  if (h.head == h.entries.size()) return;  // nothing the engines are not ordered after already
  Clock &c = clocks_[engine];
  if (!h.monotonic) return join(c, h.entries.back().prefix);
  if (h.base_free && w.value <= h.base) return;
  auto it = std::lower_bound(h.entries.begin() + static_cast<ptrdiff_t>(h.head), h.entries.end(),
                             w.value, [](const Entry &e, uint32_t v) { return e.value < v; });
  join(c, it == h.entries.end() ? h.entries.back().prefix : it->prefix);
}

uint32_t RaceChecker::release(uint32_t engine, const isa::Instruction &inst) {
  if (inst.signal.op == isa::SemOp::kNone) return kNoClock;
  const uint32_t agent =
      inst.opcode == isa::Opcode::kDmaCopy
          ? isa::kEngineCount + engine * kRaceDmaQueues + inst.queue % kRaceDmaQueues
          : engine;
  uint32_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
    pool_[id] = clocks_[agent];
  } else {
    id = static_cast<uint32_t>(pool_.size());
    pool_.push_back(clocks_[agent]);
  }
  return id;
}

void RaceChecker::update(const isa::SemUpdate &u, uint32_t clock) {
  if (u.sem >= sems_.size() || clock == kNoClock) return;
  History &h = sems_[u.sem];
  const Clock &c = pool_[clock];
  if (u.op == isa::SemOp::kSet) {
    record_count_ -= h.entries.size() - h.head;
    h.entries.clear();
    h.head = 0;
    h.base_free = false;
    h.monotonic = true;
    h.value = u.value;
    h.entries.push_back({u.value, c});
  } else {
    const uint32_t next = h.value + u.value;
    if (next < h.value) h.monotonic = false;
    h.value = next;
    Entry e{next, c};
    if (h.head < h.entries.size()) join(e.prefix, h.entries.back().prefix);
    h.entries.push_back(e);
  }
  free_.push_back(clock);
  ++record_count_;
}

void RaceChecker::barrier() {
  Clock all{};
  for (uint32_t e = 0; e < isa::kEngineCount; ++e) begin(e);
  for (const Clock &c : clocks_) join(all, c);
  for (uint32_t e = 0; e < isa::kEngineCount; ++e) {
    const uint32_t own = clocks_[e][e];
    clocks_[e] = all;
    clocks_[e][e] = own;
  }
}

std::optional<std::string> RaceChecker::execute(uint32_t engine, uint32_t index,
                                                const isa::Instruction &inst,
                                                const ExecContext &ctx) {
  uint32_t agent = engine;
  begin(engine);
  next_[engine] = index + 1;
  const bool dma = inst.opcode == isa::Opcode::kDmaCopy;
  if (dma) {
    // The transfer starts after the issue and after this queue's previous transfer from the
    // same engine.
    agent = isa::kEngineCount + engine * kRaceDmaQueues + inst.queue % kRaceDmaQueues;
    join(clocks_[agent], clocks_[engine]);
  }
  const uint32_t epoch = dma ? begin(agent) : clocks_[engine][engine];

  struct Operand {
    const isa::AccessPattern *ap;
    const char *name;
    bool write;
  };
  std::array<Operand, 5> ops{};
  uint32_t n = 0;
  for (auto [ap, name] :
       {std::pair{&inst.src0, "src0"}, {&inst.src1, "src1"}, {&inst.src2, "src2"}})
    ops[n++] = {ap, name, false};
  // nc_matmul without the start flag reads dst too: as a write it conflicts with everything the
  // read would.
  ops[n++] = {&inst.dst, "dst", true};
  ops[n++] = {&inst.dst2, "dst2", true};

  std::array<Access, 5> found;
  uint32_t count = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const isa::AccessPattern &ap = *ops[i].ap;
    if (ap.space != isa::MemSpace::kSbuf && ap.space != isa::MemSpace::kPsum &&
        ap.space != isa::MemSpace::kHbm)
      continue;
    if (ap.space == isa::MemSpace::kHbm && ap.arg == isa::kConstantsArg) continue;  // read-only
    Tile t;
    try {
      t = ctx.resolve(ap, ops[i].name);
    } catch (const ExecFault &) {
      continue;  // the op itself faults on it
    }
    if (t.partitions == 0 || t.free_elements == 0) continue;
    Access &a = found[count++];
    a.agent = static_cast<uint8_t>(agent);
    a.engine = static_cast<uint8_t>(engine);
    a.queue = inst.queue;
    a.write = ops[i].write;
    a.dma = dma;
    a.opcode = inst.opcode;
    a.index = index;
    a.epoch = epoch;
    a.arg = ap.arg;
    std::array<std::pair<uint32_t, int64_t>, kMaxShapeDims> dims{};
    uint32_t nd = 0;
    if (ap.space == isa::MemSpace::kHbm) {
      a.space = kHbm;
      a.p0 = 0;
      a.p1 = 1;
      dims[nd++] = {t.partitions, t.partition_pitch};
    } else {
      a.space = ap.space == isa::MemSpace::kSbuf ? kSbuf : kPsum;
      a.p0 = ap.partition_start;
      a.p1 = ap.partition_start + ap.partition_count;
    }
    for (uint32_t d = 0; d < t.num_dims; ++d) dims[nd++] = {t.counts[d], t.strides[d]};
    const int64_t base = a.space == kHbm ? static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.base))
                                         : static_cast<int64_t>(ap.offset);
    a.shape(base, t.elem_size, std::span(dims.data(), nd));
  }
  stats_.accesses += count;
  for (uint32_t i = 0; i < count; ++i)
    if (auto race = check(found[i])) return race;
  for (uint32_t i = 0; i < count; ++i) {
    records_[found[i].space].push_back(std::move(found[i]));
    ++record_count_;
  }
  stats_.peak_records = std::max(stats_.peak_records, record_count_);
  if (record_count_ > prune_at_) {
    prune();
    stats_.peak_kept = std::max(stats_.peak_kept, record_count_);
    prune_at_ = std::max<uint64_t>(256, 2 * record_count_);
  }
  return std::nullopt;
}

// Checks `a` against the records of its memory, and drops the records it makes redundant: a
// write of all of a record's bytes (the record is ordered before it, or this is a race), or a
// read by the same agent of all of a read record's bytes. A later access that would race with
// the dropped record races with `a` too.
std::optional<std::string> RaceChecker::check(Access &a) {
  std::vector<Access> &list = records_[a.space];
  const Clock &now = clocks_[a.agent];
  size_t out = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    Access &r = list[i];
    bool drop = false;
    if (r.p0 < a.p1 && a.p0 < r.p1 && r.lo < a.hi && a.lo < r.hi) {
      const bool same = r.agent == a.agent;
      if (!same && (r.write || a.write) && now[r.agent] < r.epoch) {
        if (auto bytes = shared_bytes(a, r)) {
          const uint32_t p0 = std::max(a.p0, r.p0), p1 = std::min(a.p1, r.p1);
          const bool same_arg = a.space != kHbm || a.arg == r.arg;
          std::string other = same_arg ? "it" : memory_text(r, bytes->first, bytes->second, p0, p1);
          return fmt::format(
              "unsynchronized access: {} {} {} while {} {} {}; no semaphore orders them",
              describe(a), a.write ? "writes" : "reads",
              memory_text(a, bytes->first, bytes->second, p0, p1), describe(r),
              r.write ? "writes" : "reads", other);
        }
      }
      if ((a.write || (same && !r.write)) && a.p0 <= r.p0 && r.p1 <= a.p1 && covers(a, r))
        drop = true;
    }
    if (drop) {
      ++stats_.pruned_covered;
      --record_count_;
      continue;
    }
    if (out != i) list[out] = std::move(r);
    ++out;
  }
  list.resize(out);
  return std::nullopt;
}

// Drops what every engine with work left is already ordered after: no future access can race
// with it, and no future wait needs it.
void RaceChecker::prune() {
  // A record stays while some engine with work left is not ordered after it and may still
  // touch its bytes.
  for (uint32_t space = 0; space < records_.size(); ++space) {
    auto &list = records_[space];
    const size_t before = list.size();
    std::erase_if(list, [&](const Access &r) {
      for (uint32_t e = 0; e < isa::kEngineCount; ++e) {
        if (!live_[e] || clocks_[e][r.agent] >= r.epoch) continue;
        const Box &b = ahead_[e][std::min<size_t>(next_[e], ahead_[e].size() - 1)][space];
        if (b.p0 < r.p1 && r.p0 < b.p1 && b.lo < r.hi && r.lo < b.hi) return false;
      }
      return true;
    });
    stats_.pruned_dominated += before - list.size();
    record_count_ -= before - list.size();
  }
  for (uint32_t s = 0; s < sems_.size(); ++s) {
    // Only engines that may still wait on the semaphore read its history.
    Clock floor;
    floor.fill(UINT32_MAX);
    for (uint32_t e = 0; e < isa::kEngineCount; ++e)
      if (live_[e] && next_[e] < last_wait_[e][s])
        for (uint32_t i = 0; i < kRaceAgents; ++i) floor[i] = std::min(floor[i], clocks_[e][i]);
    History &h = sems_[s];
    const size_t before = h.head;
    while (h.head < h.entries.size()) {
      const Clock &p = h.entries[h.head].prefix;
      bool below = true;
      for (uint32_t i = 0; i < kRaceAgents && below; ++i) below = p[i] <= floor[i];
      if (!below) break;
      h.base_free = true;
      h.base = h.entries[h.head].value;
      ++h.head;
    }
    record_count_ -= h.head - before;
    if (h.head > 16 && h.head * 2 > h.entries.size()) {
      h.entries.erase(h.entries.begin(), h.entries.begin() + static_cast<ptrdiff_t>(h.head));
      h.head = 0;
    }
  }
}

std::string RaceChecker::describe(const Access &a) const {
  const auto engine = static_cast<isa::Engine>(a.engine);
  std::string text = isa::instruction_label(engine, a.index, a.opcode);
  if (a.dma) text += fmt::format(" on queue {}", a.queue);
  const std::string where = isa::source_location_text(program_, engine, a.index);
  if (!where.empty()) text += fmt::format(" ({})", where);
  return text;
}

std::string RaceChecker::memory_text(const Access &a, int64_t lo, int64_t hi, uint32_t p0,
                                     uint32_t p1) const {
  if (a.space != kHbm)
    return fmt::format("{} p{}-{} [{},{})", a.space == kSbuf ? "SBUF" : "PSUM", p0, p1 - 1, lo, hi);
  const int64_t base = a.arg < args_.size()
                           ? static_cast<int64_t>(reinterpret_cast<uintptr_t>(args_[a.arg].data))
                           : 0;
  const std::string name = a.arg < program_.args.size() ? program_.args[a.arg].name : "?";
  return fmt::format("HBM argument '{}' [{},{})", name, lo - base, hi - base);
}

}  // namespace trn::sim::exec
