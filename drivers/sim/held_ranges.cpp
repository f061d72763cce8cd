#include "sim/held_ranges.hpp"

#include <iterator>
#include <mutex>
#include <vector>

namespace trn::sim {

void HeldRanges::add(uint64_t offset, uint64_t bytes) {
  if (bytes == 0) return;
  std::unique_lock lock(mu_);
  changing();
  remove_locked(offset, bytes);
  ranges_[offset] = bytes;
}

void HeldRanges::remove(uint64_t offset, uint64_t bytes) {
  std::unique_lock lock(mu_);
  changing();
  remove_locked(offset, bytes);
}

void HeldRanges::note_export(uint32_t record, uint64_t id, uint64_t offset, uint64_t bytes) {
  if (bytes == 0) return;
  std::unique_lock lock(mu_);
  changing();
  // The export is its own range from now on: unexport lets go of it alone.
  remove_locked(offset, bytes);
  ranges_[offset] = bytes;
  exports_[{record, id}] = {offset, bytes};
}

std::pair<uint64_t, uint64_t> HeldRanges::drop_export(uint32_t record, uint64_t id) {
  std::unique_lock lock(mu_);
  auto it = exports_.find({record, id});
  if (it == exports_.end()) return {0, 0};
  changing();
  const std::pair<uint64_t, uint64_t> range = it->second;
  remove_locked(range.first, range.second);
  exports_.erase(it);
  return range;
}

namespace {

bool inside(uint64_t offset, uint64_t bytes, uint64_t range_offset, uint64_t range_bytes) {
  const uint64_t into = offset - range_offset;
  return offset >= range_offset && into < range_bytes && bytes <= range_bytes - into;
}

}  // namespace

bool HeldRanges::holds(uint64_t offset, uint64_t bytes, HeldRangesMemo *memo) const {
  // Answered as of this read: a change that starts later is no different from one that started
  // after a locked lookup returned.
  const uint64_t version = version_.load(std::memory_order_acquire);
  if (memo)
    for (const HeldRangesMemo::Entry &e : memo->entries)
      if (e.ranges == this && e.version == version && inside(offset, bytes, e.offset, e.bytes))
        return true;
  std::shared_lock lock(mu_);
  auto it = ranges_.upper_bound(offset);
  if (it == ranges_.begin()) return false;
  --it;
  if (!inside(offset, bytes, it->first, it->second)) return false;
  if (memo)
    memo->entries[memo->next++ % HeldRangesMemo::kEntries] = {
        this, version_.load(std::memory_order_relaxed), it->first, it->second};
  return true;
}

void HeldRanges::remove_locked(uint64_t offset, uint64_t bytes) {
  if (bytes == 0) return;
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
