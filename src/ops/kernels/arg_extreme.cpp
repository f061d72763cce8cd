#include "ops/kernels/arg_extreme.hpp"

#include <fmt/format.h>

#include "isa/dtype.hpp"
#include "kbuild/kernel_builder.hpp"

namespace trn::ops::kernels {

using isa::AluOp;
using isa::DType;
using kbuild::KernelBuilder;
using kbuild::Tile;

namespace {

constexpr uint64_t kChunk = 4096;  // columns per chunk: four fp32 tiles of 16 KiB per partition
constexpr uint64_t kMaxCols = uint64_t{1} << 24;

}  // namespace

std::string arg_extreme_signature(const ArgExtremeConfig &c) {
  return fmt::format("arg{} [{}, {}] {}>{}", c.largest ? "max" : "min", c.rows, c.cols,
                     isa::dtype_name(c.dtype), c.int64 ? "i64" : "i32");
}

kbuild::Built build_arg_extreme(const ArgExtremeConfig &c) {
  const char *name = c.largest ? "argmax" : "argmin";
  if (auto err = kbuild::check_matrix(name, c.rows, c.cols, {c.dtype})) return *err;
  if (!isa::dtype_is_float(c.dtype))
    return fmt::format("{}: {} is not a float dtype", name, isa::dtype_name(c.dtype));
  if (c.cols > kMaxCols)
    return fmt::format("{}: {} columns; fp32 indices are exact up to 2^24", name, c.cols);
  KernelBuilder kb(fmt::format("{}_{}x{}_{}", name, c.rows, c.cols, isa::dtype_name(c.dtype)),
                   c.target);
  const kbuild::HbmTensor x = kb.input("x", c.dtype, {c.rows, c.cols});
  const kbuild::HbmTensor out = c.int64 ? kb.output("indices", DType::kI32, {c.rows, 2})
                                        : kb.output("indices", DType::kI32, {c.rows});
  const AluOp extreme = c.largest ? AluOp::kMax : AluOp::kMin;
  const AluOp beats = c.largest ? AluOp::kGreater : AluOp::kLess;
  const auto f32 = DType::kF32, i32 = DType::kI32;
  const float cols = static_cast<float>(c.cols);

  kbuild::for_row_tiles(c.rows, [&](uint64_t r0, uint32_t p) {
    const Tile best = kb.sbuf(f32, p, {1}, "best"), best_index = kb.sbuf(f32, p, {1}, "index");
    bool first = true;
    kbuild::for_col_chunks(c.cols, kChunk, [&](uint64_t c0, uint32_t cc) {
      const Tile in = kb.sbuf(c.dtype, p, {cc}, "x");
      kb.load(in, x.tile(r0, p, c0, cc));
      const Tile m = kb.sbuf(f32, p, {1}, "extreme");
      kb.reduce(m, in, extreme);
      // Candidates: equal to the chunk's extreme, or NaN (the extreme is then NaN as well).
      const Tile candidate = kb.sbuf(f32, p, {cc}, "candidate");
      kb.tensor_scalar(candidate, in, AluOp::kEqual, m);
      const Tile nan = kb.sbuf(f32, p, {cc}, "nan");
      kb.tensor_tensor(nan, in, in, AluOp::kNotEqual);
      kb.tensor_tensor(candidate, candidate, nan, AluOp::kLogicalOr);
      // The first candidate has the largest cols - index.
      const Tile remaining = kb.sbuf(f32, p, {cc}, "remaining");
      kb.iota(remaining, {{-1, cc}}, static_cast<int32_t>(c.cols - c0), 0);
      kb.tensor_tensor(candidate, candidate, remaining, AluOp::kMultiply);
      const Tile index = kb.sbuf(f32, p, {1}, "chunk_index");
      kb.reduce(index, candidate, AluOp::kMax);
      kb.tensor_scalar(index, index, AluOp::kSubtract, cols, AluOp::kBypass, 0.0f, true);
      if (first) {
        kb.copy(best, m);
        kb.copy(best_index, index);
        first = false;
        return;
      }
      // This chunk wins when its extreme beats the best so far, or is NaN where the best is not;
      // on a tie the earlier chunk keeps it.
      const Tile take = kb.sbuf(f32, p, {1}, "take"), flag = kb.sbuf(f32, p, {1}, "flag");
      kb.tensor_tensor(take, m, best, beats);
      kb.tensor_tensor(flag, m, m, AluOp::kNotEqual);
      const Tile best_is_number = kb.sbuf(f32, p, {1}, "number");
      kb.tensor_tensor(best_is_number, best, best, AluOp::kEqual);
      kb.tensor_tensor(flag, flag, best_is_number, AluOp::kLogicalAnd);
      kb.tensor_tensor(take, take, flag, AluOp::kLogicalOr);
      // index: best_index + take * (index - best_index), exact for integers below 2^24.
      kb.tensor_tensor(index, index, best_index, AluOp::kSubtract);
      kb.tensor_tensor(index, index, take, AluOp::kMultiply);
      kb.tensor_tensor(best_index, best_index, index, AluOp::kAdd);
      // value: an exact select on the bits (a blend would turn an infinity into NaN).
      const Tile mask = kb.sbuf(i32, p, {1}, "mask"), bits = kb.sbuf(i32, p, {1}, "bits");
      kb.tensor_scalar(flag, take, AluOp::kMultiply, -1.0f);
      kb.copy(mask, flag);
      kb.tensor_tensor(bits, m.bitcast(i32), best.bitcast(i32), AluOp::kBitwiseXor);
      kb.tensor_tensor(bits, bits, mask, AluOp::kBitwiseAnd);
      kb.tensor_tensor(best.bitcast(i32), bits, best.bitcast(i32), AluOp::kBitwiseXor);
    });
    if (c.int64) {
      const Tile pair = kb.sbuf(i32, p, {1, 2}, "int64");
      kb.copy(pair.slice(1, 0, 1), best_index.reshape({1, 1}));
      kb.memset(pair.slice(1, 1, 1), 0.0f);  // indices are not negative: the high word is 0
      kb.store(out.tile(r0, p, 0, 2), pair.reshape({2}));
    } else {
      const Tile words = kb.sbuf(i32, p, {1}, "indices");
      kb.copy(words, best_index);
      kb.store(out.as_matrix(c.rows, 1).row_slice(r0, p), words);
    }
  });
  return kb.finish();
}

}  // namespace trn::ops::kernels
