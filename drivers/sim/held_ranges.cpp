#include "sim/held_ranges.hpp"

#include <iterator>
#include <mutex>
#include <vector>

namespace trn::sim {

void HeldRanges::add(uint64_t offset, uint64_t bytes) {
  if (bytes == 0) return;
  std::unique_lock lock(mu_);
  remove_locked(offset, bytes);
  ranges_[offset] = bytes;
}

void HeldRanges::remove(uint64_t offset, uint64_t bytes) {
  std::unique_lock lock(mu_);
  remove_locked(offset, bytes);
}

void HeldRanges::note_export(uint32_t record, uint64_t id, uint64_t offset, uint64_t bytes) {
  if (bytes == 0) return;
  std::unique_lock lock(mu_);
  // The export is its own range from now on: unexport lets go of it alone.
  remove_locked(offset, bytes);
  ranges_[offset] = bytes;
  exports_[{record, id}] = {offset, bytes};
}

std::pair<uint64_t, uint64_t> HeldRanges::drop_export(uint32_t record, uint64_t id) {
  std::unique_lock lock(mu_);
  auto it = exports_.find({record, id});
  if (it == exports_.end()) return {0, 0};
  const std::pair<uint64_t, uint64_t> range = it->second;
  remove_locked(range.first, range.second);
  exports_.erase(it);
  return range;
}

namespace {

// A thread's recently found ranges, of any HeldRanges (told apart by id, never reused).
struct RecentRange {
  uint64_t owner = 0, version = 0, first = 0, size = 0;
};
struct RecentRanges {
  static constexpr unsigned kCount = 4;
  RecentRange ranges[kCount];
  unsigned next = 0;
};
thread_local RecentRanges recent_ranges;

bool inside(uint64_t offset, uint64_t bytes, uint64_t first, uint64_t size) {
  if (offset < first) return false;
  const uint64_t into = offset - first;
  return into < size && bytes <= size - into;
}

}  // namespace

bool HeldRanges::holds(uint64_t offset, uint64_t bytes) const {
  // A range remembered since no range changed still holds (a release racing this lookup is one
  // that came after it).
  const uint64_t version = version_.load(std::memory_order_acquire);
  RecentRanges &recent = recent_ranges;
  for (const RecentRange &r : recent.ranges)
    if (r.owner == id_ && r.version == version && inside(offset, bytes, r.first, r.size))
      return true;
  uint64_t first = 0, size = 0, seen = 0;
  {
    std::shared_lock lock(mu_);
    if (!holds_locked(offset, bytes, &first, &size)) return false;
    seen = version_.load(std::memory_order_relaxed);  // stable under the lock
  }
  recent.ranges[recent.next++ % RecentRanges::kCount] = {id_, seen, first, size};
  return true;
}

bool HeldRanges::holds_locked(uint64_t offset, uint64_t bytes, uint64_t *first,
                              uint64_t *size) const {
  auto it = ranges_.upper_bound(offset);
  if (it == ranges_.begin()) return false;
  --it;
  if (!inside(offset, bytes, it->first, it->second)) return false;
  *first = it->first;
  *size = it->second;
  return true;
}

void HeldRanges::remove_locked(uint64_t offset, uint64_t bytes) {
  if (bytes == 0) return;
  version_.fetch_add(1, std::memory_order_release);
  const uint64_t end = bytes > UINT64_MAX - offset ? UINT64_MAX : offset + bytes;
  auto it = ranges_.upper_bound(offset);
  if (it != ranges_.begin() && std::prev(it)->first + std::prev(it)->second > offset) --it;
  std::vector<std::pair<uint64_t, uint64_t>> kept;  // the parts outside [offset, end)
  while (it != ranges_.end() && it->first < end) {
    const uint64_t first = it->first, last = it->first + it->second;
    if (first < offset) kept.emplace_back(first, offset - first);
    if (last > end) kept.emplace_back(end, last - end);
    it = ranges_.erase(it);
  }
  for (const auto &[first, size] : kept) ranges_[first] = size;
}

}  // namespace trn::sim
