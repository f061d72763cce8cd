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
