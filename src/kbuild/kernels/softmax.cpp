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
  for_row_tiles(c.rows, [&](uint64_t r0, uint32_t p) {
    const Tile in = kb.sbuf(c.dtype, p, {cols}, "x");
    kb.load(in, x.tile(r0, p, 0, cols));
    const Tile neg_max = kb.sbuf(DType::kF32, p, {1}, "-max");
    kb.reduce(neg_max, in, AluOp::kMax, 0, /*negate=*/true);
    // e = exp(x - max), and its row sum in the same pass.
    const Tile e = c.dtype == DType::kF32 ? in : kb.sbuf(DType::kF32, p, {cols}, "exp");
    const Tile sum = kb.sbuf(DType::kF32, p, {1}, "sum");
    kb.activation(e, in, ActFunc::kExp, 1.0f, neg_max, sum);
    const Tile out = c.out_dtype == DType::kF32 ? e : kb.sbuf(c.out_dtype, p, {cols}, "y");
    kb.tensor_scalar(out, e, AluOp::kDivide, sum);
    kb.store(y.tile(r0, p, 0, cols), out);
  });
  return kb.finish();
}

}  // namespace trn::kbuild
