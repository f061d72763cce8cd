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

// The CPU's kernel of each mode, and its name, for the dtypes the device path does not take.
struct CpuRounding {
  const char *name;
  at::Tensor (*run)(const at::Tensor &);
};
const CpuRounding kCpu[] = {
    {"aten::floor.out", [](const at::Tensor &x) { return at::floor(x); }},
    {"aten::ceil.out", [](const at::Tensor &x) { return at::ceil(x); }},
    {"aten::trunc.out", [](const at::Tensor &x) { return at::trunc(x); }},
    {"aten::round.out", [](const at::Tensor &x) { return at::round(x); }},
    {"aten::frac.out", [](const at::Tensor &x) { return at::frac(x); }},
};

template <Rounding mode>
at::Tensor &rounding_out(const at::Tensor &self, at::Tensor &out) {
  const CpuRounding &cpu = kCpu[static_cast<int>(mode)];
  check_same_device(cpu.name, {self, out});
  if (!is_float_type(self.scalar_type()) || out.scalar_type() != self.scalar_type()) {
    const at::Tensor result = cpu.run(self.cpu());
    record_cpu_run(cpu.name);
    resize_out(out, result.sizes());
    return out.copy_(result);
  }
  resize_out(out, self.sizes());
  if (self.numel() == 0) return out;
  OpScope scope(self);
  return out.copy_(rounded(self, mode));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("floor.out", TORCH_FN(rounding_out<Rounding::kFloor>));
  m.impl("ceil.out", TORCH_FN(rounding_out<Rounding::kCeil>));
  m.impl("trunc.out", TORCH_FN(rounding_out<Rounding::kTrunc>));
  m.impl("round.out", TORCH_FN(rounding_out<Rounding::kRound>));
  m.impl("frac.out", TORCH_FN(rounding_out<Rounding::kFrac>));
}

}  // namespace torch_trn
