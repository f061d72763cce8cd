// The elementwise ops of trn_ops.h: unary ops and their backward, binary ops with broadcasting
// and scalar variants, where, copy/cast, fill and arange. Each is an expression kernel when its
// tensors allow (docs/ops.md), and the float64 host reference otherwise.
#include <fmt/format.h>

#include <cmath>

#include "isa/dtype.hpp"
#include "ops/expression_op.hpp"
#include "ops/host/integer.hpp"
#include "ops/host_path.hpp"
#include "ops/integer_add_op.hpp"
#include "ops/kernel_op.hpp"
#include "ops/op_support.hpp"
#include "ops/staging.hpp"

namespace trn::ops {

namespace {

// `value` as a tensor of `dtype` holds it (through f32, as PyTorch's half types convert).
double rounded_to(trn_dtype_t dtype, double value) {
  const float f = static_cast<float>(value);
  if (dtype == TRN_DTYPE_BF16) return isa::bf16_to_f32(isa::f32_to_bf16(f));
  if (dtype == TRN_DTYPE_F16) return isa::f16_to_f32(isa::f32_to_f16(f));
  return value;
}

using isa::ActFunc;
using isa::AluOp;

const char *const kUnaryNames[] = {"neg",        "abs",     "exp",  "log",  "sqrt",      "rsqrt",
                                   "tanh",       "sigmoid", "relu", "gelu", "gelu_tanh", "silu",
                                   "reciprocal", "square",  "sin",  "cos"};
const char *const kBinaryNames[] = {"add", "sub", "mul", "div", "maximum", "minimum", "pow",
                                    "eq",  "ne",  "lt",  "le",  "gt",      "ge"};

bool valid_unary(trn_ops_unary_op_t op) {
  return op >= TRN_OPS_NEG && op <= TRN_OPS_COS;
}
bool valid_binary(trn_ops_binary_op_t op) {
  return op >= TRN_OPS_ADD && op <= TRN_OPS_GE;
}
bool is_comparison(trn_ops_binary_op_t op) {
  return op >= TRN_OPS_EQ;
}

host::Unary host_unary(trn_ops_unary_op_t op) {
  return static_cast<host::Unary>(op - TRN_OPS_NEG);
}
host::Binary host_binary(trn_ops_binary_op_t op) {
  return static_cast<host::Binary>(op - TRN_OPS_ADD);
}

AluOp alu_of(trn_ops_binary_op_t op) {
  static const AluOp kOps[] = {
      AluOp::kAdd,       AluOp::kSubtract, AluOp::kMultiply,    AluOp::kDivide,   AluOp::kMax,
      AluOp::kMin,       AluOp::kPower,    AluOp::kEqual,       AluOp::kNotEqual, AluOp::kLess,
      AluOp::kLessEqual, AluOp::kGreater,  AluOp::kGreaterEqual};
  return kOps[op - TRN_OPS_ADD];
}

// Values the device's fp32 arithmetic holds exactly.
bool exact_in_f32(trn_dtype_t t) {
  return dtype_is_float(t) || t == TRN_DTYPE_I16 || t == TRN_DTYPE_I8 || t == TRN_DTYPE_U8;
}

// An exact integer result (integer_result) goes into an int64 output as a pair of int32 words
// (the expression kernel's ExprOutput::int64): the device has no int64 arithmetic, but it need
// not compute in int64 to write one.
bool int64_output(const Tensor &out, bool integer_result) {
  return integer_result && out.dtype == TRN_DTYPE_I64;
}

// Why the device cannot compute this elementwise op, if it cannot.
std::optional<std::string> elementwise_reason(const std::vector<const Tensor *> &inputs,
                                              const Tensor &out, bool integer_result,
                                              bool cast_to_float) {
  std::vector<const Tensor *> all = inputs;
  if (!int64_output(out, integer_result)) all.push_back(&out);
  if (auto r = host_reason(all)) return r;
  if (!out.contiguous()) return fmt::format("the output {} is not contiguous", out.describe());
  // A cast to a float dtype rounds an integer to nearest even, as PyTorch's conversion does: an
  // i32 beyond 2^24 is rounded, not computed with.
  for (const Tensor *t : inputs)
    if (!exact_in_f32(t->dtype) && !(cast_to_float && dtype_is_float(out.dtype)))
      return fmt::format("{} holds integers the device's fp32 arithmetic would round",
                         t->describe());
  if (!dtype_is_float(out.dtype) && !integer_result)
    return fmt::format(
        "an integer result ({}) must be exact; the device computes in fp32 and "
        "rounds",
        out.describe());
  return std::nullopt;
}

// The common path: validate shapes, pick device or host, queue.
struct Elementwise {
  const char *name;
  std::vector<const Tensor *> inputs;
  const Tensor *out;
  bool integer_result = false;  // the result is an exact integer (comparisons)
  // The steps on the device, returning the result's value (inputs are values 0..n-1).
  std::function<uint16_t(ExpressionOp &)> device;
  std::function<host::Array(const Arrays &)> host;
  std::optional<std::string> not_on_device = std::nullopt;  // a reason of the op's own
  std::vector<float> scalars = {};
  bool cast_to_float = false;  // the op only converts its input (trn_ops_copy)
  // The op on int64 values, exact, where it has such a form (host_path.hpp's integer ops): taken
  // on the host when every tensor has an integer dtype.
  IntegerElementwise integer = nullptr;
  // An exact device path of the op's own for integer tensors (integer_add_op.hpp), tried first
  // on the (staged) inputs: nullopt when it queued the op.
  std::function<std::optional<std::string>(trn_queue_t, const trn_sync_t *,
                                           const std::vector<const Tensor *> &)>
      integer_device = nullptr;
};

void run_elementwise(trn_queue_t queue, const trn_sync_t *sync, const Elementwise &e) {
  Shape shape = e.out->shape;
  for (const Tensor *t : e.inputs) {
    const Shape b = broadcast_shapes(shape, t->shape, e.name);
    if (b != e.out->shape)
      invalid(fmt::format("{}: input {} does not broadcast to the output {}", e.name, t->describe(),
                          e.out->describe()));
  }
  std::vector<const Tensor *> all = e.inputs;
  all.push_back(e.out);
  check_same_device(all, e.name);
  check_overlap({e.out}, e.inputs, e.name, true);
  if (e.out->numel() == 0) return queue_empty_op(queue, sync);
  // Strided inputs are made contiguous on the device first, when the op may run there.
  Staging staging(queue, sync);
  std::vector<Tensor> staged;
  staged.reserve(e.inputs.size());
  const bool may_run_on_device =
      !e.not_on_device && (int64_output(*e.out, e.integer_result) || !host_reason({e.out}, false));
  for (const Tensor *t : e.inputs)
    staged.push_back(may_run_on_device ? staging.contiguous(*t) : *t);
  std::vector<const Tensor *> inputs;
  for (const Tensor &t : staged) inputs.push_back(&t);
  const trn_sync_t *op_sync = staging.op_sync();
  if (e.integer_device && !e.integer_device(queue, op_sync, inputs)) return;
  std::optional<std::string> reason = e.not_on_device;
  if (!reason) reason = elementwise_reason(inputs, *e.out, e.integer_result, e.cast_to_float);
  std::optional<ElementwisePlan> plan;
  if (!reason) {
    plan = plan_elementwise(e.out->shape, inputs);
    if (!plan) {
      // A broadcast no [rows, cols] split expresses (a middle dim): the broadcast inputs are
      // expanded into scratch on the DMA engines, which the kernel then reads as they are.
      for (Tensor &t : staged) t = staging.expanded(t, e.out->shape);
      op_sync = staging.op_sync();
      plan = plan_elementwise(e.out->shape, inputs);
    }
    if (!plan) reason = "the inputs broadcast in more than one place";
  }
  if (!reason) {
    ExpressionOp op;
    op.name = e.name;
    op.inputs = inputs;
    op.scalars = e.scalars;
    op.outputs.push_back({e.out, e.device(op)});
    reason = try_device([&] { launch_expression(queue, op_sync, op, *plan); });
  }
  if (reason && e.integer && all_integer(staged, *e.out))
    return run_integer_elementwise(queue, op_sync, e.name, signature_of(e.inputs, {e.out}), *reason,
                                   staged, *e.out, e.integer);
  if (reason) {
    const Shape out_shape = e.out->shape;
    auto host = e.host;
    run_on_host(queue, op_sync, e.name, signature_of(e.inputs, {e.out}), *reason, staged, {*e.out},
                [host, out_shape](const Arrays &a) {
                  return Arrays{host::broadcast_to(host(a), out_shape)};
                });
  }
}

// The unary op's steps on value `x`.
uint16_t unary_steps(ExpressionOp &op, trn_ops_unary_op_t u, uint16_t x) {
  switch (u) {
    case TRN_OPS_NEG: return op.alu_constant(AluOp::kMultiply, x, -1.0f);
    case TRN_OPS_ABS: return op.alu_constant(AluOp::kAbsMax, x, 0.0f);
    case TRN_OPS_EXP: return op.act(ActFunc::kExp, x);
    case TRN_OPS_LOG: return op.act(ActFunc::kLog, x);
    case TRN_OPS_SQRT: return op.act(ActFunc::kSqrt, x);
    case TRN_OPS_RSQRT: return op.act(ActFunc::kRsqrt, x);
    case TRN_OPS_TANH: return op.act(ActFunc::kTanh, x);
    case TRN_OPS_SIGMOID: return op.act(ActFunc::kSigmoid, x);
    case TRN_OPS_RELU: return op.act(ActFunc::kRelu, x);
    case TRN_OPS_GELU: return op.act(ActFunc::kGelu, x);
    case TRN_OPS_GELU_TANH: return op.act(ActFunc::kGeluTanh, x);
    case TRN_OPS_SILU: return op.act(ActFunc::kSilu, x);
    case TRN_OPS_RECIPROCAL: return op.act(ActFunc::kReciprocal, x);
    case TRN_OPS_SIN: return op.act(ActFunc::kSin, x);
    case TRN_OPS_COS: return op.act(ActFunc::kCos, x);
    default: return op.act(ActFunc::kSquare, x);
  }
}

// d op(x)/dx * g, on values g and x.
uint16_t unary_backward_steps(ExpressionOp &op, trn_ops_unary_op_t u, uint16_t g, uint16_t x) {
  auto mul = [&](uint16_t a, uint16_t b) { return op.alu(AluOp::kMultiply, a, b); };
  auto scale = [&](uint16_t a, float k) { return op.alu_constant(AluOp::kMultiply, a, k); };
  auto one_minus = [&](uint16_t a) { return op.alu_constant(AluOp::kSubtract, a, 1.0f, true); };
  switch (u) {
    case TRN_OPS_NEG: return scale(g, -1.0f);
    case TRN_OPS_ABS: {
      const uint16_t pos = op.alu_constant(AluOp::kGreater, x, 0.0f);
      const uint16_t neg = op.alu_constant(AluOp::kLess, x, 0.0f);
      return mul(g, op.alu(AluOp::kSubtract, pos, neg));
    }
    case TRN_OPS_EXP: return mul(g, op.act(ActFunc::kExp, x));
    case TRN_OPS_LOG: return op.alu(AluOp::kDivide, g, x);
    case TRN_OPS_SQRT: return scale(mul(g, op.act(ActFunc::kRsqrt, x)), 0.5f);
    case TRN_OPS_RSQRT: {
      const uint16_t r = op.act(ActFunc::kRsqrt, x);
      return scale(mul(g, mul(mul(r, r), r)), -0.5f);
    }
    case TRN_OPS_TANH: {
      const uint16_t t = op.act(ActFunc::kTanh, x);
      return mul(g, one_minus(mul(t, t)));
    }
    case TRN_OPS_SIGMOID: {
      const uint16_t s = op.act(ActFunc::kSigmoid, x);
      return mul(g, mul(s, one_minus(s)));
    }
    case TRN_OPS_RELU: {
      // A select, as PyTorch's threshold_backward: an infinite or NaN gradient where x <= 0 is 0
      // (a product would make it NaN), and where x is NaN it passes.
      const uint16_t off = op.alu_constant(AluOp::kLessEqual, x, 0.0f);
      return op.select(off, op.alu_constant(AluOp::kMultiply, off, 0.0f), g);
    }
    case TRN_OPS_SILU: {  // s (1 + x (1 - s))
      const uint16_t s = op.act(ActFunc::kSigmoid, x);
      const uint16_t w = op.alu_constant(AluOp::kAdd, mul(x, one_minus(s)), 1.0f);
      return mul(g, mul(s, w));
    }
    case TRN_OPS_GELU: return mul(g, op.act(ActFunc::kGeluDx, x));
    case TRN_OPS_GELU_TANH: {  // 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2), t = tanh(k (x + c
                               // x^3))
      const float k = 0.7978845608028654f, c = 0.044715f;
      const uint16_t x2 = mul(x, x);
      const uint16_t inner = op.alu(AluOp::kAdd, x, scale(mul(x2, x), c));
      const uint16_t t = op.act(ActFunc::kTanh, scale(inner, k));
      const uint16_t left = scale(op.alu_constant(AluOp::kAdd, t, 1.0f), 0.5f);
      const uint16_t slope = op.alu_constant(AluOp::kAdd, scale(x2, 3.0f * c), 1.0f);
      const uint16_t right = mul(scale(mul(x, one_minus(mul(t, t))), 0.5f * k), slope);
      return mul(g, op.alu(AluOp::kAdd, left, right));
    }
    case TRN_OPS_RECIPROCAL: return scale(op.alu(AluOp::kDivide, g, mul(x, x)), -1.0f);
    case TRN_OPS_SIN: return mul(g, op.act(ActFunc::kCos, x));
    case TRN_OPS_COS: return scale(mul(g, op.act(ActFunc::kSin, x)), -1.0f);
    default: return scale(mul(g, x), 2.0f);  // square
  }
}

void check_unary(trn_ops_unary_op_t op) {
  if (!valid_unary(op))
    fail(TRN_ERROR_INVALID_ENUM,
         fmt::format("op {} is not a trn_ops_unary_op_t (TRN_OPS_NEG..TRN_OPS_COS)",
                     static_cast<int>(op)));
}
void check_binary(trn_ops_binary_op_t op) {
  if (!valid_binary(op))
    fail(TRN_ERROR_INVALID_ENUM,
         fmt::format("op {} is not a trn_ops_binary_op_t (TRN_OPS_ADD..TRN_OPS_GE)",
                     static_cast<int>(op)));
}

// A dtype's exact integers stay exact in fp32 up to 2^24.
bool exact_integer(double v) {
  return std::nearbyint(v) == v && std::fabs(v) <= 16777216.0;
}

}  // namespace

}  // namespace trn::ops

