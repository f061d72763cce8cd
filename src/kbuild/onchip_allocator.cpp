#include "kbuild/onchip_allocator.hpp"

#include <algorithm>

namespace trn::kbuild::detail {

OnChipAllocator::OnChipAllocator(uint64_t capacity, uint64_t alignment, uint64_t bank_bytes)
    : capacity_(capacity), alignment_(alignment), bank_(bank_bytes) {
  if (capacity_) free_.emplace(0, capacity_);
}

uint64_t OnChipAllocator::rounded(uint64_t bytes) const {
  const uint64_t unit = bank_ && bytes > bank_ ? bank_ : alignment_;
  return (bytes + unit - 1) / unit * unit;
}

// Where `bytes` fits in the free block, at or after `from`, honouring alignment and banks.
std::optional<uint64_t> OnChipAllocator::fit(uint64_t block_start, uint64_t block_size,
                                             uint64_t bytes, uint64_t from) const {
  const uint64_t end = block_start + block_size;
  uint64_t at = std::max(block_start, from);
  const uint64_t unit = bank_ && bytes > bank_ ? bank_ : alignment_;
  at = (at + unit - 1) / unit * unit;
  if (bank_ && bytes <= bank_ && at / bank_ != (at + bytes - 1) / bank_)
    at = (at / bank_ + 1) * bank_;  // a bank-sized buffer must not straddle two banks
  if (at + bytes > end || at < block_start) return std::nullopt;
  return at;
}

std::optional<uint64_t> OnChipAllocator::allocate(uint64_t bytes) {
  if (bytes == 0) bytes = 1;
  bytes = rounded(bytes);
  std::optional<uint64_t> at;
  // Next fit: the first place at or after the cursor, then from the start.
  for (uint64_t from : {cursor_, uint64_t{0}}) {
    for (const auto &[start, size] : free_) {
      if (start + size <= from) continue;
      if ((at = fit(start, size, bytes, from))) break;
    }
    if (at) break;
  }
  if (!at) return std::nullopt;
  auto it = std::prev(free_.upper_bound(*at));
  const uint64_t start = it->first, size = it->second;
  free_.erase(it);
  if (*at > start) free_.emplace(start, *at - start);
  if (*at + bytes < start + size) free_.emplace(*at + bytes, start + size - *at - bytes);
  cursor_ = *at + bytes == capacity_ ? 0 : *at + bytes;
  return at;
}

void OnChipAllocator::release(uint64_t offset, uint64_t bytes) {
  auto [it, inserted] = free_.emplace(offset, bytes);
  if (!inserted) return;  // cannot happen: buffers are released once
  if (auto next = std::next(it); next != free_.end() && offset + bytes == next->first) {
    it->second += next->second;
    free_.erase(next);
  }
  if (it != free_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_.erase(it);
    }
  }
}

uint64_t OnChipAllocator::free_bytes() const {
  uint64_t n = 0;
  for (const auto &[start, size] : free_) n += size;
  return n;
}

uint64_t OnChipAllocator::largest_free_block() const {
  uint64_t n = 0;
  for (const auto &[start, size] : free_) n = std::max(n, size);
  return n;
}

Placement::Placement(uint64_t sbuf_bytes, uint64_t psum_bytes, uint64_t psum_bank_bytes)
    : sbuf(sbuf_bytes, 64, 0), psum(psum_bytes, 64, psum_bank_bytes) {}

}  // namespace trn::kbuild::detail
