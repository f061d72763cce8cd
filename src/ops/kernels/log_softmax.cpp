#include "ops/kernels/log_softmax.hpp"

#include "kbuild/kernel_builder.hpp"
#include "ops/kernels/rows.hpp"

namespace trn::ops::kernels {

using isa::DType;
using kbuild::ActFunc;
using kbuild::AluOp;
using kbuild::Tile;

kbuild::Built build_log_softmax(uint64_t rows, uint64_t cols, DType dtype, DType out_dtype,
                                const kbuild::BuildTarget &target) {
  if (auto e = kbuild::check_matrix("log_softmax", rows, cols, {dtype, out_dtype})) return *e;
  // Per row tile: the input and the output (which first takes the exponentials, only for their
  // row sum: the scalar engine sums them in fp32 before it rounds them).
  if (auto e = check_row_fits("log_softmax", cols,
                              2 * (column_bytes(dtype) + column_bytes(out_dtype)), 1024, target))
    return *e;
  kbuild::KernelBuilder kb(fmt::format("log_softmax_{}x{}_{}", rows, cols, isa::dtype_name(dtype)),
                           target);
  const kbuild::HbmTensor x = kb.input("x", dtype, {rows, cols});
  const kbuild::HbmTensor y = kb.output("y", out_dtype, {rows, cols});
  const auto width = static_cast<uint32_t>(cols);
  struct Pending {
    RowBlock rb;
    Tile in, out, shift;
  };
  // The row sum of exp(x - max) first, then y = x + (-max - log(sum)) and the store, pipelined
  // so that each engine has the next tile's reductions ahead of this tile's output.
  auto sums = [&](uint64_t t) {
    Pending s{row_block(rows, t), {}, {}, {}};
    const uint32_t p = s.rb.p;
    s.in = kb.sbuf(dtype, p, {width}, "x");
    kb.load(s.in, x.tile(s.rb.r0, p, 0, width));
    const Tile neg_max = kb.sbuf(DType::kF32, p, {1}, "-max");
    kb.reduce(neg_max, s.in, AluOp::kMax, 0, /*negate=*/true);
    s.out = kb.sbuf(out_dtype, p, {width}, "y");
    const Tile sum = kb.sbuf(DType::kF32, p, {1}, "sum");
    kb.activation(s.out, s.in, ActFunc::kExp, 1.0f, neg_max, sum);
    const Tile log_sum = kb.sbuf(DType::kF32, p, {1}, "log(sum)");
    kb.activation(log_sum, sum, ActFunc::kLog);
    s.shift = kb.sbuf(DType::kF32, p, {1}, "-max-log(sum)");
    kb.tensor_tensor(s.shift, neg_max, log_sum, AluOp::kSubtract);
    return s;
  };
  auto output = [&](const Pending &s) {
    kb.tensor_scalar(s.out, s.in, AluOp::kAdd, s.shift);
    kb.store(y.tile(s.rb.r0, s.rb.p, 0, width), s.out);
  };
  kbuild::pipelined(row_blocks(rows), sums, output);
  return kb.finish();
}

}  // namespace trn::ops::kernels
