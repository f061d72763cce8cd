#include <catch2/catch.hpp>
#include <map>
#include <random>

#include "runtime/alloc/block_allocator.hpp"

using trn::rt::Block;
using trn::rt::BlockAllocator;
using trn::rt::Segment;

namespace {

Segment make_segment(uint64_t address, uint64_t size, bool small) {
  Segment segment;
  segment.address = address;
  segment.size = size;
  segment.small = small;
  return segment;
}

}  // namespace

TEST_CASE("sizes round to 512 bytes and pick their segment class") {
  CHECK(BlockAllocator::round_size(0) == 512);
  CHECK(BlockAllocator::round_size(1) == 512);
  CHECK(BlockAllocator::round_size(513) == 1024);
  CHECK(BlockAllocator::is_small(1 << 20, 512));
  CHECK_FALSE(BlockAllocator::is_small((1 << 20) + 1, 512));
  CHECK_FALSE(BlockAllocator::is_small(1 << 20, 1 << 20));  // alignment padding counts
  CHECK(BlockAllocator::segment_size_for(4096, 512) == 2ull << 20);
  CHECK(BlockAllocator::segment_size_for(5ull << 20, 512) == 20ull << 20);
  CHECK(BlockAllocator::segment_size_for(33ull << 20, 512) == 34ull << 20);
}

TEST_CASE("best fit splits, frees coalesce, and a whole free segment can be released") {
  BlockAllocator blocks;
  Segment segment = make_segment(0x100000, 2 << 20, true);
  blocks.add_segment(&segment);
  Block *a = blocks.allocate(1000, 512);
  Block *b = blocks.allocate(4096, 512);
  Block *c = blocks.allocate(512, 512);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(c);
  CHECK(a->address == 0x100000);
  CHECK(a->size == 1024);
  CHECK(b->address == 0x100000 + 1024);
  CHECK(c->address == 0x100000 + 1024 + 4096);
  CHECK(blocks.release_free_segments().empty());  // still in use
  blocks.free(b);
  // The hole left by b is the best fit for a request of its size.
  Block *d = blocks.allocate(4000, 512);
  CHECK(d->address == 0x100000 + 1024);
  blocks.free(a);
  blocks.free(d);
  blocks.free(c);
  CHECK(segment.blocks.size() == 1);  // everything coalesced
  CHECK(blocks.largest_free() == 2u << 20);
  auto released = blocks.release_free_segments();
  REQUIRE(released.size() == 1);
  CHECK(released[0] == &segment);
  CHECK(blocks.allocate(512, 512) == nullptr);
}

TEST_CASE("aligned allocations start on their alignment") {
  BlockAllocator blocks;
  Segment segment = make_segment(0x200000, 2 << 20, true);
  blocks.add_segment(&segment);
  REQUIRE(blocks.allocate(512, 512));  // misalign what is left
  for (uint64_t alignment : {4096ull, 65536ull, 262144ull}) {
    Block *block = blocks.allocate(1000, alignment);
    REQUIRE(block);
    CHECK(block->address % alignment == 0);
  }
}

TEST_CASE("small and large requests do not share segments") {
  BlockAllocator blocks;
  Segment small = make_segment(0x0, 2 << 20, true);
  Segment large = make_segment(0x10000000, 20 << 20, false);
  blocks.add_segment(&small);
  blocks.add_segment(&large);
  Block *s = blocks.allocate(4096, 512);
  Block *l = blocks.allocate(4 << 20, 512);
  REQUIRE(s);
  REQUIRE(l);
  CHECK(s->segment == &small);
  CHECK(l->segment == &large);
  CHECK(blocks.allocate(3 << 20, 512) != nullptr);  // large segment keeps a >1 MiB remainder
  // Only large segments smaller than the request are released on demand.
  blocks.free(s);
  CHECK(blocks.release_free_segments(64ull << 20).empty());
}

TEST_CASE("random allocate/free keeps blocks disjoint and inside their segments") {
  BlockAllocator blocks;
  std::vector<Segment> segments;
  segments.reserve(64);
  std::mt19937_64 rng(1);
  std::map<uint64_t, Block *> live;  // address -> block
  for (int step = 0; step < 20000; ++step) {
    if (!live.empty() && rng() % 2) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      blocks.free(it->second);
      live.erase(it);
      continue;
    }
    const uint64_t size = 512 + rng() % (64 << 10);
    const uint64_t alignment = uint64_t{512} << (rng() % 4);
    Block *block = blocks.allocate(size, alignment);
    if (!block) {
      REQUIRE(segments.size() < 64);
      segments.push_back(make_segment(segments.size() * (4ull << 20), 2 << 20, true));
      blocks.add_segment(&segments.back());
      block = blocks.allocate(size, alignment);
    }
    REQUIRE(block);
    REQUIRE(block->address % alignment == 0);
    REQUIRE(block->size >= size);
    REQUIRE(block->address >= block->segment->address);
    REQUIRE(block->address + block->size <= block->segment->address + block->segment->size);
    auto next = live.lower_bound(block->address);
    if (next != live.end()) REQUIRE(block->address + block->size <= next->first);
    if (next != live.begin()) {
      Block *previous = std::prev(next)->second;
      REQUIRE(previous->address + previous->size <= block->address);
    }
    live[block->address] = block;
  }
  for (auto &[address, block] : live) blocks.free(block);
  for (auto &segment : segments) CHECK(segment.blocks.size() == 1);
  CHECK(blocks.release_free_segments().size() == segments.size());
}
