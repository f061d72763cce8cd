#include "kbuild/kernels/reduce.hpp"

#include <fmt/format.h>

#include "isa/dtype.hpp"
#include "kbuild/kernel_builder.hpp"

namespace trn::kbuild {

namespace {

using isa::DType;

// Combines `partial` into `acc` (the first partial is copied).
void combine(KernelBuilder &kb, const Tile &acc, const Tile &partial, AluOp op, bool first) {
  if (first)
    kb.copy(acc, partial);
  else
    kb.tensor_tensor(acc, acc, partial, op);
}

}  // namespace

Built build_reduce(const ReduceConfig &c) {
  if (auto e = check_matrix("reduce", c.rows, c.cols, {c.dtype, c.out_dtype})) return *e;
  if (c.axis > 1) return fmt::format("reduce: axis {}; a matrix has axes 0 and 1", c.axis);
  if (!isa::alu_op_is_reduction(c.op))
    return fmt::format("reduce: {} is not a reduction operator", isa::alu_op_name(c.op));
  KernelBuilder kb(fmt::format("reduce_{}_axis{}_{}x{}_{}", isa::alu_op_name(c.op), c.axis, c.rows,
                               c.cols, isa::dtype_name(c.dtype)),
                   c.target);
  const HbmTensor x = kb.input("x", c.dtype, {c.rows, c.cols});
  const uint64_t out_len = c.axis == 1 ? c.rows : c.cols;
  const HbmTensor out = kb.output("out", c.out_dtype, {out_len});
  const HbmView out_column = out.as_matrix(out_len, 1);

  if (c.axis == 1) {
    const uint64_t chunk = 16384 / isa::dtype_size(c.dtype);
    for_row_tiles(c.rows, [&](uint64_t r0, uint32_t p) {
      const Tile acc = kb.sbuf(DType::kF32, p, {1}, "acc");
      bool first = true;
      for_col_chunks(c.cols, chunk, [&](uint64_t c0, uint32_t cc) {
        const Tile in = kb.sbuf(c.dtype, p, {cc}, "x");
        kb.load(in, x.tile(r0, p, c0, cc));
        const Tile partial = kb.sbuf(DType::kF32, p, {1}, "partial");
        kb.reduce(partial, in, c.op);
        combine(kb, acc, partial, c.op, first);
        first = false;
      });
      const Tile result = kb.sbuf(c.out_dtype, p, {1}, "out");
      kb.copy(result, acc);
      kb.store(out_column.row_slice(r0, p), result);
    });
    return kb.finish();
  }

  // Axis 0: 128 columns at a time become 128 partitions.
  for_col_chunks(c.cols, kRowTile, [&](uint64_t c0, uint32_t cb) {
    const Tile acc = kb.sbuf(DType::kF32, cb, {1}, "acc");
    bool first = true;
    for_row_tiles(c.rows, [&](uint64_t r0, uint32_t p) {
      const Tile in = kb.sbuf(c.dtype, p, {cb}, "x");
      kb.load(in, x.tile(r0, p, c0, cb));
      const Tile columns = kb.psum(DType::kF32, cb, {p}, "x^T");
      kb.transpose(columns, in);
      const Tile partial = kb.sbuf(DType::kF32, cb, {1}, "partial");
      kb.reduce(partial, columns, c.op);
      combine(kb, acc, partial, c.op, first);
      first = false;
    });
    const Tile result = kb.sbuf(c.out_dtype, cb, {1}, "out");
    kb.copy(result, acc);
    kb.store(out_column.row_slice(c0, cb), result);
  });
  return kb.finish();
}

}  // namespace trn::kbuild
