// Neural-network ops and optimizer steps against the float64 host reference: layer norm and RMS
// norm (with and without weights and statistics, over one and two dims) and their backward on
// the device and the host; nll_loss, embedding, conv2d and max_pool2d with their backward (host
// ops, recorded); SGD and Adam steps applied step by step on the device; backward ops checked
// directly against central finite differences of the library's forward; views at byte offsets;
// and host-only mode giving the device's answers.
#include <functional>

#include "ops_fixture.hpp"

using namespace trn::test;
namespace host = trn::ops::host;

namespace {

// What the host path writes: computed in float64 and rounded once to the output's dtype, so
// within half an ulp of the reference's rounded value (the comparisons round the reference too).
constexpr double kRoundedOnce = 1e-7;

host_array rounded(host_array a, trn_dtype_t d) {
  for (double &v : a.data) v = as_dtype(d, v);
  return a;
}

// A result that sums n fp32 terms on the device: its error grows like sqrt(n) ulps of fp32.
double accumulated(int64_t n) {
  return tolerance(TRN_DTYPE_F32) * std::sqrt(static_cast<double>(n));
}

double dot(const host_array &a, const host_array &b) {
  REQUIRE(a.data.size() == b.data.size());
  double s = 0;
  for (size_t i = 0; i < a.data.size(); ++i) s += a.data[i] * b.data[i];
  return s;
}

// The central finite-difference gradient of `loss` at `at`, one element at a time.
host_array finite_difference(const host_array &at,
                             const std::function<double(const host_array &)> &loss,
                             double h = 1e-5) {
  host_array fd = host_array::zeros(at.shape);
  for (size_t i = 0; i < at.data.size(); ++i) {
    host_array plus = at, minus = at;
    plus.data[i] += h;
    minus.data[i] -= h;
    fd.data[i] = (loss(plus) - loss(minus)) / (2 * h);
  }
  return fd;
}

// Checks `grad` against central differences of `loss` in the tensor `t` (holding `value`, put
// back afterwards), the loss running the op library's own forward.
void check_gradient(OpsFixture &f, const std::function<double()> &loss, const host_array &grad,
                    const host_array &value, const DeviceTensor &t, double tol, const char *what) {
  require_close(grad,
                finite_difference(value,
                                  [&](const host_array &at) {
                                    f.write(t, at);
                                    return loss();
                                  }),
                tol, what);
  f.write(t, value);
}

// Class indices in [0, classes), some equal to `often` (an ignore_index to test).
host_array class_targets(std::mt19937 &rng, int64_t n, int64_t classes, int64_t often) {
  host_array t = host_array::zeros({n});
  std::uniform_int_distribution<int64_t> dist(0, classes - 1);
  for (int64_t i = 0; i < n; ++i) t.data[i] = static_cast<double>(i % 4 == 1 ? often : dist(rng));
  return t;
}

}  // namespace

TEST_CASE(
    "layer_norm on the device, with and without weight, bias and statistics, over one and "
    "two dims",
    "[ops][norm]") {
  OpsFixture f;
  std::mt19937 rng(21);
  const trn_dtype_t dtype = GENERATE(TRN_DTYPE_F32, TRN_DTYPE_BF16);
  const double eps = 1e-5;
  struct Case {
    Shape x;
    uint32_t ndim;
  } cases[] = {{{7, 129}, 1}, {{4, 3, 43}, 2}, {{1, 1}, 1},
               {{129, 4}, 1}, {{2, 4097}, 1},  {{4097, 3}, 1}};
  for (const Case &c : cases) {
    const Shape normalized(c.x.end() - c.ndim, c.x.end());
    const host_array x = random_array(rng, c.x, dtype);
    const host_array w = random_array(rng, normalized, dtype, 0.5, 1.5);
    const host_array b = random_array(rng, normalized, dtype);
    DeviceTensor dx = f.tensor(dtype, x), dw = f.tensor(dtype, w), db = f.tensor(dtype, b);
    for (int affine = 0; affine < 2; ++affine) {
      for (int stats = 0; stats < 2; ++stats) {
        const host::NormResult want =
            host::layer_norm(x, c.ndim, affine ? &w : nullptr, affine ? &b : nullptr, eps);
        DeviceTensor dout = f.tensor(dtype, c.x), dmean = f.tensor(TRN_DTYPE_F32, want.mean.shape),
                     drstd = f.tensor(TRN_DTYPE_F32, want.rstd.shape);
        INFO(trn_dtype_name(dtype)
             << " x " << x.data.size() << " ndim " << c.ndim << (affine ? " affine" : "")
             << (stats ? " stats" : "") << ": " << ops_error());
        REQUIRE(trn_ops_layer_norm(f.queue(), dout.get(), stats ? dmean.get() : nullptr,
                                   stats ? drstd.get() : nullptr, dx.get(),
                                   affine ? dw.get() : nullptr, affine ? db.get() : nullptr, c.ndim,
                                   eps, nullptr) == TRN_SUCCESS);
        require_close(f.read(dout), rounded(want.out, dtype), tolerance(dtype), "layer_norm");
        if (stats) {
          require_close(f.read(dmean), want.mean, tolerance(TRN_DTYPE_F32), "mean");
          require_close(f.read(drstd), want.rstd, tolerance(TRN_DTYPE_F32), "rstd");
        }
      }
    }
  }
  CHECK(fallback_count("layer_norm") == 0);
}

TEST_CASE("layer_norm of rows far from zero and over the whole tensor, on the device",
          "[ops][norm]") {
  OpsFixture f;
  std::mt19937 rng(35);
  // Rows of 1000 +- 1: x - mean cancels. In fp32 the mean is only known to an ulp of 1000
  // (6e-5), which rstd (~1.7) scales into the output, so the tolerance grows with the row's
  // condition |mean| * rstd. A one-pass E[x^2] - E[x]^2 variance would be off by ~10% here.
  const host_array x = random_array(rng, {4, 129}, TRN_DTYPE_F32, 999.0, 1001.0);
  const host::NormResult want = host::layer_norm(x, 1, nullptr, nullptr, 1e-5);
  DeviceTensor dx = f.tensor(TRN_DTYPE_F32, x), dout = f.tensor(TRN_DTYPE_F32, x.shape),
               dmean = f.tensor(TRN_DTYPE_F32, {4, 1}), drstd = f.tensor(TRN_DTYPE_F32, {4, 1});
  INFO(ops_error());
  REQUIRE(trn_ops_layer_norm(f.queue(), dout.get(), dmean.get(), drstd.get(), dx.get(), nullptr,
                             nullptr, 1, 1e-5, nullptr) == TRN_SUCCESS);
  double condition = 0;
  for (size_t r = 0; r < 4; ++r)
    condition = std::max(condition, std::fabs(want.mean.data[r]) * want.rstd.data[r]);
  require_close(f.read(dout), want.out, tolerance(TRN_DTYPE_F32) * (1 + condition),
                "layer_norm of offset rows");
  require_close(f.read(drstd), want.rstd, tolerance(TRN_DTYPE_F32), "rstd of offset rows");
  require_close(f.read(dmean), want.mean, tolerance(TRN_DTYPE_F32), "mean of offset rows");
  // normalized_ndim = rank: one row, the whole tensor.
  const host_array y = random_array(rng, {3, 4}, TRN_DTYPE_F32);
  DeviceTensor dy = f.tensor(TRN_DTYPE_F32, y), dyo = f.tensor(TRN_DTYPE_F32, y.shape);
  REQUIRE(trn_ops_layer_norm(f.queue(), dyo.get(), nullptr, nullptr, dy.get(), nullptr, nullptr, 2,
                             1e-5, nullptr) == TRN_SUCCESS);
  require_close(f.read(dyo), host::layer_norm(y, 2, nullptr, nullptr, 1e-5).out,
                tolerance(TRN_DTYPE_F32), "layer_norm of the whole tensor");
  CHECK(fallback_count("layer_norm") == 0);
}

