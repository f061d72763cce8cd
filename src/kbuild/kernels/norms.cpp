#include "kbuild/kernels/norms.hpp"

#include <fmt/format.h>

#include "kbuild/kernel_builder.hpp"

namespace trn::kbuild {

namespace {

using isa::DType;
constexpr uint64_t kMaxCols = 8192;  // x, centred x and a scratch row of fp32 per partition

enum class Norm { kLayer, kRms };

Built build_norm(const NormConfig &c, Norm norm) {
  const char *what = norm == Norm::kLayer ? "layernorm" : "rmsnorm";
  if (c.rows == 0 || c.cols == 0)
    return fmt::format("{}: the shape [{}, {}] is empty", what, c.rows, c.cols);
  if (c.cols > kMaxCols)
    return fmt::format(
        "{}: rows of {} columns; this kernel keeps a row in one tile and takes at "
        "most {}",
        what, c.cols, kMaxCols);
  KernelBuilder kb(fmt::format("{}_{}x{}_{}", what, c.rows, c.cols, isa::dtype_name(c.dtype)),
                   c.target);
  const HbmTensor x = kb.input("x", c.dtype, {c.rows, c.cols});
  HbmTensor gamma, beta;
  if (c.affine) {
    gamma = kb.input("gamma", c.dtype, {c.cols});
    if (norm == Norm::kLayer) beta = kb.input("beta", c.dtype, {c.cols});
  }
  const HbmTensor y = kb.output("y", c.out_dtype, {c.rows, c.cols});
  const auto cols = static_cast<uint32_t>(c.cols);
  const auto partitions = static_cast<uint32_t>(std::min<uint64_t>(kRowTile, c.rows));
  const float inv_cols = 1.0f / static_cast<float>(c.cols);

  // gamma and beta, the same row in every partition, for the whole kernel.
  Tile gamma_rows, beta_rows;
  if (c.affine) {
    gamma_rows = kb.sbuf(c.dtype, partitions, {cols}, "gamma");
    kb.load(gamma_rows, gamma.view().broadcast_rows(partitions));
    if (norm == Norm::kLayer) {
      beta_rows = kb.sbuf(c.dtype, partitions, {cols}, "beta");
      kb.load(beta_rows, beta.view().broadcast_rows(partitions));
    }
  }

  for_row_tiles(c.rows, [&](uint64_t r0, uint32_t p) {
    const Tile in = kb.sbuf(c.dtype, p, {cols}, "x");
    kb.load(in, x.tile(r0, p, 0, cols));
    Tile centred = in;
    if (norm == Norm::kLayer) {
      // mean, then x - mean (fp32), so the variance is of the centred values.
      const Tile neg_mean = kb.sbuf(DType::kF32, p, {1}, "-mean");
      kb.reduce(neg_mean, in, AluOp::kAdd, 0, /*negate=*/true);
      kb.tensor_scalar(neg_mean, neg_mean, AluOp::kMultiply, inv_cols);
      centred = kb.sbuf(DType::kF32, p, {cols}, "x-mean");
      kb.tensor_scalar(centred, in, AluOp::kAdd, neg_mean);
    }
    // sum of squares (the squares themselves go to scratch), then 1/sqrt(sum/cols + eps).
    const Tile squares = kb.sbuf(DType::kF32, p, {cols}, "squares");
    const Tile sum_sq = kb.sbuf(DType::kF32, p, {1}, "sum(x^2)");
    kb.activation(squares, centred, ActFunc::kSquare, 1.0f, 0.0f, sum_sq);
    const Tile rstd = kb.sbuf(DType::kF32, p, {1}, "rstd");
    kb.activation(rstd, sum_sq, ActFunc::kRsqrt, inv_cols, c.eps);
    const Tile out = kb.sbuf(c.out_dtype, p, {cols}, "y");
    if (!c.affine) {
      kb.tensor_scalar(out, centred, AluOp::kMultiply, rstd);
    } else {
      // The scratch row holds the normalised values before the affine part.
      kb.tensor_scalar(squares, centred, AluOp::kMultiply, rstd);
      if (norm == Norm::kLayer) {
        kb.tensor_tensor(squares, squares, gamma_rows.partition_slice(0, p), AluOp::kMultiply);
        kb.tensor_tensor(out, squares, beta_rows.partition_slice(0, p), AluOp::kAdd);
      } else {
        kb.tensor_tensor(out, squares, gamma_rows.partition_slice(0, p), AluOp::kMultiply);
      }
    }
    kb.store(y.tile(r0, p, 0, cols), out);
  });
  return kb.finish();
}

}  // namespace

Built build_layernorm(const NormConfig &config) {
  return build_norm(config, Norm::kLayer);
}

Built build_rmsnorm(const NormConfig &config) {
  return build_norm(config, Norm::kRms);
}

}  // namespace trn::kbuild
