#include "kbuild/kernels/softmax.hpp"

#include <fmt/format.h>

#include "kbuild/kernel_builder.hpp"

namespace trn::kbuild {

namespace {
constexpr uint64_t kMaxCols = 12288;  // a 48 KiB fp32 row per partition, a few in flight
}

Built build_softmax(const SoftmaxConfig &c) {
  if (c.rows == 0 || c.cols == 0)
    return fmt::format("softmax: the shape [{}, {}] is empty", c.rows, c.cols);
  if (c.cols > kMaxCols)
    return fmt::format(
        "softmax: rows of {} columns; this kernel keeps a row in one tile and "
        "takes at most {}",
        c.cols, kMaxCols);
  using isa::DType;
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
