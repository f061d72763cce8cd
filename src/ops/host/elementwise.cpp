// Elementwise unary and broadcasting binary/where ops with the unary derivatives.
#include <cmath>
#include <numbers>
#include <string>

#include "ops/host/internal.hpp"
#include "ops/host/reference.hpp"

namespace trn::ops::host {

using namespace detail;

namespace {

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

constexpr double kGeluTanhScale = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluTanhCubic = 0.044715;

double apply(Unary op, double x) {
  switch (op) {
    case Unary::kNeg: return -x;
    case Unary::kAbs: return std::fabs(x);
    case Unary::kExp: return std::exp(x);
    case Unary::kLog: return std::log(x);
    case Unary::kSqrt: return std::sqrt(x);
    case Unary::kRsqrt: return 1.0 / std::sqrt(x);
    case Unary::kTanh: return std::tanh(x);
    case Unary::kSigmoid: return sigmoid(x);
    // NaN must survive relu as it does in torch, so no max(0, x).
    case Unary::kRelu: return x > 0 || std::isnan(x) ? x : 0.0;
    case Unary::kGeluErf: return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2));
    case Unary::kGeluTanh:
      return 0.5 * x * (1.0 + std::tanh(kGeluTanhScale * (x + kGeluTanhCubic * x * x * x)));
    case Unary::kSilu: return x * sigmoid(x);
    case Unary::kReciprocal: return 1.0 / x;
    case Unary::kSquare: return x * x;
    case Unary::kSin: return std::sin(x);
    case Unary::kCos: return std::cos(x);
  }
  fail("unary", "unknown op " + std::to_string(static_cast<int>(op)));
}

double derivative(Unary op, double x) {
  switch (op) {
    case Unary::kNeg: return -1.0;
    case Unary::kAbs: return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0);
    case Unary::kExp: return std::exp(x);
    case Unary::kLog: return 1.0 / x;
    case Unary::kSqrt: return 0.5 / std::sqrt(x);
    case Unary::kRsqrt: return -0.5 / (x * std::sqrt(x));
    case Unary::kTanh: {
      const double t = std::tanh(x);
      return 1.0 - t * t;
    }
    case Unary::kSigmoid: {
      const double s = sigmoid(x);
      return s * (1.0 - s);
    }
    case Unary::kRelu: return x > 0 ? 1.0 : 0.0;
    case Unary::kGeluErf: {
      const double pdf = std::exp(-0.5 * x * x) * std::numbers::inv_sqrtpi / std::numbers::sqrt2;
      return 0.5 * (1.0 + std::erf(x / std::numbers::sqrt2)) + x * pdf;
    }
    case Unary::kGeluTanh: {
      const double t = std::tanh(kGeluTanhScale * (x + kGeluTanhCubic * x * x * x));
      const double inner_d = kGeluTanhScale * (1.0 + 3.0 * kGeluTanhCubic * x * x);
      return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * inner_d;
    }
    case Unary::kSilu: {
      const double s = sigmoid(x);
      return s * (1.0 + x * (1.0 - s));
    }
    case Unary::kReciprocal: return -1.0 / (x * x);
    case Unary::kSquare: return 2.0 * x;
    case Unary::kSin: return std::cos(x);
    case Unary::kCos: return -std::sin(x);
  }
  fail("unary_backward", "unknown op " + std::to_string(static_cast<int>(op)));
}

double apply(Binary op, double a, double b) {
  switch (op) {
    case Binary::kAdd: return a + b;
    case Binary::kSub: return a - b;
    case Binary::kMul: return a * b;
    case Binary::kDiv: return a / b;
    case Binary::kMaximum: return std::isnan(a) || std::isnan(b) ? NAN : (a > b ? a : b);
    case Binary::kMinimum: return std::isnan(a) || std::isnan(b) ? NAN : (a < b ? a : b);
    case Binary::kPow: return std::pow(a, b);
    case Binary::kEq: return a == b ? 1.0 : 0.0;
    case Binary::kNe: return a != b ? 1.0 : 0.0;
    case Binary::kLt: return a < b ? 1.0 : 0.0;
    case Binary::kLe: return a <= b ? 1.0 : 0.0;
    case Binary::kGt: return a > b ? 1.0 : 0.0;
    case Binary::kGe: return a >= b ? 1.0 : 0.0;
  }
  fail("binary", "unknown op " + std::to_string(static_cast<int>(op)));
}

}  // namespace

Array unary(Unary op, const Array &x) {
  check_array("unary", "x", x);
  Array out = Array::zeros(x.shape);
  for (size_t i = 0; i < x.data.size(); ++i) out.data[i] = apply(op, x.data[i]);
  return out;
}

Array unary_backward(Unary op, const Array &grad_out, const Array &x) {
  check_array("unary_backward", "grad_out", grad_out);
  check_array("unary_backward", "x", x);
  check_same_shape("unary_backward", "grad_out", grad_out.shape, "x", x.shape);
  Array out = Array::zeros(x.shape);
  for (size_t i = 0; i < x.data.size(); ++i) {
    // relu's is a select (PyTorch's threshold_backward): an infinite gradient where x <= 0 is 0.
    if (op == Unary::kRelu)
      out.data[i] = x.data[i] <= 0 ? 0.0 : grad_out.data[i];
    else
      out.data[i] = grad_out.data[i] * derivative(op, x.data[i]);
  }
  return out;
}

Array binary(Binary op, const Array &a, const Array &b) {
  check_array("binary", "a", a);
  check_array("binary", "b", b);
  const Shape shape = broadcast_shapes(a.shape, b.shape);
  const std::vector<int64_t> sa = broadcast_strides(a.shape, shape);
  const std::vector<int64_t> sb = broadcast_strides(b.shape, shape);
  Array out = Array::zeros(shape);
  for_each_index(shape, [&](const std::vector<int64_t> &idx, int64_t flat) {
    out.data[flat] = apply(op, a.data[dot(idx, sa)], b.data[dot(idx, sb)]);
  });
  return out;
}

Array where(const Array &cond, const Array &a, const Array &b) {
  check_array("where", "cond", cond);
  check_array("where", "a", a);
  check_array("where", "b", b);
  const Shape shape = broadcast_shapes(cond.shape, broadcast_shapes(a.shape, b.shape));
  const std::vector<int64_t> sc = broadcast_strides(cond.shape, shape);
  const std::vector<int64_t> sa = broadcast_strides(a.shape, shape);
  const std::vector<int64_t> sb = broadcast_strides(b.shape, shape);
  Array out = Array::zeros(shape);
  for_each_index(shape, [&](const std::vector<int64_t> &idx, int64_t flat) {
    out.data[flat] = cond.data[dot(idx, sc)] != 0 ? a.data[dot(idx, sa)] : b.data[dot(idx, sb)];
  });
  return out;
}

}  // namespace trn::ops::host
