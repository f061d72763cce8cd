// Elementwise kernels: unary ops and their backward, binary ops with broadcasting (a CPU
// 0-dim operand, what `x * 2.0` and the optimizers pass, becomes a launch scalar), the
// comparisons, and the fused forms the optimizers use (add with alpha, addcmul, addcdiv). Torch's
// structured kernels reach these as .out overloads with the output already sized and typed.
#include <ATen/native/TypeProperties.h>
#include <torch/library.h>

#include <string_view>

#include "fallback.hpp"
#include "op_support.hpp"

namespace torch_trn {
namespace {

void unary(trn_ops_unary_op_t op, const at::Tensor &self, const at::Tensor &out, const char *name) {
  resize_out(out, self.sizes());
  if (out.numel() == 0) return;
  OpScope scope(out);
  const OutputOrder l = in_output_order(out, {self});
  const auto v = elementwise_views(l.out, {l.inputs[0]});
  check_ops(trn_ops_unary(scope.queue(), op, &v[0], &v[1], nullptr), name);
}

void unary_backward(trn_ops_unary_op_t op, const at::Tensor &grad_out, const at::Tensor &self,
                    const at::Tensor &grad_in, const char *name) {
  resize_out(grad_in, self.sizes());
  if (grad_in.numel() == 0) return;
  OpScope scope(grad_in);
  const OutputOrder l = in_output_order(grad_in, {grad_out, self});
  const auto v = elementwise_views(l.out, {l.inputs[0], l.inputs[1]});
  check_ops(trn_ops_unary_backward(scope.queue(), op, &v[0], &v[1], &v[2], nullptr), name);
}

// out = a <op> b, either operand possibly a CPU scalar (not both: torch computes that on the CPU).
void binary(trn_ops_binary_op_t op, const at::Tensor &a_in, const at::Tensor &b_in,
            const at::Tensor &out, const char *name) {
  if (out.numel() == 0) return;
  OpScope scope(out);
  // A CPU integer beyond 2^53 goes as a 0-dim tensor on the device, exact, not a double.
  auto operand = [&](const at::Tensor &t) {
    return t.device().is_cpu() && t.numel() == 1 && !exact_as_double(t.item()) ? t.to(out.device())
                                                                               : t;
  };
  const at::Tensor a = operand(a_in), b = operand(b_in);
  const OutputOrder l = in_output_order(out, {a, b});
  std::vector<trn_ops_tensor_t> v;
  if (a.device().is_cpu()) {
    v = elementwise_views(l.out, {l.inputs[1]});
    check_ops(trn_ops_binary_scalar(scope.queue(), op, &v[0], &v[1], cpu_scalar_of(a), 1, nullptr),
              name);
  } else if (b.device().is_cpu()) {
    v = elementwise_views(l.out, {l.inputs[0]});
    check_ops(trn_ops_binary_scalar(scope.queue(), op, &v[0], &v[1], cpu_scalar_of(b), 0, nullptr),
              name);
  } else {
    v = elementwise_views(l.out, {l.inputs[0], l.inputs[1]});
    check_ops(trn_ops_binary(scope.queue(), op, &v[0], &v[1], &v[2], nullptr), name);
  }
  const trn_ops_tensor_t &o = v[0];
  // A bool result of arithmetic (True + True) is its value's truth, as PyTorch stores it: 0 or 1.
  if (out.scalar_type() == at::kBool && op < TRN_OPS_EQ)
    check_ops(trn_ops_binary_scalar(scope.queue(), TRN_OPS_NE, &o, &o, 0.0, 0, nullptr), name);
}

void binary_scalar(trn_ops_binary_op_t op, const at::Tensor &a, double scalar,
                   const at::Tensor &out, const char *name) {
  if (out.numel() == 0) return;
  OpScope scope(out);
  const OutputOrder l = in_output_order(out, {a});
  const auto v = elementwise_views(l.out, {l.inputs[0]});
  check_ops(trn_ops_binary_scalar(scope.queue(), op, &v[0], &v[1], scalar, 0, nullptr), name);
}

// `b * alpha` as its own tensor (alpha == 1: b itself), in the output's dtype.
at::Tensor scaled(const at::Tensor &b, double alpha, const at::Tensor &like) {
  if (alpha == 1.0) return b;
  // A double: a wrapped Python int times a fractional alpha must not be truncated.
  if (b.device().is_cpu())
    return at::scalar_tensor(cpu_scalar_of(b) * alpha, b.options().dtype(at::kDouble));
  at::Tensor t = empty_on(like, b.sizes(), like.scalar_type());
  binary_scalar(TRN_OPS_MUL, b, alpha, t, "mul");
  return t;
}

// The result dtype of arithmetic on the operands; true division's of integers is the default
// float dtype.
at::ScalarType arithmetic_type(const at::Tensor &a, const at::Tensor &b, bool true_division) {
  const at::ScalarType type = at::result_type(a, b);
  if (true_division && at::isIntegralType(type, /*includeBool=*/true))
    return c10::typeMetaToScalarType(c10::get_default_dtype());
  return type;
}

at::Tensor &add_out(const at::Tensor &self, const at::Tensor &other, const at::Scalar &alpha,
                    at::Tensor &out) {
  prepare_out(out, {self, other}, arithmetic_type(self, other, false));
  binary(TRN_OPS_ADD, self, scaled(other, scalar_of(alpha), out), out, "add");
  return out;
}
at::Tensor &sub_out(const at::Tensor &self, const at::Tensor &other, const at::Scalar &alpha,
                    at::Tensor &out) {
  prepare_out(out, {self, other}, arithmetic_type(self, other, false));
  binary(TRN_OPS_SUB, self, scaled(other, scalar_of(alpha), out), out, "sub");
  return out;
}

#define TRN_BINARY_OUT(fn, op, name)                                                 \
  at::Tensor &fn(const at::Tensor &self, const at::Tensor &other, at::Tensor &out) { \
    c10::optional<at::ScalarType> type;                                              \
    if (op < TRN_OPS_EQ) type = arithmetic_type(self, other, op == TRN_OPS_DIV);     \
    prepare_out(out, {self, other}, type);                                           \
    binary(op, self, other, out, name);                                              \
    return out;                                                                      \
  }
TRN_BINARY_OUT(mul_out, TRN_OPS_MUL, "mul")
TRN_BINARY_OUT(div_out, TRN_OPS_DIV, "div")
TRN_BINARY_OUT(maximum_out, TRN_OPS_MAXIMUM, "maximum")
TRN_BINARY_OUT(minimum_out, TRN_OPS_MINIMUM, "minimum")
TRN_BINARY_OUT(pow_tensor_out, TRN_OPS_POW, "pow")
TRN_BINARY_OUT(eq_tensor_out, TRN_OPS_EQ, "eq")
TRN_BINARY_OUT(ne_tensor_out, TRN_OPS_NE, "ne")
TRN_BINARY_OUT(lt_tensor_out, TRN_OPS_LT, "lt")
TRN_BINARY_OUT(le_tensor_out, TRN_OPS_LE, "le")
TRN_BINARY_OUT(gt_tensor_out, TRN_OPS_GT, "gt")
TRN_BINARY_OUT(ge_tensor_out, TRN_OPS_GE, "ge")
#undef TRN_BINARY_OUT

#define TRN_COMPARE_SCALAR_OUT(fn, op, name)                                         \
  at::Tensor &fn(const at::Tensor &self, const at::Scalar &other, at::Tensor &out) { \
    prepare_out(out, {self}, c10::nullopt);                                          \
    binary(op, self, at::scalar_tensor(other, other.type()), out, name);             \
    return out;                                                                      \
  }
TRN_COMPARE_SCALAR_OUT(eq_scalar_out, TRN_OPS_EQ, "eq")
TRN_COMPARE_SCALAR_OUT(ne_scalar_out, TRN_OPS_NE, "ne")
TRN_COMPARE_SCALAR_OUT(lt_scalar_out, TRN_OPS_LT, "lt")
TRN_COMPARE_SCALAR_OUT(le_scalar_out, TRN_OPS_LE, "le")
TRN_COMPARE_SCALAR_OUT(gt_scalar_out, TRN_OPS_GT, "gt")
TRN_COMPARE_SCALAR_OUT(ge_scalar_out, TRN_OPS_GE, "ge")
#undef TRN_COMPARE_SCALAR_OUT

at::Tensor &pow_scalar_out(const at::Tensor &self, const at::Scalar &exponent, at::Tensor &out) {
  prepare_out(out, {self}, at::result_type(self, exponent));
  const double e = scalar_of(exponent);
  if (e == 2.0)
    unary(TRN_OPS_SQUARE, self, out, "pow");
  else
    binary_scalar(TRN_OPS_POW, self, e, out, "pow");
  return out;
}

#define TRN_UNARY_OUT(fn, op, name)                         \
  at::Tensor &fn(const at::Tensor &self, at::Tensor &out) { \
    unary(op, self, out, name);                             \
    return out;                                             \
  }
TRN_UNARY_OUT(neg_out, TRN_OPS_NEG, "neg")
TRN_UNARY_OUT(abs_out, TRN_OPS_ABS, "abs")
TRN_UNARY_OUT(exp_out, TRN_OPS_EXP, "exp")
TRN_UNARY_OUT(log_out, TRN_OPS_LOG, "log")
TRN_UNARY_OUT(sqrt_out, TRN_OPS_SQRT, "sqrt")
TRN_UNARY_OUT(rsqrt_out, TRN_OPS_RSQRT, "rsqrt")
TRN_UNARY_OUT(tanh_out, TRN_OPS_TANH, "tanh")
TRN_UNARY_OUT(sin_out, TRN_OPS_SIN, "sin")
TRN_UNARY_OUT(cos_out, TRN_OPS_COS, "cos")
TRN_UNARY_OUT(sigmoid_out, TRN_OPS_SIGMOID, "sigmoid")
TRN_UNARY_OUT(reciprocal_out, TRN_OPS_RECIPROCAL, "reciprocal")
TRN_UNARY_OUT(silu_out, TRN_OPS_SILU, "silu")
#undef TRN_UNARY_OUT

trn_ops_unary_op_t gelu_kind(c10::string_view approximate) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh",
              "gelu's approximate must be 'none' or 'tanh', got '", approximate, "'");
  return approximate == "tanh" ? TRN_OPS_GELU_TANH : TRN_OPS_GELU;
}

