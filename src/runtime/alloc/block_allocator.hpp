// Best-fit sub-allocation with coalescing over address ranges ("segments") the caller provides:
// the process-side caching allocator over device chunks, in the manner of PyTorch's caching
// allocator. Block headers live outside the managed memory (device memory is never touched), in
// Boost.Intrusive containers, so allocate and free make no system call and no heap allocation in
// steady state. Not thread-safe: the pool that owns it serialises calls.
#pragma once

#include <boost/intrusive/list.hpp>
#include <boost/intrusive/set.hpp>
#include <cstdint>
#include <deque>
#include <vector>

namespace trn::rt {

namespace bi = boost::intrusive;

struct Segment;

struct Block : bi::set_base_hook<bi::link_mode<bi::normal_link>>,
               bi::list_base_hook<bi::link_mode<bi::normal_link>> {
  uint64_t address = 0;
  uint64_t size = 0;
  Segment *segment = nullptr;
  bool free = false;
};

// Free blocks ordered by (size, address): lower_bound finds the best fit.
struct BlockOrder {
  bool operator()(const Block &a, const Block &b) const {
    return a.size != b.size ? a.size < b.size : a.address < b.address;
  }
};
using FreeSet = bi::multiset<Block, bi::compare<BlockOrder>>;
using BlockList = bi::list<Block>;

struct Segment {
  uint64_t address = 0;
  uint64_t size = 0;
  bool small = false;      // serves requests of at most kSmallRequest
  void *host = nullptr;    // host view of `address`, if the memory is mappable
  void *cookie = nullptr;  // the owner's bookkeeping (commit state)
  BlockList blocks;        // every block of the segment, in address order
};

class BlockAllocator {
 public:
  static constexpr uint64_t kMinBlock = 512;                  // every size rounds to this
  static constexpr uint64_t kSmallRequest = 1ull << 20;       // small requests ...
  static constexpr uint64_t kSmallSegment = 2ull << 20;       // ... share 2 MiB segments
  static constexpr uint64_t kMediumRequest = 10ull << 20;     // up to 10 MiB ...
  static constexpr uint64_t kMediumSegment = 20ull << 20;     // ... share 20 MiB segments
  static constexpr uint64_t kLargeRounding = 2ull << 20;      // larger ones round to 2 MiB
  static constexpr uint64_t kMaxLargeRemainder = 1ull << 20;  // large blocks split above this

  BlockAllocator() = default;
  ~BlockAllocator();
  BlockAllocator(const BlockAllocator &) = delete;
  BlockAllocator &operator=(const BlockAllocator &) = delete;

  static uint64_t round_size(uint64_t size);
  // Whether a request is served from small (2 MiB, finely split) segments.
  static bool is_small(uint64_t size, uint64_t alignment);
  // The segment size to ask for when nothing cached fits a request.
  static uint64_t segment_size_for(uint64_t size, uint64_t alignment);
  // The smallest segment that can serve the request (when the preferred one does not fit).
  static uint64_t minimum_segment_size(uint64_t size, uint64_t alignment);

  // A free block of at least `size` bytes (rounded) at an address aligned to `alignment` (a
  // power of two >= kMinBlock), or nullptr when no cached segment fits.
  Block *allocate(uint64_t size, uint64_t alignment);

  void free(Block *block);
  // Adds a segment (its memory becomes one free block). Ownership stays with the caller until
  // release_free_segments() hands it back.
  void add_segment(Segment *segment);
  // Removes every segment that is entirely free and returns them; with `smaller_than`, only
  // large segments below that size (ones that cannot serve the request at hand).
  std::vector<Segment *> release_free_segments(uint64_t smaller_than = UINT64_MAX);
  // Forgets every segment and block (the caller returns the segments).
  void clear();
  // Every segment, for teardown.
  const std::vector<Segment *> &segments() const { return segments_; }

  uint64_t largest_free() const;

 private:
  Block *new_block();
  void recycle(Block *block);
  FreeSet &free_set(const Segment &segment) { return segment.small ? small_free_ : large_free_; }
  Block *split(Block *block, uint64_t offset, uint64_t size);

  FreeSet small_free_;
  FreeSet large_free_;
  std::vector<Segment *> segments_;
  std::deque<Block> storage_;  // stable addresses; recycled through spare_
  std::vector<Block *> spare_;
};

}  // namespace trn::rt
