// The op library's kernels, run on simulated cores of trn1 and trn2 and compared with
// double-precision host arithmetic over awkward shapes (1, 127, 129, 4097: no multiples of the
// 128-partition tiles): general matmul (transposes, batches, bias, launch-time alpha and beta),
// row log softmax and the softmax gradients, layer and RMS norm with their statistics and
// their gradients, conv2d forward and backward (against the op library's float64 reference).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <variant>

#include "ops/host/reference.hpp"
#include "ops/kernels/conv2d.hpp"
#include "ops/kernels/log_softmax.hpp"
#include "ops/kernels/matmul.hpp"
#include "ops/kernels/norm_grad.hpp"
#include "ops/kernels/norm_stats.hpp"
#include "ops/kernels/softmax_grad.hpp"
#include "support/kbuild_helpers.hpp"

using namespace trn;
using namespace trn::ops::kernels;
using isa::DType;
using sim::exec::Executor;
using sim::exec::RunStatus;
using test::HostBuffer;

namespace {

// A tensor of fp32 values, with its bytes in some dtype.
struct Tensor {
  DType dtype;
  std::vector<float> values;  // as the dtype holds them
  HostBuffer buffer;

  Tensor(uint64_t size, DType t) : dtype(t), values(size), buffer(size * isa::dtype_size(t)) {}
  void fill(std::mt19937 &rng, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    for (float &v : values) v = d(rng);
    isa::store_f32(dtype, values.data(), buffer.bytes.data(), values.size());
    isa::load_f32(dtype, buffer.bytes.data(), values.data(), values.size());
  }
  std::vector<float> read() const {
    std::vector<float> out(values.size());
    isa::load_f32(dtype, buffer.bytes.data(), out.data(), out.size());
    return out;
  }
};

// A kernel argument: a tensor, or an f32 scalar.
using Arg = std::variant<Tensor *, float>;

// Runs p and returns its simulated time in picoseconds.
uint64_t run(const isa::Program &p, trn_generation_t g, std::vector<Arg> args) {
  std::vector<sim::exec::HbmBinding> bindings;
  for (const Arg &a : args) {
    if (auto *t = std::get_if<Tensor *>(&a)) {
      bindings.push_back((*t)->buffer.binding());
    } else {
      uint32_t bits;
      const float v = std::get<float>(a);
      std::memcpy(&bits, &v, 4);
      bindings.push_back({nullptr, 0, bits});
    }
  }
  Executor ex(sim::core_spec(g));
  const auto r = test::run_checked(ex, p, bindings);
  INFO(r.report.message);
  REQUIRE(r.report.status == RunStatus::kOk);
  return r.counters.total_ps;
}

// The unit roundoff of a float dtype: the relative error of one rounding to it.
double roundoff(DType t) {
  switch (t) {
    case DType::kBf16: return std::ldexp(1.0, -8);
    case DType::kF16: return std::ldexp(1.0, -11);
    default: return std::ldexp(1.0, -24);
  }
}

const trn_generation_t kGenerations[] = {TRN_GENERATION_TRN1, TRN_GENERATION_TRN2};

}  // namespace

// ---------------------------------------------------------------------------------------------
// General matmul

namespace {

struct MatmulCase {
  uint64_t m, n, k, batch;
  bool trans_a, trans_b, b_batched;
  DType in, out;
  MatmulBias bias;
  DType bias_dtype;
  uint32_t sbuf_usable = 0;  // nonzero: a small SBUF, so that the operands are streamed
};

// Runs `mc` with alpha and beta and checks every element against the double-precision result.
void check_matmul(const MatmulCase &mc, trn_generation_t g, const isa::Program &p,
                  std::mt19937 &rng, float alpha, float beta) {
  const uint64_t m = mc.m, n = mc.n, k = mc.k, batches = mc.batch;
  Tensor a(batches * m * k, mc.in), b((mc.b_batched ? batches : 1) * k * n, mc.in),
      out(batches * m * n, mc.out);
  Tensor bias(mc.bias == MatmulBias::kRow      ? n
              : mc.bias == MatmulBias::kMatrix ? m * n
                                               : 1,
              mc.bias_dtype);
  a.fill(rng, -1, 1);
  b.fill(rng, -1, 1);
  bias.fill(rng, -4, 4);
  std::vector<Arg> args = {&a, &b};
  if (mc.bias != MatmulBias::kNone) args.push_back(&bias);
  args.push_back(&out);
  args.push_back(alpha);
  if (mc.bias != MatmulBias::kNone) args.push_back(beta);
  run(p, g, args);
  const auto got = out.read();
  for (uint64_t bt = 0; bt < batches; ++bt) {
    const float *ab = a.values.data() + bt * m * k;
    const float *bb = b.values.data() + (mc.b_batched ? bt : 0) * k * n;
    for (uint64_t i = 0; i < m; ++i)
      for (uint64_t j = 0; j < n; ++j) {
        double sum = 0, magnitude = 0;
        for (uint64_t x = 0; x < k; ++x) {
          const double av = mc.trans_a ? ab[x * m + i] : ab[i * k + x];
          const double bv = mc.trans_b ? bb[j * k + x] : bb[x * n + j];
          sum += av * bv;
          magnitude += std::abs(av * bv);
        }
        double want = double(alpha) * sum, scale = std::abs(double(alpha)) * magnitude;
        if (mc.bias != MatmulBias::kNone) {
          const double bv = bias.values[mc.bias == MatmulBias::kRow ? j : i * n + j];
          want += double(beta) * bv;
          scale += std::abs(double(beta) * bv);
        }
        // fp32 accumulation over K (and the fp32 epilogue), then one rounding to the output.
        const double tol = roundoff(mc.out) * std::abs(want) +
                           std::ldexp(1.0, -24) * double(k + 4) * scale + 1e-30;
        const double v = got[(bt * m + i) * n + j];
        if (std::abs(v - want) > tol) {
          CAPTURE(bt, i, j, v, want, tol);
          FAIL("matmul result out of tolerance");
        }
      }
  }
}

}  // namespace

