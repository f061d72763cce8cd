#include "ops/kernels/norm_grad.hpp"

#include <optional>

#include "kbuild/kernel_builder.hpp"
#include "ops/kernels/rows.hpp"

namespace trn::ops::kernels {

namespace {

using isa::DType;
using kbuild::ActFunc;
using kbuild::AluOp;
using kbuild::HbmTensor;
using kbuild::KernelBuilder;
using kbuild::Tile;

constexpr uint32_t kColumnBlock = 128;  // a matmul's M: columns summed per instruction

// Sums the columns of row tiles on the tensor engine: out[c] = sum over rows of rows[r, c].
// Column block j of every row tile accumulates into column j of a [128, blocks] PSUM tile (one
// fp32 per partition and block: block j's columns lie along partitions).
class ColumnSums {
 public:
  ColumnSums(KernelBuilder &kb, uint32_t cols, const char *name)
      : kb_(kb), cols_(cols), blocks_((cols + kColumnBlock - 1) / kColumnBlock) {
    acc_ = kb.psum(DType::kF32, std::min(kColumnBlock, cols), {blocks_}, name);
  }
  // Adds the columns of `rows` ([p, cols]); `ones` is a [128, 1] column of 1 in rows' dtype.
  void add(const Tile &rows, const Tile &ones) {
    const uint32_t p = rows.partitions();
    kbuild::for_col_chunks(cols_, kColumnBlock, [&](uint64_t c0, uint32_t cw) {
      const auto j = static_cast<uint32_t>(c0 / kColumnBlock);
      kb_.matmul(acc_.partition_slice(0, cw).cols(j, 1), rows.cols(static_cast<uint32_t>(c0), cw),
                 ones.partition_slice(0, p), /*accumulate=*/started_);
    });
    started_ = true;
  }
  // Stores the sums to `out` ([cols] f32), block by block.
  void store(const HbmTensor &out) {
    const Tile sums = kb_.sbuf(DType::kF32, acc_.partitions(), {blocks_}, "column sums");
    kb_.copy(sums, acc_);
    const kbuild::HbmView column = out.as_matrix(cols_, 1);
    kbuild::for_col_chunks(cols_, kColumnBlock, [&](uint64_t c0, uint32_t cw) {
      const auto j = static_cast<uint32_t>(c0 / kColumnBlock);
      kb_.store(column.row_slice(c0, cw), sums.partition_slice(0, cw).cols(j, 1));
    });
  }

