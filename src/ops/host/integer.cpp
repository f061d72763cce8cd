#include "ops/host/integer.hpp"

#include <string>

#include "ops/host/internal.hpp"

namespace trn::ops::host {

using namespace detail;

namespace {

// Unsigned arithmetic is modular, so these wrap as two's complement without undefined behaviour.
int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wrap_sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// As PyTorch's integer pow: by squaring, wrapping; a negative exponent gives 0 but for a base of
// 1 (1) or -1 (1 or -1 by the exponent's parity).
int64_t wrap_pow(int64_t base, int64_t exponent) {
  if (exponent < 0) {
    if (base == 1) return 1;
    if (base == -1) return exponent % 2 == 0 ? 1 : -1;
    return 0;
  }
  int64_t result = 1;
  for (; exponent > 0; exponent >>= 1) {
    if (exponent & 1) result = wrap_mul(result, base);
    base = wrap_mul(base, base);
  }
  return result;
}

}  // namespace

bool has_integer_form(Unary op) {
  return op == Unary::kNeg || op == Unary::kAbs || op == Unary::kRelu || op == Unary::kSquare;
}

int64_t apply_integer(Unary op, int64_t x) {
  switch (op) {
    case Unary::kNeg: return wrap_sub(0, x);
    case Unary::kAbs: return x < 0 ? wrap_sub(0, x) : x;  // abs(INT64_MIN) wraps to itself
    case Unary::kRelu: return x > 0 ? x : 0;
    case Unary::kSquare: return wrap_mul(x, x);
    default: break;
  }
  fail("unary", "op " + std::to_string(static_cast<int>(op)) + " has no integer form");
}

bool has_integer_form(Binary op) {
  return op != Binary::kDiv;
}

int64_t apply_integer(Binary op, int64_t a, int64_t b) {
  switch (op) {
    case Binary::kAdd: return wrap_add(a, b);
    case Binary::kSub: return wrap_sub(a, b);
    case Binary::kMul: return wrap_mul(a, b);
    case Binary::kMaximum: return a > b ? a : b;
    case Binary::kMinimum: return a < b ? a : b;
    case Binary::kEq: return a == b;
    case Binary::kNe: return a != b;
    case Binary::kLt: return a < b;
    case Binary::kLe: return a <= b;
    case Binary::kGt: return a > b;
    case Binary::kGe: return a >= b;
    case Binary::kPow: return wrap_pow(a, b);
    case Binary::kDiv: break;
  }
  fail("binary", "op " + std::to_string(static_cast<int>(op)) + " has no integer form");
}

bool has_integer_form(Reduce op) {
  return op != Reduce::kMean;
}

std::vector<int64_t> reduce_integer(Reduce op, const Shape &shape, const std::vector<int64_t> &x,
                                    const std::vector<int64_t> &dims) {
  const std::string name = "reduce";
  if (static_cast<int64_t>(x.size()) != numel_of(shape))
    fail(name, std::to_string(x.size()) + " values for a shape of " + shape_str(shape));
  if (!has_integer_form(op)) fail(name, "a mean has no integer form");
  const bool is_arg = op == Reduce::kArgmax || op == Reduce::kArgmin;
  if (is_arg && dims.size() > 1)
    fail(name, "takes at most one dim, got " + std::to_string(dims.size()));
  const ReduceLayout layout = reduce_layout(shape, dims_mask(name, shape, dims));
  if (op != Reduce::kSum && layout.group_size() == 0 && layout.groups() > 0)
    fail(name, "cannot reduce over zero elements (x is " + shape_str(shape) + ")");
  const bool want_max = op == Reduce::kMax || op == Reduce::kArgmax;
  std::vector<int64_t> out(static_cast<size_t>(layout.groups()));
  for (int64_t g = 0; g < layout.groups(); ++g) {
    const int64_t *base = x.data() + layout.base[g];
    if (op == Reduce::kSum) {
      int64_t sum = 0;
      for (int64_t off : layout.inner) sum = wrap_add(sum, base[off]);
      out[g] = sum;
      continue;
    }
    int64_t best = 0;  // the first extreme, as torch picks it
    for (int64_t k = 1; k < layout.group_size(); ++k) {
      const int64_t v = base[layout.inner[k]], b = base[layout.inner[best]];
      if (want_max ? v > b : v < b) best = k;
    }
    out[g] = is_arg ? best : base[layout.inner[best]];
  }
  return out;
}

}  // namespace trn::ops::host
