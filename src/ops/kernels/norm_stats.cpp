#include "ops/kernels/norm_stats.hpp"

#include "kbuild/kernel_builder.hpp"
#include "ops/kernels/rows.hpp"

namespace trn::ops::kernels {

using isa::DType;
using kbuild::ActFunc;
using kbuild::AluOp;
using kbuild::HbmTensor;
using kbuild::Tile;

kbuild::Built build_norm_forward(const NormStatsConfig &c) {
  const bool layer = c.kind == NormKind::kLayer;
  const char *what = layer ? "layer_norm" : "rms_norm";
  if (auto e = kbuild::check_matrix(what, c.rows, c.cols, {c.dtype, c.out_dtype})) return *e;
  // Per row tile: x, y and an fp32 row (x - mean for layer norm; x * rstd for an affine RMS norm
  // of a narrow x); gamma and beta once.
  const bool fp32_row = layer || (c.affine && c.dtype != DType::kF32);
  const uint64_t per_column = 2 * (column_bytes(c.dtype) + column_bytes(c.out_dtype) +
                                   column_bytes(DType::kF32, fp32_row)) +
                              column_bytes(c.dtype, c.affine) * (layer ? 2 : 1);
  if (auto e = check_row_fits(what, c.cols, per_column, 2048, c.target)) return *e;

  kbuild::KernelBuilder kb(
      fmt::format("{}_stats_{}x{}_{}", what, c.rows, c.cols, isa::dtype_name(c.dtype)), c.target);
  const HbmTensor x = kb.input("x", c.dtype, {c.rows, c.cols});
  HbmTensor gamma, beta, mean, rstd;
  if (c.affine) {
    gamma = kb.input("gamma", c.dtype, {c.cols});
    if (layer) beta = kb.input("beta", c.dtype, {c.cols});
  }
  const HbmTensor y = kb.output("y", c.out_dtype, {c.rows, c.cols});
  if (layer) mean = kb.output("mean", DType::kF32, {c.rows});
  rstd = kb.output("rstd", DType::kF32, {c.rows});

  const auto cols = static_cast<uint32_t>(c.cols);
  const auto partitions = static_cast<uint32_t>(std::min<uint64_t>(kbuild::kRowTile, c.rows));
  const float inv_cols = 1.0f / static_cast<float>(c.cols);
  Tile gamma_rows, beta_rows;
  if (c.affine) {
    gamma_rows = kb.sbuf(c.dtype, partitions, {cols}, "gamma");
    kb.load(gamma_rows, gamma.view().broadcast_rows(partitions));
    if (layer) {
      beta_rows = kb.sbuf(c.dtype, partitions, {cols}, "beta");
      kb.load(beta_rows, beta.view().broadcast_rows(partitions));
    }
  }

  struct Pending {
    RowBlock rb;
    Tile centred, out, rstd;
  };
  // The statistics first (stored as soon as they are known), then the normalisation, pipelined
  // so that each engine has the next tile's statistics ahead of this tile's normalisation.
  auto statistics = [&](uint64_t t) {
    Pending s{row_block(c.rows, t), {}, {}, {}};
    const uint32_t p = s.rb.p;
    const Tile in = kb.sbuf(c.dtype, p, {cols}, "x");
    kb.load(in, x.tile(s.rb.r0, p, 0, cols));
    // The output row takes the elementwise results of the passes that are only there for their
    // row sums (the scalar engine sums in fp32 before rounding); the normalisation overwrites it.
    s.out = kb.sbuf(c.out_dtype, p, {cols}, "y");
    s.centred = in;
    if (layer) {
      const Tile neg_mean = kb.sbuf(DType::kF32, p, {1}, "-mean");
      kb.activation(s.out, in, ActFunc::kIdentity, -inv_cols, 0.0f, neg_mean);
      s.centred = kb.sbuf(DType::kF32, p, {cols}, "x-mean");
      kb.tensor_scalar(s.centred, in, AluOp::kAdd, neg_mean);
      const Tile mean_col = kb.sbuf(DType::kF32, p, {1}, "mean");
      kb.tensor_scalar(mean_col, neg_mean, AluOp::kMultiply, -1.0f);
      kb.store(rows_of(mean, s.rb), mean_col);
    }
    const Tile sum_sq = kb.sbuf(DType::kF32, p, {1}, "sum(x^2)");
    kb.activation(s.out, s.centred, ActFunc::kSquare, 1.0f, 0.0f, sum_sq);
    s.rstd = kb.sbuf(DType::kF32, p, {1}, "rstd");
    kb.activation(s.rstd, sum_sq, ActFunc::kRsqrt, inv_cols, c.eps);
    kb.store(rows_of(rstd, s.rb), s.rstd);
    return s;
  };
  auto normalise = [&](const Pending &s) {
    const uint32_t p = s.rb.p;
    if (!c.affine) {
      kb.tensor_scalar(s.out, s.centred, AluOp::kMultiply, s.rstd);
    } else {
      // The normalised row in fp32 (in place when it is fp32 already), then gamma and beta.
      const Tile normed =
          s.centred.dtype() == DType::kF32 ? s.centred : kb.sbuf(DType::kF32, p, {cols}, "normed");
      kb.tensor_scalar(normed, s.centred, AluOp::kMultiply, s.rstd);
      const Tile g = gamma_rows.partition_slice(0, p);
      if (layer) {
        kb.tensor_tensor(normed, normed, g, AluOp::kMultiply);
        kb.tensor_tensor(s.out, normed, beta_rows.partition_slice(0, p), AluOp::kAdd);
      } else {
        kb.tensor_tensor(s.out, normed, g, AluOp::kMultiply);
      }
    }
    kb.store(y.tile(s.rb.r0, p, 0, cols), s.out);
  };
  kbuild::pipelined(row_blocks(c.rows), statistics, normalise);
  return kb.finish();
}

}  // namespace trn::ops::kernels