 private:
  KernelBuilder &kb_;
  uint32_t cols_, blocks_;
  Tile acc_;
  bool started_ = false;
};

}  // namespace

kbuild::Built build_norm_backward(const NormGradConfig &c) {
  const bool layer = c.kind == NormKind::kLayer;
  const char *what = layer ? "layer_norm_backward" : "rms_norm_backward";
  if (auto e = kbuild::check_matrix(what, c.rows, c.cols, {c.dtype, c.grad_dtype})) return *e;
  // Per row tile: g, x (which becomes xhat when it is fp32, else an fp32 xhat besides), grad_x,
  // an fp32 g * xhat and, with gamma, an fp32 gg; gamma once.
  const uint64_t per_column =
      2 * (column_bytes(c.dtype) + column_bytes(c.dtype) +
           column_bytes(DType::kF32, c.dtype != DType::kF32) + column_bytes(c.grad_dtype) + 4 +
           column_bytes(DType::kF32, c.affine)) +
      column_bytes(c.dtype, c.affine);
  if (auto e = check_row_fits(what, c.cols, per_column, 2048, c.target)) return *e;
  if (c.affine && c.cols > uint64_t{kColumnBlock} * 512)
    return fmt::format("{}: {} columns; the column sums hold at most {}", what, c.cols,
                       kColumnBlock * 512);

  KernelBuilder kb(fmt::format("{}_{}x{}_{}", what, c.rows, c.cols, isa::dtype_name(c.dtype)),
                   c.target);
  const HbmTensor grad_out = kb.input("grad_out", c.dtype, {c.rows, c.cols});
  const HbmTensor x = kb.input("x", c.dtype, {c.rows, c.cols});
  HbmTensor mean, gamma, grad_gamma, grad_beta;
  if (layer) mean = kb.input("mean", DType::kF32, {c.rows});
  const HbmTensor rstd = kb.input("rstd", DType::kF32, {c.rows});
  if (c.affine) gamma = kb.input("gamma", c.dtype, {c.cols});
  const HbmTensor grad_x = kb.output("grad_x", c.grad_dtype, {c.rows, c.cols});
  if (c.affine) {
    grad_gamma = kb.output("grad_gamma", DType::kF32, {c.cols});
    if (layer) grad_beta = kb.output("grad_beta", DType::kF32, {c.cols});
  }

  const auto cols = static_cast<uint32_t>(c.cols);
  const auto partitions = static_cast<uint32_t>(std::min<uint64_t>(kbuild::kRowTile, c.rows));
  const float neg_inv_cols = -1.0f / static_cast<float>(c.cols);
  Tile gamma_rows, ones_f32, ones_in;
  std::optional<ColumnSums> gamma_sums, beta_sums;
  if (c.affine) {
    gamma_rows = kb.sbuf(c.dtype, partitions, {cols}, "gamma");
    kb.load(gamma_rows, gamma.view().broadcast_rows(partitions));
    // The moving operands of the column sums: g * xhat is fp32, g is in its own dtype (a matmul
    // takes one dtype).
    ones_f32 = kb.sbuf(DType::kF32, partitions, {1}, "ones");
    kb.memset(ones_f32, 1.0f);
    gamma_sums.emplace(kb, cols, "sum(g*xhat)");
    if (layer) {
      ones_in = ones_f32;
      if (c.dtype != DType::kF32) {
        ones_in = kb.sbuf(c.dtype, partitions, {1}, "ones");
        kb.memset(ones_in, 1.0f);
      }
      beta_sums.emplace(kb, cols, "sum(g)");
    }
  }

  struct Pending {
    RowBlock rb;
    Tile g, xhat, gg, result, rstd, neg_mean_gg, neg_mean_ggx;
  };
  // The row sums first, then grad_x and the column sums, pipelined so that each engine has the
  // next tile's row sums ahead of this tile's grad_x.
  auto row_sums = [&](uint64_t t) {
    Pending s;
    s.rb = row_block(c.rows, t);
    const uint32_t p = s.rb.p;
    s.g = kb.sbuf(c.dtype, p, {cols}, "g");
    kb.load(s.g, grad_out.tile(s.rb.r0, p, 0, cols));
    const Tile in = kb.sbuf(c.dtype, p, {cols}, "x");
    kb.load(in, x.tile(s.rb.r0, p, 0, cols));
    s.rstd = kb.sbuf(DType::kF32, p, {1}, "rstd");
    kb.load(s.rstd, rows_of(rstd, s.rb));
    // xhat in fp32: in place when x is fp32 already.
    s.xhat = c.dtype == DType::kF32 ? in : kb.sbuf(DType::kF32, p, {cols}, "xhat");
    if (layer) {
      const Tile mean_col = kb.sbuf(DType::kF32, p, {1}, "mean");
      kb.load(mean_col, rows_of(mean, s.rb));
      kb.tensor_scalar(s.xhat, in, AluOp::kSubtract, mean_col, AluOp::kMultiply, s.rstd);
    } else {
      kb.tensor_scalar(s.xhat, in, AluOp::kMultiply, s.rstd);
    }
    // g * xhat: its column sums are grad_gamma; then, times gamma in place (once the tensor
    // engine has read it), gg * xhat for the row sum. Without gamma it is gg * xhat already.
    const Tile gg_xhat = kb.sbuf(DType::kF32, p, {cols}, "g*xhat");
    kb.tensor_tensor(gg_xhat, s.g, s.xhat, AluOp::kMultiply);
    s.gg = s.g;
    if (c.affine) {
      gamma_sums->add(gg_xhat, ones_f32);
      const Tile gam = gamma_rows.partition_slice(0, p);
      kb.tensor_tensor(gg_xhat, gg_xhat, gam, AluOp::kMultiply);
      s.gg = kb.sbuf(DType::kF32, p, {cols}, "gg");
      kb.tensor_tensor(s.gg, s.g, gam, AluOp::kMultiply);
    }
    // -mean(gg * xhat), and (layer norm) -mean(gg): the scalar engine's sum of the scaled row;
    // its elementwise output goes to the result row, which grad_x overwrites.
    s.result = kb.sbuf(c.grad_dtype, p, {cols}, "grad_x");
    s.neg_mean_ggx = kb.sbuf(DType::kF32, p, {1}, "-mean(gg*xhat)");
    kb.activation(s.result, gg_xhat, ActFunc::kIdentity, neg_inv_cols, 0.0f, s.neg_mean_ggx);
    if (layer) {
      s.neg_mean_gg = kb.sbuf(DType::kF32, p, {1}, "-mean(gg)");
      kb.activation(s.result, s.gg, ActFunc::kIdentity, neg_inv_cols, 0.0f, s.neg_mean_gg);
    }
    return s;
  };
  auto gradients = [&](const Pending &s) {
    const uint32_t p = s.rb.p;
    // gg - xhat * mean(gg * xhat), in place in the xhat row, then (+ -mean(gg)) * rstd.
    kb.tensor_scalar(s.xhat, s.xhat, AluOp::kMultiply, s.neg_mean_ggx);
    kb.tensor_tensor(s.xhat, s.xhat, s.gg, AluOp::kAdd);
    if (layer)
      kb.tensor_scalar(s.result, s.xhat, AluOp::kAdd, s.neg_mean_gg, AluOp::kMultiply, s.rstd);
    else
      kb.tensor_scalar(s.result, s.xhat, AluOp::kMultiply, s.rstd);
    kb.store(grad_x.tile(s.rb.r0, p, 0, cols), s.result);
    if (beta_sums) beta_sums->add(s.g, ones_in);
  };
  kbuild::pipelined(row_blocks(c.rows), row_sums, gradients);
  if (gamma_sums) gamma_sums->store(grad_gamma);
  if (beta_sums) beta_sums->store(grad_beta);
  return kb.finish();
}

}  // namespace trn::ops::kernels