using namespace trn;
using namespace trn::ops;

extern "C" {

TRN_OPS_API const char *trn_ops_unary_op_name(trn_ops_unary_op_t op) {
  return valid_unary(op) ? kUnaryNames[op - TRN_OPS_NEG] : "unknown";
}

TRN_OPS_API const char *trn_ops_binary_op_name(trn_ops_binary_op_t op) {
  return valid_binary(op) ? kBinaryNames[op - TRN_OPS_ADD] : "unknown";
}

TRN_OPS_API trn_result_t trn_ops_unary(trn_queue_t queue, trn_ops_unary_op_t op,
                                       const trn_ops_tensor_t *out, const trn_ops_tensor_t *x,
                                       const trn_sync_t *sync) {
  return run_op("trn_ops_unary", queue, [&] {
    check_unary(op);
    const Tensor o = tensor_arg(out, "out"), in = tensor_arg(x, "x");
    Elementwise e{trn_ops_unary_op_name(op),
                  {&in},
                  &o,
                  false,
                  [op](ExpressionOp &steps) { return unary_steps(steps, op, 0); },
                  [op](const Arrays &a) { return host::unary(host_unary(op), a[0]); }};
    if (host::has_integer_form(host_unary(op)))
      e.integer = [u = host_unary(op)](const int64_t *v) { return host::apply_integer(u, v[0]); };
    run_elementwise(queue, sync, e);
  });
}

TRN_OPS_API trn_result_t trn_ops_unary_backward(trn_queue_t queue, trn_ops_unary_op_t op,
                                                const trn_ops_tensor_t *grad_x,
                                                const trn_ops_tensor_t *grad_out,
                                                const trn_ops_tensor_t *x, const trn_sync_t *sync) {
  return run_op("trn_ops_unary_backward", queue, [&] {
    check_unary(op);
    const Tensor gx = tensor_arg(grad_x, "grad_x"), g = tensor_arg(grad_out, "grad_out"),
                 in = tensor_arg(x, "x");
    check_shape(g, gx.shape, "grad_out", "unary_backward");
    check_shape(in, gx.shape, "x", "unary_backward");
    run_elementwise(
        queue, sync,
        {"unary_backward",
         {&g, &in},
         &gx,
         false,
         [op](ExpressionOp &e) { return unary_backward_steps(e, op, 0, 1); },
         [op](const Arrays &a) { return host::unary_backward(host_unary(op), a[0], a[1]); }});
  });
}

TRN_OPS_API trn_result_t trn_ops_binary(trn_queue_t queue, trn_ops_binary_op_t op,
                                        const trn_ops_tensor_t *out, const trn_ops_tensor_t *a,
                                        const trn_ops_tensor_t *b, const trn_sync_t *sync) {
  return run_op("trn_ops_binary", queue, [&] {
    check_binary(op);
    const Tensor o = tensor_arg(out, "out"), ta = tensor_arg(a, "a"), tb = tensor_arg(b, "b");
    Elementwise e{trn_ops_binary_op_name(op),
                  {&ta, &tb},
                  &o,
                  is_comparison(op),
                  [op](ExpressionOp &x) { return x.alu(alu_of(op), 0, 1); },
                  [op](const Arrays &v) { return host::binary(host_binary(op), v[0], v[1]); }};
    if (host::has_integer_form(host_binary(op)))
      e.integer = [b = host_binary(op)](const int64_t *v) {
        return host::apply_integer(b, v[0], v[1]);
      };
    if (op == TRN_OPS_ADD || op == TRN_OPS_SUB)
      e.integer_device = [&o, op](trn_queue_t q, const trn_sync_t *s, const auto &in) {
        return integer_add_on_device(q, s, o, *in[0], in[1], 0, op == TRN_OPS_SUB);
      };
    run_elementwise(queue, sync, e);
  });
}

TRN_OPS_API trn_result_t trn_ops_binary_scalar(trn_queue_t queue, trn_ops_binary_op_t op,
                                               const trn_ops_tensor_t *out,
                                               const trn_ops_tensor_t *a, double scalar,
                                               int scalar_first, const trn_sync_t *sync) {
  return run_op("trn_ops_binary_scalar", queue, [&] {
    check_binary(op);
    const Tensor o = tensor_arg(out, "out"), ta = tensor_arg(a, "a");
    const bool first = scalar_first != 0;
    // Eager PyTorch compares a bf16 or f16 tensor with a scalar in the tensor's dtype: the
    // scalar rounds to it first (bf16 0.1 == 0.1 is true).
    if (is_comparison(op)) scalar = rounded_to(ta.dtype, scalar);
    const std::string name = fmt::format("{}_scalar", trn_ops_binary_op_name(op));
    Elementwise e{name.c_str(),
                  {&ta},
                  &o,
                  is_comparison(op),
                  [op, first](ExpressionOp &x) { return x.alu_scalar(alu_of(op), 0, 0, first); },
                  [op, first, scalar](const Arrays &v) {
                    const host::Array s = host::Array::full({}, scalar);
                    return first ? host::binary(host_binary(op), s, v[0])
                                 : host::binary(host_binary(op), v[0], s);
                  }};
    e.scalars = {static_cast<float>(scalar)};
    // A scalar that is no int64 (0.5, 2^63) makes the result a float's, as in PyTorch.
    const bool integer_scalar = std::trunc(scalar) == scalar && std::fabs(scalar) < 0x1p63;
    if (host::has_integer_form(host_binary(op)) && integer_scalar)
      e.integer = [b = host_binary(op), s = static_cast<int64_t>(scalar), first](const int64_t *v) {
        return first ? host::apply_integer(b, s, v[0]) : host::apply_integer(b, v[0], s);
      };
    if (integer_scalar && (op == TRN_OPS_ADD || (op == TRN_OPS_SUB && !first)))
      e.integer_device = [&o, op, s = static_cast<int64_t>(scalar)](
                             trn_queue_t q, const trn_sync_t *sy, const auto &in) {
        return integer_add_on_device(q, sy, o, *in[0], nullptr, s, op == TRN_OPS_SUB);
      };
    run_elementwise(queue, sync, e);
  });
}

TRN_OPS_API trn_result_t trn_ops_where(trn_queue_t queue, const trn_ops_tensor_t *out,
                                       const trn_ops_tensor_t *cond, const trn_ops_tensor_t *a,
                                       const trn_ops_tensor_t *b, const trn_sync_t *sync) {
  return run_op("trn_ops_where", queue, [&] {
    const Tensor o = tensor_arg(out, "out"), c = tensor_arg(cond, "cond"), ta = tensor_arg(a, "a"),
                 tb = tensor_arg(b, "b");
    // A select on the values' bits (the expression kernel's kSelect): exact, infinities and NaN
    // included, where a * m + b * (1 - m) would turn an unchosen infinity into NaN. Exact into an
    // integer output only when the values are integers: a float value is truncated on the host,
    // where the device would round it.
    const bool exact = !dtype_is_float(ta.dtype) && !dtype_is_float(tb.dtype);
    Elementwise e{"where",
                  {&c, &ta, &tb},
                  &o,
                  exact,
                  [](ExpressionOp &x) { return x.select(0, 1, 2); },
                  [](const Arrays &v) { return host::where(v[0], v[1], v[2]); }};
    e.integer = [](const int64_t *v) { return v[0] != 0 ? v[1] : v[2]; };
    run_elementwise(queue, sync, e);
  });
}

TRN_OPS_API trn_result_t trn_ops_copy(trn_queue_t queue, const trn_ops_tensor_t *out,
                                      const trn_ops_tensor_t *x, const trn_sync_t *sync) {
  return run_op("trn_ops_copy", queue, [&] {
    const Tensor o = tensor_arg(out, "out"), in = tensor_arg(x, "x");
    check_overlap({&o}, {&in}, "copy", true);
    // The same dtype, both contiguous and of one size: a DMA copy.
    if (o.dtype == in.dtype && o.contiguous() && in.contiguous() && o.shape == in.shape &&
        !config().host_only && o.device_index == in.device_index && o.numel() > 0) {
      Commands commands(queue, sync);
      commands.copy(o.mem, o.offset, in.mem, in.offset,
                    static_cast<uint64_t>(o.numel()) * o.element_size());
      commands.submit();
      return;
    }
    if (broadcast_shapes(o.shape, in.shape, "copy") != o.shape)
      invalid(fmt::format("copy: x {} does not broadcast to out {}", in.describe(), o.describe()));
    // Views the expression kernel does not read or write (a transpose, gaps, a slice of a larger
    // output), and same-dtype integer copies, go to the DMA engines as one strided transfer.
    if (o.numel() > 0 && o.device_index == in.device_index &&
        (!in.contiguous_but_broadcast() || !o.contiguous() ||
         (o.dtype == in.dtype && !dtype_is_float(o.dtype)))) {
      std::optional<std::string> why = strided_copy_on_device(queue, sync, o, in);
      if (!why) return;
      if (o.dtype == in.dtype)
        return copy_on_host(queue, sync, signature_of({&in}, {&o}), *why, in, o);
      if (all_integer({in}, o))
        return run_integer_elementwise(queue, sync, "copy", signature_of({&in}, {&o}), *why, {in},
                                       o, [](const int64_t *v) { return v[0]; });
      const Shape shape = o.shape;
      run_on_host(queue, sync, "copy", signature_of({&in}, {&o}), *why, {in}, {o},
                  [shape](const Arrays &v) { return Arrays{host::broadcast_to(v[0], shape)}; });
      return;
    }
    // Casts from floats to integers go through the host: PyTorch truncates toward zero, the
    // device's conversion rounds to nearest.
    std::optional<std::string> reason;
    if (!dtype_is_float(o.dtype) && o.dtype != in.dtype)
      reason = fmt::format("a cast to {} truncates as PyTorch does; the device rounds",
                           dtype_name(o.dtype));
    Elementwise e{"copy",
                  {&in},
                  &o,
                  in.dtype == o.dtype,
                  [](ExpressionOp &) -> uint16_t { return 0; },
                  [](const Arrays &v) { return v[0]; },
                  reason};
    e.cast_to_float = true;
    e.integer = [](const int64_t *v) { return v[0]; };  // an integer cast wraps, as PyTorch's
    run_elementwise(queue, sync, e);
  });
}

TRN_OPS_API trn_result_t trn_ops_fill(trn_queue_t queue, const trn_ops_tensor_t *out, double value,
                                      const trn_sync_t *sync) {
  return run_op("trn_ops_fill", queue, [&] {
    const Tensor o = tensor_arg(out, "out");
    std::optional<std::string> reason;
    if (!dtype_is_float(o.dtype) && !exact_integer(value))
      reason = fmt::format("{} is not an integer the device holds exactly", value);
    const Shape shape = o.shape;
    Elementwise e{"fill",
                  {},
                  &o,
                  true,
                  [](ExpressionOp &x) { return x.scalar_value(0); },
                  [value, shape](const Arrays &) { return host::Array::full(shape, value); },
                  reason};
    e.scalars = {static_cast<float>(value)};
    run_elementwise(queue, sync, e);
  });
}

TRN_OPS_API trn_result_t trn_ops_arange(trn_queue_t queue, const trn_ops_tensor_t *out,
                                        double start, double step, const trn_sync_t *sync) {
  return run_op("trn_ops_arange", queue, [&] {
    const Tensor o = tensor_arg(out, "out");
    if (o.rank() != 1) invalid(fmt::format("arange: out is {}; it must have rank 1", o.describe()));
    std::optional<std::string> reason;
    const double last = start + step * static_cast<double>(std::max<int64_t>(o.numel() - 1, 0));
    if (o.numel() > (int64_t{1} << 24))
      reason = "over 2^24 elements: the device's fp32 index would round";
    else if (!dtype_is_float(o.dtype) &&
             !(exact_integer(start) && exact_integer(step) && exact_integer(last) &&
               exact_integer(step * static_cast<double>(std::max<int64_t>(o.numel() - 1, 0)))))
      reason = "integer values the device would not hold exactly";
    const int64_t n = o.numel();
    Elementwise e{"arange",
                  {},
                  &o,
                  true,
                  [](ExpressionOp &x) {
                    return x.alu_scalar(AluOp::kAdd, x.alu_scalar(AluOp::kMultiply, x.index(), 1),
                                        0);
                  },
                  [start, step, n](const Arrays &) {
                    host::Array a = host::Array::zeros({n});
                    for (int64_t i = 0; i < n; ++i)
                      a.data[i] = start + step * static_cast<double>(i);
                    return a;
                  },
                  reason};
    e.scalars = {static_cast<float>(start), static_cast<float>(step)};
    run_elementwise(queue, sync, e);
  });
}

}  // extern "C"