namespace {

// Builds each case for every generation and checks it against double precision. The cases are
// split over three test cases so that each stays well inside its time limit under TSan.
void check_matmul_cases(const std::vector<MatmulCase> &cases, uint32_t seed,
                        const std::vector<trn_generation_t> &generations = {
                            std::begin(kGenerations), std::end(kGenerations)}) {
  std::mt19937 rng(seed);
  for (auto g : generations)
    for (const MatmulCase &mc : cases) {
      CAPTURE(g, mc.m, mc.n, mc.k, mc.batch, mc.trans_a, mc.trans_b, mc.b_batched,
              isa::dtype_name(mc.in), isa::dtype_name(mc.out), int(mc.bias));
      MatmulOpConfig c;
      c.m = mc.m, c.n = mc.n, c.k = mc.k, c.batch = mc.batch;
      c.trans_a = mc.trans_a, c.trans_b = mc.trans_b, c.b_batched = mc.b_batched;
      c.in_dtype = mc.in, c.out_dtype = mc.out, c.bias = mc.bias, c.bias_dtype = mc.bias_dtype;
      c.target = test::build_target(g);
      c.target.sbuf_usable_bytes = mc.sbuf_usable;
      const isa::Program p = test::built(build_matmul(c));
      check_matmul(mc, g, p, rng, 0.75f, -1.5f);
    }
}

using B = MatmulBias;

}  // namespace

TEST_CASE("ops kernels: general matmul matches double precision over awkward shapes",
          "[numerics]") {
  check_matmul_cases(
      {
          {1, 1, 1, 1, false, false, true, DType::kF32, DType::kF32, B::kNone, DType::kF32},
          {129, 513, 127, 1, true, true, true, DType::kF32, DType::kF32, B::kRow, DType::kF32},
          {130, 600, 200, 3, false, true, true, DType::kBf16, DType::kBf16, B::kMatrix,
           DType::kBf16},
          {64, 1000, 300, 2, true, false, false, DType::kF16, DType::kF32, B::kRow, DType::kF32},
      },
      11);
}

TEST_CASE("ops kernels: general matmul matches double precision with a dim of 4097", "[numerics]") {
  check_matmul_cases(
      {
          {127, 129, 4097, 1, false, false, true, DType::kBf16, DType::kF32, B::kNone, DType::kF32},
          {4097, 1, 129, 1, false, true, true, DType::kF32, DType::kF32, B::kNone, DType::kF32},
          {1, 4097, 129, 1, true, false, true, DType::kBf16, DType::kF16, B::kRow, DType::kF16},
      },
      12);
}

// Smaller SBUF: op(A)^T stays resident and B streams (transposed per tile), then the other way
// round, then neither fits resident and both stream (and are transposed) per tile. The plan
// depends on the SBUF given, not the generation: these run on trn2 alone, one case per test
// case, so that each stays well inside its time limit under TSan.
TEST_CASE("ops kernels: general matmul streams B when only op(A)^T stays resident", "[numerics]") {
  check_matmul_cases({{130, 1500, 1000, 1, false, true, true, DType::kF32, DType::kF32, B::kRow,
                       DType::kF32, 60000}},
                     13, {TRN_GENERATION_TRN2});
}

TEST_CASE("ops kernels: general matmul streams op(A)^T when only B stays resident", "[numerics]") {
  check_matmul_cases({{300, 100, 2600, 2, true, false, true, DType::kF32, DType::kF32, B::kNone,
                       DType::kF32, 60000}},
                     14, {TRN_GENERATION_TRN2});
}

TEST_CASE("ops kernels: general matmul streams both operands when neither stays resident",
          "[numerics]") {
  check_matmul_cases({{200, 700, 2000, 2, false, true, false, DType::kF32, DType::kBf16, B::kMatrix,
                       DType::kF32, 40000}},
                     15, {TRN_GENERATION_TRN2});
}

TEST_CASE("ops kernels: matmul takes alpha and beta at launch, one binary for every value") {
  const MatmulCase mc{
      65, 70, 33, 2, false, false, true, DType::kF32, DType::kF32, MatmulBias::kRow, DType::kF32};
  MatmulOpConfig c;
  c.m = mc.m, c.n = mc.n, c.k = mc.k, c.batch = mc.batch, c.bias = mc.bias;
  c.target = test::build_target(TRN_GENERATION_TRN2);
  const isa::Program p = test::built(build_matmul(c));
  CHECK(p.name == "matmul_f32_65x70x33_batch2_row_bias");
  std::mt19937 rng(12);
  for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, {0.0f, 1.0f}, {-2.5f, 3.0f}})
    check_matmul(mc, TRN_GENERATION_TRN2, p, rng, alpha, beta);
}

