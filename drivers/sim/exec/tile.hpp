// An access pattern resolved against real memory: base pointer, partition pitch and byte
// strides, bounds-checked once when resolved. Ops move whole partitions between tiles and fp32
// scratch rows with the bulk converters of isa/dtype.hpp (no per-element dispatch).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "isa/instruction.hpp"

namespace trn::sim::exec {

// A fault found while executing an instruction (out-of-bounds access and the like). The
// executor turns it into the kernel's fault report, naming engine and instruction.
struct ExecFault : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Tile {
  std::byte *base = nullptr;      // element (partition 0 of the tile, all indices 0)
  ptrdiff_t partition_pitch = 0;  // bytes between consecutive partitions / HBM rows
  uint32_t partitions = 0;
  uint32_t num_dims = 0;
  std::array<uint32_t, isa::kMaxFreeDims> counts{};
  std::array<ptrdiff_t, isa::kMaxFreeDims> strides{};  // bytes
  isa::DType dtype = isa::DType::kInvalid;
  uint32_t elem_size = 0;
  uint64_t free_elements = 1;
  isa::MemSpace space = isa::MemSpace::kNone;

  std::byte *partition(uint32_t p) const { return base + ptrdiff_t{p} * partition_pitch; }
  // True when the free elements of a partition are contiguous (row-major, no gaps).
  bool contiguous() const;
};

// Calls run(ptr, stride_bytes, count, first_index) for each innermost run of partition p's
// free elements, in row-major order; first_index counts elements from the partition's start.
template <typename Run>
void for_each_run(const Tile &t, uint32_t p, Run &&run) {
  std::byte *row = t.partition(p);
  if (t.num_dims == 0) {
    run(row, ptrdiff_t{t.elem_size}, uint32_t{1}, uint64_t{0});
    return;
  }
  const uint32_t inner = t.num_dims - 1;
  std::array<uint32_t, isa::kMaxFreeDims> count{1, 1, 1, 1};
  std::array<ptrdiff_t, isa::kMaxFreeDims> stride{};
  for (uint32_t d = 0; d < inner; ++d) {  // outer dims right-aligned into 3 loop levels
    count[isa::kMaxFreeDims - 1 - inner + d] = t.counts[d];
    stride[isa::kMaxFreeDims - 1 - inner + d] = t.strides[d];
  }
  const uint32_t n = t.counts[inner];
  const ptrdiff_t s = t.strides[inner];
  uint64_t index = 0;
  for (uint32_t a = 0; a < count[0]; ++a)
    for (uint32_t b = 0; b < count[1]; ++b)
      for (uint32_t c = 0; c < count[2]; ++c, index += n)
        run(row + a * stride[0] + b * stride[1] + c * stride[2], s, n, index);
}

// Read the free elements of partition p (row-major order) as fp32 into out[free_elements].
void load_row_f32(const Tile &t, uint32_t p, float *out);
// Write out[free_elements] to partition p, converting from fp32 to the tile's dtype.
void store_row_f32(const Tile &t, uint32_t p, const float *in);
// Raw element bytes of partition p to/from a packed buffer (bit-exact moves).
void load_row_raw(const Tile &t, uint32_t p, std::byte *out);
void store_row_raw(const Tile &t, uint32_t p, const std::byte *in);

}  // namespace trn::sim::exec