at::Tensor &gelu_out(const at::Tensor &self, c10::string_view approximate, at::Tensor &out) {
  unary(gelu_kind(approximate), self, out, "gelu");
  return out;
}
at::Tensor &gelu_backward_out(const at::Tensor &grad, const at::Tensor &self,
                              c10::string_view approximate, at::Tensor &grad_in) {
  unary_backward(gelu_kind(approximate), grad, self, grad_in, "gelu_backward");
  return grad_in;
}
at::Tensor &silu_backward_out(const at::Tensor &grad, const at::Tensor &self, at::Tensor &grad_in) {
  unary_backward(TRN_OPS_SILU, grad, self, grad_in, "silu_backward");
  return grad_in;
}

at::Tensor relu(const at::Tensor &self) {
  at::Tensor out = at::empty(self.sizes(), self.options());
  unary(TRN_OPS_RELU, self, out, "relu");
  return out;
}
at::Tensor &relu_(at::Tensor &self) {
  unary(TRN_OPS_RELU, self, self, "relu");
  return self;
}

// grad where self > threshold, else 0: relu's backward when threshold is 0.
at::Tensor &threshold_backward_out(const at::Tensor &grad, const at::Tensor &self,
                                   const at::Scalar &threshold, at::Tensor &grad_in) {
  const double t = scalar_of(threshold);
  if (t == 0.0) {
    unary_backward(TRN_OPS_RELU, grad, self, grad_in, "threshold_backward");
    return grad_in;
  }
  resize_out(grad_in, self.sizes());
  if (grad_in.numel() == 0) return grad_in;
  // A select, not a product: an infinite gradient where self <= threshold is 0, not NaN.
  OpScope scope(grad_in);
  at::Tensor mask = empty_on(grad_in, self.sizes(), at::kBool);
  binary_scalar(TRN_OPS_GT, self, t, mask, "threshold_backward");
  t_where(scope.queue(), grad_in, mask, grad, at::zeros({}, grad_in.options()));
  return grad_in;
}

