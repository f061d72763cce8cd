// The float64 host reference ops: hand-computed cases, error messages, and every backward checked
// against central finite differences of its forward.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ops/host/reference.hpp"

using namespace trn::ops::host;

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Array arr(Shape shape, std::vector<double> data) {
  Array a;
  a.shape = std::move(shape);
  a.data = std::move(data);
  return a;
}

Array scalar(double v) {
  return arr({}, {v});
}

Array uniform(Shape shape, std::mt19937_64 &rng, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  Array a = Array::zeros(std::move(shape));
  for (double &v : a.data) v = dist(rng);
  return a;
}

// Values away from 0, for functions with a kink there.
Array away_from_zero(Shape shape, std::mt19937_64 &rng) {
  Array a = uniform(std::move(shape), rng, 0.1, 1.5);
  std::bernoulli_distribution sign(0.5);
  for (double &v : a.data) v = sign(rng) ? v : -v;
  return a;
}

void require_values(const Array &got, const Shape &shape, const std::vector<double> &want,
                    double tol = 1e-12) {
  REQUIRE(got.shape == shape);
  REQUIRE(got.data.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i << ": got " << got.data[i] << ", want " << want[i]);
    if (std::isnan(want[i])) {
      CHECK(std::isnan(got.data[i]));
    } else if (std::isinf(want[i])) {
      CHECK(got.data[i] == want[i]);
    } else {
      CHECK(std::fabs(got.data[i] - want[i]) <= tol * std::max(1.0, std::fabs(want[i])));
    }
  }
}

void require_same(const Array &got, const Array &want, double tol = 1e-12) {
  require_values(got, want.shape, want.data, tol);
}

// Runs f and requires a std::invalid_argument whose message contains `fragment`.
void require_invalid(const std::function<void()> &f, const std::string &fragment) {
  try {
    f();
  } catch (const std::invalid_argument &e) {
    INFO("message: " << e.what());
    CHECK(std::string(e.what()).find(fragment) != std::string::npos);
    return;
  }
  FAIL("expected std::invalid_argument containing \"" << fragment << "\"");
}

double weighted_sum(const Array &weights, const Array &y) {
  REQUIRE(weights.shape == y.shape);
  double s = 0;
  for (size_t i = 0; i < y.data.size(); ++i) s += weights.data[i] * y.data[i];
  return s;
}

// Checks an analytic gradient of L(x) = sum(grad_out * f(x)) against central differences.
void check_grad(const std::string &what, const Array &x,
                const std::function<Array(const Array &)> &f, const Array &grad_out,
                const Array &analytic) {
  constexpr double kEps = 1e-6;
  REQUIRE(analytic.shape == x.shape);
  Array probe = x;
  for (size_t i = 0; i < x.data.size(); ++i) {
    probe.data[i] = x.data[i] + kEps;
    const double plus = weighted_sum(grad_out, f(probe));
    probe.data[i] = x.data[i] - kEps;
    const double minus = weighted_sum(grad_out, f(probe));
    probe.data[i] = x.data[i];
    const double numeric = (plus - minus) / (2 * kEps);
    INFO(what << " element " << i << ": numeric " << numeric << ", analytic " << analytic.data[i]);
    CHECK(std::fabs(numeric - analytic.data[i]) <= 1e-6 * std::max(1.0, std::fabs(numeric)));
  }
}

}  // namespace

TEST_CASE("reference Array: zeros, full and numel", "[ops_reference]") {
  const Array z = Array::zeros({2, 3});
  require_values(z, {2, 3}, {0, 0, 0, 0, 0, 0});
  CHECK(z.numel() == 6);
  const Array s = Array::full({}, 2.5);
  require_values(s, {}, {2.5});
  CHECK(s.numel() == 1);
  CHECK(Array::zeros({4, 0}).numel() == 0);
  require_invalid([] { Array::full({2, -1}, 0); }, "[2, -1] has a negative dim");
}

TEST_CASE("reference broadcast_shapes follows numpy rules", "[ops_reference]") {
  CHECK(broadcast_shapes({3, 1}, {1, 4}) == Shape{3, 4});
  CHECK(broadcast_shapes({}, {2, 3}) == Shape{2, 3});
  CHECK(broadcast_shapes({5, 1, 4}, {3, 1}) == Shape{5, 3, 4});
  CHECK(broadcast_shapes({0, 1}, {1, 7}) == Shape{0, 7});
  require_invalid([] { broadcast_shapes({2, 3}, {4}); }, "shapes [2, 3] and [4] do not broadcast");
}

