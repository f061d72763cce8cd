// The on-chip memories of one simulated NeuronCore: SBUF (partitions x bytes per partition) and
// PSUM (partitions x 16 KiB in 8 banks), each one contiguous array, partition-major.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

namespace trn::sim::exec {

class CoreMemory {
 public:
  CoreMemory(uint32_t partitions, uint32_t sbuf_bytes_per_partition,
             uint32_t psum_bytes_per_partition);

  uint32_t partitions() const { return partitions_; }
  // Bytes a partition holds (what kernels may address).
  uint32_t sbuf_bytes() const { return sbuf_bytes_; }
  uint32_t psum_bytes() const { return psum_bytes_; }
  // Bytes from one partition to the next in host memory: the size and a pad. Partition sizes
  // are multiples of large powers of two, so unpadded, the same offset of every partition would
  // fall in the same few sets of the host's caches, and a tile (a row in each of 128
  // partitions) would evict itself before the next instruction read it.
  uint32_t sbuf_pitch() const { return sbuf_bytes_ + kPartitionPad; }
  uint32_t psum_pitch() const { return psum_bytes_ + kPartitionPad; }
  std::byte *sbuf(uint32_t partition, uint64_t offset = 0) {
    return sbuf_.get() + size_t{partition} * sbuf_pitch() + offset;
  }
  std::byte *psum(uint32_t partition, uint64_t offset = 0) {
    return psum_.get() + size_t{partition} * psum_pitch() + offset;
  }
  // Direct writes through sbuf()/psum() (tests) must be noted like a kernel's writes.
  // A kernel may write bytes [0, end) of every SBUF / PSUM partition (clear() zeroes them).
  void note_sbuf_use(uint64_t end) { sbuf_dirty_ = std::max<uint64_t>(sbuf_dirty_, end); }
  void note_psum_use(uint64_t end) { psum_dirty_ = std::max<uint64_t>(psum_dirty_, end); }
  // Zero what earlier kernels may have written (a kernel starts with undefined on-chip memory on
  // hardware; the simulator makes it zero so runs are reproducible). Costs what was used, not
  // the whole 24-32 MiB.
  void clear();

 private:
  // 33 cache lines: an odd number of lines, so that partition p's rows start at p * 33 lines
  // (mod a cache way) and consecutive partitions' rows spread over every set.
  static constexpr uint32_t kPartitionPad = 33 * 64;
  uint32_t partitions_, sbuf_bytes_, psum_bytes_;
  uint64_t sbuf_dirty_, psum_dirty_;
  // calloc'd: the pages stay untouched (and free) until a kernel uses them.
  struct Free {
    void operator()(std::byte *p) const { std::free(p); }
  };
  std::unique_ptr<std::byte[], Free> sbuf_, psum_;
};

}  // namespace trn::sim::exec