// out = self + value * (t1 <op> t2): Adam's second moment (mul) and its update (div).
void add_combined(trn_ops_binary_op_t op, const at::Tensor &self, const at::Tensor &t1,
                  const at::Tensor &t2, double value, const at::Tensor &out, const char *name) {
  at::Tensor combined = empty_on(out, out.sizes(), out.scalar_type());
  binary(op, t1, t2, combined, name);
  binary(TRN_OPS_ADD, self, scaled(combined, value, out), out, name);
}
at::Tensor &addcmul_out(const at::Tensor &self, const at::Tensor &t1, const at::Tensor &t2,
                        const at::Scalar &value, at::Tensor &out) {
  prepare_out(out, {self, t1, t2}, at::native::result_type({self, t1, t2}));
  add_combined(TRN_OPS_MUL, self, t1, t2, scalar_of(value), out, "addcmul");
  return out;
}
at::Tensor &addcdiv_out(const at::Tensor &self, const at::Tensor &t1, const at::Tensor &t2,
                        const at::Scalar &value, at::Tensor &out) {
  prepare_out(out, {self, t1, t2}, at::native::result_type({self, t1, t2}));
  add_combined(TRN_OPS_DIV, self, t1, t2, scalar_of(value), out, "addcdiv");
  return out;
}