TEST_CASE("layer_norm with a weight and no bias, or f16 statistics, runs on the host, recorded",
          "[ops][norm]") {
  OpsFixture f;
  std::mt19937 rng(22);
  const host_array x = random_array(rng, {5, 33}, TRN_DTYPE_F32);
  const host_array w = random_array(rng, {33}, TRN_DTYPE_F32, 0.5, 1.5);
  DeviceTensor dx = f.tensor(TRN_DTYPE_F32, x), dw = f.tensor(TRN_DTYPE_F32, w),
               dout = f.tensor(TRN_DTYPE_F32, {5, 33});
  REQUIRE(trn_ops_layer_norm(f.queue(), dout.get(), nullptr, nullptr, dx.get(), dw.get(), nullptr,
                             1, 1e-5, nullptr) == TRN_SUCCESS);
  const host::NormResult want = host::layer_norm(x, 1, &w, nullptr, 1e-5);
  require_close(f.read(dout), rounded(want.out, TRN_DTYPE_F32), kRoundedOnce,
                "layer_norm weight only");
  CHECK(fallback_count("layer_norm") == 1);
  DeviceTensor dmean = f.tensor(TRN_DTYPE_F16, {5, 1}), drstd = f.tensor(TRN_DTYPE_F16, {5, 1});
  REQUIRE(trn_ops_layer_norm(f.queue(), dout.get(), dmean.get(), drstd.get(), dx.get(), nullptr,
                             nullptr, 1, 1e-5, nullptr) == TRN_SUCCESS);
  const host::NormResult plain = host::layer_norm(x, 1, nullptr, nullptr, 1e-5);
  require_close(f.read(dmean), rounded(plain.mean, TRN_DTYPE_F16), kRoundedOnce, "f16 mean");
  require_close(f.read(drstd), rounded(plain.rstd, TRN_DTYPE_F16), kRoundedOnce, "f16 rstd");
  CHECK(fallback_count("layer_norm") == 2);
}

TEST_CASE("layer_norm_backward on the device (f32 gradients, f32 or bf16 inputs) and on the host",
          "[ops][norm]") {
  OpsFixture f;
  std::mt19937 rng(23);
  const double eps = 1e-5;
  struct Case {
    Shape x;
    uint32_t ndim;
    bool affine;
    trn_dtype_t dtype;  // of x, grad_out and the weights; the gradients are f32
  } cases[] = {{{7, 129}, 1, true, TRN_DTYPE_F32},  {{4, 3, 43}, 2, true, TRN_DTYPE_F32},
               {{9, 17}, 1, false, TRN_DTYPE_F32},  {{9, 65}, 1, true, TRN_DTYPE_BF16},
               {{2, 4097}, 1, true, TRN_DTYPE_F32}, {{4097, 2}, 1, true, TRN_DTYPE_F32}};
  for (const Case &c : cases) {
    const Shape normalized(c.x.end() - c.ndim, c.x.end());
    const host_array x = random_array(rng, c.x, c.dtype);
    const host_array g = random_array(rng, c.x, c.dtype);
    const host_array w = random_array(rng, normalized, c.dtype, 0.5, 1.5);
    const host_array b = random_array(rng, normalized, c.dtype);
    const host::NormResult fwd = host::layer_norm(x, c.ndim, &w, &b, eps);
    DeviceTensor dx = f.tensor(c.dtype, x), dg = f.tensor(c.dtype, g), dw = f.tensor(c.dtype, w),
                 db = f.tensor(c.dtype, b), dout = f.tensor(c.dtype, c.x),
                 dmean = f.tensor(TRN_DTYPE_F32, fwd.mean.shape),
                 drstd = f.tensor(TRN_DTYPE_F32, fwd.rstd.shape);
    const trn_ops_tensor_t *weight = c.affine ? dw.get() : nullptr;
    INFO(trn_dtype_name(c.dtype) << " x " << x.data.size() << " ndim " << c.ndim
                                 << (c.affine ? " affine" : "") << ": " << ops_error());
    REQUIRE(trn_ops_layer_norm(f.queue(), dout.get(), dmean.get(), drstd.get(), dx.get(), weight,
                               c.affine ? db.get() : nullptr, c.ndim, eps, nullptr) == TRN_SUCCESS);
    // The reference's backward from the device's statistics: this checks the backward alone.
    const host_array mean = f.read(dmean), rstd = f.read(drstd);
    const host::NormGrads want =
        host::layer_norm_backward(g, x, mean, rstd, c.ndim, c.affine ? &w : nullptr, c.affine);
    DeviceTensor dgx = f.tensor(TRN_DTYPE_F32, c.x), dgw = f.tensor(TRN_DTYPE_F32, normalized),
                 dgb = f.tensor(TRN_DTYPE_F32, normalized);
    REQUIRE(trn_ops_layer_norm_backward(f.queue(), dgx.get(), c.affine ? dgw.get() : nullptr,
                                        c.affine ? dgb.get() : nullptr, dg.get(), dx.get(),
                                        dmean.get(), drstd.get(), weight, c.ndim,
                                        nullptr) == TRN_SUCCESS);
    // grad_x sums over the normalized elements, grad_weight and grad_bias over the rows.
    const int64_t cols = static_cast<int64_t>(w.data.size());
    require_close(f.read(dgx), want.grad_x, accumulated(cols), "grad_x");
    if (c.affine) {
      const int64_t rows = static_cast<int64_t>(x.data.size()) / cols;
      require_close(f.read(dgw), want.grad_weight, accumulated(rows), "grad_weight");
      require_close(f.read(dgb), want.grad_bias, accumulated(rows), "grad_bias");
    }
    CHECK(fallback_count("layer_norm_backward") == 0);
    CHECK(fallback_count("layer_norm") == 0);
  }
  SECTION("weight gradients alone (no grad_x) on the host, recorded") {
    const host_array x = random_array(rng, {6, 20}, TRN_DTYPE_F32),
                     g = random_array(rng, {6, 20}, TRN_DTYPE_F32),
                     w = random_array(rng, {20}, TRN_DTYPE_F32, 0.5, 1.5);
    const host::NormResult fwd = host::layer_norm(x, 1, &w, nullptr, eps);
    DeviceTensor dx = f.tensor(TRN_DTYPE_F32, x), dg = f.tensor(TRN_DTYPE_F32, g),
                 dw = f.tensor(TRN_DTYPE_F32, w), dmean = f.tensor(TRN_DTYPE_F32, fwd.mean),
                 drstd = f.tensor(TRN_DTYPE_F32, fwd.rstd), dgw = f.tensor(TRN_DTYPE_F32, {20}),
                 dgb = f.tensor(TRN_DTYPE_F32, {20});
    REQUIRE(trn_ops_layer_norm_backward(f.queue(), nullptr, dgw.get(), dgb.get(), dg.get(),
                                        dx.get(), dmean.get(), drstd.get(), dw.get(), 1,
                                        nullptr) == TRN_SUCCESS);
    const host::NormGrads want =
        host::layer_norm_backward(g, x, f.read(dmean), f.read(drstd), 1, &w, true);
    require_close(f.read(dgw), rounded(want.grad_weight, TRN_DTYPE_F32), kRoundedOnce,
                  "host grad_weight");
    require_close(f.read(dgb), rounded(want.grad_bias, TRN_DTYPE_F32), kRoundedOnce,
                  "host grad_bias");
    CHECK(fallback_count("layer_norm_backward") == 1);
  }
}

