#include "ops/kernels/integer_add.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "kbuild/kernel_builder.hpp"

namespace trn::ops::kernels {

using isa::AluOp;
using isa::DType;
using kbuild::KernelBuilder;
using kbuild::ScalarArg;
using kbuild::Tile;

namespace {

constexpr float kLimb = 65536.0f;  // one limb's range: 2^16
// Columns (elements) per chunk: with four limbs about 100 bytes of SBUF per element and
// partition, so a chunk takes about 50 KiB and the next one's loads overlap this one's work.
constexpr uint64_t kChunk = 512;

}  // namespace

std::string integer_add_signature(const IntegerAddConfig &c) {
  return fmt::format("integer_{} [{}, {}] x{} {}", c.subtract ? "sub" : "add", c.rows, c.cols,
                     c.limbs, c.tensor_b ? "tensor" : "scalar");
}

kbuild::Built build_integer_add(const IntegerAddConfig &c) {
  if (auto err = kbuild::check_matrix("integer_add", c.rows, c.cols, {DType::kI16})) return *err;
  if (c.limbs != 2 && c.limbs != 4)
    return fmt::format("integer_add: {} limbs (2 for int32, 4 for int64)", c.limbs);
  if (c.subtract && !c.tensor_b)
    return std::string("integer_add: a scalar is subtracted by adding its negation");
  const uint32_t L = c.limbs;
  KernelBuilder kb(
      fmt::format("integer_{}{}_{}x{}", c.subtract ? "sub" : "add", 16 * L, c.rows, c.cols),
      c.target);
  const std::vector<uint64_t> shape = {c.rows, c.cols * L};
  const kbuild::HbmTensor a = kb.input("a", DType::kI16, shape);
  const kbuild::HbmTensor b = c.tensor_b ? kb.input("b", DType::kI16, shape) : kbuild::HbmTensor{};
  const kbuild::HbmTensor out = kb.output("out", DType::kI16, shape);
  std::vector<ScalarArg> b_limbs;
  if (!c.tensor_b)
    for (uint32_t k = 0; k < L; ++k) b_limbs.push_back(kb.scalar(fmt::format("b{}", k)));

  const auto f32 = DType::kF32;
  kbuild::for_col_chunks(c.cols, kChunk, [&](uint64_t c0, uint32_t cc) {
    kbuild::for_row_tiles(c.rows, [&](uint64_t r0, uint32_t p) {
      const uint32_t width = cc * L;
      // The limbs of [p, cc] elements as unsigned values in fp32, [p, {cc, L}].
      auto load_limbs = [&](const kbuild::HbmTensor &t, const char *name) {
        const Tile raw = kb.sbuf(DType::kI16, p, {width}, name);
        kb.load(raw, t.tile(r0, p, c0 * L, width));
        const Tile v = kb.sbuf(f32, p, {cc, L}, name);
        kb.copy(v, raw.reshape({cc, L}));
        const Tile wrap = kb.sbuf(f32, p, {cc, L}, "wrap");
        kb.tensor_scalar(wrap, v, AluOp::kLess, 0.0f, AluOp::kMultiply, kLimb);
        kb.tensor_tensor(v, v, wrap, AluOp::kAdd);
        return v;
      };
      const Tile va = load_limbs(a, "a");
      Tile vb;
      if (c.tensor_b) {
        vb = load_limbs(b, "b");
        if (c.subtract)
          kb.tensor_scalar(vb, vb, AluOp::kSubtract, kLimb - 1.0f, AluOp::kBypass, 0.0f,
                           true);  // 65535 - limb: ~b
      }
      const Tile carry = kb.sbuf(f32, p, {cc, 1}, "carry");
      kb.memset(carry, c.subtract ? 1.0f : 0.0f);
      const Tile sum = kb.sbuf(f32, p, {cc, L}, "sum");
      const Tile spill = kb.sbuf(f32, p, {cc, 1}, "spill");
      for (uint32_t k = 0; k < L; ++k) {
        const Tile s = sum.slice(1, k, 1);
        if (c.tensor_b)
          kb.tensor_tensor(s, va.slice(1, k, 1), vb.slice(1, k, 1), AluOp::kAdd);
        else
          kb.tensor_scalar(s, va.slice(1, k, 1), AluOp::kAdd, b_limbs[k]);
        kb.tensor_tensor(s, s, carry, AluOp::kAdd);
        if (k + 1 < L) kb.tensor_scalar(carry, s, AluOp::kGreaterEqual, kLimb);
        // s mod 2^16: the carry out leaves this limb (the last limb's is the wrap-around).
        kb.tensor_scalar(spill, s, AluOp::kGreaterEqual, kLimb, AluOp::kMultiply, kLimb);
        kb.tensor_tensor(s, s, spill, AluOp::kSubtract);
      }
      // Back to signed 16-bit limbs, which int16 holds exactly.
      const Tile wrap = kb.sbuf(f32, p, {cc, L}, "wrap");
      kb.tensor_scalar(wrap, sum, AluOp::kGreaterEqual, kLimb / 2, AluOp::kMultiply, kLimb);
      kb.tensor_tensor(sum, sum, wrap, AluOp::kSubtract);
      const Tile raw = kb.sbuf(DType::kI16, p, {width}, "out");
      kb.copy(raw.reshape({cc, L}), sum);
      kb.store(out.tile(r0, p, c0 * L, width), raw);
    });
  });
  return kb.finish();
}

}  // namespace trn::ops::kernels