// clamp as maximum then minimum with scalars (a bound not given is no step).
at::Tensor &clamp_out(const at::Tensor &self, const c10::optional<at::Scalar> &min,
                      const c10::optional<at::Scalar> &max, at::Tensor &out) {
  TORCH_CHECK(min || max, "clamp: at least one of min and max must be given");
  resize_out(out, self.sizes());
  const at::Tensor *from = &self;
  if (min) {
    binary_scalar(TRN_OPS_MAXIMUM, *from, scalar_of(*min), out, "clamp");
    from = &out;
  }
  if (max) binary_scalar(TRN_OPS_MINIMUM, *from, scalar_of(*max), out, "clamp");
  return out;
}
at::Tensor &clamp_min_out(const at::Tensor &self, const at::Scalar &min, at::Tensor &out) {
  return clamp_out(self, min, c10::nullopt, out);
}
at::Tensor &clamp_max_out(const at::Tensor &self, const at::Scalar &max, at::Tensor &out) {
  return clamp_out(self, c10::nullopt, max, out);
}

// where: an exact select of the values' bits. CPU scalars (torch.where(c, x, 0.0)) become 0-dim
// trn tensors, broadcast like any operand.
at::Tensor where(const at::Tensor &condition, const at::Tensor &self, const at::Tensor &other) {
  check_same_device("where", {condition, self, other});
  const at::Tensor &on =
      condition.device().is_cpu() ? self.device().is_cpu() ? other : self : condition;
  const c10::Device device = on.device();
  const auto type = at::result_type(self, other);
  const at::Tensor a = self.to(device, type), b = other.to(device, type);
  const at::Tensor c = condition.to(device);
  at::Tensor out =
      at::empty(at::infer_size(at::infer_size(c.sizes(), a.sizes()), b.sizes()), a.options());
  if (out.numel() == 0) return out;
  OpScope scope(out);
  t_where(scope.queue(), out, c, a, b);
  return out;
}
at::Tensor &where_out(const at::Tensor &condition, const at::Tensor &self, const at::Tensor &other,
                      at::Tensor &out) {
  const at::Tensor result = torch_trn::where(condition, self, other);
  resize_out(out, result.sizes());
  return out.copy_(result);
}

// lerp as PyTorch's CPU kernel computes it, for its rounding: from the nearer end,
// `self + w * (end - self)` below w = 0.5 and `end - (end - self) * (1 - w)` from it.
at::Tensor &lerp_scalar_out(const at::Tensor &self, const at::Tensor &end, const at::Scalar &weight,
                            at::Tensor &out) {
  const at::Tensor diff = at::sub(end, self);
  const double w = weight.toDouble();
  return w < 0.5 ? at::add_out(out, self, diff, w) : at::sub_out(out, end, diff, 1.0 - w);
}
at::Tensor &lerp_tensor_out(const at::Tensor &self, const at::Tensor &end, const at::Tensor &weight,
                            at::Tensor &out) {
  const at::Tensor diff = at::sub(end, self);
  const at::Tensor low = at::add(self, weight * diff), high = at::sub(end, diff * (1 - weight));
  return where_out(weight < 0.5, low, high, out);
}