TEST_CASE("layer_norm_backward matches central finite differences of the forward", "[ops][norm]") {
  // The finite differences are of the library's own forward; the gradients checked are the
  // device's, f32. Why float64 tensors (which the library runs on the host): an fp32 forward
  // rounds each output by ~6e-8 relative and the central difference divides that by 2h = 2e-5,
  // leaving errors of 1e-3 or more, far above the f32 tolerance the gradients are held to (a larger
  // h would trade that for truncation error); the f64 forward leaves ~1e-11.
  OpsFixture f;
  std::mt19937 rng(24);
  const Shape shape = {3, 8}, normalized = {8};
  const double eps = 1e-5;
  const host_array x = random_array(rng, shape, TRN_DTYPE_F32);
  const host_array g = random_array(rng, shape, TRN_DTYPE_F32);
  const host_array w = random_array(rng, normalized, TRN_DTYPE_F32, 0.5, 1.5);
  const host_array b = random_array(rng, normalized, TRN_DTYPE_F32);
  // The device's gradients: grad_x sums over the 8 normalized elements, grad_weight and grad_bias
  // over the 3 rows, in fp32 (hence accumulated(8) and accumulated(3) below).
  DeviceTensor dx = f.tensor(TRN_DTYPE_F32, x), dg = f.tensor(TRN_DTYPE_F32, g),
               dw = f.tensor(TRN_DTYPE_F32, w), db = f.tensor(TRN_DTYPE_F32, b),
               dout = f.tensor(TRN_DTYPE_F32, shape), dmean = f.tensor(TRN_DTYPE_F32, {3, 1}),
               drstd = f.tensor(TRN_DTYPE_F32, {3, 1}), dgx = f.tensor(TRN_DTYPE_F32, shape),
               dgw = f.tensor(TRN_DTYPE_F32, normalized), dgb = f.tensor(TRN_DTYPE_F32, normalized);
  INFO(ops_error());
  REQUIRE(trn_ops_layer_norm(f.queue(), dout.get(), dmean.get(), drstd.get(), dx.get(), dw.get(),
                             db.get(), 1, eps, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_ops_layer_norm_backward(f.queue(), dgx.get(), dgw.get(), dgb.get(), dg.get(),
                                      dx.get(), dmean.get(), drstd.get(), dw.get(), 1,
                                      nullptr) == TRN_SUCCESS);
  const host_array gx = f.read(dgx), gw = f.read(dgw), gb = f.read(dgb);
  CHECK(fallback_count("layer_norm_backward") == 0);
  // sum(g * layer_norm(x, w, b)) on f64 tensors.
  DeviceTensor px = f.tensor(TRN_DTYPE_F64, x), pw = f.tensor(TRN_DTYPE_F64, w),
               pb = f.tensor(TRN_DTYPE_F64, b), py = f.tensor(TRN_DTYPE_F64, shape);
  auto loss = [&]() {
    REQUIRE(trn_ops_layer_norm(f.queue(), py.get(), nullptr, nullptr, px.get(), pw.get(), pb.get(),
                               1, eps, nullptr) == TRN_SUCCESS);
    return dot(g, f.read(py));
  };
  check_gradient(f, loss, gx, x, px, accumulated(8), "grad_x vs finite differences");
  check_gradient(f, loss, gw, w, pw, accumulated(3), "grad_weight vs finite differences");
  check_gradient(f, loss, gb, b, pb, accumulated(3), "grad_bias vs finite differences");
}

TEST_CASE("rms_norm and its backward on the device and the host", "[ops][norm]") {
  OpsFixture f;
  std::mt19937 rng(25);
  const double eps = 1e-6;
  struct Case {
    Shape x;
    uint32_t ndim;
  } cases[] = {{{7, 129}, 1}, {{4, 3, 43}, 2}, {{3, 4097}, 1}, {{4097, 2}, 1}};
  for (const Case &c : cases) {
    const Shape normalized(c.x.end() - c.ndim, c.x.end());
    const host_array x = random_array(rng, c.x, TRN_DTYPE_F32);
    const host_array g = random_array(rng, c.x, TRN_DTYPE_F32);
    const host_array w = random_array(rng, normalized, TRN_DTYPE_F32, 0.5, 1.5);
    DeviceTensor dx = f.tensor(TRN_DTYPE_F32, x), dg = f.tensor(TRN_DTYPE_F32, g),
                 dw = f.tensor(TRN_DTYPE_F32, w);
    for (int affine = 0; affine < 2; ++affine) {
      const host::NormResult want = host::rms_norm(x, c.ndim, affine ? &w : nullptr, eps);
      DeviceTensor dout = f.tensor(TRN_DTYPE_F32, c.x),
                   drstd = f.tensor(TRN_DTYPE_F32, want.rstd.shape);
      INFO("ndim " << c.ndim << (affine ? " affine" : "") << ": " << ops_error());
      // Without the statistics, then with them (what backward takes).
      REQUIRE(trn_ops_rms_norm(f.queue(), dout.get(), nullptr, dx.get(),
                               affine ? dw.get() : nullptr, c.ndim, eps, nullptr) == TRN_SUCCESS);
      require_close(f.read(dout), want.out, tolerance(TRN_DTYPE_F32), "rms_norm");
      REQUIRE(trn_ops_rms_norm(f.queue(), dout.get(), drstd.get(), dx.get(),
                               affine ? dw.get() : nullptr, c.ndim, eps, nullptr) == TRN_SUCCESS);
      require_close(f.read(dout), want.out, tolerance(TRN_DTYPE_F32), "rms_norm with rstd");
      const host_array rstd = f.read(drstd);
      require_close(rstd, want.rstd, tolerance(TRN_DTYPE_F32), "rstd");
      const host::NormGrads grads =
          host::rms_norm_backward(g, x, rstd, c.ndim, affine ? &w : nullptr);
      DeviceTensor dgx = f.tensor(TRN_DTYPE_F32, c.x), dgw = f.tensor(TRN_DTYPE_F32, normalized);
      REQUIRE(trn_ops_rms_norm_backward(
                  f.queue(), dgx.get(), affine ? dgw.get() : nullptr, dg.get(), dx.get(),
                  drstd.get(), affine ? dw.get() : nullptr, c.ndim, nullptr) == TRN_SUCCESS);
      const int64_t cols = static_cast<int64_t>(w.data.size());
      require_close(f.read(dgx), grads.grad_x, accumulated(cols), "rms grad_x");
      if (affine)
        require_close(f.read(dgw), grads.grad_weight,
                      accumulated(static_cast<int64_t>(x.data.size()) / cols), "rms grad_weight");
    }
  }
  CHECK(fallback_count("rms_norm") == 0);
  CHECK(fallback_count("rms_norm_backward") == 0);
  SECTION("f16 statistics: the forward on the host, recorded") {
    const host_array x = random_array(rng, {5, 24}, TRN_DTYPE_F32);
    DeviceTensor dx = f.tensor(TRN_DTYPE_F32, x), dout = f.tensor(TRN_DTYPE_F32, {5, 24}),
                 drstd = f.tensor(TRN_DTYPE_F16, {5, 1});
    REQUIRE(trn_ops_rms_norm(f.queue(), dout.get(), drstd.get(), dx.get(), nullptr, 1, eps,
                             nullptr) == TRN_SUCCESS);
    const host::NormResult want = host::rms_norm(x, 1, nullptr, eps);
    require_close(f.read(dout), rounded(want.out, TRN_DTYPE_F32), kRoundedOnce, "host rms_norm");
    require_close(f.read(drstd), rounded(want.rstd, TRN_DTYPE_F16), kRoundedOnce, "host f16 rstd");
    CHECK(fallback_count("rms_norm") == 1);
  }
  SECTION("bf16 x with an f32 grad_out: the backward on the host, recorded") {
    const host_array x = random_array(rng, {5, 24}, TRN_DTYPE_BF16),
                     g = random_array(rng, {5, 24}, TRN_DTYPE_F32);
    const host::NormResult fwd = host::rms_norm(x, 1, nullptr, eps);
    DeviceTensor dx = f.tensor(TRN_DTYPE_BF16, x), dg = f.tensor(TRN_DTYPE_F32, g),
                 drstd = f.tensor(TRN_DTYPE_F32, fwd.rstd), dgx = f.tensor(TRN_DTYPE_F32, {5, 24});
    // grad_out f32 against x bf16: the kernel takes one dtype for both.
    REQUIRE(trn_ops_rms_norm_backward(f.queue(), dgx.get(), nullptr, dg.get(), dx.get(),
                                      drstd.get(), nullptr, 1, nullptr) == TRN_SUCCESS);
    const host::NormGrads want =
        host::rms_norm_backward(g, x, rounded(fwd.rstd, TRN_DTYPE_F32), 1, nullptr);
    require_close(f.read(dgx), rounded(want.grad_x, TRN_DTYPE_F32), kRoundedOnce,
                  "host rms grad_x");
    CHECK(fallback_count("rms_norm_backward") == 1);
  }
}

TEST_CASE(
    "nll_loss: every reduction, with and without weight and ignore_index, i64 and i32 "
    "targets, and its backward",
    "[ops][loss]") {
  OpsFixture f;
  std::mt19937 rng(26);
  const trn_dtype_t target_dtype = GENERATE(TRN_DTYPE_I64, TRN_DTYPE_I32);
  const int64_t n = 13, classes = 5;
  const host_array log_probs = rounded(
      host::softmax(random_array(rng, {n, classes}, TRN_DTYPE_F32), -1, true), TRN_DTYPE_F32);
  const host_array target = class_targets(rng, n, classes, 2);
  const host_array weight = random_array(rng, {classes}, TRN_DTYPE_F32, 0.1, 2.0);
  DeviceTensor dlp = f.tensor(TRN_DTYPE_F32, log_probs), dt = f.tensor(target_dtype, target),
               dw = f.tensor(TRN_DTYPE_F32, weight), dtw = f.tensor(TRN_DTYPE_F32, Shape{});
  uint64_t forward = 0, backward = 0;
  for (auto reduction : {TRN_OPS_REDUCTION_NONE, TRN_OPS_REDUCTION_MEAN, TRN_OPS_REDUCTION_SUM}) {
    for (int weighted = 0; weighted < 2; ++weighted) {
      for (int64_t ignore : {int64_t{-100}, int64_t{2}}) {
        const auto r = static_cast<host::Reduction>(reduction);
        const host::NllResult want =
            host::nll_loss(log_probs, target, weighted ? &weight : nullptr, r, ignore);
        DeviceTensor dout = f.tensor(TRN_DTYPE_F32, want.out.shape);
        INFO("reduction " << reduction << (weighted ? " weighted" : "") << " ignore " << ignore
                          << ": " << ops_error());
        REQUIRE(trn_ops_nll_loss(f.queue(), dout.get(), dtw.get(), dlp.get(), dt.get(),
                                 weighted ? dw.get() : nullptr, reduction, ignore,
                                 nullptr) == TRN_SUCCESS);
        ++forward;
        require_close(f.read(dout), rounded(want.out, TRN_DTYPE_F32), kRoundedOnce, "nll_loss");
        require_close(f.read(dtw), rounded(want.total_weight, TRN_DTYPE_F32), kRoundedOnce,
                      "total_weight");
        const host_array g = random_array(rng, want.out.shape, TRN_DTYPE_F32);
        DeviceTensor dg = f.tensor(TRN_DTYPE_F32, g), dgl = f.tensor(TRN_DTYPE_F32, {n, classes});
        REQUIRE(trn_ops_nll_loss_backward(f.queue(), dgl.get(), dg.get(), dlp.get(), dt.get(),
                                          weighted ? dw.get() : nullptr, reduction, ignore,
                                          dtw.get(), nullptr) == TRN_SUCCESS);
        ++backward;
        const host_array grad =
            host::nll_loss_backward(g, log_probs, target, weighted ? &weight : nullptr, r, ignore,
                                    rounded(want.total_weight, TRN_DTYPE_F32));
        require_close(f.read(dgl), rounded(grad, TRN_DTYPE_F32), kRoundedOnce, "nll_loss_backward");
        if (ignore == 2) {  // ignored rows get no gradient
          const host_array got = f.read(dgl);
          for (int64_t i = 1; i < n; i += 4)
            for (int64_t c = 0; c < classes; ++c) CHECK(got.data[i * classes + c] == 0);
        }
      }
    }
  }
  SECTION("a single sample: log_probs [C] with a scalar target") {
    const host_array lp1{{classes}, {log_probs.data.begin(), log_probs.data.begin() + classes}};
    const host_array t1 = host_array::full({}, 3);
    DeviceTensor dlp1 = f.tensor(TRN_DTYPE_F32, lp1), dt1 = f.tensor(target_dtype, t1),
                 dout = f.tensor(TRN_DTYPE_F32, Shape{});
    REQUIRE(trn_ops_nll_loss(f.queue(), dout.get(), nullptr, dlp1.get(), dt1.get(), nullptr,
                             TRN_OPS_REDUCTION_MEAN, -100, nullptr) == TRN_SUCCESS);
    ++forward;
    CHECK(f.read(dout).data[0] == -lp1.data[3]);
  }
  // No device kernel for these: every call ran on the host, recorded.
  CHECK(fallback_count("nll_loss") == forward);
  CHECK(fallback_count("nll_loss_backward") == backward);
}

TEST_CASE("embedding and its backward, with repeated indices and padding_idx", "[ops][embedding]") {
  OpsFixture f;
  std::mt19937 rng(27);
  const trn_dtype_t index_dtype = GENERATE(TRN_DTYPE_I64, TRN_DTYPE_I32);
  const int64_t vocab = 11, dim = 6;
  const host_array weight = random_array(rng, {vocab, dim}, TRN_DTYPE_F32);
  // Repeats (3 three times, 7 twice) and the padding row 0.
  const host_array indices{{3, 4}, {3, 0, 7, 3, 10, 7, 0, 1, 3, 5, 2, 9}};
  DeviceTensor dw = f.tensor(TRN_DTYPE_F32, weight), di = f.tensor(index_dtype, indices),
               dout = f.tensor(TRN_DTYPE_F32, {3, 4, dim});
  INFO(trn_dtype_name(index_dtype) << ": " << ops_error());
  REQUIRE(trn_ops_embedding(f.queue(), dout.get(), dw.get(), di.get(), nullptr) == TRN_SUCCESS);
  const host_array out = f.read(dout);
  CHECK(out.data == host::embedding(weight, indices).data);  // rows copied exactly
  const host_array g = random_array(rng, {3, 4, dim}, TRN_DTYPE_F32);
  DeviceTensor dg = f.tensor(TRN_DTYPE_F32, g), dgw = f.tensor(TRN_DTYPE_F32, {vocab, dim});
  for (int64_t padding : {int64_t{-1}, int64_t{0}}) {
    REQUIRE(trn_ops_embedding_backward(f.queue(), dgw.get(), dg.get(), di.get(), padding,
                                       nullptr) == TRN_SUCCESS);
    const host_array got = f.read(dgw);
    require_close(got, rounded(host::embedding_backward(g, indices, vocab, padding), TRN_DTYPE_F32),
                  kRoundedOnce, "embedding_backward");
    // Row 3 sums three rows of grad_out; rows never indexed (4, 6, 8) stay zero; padding too.
    for (int64_t d = 0; d < dim; ++d) {
      CHECK(got.data[3 * dim + d] ==
            Approx(g.data[0 * dim + d] + g.data[3 * dim + d] + g.data[8 * dim + d]).epsilon(1e-6));
      CHECK(got.data[4 * dim + d] == 0);
      if (padding == 0) CHECK(got.data[d] == 0);
    }
  }
  CHECK(fallback_count("embedding") == 1);
  CHECK(fallback_count("embedding_backward") == 2);
}

TEST_CASE("conv2d with stride, padding, dilation, groups and bias, and its backward",
          "[ops][conv]") {
  OpsFixture f;
  std::mt19937 rng(28);
  struct Case {
    Shape x, w;
    trn_ops_conv2d_params_t p;
    bool bias;
  } cases[] = {
      {{2, 3, 7, 6}, {4, 3, 3, 3}, {{0, 0}, {0, 0}, {0, 0}, 0}, true},
      {{1, 4, 9, 8}, {6, 2, 3, 2}, {{2, 1}, {1, 0}, {1, 2}, 2}, true},
      {{2, 2, 5, 5}, {2, 1, 2, 2}, {{1, 2}, {1, 1}, {2, 1}, 2}, false},
      {{1, 1, 1, 1}, {3, 1, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 1}, true},
  };
  for (const Case &c : cases) {
    host::Conv2dParams hp;
    for (int i = 0; i < 2; ++i) {
      hp.stride[i] = c.p.stride[i] ? c.p.stride[i] : 1;
      hp.padding[i] = c.p.padding[i];
      hp.dilation[i] = c.p.dilation[i] ? c.p.dilation[i] : 1;
    }
    hp.groups = c.p.groups ? c.p.groups : 1;
    const host_array x = random_array(rng, c.x, TRN_DTYPE_F32);
    const host_array w = random_array(rng, c.w, TRN_DTYPE_F32);
    const host_array b = random_array(rng, {c.w[0]}, TRN_DTYPE_F32);
    const host_array want = host::conv2d(x, w, c.bias ? &b : nullptr, hp);
    DeviceTensor dx = f.tensor(TRN_DTYPE_F32, x), dw = f.tensor(TRN_DTYPE_F32, w),
                 db = f.tensor(TRN_DTYPE_F32, b), dout = f.tensor(TRN_DTYPE_F32, want.shape);
    INFO("x " << x.data.size() << " w " << w.data.size() << " groups " << hp.groups << ": "
              << ops_error());
    // groups = 1 runs on the device (fp32 sums of at most every x and w term); groups > 1 on
    // the host (float64, rounded once).
    const double tol = hp.groups == 1
                           ? tolerance(TRN_DTYPE_F32) *
                                 std::sqrt(static_cast<double>(x.data.size() + w.data.size()))
                           : kRoundedOnce;
    REQUIRE(trn_ops_conv2d(f.queue(), dout.get(), dx.get(), dw.get(), c.bias ? db.get() : nullptr,
                           &c.p, nullptr) == TRN_SUCCESS);
    require_close(f.read(dout), rounded(want, TRN_DTYPE_F32), tol, "conv2d");
    const host_array g = random_array(rng, want.shape, TRN_DTYPE_F32);
    const host::Conv2dGrads grads = host::conv2d_backward(g, x, w, c.bias, hp);
    DeviceTensor dg = f.tensor(TRN_DTYPE_F32, g), dgx = f.tensor(TRN_DTYPE_F32, c.x),
                 dgw = f.tensor(TRN_DTYPE_F32, c.w), dgb = f.tensor(TRN_DTYPE_F32, {c.w[0]});
    REQUIRE(trn_ops_conv2d_backward(f.queue(), dgx.get(), dgw.get(), c.bias ? dgb.get() : nullptr,
                                    dg.get(), dx.get(), dw.get(), &c.p, nullptr) == TRN_SUCCESS);
    require_close(f.read(dgx), rounded(grads.grad_x, TRN_DTYPE_F32), tol, "conv2d grad_x");
    require_close(f.read(dgw), rounded(grads.grad_w, TRN_DTYPE_F32), tol, "conv2d grad_weight");
    if (c.bias)
      require_close(f.read(dgb), rounded(grads.grad_bias, TRN_DTYPE_F32), tol, "conv2d grad_bias");
    // grad_weight alone.
    REQUIRE(trn_ops_conv2d_backward(f.queue(), nullptr, dgw.get(), nullptr, dg.get(), dx.get(),
                                    dw.get(), &c.p, nullptr) == TRN_SUCCESS);
    require_close(f.read(dgw), rounded(grads.grad_w, TRN_DTYPE_F32), tol, "grad_weight alone");
  }
  // The two grouped cases, forward once and backward twice each, on the host.
  CHECK(fallback_count("conv2d") == 2);
  CHECK(fallback_count("conv2d_backward") == 4);
}

TEST_CASE("conv2d_backward matches central finite differences of the forward", "[ops][conv]") {
  // The finite differences are of the library's own forward; the gradients checked are those of
  // f32 tensors. Why float64 tensors (which the library runs on the host): an fp32 forward
  // rounds each output by ~6e-8 relative and the central difference divides that by 2h = 2e-5,
  // leaving errors of 1e-3 or more, far above the f32 tolerance the gradients are held to (a larger
  // h would trade that for truncation error); the f64 forward leaves ~1e-11.
  OpsFixture f;
  std::mt19937 rng(29);
  const trn_ops_conv2d_params_t p = {{2, 1}, {1, 1}, {1, 2}, 2};
  const Shape xs = {1, 2, 5, 6}, ws = {4, 1, 2, 2};
  const host_array x = random_array(rng, xs, TRN_DTYPE_F32);
  const host_array w = random_array(rng, ws, TRN_DTYPE_F32);
  const host_array b = random_array(rng, {4}, TRN_DTYPE_F32);
  host::Conv2dParams hp;
  hp.stride[0] = 2;
  hp.padding[0] = hp.padding[1] = 1;
  hp.dilation[1] = 2;
  hp.groups = 2;
  const Shape os = host::conv2d(x, w, &b, hp).shape;
  const host_array g = random_array(rng, os, TRN_DTYPE_F32);
  DeviceTensor dx = f.tensor(TRN_DTYPE_F32, x), dw = f.tensor(TRN_DTYPE_F32, w),
               dg = f.tensor(TRN_DTYPE_F32, g), dgx = f.tensor(TRN_DTYPE_F32, xs),
               dgw = f.tensor(TRN_DTYPE_F32, ws), dgb = f.tensor(TRN_DTYPE_F32, {4});
  INFO(ops_error());
  REQUIRE(trn_ops_conv2d_backward(f.queue(), dgx.get(), dgw.get(), dgb.get(), dg.get(), dx.get(),
                                  dw.get(), &p, nullptr) == TRN_SUCCESS);
  const host_array gx = f.read(dgx), gw = f.read(dgw), gb = f.read(dgb);
  DeviceTensor px = f.tensor(TRN_DTYPE_F64, x), pw = f.tensor(TRN_DTYPE_F64, w),
               pb = f.tensor(TRN_DTYPE_F64, b), py = f.tensor(TRN_DTYPE_F64, os);
  auto loss = [&]() {
    REQUIRE(trn_ops_conv2d(f.queue(), py.get(), px.get(), pw.get(), pb.get(), &p, nullptr) ==
            TRN_SUCCESS);
    return dot(g, f.read(py));
  };
  const double tol = tolerance(TRN_DTYPE_F32);
  check_gradient(f, loss, gx, x, px, tol, "conv grad_x vs finite differences");
  check_gradient(f, loss, gw, w, pw, tol, "conv grad_weight vs finite differences");
  check_gradient(f, loss, gb, b, pb, tol, "conv grad_bias vs finite differences");
}

TEST_CASE("max_pool2d with indices and ceil_mode, and its backward", "[ops][pool]") {
  OpsFixture f;
  std::mt19937 rng(30);
  const trn_dtype_t index_dtype = GENERATE(TRN_DTYPE_I64, TRN_DTYPE_I32);
  // ceil_mode adds a last, partial window where the floor would drop it: [7, 8] pooled 2x2 gives
  // 3 rows, 4 in ceil mode.
  struct Case {
    Shape x;
    trn_ops_pool2d_params_t p;
    Shape out;
  } cases[] = {
      {{2, 3, 7, 8}, {{2, 2}, {0, 0}, {0, 0}, {0, 0}, 0, 0}, {2, 3, 3, 4}},
      {{2, 3, 7, 8}, {{2, 2}, {0, 0}, {0, 0}, {0, 0}, 1, 0}, {2, 3, 4, 4}},
      {{2, 3, 7, 8}, {{3, 2}, {2, 2}, {1, 1}, {0, 0}, 1, 0}, {2, 3, 4, 5}},
      {{3, 9, 6}, {{2, 3}, {2, 2}, {0, 1}, {2, 1}, 1, 0}, {3, 4, 4}},
  };
  for (const Case &c : cases) {
    host::Pool2dParams hp;
    for (int i = 0; i < 2; ++i) {
      hp.kernel[i] = c.p.kernel[i];
      hp.stride[i] = c.p.stride[i] ? c.p.stride[i] : c.p.kernel[i];
      hp.padding[i] = c.p.padding[i];
      hp.dilation[i] = c.p.dilation[i] ? c.p.dilation[i] : 1;
    }
    hp.ceil_mode = c.p.ceil_mode != 0;
    const host_array x = random_array(rng, c.x, TRN_DTYPE_F32);
    const host::PoolResult want = host::max_pool2d(x, hp);
    CHECK(want.out.shape == c.out);
    DeviceTensor dx = f.tensor(TRN_DTYPE_F32, x), dout = f.tensor(TRN_DTYPE_F32, want.out.shape),
                 didx = f.tensor(index_dtype, want.out.shape);
    INFO("x rank " << c.x.size() << " kernel " << hp.kernel[0] << "x" << hp.kernel[1]
                   << (hp.ceil_mode ? " ceil" : "") << ": " << ops_error());
    REQUIRE(trn_ops_max_pool2d(f.queue(), dout.get(), didx.get(), dx.get(), &c.p, nullptr) ==
            TRN_SUCCESS);
    CHECK(f.read(dout).data == want.out.data);  // maxima are picked, not computed
    CHECK(f.read(didx).data == want.indices.data);
    // Without indices.
    REQUIRE(trn_ops_max_pool2d(f.queue(), dout.get(), nullptr, dx.get(), &c.p, nullptr) ==
            TRN_SUCCESS);
    CHECK(f.read(dout).data == want.out.data);
    const host_array g = random_array(rng, want.out.shape, TRN_DTYPE_F32);
    DeviceTensor dg = f.tensor(TRN_DTYPE_F32, g), dgx = f.tensor(TRN_DTYPE_F32, c.x);
    REQUIRE(trn_ops_max_pool2d_backward(f.queue(), dgx.get(), dg.get(), didx.get(), nullptr) ==
            TRN_SUCCESS);
    require_close(f.read(dgx),
                  rounded(host::max_pool2d_backward(g, c.x, want.indices), TRN_DTYPE_F32),
                  kRoundedOnce, "max_pool2d_backward");
  }
  CHECK(fallback_count("max_pool2d") == 8);
  CHECK(fallback_count("max_pool2d_backward") == 4);
}

TEST_CASE("sgd_step on the device, step by step against the reference", "[ops][optim]") {
  OpsFixture f;
  std::mt19937 rng(31);
  struct Case {
    const char *what;
    trn_ops_sgd_params_t p;
  } cases[] = {
      {"plain", {0.1, 0, 0, 0, 0, 0}},
      {"momentum and dampening", {0.05, 0.9, 0.25, 0, 0, 0}},
      {"nesterov", {0.05, 0.9, 0, 0, 1, 0}},
      {"weight decay", {0.1, 0, 0, 0.01, 0, 0}},
      {"momentum, weight decay, maximize", {0.02, 0.8, 0, 0.05, 0, 1}},
  };
  const Shape shape = GENERATE(Shape{129, 5}, Shape{4097});
  for (const Case &c : cases) {
    host::SgdParams hp;
    hp.lr = c.p.lr;
    hp.momentum = c.p.momentum;
    hp.dampening = c.p.dampening;
    hp.weight_decay = c.p.weight_decay;
    hp.nesterov = c.p.nesterov != 0;
    hp.maximize = c.p.maximize != 0;
    const bool momentum = c.p.momentum != 0;
    host_array param = random_array(rng, shape, TRN_DTYPE_F32);
    host_array buf = host_array::zeros(shape);
    DeviceTensor dp = f.tensor(TRN_DTYPE_F32, param), db = f.tensor(TRN_DTYPE_F32, buf);
    for (int step = 0; step < 3; ++step) {
      const host_array g = random_array(rng, shape, TRN_DTYPE_F32);
      DeviceTensor dg = f.tensor(TRN_DTYPE_F32, g);
      INFO(c.what << ", step " << step + 1 << ": " << ops_error());
      REQUIRE(trn_ops_sgd_step(f.queue(), dp.get(), dg.get(), momentum ? db.get() : nullptr,
                               step == 0, &c.p, nullptr) == TRN_SUCCESS);
      host::sgd_step(param, g, momentum ? &buf : nullptr, step == 0, hp);
      require_close(f.read(dp), param, tolerance(TRN_DTYPE_F32), "param");
      if (momentum) require_close(f.read(db), buf, tolerance(TRN_DTYPE_F32), "momentum_buf");
    }
  }
  CHECK(fallback_count("sgd_step") == 0);
}

TEST_CASE("sgd_step's first momentum step sets the buffer, whatever it held", "[ops][optim]") {
  OpsFixture f;
  std::mt19937 rng(34);
  host_array param = random_array(rng, {33}, TRN_DTYPE_F32);
  const host_array g = random_array(rng, {33}, TRN_DTYPE_F32);
  host_array buf = host_array::full({33}, NAN);  // torch sets it to the gradient on step 1
  DeviceTensor dp = f.tensor(TRN_DTYPE_F32, param), dg = f.tensor(TRN_DTYPE_F32, g),
               db = f.tensor(TRN_DTYPE_F32, buf);
  const trn_ops_sgd_params_t p = {0.1, 0.9, 0, 0.01, 1, 0};
  INFO(ops_error());
  REQUIRE(trn_ops_sgd_step(f.queue(), dp.get(), dg.get(), db.get(), 1, &p, nullptr) == TRN_SUCCESS);
  host::SgdParams hp;
  hp.lr = 0.1;
  hp.momentum = 0.9;
  hp.weight_decay = 0.01;
  hp.nesterov = true;
  host::sgd_step(param, g, &buf, true, hp);
  require_close(f.read(dp), param, tolerance(TRN_DTYPE_F32), "param");
  require_close(f.read(db), buf, tolerance(TRN_DTYPE_F32), "momentum_buf");
  CHECK(fallback_count("sgd_step") == 0);
}

TEST_CASE("adam_step (Adam, AdamW, amsgrad) on the device, step by step against the reference",
          "[ops][optim]") {
  OpsFixture f;
  std::mt19937 rng(32);
  struct Case {
    const char *what;
    trn_ops_adam_params_t p;
  } cases[] = {
      {"Adam", {1e-2, 0.9, 0.999, 1e-8, 0, 0, 0, 0, 0}},
      {"Adam with L2 weight decay", {1e-2, 0.9, 0.99, 1e-8, 0.05, 0, 0, 0, 0}},
      {"Adam with L2 weight decay, maximize", {1e-2, 0.9, 0.999, 1e-8, 0.05, 0, 0, 1, 0}},
      {"AdamW", {1e-2, 0.8, 0.999, 1e-6, 0.1, 1, 0, 0, 0}},
      {"Adam, amsgrad", {2e-2, 0.9, 0.999, 1e-8, 0, 0, 1, 0, 0}},
      {"AdamW, amsgrad, maximize", {1e-2, 0.9, 0.95, 1e-8, 0.01, 1, 1, 1, 0}},
  };
  const Shape shape = GENERATE(Shape{129, 3}, Shape{4097});
  for (const Case &c : cases) {
    host::AdamParams hp;
    hp.lr = c.p.lr;
    hp.beta1 = c.p.beta1;
    hp.beta2 = c.p.beta2;
    hp.eps = c.p.eps;
    hp.weight_decay = c.p.weight_decay;
    hp.decoupled = c.p.decoupled_weight_decay != 0;
    hp.amsgrad = c.p.amsgrad != 0;
    hp.maximize = c.p.maximize != 0;
    host_array param = random_array(rng, shape, TRN_DTYPE_F32);
    host_array m = host_array::zeros(shape), v = host_array::zeros(shape),
               vmax = host_array::zeros(shape);
    DeviceTensor dp = f.tensor(TRN_DTYPE_F32, param), dm = f.tensor(TRN_DTYPE_F32, m),
                 dv = f.tensor(TRN_DTYPE_F32, v), dvmax = f.tensor(TRN_DTYPE_F32, vmax);
    for (int64_t step = 1; step <= 4; ++step) {
      // Smaller gradients after the first: amsgrad's maximum then differs from exp_avg_sq.
      const host_array g =
          random_array(rng, shape, TRN_DTYPE_F32, step == 1 ? -2.0 : -0.5, step == 1 ? 2.0 : 0.5);
      DeviceTensor dg = f.tensor(TRN_DTYPE_F32, g);
      INFO(c.what << ", step " << step << ": " << ops_error());
      REQUIRE(trn_ops_adam_step(f.queue(), dp.get(), dg.get(), dm.get(), dv.get(),
                                hp.amsgrad ? dvmax.get() : nullptr, step, &c.p,
                                nullptr) == TRN_SUCCESS);
      host::adam_step(param, g, m, v, hp.amsgrad ? &vmax : nullptr, step, hp);
      require_close(f.read(dp), param, tolerance(TRN_DTYPE_F32), "param");
      require_close(f.read(dm), m, tolerance(TRN_DTYPE_F32), "exp_avg");
      require_close(f.read(dv), v, tolerance(TRN_DTYPE_F32), "exp_avg_sq");
      if (hp.amsgrad)
        require_close(f.read(dvmax), vmax, tolerance(TRN_DTYPE_F32), "max_exp_avg_sq");
    }
  }
  CHECK(fallback_count("adam_step") == 0);
  SECTION("a bf16 parameter and gradient with f32 state") {
    const trn_ops_adam_params_t p = {1e-2, 0.9, 0.999, 1e-8, 0.1, 1, 0, 0, 0};
    host::AdamParams hp;
    hp.lr = p.lr;
    hp.weight_decay = p.weight_decay;
    hp.decoupled = true;
    host_array param = random_array(rng, shape, TRN_DTYPE_BF16);
    host_array m = host_array::zeros(shape), v = host_array::zeros(shape);
    DeviceTensor dp = f.tensor(TRN_DTYPE_BF16, param), dm = f.tensor(TRN_DTYPE_F32, m),
                 dv = f.tensor(TRN_DTYPE_F32, v);
    for (int64_t step = 1; step <= 3; ++step) {
      const host_array g = random_array(rng, shape, TRN_DTYPE_BF16);
      DeviceTensor dg = f.tensor(TRN_DTYPE_BF16, g);
      INFO("bf16 step " << step << ": " << ops_error());
      REQUIRE(trn_ops_adam_step(f.queue(), dp.get(), dg.get(), dm.get(), dv.get(), nullptr, step,
                                &p, nullptr) == TRN_SUCCESS);
      host::adam_step(param, g, m, v, nullptr, step, hp);
      param = rounded(param, TRN_DTYPE_BF16);  // the parameter is stored in bf16 each step
      require_close(f.read(dp), param, tolerance(TRN_DTYPE_BF16), "bf16 param");
      require_close(f.read(dm), m, tolerance(TRN_DTYPE_F32), "f32 exp_avg");
      require_close(f.read(dv), v, tolerance(TRN_DTYPE_F32), "f32 exp_avg_sq");
    }
    CHECK(fallback_count("adam_step") == 0);
  }
}

TEST_CASE("ops on views at byte offsets inside larger allocations run on the device",
          "[ops][view]") {
  OpsFixture f;
  std::mt19937 rng(36);
  // A contiguous view of `shape` starting `offset` elements into an allocation of its own.
  auto view = [&](trn_dtype_t d, const Shape &shape, uint64_t offset) {
    uint64_t n = 1;
    for (int64_t s : shape) n *= static_cast<uint64_t>(s);
    DeviceTensor t = f.tensor(d, Shape{static_cast<int64_t>(n + offset + 7)});
    REQUIRE(trn_ops_tensor_init(&t.t, t.mem, offset * element_size(d), d,
                                static_cast<uint32_t>(shape.size()), shape.data()) == TRN_SUCCESS);
    return t;
  };
  for (const uint64_t off : {uint64_t{1}, uint64_t{3}, uint64_t{64}}) {
    INFO("offset " << off << " elements: " << ops_error());
    const host_array a = random_array(rng, {33, 65}, TRN_DTYPE_F32),
                     b = random_array(rng, {65, 17}, TRN_DTYPE_F32);
    DeviceTensor da = view(TRN_DTYPE_F32, a.shape, off), db = view(TRN_DTYPE_F32, b.shape, off + 1),
                 mm = view(TRN_DTYPE_F32, {33, 17}, off + 2);
    f.write(da, a);
    f.write(db, b);
    REQUIRE(trn_ops_matmul(f.queue(), mm.get(), da.get(), db.get(), 0, nullptr) == TRN_SUCCESS);
    require_close(f.read(mm), host::matmul(a, b, false, false), accumulated(65), "matmul");
    DeviceTensor sm = view(TRN_DTYPE_F32, a.shape, off + 5);
    REQUIRE(trn_ops_softmax(f.queue(), sm.get(), da.get(), -1, 0, nullptr) == TRN_SUCCESS);
    require_close(f.read(sm), host::softmax(a, -1, false), tolerance(TRN_DTYPE_F32), "softmax");
    const int64_t last = -1, first = 0;
    DeviceTensor sum = view(TRN_DTYPE_F32, {33}, off + 3), max = view(TRN_DTYPE_F32, {65}, off);
    REQUIRE(trn_ops_reduce(f.queue(), TRN_OPS_SUM, sum.get(), da.get(), &last, 1, 0, nullptr) ==
            TRN_SUCCESS);
    require_close(f.read(sum), host::reduce(host::Reduce::kSum, a, {-1}, false), accumulated(65),
                  "sum");
    REQUIRE(trn_ops_reduce(f.queue(), TRN_OPS_MAX, max.get(), da.get(), &first, 1, 0, nullptr) ==
            TRN_SUCCESS);
    require_close(f.read(max), host::reduce(host::Reduce::kMax, a, {0}, false), 0, "max");
    DeviceTensor ln = view(TRN_DTYPE_F32, a.shape, off + 1),
                 mean = view(TRN_DTYPE_F32, {33, 1}, off),
                 rstd = view(TRN_DTYPE_F32, {33, 1}, off + 2);
    REQUIRE(trn_ops_layer_norm(f.queue(), ln.get(), mean.get(), rstd.get(), da.get(), nullptr,
                               nullptr, 1, 1e-5, nullptr) == TRN_SUCCESS);
    const host::NormResult norm = host::layer_norm(a, 1, nullptr, nullptr, 1e-5);
    require_close(f.read(ln), norm.out, tolerance(TRN_DTYPE_F32), "layer_norm");
    require_close(f.read(rstd), norm.rstd, tolerance(TRN_DTYPE_F32), "rstd");
    host_array p = random_array(rng, {129}, TRN_DTYPE_F32);
    const host_array g = random_array(rng, {129}, TRN_DTYPE_F32);
    host_array m = host_array::zeros({129}), v = host_array::zeros({129});
    DeviceTensor dp = view(TRN_DTYPE_F32, {129}, off), dg = view(TRN_DTYPE_F32, {129}, off + 1),
                 dm = view(TRN_DTYPE_F32, {129}, off + 2), dv = view(TRN_DTYPE_F32, {129}, off + 3);
    f.write(dp, p);
    f.write(dg, g);
    f.write(dm, m);
    f.write(dv, v);
    const trn_ops_adam_params_t adam = {1e-2, 0.9, 0.999, 1e-8, 0, 0, 0, 0, 0};
    REQUIRE(trn_ops_adam_step(f.queue(), dp.get(), dg.get(), dm.get(), dv.get(), nullptr, 1, &adam,
                              nullptr) == TRN_SUCCESS);
    host::AdamParams hp;
    hp.lr = 1e-2;
    host::adam_step(p, g, m, v, nullptr, 1, hp);
    require_close(f.read(dp), p, tolerance(TRN_DTYPE_F32), "adam param");
    require_close(f.read(dm), m, tolerance(TRN_DTYPE_F32), "adam exp_avg");
    const host_array x16 = random_array(rng, {33, 65}, TRN_DTYPE_BF16);
    DeviceTensor dx16 = view(TRN_DTYPE_BF16, x16.shape, off),
                 dy16 = view(TRN_DTYPE_BF16, x16.shape, off + 1);
    f.write(dx16, x16);
    REQUIRE(trn_ops_softmax(f.queue(), dy16.get(), dx16.get(), -1, 1, nullptr) == TRN_SUCCESS);
    require_close(f.read(dy16), rounded(host::softmax(x16, -1, true), TRN_DTYPE_BF16),
                  tolerance(TRN_DTYPE_BF16), "bf16 log_softmax");
  }
  uint32_t n = 0;
  REQUIRE(trn_ops_get_fallbacks(&n, nullptr) == TRN_SUCCESS);
  CHECK(n == 0);
}

TEST_CASE("host-only mode gives the device's answers for layer_norm, softmax and adam",
          "[ops][fallback]") {
  OpsFixture f;
  std::mt19937 rng(33);
  const Shape shape = {9, 129};
  const host_array x = random_array(rng, shape, TRN_DTYPE_F32);
  const host_array w = random_array(rng, {129}, TRN_DTYPE_F32, 0.5, 1.5);
  const host_array b = random_array(rng, {129}, TRN_DTYPE_F32);
  const host_array g = random_array(rng, shape, TRN_DTYPE_F32);
  const trn_ops_adam_params_t adam = {1e-2, 0.9, 0.999, 1e-8, 0.01, 1, 1, 0, 0};
  struct Results {
    host_array norm, mean, rstd, soft, param, m, v, vmax;
  };
  auto run = [&](bool host_only) {
    f.configure(host_only ? TRN_OPS_CONFIG_HOST_ONLY : 0);
    REQUIRE(trn_ops_reset_fallbacks() == TRN_SUCCESS);
    DeviceTensor dx = f.tensor(TRN_DTYPE_F32, x), dw = f.tensor(TRN_DTYPE_F32, w),
                 db = f.tensor(TRN_DTYPE_F32, b), dg = f.tensor(TRN_DTYPE_F32, g),
                 dn = f.tensor(TRN_DTYPE_F32, shape), dmean = f.tensor(TRN_DTYPE_F32, {9, 1}),
                 drstd = f.tensor(TRN_DTYPE_F32, {9, 1}), ds = f.tensor(TRN_DTYPE_BF16, shape),
                 dp = f.tensor(TRN_DTYPE_F32, x), dm = f.tensor(TRN_DTYPE_F32, shape),
                 dv = f.tensor(TRN_DTYPE_F32, shape), dvmax = f.tensor(TRN_DTYPE_F32, shape);
    for (const DeviceTensor *t : {&dm, &dv, &dvmax})
      REQUIRE(trn_ops_fill(f.queue(), t->get(), 0.0, nullptr) == TRN_SUCCESS);
    INFO((host_only ? "host only: " : "device: ") << ops_error());
    REQUIRE(trn_ops_layer_norm(f.queue(), dn.get(), dmean.get(), drstd.get(), dx.get(), dw.get(),
                               db.get(), 1, 1e-5, nullptr) == TRN_SUCCESS);
    REQUIRE(trn_ops_softmax(f.queue(), ds.get(), dn.get(), -1, 0, nullptr) == TRN_SUCCESS);
    for (int64_t step = 1; step <= 2; ++step)
      REQUIRE(trn_ops_adam_step(f.queue(), dp.get(), dg.get(), dm.get(), dv.get(), dvmax.get(),
                                step, &adam, nullptr) == TRN_SUCCESS);
    const uint64_t expected = host_only ? 1 : 0;
    CHECK(fallback_count("layer_norm") == expected);
    CHECK(fallback_count("softmax") == expected);
    CHECK(fallback_count("adam_step") == 2 * expected);
    return Results{f.read(dn), f.read(dmean), f.read(drstd), f.read(ds),
                   f.read(dp), f.read(dm),    f.read(dv),    f.read(dvmax)};
  };
  const Results device = run(false);
  const Results on_host = run(true);
  require_close(device.norm, on_host.norm, tolerance(TRN_DTYPE_F32), "layer_norm");
  require_close(device.mean, on_host.mean, tolerance(TRN_DTYPE_F32), "mean");
  require_close(device.rstd, on_host.rstd, tolerance(TRN_DTYPE_F32), "rstd");
  require_close(device.soft, on_host.soft, tolerance(TRN_DTYPE_BF16), "softmax to bf16");
  require_close(device.param, on_host.param, tolerance(TRN_DTYPE_F32), "adam param");
  require_close(device.m, on_host.m, tolerance(TRN_DTYPE_F32), "adam exp_avg");
  require_close(device.v, on_host.v, tolerance(TRN_DTYPE_F32), "adam exp_avg_sq");
  require_close(device.vmax, on_host.vmax, tolerance(TRN_DTYPE_F32), "adam max_exp_avg_sq");
}

TEST_CASE("nn ops refuse bad shapes with a message, and nothing is built", "[ops][negative]") {
  OpsFixture f;
  DeviceTensor x = f.tensor(TRN_DTYPE_F32, {4, 6}), o = f.tensor(TRN_DTYPE_F32, {4, 6}),
               w5 = f.tensor(TRN_DTYPE_F32, {5}), st = f.tensor(TRN_DTYPE_F32, {4});
  auto refused = [&](trn_result_t r, const char *needle) {
    INFO("wanted \"" << needle << "\" in: " << ops_error());
    CHECK(r == TRN_ERROR_INVALID_ARGUMENT);
    CHECK(ops_error().find(needle) != std::string::npos);
  };
  refused(trn_ops_layer_norm(f.queue(), o.get(), nullptr, nullptr, x.get(), w5.get(), nullptr, 1,
                             1e-5, nullptr),
          "weight is f32[5]; it must be [6]");
  refused(trn_ops_layer_norm(f.queue(), o.get(), st.get(), st.get(), x.get(), nullptr, nullptr, 1,
                             1e-5, nullptr),
          "mean is f32[4]; it must be [4, 1]");
  refused(trn_ops_layer_norm(f.queue(), o.get(), nullptr, nullptr, x.get(), nullptr, nullptr, 3,
                             1e-5, nullptr),
          "normalized_ndim is 3");
  refused(trn_ops_rms_norm(f.queue(), o.get(), nullptr, x.get(), nullptr, 1, -1.0, nullptr),
          "eps is -1");
  DeviceTensor lp = f.tensor(TRN_DTYPE_F32, {4, 5}), t3 = f.tensor(TRN_DTYPE_I64, {3}),
               tf = f.tensor(TRN_DTYPE_F32, {4}), loss = f.tensor(TRN_DTYPE_F32, Shape{});
  refused(trn_ops_nll_loss(f.queue(), loss.get(), nullptr, lp.get(), t3.get(), nullptr,
                           TRN_OPS_REDUCTION_MEAN, -100, nullptr),
          "target is i64[3]; it must be [4]");
  refused(trn_ops_nll_loss(f.queue(), loss.get(), nullptr, lp.get(), tf.get(), nullptr,
                           TRN_OPS_REDUCTION_MEAN, -100, nullptr),
          "must hold integers");
  DeviceTensor cx = f.tensor(TRN_DTYPE_F32, {1, 4, 5, 5}),
               cw = f.tensor(TRN_DTYPE_F32, {2, 3, 3, 3}),
               co = f.tensor(TRN_DTYPE_F32, {1, 2, 3, 3});
  refused(trn_ops_conv2d(f.queue(), co.get(), cx.get(), cw.get(), nullptr, nullptr, nullptr),
          "do not fit groups = 1");
  const trn_ops_pool2d_params_t pool = {{2, 2}, {0, 0}, {2, 2}, {0, 0}, 0, 0};
  refused(trn_ops_max_pool2d(f.queue(), co.get(), nullptr, cx.get(), &pool, nullptr),
          "over half the kernel");
  DeviceTensor p = f.tensor(TRN_DTYPE_F32, {4, 6}), g5 = f.tensor(TRN_DTYPE_F32, {4, 5});
  const trn_ops_sgd_params_t sgd = {0.1, 0, 0, 0, 0, 0};
  refused(trn_ops_sgd_step(f.queue(), p.get(), g5.get(), nullptr, 1, &sgd, nullptr),
          "it must be [4, 6]");
  const trn_ops_adam_params_t adam = {1e-3, 0.9, 0.999, 1e-8, 0, 0, 0, 0, 0};
  refused(
      trn_ops_adam_step(f.queue(), p.get(), p.get(), p.get(), p.get(), nullptr, 0, &adam, nullptr),
      "steps count from 1");
  f.finish();
  uint32_t n = 0;
  REQUIRE(trn_ops_get_fallbacks(&n, nullptr) == TRN_SUCCESS);
  CHECK(n == 0);
  CHECK(cache_stats().builds == 0);
}
