#include "kbuild/kernels/softmax.hpp"

#include <fmt/format.h>

#include "kbuild/kernel_builder.hpp"

namespace trn::kbuild {

Built build_softmax(const SoftmaxConfig &c) {
  using isa::DType;
  if (auto e = check_matrix("softmax", c.rows, c.cols, {c.dtype, c.out_dtype})) return *e;
  // Two row tiles in flight (pipelined), each the input row, its fp32 exponentials unless the
  // input is fp32 (then in place), and the output unless that is fp32 (then in place too); a
  // few small columns besides.
  const uint64_t per_column = 2 * (isa::dtype_size(c.dtype) + (c.dtype == DType::kF32 ? 0 : 4) +
                                   (c.out_dtype == DType::kF32 ? 0 : isa::dtype_size(c.out_dtype)));
  const uint64_t widest = std::min<uint64_t>(widest_row(c.target.sbuf_bytes(), per_column, 1024),
                                             65535);  // an instruction's free size
  if (c.cols > widest)
    return fmt::format(
        "softmax: rows of {} columns; this kernel keeps two rows in SBUF at once "
        "and at most {} columns of {} fit ({} bytes per partition)",
        c.cols, widest, isa::dtype_name(c.dtype), c.target.sbuf_bytes());
  KernelBuilder kb(fmt::format("softmax_{}x{}_{}", c.rows, c.cols, isa::dtype_name(c.dtype)),
                   c.target);
  const HbmTensor x = kb.input("x", c.dtype, {c.rows, c.cols});
  const HbmTensor y = kb.output("y", c.out_dtype, {c.rows, c.cols});
  const auto cols = static_cast<uint32_t>(c.cols);
  // Per row tile: max and exp (with the row sum) first, then the division and the store,
  // pipelined so that each engine has the next tile's max and exp ahead of this tile's division.
  struct Rows {
    uint64_t r0;
    uint32_t p;
    Tile e, sum;
  };
  auto exponentials = [&](uint64_t t) {
    Rows r{t * kRowTile,
           static_cast<uint32_t>(std::min<uint64_t>(kRowTile, c.rows - t * kRowTile)),
           {},
           {}};
    const Tile in = kb.sbuf(c.dtype, r.p, {cols}, "x");
    kb.load(in, x.tile(r.r0, r.p, 0, cols));
    const Tile neg_max = kb.sbuf(DType::kF32, r.p, {1}, "-max");
    kb.reduce(neg_max, in, AluOp::kMax, 0, /*negate=*/true);
    // e = exp(x - max), and its row sum in the same pass.
    r.e = c.dtype == DType::kF32 ? in : kb.sbuf(DType::kF32, r.p, {cols}, "exp");
    r.sum = kb.sbuf(DType::kF32, r.p, {1}, "sum");
    kb.activation(r.e, in, ActFunc::kExp, 1.0f, neg_max, r.sum);
    return r;
  };
  auto normalise = [&](const Rows &r) {
    const Tile out = c.out_dtype == DType::kF32 ? r.e : kb.sbuf(c.out_dtype, r.p, {cols}, "y");
    kb.tensor_scalar(out, r.e, AluOp::kDivide, r.sum);
    kb.store(y.tile(r.r0, r.p, 0, cols), out);
  };
  pipelined((c.rows + kRowTile - 1) / kRowTile, exponentials, normalise);
  return kb.finish();
}

}  // namespace trn::kbuild