// clamp with tensor bounds: maximum with min, then minimum with max (NaN in x or a bound gives
// NaN; min > max gives max, as the CPU's). Non-float tensors on the CPU, recorded.
at::Tensor &clamp_tensor_out(const at::Tensor &self, const c10::optional<at::Tensor> &min,
                             const c10::optional<at::Tensor> &max, at::Tensor &out) {
  const bool has_min = min && min->defined(), has_max = max && max->defined();
  TORCH_CHECK(has_min || has_max, "torch.clamp: At least one of 'min' or 'max' must not be None");
  check_same_device("clamp",
                    {self, has_min ? *min : at::Tensor(), has_max ? *max : at::Tensor(), out});
  const bool floats = is_float_type(self.scalar_type()) && is_float_type(out.scalar_type()) &&
                      (!has_min || min->is_floating_point()) &&
                      (!has_max || max->is_floating_point());
  if (!floats) {
    const auto host = [](const c10::optional<at::Tensor> &t) {
      return t && t->defined() ? c10::optional<at::Tensor>(t->cpu()) : c10::nullopt;
    };
    const at::Tensor result = at::clamp(self.cpu(), host(min), host(max));
    record_cpu_run("aten::clamp.Tensor_out");
    prepare_out(out, {result}, result.scalar_type());
    return out.copy_(result);
  }
  at::Tensor result = self;
  if (has_min) result = at::maximum(result, *min);
  if (has_max) result = at::minimum(result, *max);
  prepare_out(out, {result}, result.scalar_type());
  return out.copy_(result);
}

// fmax and fmin: the larger (smaller) of the two, the number where one of them is NaN.
at::Tensor &nan_ignoring(const at::Tensor &self, const at::Tensor &other, at::Tensor &out,
                         bool larger, const char *name) {
  check_same_device(name, {self, other, out});
  if (!is_float_type(self.scalar_type()) || !is_float_type(out.scalar_type()) ||
      !other.is_floating_point()) {
    const at::Tensor result =
        larger ? at::fmax(self.cpu(), other.cpu()) : at::fmin(self.cpu(), other.cpu());
    record_cpu_run(std::string("aten::") + name + ".out");
    prepare_out(out, {result}, result.scalar_type());
    return out.copy_(result);
  }
  const at::Tensor extreme = larger ? at::maximum(self, other) : at::minimum(self, other);
  const at::Tensor result =
      at::where(at::ne(self, self), other, at::where(at::ne(other, other), self, extreme));
  prepare_out(out, {result}, result.scalar_type());
  return out.copy_(result);
}
at::Tensor &fmax_out(const at::Tensor &self, const at::Tensor &other, at::Tensor &out) {
  return nan_ignoring(self, other, out, true, "fmax");
}
at::Tensor &fmin_out(const at::Tensor &self, const at::Tensor &other, at::Tensor &out) {
  return nan_ignoring(self, other, out, false, "fmin");
}

