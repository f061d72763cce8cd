#include "kbuild/kernels/norms.hpp"

#include <fmt/format.h>

#include "kbuild/kernel_builder.hpp"

namespace trn::kbuild {

namespace {

using isa::DType;

enum class Norm { kLayer, kRms };

Built build_norm(const NormConfig &c, Norm norm) {
  const char *what = norm == Norm::kLayer ? "layernorm" : "rmsnorm";
  if (auto e = check_matrix(what, c.rows, c.cols, {c.dtype, c.out_dtype})) return *e;
  // Two row tiles in flight (pipelined), each the input row, the centred fp32 row (layer norm),
  // the output row and, for RMS norm of a narrow input with a wide output, an fp32 row; gamma
  // and beta once; a few small columns besides.
  const uint64_t in_size = isa::dtype_size(c.dtype), out_size = isa::dtype_size(c.out_dtype);
  const bool narrow = c.out_dtype == c.dtype && (c.dtype == DType::kBf16 || c.dtype == DType::kF16);
  const uint64_t extra =
      norm == Norm::kLayer ? 4 : (c.affine && !narrow && c.dtype != DType::kF32 ? 4 : 0);
  const uint64_t per_column =
      2 * (in_size + out_size + extra) + (c.affine ? in_size * (norm == Norm::kLayer ? 2 : 1) : 0);
  const uint64_t widest =
      std::min<uint64_t>(widest_row(c.target.sbuf_bytes(), per_column, 2048), 65535);
  if (c.cols > widest)
    return fmt::format(
        "{}: rows of {} columns; this kernel keeps two rows in SBUF at once and "
        "at most {} columns of {} fit ({} bytes per partition)",
        what, c.cols, widest, isa::dtype_name(c.dtype), c.target.sbuf_bytes());
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

  // Per row tile: statistics first (mean, centring, the sum of squares, rstd), then the
  // normalisation and the store, pipelined so that each engine has the next tile's statistics
  // ahead of this tile's normalisation.
  struct Stats {
    uint64_t r0;
    uint32_t p;
    Tile in, centred, out, rstd;
  };
  const uint64_t tiles = (c.rows + kRowTile - 1) / kRowTile;
  auto statistics = [&](uint64_t t) {
    Stats s;
    s.r0 = t * kRowTile;
    s.p = static_cast<uint32_t>(std::min<uint64_t>(kRowTile, c.rows - s.r0));
    s.in = kb.sbuf(c.dtype, s.p, {cols}, "x");
    kb.load(s.in, x.tile(s.r0, s.p, 0, cols));
    s.centred = s.in;
    // The output tile takes the elementwise results of the passes that are only there for their
    // row sums (activation sums the fp32 values); the normalisation overwrites it.
    s.out = kb.sbuf(c.out_dtype, s.p, {cols}, "y");
    if (norm == Norm::kLayer) {
      // -mean (the row sum comes from the scalar engine, leaving the vector engine the affine
      // part), then x - mean in fp32, so the variance is of the centred values.
      const Tile neg_mean = kb.sbuf(DType::kF32, s.p, {1}, "-mean");
      kb.activation(s.out, s.in, ActFunc::kIdentity, -inv_cols, 0.0f, neg_mean);
      s.centred = kb.sbuf(DType::kF32, s.p, {cols}, "x-mean");
      kb.tensor_scalar(s.centred, s.in, AluOp::kAdd, neg_mean);
    }
    // Sum of squares, then 1/sqrt(sum/cols + eps).
    const Tile sum_sq = kb.sbuf(DType::kF32, s.p, {1}, "sum(x^2)");
    kb.activation(s.out, s.centred, ActFunc::kSquare, 1.0f, 0.0f, sum_sq);
    s.rstd = kb.sbuf(DType::kF32, s.p, {1}, "rstd");
    kb.activation(s.rstd, sum_sq, ActFunc::kRsqrt, inv_cols, c.eps);
    return s;
  };
  auto normalise = [&](const Stats &s) {
    if (!c.affine) {
      kb.tensor_scalar(s.out, s.centred, AluOp::kMultiply, s.rstd);
    } else {
      // The normalised row before gamma and beta, in place: in the input's dtype when that is a
      // 16-bit float like the output (`narrow`: the vector engine's fast path for all-16-bit
      // operands), else in fp32.
      const Tile normed = narrow ? s.in
                          : s.centred.dtype() == DType::kF32
                              ? s.centred
                              : kb.sbuf(DType::kF32, s.p, {cols}, "normed");
      kb.tensor_scalar(normed, s.centred, AluOp::kMultiply, s.rstd);
      const Tile g = gamma_rows.partition_slice(0, s.p);
      if (norm == Norm::kLayer) {
        kb.tensor_tensor(normed, normed, g, AluOp::kMultiply);
        kb.tensor_tensor(s.out, normed, beta_rows.partition_slice(0, s.p), AluOp::kAdd);
      } else {
        kb.tensor_tensor(s.out, normed, g, AluOp::kMultiply);
      }
    }
    kb.store(y.tile(s.r0, s.p, 0, cols), s.out);
  };
  pipelined(tiles, statistics, normalise);
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