TEST_CASE("ops kernels: matmul refuses what it cannot build, saying why") {
  MatmulOpConfig c;
  c.m = 4, c.n = 4, c.k = 0;
  c.target = test::build_target(TRN_GENERATION_TRN2);
  auto r = build_matmul(c);
  REQUIRE(std::holds_alternative<std::string>(r));
  CHECK_THAT(std::get<std::string>(r), Catch::Contains("empty"));
  c.k = 4;
  c.in_dtype = DType::kI32;
  r = build_matmul(c);
  REQUIRE(std::holds_alternative<std::string>(r));
  CHECK_THAT(std::get<std::string>(r), Catch::Contains("f32, bf16 and f16"));
  c.in_dtype = DType::kBf16;
  c.out_dtype = DType::kBf16;
  c.bias = MatmulBias::kRow;
  c.bias_dtype = DType::kF16;
  r = build_matmul(c);
  REQUIRE(std::holds_alternative<std::string>(r));
  CHECK_THAT(std::get<std::string>(r), Catch::Contains("output's dtype"));
}

// ---------------------------------------------------------------------------------------------
// Log softmax and the softmax gradients

namespace {

struct RowCase {
  uint64_t rows, cols;
  DType dtype, out_dtype;
};

const RowCase kRowCases[] = {
    {1, 1, DType::kF32, DType::kF32},      {127, 4097, DType::kF32, DType::kF32},
    {129, 129, DType::kBf16, DType::kF32}, {300, 1000, DType::kBf16, DType::kBf16},
    {130, 77, DType::kF16, DType::kF32},
};

// log softmax of each row of x, in double.
std::vector<double> host_log_softmax(const std::vector<float> &x, uint64_t rows, uint64_t cols) {
  std::vector<double> y(x.size());
  for (uint64_t r = 0; r < rows; ++r) {
    const float *row = x.data() + r * cols;
    double mx = row[0], sum = 0;
    for (uint64_t i = 0; i < cols; ++i) mx = std::max(mx, double(row[i]));
    for (uint64_t i = 0; i < cols; ++i) sum += std::exp(double(row[i]) - mx);
    for (uint64_t i = 0; i < cols; ++i) y[r * cols + i] = double(row[i]) - mx - std::log(sum);
  }
  return y;
}

}  // namespace

TEST_CASE("ops kernels: row log softmax is stable and matches double precision") {
  std::mt19937 rng(21);
  for (auto g : kGenerations)
    for (const RowCase &rc : kRowCases) {
      CAPTURE(g, rc.rows, rc.cols, isa::dtype_name(rc.dtype), isa::dtype_name(rc.out_dtype));
      const isa::Program p = test::built(
          build_log_softmax(rc.rows, rc.cols, rc.dtype, rc.out_dtype, test::build_target(g)));
      Tensor x(rc.rows * rc.cols, rc.dtype), y(rc.rows * rc.cols, rc.out_dtype);
      x.fill(rng, -30, 90);  // large values: exp without the max would overflow
      run(p, g, {&x, &y});
      const auto got = y.read();
      const auto want = host_log_softmax(x.values, rc.rows, rc.cols);
      for (size_t i = 0; i < got.size(); ++i) {
        // fp32 rounding of values up to ~|x| + log(cols), then the output's rounding.
        const double tol = roundoff(rc.out_dtype) * std::abs(want[i]) +
                           1e-6 * (std::abs(double(x.values[i])) + std::abs(want[i]) + 1);
        if (std::abs(got[i] - want[i]) > tol) {
          CAPTURE(i, got[i], want[i], tol);
          FAIL("log softmax out of tolerance");
        }
      }
    }
}