TEST_CASE("reference broadcast_to and reduce_to_shape", "[ops_reference]") {
  const Array x = arr({3, 1}, {1, 2, 3});
  require_values(broadcast_to(x, {2, 3, 2}), {2, 3, 2}, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  require_values(broadcast_to(scalar(4), {2}), {2}, {4, 4});
  const Array g = arr({2, 3}, {1, 2, 3, 4, 5, 6});
  require_values(reduce_to_shape(g, {3}), {3}, {5, 7, 9});
  require_values(reduce_to_shape(g, {2, 1}), {2, 1}, {6, 15});
  require_values(reduce_to_shape(g, {}), {}, {21});

  SECTION("reduce_to_shape is broadcast_to's backward") {
    std::mt19937_64 rng(1);
    const std::vector<std::pair<Shape, Shape>> cases = {
        {{3, 1}, {2, 3, 7}}, {{1}, {7}}, {{}, {3, 1}}, {{1, 7}, {3, 7}}, {{1, 1}, {1, 1}}};
    for (const auto &[from, to] : cases) {
      const Array in = uniform(from, rng);
      const Array go = uniform(to, rng);
      check_grad(
          "broadcast_to", in, [&](const Array &v) { return broadcast_to(v, to); }, go,
          reduce_to_shape(go, from));
    }
  }
  require_invalid([&] { broadcast_to(x, {2, 4}); }, "x of shape [3, 1] cannot broadcast to [2, 4]");
  require_invalid([&] { broadcast_to(x, {3}); }, "cannot broadcast");
  require_invalid([&] { reduce_to_shape(g, {2}); }, "shape [2] does not broadcast to");
  require_invalid([&] { reduce_to_shape(g, {1, 1, 1, 2, 3}); }, "does not broadcast");
  require_invalid([] { broadcast_to(arr({2}, {1}), {2}); }, "holds 1 values");
}

TEST_CASE("reference unary ops: values", "[ops_reference]") {
  const Array x = arr({3}, {-1, 0, 2});
  const Array pos = arr({3}, {0.25, 1, 4});
  require_values(unary(Unary::kNeg, x), {3}, {1, 0, -2});
  require_values(unary(Unary::kAbs, x), {3}, {1, 0, 2});
  require_values(unary(Unary::kExp, x), {3}, {0.36787944117144233, 1, 7.38905609893065});
  require_values(unary(Unary::kLog, pos), {3}, {-1.3862943611198906, 0, 1.3862943611198906});
  require_values(unary(Unary::kLog, arr({2}, {0, -1})), {2}, {-kInf, kNan});
  require_values(unary(Unary::kSqrt, pos), {3}, {0.5, 1, 2});
  require_values(unary(Unary::kRsqrt, pos), {3}, {2, 1, 0.5});
  require_values(unary(Unary::kTanh, x), {3}, {-0.7615941559557649, 0, 0.9640275800758169});
  require_values(unary(Unary::kSigmoid, x), {3}, {0.2689414213699951, 0.5, 0.8807970779778823});
  require_values(unary(Unary::kRelu, arr({4}, {-1, 0, 2, kNan})), {4}, {0, 0, 2, kNan});
  require_values(unary(Unary::kGeluErf, x), {3}, {-0.15865525393145707, 0, 1.9544997361036416});
  require_values(unary(Unary::kGeluTanh, x), {3}, {-0.15880800939172324, 0, 1.954597694087775});
  require_values(unary(Unary::kSilu, x), {3}, {-0.2689414213699951, 0, 1.7615941559557646});
  require_values(unary(Unary::kReciprocal, pos), {3}, {4, 1, 0.25});
  require_values(unary(Unary::kSquare, x), {3}, {1, 0, 4});
  require_values(unary(Unary::kExp, scalar(0)), {}, {1});
  require_invalid(
      [] {
        unary(Unary::kNeg, arr({2, 2}, {1, 2, 3}));
      },
      "x is [2, 2] (4 elements) but holds 3 values");
}

TEST_CASE("reference unary_backward matches finite differences", "[ops_reference]") {
  std::mt19937_64 rng(2);
  const Unary all[] = {Unary::kNeg,        Unary::kAbs,     Unary::kExp,      Unary::kLog,
                       Unary::kSqrt,       Unary::kRsqrt,   Unary::kTanh,     Unary::kSigmoid,
                       Unary::kRelu,       Unary::kGeluErf, Unary::kGeluTanh, Unary::kSilu,
                       Unary::kReciprocal, Unary::kSquare};
  for (Unary op : all) {
    const bool positive_only = op == Unary::kLog || op == Unary::kSqrt || op == Unary::kRsqrt;
    for (const Shape &shape : {Shape{1}, Shape{7}, Shape{3, 7}, Shape{}}) {
      // Domains avoid the kinks of abs/relu and the poles of log/sqrt/rsqrt/reciprocal.
      const Array x = positive_only ? uniform(shape, rng, 0.2, 2.0) : away_from_zero(shape, rng);
      const Array go = uniform(shape, rng);
      check_grad(
          "unary " + std::to_string(static_cast<int>(op)), x,
          [&](const Array &v) { return unary(op, v); }, go, unary_backward(op, go, x));
    }
  }
  // PyTorch's subgradients at 0.
  require_values(unary_backward(Unary::kRelu, arr({2}, {1, 1}), arr({2}, {0, 3})), {2}, {0, 1});
  require_values(unary_backward(Unary::kAbs, arr({3}, {1, 1, 1}), arr({3}, {0, -2, 2})), {3},
                 {0, -1, 1});
  require_invalid(
      [] {
        unary_backward(Unary::kExp, arr({2}, {1, 1}), arr({3}, {1, 1, 1}));
      },
      "grad_out is [2] but x is [3]; they must match");
}

TEST_CASE("reference binary ops broadcast", "[ops_reference]") {
  const Array a = arr({2, 1}, {1, 4});
  const Array b = arr({3}, {1, 2, 4});
  require_values(binary(Binary::kAdd, a, b), {2, 3}, {2, 3, 5, 5, 6, 8});
  require_values(binary(Binary::kSub, a, b), {2, 3}, {0, -1, -3, 3, 2, 0});
  require_values(binary(Binary::kMul, a, b), {2, 3}, {1, 2, 4, 4, 8, 16});
  require_values(binary(Binary::kDiv, a, b), {2, 3}, {1, 0.5, 0.25, 4, 2, 1});
  require_values(binary(Binary::kMaximum, a, b), {2, 3}, {1, 2, 4, 4, 4, 4});
  require_values(binary(Binary::kMinimum, a, b), {2, 3}, {1, 1, 1, 1, 2, 4});
  require_values(binary(Binary::kPow, a, b), {2, 3}, {1, 1, 1, 4, 16, 256});
  require_values(binary(Binary::kEq, a, b), {2, 3}, {1, 0, 0, 0, 0, 1});
  require_values(binary(Binary::kNe, a, b), {2, 3}, {0, 1, 1, 1, 1, 0});
  require_values(binary(Binary::kLt, a, b), {2, 3}, {0, 1, 1, 0, 0, 0});
  require_values(binary(Binary::kLe, a, b), {2, 3}, {1, 1, 1, 0, 0, 1});
  require_values(binary(Binary::kGt, a, b), {2, 3}, {0, 0, 0, 1, 1, 0});
  require_values(binary(Binary::kGe, a, b), {2, 3}, {1, 0, 0, 1, 1, 1});
  require_values(binary(Binary::kAdd, scalar(1), scalar(2)), {}, {3});
  const Array n = arr({2}, {kNan, 1});
  require_values(binary(Binary::kMaximum, n, arr({2}, {0, kNan})), {2}, {kNan, kNan});
  require_values(binary(Binary::kMinimum, n, scalar(0)), {2}, {kNan, 0});
  require_values(binary(Binary::kEq, n, n), {2}, {0, 1});
  require_values(binary(Binary::kPow, scalar(0), scalar(0)), {}, {1});

  SECTION("reduce_to_shape gives the broadcasting backward of mul") {
    std::mt19937_64 rng(3);
    const std::vector<std::pair<Shape, Shape>> cases = {
        {{3, 1}, {1, 7}}, {{7}, {3, 7}}, {{}, {3}}, {{1}, {1}}};
    for (const auto &[sa, sb] : cases) {
      const Array x = uniform(sa, rng), y = uniform(sb, rng);
      const Shape out = broadcast_shapes(sa, sb);
      const Array go = uniform(out, rng);
      const Array ga = reduce_to_shape(binary(Binary::kMul, go, broadcast_to(y, out)), sa);
      check_grad(
          "mul a", x, [&](const Array &v) { return binary(Binary::kMul, v, y); }, go, ga);
    }
  }
  require_invalid(
      [&] {
        binary(Binary::kAdd, arr({2}, {1, 2}), b);
      },
      "shapes [2] and [3] do not broadcast");
}

TEST_CASE("reference where broadcasts all three", "[ops_reference]") {
  const Array cond = arr({2, 1}, {1, 0});
  require_values(where(cond, arr({3}, {1, 2, 3}), scalar(-1)), {2, 3}, {1, 2, 3, -1, -1, -1});
  require_values(where(arr({2}, {kNan, 0}), scalar(1), scalar(2)), {2}, {1, 2});
  require_invalid(
      [&] {
        where(arr({4}, {0, 0, 0, 0}), arr({3}, {1, 2, 3}), scalar(0));
      },
      "do not broadcast");
}

namespace {

Array transpose_last2(const Array &x) {
  const size_t r = x.shape.size();
  Shape shape = x.shape;
  std::swap(shape[r - 1], shape[r - 2]);
  Array out = Array::zeros(shape);
  const int64_t rows = x.shape[r - 2], cols = x.shape[r - 1];
  for (int64_t b = 0; b < x.numel() / (rows * cols); ++b) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        out.data[(b * cols + j) * rows + i] = x.data[(b * rows + i) * cols + j];
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("reference matmul: mm, transposes and bmm", "[ops_reference]") {
  const Array a = arr({2, 3}, {1, 2, 3, 4, 5, 6});
  const Array b = arr({3, 2}, {7, 8, 9, 10, 11, 12});
  const std::vector<double> ab = {58, 64, 139, 154};
  require_values(matmul(a, b, false, false), {2, 2}, ab);
  require_values(matmul(transpose_last2(a), b, true, false), {2, 2}, ab);
  require_values(matmul(a, transpose_last2(b), false, true), {2, 2}, ab);
  require_values(matmul(transpose_last2(a), transpose_last2(b), true, true), {2, 2}, ab);
  const Array a3 = arr({2, 2, 3}, {1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, 0});
  const Array b3 = arr({2, 3, 2}, {7, 8, 9, 10, 11, 12, 7, 8, 9, 10, 11, 12});
  require_values(matmul(a3, b3, false, false), {2, 2, 2}, {58, 64, 139, 154, 7, 8, 9, 10});

  SECTION("transposed operands agree with explicit transposes on awkward sizes") {
    std::mt19937_64 rng(4);
    for (const auto &[bt, m, k, n] : std::vector<std::array<int64_t, 4>>{
             {1, 1, 1, 1}, {1, 3, 7, 1}, {3, 7, 1, 3}, {2, 3, 7, 7}}) {
      const Array x = uniform({bt, m, k}, rng), y = uniform({bt, k, n}, rng);
      const Array want = matmul(x, y, false, false);
      require_same(matmul(transpose_last2(x), transpose_last2(y), true, true), want);
      require_same(matmul(transpose_last2(x), y, true, false), want);
    }
  }
  require_invalid(
      [] {
        matmul(Array::zeros({3, 4}), Array::zeros({5, 2}), false, false);
      },
      "matmul: a is [3, 4] and b is [5, 2]; a's columns (4) must equal b's rows (5)");
  require_invalid(
      [] {
        matmul(Array::zeros({4, 3}), Array::zeros({5, 2}), true, false);
      },
      "a^T's columns (4) must equal b's rows (5)");
  require_invalid([&] { matmul(a, b3, false, false); }, "both must have the same rank");
  require_invalid([] { matmul(Array::zeros({3}), Array::zeros({3}), false, false); },
                  "operands must be 2D or 3D");
  require_invalid(
      [] {
        matmul(Array::zeros({2, 1, 3}), Array::zeros({3, 3, 1}), false, false);
      },
      "batch sizes differ (2 vs 3)");
}

TEST_CASE("reference addmm: bias broadcasting, alpha and beta", "[ops_reference]") {
  const Array a = arr({2, 2}, {1, 2, 3, 4});
  const Array eye = arr({2, 2}, {1, 0, 0, 1});
  const Array bias = arr({2}, {10, 20});
  require_values(addmm(bias, a, eye, 2, 0.5, false, false), {2, 2}, {7, 14, 11, 18});
  require_values(addmm(arr({1, 2}, {10, 20}), a, eye, 2, 0.5, false, false), {2, 2},
                 {7, 14, 11, 18});
  require_values(addmm(arr({2, 1}, {10, 20}), a, eye, 2, 0.5, false, false), {2, 2},
                 {7, 9, 16, 18});
  require_values(addmm(arr({2, 2}, {1, 1, 2, 2}), a, eye, 1, 1, false, false), {2, 2},
                 {2, 3, 5, 6});
  require_values(addmm(scalar(2), a, eye, 1, 1, true, false), {2, 2}, {3, 5, 4, 6});
  // beta == 0 ignores the bias, so its NaN does not leak into the result (torch.addmm).
  require_values(addmm(arr({2}, {kNan, kInf}), a, eye, 1, 0, false, false), {2, 2}, {1, 2, 3, 4});
  require_invalid(
      [&] {
        addmm(arr({3}, {1, 2, 3}), a, eye, 1, 1, false, false);
      },
      "bias is [3] and cannot broadcast to the product's [2, 2]");
  require_invalid(
      [&] {
        addmm(arr({2, 2, 1}, {1, 2, 3, 4}), a, eye, 1, 1, false, false);
      },
      "cannot broadcast");
  require_invalid(
      [] {
        addmm(scalar(0), Array::zeros({1, 2, 2}), Array::zeros({1, 2, 2}), 1, 1, false, false);
      },
      "operands must be 2D");
}

TEST_CASE("reference reduce: sum, mean, max, min, argmax, argmin", "[ops_reference]") {
  const Array x = arr({2, 3}, {1, 5, 3, 4, 2, 6});
  require_values(reduce(Reduce::kSum, x, {}, false), {}, {21});
  require_values(reduce(Reduce::kSum, x, {}, true), {1, 1}, {21});
  require_values(reduce(Reduce::kSum, x, {0}, false), {3}, {5, 7, 9});
  require_values(reduce(Reduce::kSum, x, {-1}, false), {2}, {9, 12});
  require_values(reduce(Reduce::kSum, x, {1}, true), {2, 1}, {9, 12});
  require_values(reduce(Reduce::kSum, x, {1, 0}, true), {1, 1}, {21});
  require_values(reduce(Reduce::kMean, x, {1}, false), {2}, {3, 4});
  require_values(reduce(Reduce::kMean, x, {}, false), {}, {3.5});
  require_values(reduce(Reduce::kMax, x, {0}, false), {3}, {4, 5, 6});
  require_values(reduce(Reduce::kMin, x, {1}, true), {2, 1}, {1, 2});
  require_values(reduce(Reduce::kMax, x, {}, false), {}, {6});
  require_values(reduce(Reduce::kArgmax, x, {1}, false), {2}, {1, 2});
  require_values(reduce(Reduce::kArgmin, x, {0}, true), {1, 3}, {0, 1, 0});
  require_values(reduce(Reduce::kArgmax, x, {}, false), {}, {5});
  require_values(reduce(Reduce::kArgmin, x, {}, true), {1, 1}, {0});
  // Ties give the first index; NaN is the extreme for both and propagates through max/min.
  require_values(reduce(Reduce::kArgmax, arr({3}, {3, 1, 3}), {0}, false), {}, {0});
  require_values(reduce(Reduce::kArgmin, arr({3}, {1, 3, 1}), {}, false), {}, {0});
  const Array n = arr({4}, {1, kNan, 3, kNan});
  require_values(reduce(Reduce::kArgmax, n, {0}, false), {}, {1});
  require_values(reduce(Reduce::kArgmin, n, {0}, false), {}, {1});
  require_values(reduce(Reduce::kMax, n, {}, false), {}, {kNan});
  require_values(reduce(Reduce::kMin, n, {}, false), {}, {kNan});
  // A scalar reduces over its single element with dim 0 or -1.
  require_values(reduce(Reduce::kSum, scalar(2), {-1}, false), {}, {2});
  require_values(reduce(Reduce::kArgmax, scalar(2), {0}, true), {}, {0});
  // Empty reductions: the sum is 0 and the mean NaN as torch.
  require_values(reduce(Reduce::kSum, Array::zeros({2, 0}), {1}, false), {2}, {0, 0});
  require_values(reduce(Reduce::kMean, Array::zeros({0}), {}, false), {}, {kNan});

  SECTION("multi-dim sums of a 3D array agree with direct loops") {
    std::mt19937_64 rng(5);
    const Array y = uniform({3, 1, 7}, rng);
    const Array s = reduce(Reduce::kSum, y, {0, -1}, true);
    double total = 0;
    for (double v : y.data) total += v;
    require_values(s, {1, 1, 1}, {total});
    const Array m = reduce(Reduce::kMax, y, {0}, false);
    REQUIRE(m.shape == Shape{1, 7});
    for (int64_t j = 0; j < 7; ++j) {
      CHECK(m.data[j] == std::max({y.data[j], y.data[7 + j], y.data[14 + j]}));
    }
  }
  require_invalid(
      [&] {
        reduce(Reduce::kArgmax, x, {0, 1}, false);
      },
      "reduce(argmax): takes at most one dim, got 2");
  require_invalid([&] { reduce(Reduce::kSum, x, {0, -2}, false); }, "appears more than once");
  require_invalid([&] { reduce(Reduce::kMean, x, {2}, false); },
                  "dim 2 is out of range for rank 2 (expected [-2, 1])");
  require_invalid([] { reduce(Reduce::kSum, scalar(1), {1}, false); }, "out of range for rank 0");
  require_invalid(
      [] {
        reduce(Reduce::kMax, Array::zeros({2, 0}), {1}, false);
      },
      "cannot reduce over zero elements");
}

TEST_CASE("reference softmax and log_softmax", "[ops_reference]") {
  const std::vector<double> sm = {0.09003057317038046, 0.24472847105479764, 0.6652409557748218};
  const std::vector<double> lsm = {-2.4076059644443806, -1.4076059644443804, -0.4076059644443804};
  require_values(softmax(arr({3}, {1, 2, 3}), 0, false), {3}, sm);
  require_values(softmax(arr({3}, {1, 2, 3}), -1, true), {3}, lsm);
  // Stable for large inputs.
  require_values(softmax(arr({1, 3}, {1000, 1001, 1002}), 1, false), {1, 3}, sm);
  require_values(softmax(arr({1, 3}, {1000, 1001, 1002}), 1, true), {1, 3}, lsm);
  require_values(softmax(arr({2, 2}, {1, 1, 2, 2}), 0, false), {2, 2},
                 {0.2689414213699951, 0.2689414213699951, 0.7310585786300049, 0.7310585786300049});
  require_values(softmax(arr({2}, {-kInf, 0}), 0, false), {2}, {0, 1});
  require_values(softmax(arr({2}, {-kInf, 0}), 0, true), {2}, {-kInf, 0});
  require_values(softmax(arr({2}, {-kInf, -kInf}), 0, false), {2}, {kNan, kNan});
  require_values(softmax(scalar(5), 0, false), {}, {1});
  require_values(softmax(scalar(5), -1, true), {}, {0});

  std::mt19937_64 rng(6);
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{3, 7}, 1}, {{3, 7}, 0}, {{2, 3, 4}, 1}, {{2, 3, 4}, -1}, {{1}, 0}, {{7}, -1}, {{}, 0}};
  for (const auto &[shape, dim] : cases) {
    for (bool log : {false, true}) {
      const Array x = uniform(shape, rng, -3, 3);
      const Array go = uniform(shape, rng);
      check_grad(
          log ? "log_softmax" : "softmax", x, [&](const Array &v) { return softmax(v, dim, log); },
          go, softmax_backward(go, softmax(x, dim, log), dim, log));
    }
  }
  require_invalid(
      [] {
        softmax(Array::zeros({2, 3}), 2, false);
      },
      "softmax: dim 2 is out of range");
  require_invalid([] { softmax_backward(Array::zeros({2}), Array::zeros({3}), 0, true); },
                  "log_softmax_backward: grad_out is [2] but out is [3]");
}

TEST_CASE("reference layer_norm forward", "[ops_reference]") {
  const Array x = arr({2, 3}, {1, 2, 3, 2, 4, 9});
  const Array w = arr({3}, {1, 2, 3}), b = arr({3}, {0, 1, 0});
  const NormResult r = layer_norm(x, 1, &w, &b, 1e-5);
  require_values(r.out, {2, 3},
                 {-1.2247356859083902, 1.0, 3.6742070577251704, -1.0190487428175694,
                  0.32063417145495365, 4.076194971270278});
  require_values(r.mean, {2, 1}, {2, 5});
  require_values(r.rstd, {2, 1}, {1.2247356859083902, 0.3396829142725232});
  const NormResult r2 = layer_norm(Array::full({2, 3, 4}, 1.5), 2, nullptr, nullptr, 1e-5);
  require_values(r2.mean, {2, 1, 1}, {1.5, 1.5});
  require_values(r2.out, {2, 3, 4}, std::vector<double>(24, 0.0));
  require_invalid([&] { layer_norm(x, 0, nullptr, nullptr, 1e-5); },
                  "layer_norm: normalized_ndim 0 must be in [1, 2] for x of shape [2, 3]");
  require_invalid([&] { layer_norm(x, 3, nullptr, nullptr, 1e-5); }, "must be in [1, 2]");
  require_invalid([&] { layer_norm(x, 2, &w, nullptr, 1e-5); },
                  "weight is [3] but the normalized shape is [2, 3]");
  require_invalid([&] { layer_norm(x, 1, nullptr, &x, 1e-5); }, "bias is [2, 3]");
}

TEST_CASE("reference layer_norm_backward matches finite differences", "[ops_reference]") {
  std::mt19937_64 rng(7);
  struct Case {
    Shape shape;
    int64_t n;
    bool weight, bias;
  };
  for (const Case &c :
       {Case{{3, 7}, 1, true, true}, Case{{2, 3, 4}, 2, true, false}, Case{{1, 7}, 1, false, false},
        Case{{7}, 1, false, true}, Case{{3, 1, 3}, 3, true, true}}) {
    const Array x = uniform(c.shape, rng, -2, 2);
    const Shape ns(c.shape.end() - c.n, c.shape.end());
    const Array w = uniform(ns, rng, 0.5, 1.5), b = uniform(ns, rng);
    const Array *wp = c.weight ? &w : nullptr, *bp = c.bias ? &b : nullptr;
    const double eps = 1e-5;
    const Array go = uniform(c.shape, rng);
    const NormResult f = layer_norm(x, c.n, wp, bp, eps);
    const NormGrads g = layer_norm_backward(go, x, f.mean, f.rstd, c.n, wp, c.bias);
    check_grad(
        "layer_norm x", x, [&](const Array &v) { return layer_norm(v, c.n, wp, bp, eps).out; }, go,
        g.grad_x);
    if (c.weight) {
      check_grad(
          "layer_norm weight", w,
          [&](const Array &v) { return layer_norm(x, c.n, &v, bp, eps).out; }, go, g.grad_weight);
    } else {
      CHECK(g.grad_weight.data.empty());
    }
    if (c.bias) {
      check_grad(
          "layer_norm bias", b, [&](const Array &v) { return layer_norm(x, c.n, wp, &v, eps).out; },
          go, g.grad_bias);
    } else {
      CHECK(g.grad_bias.data.empty());
    }
  }
  const Array x = Array::zeros({2, 3});
  const NormResult f = layer_norm(x, 1, nullptr, nullptr, 1e-5);
  require_invalid([&] { layer_norm_backward(x, x, f.mean, Array::zeros({2}), 1, nullptr, false); },
                  "rstd is [2] but the expected statistics shape is [2, 1]");
  require_invalid(
      [&] {
        layer_norm_backward(Array::zeros({3, 2}), x, f.mean, f.rstd, 1, nullptr, false);
      },
      "grad_out is [3, 2] but x is [2, 3]");
}

TEST_CASE("reference rms_norm forward and backward", "[ops_reference]") {
  const Array w = arr({2}, {2, 0.5});
  const NormResult r = rms_norm(arr({1, 2}, {3, 4}), 1, &w, 1e-6);
  require_values(r.out, {1, 2}, {1.6970562069654673, 0.5656854023218224});
  require_values(r.rstd, {1, 1}, {0.2828427011609112});
  CHECK(r.mean.data.empty());

  std::mt19937_64 rng(8);
  for (const auto &[shape, n, weighted] : std::vector<std::tuple<Shape, int64_t, bool>>{
           {{3, 7}, 1, true}, {{2, 3, 4}, 2, false}, {{1}, 1, true}, {{7, 1}, 2, true}}) {
    const Array x = uniform(shape, rng, -2, 2);
    const Shape ns(shape.end() - n, shape.end());
    const Array wt = uniform(ns, rng, 0.5, 1.5);
    const Array *wp = weighted ? &wt : nullptr;
    const Array go = uniform(shape, rng);
    const NormResult f = rms_norm(x, n, wp, 1e-6);
    const NormGrads g = rms_norm_backward(go, x, f.rstd, n, wp);
    check_grad(
        "rms_norm x", x, [&](const Array &v) { return rms_norm(v, n, wp, 1e-6).out; }, go,
        g.grad_x);
    if (weighted) {
      check_grad(
          "rms_norm weight", wt, [&](const Array &v) { return rms_norm(x, n, &v, 1e-6).out; }, go,
          g.grad_weight);
    } else {
      CHECK(g.grad_weight.data.empty());
    }
    CHECK(g.grad_bias.data.empty());
  }
  require_invalid([] { rms_norm(scalar(1), 1, nullptr, 1e-6); },
                  "rms_norm: normalized_ndim 1 must be in [1, 0]");
  require_invalid(
      [&] {
        rms_norm(Array::zeros({2, 3}), 1, &w, 1e-6);
      },
      "weight is [2] but the normalized shape is [3]");
  require_invalid(
      [] { rms_norm_backward(Array::zeros({2}), Array::zeros({2}), Array::zeros({}), 1, nullptr); },
      "rstd is [] but the expected statistics shape is [1]");
}

TEST_CASE("reference nll_loss forward", "[ops_reference]") {
  const Array lp = arr({3, 4}, {-1, -2, -3, -4, -0.5, -1.5, -2.5, -3.5, -0.1, -0.2, -0.3, -0.4});
  const Array t = arr({3}, {0, 3, 1});
  const Array w = arr({4}, {1, 2, 3, 4});
  NllResult r = nll_loss(lp, t, nullptr, Reduction::kNone, -100);
  require_values(r.out, {3}, {1, 3.5, 0.2});
  require_values(nll_loss(lp, t, nullptr, Reduction::kSum, -100).out, {}, {4.7});
  require_values(nll_loss(lp, t, nullptr, Reduction::kMean, -100).out, {}, {4.7 / 3});
  require_values(nll_loss(lp, t, &w, Reduction::kNone, -100).out, {3}, {1, 14, 0.4});
  require_values(nll_loss(lp, t, &w, Reduction::kSum, -100).out, {}, {15.4});
  r = nll_loss(lp, t, &w, Reduction::kMean, -100);
  require_values(r.out, {}, {2.2});
  require_values(r.total_weight, {}, {7});
  // Ignored targets leave the loss and the total weight.
  r = nll_loss(lp, t, &w, Reduction::kMean, 3);
  require_values(r.out, {}, {1.4 / 3});
  require_values(r.total_weight, {}, {3});
  require_values(nll_loss(lp, t, &w, Reduction::kNone, 3).out, {3}, {1, 0, 0.4});
  require_values(nll_loss(lp, arr({3}, {-100, 1, 2}), nullptr, Reduction::kSum, -100).out, {},
                 {1.5 + 0.3});
  r = nll_loss(lp, Array::full({3}, 2), nullptr, Reduction::kMean, 2);
  require_values(r.out, {}, {kNan});
  require_values(r.total_weight, {}, {0});
  // [C] input with a scalar target.
  const Array lp1 = arr({4}, {-1, -2, -3, -4});
  require_values(nll_loss(lp1, scalar(2), nullptr, Reduction::kNone, -100).out, {}, {3});
  require_values(nll_loss(lp1, scalar(2), &w, Reduction::kMean, -100).out, {}, {3});
  require_values(nll_loss(lp1, scalar(2), &w, Reduction::kSum, -100).out, {}, {9});

  require_invalid(
      [&] {
        nll_loss(lp, arr({3}, {0, 4, 1}), nullptr, Reduction::kMean, -100);
      },
      "nll_loss: target 4 at position 1 is out of range [0, 4)");
  require_invalid(
      [&] {
        nll_loss(lp, arr({3}, {0, -1, 1}), nullptr, Reduction::kMean, -100);
      },
      "target -1 at position 1 is out of range");
  require_invalid(
      [&] {
        nll_loss(lp, arr({3}, {0, 1.5, 1}), nullptr, Reduction::kMean, -100);
      },
      "target holds 1.500000, which is not an integer");
  require_invalid(
      [&] {
        nll_loss(lp, arr({2}, {0, 1}), nullptr, Reduction::kMean, -100);
      },
      "log_probs is [3, 4] so target must be [3], but it is [2]");
  require_invalid([&] { nll_loss(lp, t, &t, Reduction::kMean, -100); },
                  "weight is [3] but there are 4 classes");
  require_invalid(
      [] {
        nll_loss(Array::zeros({1, 2, 3}), Array::zeros({1}), nullptr, Reduction::kMean, -100);
      },
      "it must be [N, C] or [C]");
}

TEST_CASE("reference nll_loss_backward matches finite differences", "[ops_reference]") {
  std::mt19937_64 rng(9);
  const Array w = uniform({7}, rng, 0.5, 2);
  for (const Reduction red : {Reduction::kNone, Reduction::kMean, Reduction::kSum}) {
    for (const Array *wp : {static_cast<const Array *>(nullptr), &w}) {
      for (const auto &[lp_shape, target] :
           std::vector<std::pair<Shape, Array>>{{{5, 7}, arr({5}, {0, 6, 3, 6, 1})},
                                                {{1, 7}, arr({1}, {4})},
                                                {{7}, scalar(5)},
                                                {{3, 7}, arr({3}, {2, 6, 6})}}) {
        const int64_t ignore = 6;
        const Array lp = uniform(lp_shape, rng, -3, 0);
        const NllResult f = nll_loss(lp, target, wp, red, ignore);
        const Array go = uniform(f.out.shape, rng);
        check_grad(
            "nll_loss", lp,
            [&](const Array &v) { return nll_loss(v, target, wp, red, ignore).out; }, go,
            nll_loss_backward(go, lp, target, wp, red, ignore, f.total_weight));
      }
    }
  }
  const Array lp = Array::zeros({2, 3});
  const Array t = arr({2}, {0, 1});
  require_invalid(
      [&] {
        nll_loss_backward(Array::zeros({2}), lp, t, nullptr, Reduction::kMean, -100, scalar(2));
      },
      "nll_loss_backward: grad_out is [2] but the loss is []");
  require_invalid(
      [&] {
        nll_loss_backward(scalar(1), lp, t, nullptr, Reduction::kMean, -100, Array::zeros({1}));
      },
      "total_weight is [1] but a scalar is []");
}

TEST_CASE("reference embedding forward and backward", "[ops_reference]") {
  const Array w = arr({3, 2}, {0, 1, 10, 11, 20, 21});
  const Array idx = arr({2, 2}, {2, 0, 1, 2});
  require_values(embedding(w, idx), {2, 2, 2}, {20, 21, 0, 1, 10, 11, 20, 21});
  require_values(embedding(w, scalar(1)), {2}, {10, 11});
  require_values(embedding(w, Array::zeros({0})), {0, 2}, {});
  const Array go = arr({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  // Repeated indices accumulate; the padding row gets nothing.
  require_values(embedding_backward(go, idx, 3, -1), {3, 2}, {3, 4, 5, 6, 8, 10});
  require_values(embedding_backward(go, idx, 3, 2), {3, 2}, {3, 4, 5, 6, 0, 0});
  require_values(embedding_backward(go, idx, 4, 0), {4, 2}, {0, 0, 5, 6, 8, 10, 0, 0});

  std::mt19937_64 rng(10);
  for (const auto &[v, d, indices] :
       std::vector<std::tuple<int64_t, int64_t, Array>>{{7, 3, arr({3}, {6, 0, 6})},
                                                        {1, 1, arr({1, 1}, {0})},
                                                        {3, 7, arr({2, 3}, {0, 1, 2, 2, 1, 0})}}) {
    const Array weight = uniform({v, d}, rng);
    Shape out_shape = indices.shape;
    out_shape.push_back(d);
    const Array g = uniform(out_shape, rng);
    check_grad(
        "embedding", weight, [&](const Array &x) { return embedding(x, indices); }, g,
        embedding_backward(g, indices, v, -1));
  }
  require_invalid(
      [&] {
        embedding(w, arr({2}, {0, 3}));
      },
      "embedding: index 3 is out of range [0, 3)");
  require_invalid([&] { embedding(w, arr({1}, {-1})); }, "index -1 is out of range");
  require_invalid([&] { embedding(w, arr({1}, {0.5})); }, "which is not an integer");
  require_invalid([&] { embedding(arr({2}, {1, 2}), idx); }, "weight is [2]; it must be 2D");
  require_invalid(
      [&] {
        embedding_backward(Array::zeros({2, 2}), idx, 3, -1);
      },
      "grad_out is [2, 2] but indices are [2, 2]; grad_out must be indices' shape + [D]");
  require_invalid([&] { embedding_backward(go, idx, 2, -1); },
                  "embedding_backward: index 2 is out of range [0, 2)");
}

namespace {

Conv2dParams conv_params(std::array<int64_t, 2> stride, std::array<int64_t, 2> padding,
                         std::array<int64_t, 2> dilation, int64_t groups) {
  Conv2dParams p;
  for (int i = 0; i < 2; ++i) {
    p.stride[i] = stride[i];
    p.padding[i] = padding[i];
    p.dilation[i] = dilation[i];
  }
  p.groups = groups;
  return p;
}

Array iota(Shape shape, double start = 0) {
  Array a = Array::zeros(std::move(shape));
  for (size_t i = 0; i < a.data.size(); ++i) a.data[i] = start + static_cast<double>(i);
  return a;
}

}  // namespace

TEST_CASE("reference conv2d forward", "[ops_reference]") {
  const Array x = iota({1, 1, 3, 3}, 1);
  const Array ones = Array::full({1, 1, 2, 2}, 1);
  const Array bias = arr({1}, {0.5});
  require_values(conv2d(x, ones, nullptr, {}), {1, 1, 2, 2}, {12, 16, 24, 28});
  require_values(conv2d(x, ones, &bias, {}), {1, 1, 2, 2}, {12.5, 16.5, 24.5, 28.5});
  require_values(conv2d(x, ones, nullptr, conv_params({1, 1}, {1, 1}, {1, 1}, 1)), {1, 1, 4, 4},
                 {1, 3, 5, 3, 5, 12, 16, 9, 11, 24, 28, 15, 7, 15, 17, 9});
  require_values(conv2d(x, ones, nullptr, conv_params({2, 2}, {1, 1}, {1, 1}, 1)), {1, 1, 2, 2},
                 {1, 5, 11, 28});
  require_values(conv2d(x, ones, nullptr, conv_params({1, 1}, {0, 0}, {2, 2}, 1)), {1, 1, 1, 1},
                 {20});
  const Array x2 = arr({1, 2, 2, 2}, {1, 1, 1, 1, 2, 2, 2, 2});
  const Array w2 = arr({2, 1, 1, 1}, {3, 5});
  require_values(conv2d(x2, w2, nullptr, conv_params({1, 1}, {0, 0}, {1, 1}, 2)), {1, 2, 2, 2},
                 {3, 3, 3, 3, 10, 10, 10, 10});

  require_invalid(
      [&] {
        conv2d(Array::zeros({1, 3, 3}), ones, nullptr, {});
      },
      "conv2d: x is [1, 3, 3]; it must be [N, C, H, W]");
  require_invalid([&] { conv2d(x2, ones, nullptr, {}); },
                  "x is [1, 2, 2, 2] and w is [1, 1, 2, 2]; with groups 1 w's dim 1 must be 2");
  require_invalid(
      [&] {
        conv2d(x2, Array::zeros({3, 1, 1, 1}), nullptr, conv_params({1, 1}, {0, 0}, {1, 1}, 2));
      },
      "must be divisible by groups (2)");
  require_invalid(
      [&] {
        conv2d(x, Array::zeros({1, 1, 4, 1}), nullptr, {});
      },
      "the kernel [4, 1] (dilated [4, 1]) does not fit the padded input [3, 3]");
  require_invalid(
      [&] {
        conv2d(x, ones, nullptr, conv_params({0, 1}, {0, 0}, {1, 1}, 1));
      },
      "stride (0, 1) must be positive");
  require_invalid(
      [&] {
        conv2d(x, ones, nullptr, conv_params({1, 1}, {-1, 0}, {1, 1}, 1));
      },
      "padding (-1, 0) must not be negative");
  require_invalid([&] { conv2d(x, ones, &x, {}); }, "bias is [1, 1, 3, 3]; it must be [1]");
  require_invalid(
      [&] {
        conv2d_backward(Array::zeros({1, 1, 3, 3}), x, ones, false, {});
      },
      "grad_out is [1, 1, 3, 3] but the conv output is [1, 1, 2, 2]");
}

TEST_CASE("reference conv2d_backward matches finite differences", "[ops_reference]") {
  std::mt19937_64 rng(11);
  struct Case {
    Shape x, w;
    Conv2dParams p;
    bool bias;
  };
  for (const Case &c :
       {Case{{2, 4, 7, 5}, {6, 2, 3, 2}, conv_params({2, 1}, {1, 2}, {2, 1}, 2), true},
        Case{{1, 3, 5, 7}, {2, 3, 3, 3}, {}, true}, Case{{1, 1, 1, 1}, {1, 1, 1, 1}, {}, false},
        Case{{3, 1, 7, 3}, {1, 1, 1, 3}, conv_params({3, 1}, {0, 1}, {1, 1}, 1), false},
        Case{{1, 3, 3, 3}, {3, 1, 2, 2}, conv_params({1, 2}, {1, 1}, {1, 1}, 3), true}}) {
    const Array x = uniform(c.x, rng), w = uniform(c.w, rng), b = uniform({c.w[0]}, rng);
    const Array *bp = c.bias ? &b : nullptr;
    const Array out = conv2d(x, w, bp, c.p);
    const Array go = uniform(out.shape, rng);
    const Conv2dGrads g = conv2d_backward(go, x, w, c.bias, c.p);
    check_grad(
        "conv2d x", x, [&](const Array &v) { return conv2d(v, w, bp, c.p); }, go, g.grad_x);
    check_grad(
        "conv2d w", w, [&](const Array &v) { return conv2d(x, v, bp, c.p); }, go, g.grad_w);
    if (c.bias) {
      check_grad(
          "conv2d bias", b, [&](const Array &v) { return conv2d(x, w, &v, c.p); }, go, g.grad_bias);
    } else {
      CHECK(g.grad_bias.data.empty());
    }
  }

  SECTION("a [2,4,16,16] conv and its backward run quickly") {
    const Array x = uniform({2, 4, 16, 16}, rng), w = uniform({8, 4, 3, 3}, rng);
    const Conv2dParams p = conv_params({1, 1}, {1, 1}, {1, 1}, 1);
    const Array out = conv2d(x, w, nullptr, p);
    REQUIRE(out.shape == Shape{2, 8, 16, 16});
    const Conv2dGrads g = conv2d_backward(out, x, w, true, p);
    CHECK(g.grad_bias.shape == Shape{8});
  }
}

namespace {

Pool2dParams pool_params(std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride,
                         std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation,
                         bool ceil_mode) {
  Pool2dParams p;
  for (int i = 0; i < 2; ++i) {
    p.kernel[i] = kernel[i];
    p.stride[i] = stride[i];
    p.padding[i] = padding[i];
    p.dilation[i] = dilation[i];
  }
  p.ceil_mode = ceil_mode;
  return p;
}

}  // namespace

TEST_CASE("reference max_pool2d forward", "[ops_reference]") {
  const Array x = iota({1, 1, 4, 4});
  PoolResult r = max_pool2d(x, {});
  require_values(r.out, {1, 1, 2, 2}, {5, 7, 13, 15});
  require_values(r.indices, {1, 1, 2, 2}, {5, 7, 13, 15});
  r = max_pool2d(iota({1, 4, 4}), {});
  require_values(r.out, {1, 2, 2}, {5, 7, 13, 15});
  r = max_pool2d(x, pool_params({3, 3}, {2, 2}, {1, 1}, {1, 1}, false));
  require_values(r.out, {1, 1, 2, 2}, {5, 7, 13, 15});
  r = max_pool2d(x, pool_params({3, 3}, {2, 2}, {1, 1}, {1, 1}, true));
  require_values(r.out, {1, 1, 3, 3}, {5, 7, 7, 13, 15, 15, 13, 15, 15});
  require_values(r.indices, {1, 1, 3, 3}, {5, 7, 7, 13, 15, 15, 13, 15, 15});
  CHECK(max_pool2d(Array::zeros({1, 1, 5, 5}), {}).out.shape == Shape{1, 1, 2, 2});
  CHECK(max_pool2d(Array::zeros({1, 1, 5, 5}), pool_params({2, 2}, {0, 0}, {0, 0}, {1, 1}, true))
            .out.shape == Shape{1, 1, 3, 3});
  r = max_pool2d(x, pool_params({2, 2}, {1, 1}, {0, 0}, {2, 2}, false));
  require_values(r.out, {1, 1, 2, 2}, {10, 11, 14, 15});
  require_values(r.indices, {1, 1, 2, 2}, {10, 11, 14, 15});
  // NaN wins and the last NaN's index is kept, as torch's CPU kernel; an all -inf window points at
  // its first element.
  r = max_pool2d(arr({1, 1, 1, 4}, {1, kNan, 3, kNan}),
                 pool_params({1, 4}, {0, 0}, {0, 0}, {1, 1}, false));
  require_values(r.out, {1, 1, 1, 1}, {kNan});
  require_values(r.indices, {1, 1, 1, 1}, {3});
  r = max_pool2d(arr({1, 1, 1, 2}, {-kInf, -kInf}),
                 pool_params({1, 2}, {0, 0}, {0, 0}, {1, 1}, false));
  require_values(r.out, {1, 1, 1, 1}, {-kInf});
  require_values(r.indices, {1, 1, 1, 1}, {0});

  require_invalid(
      [&] {
        max_pool2d(x, pool_params({3, 3}, {1, 1}, {2, 0}, {1, 1}, false));
      },
      "max_pool2d: padding (2, 0) must be at most half the kernel (3, 3)");
  require_invalid(
      [] {
        max_pool2d(Array::zeros({4, 4}), {});
      },
      "x is [4, 4]; it must be [N, C, H, W] or [C, H, W]");
  require_invalid(
      [] {
        max_pool2d(Array::zeros({1, 1, 1, 1}), {});
      },
      "the output would be [0, 0]; the input is too small");
  require_invalid(
      [&] {
        max_pool2d(x, pool_params({0, 2}, {0, 0}, {0, 0}, {1, 1}, false));
      },
      "kernel (0, 2) must be positive");
}

TEST_CASE("reference max_pool2d_backward matches finite differences", "[ops_reference]") {
  std::mt19937_64 rng(12);
  for (const auto &[shape, p] : std::vector<std::pair<Shape, Pool2dParams>>{
           {{2, 3, 7, 5}, pool_params({3, 3}, {2, 2}, {1, 1}, {1, 1}, false)},
           {{2, 3, 7, 5}, pool_params({3, 3}, {2, 2}, {1, 1}, {1, 1}, true)},
           {{1, 7, 3}, pool_params({2, 2}, {1, 1}, {0, 0}, {1, 1}, false)},
           {{1, 1, 7, 7}, pool_params({2, 3}, {1, 2}, {1, 1}, {2, 2}, true)},
           {{1, 1, 1, 1}, pool_params({1, 1}, {0, 0}, {0, 0}, {1, 1}, false)}}) {
    const Array x = uniform(shape, rng);
    const PoolResult f = max_pool2d(x, p);
    const Array go = uniform(f.out.shape, rng);
    check_grad(
        "max_pool2d", x, [&](const Array &v) { return max_pool2d(v, p).out; }, go,
        max_pool2d_backward(go, x.shape, f.indices));
  }
  const PoolResult f = max_pool2d(iota({1, 1, 4, 4}), {});
  require_invalid(
      [&] {
        max_pool2d_backward(f.out, {1, 1, 4, 4}, arr({1, 1, 2, 2}, {0, 1, 2, 16}));
      },
      "max_pool2d_backward: index 16 is outside the input plane of 16 elements");
  require_invalid(
      [&] {
        max_pool2d_backward(f.out, {1, 2, 4, 4}, f.indices);
      },
      "they must agree in every dim but the last two");
  require_invalid(
      [&] {
        max_pool2d_backward(f.out, {1, 1, 4, 4}, Array::zeros({1, 1, 2, 1}));
      },
      "grad_out is [1, 1, 2, 2] but indices is [1, 1, 2, 1]");
}

namespace {

const std::vector<Array> kGrads = {arr({3}, {0.5, 1.0, -0.25}), arr({3}, {0.1, -0.3, 0.2}),
                                   arr({3}, {-0.4, 0.2, 0.05})};

}  // namespace

TEST_CASE("reference sgd_step follows torch.optim.SGD", "[ops_reference]") {
  SECTION("momentum, dampening and weight decay") {
    Array param = arr({3}, {1.0, -2.0, 0.5}), buf;
    SgdParams p;
    p.lr = 0.1;
    p.momentum = 0.9;
    p.dampening = 0.1;
    p.weight_decay = 0.01;
    const std::vector<std::vector<double>> want = {
        {0.949, -2.098, 0.5245},
        {0.8932458999999999, -2.1573118, 0.52807795},
        {0.8782632886899999, -2.22675083938, 0.526322834845}};
    for (size_t s = 0; s < want.size(); ++s) {
      sgd_step(param, kGrads[s], &buf, s == 0, p);
      require_values(param, {3}, want[s]);
    }
  }
  SECTION("nesterov and maximize") {
    Array param = arr({3}, {1.0, -2.0, 0.5}), buf;
    SgdParams p;
    p.lr = 0.1;
    p.momentum = 0.9;
    p.nesterov = true;
    p.maximize = true;
    sgd_step(param, kGrads[0], &buf, true, p);
    require_values(param, {3}, {1.095, -1.81, 0.4525});
    require_values(buf, {3}, {-0.5, -1.0, 0.25});
    sgd_step(param, kGrads[1], &buf, false, p);
    require_values(param, {3}, {1.1545, -1.786, 0.47025});
  }
  SECTION("plain SGD needs no buffer") {
    Array param = arr({3}, {1.0, -2.0, 0.5});
    SgdParams p;
    p.lr = 0.5;
    sgd_step(param, kGrads[0], nullptr, true, p);
    require_values(param, {3}, {0.75, -2.5, 0.625});
  }
  Array param = arr({3}, {1, 2, 3});
  SgdParams p;
  p.momentum = 0.9;
  require_invalid([&] { sgd_step(param, kGrads[0], nullptr, true, p); },
                  "sgd_step: momentum is nonzero but momentum_buf is null");
  Array short_buf = Array::zeros({2});
  require_invalid([&] { sgd_step(param, kGrads[0], &short_buf, false, p); },
                  "momentum_buf is [2] but param is [3]");
  require_invalid([&] { sgd_step(param, Array::zeros({2}), nullptr, true, {}); },
                  "grad is [2] but param is [3]");
  p.nesterov = true;
  p.dampening = 0.5;
  require_invalid([&] { sgd_step(param, kGrads[0], &short_buf, true, p); },
                  "nesterov needs momentum > 0 and dampening == 0");
}

TEST_CASE("reference adam_step follows torch.optim.Adam and AdamW", "[ops_reference]") {
  const auto run = [](const AdamParams &p, const std::vector<Array> &grads,
                      const std::vector<std::vector<double>> &want) {
    Array param = arr({3}, {1.0, -2.0, 0.5});
    Array m = Array::zeros({3}), v = Array::zeros({3}), vmax = Array::zeros({3});
    for (size_t s = 0; s < want.size(); ++s) {
      adam_step(param, grads[s], m, v, p.amsgrad ? &vmax : nullptr, static_cast<int64_t>(s + 1), p);
      INFO("step " << s + 1);
      require_values(param, {3}, want[s]);
    }
  };
  AdamParams p;
  p.lr = 0.01;
  p.weight_decay = 0.1;
  SECTION("Adam with L2 weight decay") {
    // Step 1 moves each coordinate by lr against the sign of its gradient.
    run(p, kGrads,
        {{0.9900000001666667, -2.009999999875, 0.5099999995},
         {0.981296786265348, -2.0117270853836335, 0.5083534501589629},
         {0.9779818754082865, -2.013054183203479, 0.5052232499619173}});
  }
  SECTION("AdamW with decoupled weight decay") {
    p.decoupled = true;
    run(p, kGrads,
        {{0.9890000002, -2.0079999999, 0.5094999996},
         {0.9799805906382653, -2.0102704857571774, 0.5095717500477368},
         {0.9780636160449829, -2.012711326527149, 0.5085196110867279}});
  }
  const std::vector<Array> shrinking = {arr({3}, {1.0, -0.5, 2.0}), arr({3}, {0.01, 0.02, -0.01}),
                                        arr({3}, {0.0, 0.1, 0.0})};
  AdamParams q;
  q.lr = 0.1;
  q.beta1 = 0.8;
  q.beta2 = 0.9;
  q.eps = 1e-6;
  q.maximize = true;
  SECTION("maximize without amsgrad") {
    run(q, shrinking,
        {{1.0999999000001, -2.0999998000004, 0.599999950000025},
         {1.1653796570507895, -2.161292630177598, 0.6641716910033603},
         {1.213953492256046, -2.19112422062286, 0.7118480406738423}});
  }
  SECTION("amsgrad keeps the largest second moment") {
    q.amsgrad = true;
    run(q, shrinking,
        {{1.0999999000001, -2.0999998000004, 0.599999950000025},
         {1.1620280338846238, -2.158198956509668, 0.6608794566967858},
         {1.2057469221859063, -2.1857256186440934, 0.7037887712742171}});
  }
  Array param = arr({3}, {1, 2, 3}), m = Array::zeros({3}), v = Array::zeros({3});
  AdamParams ams;
  ams.amsgrad = true;
  require_invalid([&] { adam_step(param, kGrads[0], m, v, nullptr, 1, ams); },
                  "adam_step: amsgrad needs max_exp_avg_sq, which is null");
  require_invalid([&] { adam_step(param, kGrads[0], m, v, nullptr, 0, {}); },
                  "step 0 must be at least 1");
  Array short_m = Array::zeros({2});
  AdamParams w;
  w.decoupled = true;
  require_invalid([&] { adam_step(param, kGrads[0], short_m, v, nullptr, 1, w); },
                  "adamw_step: exp_avg is [2] but param is [3]");
}
