// floor, ceil, trunc, round and frac of float tensors on the device, without a rounding
// instruction: in float32, (|x| + 2^23) - 2^23 is |x| rounded to the nearest integer, ties to
// even (the add's own rounding does it), for every |x| < 2^23; from 2^23 on, every float32 is an
// integer already (and infinities and NaN pass as they are). floor and ceil correct that
// rounding by one where it went the wrong way. bfloat16 and float16 compute in float32, where
// their values are exact. Integer tensors are their own floor (the CPU's kernel, recorded).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "fallback.hpp"
#include "op_support.hpp"

namespace torch_trn {
namespace {

constexpr double kTwo23 = 8388608.0;

enum class Rounding { kFloor, kCeil, kTrunc, kRound, kFrac };

// x rounded to the nearest integer (ties to even) in float32, sign kept.
at::Tensor nearest(const at::Tensor &x) {
  const at::Tensor magnitude = at::abs(x);
  const at::Tensor rounded = (magnitude + kTwo23) - kTwo23;
  const at::Tensor signed_rounded = at::where(x < 0, -rounded, rounded);
  return at::where(magnitude < kTwo23, signed_rounded, x);
}

at::Tensor rounded(const at::Tensor &self, Rounding mode) {
  const at::Tensor x = self.to(at::kFloat);
  const at::Tensor r = nearest(x);
  const at::Tensor one = at::ones({}, x.options());
  const at::Tensor zero = at::zeros({}, x.options());
  const at::Tensor floor = r - at::where(r > x, one, zero);
  const at::Tensor ceil = r + at::where(r < x, one, zero);
  // A zero result has x's sign, as the CPU's (ceil(-0.3) is -0.0): x * 0 where |x| < 1.
  const auto signed_zero = [&](const at::Tensor &v) { return at::where(v == 0, x * 0.0, v); };
  switch (mode) {
    case Rounding::kFloor: return signed_zero(floor);
    case Rounding::kCeil: return signed_zero(ceil);
    case Rounding::kRound: return signed_zero(r);
    case Rounding::kTrunc: return signed_zero(at::where(x < 0, ceil, floor));
    case Rounding::kFrac: return x - signed_zero(at::where(x < 0, ceil, floor));
  }
  return r;
}

at::Tensor &rounding_out(const char *name, Rounding mode, at::Tensor (*cpu)(const at::Tensor &),
                         const at::Tensor &self, at::Tensor &out) {
  check_same_device(name, {self, out});
  if (!is_float_type(self.scalar_type()) || out.scalar_type() != self.scalar_type()) {
    const at::Tensor result = cpu(self.cpu());
    record_cpu_run(std::string("aten::") + name + ".out");
    resize_out(out, result.sizes());
    return out.copy_(result);
  }
  resize_out(out, self.sizes());
  if (self.numel() == 0) return out;
  OpScope scope(self);
  return out.copy_(rounded(self, mode));
}

at::Tensor &floor_out(const at::Tensor &self, at::Tensor &out) {
  return rounding_out(
      "floor", Rounding::kFloor, [](const at::Tensor &x) { return at::floor(x); }, self, out);
}
at::Tensor &ceil_out(const at::Tensor &self, at::Tensor &out) {
  return rounding_out(
      "ceil", Rounding::kCeil, [](const at::Tensor &x) { return at::ceil(x); }, self, out);
}
at::Tensor &trunc_out(const at::Tensor &self, at::Tensor &out) {
  return rounding_out(
      "trunc", Rounding::kTrunc, [](const at::Tensor &x) { return at::trunc(x); }, self, out);
}
at::Tensor &round_out(const at::Tensor &self, at::Tensor &out) {
  return rounding_out(
      "round", Rounding::kRound, [](const at::Tensor &x) { return at::round(x); }, self, out);
}
at::Tensor &frac_out(const at::Tensor &self, at::Tensor &out) {
  return rounding_out(
      "frac", Rounding::kFrac, [](const at::Tensor &x) { return at::frac(x); }, self, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("floor.out", TORCH_FN(floor_out));
  m.impl("ceil.out", TORCH_FN(ceil_out));
  m.impl("trunc.out", TORCH_FN(trunc_out));
  m.impl("round.out", TORCH_FN(round_out));
  m.impl("frac.out", TORCH_FN(frac_out));
}

}  // namespace torch_trn