TEST_CASE("ops kernels: softmax and log softmax gradients match double precision", "[numerics]") {
  std::mt19937 rng(22);
  for (auto g : kGenerations)
    for (bool log : {false, true})
      for (const RowCase &rc : kRowCases) {
        CAPTURE(g, log, rc.rows, rc.cols, isa::dtype_name(rc.dtype), isa::dtype_name(rc.out_dtype));
        const uint64_t rows = rc.rows, cols = rc.cols;
        const isa::Program p = test::built(
            build_softmax_backward(rows, cols, log, rc.dtype, rc.out_dtype, test::build_target(g)));
        // y: a real forward output (softmax or log softmax of random logits), in the dtype.
        Tensor logits(rows * cols, DType::kF32), y(rows * cols, rc.dtype),
            grad(rows * cols, rc.dtype), result(rows * cols, rc.out_dtype);
        logits.fill(rng, -4, 4);
        grad.fill(rng, -1, 1);
        const auto ls = host_log_softmax(logits.values, rows, cols);
        for (size_t i = 0; i < ls.size(); ++i) y.values[i] = float(log ? ls[i] : std::exp(ls[i]));
        isa::store_f32(y.dtype, y.values.data(), y.buffer.bytes.data(), y.values.size());
        y.values = y.read();
        run(p, g, {&grad, &y, &result});
        const auto got = result.read();
        for (uint64_t r = 0; r < rows; ++r) {
          const float *gr = grad.values.data() + r * cols, *yr = y.values.data() + r * cols;
          double sum = 0, magnitude = 0;
          for (uint64_t i = 0; i < cols; ++i) {
            const double term = log ? double(gr[i]) : double(gr[i]) * yr[i];
            sum += term;
            magnitude += std::abs(term);
          }
          for (uint64_t i = 0; i < cols; ++i) {
            const double want = log ? gr[i] - std::exp(double(yr[i])) * sum : yr[i] * (gr[i] - sum);
            const double weight = log ? std::exp(double(yr[i])) : std::abs(double(yr[i]));
            const double scale = std::abs(double(gr[i])) * (log ? 1 : weight) + weight * magnitude;
            // fp32 sums over the row (and exp), then the output's rounding.
            const double tol = roundoff(rc.out_dtype) * std::abs(want) +
                               8 * std::ldexp(1.0, -24) * double(cols + 8) * scale + 1e-30;
            const double v = got[r * cols + i];
            if (std::abs(v - want) > tol) {
              CAPTURE(r, i, v, want, tol);
              FAIL("softmax gradient out of tolerance");
            }
          }
        }
      }
}

TEST_CASE("ops kernels: the row kernels refuse rows wider than SBUF holds, and empty shapes") {
  const auto target = test::build_target(TRN_GENERATION_TRN1);
  const std::pair<kbuild::Built, const char *> results[] = {
      {build_log_softmax(4, 70000, DType::kF32, DType::kF32, target), "at most"},
      {build_softmax_backward(4, 70000, true, DType::kF32, DType::kF32, target), "at most"},
      {build_log_softmax(0, 4, DType::kF32, DType::kF32, target), "empty"},
  };
  for (const auto &[r, why] : results) {
    REQUIRE(std::holds_alternative<std::string>(r));
    CHECK_THAT(std::get<std::string>(r), Catch::Contains(why));
  }
}

// ---------------------------------------------------------------------------------------------
// Layer and RMS norm with statistics, and their gradients

namespace {

struct NormCase {
  uint64_t rows, cols;
  DType dtype, out_dtype;
  bool affine;
};

const NormCase kNormCases[] = {
    {1, 1, DType::kF32, DType::kF32, true},       {127, 4097, DType::kF32, DType::kF32, true},
    {129, 129, DType::kBf16, DType::kBf16, true}, {300, 1000, DType::kBf16, DType::kF32, false},
    {130, 77, DType::kF16, DType::kF32, true},    {4097, 33, DType::kBf16, DType::kF32, true},
};

const char *kind_name(NormKind k) {
  return k == NormKind::kLayer ? "layer" : "rms";
}

constexpr double kU = 1.0 / (1 << 24);  // fp32's unit roundoff

// Per-row statistics in double: mean (0 for RMS norm) and rstd.
void host_stats(NormKind kind, const std::vector<float> &x, uint64_t rows, uint64_t cols, float eps,
                std::vector<double> &mean, std::vector<double> &rstd) {
  mean.assign(rows, 0);
  rstd.assign(rows, 0);
  for (uint64_t r = 0; r < rows; ++r) {
    const float *row = x.data() + r * cols;
    double mu = 0, sq = 0;
    if (kind == NormKind::kLayer) {
      for (uint64_t i = 0; i < cols; ++i) mu += row[i];
      mu /= double(cols);
    }
    for (uint64_t i = 0; i < cols; ++i) sq += (row[i] - mu) * (row[i] - mu);
    mean[r] = mu;
    rstd[r] = 1 / std::sqrt(sq / double(cols) + eps);
  }
}

void require_near(double got, double want, double tol, const char *what, uint64_t i) {
  if (std::abs(got - want) > tol) {
    CAPTURE(what, i, got, want, tol);
    FAIL("out of tolerance");
  }
}

}  // namespace

