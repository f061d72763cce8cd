#include "exec/core_memory.hpp"

#include <algorithm>

namespace trn::sim::exec {

CoreMemory::CoreMemory(uint32_t partitions, uint32_t sbuf_bytes_per_partition,
                       uint32_t psum_bytes_per_partition)
    : partitions_(partitions),
      sbuf_pitch_(sbuf_bytes_per_partition),
      psum_pitch_(psum_bytes_per_partition),
      sbuf_dirty_(0),
      psum_dirty_(0),
      sbuf_(size_t{partitions} * sbuf_bytes_per_partition),
      psum_(size_t{partitions} * psum_bytes_per_partition) {}

namespace {

void zero_prefix(std::vector<std::byte> &memory, uint32_t partitions, uint32_t pitch,
                 uint64_t used) {
  const size_t n = std::min<uint64_t>(used, pitch);
  if (n == pitch) {
    std::fill(memory.begin(), memory.end(), std::byte{0});
    return;
  }
  for (uint32_t p = 0; p < partitions; ++p)
    std::fill_n(memory.begin() + ptrdiff_t(size_t{p} * pitch), n, std::byte{0});
}

}  // namespace

void CoreMemory::clear() {
  zero_prefix(sbuf_, partitions_, sbuf_pitch_, sbuf_dirty_);
  zero_prefix(psum_, partitions_, psum_pitch_, psum_dirty_);
  sbuf_dirty_ = psum_dirty_ = 0;
}

}  // namespace trn::sim::exec
