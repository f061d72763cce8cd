// dma_copy: moves elements between SBUF and HBM (either direction, or within one), in the
// row-major element order of each side, casting through fp32 when the dtypes differ.
#include <algorithm>
#include <cstring>
#include <utility>

#include "exec/ops.hpp"

namespace trn::sim::exec {

namespace {

// Whether two tiles may share bytes (then rows go through scratch, so every read happens before
// the write that could change it).
bool overlaps(const Tile &a, const Tile &b) {
  auto extent = [](const Tile &t) {
    const std::byte *lo = t.base, *hi = t.base;
    auto widen = [&](ptrdiff_t span) { (span < 0 ? lo : hi) += span; };
    widen(t.partition_pitch * (t.partitions ? t.partitions - 1 : 0));
    for (uint32_t d = 0; d < t.num_dims; ++d)
      widen(t.strides[d] * (t.counts[d] ? t.counts[d] - 1 : 0));
    return std::pair{lo, hi + t.elem_size};
  };
  const auto [a_lo, a_hi] = extent(a);
  const auto [b_lo, b_hi] = extent(b);
  return a_lo < b_hi && b_lo < a_hi;
}

// Both sides have the same partitions x free shape: move one partition at a time.
void copy_rows(const Tile &dst, const Tile &src, ExecContext &ctx) {
  const bool raw = dst.dtype == src.dtype;
  const size_t n = src.free_elements;
  if (raw && src.contiguous() && dst.contiguous() && !overlaps(dst, src)) {
    for (uint32_t p = 0; p < src.partitions; ++p)
      std::memcpy(dst.partition(p), src.partition(p), n * src.elem_size);
    return;
  }
  float *row = ctx.scratch(0, raw ? (n * src.elem_size + 3) / 4 : n);
  for (uint32_t p = 0; p < src.partitions; ++p) {
    if (raw) {
      auto *bytes = reinterpret_cast<std::byte *>(row);
      load_row_raw(src, p, bytes);
      store_row_raw(dst, p, bytes);
    } else {
      load_row_f32(src, p, row);
      store_row_f32(dst, p, row);
    }
  }
}

// Any two shapes with the same element count: gather everything, then scatter.
void copy_flat(const Tile &dst, const Tile &src, ExecContext &ctx) {
  const bool raw = dst.dtype == src.dtype;
  const size_t total = size_t{src.partitions} * src.free_elements;
  float *all = ctx.scratch(1, raw ? (total * src.elem_size + 3) / 4 : total);
  auto *bytes = reinterpret_cast<std::byte *>(all);
  for (uint32_t p = 0; p < src.partitions; ++p) {
    if (raw)
      load_row_raw(src, p, bytes + p * src.free_elements * src.elem_size);
    else
      load_row_f32(src, p, all + p * src.free_elements);
  }
  for (uint32_t p = 0; p < dst.partitions; ++p) {
    if (raw)
      store_row_raw(dst, p, bytes + p * dst.free_elements * dst.elem_size);
    else
      store_row_f32(dst, p, all + p * dst.free_elements);
  }
}

}  // namespace

void op_dma_copy(const isa::Instruction &inst, ExecContext &ctx) {
  const Tile src = ctx.resolve(inst.src0, "src0");
  const Tile dst = ctx.resolve(inst.dst, "dst");
  if (src.partitions == dst.partitions && src.free_elements == dst.free_elements)
    copy_rows(dst, src, ctx);
  else
    copy_flat(dst, src, ctx);
}

}  // namespace trn::sim::exec
