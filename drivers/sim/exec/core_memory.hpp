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
  uint32_t sbuf_pitch() const { return sbuf_pitch_; }
  uint32_t psum_pitch() const { return psum_pitch_; }
  std::byte *sbuf(uint32_t partition, uint64_t offset = 0) {
    return sbuf_.get() + size_t{partition} * sbuf_pitch_ + offset;
  }
  std::byte *psum(uint32_t partition, uint64_t offset = 0) {
    return psum_.get() + size_t{partition} * psum_pitch_ + offset;
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
  uint32_t partitions_, sbuf_pitch_, psum_pitch_;
  uint64_t sbuf_dirty_, psum_dirty_;
  // calloc'd: the pages stay untouched (and free) until a kernel uses them.
  struct Free {
    void operator()(std::byte *p) const { std::free(p); }
  };
  std::unique_ptr<std::byte[], Free> sbuf_, psum_;
};

}  // namespace trn::sim::exec
