#include "runtime/alloc/block_allocator.hpp"

#include <algorithm>

namespace trn::rt {

namespace {
uint64_t round_up(uint64_t value, uint64_t to) {
  return (value + to - 1) / to * to;
}
}  // namespace

BlockAllocator::~BlockAllocator() {
  clear();
}

void BlockAllocator::clear() {
  small_free_.clear();
  large_free_.clear();
  for (Segment *segment : segments_) segment->blocks.clear();
  segments_.clear();
  spare_.clear();
  storage_.clear();
}

uint64_t BlockAllocator::round_size(uint64_t size) {
  return size == 0 ? kMinBlock : round_up(size, kMinBlock);
}

namespace {
uint64_t padded_size(uint64_t size, uint64_t alignment) {
  return BlockAllocator::round_size(size) +
         (alignment > BlockAllocator::kMinBlock ? alignment - BlockAllocator::kMinBlock : 0);
}
}  // namespace

bool BlockAllocator::is_small(uint64_t size, uint64_t alignment) {
  return padded_size(size, alignment) <= kSmallRequest;
}

uint64_t BlockAllocator::minimum_segment_size(uint64_t size, uint64_t alignment) {
  return round_up(padded_size(size, alignment), kLargeRounding);
}

uint64_t BlockAllocator::segment_size_for(uint64_t size, uint64_t alignment) {
  const uint64_t padded = padded_size(size, alignment);
  if (padded <= kSmallRequest) return kSmallSegment;
  if (padded <= kMediumRequest) return kMediumSegment;
  return round_up(padded, kLargeRounding);
}

Block *BlockAllocator::new_block() {
  if (!spare_.empty()) {
    Block *block = spare_.back();
    spare_.pop_back();
    return block;
  }
  return &storage_.emplace_back();
}

void BlockAllocator::recycle(Block *block) {
  *block = Block{};
  spare_.push_back(block);
}

void BlockAllocator::add_segment(Segment *segment) {
  segments_.push_back(segment);
  Block *block = new_block();
  block->address = segment->address;
  block->size = segment->size;
  block->segment = segment;
  block->free = true;
  segment->blocks.push_back(*block);
  free_set(*segment).insert(*block);
}

// Carves [offset, offset + size) out of the free block `block` (already out of its free set);
// what is left before and after goes back to the free set as separate blocks.
Block *BlockAllocator::split(Block *block, uint64_t offset, uint64_t size) {
  Segment &segment = *block->segment;
  FreeSet &set = free_set(segment);
  if (offset > 0) {
    Block *front = new_block();
    front->address = block->address;
    front->size = offset;
    front->segment = &segment;
    front->free = true;
    segment.blocks.insert(BlockList::s_iterator_to(*block), *front);
    set.insert(*front);
    block->address += offset;
    block->size -= offset;
  }
  const uint64_t rest = block->size - size;
  const bool keep_rest = segment.small ? rest >= kMinBlock : rest > kMaxLargeRemainder;
  if (keep_rest) {
    Block *back = new_block();
    back->address = block->address + size;
    back->size = rest;
    back->segment = &segment;
    back->free = true;
    segment.blocks.insert(std::next(BlockList::s_iterator_to(*block)), *back);
    set.insert(*back);
    block->size = size;
  }
  block->free = false;
  return block;
}

Block *BlockAllocator::allocate(uint64_t size, uint64_t alignment) {
  FreeSet &set = is_small(size, alignment) ? small_free_ : large_free_;
  size = round_size(size);
  Block probe;
  probe.size = size;
  probe.address = 0;
  for (auto it = set.lower_bound(probe); it != set.end(); ++it) {
    const uint64_t aligned = round_up(it->address, alignment);
    const uint64_t offset = aligned - it->address;
    if (offset + size > it->size) continue;
    Block *block = &*it;
    set.erase(it);
    return split(block, offset, size);
  }
  return nullptr;
}

void BlockAllocator::free(Block *block) {
  Segment &segment = *block->segment;
  FreeSet &set = free_set(segment);
  block->free = true;
  auto it = BlockList::s_iterator_to(*block);
  if (it != segment.blocks.begin()) {
    Block &previous = *std::prev(it);
    if (previous.free) {
      set.erase(FreeSet::s_iterator_to(previous));
      block->address = previous.address;
      block->size += previous.size;
      segment.blocks.erase(BlockList::s_iterator_to(previous));
      recycle(&previous);
    }
  }
  auto next = std::next(BlockList::s_iterator_to(*block));
  if (next != segment.blocks.end() && next->free) {
    Block &following = *next;
    set.erase(FreeSet::s_iterator_to(following));
    block->size += following.size;
    segment.blocks.erase(next);
    recycle(&following);
  }
  set.insert(*block);
}

std::vector<Segment *> BlockAllocator::release_free_segments(uint64_t smaller_than) {
  std::vector<Segment *> released;
  const bool all = smaller_than == UINT64_MAX;
  auto keep = std::remove_if(segments_.begin(), segments_.end(), [&](Segment *segment) {
    if (segment->blocks.size() != 1 || !segment->blocks.front().free) return false;
    if (!all && (segment->small || segment->size >= smaller_than)) return false;
    Block &only = segment->blocks.front();
    free_set(*segment).erase(FreeSet::s_iterator_to(only));
    segment->blocks.clear();
    recycle(&only);
    released.push_back(segment);
    return true;
  });
  segments_.erase(keep, segments_.end());
  return released;
}

uint64_t BlockAllocator::largest_free() const {
  uint64_t largest = 0;
  if (!small_free_.empty()) largest = std::max(largest, small_free_.rbegin()->size);
  if (!large_free_.empty()) largest = std::max(largest, large_free_.rbegin()->size);
  return largest;
}

}  // namespace trn::rt