TEST_CASE("ops kernels: layer and RMS norm write y, mean and rstd matching double precision",
          "[numerics]") {
  std::mt19937 rng(31);
  const float eps = 1e-5f;
  for (auto g : kGenerations)
    for (NormKind kind : {NormKind::kLayer, NormKind::kRms})
      for (const NormCase &nc : kNormCases) {
        CAPTURE(g, kind_name(kind), nc.rows, nc.cols, isa::dtype_name(nc.dtype),
                isa::dtype_name(nc.out_dtype), nc.affine);
        const bool layer = kind == NormKind::kLayer;
        NormStatsConfig c{kind,         nc.rows, nc.cols,   nc.dtype,
                          nc.out_dtype, eps,     nc.affine, test::build_target(g)};
        const isa::Program p = test::built(build_norm_forward(c));
        const uint64_t rows = nc.rows, cols = nc.cols;
        Tensor x(rows * cols, nc.dtype), gamma(cols, nc.dtype), beta(cols, nc.dtype),
            y(rows * cols, nc.out_dtype), mean(rows, DType::kF32), rstd(rows, DType::kF32);
        x.fill(rng, -2, 4);  // a mean away from zero
        gamma.fill(rng, -2, 2);
        beta.fill(rng, -1, 1);
        std::vector<Arg> args = {&x};
        if (nc.affine) args.push_back(&gamma);
        if (nc.affine && layer) args.push_back(&beta);
        args.push_back(&y);
        if (layer) args.push_back(&mean);
        args.push_back(&rstd);
        run(p, g, args);
        std::vector<double> want_mean, want_rstd;
        host_stats(kind, x.values, rows, cols, eps, want_mean, want_rstd);
        const auto got_y = y.read(), got_mean = mean.read(), got_rstd = rstd.read();
        for (uint64_t r = 0; r < rows; ++r) {
          double mean_abs = 0;
          for (uint64_t i = 0; i < cols; ++i) mean_abs += std::abs(x.values[r * cols + i]);
          mean_abs /= double(cols);
          // fp32 sums over the row.
          const double tol_mean = 4 * kU * double(cols + 4) * mean_abs;
          const double rel_rstd = 8 * kU * double(cols + 8);
          if (layer) require_near(got_mean[r], want_mean[r], tol_mean, "mean", r);
          require_near(got_rstd[r], want_rstd[r], rel_rstd * want_rstd[r], "rstd", r);
          for (uint64_t i = 0; i < cols; ++i) {
            const double xv = x.values[r * cols + i], xhat = (xv - want_mean[r]) * want_rstd[r];
            const double gm = nc.affine ? gamma.values[i] : 1,
                         bt = nc.affine && layer ? beta.values[i] : 0;
            const double want = xhat * gm + bt;
            const double tol =
                roundoff(nc.out_dtype) * std::abs(want) +
                (rel_rstd * std::abs(xhat) + (4 * kU * std::abs(xv) + tol_mean) * want_rstd[r]) *
                    std::abs(gm) +
                8 * kU * (std::abs(xhat * gm) + std::abs(bt)) + 1e-30;
            require_near(got_y[r * cols + i], want, tol, "y", r * cols + i);
          }
        }
      }
}

TEST_CASE("ops kernels: layer and RMS norm gradients match double precision", "[numerics]") {
  std::mt19937 rng(32);
  for (auto g : kGenerations)
    for (NormKind kind : {NormKind::kLayer, NormKind::kRms})
      for (const NormCase &nc : kNormCases) {
        CAPTURE(g, kind_name(kind), nc.rows, nc.cols, isa::dtype_name(nc.dtype),
                isa::dtype_name(nc.out_dtype), nc.affine);
        const bool layer = kind == NormKind::kLayer;
        NormGradConfig c{
            kind, nc.rows, nc.cols, nc.dtype, nc.out_dtype, nc.affine, test::build_target(g)};
        const isa::Program p = test::built(build_norm_backward(c));
        const uint64_t rows = nc.rows, cols = nc.cols;
        Tensor grad(rows * cols, nc.dtype), x(rows * cols, nc.dtype), gamma(cols, nc.dtype),
            mean(rows, DType::kF32), rstd(rows, DType::kF32), grad_x(rows * cols, nc.out_dtype),
            grad_gamma(cols, DType::kF32), grad_beta(cols, DType::kF32);
        grad.fill(rng, -1, 1);
        x.fill(rng, -2, 4);
        gamma.fill(rng, -2, 2);
        // The statistics as the forward pass would write them (f32); the reference uses them too.
        std::vector<double> mu, rs;
        host_stats(kind, x.values, rows, cols, 1e-5f, mu, rs);
        for (uint64_t r = 0; r < rows; ++r)
          mean.values[r] = float(mu[r]), rstd.values[r] = float(rs[r]);
        for (Tensor *t : {&mean, &rstd})
          isa::store_f32(DType::kF32, t->values.data(), t->buffer.bytes.data(), rows);
        std::vector<Arg> args = {&grad, &x};
        if (layer) args.push_back(&mean);
        args.push_back(&rstd);
        if (nc.affine) args.push_back(&gamma);
        args.push_back(&grad_x);
        if (nc.affine) args.push_back(&grad_gamma);
        if (nc.affine && layer) args.push_back(&grad_beta);
        run(p, g, args);
        const auto got = grad_x.read(), got_gamma = grad_gamma.read(), got_beta = grad_beta.read();
        std::vector<double> sum_gx(cols, 0), abs_gx(cols, 0), sum_g(cols, 0), abs_g(cols, 0);
        for (uint64_t r = 0; r < rows; ++r) {
          const double m = layer ? mean.values[r] : 0, s = rstd.values[r];
          std::vector<double> xhat(cols), gg(cols);
          double mean_gg = 0, mean_ggx = 0, abs_gg = 0, abs_ggx = 0;
          for (uint64_t i = 0; i < cols; ++i) {
            const double gv = grad.values[r * cols + i];
            xhat[i] = (x.values[r * cols + i] - m) * s;
            gg[i] = gv * (nc.affine ? gamma.values[i] : 1);
            mean_gg += gg[i];
            mean_ggx += gg[i] * xhat[i];
            abs_gg += std::abs(gg[i]);
            abs_ggx += std::abs(gg[i] * xhat[i]);
            sum_gx[i] += gv * xhat[i];
            abs_gx[i] += std::abs(gv * xhat[i]);
            sum_g[i] += gv;
            abs_g[i] += std::abs(gv);
          }
          mean_gg /= double(cols), mean_ggx /= double(cols);
          abs_gg /= double(cols), abs_ggx /= double(cols);
          for (uint64_t i = 0; i < cols; ++i) {
            const double want = s * (gg[i] - (layer ? mean_gg : 0) - xhat[i] * mean_ggx);
            const double scale = s * (std::abs(gg[i]) + abs_gg + std::abs(xhat[i]) * abs_ggx) + 0.0;
            const double tol =
                roundoff(nc.out_dtype) * std::abs(want) + 8 * kU * double(cols + 8) * scale + 1e-30;
            require_near(got[r * cols + i], want, tol, "grad_x", r * cols + i);
          }
        }
        if (!nc.affine) continue;
        for (uint64_t i = 0; i < cols; ++i) {
          require_near(got_gamma[i], sum_gx[i], 8 * kU * double(rows + 8) * abs_gx[i] + 1e-30,
                       "grad_gamma", i);
          if (layer)
            require_near(got_beta[i], sum_g[i], 8 * kU * double(rows + 8) * abs_g[i] + 1e-30,
                         "grad_beta", i);
        }
      }
}

