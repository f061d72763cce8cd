#include "ops/kernels/softmax_grad.hpp"

#include "kbuild/kernel_builder.hpp"
#include "ops/kernels/rows.hpp"

namespace trn::ops::kernels {

using isa::DType;
using kbuild::ActFunc;
using kbuild::AluOp;
using kbuild::Tile;

kbuild::Built build_softmax_backward(uint64_t rows, uint64_t cols, bool log, DType dtype,
                                     DType grad_dtype, const kbuild::BuildTarget &target) {
  const char *what = log ? "log_softmax_backward" : "softmax_backward";
  if (auto e = kbuild::check_matrix(what, rows, cols, {dtype, grad_dtype})) return *e;
  // Per row tile: g and y, an fp32 row (g * y, or exp(y)), and the result.
  if (auto e = check_row_fits(
          what, cols, 2 * (2 * column_bytes(dtype) + 4 + column_bytes(grad_dtype)), 1024, target))
    return *e;
  kbuild::KernelBuilder kb(fmt::format("{}_{}x{}_{}", what, rows, cols, isa::dtype_name(dtype)),
                           target);
  const kbuild::HbmTensor grad_out = kb.input("grad_out", dtype, {rows, cols});
  const kbuild::HbmTensor out = kb.input("out", dtype, {rows, cols});
  const kbuild::HbmTensor grad_in = kb.output("grad_in", grad_dtype, {rows, cols});
  const auto width = static_cast<uint32_t>(cols);
  struct Pending {
    RowBlock rb;
    Tile g, y, row, sum;
  };
  // The row sum first (and, for log softmax, exp(y)), then the combination and the store,
  // pipelined so that each engine has the next tile's sums ahead of this tile's result.
  auto sums = [&](uint64_t t) {
    Pending s{row_block(rows, t), {}, {}, {}, {}};
    const uint32_t p = s.rb.p;
    s.g = kb.sbuf(dtype, p, {width}, "g");
    kb.load(s.g, grad_out.tile(s.rb.r0, p, 0, width));
    s.y = kb.sbuf(dtype, p, {width}, "y");
    kb.load(s.y, out.tile(s.rb.r0, p, 0, width));
    s.row = kb.sbuf(DType::kF32, p, {width}, log ? "exp(y)" : "g*y");
    s.sum = kb.sbuf(DType::kF32, p, {1}, log ? "sum(g)" : "sum(g*y)");
    if (log) {
      kb.reduce(s.sum, s.g, AluOp::kAdd);
      kb.activation(s.row, s.y, ActFunc::kExp);
    } else {
      kb.tensor_tensor(s.row, s.g, s.y, AluOp::kMultiply);
      kb.reduce(s.sum, s.row, AluOp::kAdd);
    }
    return s;
  };
  auto combine = [&](const Pending &s) {
    const uint32_t p = s.rb.p;
    const Tile result = kb.sbuf(grad_dtype, p, {width}, "grad_in");
    if (log) {
      // exp(y) * sum(g) in place, then g minus it.
      kb.tensor_scalar(s.row, s.row, AluOp::kMultiply, s.sum);
      kb.tensor_tensor(result, s.g, s.row, AluOp::kSubtract);
    } else {
      // g - sum(g * y) into the fp32 row (its products are summed already), then times y.
      kb.tensor_scalar(s.row, s.g, AluOp::kSubtract, s.sum);
      kb.tensor_tensor(result, s.row, s.y, AluOp::kMultiply);
    }
    kb.store(grad_in.tile(s.rb.r0, p, 0, width), result);
  };
  kbuild::pipelined(row_blocks(rows), sums, combine);
  return kb.finish();
}

}  // namespace trn::ops::kernels