// div with a rounding mode: "trunc" is trunc(a / b), as the CPU computes it, on the device;
// "floor" follows Python's a // b, which the CPU computes through fmod (floor(a / b) can differ
// by one where a / b rounds up to an integer): on the CPU, recorded.
at::Tensor &div_mode_out(const at::Tensor &self, const at::Tensor &other,
                         c10::optional<c10::string_view> rounding_mode, at::Tensor &out) {
  if (!rounding_mode) return div_out(self, other, out);
  check_same_device("div", {self, other, out});
  const bool trunc = *rounding_mode == "trunc";
  const at::ScalarType type = at::result_type(self, other);
  if (trunc && is_float_type(type) && is_float_type(out.scalar_type())) {
    // The quotient in float32, truncated before it is rounded to a narrower dtype, as the CPU
    // computes it (a bfloat16 quotient of 2.996 rounds to 3 first otherwise).
    const at::Tensor result = at::trunc(at::div(self.to(at::kFloat), other.to(at::kFloat)));
    prepare_out(out, {self, other}, type);
    return out.copy_(result);
  }
  const at::Tensor result =
      at::div(self.cpu(), other.is_cpu() ? other : other.cpu(), rounding_mode);
  record_cpu_run("aten::div.out_mode");
  prepare_out(out, {result}, result.scalar_type());
  return out.copy_(result);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("add.out", TORCH_FN(add_out));
  m.impl("sub.out", TORCH_FN(sub_out));
  m.impl("mul.out", TORCH_FN(mul_out));
  m.impl("div.out", TORCH_FN(div_out));
  m.impl("maximum.out", TORCH_FN(maximum_out));
  m.impl("minimum.out", TORCH_FN(minimum_out));
  m.impl("pow.Tensor_Tensor_out", TORCH_FN(pow_tensor_out));
  m.impl("pow.Tensor_Scalar_out", TORCH_FN(pow_scalar_out));
  m.impl("eq.Tensor_out", TORCH_FN(eq_tensor_out));
  m.impl("ne.Tensor_out", TORCH_FN(ne_tensor_out));
  m.impl("lt.Tensor_out", TORCH_FN(lt_tensor_out));
  m.impl("le.Tensor_out", TORCH_FN(le_tensor_out));
  m.impl("gt.Tensor_out", TORCH_FN(gt_tensor_out));
  m.impl("ge.Tensor_out", TORCH_FN(ge_tensor_out));
  m.impl("eq.Scalar_out", TORCH_FN(eq_scalar_out));
  m.impl("ne.Scalar_out", TORCH_FN(ne_scalar_out));
  m.impl("lt.Scalar_out", TORCH_FN(lt_scalar_out));
  m.impl("le.Scalar_out", TORCH_FN(le_scalar_out));
  m.impl("gt.Scalar_out", TORCH_FN(gt_scalar_out));
  m.impl("ge.Scalar_out", TORCH_FN(ge_scalar_out));
  m.impl("neg.out", TORCH_FN(neg_out));
  m.impl("abs.out", TORCH_FN(abs_out));
  m.impl("exp.out", TORCH_FN(exp_out));
  m.impl("log.out", TORCH_FN(log_out));
  m.impl("sqrt.out", TORCH_FN(sqrt_out));
  m.impl("rsqrt.out", TORCH_FN(rsqrt_out));
  m.impl("tanh.out", TORCH_FN(tanh_out));
  m.impl("sin.out", TORCH_FN(sin_out));
  m.impl("cos.out", TORCH_FN(cos_out));
  m.impl("sigmoid.out", TORCH_FN(sigmoid_out));
  m.impl("reciprocal.out", TORCH_FN(reciprocal_out));
  m.impl("silu.out", TORCH_FN(silu_out));
  m.impl("gelu.out", TORCH_FN(gelu_out));
  m.impl("gelu_backward.grad_input", TORCH_FN(gelu_backward_out));
  m.impl("silu_backward.grad_input", TORCH_FN(silu_backward_out));
  m.impl("relu", TORCH_FN(relu));
  m.impl("relu_", TORCH_FN(relu_));
  m.impl("threshold_backward.grad_input", TORCH_FN(threshold_backward_out));
  m.impl("addcmul.out", TORCH_FN(addcmul_out));
  m.impl("addcdiv.out", TORCH_FN(addcdiv_out));
  m.impl("clamp.out", TORCH_FN(clamp_out));
  m.impl("clamp.Tensor_out", TORCH_FN(clamp_tensor_out));
  m.impl("fmax.out", TORCH_FN(fmax_out));
  m.impl("fmin.out", TORCH_FN(fmin_out));
  m.impl("div.out_mode", TORCH_FN(div_mode_out));
  m.impl("clamp_min.out", TORCH_FN(clamp_min_out));
  m.impl("clamp_max.out", TORCH_FN(clamp_max_out));
  m.impl("where.self", TORCH_FN(where));
  m.impl("where.self_out", TORCH_FN(where_out));
  m.impl("lerp.Scalar_out", TORCH_FN(lerp_scalar_out));
  m.impl("lerp.Tensor_out", TORCH_FN(lerp_tensor_out));
}

}  // namespace torch_trn
