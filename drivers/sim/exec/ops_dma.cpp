// dma_copy: moves elements between SBUF and HBM (either direction, or within one), in the
// row-major element order of each side, casting through fp32 when the dtypes differ.
#include <algorithm>

#include "exec/ops.hpp"

namespace trn::sim::exec {

namespace {

// Both sides have the same partitions x free shape: move one partition at a time.
void copy_rows(const Tile &dst, const Tile &src, ExecContext &ctx) {
  const bool raw = dst.dtype == src.dtype;
  const size_t n = src.free_elements;
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