TEST_CASE("ops kernels: the norm kernels refuse rows wider than SBUF holds") {
  for (NormKind kind : {NormKind::kLayer, NormKind::kRms}) {
    NormStatsConfig f{kind,        4,     60000, DType::kF32,
                      DType::kF32, 1e-5f, true,  test::build_target(TRN_GENERATION_TRN1)};
    NormGradConfig b{
        kind, 4, 60000, DType::kF32, DType::kF32, true, test::build_target(TRN_GENERATION_TRN1)};
    for (auto r : {build_norm_forward(f), build_norm_backward(b)}) {
      REQUIRE(std::holds_alternative<std::string>(r));
      CHECK_THAT(std::get<std::string>(r), Catch::Contains("at most"));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// conv2d forward and backward

namespace {

namespace host = ops::host;

struct ConvCase {
  uint64_t n, c, h, w, o;
  uint32_t kh, kw;
  uint32_t stride[2], padding[2], dilation[2];
  bool bias;
  DType in, out;
};

// Awkward channel counts (1, 3, 129: a partial and a second K tile; few channels stack taps in
// the forward), planes of 1, 5 and 17 and a row wider than a PSUM bank, kernels 1x1, 3x3 and 2x5,
// strides, paddings (a 1x1 kernel with padding makes the input gradient crop) and dilations.
const ConvCase kConvCases[] = {
    {1, 1, 1, 1, 1, 1, 1, {1, 1}, {0, 0}, {1, 1}, false, DType::kF32, DType::kF32},
    {2, 3, 5, 5, 3, 3, 3, {1, 1}, {1, 1}, {1, 1}, true, DType::kF32, DType::kF32},
    {1, 129, 17, 17, 129, 3, 3, {2, 2}, {1, 1}, {1, 1}, true, DType::kBf16, DType::kBf16},
    {2, 3, 17, 5, 1, 2, 5, {2, 1}, {2, 2}, {1, 2}, false, DType::kBf16, DType::kF32},
    {1, 3, 5, 17, 129, 3, 3, {1, 2}, {2, 0}, {2, 1}, true, DType::kF32, DType::kBf16},
    {2, 5, 1, 17, 3, 1, 1, {2, 2}, {1, 1}, {1, 1}, true, DType::kF16, DType::kF32},
    {1, 2, 3, 600, 2, 1, 3, {1, 1}, {0, 1}, {1, 1}, false, DType::kBf16, DType::kF32},
    // 20 channels: the forward stacks four taps per matmul, 32 partitions apart.
    {1, 20, 9, 9, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, true, DType::kBf16, DType::kF32},
    // 2 output channels of 40: pixel-major matmuls (as the input gradients of 3 or 5 channels).
    {2, 40, 6, 7, 2, 3, 3, {1, 1}, {1, 1}, {1, 1}, true, DType::kF32, DType::kF32},
};

host::Conv2dParams host_params(const ConvCase &cc) {
  host::Conv2dParams p;
  for (int i = 0; i < 2; ++i) {
    p.stride[i] = cc.stride[i];
    p.padding[i] = cc.padding[i];
    p.dilation[i] = cc.dilation[i];
  }
  return p;
}

Conv2dShape conv_shape(const ConvCase &cc) {
  Conv2dShape s;
  s.batch = cc.n, s.channels = cc.c, s.height = cc.h, s.width = cc.w, s.out_channels = cc.o;
  s.kernel_h = cc.kh, s.kernel_w = cc.kw;
  for (int i = 0; i < 2; ++i) {
    s.stride[i] = cc.stride[i];
    s.padding[i] = cc.padding[i];
    s.dilation[i] = cc.dilation[i];
  }
  return s;
}

host::Array to_host(const Tensor &t, host::Shape shape, bool magnitude = false) {
  host::Array a{std::move(shape), {}};
  for (float v : t.values) a.data.push_back(magnitude ? std::abs(double(v)) : double(v));
  return a;
}

// got against want, with fp32 accumulation error relative to `magnitude` (the same sum over
// absolute values) over `terms` terms, and one rounding to the result's dtype.
void check_near(const std::vector<float> &got, const host::Array &want,
                const host::Array &magnitude, double terms, DType out, const char *what) {
  REQUIRE(got.size() == want.data.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = roundoff(out) * std::abs(want.data[i]) +
                       std::ldexp(1.0, -24) * (terms + 8) * magnitude.data[i] + 1e-30;
    if (std::abs(got[i] - want.data[i]) > tol) {
      CAPTURE(what, i, got[i], want.data[i], tol);
      FAIL("conv2d result out of tolerance");
    }
  }
}

}  // namespace

TEST_CASE("ops kernels: conv2d matches double precision over awkward shapes", "[numerics]") {
  std::mt19937 rng(41);
  for (auto g : kGenerations)
    for (const ConvCase &cc : kConvCases) {
      CAPTURE(g, cc.n, cc.c, cc.h, cc.w, cc.o, cc.kh, cc.kw, cc.stride[0], cc.stride[1],
              cc.padding[0], cc.padding[1], cc.dilation[0], cc.dilation[1], cc.bias,
              isa::dtype_name(cc.in), isa::dtype_name(cc.out));
      Conv2dConfig c;
      c.shape = conv_shape(cc);
      c.in_dtype = cc.in, c.out_dtype = cc.out, c.bias = cc.bias;
      c.target = test::build_target(g);
      const isa::Program p = test::built(build_conv2d(c));
      const uint64_t ho = c.shape.out_h(), wo = c.shape.out_w();
      Tensor x(cc.n * cc.c * cc.h * cc.w, cc.in), w(cc.o * cc.c * cc.kh * cc.kw, cc.in),
          bias(cc.o, DType::kF32), out(cc.n * cc.o * ho * wo, cc.out);
      x.fill(rng, -1, 1);
      w.fill(rng, -1, 1);
      bias.fill(rng, -2, 2);
      std::vector<Arg> args = {&x, &w};
      if (cc.bias) args.push_back(&bias);
      args.push_back(&out);
      run(p, g, args);
      const host::Shape xs = {int64_t(cc.n), int64_t(cc.c), int64_t(cc.h), int64_t(cc.w)},
                        ws = {int64_t(cc.o), int64_t(cc.c), int64_t(cc.kh), int64_t(cc.kw)};
      const host::Array hb = to_host(bias, {int64_t(cc.o)}),
                        hb_abs = to_host(bias, {int64_t(cc.o)}, true);
      const host::Array want =
          host::conv2d(to_host(x, xs), to_host(w, ws), cc.bias ? &hb : nullptr, host_params(cc));
      const host::Array magnitude = host::conv2d(to_host(x, xs, true), to_host(w, ws, true),
                                                 cc.bias ? &hb_abs : nullptr, host_params(cc));
      check_near(out.read(), want, magnitude, double(cc.c * cc.kh * cc.kw), cc.out, "out");
    }
}

TEST_CASE("ops kernels: conv2d gradients match double precision over awkward shapes",
          "[numerics]") {
  std::mt19937 rng(42);
  for (auto g : kGenerations)
    for (const ConvCase &cc : kConvCases)
      for (int wanted : {7, 2}) {  // every gradient; grad_w alone
        CAPTURE(g, cc.n, cc.c, cc.h, cc.w, cc.o, cc.kh, cc.kw, cc.stride[0], cc.stride[1],
                cc.padding[0], cc.padding[1], cc.dilation[0], cc.dilation[1], wanted,
                isa::dtype_name(cc.in), isa::dtype_name(cc.out));
        Conv2dBackwardConfig c;
        c.shape = conv_shape(cc);
        c.in_dtype = cc.in;
        c.grad_x = wanted & 1, c.grad_w = wanted & 2, c.grad_bias = wanted & 4;
        c.grad_x_dtype = c.grad_w_dtype = cc.out;
        c.grad_bias_dtype = DType::kF32;
        c.target = test::build_target(g);
        const isa::Program p = test::built(build_conv2d_backward(c));
        const uint64_t ho = c.shape.out_h(), wo = c.shape.out_w();
        Tensor grad(cc.n * cc.o * ho * wo, cc.in), x(cc.n * cc.c * cc.h * cc.w, cc.in),
            w(cc.o * cc.c * cc.kh * cc.kw, cc.in), gx(x.values.size(), cc.out),
            gw(w.values.size(), cc.out), gb(cc.o, DType::kF32);
        grad.fill(rng, -1, 1);
        x.fill(rng, -1, 1);
        w.fill(rng, -1, 1);
        std::vector<Arg> args = {&grad};
        if (c.grad_w) args.push_back(&x);
        if (c.grad_x) args.push_back(&w);
        if (c.grad_x) args.push_back(&gx);
        if (c.grad_w) args.push_back(&gw);
        if (c.grad_bias) args.push_back(&gb);
        run(p, g, args);
        const host::Shape xs = {int64_t(cc.n), int64_t(cc.c), int64_t(cc.h), int64_t(cc.w)},
                          ws = {int64_t(cc.o), int64_t(cc.c), int64_t(cc.kh), int64_t(cc.kw)},
                          gs = {int64_t(cc.n), int64_t(cc.o), int64_t(ho), int64_t(wo)};
        const host::Conv2dGrads want = host::conv2d_backward(to_host(grad, gs), to_host(x, xs),
                                                             to_host(w, ws), true, host_params(cc));
        const host::Conv2dGrads magnitude =
            host::conv2d_backward(to_host(grad, gs, true), to_host(x, xs, true),
                                  to_host(w, ws, true), true, host_params(cc));
        if (c.grad_x)
          check_near(gx.read(), want.grad_x, magnitude.grad_x, double(cc.o * cc.kh * cc.kw), cc.out,
                     "grad_x");
        if (c.grad_w)
          check_near(gw.read(), want.grad_w, magnitude.grad_w, double(cc.n * ho * wo), cc.out,
                     "grad_w");
        if (c.grad_bias)
          check_near(gb.read(), want.grad_bias, magnitude.grad_bias, double(cc.n * ho * wo),
                     DType::kF32, "grad_bias");
      }
}

TEST_CASE("ops kernels: conv2d refuses groups and shapes it cannot build, saying why") {
  Conv2dConfig c;
  c.target = test::build_target(TRN_GENERATION_TRN2);
  c.shape.channels = 4, c.shape.out_channels = 4, c.shape.groups = 2;
  auto r = build_conv2d(c);
  REQUIRE(std::holds_alternative<std::string>(r));
  CHECK_THAT(std::get<std::string>(r), Catch::Contains("groups = 1 only"));
  c.shape.groups = 1;
  c.shape.kernel_h = 3;  // larger than the 1x1 input
  r = build_conv2d(c);
  REQUIRE(std::holds_alternative<std::string>(r));
  CHECK_THAT(std::get<std::string>(r), Catch::Contains("larger than"));
  c.shape.kernel_h = 1;
  c.in_dtype = DType::kI32;
  r = build_conv2d(c);
  REQUIRE(std::holds_alternative<std::string>(r));
  CHECK_THAT(std::get<std::string>(r), Catch::Contains("f32, bf16 and f16"));
  Conv2dBackwardConfig b;
  b.target = c.target;
  b.shape.channels = 3000, b.shape.out_channels = 3000, b.shape.kernel_h = b.shape.kernel_w = 3;
  b.shape.height = b.shape.width = 8;
  r = build_conv2d_backward(b);
  REQUIRE(std::holds_alternative<std::string>(r));
  CHECK_THAT(std::get<std::string>(r), Catch::Contains("bytes per SBUF partition"));
}

// One mid-size convolution's simulated time, for the record (not a pass/fail bound).
TEST_CASE("ops kernels: conv2d simulated time of a mid-size bf16 convolution", "[numerics]") {
  const ConvCase cc{8,      64,     32,     32,   64,           3,           3,
                    {1, 1}, {1, 1}, {1, 1}, true, DType::kBf16, DType::kBf16};
  const auto g = TRN_GENERATION_TRN2;
  Conv2dConfig c;
  c.shape = conv_shape(cc);
  c.in_dtype = cc.in, c.out_dtype = cc.out, c.bias = true;
  c.target = test::build_target(g);
  const isa::Program p = test::built(build_conv2d(c));
  std::mt19937 rng(43);
  Tensor x(cc.n * cc.c * cc.h * cc.w, cc.in), w(cc.o * cc.c * 9, cc.in), bias(cc.o, DType::kF32),
      out(cc.n * cc.o * cc.h * cc.w, cc.out);
  x.fill(rng, -1, 1);
  w.fill(rng, -1, 1);
  bias.fill(rng, -1, 1);
  const uint64_t ps = run(p, g, {&x, &w, &bias, &out});
  Conv2dBackwardConfig b;
  b.shape = c.shape;
  b.in_dtype = cc.in, b.grad_x_dtype = b.grad_w_dtype = cc.out, b.grad_bias = true;
  b.target = c.target;
  const isa::Program pb = test::built(build_conv2d_backward(b));
  Tensor grad(out.values.size(), cc.in), gx(x.values.size(), cc.out), gw(w.values.size(), cc.out),
      gb(cc.o, DType::kF32);
  grad.fill(rng, -1, 1);
  const uint64_t ps_b = run(pb, g, {&grad, &x, &w, &gx, &gw, &gb});
  // The input gradient of a stride-2 convolution: grad_out interleaved with zeros.
  b.shape.stride[0] = b.shape.stride[1] = 2;
  b.grad_w = b.grad_bias = false;
  const isa::Program ps2 = test::built(build_conv2d_backward(b));
  Tensor grad2(cc.n * cc.o * b.shape.out_h() * b.shape.out_w(), cc.in);
  grad2.fill(rng, -1, 1);
  const uint64_t ps_s2 = run(ps2, g, {&grad2, &w, &gx});
  WARN("conv2d N=8 C=64 O=64 32x32 3x3 bf16 on trn2: forward "
       << double(ps) / 1e6 << " us, backward (all gradients) " << double(ps_b) / 1e6
       << " us, grad_x of the stride-2 convolution " << double(ps_s2) / 1e6 << " us");
  CHECK(ps > 0);
}
