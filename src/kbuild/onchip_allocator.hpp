// Placement of tiles in one on-chip memory (SBUF or PSUM), along the bytes of a partition: every
// buffer spans all partitions, so placement is one-dimensional. Next-fit: a new buffer goes after
// the last one placed, wrapping around, so a buffer freed and taken again in a loop lands
// somewhere else while there is room — the loads of iteration i + 1 then need not wait for the
// readers of iteration i (multi-buffering by placement). PSUM buffers of up to a bank never cross
// a bank boundary; larger ones start on one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "kbuild/tile.hpp"

namespace trn::kbuild::detail {

class OnChipAllocator {
 public:
  OnChipAllocator(uint64_t capacity, uint64_t alignment, uint64_t bank_bytes);

  // Byte offset (per partition) of a new buffer of `bytes`, or nullopt when none fits.
  std::optional<uint64_t> allocate(uint64_t bytes);
  void release(uint64_t offset, uint64_t bytes);

  uint64_t capacity() const { return capacity_; }
  uint64_t free_bytes() const;
  uint64_t largest_free_block() const;
  // Bytes rounded as allocate() places them.
  uint64_t rounded(uint64_t bytes) const;

 private:
  std::optional<uint64_t> fit(uint64_t block_start, uint64_t block_size, uint64_t bytes,
                              uint64_t from) const;

  uint64_t capacity_, alignment_, bank_;
  std::map<uint64_t, uint64_t> free_;  // offset -> size, coalesced
  uint64_t cursor_ = 0;
};

// Both memories of a core; shared by the builder and every buffer, so that a tile outliving its
// builder releases into something that still exists.
struct Placement {
  Placement(uint64_t sbuf_bytes, uint64_t psum_bytes, uint64_t psum_bank_bytes);
  OnChipAllocator sbuf, psum;
  OnChipAllocator &of(Memory m) { return m == Memory::kSbuf ? sbuf : psum; }
};

struct Buffer {
  Buffer(std::shared_ptr<Placement> placement, Memory in, uint64_t at, uint64_t size,
         std::string label)
      : owner(std::move(placement)), memory(in), offset(at), bytes(size), name(std::move(label)) {}
  ~Buffer() { owner->of(memory).release(offset, bytes); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;

  std::shared_ptr<Placement> owner;
  Memory memory;
  uint64_t offset, bytes;  // per partition, as placed
  std::string name;
};

}  // namespace trn::kbuild::detail
