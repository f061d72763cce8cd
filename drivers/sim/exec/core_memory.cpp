#include "exec/core_memory.hpp"

#include <algorithm>
#include <cstring>
#include <new>

namespace trn::sim::exec {

namespace {

std::byte *zeroed(size_t bytes) {
  auto *p = static_cast<std::byte *>(std::calloc(bytes, 1));
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace

CoreMemory::CoreMemory(uint32_t partitions, uint32_t sbuf_bytes_per_partition,
                       uint32_t psum_bytes_per_partition)
    : partitions_(partitions),
      sbuf_bytes_(sbuf_bytes_per_partition),
      psum_bytes_(psum_bytes_per_partition),
      sbuf_dirty_(0),
      psum_dirty_(0),
      sbuf_(zeroed(size_t{partitions} * sbuf_pitch())),
      psum_(zeroed(size_t{partitions} * psum_pitch())) {}

namespace {

void zero_prefix(std::byte *memory, uint32_t partitions, uint32_t bytes, uint32_t pitch,
                 uint64_t used) {
  const size_t n = std::min<uint64_t>(used, bytes);
  if (n == 0) return;
  if (n == bytes) {
    std::memset(memory, 0, size_t{partitions} * pitch);
    return;
  }
  for (uint32_t p = 0; p < partitions; ++p) std::memset(memory + size_t{p} * pitch, 0, n);
}

}  // namespace

void CoreMemory::clear() {
  zero_prefix(sbuf_.get(), partitions_, sbuf_bytes_, sbuf_pitch(), sbuf_dirty_);
  zero_prefix(psum_.get(), partitions_, psum_bytes_, psum_pitch(), psum_dirty_);
  sbuf_dirty_ = psum_dirty_ = 0;
}

}  // namespace trn::sim::exec
