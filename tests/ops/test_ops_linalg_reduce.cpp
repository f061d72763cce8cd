// Matrix products, reductions and softmax on the simulated device against the float64 host
// reference: matmul with every transpose combination, batched and with a shared b, addmm with
// each bias shape and scalar reuse, f32 / bf16 / f16 inputs at awkward sizes; sum, mean, max and
// min over trailing, leading, all and middle dims, argmax and argmin; softmax and log_softmax
// over the last dim and another, with their backward ops (also checked against central finite
// differences); which cases run on the host (recorded as fallbacks); and bad shapes refused.
#include <limits>

#include "ops_fixture.hpp"

using namespace trn::test;
namespace host = trn::ops::host;

namespace {

// What the host path writes: computed in float64 and rounded once to the output's dtype, so
// within half an ulp of the reference's rounded value (the comparisons round the reference too).
constexpr double kRoundedOnce = 1e-7;

// The device multiplies in fp32 (products of bf16 or f16 values are exact there, of f32 values
// rounded once) and accumulates in fp32 over K, so the error of a dot product grows like
// sqrt(K) ulps of fp32; the result is then rounded once to the output dtype.
double matmul_tolerance(trn_dtype_t out, int64_t k) {
  return tolerance(out) + tolerance(TRN_DTYPE_F32) * std::sqrt(static_cast<double>(k));
}

host_array rounded(host_array a, trn_dtype_t d) {
  for (double &v : a.data) v = as_dtype(d, v);
  return a;
}

uint32_t fallback_entries() {
  uint32_t n = 0;
  REQUIRE(trn_ops_get_fallbacks(&n, nullptr) == TRN_SUCCESS);
  return n;
}

// The ops the device reduces in floats, with the host reference's op and the name messages and
// fallback records give them (PyTorch's: TRN_REDUCE_AVG is "mean").
struct ReduceCase {
  trn_ops_reduce_op_t op;
  host::Reduce host;
  const char *name;
};
const ReduceCase kFloatReduces[] = {{TRN_OPS_SUM, host::Reduce::kSum, "sum"},
                                    {TRN_OPS_MEAN, host::Reduce::kMean, "mean"},
                                    {TRN_OPS_MAX, host::Reduce::kMax, "max"},
                                    {TRN_OPS_MIN, host::Reduce::kMin, "min"}};

const char *transpose_text(uint32_t flags) {
  static const char *const names[] = {"a @ b", "a^T @ b", "a @ b^T", "a^T @ b^T"};
  return names[flags & 3];
}

// The stored shape of an operand of logical shape [rows, cols], transposed or not.
Shape stored(int64_t rows, int64_t cols, bool transposed) {
  return transposed ? Shape{cols, rows} : Shape{rows, cols};
}

}  // namespace

TEST_CASE("matmul, all four transpose combinations, f32 bf16 f16 inputs, awkward sizes",
          "[ops][matmul]") {
  OpsFixture f;
  std::mt19937 rng(11);
  const trn_dtype_t dtype = GENERATE(TRN_DTYPE_F32, TRN_DTYPE_BF16, TRN_DTYPE_F16);
  struct Size {
    int64_t m, k, n;
  } sizes[] = {{1, 1, 1},    {127, 129, 3}, {3, 127, 129}, {129, 1, 127},
               {4097, 3, 5}, {2, 4097, 3},  {2, 3, 4097}};
  for (const Size &s : sizes) {
    for (uint32_t flags = 0; flags < 4; ++flags) {
      const bool ta = flags & TRN_OPS_TRANSPOSE_A, tb = flags & TRN_OPS_TRANSPOSE_B;
      const host_array a = random_array(rng, stored(s.m, s.k, ta), dtype);
      const host_array b = random_array(rng, stored(s.k, s.n, tb), dtype);
      DeviceTensor da = f.tensor(dtype, a), db = f.tensor(dtype, b),
                   dout = f.tensor(TRN_DTYPE_F32, {s.m, s.n});
      INFO(trn_dtype_name(dtype) << " [" << s.m << "x" << s.k << "] @ [" << s.k << "x" << s.n
                                 << "] " << transpose_text(flags) << ": " << ops_error());
      REQUIRE(trn_ops_matmul(f.queue(), dout.get(), da.get(), db.get(), flags, nullptr) ==
              TRN_SUCCESS);
      require_close(f.read(dout), host::matmul(a, b, ta, tb), matmul_tolerance(TRN_DTYPE_F32, s.k),
                    "matmul");
    }
  }
  SECTION("a result rounded to the input dtype") {
    const host_array a = random_array(rng, {33, 129}, dtype),
                     b = random_array(rng, {129, 17}, dtype);
    DeviceTensor da = f.tensor(dtype, a), db = f.tensor(dtype, b), dout = f.tensor(dtype, {33, 17});
    REQUIRE(trn_ops_matmul(f.queue(), dout.get(), da.get(), db.get(), 0, nullptr) == TRN_SUCCESS);
    require_close(f.read(dout), rounded(host::matmul(a, b, false, false), dtype),
                  matmul_tolerance(dtype, 129), "matmul to the input dtype");
  }
  CHECK(fallback_count("matmul") == 0);
}

TEST_CASE("bmm: a batch of products, and a batch sharing one b", "[ops][matmul]") {
  OpsFixture f;
  std::mt19937 rng(12);
  const int64_t batch = 3, m = 17, k = 129, n = 9;
  SECTION("a [B,M,K] @ b [B,K,N], with and without transposes") {
    for (uint32_t flags = 0; flags < 4; ++flags) {
      const bool ta = flags & TRN_OPS_TRANSPOSE_A, tb = flags & TRN_OPS_TRANSPOSE_B;
      Shape sa = stored(m, k, ta), sb = stored(k, n, tb);
      sa.insert(sa.begin(), batch);
      sb.insert(sb.begin(), batch);
      const host_array a = random_array(rng, sa, TRN_DTYPE_F32),
                       b = random_array(rng, sb, TRN_DTYPE_F32);
      DeviceTensor da = f.tensor(TRN_DTYPE_F32, a), db = f.tensor(TRN_DTYPE_F32, b),
                   dout = f.tensor(TRN_DTYPE_F32, {batch, m, n});
      INFO(transpose_text(flags) << ": " << ops_error());
      REQUIRE(trn_ops_matmul(f.queue(), dout.get(), da.get(), db.get(), flags, nullptr) ==
              TRN_SUCCESS);
      require_close(f.read(dout), host::matmul(a, b, ta, tb), matmul_tolerance(TRN_DTYPE_F32, k),
                    "bmm");
    }
  }
  SECTION("a [B,M,K] @ b [K,N]: b shared by every batch") {
    const trn_dtype_t dtype = GENERATE(TRN_DTYPE_F32, TRN_DTYPE_BF16);
    for (uint32_t flags : {0u, TRN_OPS_TRANSPOSE_B}) {
      const bool tb = flags & TRN_OPS_TRANSPOSE_B;
      const host_array a = random_array(rng, {batch, m, k}, dtype),
                       b = random_array(rng, stored(k, n, tb), dtype);
      DeviceTensor da = f.tensor(dtype, a), db = f.tensor(dtype, b),
                   dout = f.tensor(TRN_DTYPE_F32, {batch, m, n});
      INFO(trn_dtype_name(dtype) << " " << transpose_text(flags) << ": " << ops_error());
      REQUIRE(trn_ops_matmul(f.queue(), dout.get(), da.get(), db.get(), flags, nullptr) ==
              TRN_SUCCESS);
      const Shape sb = b.shape;
      const host_array shared = host::broadcast_to(b, {batch, sb[0], sb[1]});
      require_close(f.read(dout), host::matmul(a, shared, false, tb),
                    matmul_tolerance(TRN_DTYPE_F32, k), "bmm with a shared b");
    }
  }
  CHECK(fallback_count("matmul") == 0);
}

TEST_CASE(
    "addmm: biases of [N] and [M,N] on the device, [M,1] on the host, one kernel for every "
    "alpha and beta",
    "[ops][matmul]") {
  OpsFixture f;
  std::mt19937 rng(13);
  const int64_t m = 129, k = 65, n = 127;
  const host_array a = random_array(rng, {m, k}, TRN_DTYPE_F32),
                   b = random_array(rng, {k, n}, TRN_DTYPE_F32);
  DeviceTensor da = f.tensor(TRN_DTYPE_F32, a), db = f.tensor(TRN_DTYPE_F32, b),
               dout = f.tensor(TRN_DTYPE_F32, {m, n});
  auto run = [&](const host_array &bias, double alpha, double beta) {
    DeviceTensor dbias = f.tensor(TRN_DTYPE_F32, bias);
    INFO("bias " << bias.shape.size() << "-d, alpha " << alpha << ", beta " << beta << ": "
                 << ops_error());
    REQUIRE(trn_ops_addmm(f.queue(), dout.get(), dbias.get(), da.get(), db.get(), beta, alpha, 0,
                          nullptr) == TRN_SUCCESS);
    require_close(f.read(dout), host::addmm(bias, a, b, alpha, beta, false, false),
                  matmul_tolerance(TRN_DTYPE_F32, k), "addmm");
  };
  SECTION("bias [N]: three alpha and beta values, one kernel") {
    const host_array bias = random_array(rng, {n}, TRN_DTYPE_F32);
    run(bias, 1.0, 1.0);
    run(bias, -0.5, 2.0);
    run(bias, 3.25, -0.75);
    const trn_ops_cache_stats_t s = cache_stats();
    CHECK(s.builds == 1);
    CHECK(s.memory_hits == 2);
    CHECK(fallback_count("addmm") == 0);
  }
  SECTION("bias [M,N]") {
    const host_array bias = random_array(rng, {m, n}, TRN_DTYPE_F32);
    run(bias, 0.75, -1.5);
    run(bias, 2.0, -1.5);
    CHECK(cache_stats().builds == 1);
    CHECK(fallback_count("addmm") == 0);
  }
  SECTION("bias [M,1], a column: on the host, recorded") {
    run(random_array(rng, {m, 1}, TRN_DTYPE_F32), 1.5, 0.5);
    CHECK(fallback_count("addmm") == 1);
    CHECK(cache_stats().builds == 0);
  }
  SECTION("an f32 bias of [1, N] for a bf16 output") {
    const host_array bias = random_array(rng, {1, n}, TRN_DTYPE_F32);
    DeviceTensor dbias = f.tensor(TRN_DTYPE_F32, bias), dbf = f.tensor(TRN_DTYPE_BF16, {m, n});
    INFO(ops_error());
    REQUIRE(trn_ops_addmm(f.queue(), dbf.get(), dbias.get(), da.get(), db.get(), -1.0, 0.5, 0,
                          nullptr) == TRN_SUCCESS);
    require_close(f.read(dbf),
                  rounded(host::addmm(bias, a, b, 0.5, -1.0, false, false), TRN_DTYPE_BF16),
                  matmul_tolerance(TRN_DTYPE_BF16, k), "addmm f32 bias, bf16 out");
    CHECK(fallback_count("addmm") == 0);
  }
  SECTION("transposed operands with a bf16 output") {
    const host_array at = random_array(rng, {k, m}, TRN_DTYPE_BF16),
                     bt = random_array(rng, {n, k}, TRN_DTYPE_BF16),
                     bias = random_array(rng, {n}, TRN_DTYPE_BF16);
    DeviceTensor dat = f.tensor(TRN_DTYPE_BF16, at), dbt = f.tensor(TRN_DTYPE_BF16, bt),
                 dbias = f.tensor(TRN_DTYPE_BF16, bias), dbf = f.tensor(TRN_DTYPE_BF16, {m, n});
    INFO(ops_error());
    REQUIRE(trn_ops_addmm(f.queue(), dbf.get(), dbias.get(), dat.get(), dbt.get(), 0.5, 2.0,
                          TRN_OPS_TRANSPOSE_A | TRN_OPS_TRANSPOSE_B, nullptr) == TRN_SUCCESS);
    require_close(f.read(dbf),
                  rounded(host::addmm(bias, at, bt, 2.0, 0.5, true, true), TRN_DTYPE_BF16),
                  matmul_tolerance(TRN_DTYPE_BF16, k), "addmm bf16");
    CHECK(fallback_count("addmm") == 0);
  }
}

// torch.addmm ignores the bias entirely when beta == 0, so a NaN or infinite bias does not
// reach the result (0 * NaN would be NaN).
TEST_CASE("addmm with beta = 0 ignores the bias, NaN and inf included, as torch.addmm does",
          "[ops][matmul]") {
  OpsFixture f;
  std::mt19937 rng(19);
  const host_array a = random_array(rng, {4, 3}, TRN_DTYPE_F32),
                   b = random_array(rng, {3, 5}, TRN_DTYPE_F32);
  host_array bias = host_array::full({5}, NAN);
  bias.data[1] = INFINITY;
  const host_array want = host::addmm(bias, a, b, 1.0, 0.0, false, false);
  for (const bool host_only : {true, false}) {
    f.configure(host_only ? TRN_OPS_CONFIG_HOST_ONLY : 0);
    DeviceTensor da = f.tensor(TRN_DTYPE_F32, a), db = f.tensor(TRN_DTYPE_F32, b),
                 dbias = f.tensor(TRN_DTYPE_F32, bias), dout = f.tensor(TRN_DTYPE_F32, {4, 5});
    INFO((host_only ? "host only: " : "device: ") << ops_error());
    REQUIRE(trn_ops_addmm(f.queue(), dout.get(), dbias.get(), da.get(), db.get(), 0.0, 1.0, 0,
                          nullptr) == TRN_SUCCESS);
    require_close(f.read(dout), want, matmul_tolerance(TRN_DTYPE_F32, 3),
                  host_only ? "addmm beta 0 on the host" : "addmm beta 0 on the device");
  }
}

TEST_CASE("sum, mean, max and min over trailing, leading and all dims run on the device",
          "[ops][reduce]") {
  OpsFixture f;
  std::mt19937 rng(14);
  // Both dtypes at a small shape; rows and columns past one tile each way, 4097 columns
  // (trailing) and 4097 rows (leading), one dtype each to keep the work small.
  const auto [dtype, shape] = GENERATE(table<trn_dtype_t, Shape>({{TRN_DTYPE_F32, {5, 3, 129}},
                                                                  {TRN_DTYPE_BF16, {5, 3, 129}},
                                                                  {TRN_DTYPE_F32, {3, 2, 4097}},
                                                                  {TRN_DTYPE_BF16, {4097, 1, 2}}}));
  const host_array x = random_array(rng, shape, dtype);
  DeviceTensor dx = f.tensor(dtype, x);
  struct Dims {
    std::vector<int64_t> dims;
    const char *what;
  } cases[] = {{{2}, "the last dim"},       {{-1, -2}, "the last two dims"},
               {{0}, "the first dim"},      {{0, 1}, "the first two dims"},
               {{}, "every dim (no dims)"}, {{0, 1, 2}, "every dim, named"}};
  for (const ReduceCase &rc : kFloatReduces) {
    const trn_ops_reduce_op_t r = rc.op;
    for (const Dims &c : cases) {
      for (int keepdim = 0; keepdim < 2; ++keepdim) {
        const host_array want = host::reduce(rc.host, x, c.dims, keepdim != 0);
        DeviceTensor dout = f.tensor(TRN_DTYPE_F32, want.shape);
        INFO(rc.name << " " << trn_dtype_name(dtype) << " over " << c.what
                     << (keepdim ? ", keepdim" : "") << ": " << ops_error());
        REQUIRE(trn_ops_reduce(f.queue(), r, dout.get(), dx.get(), c.dims.data(),
                               static_cast<uint32_t>(c.dims.size()), keepdim,
                               nullptr) == TRN_SUCCESS);
        // max and min pick an element: exact. sum and mean accumulate n elements in fp32.
        const bool exact = r == TRN_OPS_MAX || r == TRN_OPS_MIN;
        const double n = static_cast<double>(x.data.size() / want.data.size());
        require_close(f.read(dout), want, exact ? 0.0 : tolerance(TRN_DTYPE_F32) * std::sqrt(n),
                      rc.name);
      }
    }
    CHECK(fallback_count(rc.name) == 0);
  }
  SECTION("an output in the input's dtype") {
    const int64_t dims[] = {-1};
    const host_array want = rounded(host::reduce(host::Reduce::kMean, x, {-1}, false), dtype);
    DeviceTensor dout = f.tensor(dtype, want.shape);
    REQUIRE(trn_ops_reduce(f.queue(), TRN_OPS_MEAN, dout.get(), dx.get(), dims, 1, 0, nullptr) ==
            TRN_SUCCESS);
    require_close(f.read(dout), want, tolerance(dtype), "mean to the input dtype");
    // A mean into a narrow dtype runs on the host: the sum could overflow it before the scale.
    CHECK(fallback_count("mean") == (dtype == TRN_DTYPE_F32 ? 0u : 1u));
  }
}

TEST_CASE("max and min propagate NaN and sums carry infinities, on the device", "[ops][reduce]") {
  OpsFixture f;
  std::mt19937 rng(20);
  host_array x = random_array(rng, {3, 129}, TRN_DTYPE_F32);
  x.data[5] = NAN;              // row 0, column 5
  x.data[129 + 7] = INFINITY;   // row 1, column 7
  x.data[258 + 3] = -INFINITY;  // row 2, column 3
  DeviceTensor dx = f.tensor(TRN_DTYPE_F32, x);
  for (const ReduceCase &rc : kFloatReduces) {
    const trn_ops_reduce_op_t r = rc.op;
    for (const int64_t dim : {int64_t{-1}, int64_t{0}}) {
      const host_array want = host::reduce(rc.host, x, {dim}, false);
      DeviceTensor dout = f.tensor(TRN_DTYPE_F32, want.shape);
      INFO(rc.name << " over dim " << dim << ": " << ops_error());
      REQUIRE(trn_ops_reduce(f.queue(), r, dout.get(), dx.get(), &dim, 1, 0, nullptr) ==
              TRN_SUCCESS);
      require_close(f.read(dout), want, tolerance(TRN_DTYPE_F32) * std::sqrt(129.0), rc.name);
    }
    CHECK(fallback_count(rc.name) == 0);
  }
}

TEST_CASE("reductions of a scalar and over a dim of size 1, softmax of one column, on the device",
          "[ops][reduce][softmax]") {
  OpsFixture f;
  std::mt19937 rng(22);
  DeviceTensor scalar = f.tensor(TRN_DTYPE_F32, host_array::full({}, 2.5)),
               out = f.tensor(TRN_DTYPE_F32, Shape{});
  for (const ReduceCase &rc : kFloatReduces) {
    const trn_ops_reduce_op_t r = rc.op;
    INFO(rc.name << " of a scalar: " << ops_error());
    REQUIRE(trn_ops_reduce(f.queue(), r, out.get(), scalar.get(), nullptr, 0, 0, nullptr) ==
            TRN_SUCCESS);
    CHECK(f.read(out).data == std::vector<double>{2.5});
  }
  REQUIRE(trn_ops_softmax(f.queue(), out.get(), scalar.get(), 0, 0, nullptr) == TRN_SUCCESS);
  CHECK(f.read(out).data == std::vector<double>{1.0});
  const host_array x = random_array(rng, {129, 1}, TRN_DTYPE_F32);
  DeviceTensor dx = f.tensor(TRN_DTYPE_F32, x), col = f.tensor(TRN_DTYPE_F32, {129}),
               dy = f.tensor(TRN_DTYPE_F32, {129, 1});
  const int64_t dim1[] = {1};
  REQUIRE(trn_ops_reduce(f.queue(), TRN_OPS_MEAN, col.get(), dx.get(), dim1, 1, 0, nullptr) ==
          TRN_SUCCESS);
  require_close(f.read(col), host::reduce(host::Reduce::kMean, x, {1}, false),
                tolerance(TRN_DTYPE_F32), "mean over a dim of size 1");
  for (int log = 0; log < 2; ++log) {
    REQUIRE(trn_ops_softmax(f.queue(), dy.get(), dx.get(), -1, log, nullptr) == TRN_SUCCESS);
    require_close(f.read(dy), host::softmax(x, -1, log), tolerance(TRN_DTYPE_F32),
                  "softmax of one column");
  }
  CHECK(fallback_entries() == 0);
}

TEST_CASE("a reduction over a middle dim runs on the host, recorded", "[ops][reduce]") {
  OpsFixture f;
  std::mt19937 rng(15);
  const host_array x = random_array(rng, {4, 129, 3}, TRN_DTYPE_F32);
  DeviceTensor dx = f.tensor(TRN_DTYPE_F32, x);
  const int64_t dims[] = {1};
  for (const ReduceCase &rc : kFloatReduces) {
    const trn_ops_reduce_op_t r = rc.op;
    for (int keepdim = 0; keepdim < 2; ++keepdim) {
      const host_array want = host::reduce(rc.host, x, {1}, keepdim);
      DeviceTensor dout = f.tensor(TRN_DTYPE_F32, want.shape);
      INFO(rc.name << (keepdim ? " keepdim" : "") << ": " << ops_error());
      REQUIRE(trn_ops_reduce(f.queue(), r, dout.get(), dx.get(), dims, 1, keepdim, nullptr) ==
              TRN_SUCCESS);
      // Computed in float64 and rounded once to f32.
      require_close(f.read(dout), rounded(want, TRN_DTYPE_F32), kRoundedOnce, rc.name);
    }
    // Two signatures (with and without keepdim), one run each.
    CHECK(fallback_count(rc.name) == 2);
  }
  CHECK(cache_stats().builds == 0);
}

TEST_CASE("argmax and argmin along the last dim run on the device and write i64 or i32 indices",
          "[ops][reduce]") {
  OpsFixture f;
  std::mt19937 rng(16);
  host_array x = random_array(rng, {7, 129}, TRN_DTYPE_F32);
  // Ties: the first extreme is the answer, as in torch.
  x.data[3] = x.data[100] = 5.0;
  x.data[129 + 7] = x.data[129 + 8] = -5.0;
  DeviceTensor dx = f.tensor(TRN_DTYPE_F32, x);
  const trn_dtype_t index_dtype = GENERATE(TRN_DTYPE_I64, TRN_DTYPE_I32);
  struct Case {
    std::vector<int64_t> dims;
    bool keepdim;
  } cases[] = {{{1}, false}, {{-1}, true}, {{0}, false}, {{}, false}, {{}, true}};
  uint64_t runs = 0;
  for (trn_ops_reduce_op_t r : {TRN_OPS_ARGMAX, TRN_OPS_ARGMIN}) {
    for (const Case &c : cases) {
      const host_array want =
          host::reduce(r == TRN_OPS_ARGMAX ? host::Reduce::kArgmax : host::Reduce::kArgmin, x,
                       c.dims, c.keepdim);
      DeviceTensor dout = f.tensor(index_dtype, want.shape);
      INFO(trn_ops_reduce_op_name(r) << " " << c.dims.size() << " dims"
                                     << (c.keepdim ? " keepdim" : "") << ": " << ops_error());
      REQUIRE(trn_ops_reduce(f.queue(), r, dout.get(), dx.get(), c.dims.data(),
                             static_cast<uint32_t>(c.dims.size()), c.keepdim,
                             nullptr) == TRN_SUCCESS);
      const host_array got = f.read(dout);
      CHECK(got.shape == want.shape);
      CHECK(got.data == want.data);
      ++runs;
    }
  }
  CHECK(host::reduce(host::Reduce::kArgmax, x, {}, false).data[0] == 3);
  CHECK(host::reduce(host::Reduce::kArgmin, x, {1}, false).data[1] == 7);
  // Along the last dim and over every element on the device; along dim 0 on the host, recorded.
  CHECK(runs == 10);
  CHECK(fallback_count("argmax") + fallback_count("argmin") == 2);
  CHECK(cache_stats().builds > 0);
}

TEST_CASE("argmax and argmin across column chunks: first of ties, first NaN, infinities, bf16",
          "[ops][reduce]") {
  OpsFixture f;
  const double nan = std::numeric_limits<double>::quiet_NaN(),
               inf = std::numeric_limits<double>::infinity();
  std::mt19937 rng(17);
  const int64_t cols = 9000;  // three chunks of the kernel's 4096 columns
  host_array x = random_array(rng, {5, cols}, TRN_DTYPE_F32);
  auto at = [&](int64_t r, int64_t c) -> double & { return x.data[r * cols + c]; };
  at(0, 100) = at(0, 5000) = at(0, 8999) = 9.0;  // a tie across chunks: the first wins
  at(1, 8500) = nan;                             // a NaN in the last chunk beats everything
  at(1, 4096) = 9.0;
  at(2, 7000) = nan, at(2, 10) = nan;  // the first NaN
  for (int64_t c = 0; c < cols; ++c) at(3, c) = -inf;
  at(4, 4095) = inf, at(4, 4096) = inf;  // a tie at a chunk's edge
  const trn_dtype_t dtype = GENERATE(TRN_DTYPE_F32, TRN_DTYPE_BF16);
  DeviceTensor dx = f.tensor(dtype, x);
  const host_array stored = f.read(dx);  // as the dtype holds the values
  const int64_t last = -1;
  for (trn_ops_reduce_op_t r : {TRN_OPS_ARGMAX, TRN_OPS_ARGMIN}) {
    const host_array want = host::reduce(
        r == TRN_OPS_ARGMAX ? host::Reduce::kArgmax : host::Reduce::kArgmin, stored, {1}, false);
    DeviceTensor dout = f.tensor(TRN_DTYPE_I64, want.shape);
    INFO(trn_ops_reduce_op_name(r) << " " << trn_dtype_name(dtype) << ": " << ops_error());
    REQUIRE(trn_ops_reduce(f.queue(), r, dout.get(), dx.get(), &last, 1, 0, nullptr) ==
            TRN_SUCCESS);
    CHECK(f.read(dout).data == want.data);
  }
  CHECK(host::reduce(host::Reduce::kArgmax, stored, {1}, false).data ==
        std::vector<double>{100, 8500, 10, 0, 4095});
  CHECK(fallback_count("argmax") + fallback_count("argmin") == 0);
}

TEST_CASE("trn_ops_reduce takes trn_reduce_op_t and refuses the ops it does not compute",
          "[ops][reduce][negative]") {
  // The 0.4 names are the one enum's values.
  static_assert(TRN_OPS_SUM == TRN_REDUCE_SUM && TRN_OPS_MEAN == TRN_REDUCE_AVG &&
                TRN_OPS_MAX == TRN_REDUCE_MAX && TRN_OPS_MIN == TRN_REDUCE_MIN &&
                TRN_OPS_ARGMAX == TRN_REDUCE_ARGMAX && TRN_OPS_ARGMIN == TRN_REDUCE_ARGMIN);
  CHECK(std::string(trn_ops_reduce_op_name(TRN_OPS_MEAN)) == "avg");
  CHECK(std::string(trn_ops_reduce_op_name(TRN_OPS_ARGMIN)) == "argmin");
  CHECK(std::string(trn_ops_reduce_op_name(static_cast<trn_ops_reduce_op_t>(7))) == "unknown");
  OpsFixture f;
  DeviceTensor x = f.tensor(TRN_DTYPE_F32, {4, 5}), out = f.tensor(TRN_DTYPE_F32, {4});
  const int64_t last[] = {-1};
  // PROD is in the enum but has no kernel and no host form here: refused, not computed wrong.
  CHECK(trn_ops_reduce(f.queue(), TRN_REDUCE_PROD, out.get(), x.get(), last, 1, 0, nullptr) ==
        TRN_ERROR_INVALID_ENUM);
  CHECK(ops_error().find("op 1 (prod)") != std::string::npos);
  CHECK(std::string(trn_last_error()).find("TRN_REDUCE_SUM, _AVG") != std::string::npos);
  for (const int op : {7, 99, 0x40000000, 0x7fffffff}) {
    INFO("op " << op);
    CHECK(trn_ops_reduce(f.queue(), static_cast<trn_ops_reduce_op_t>(op), out.get(), x.get(), last,
                         1, 0, nullptr) == TRN_ERROR_INVALID_ENUM);
    CHECK(ops_error().find("(unknown)") != std::string::npos);
  }
  f.finish();
  CHECK(fallback_entries() == 0);
  CHECK(cache_stats().builds == 0);
}

TEST_CASE(
    "softmax and log_softmax: the last dim on the device, dim 0 on the host, and their "
    "backward",
    "[ops][softmax]") {
  OpsFixture f;
  std::mt19937 rng(17);
  const Shape shape = GENERATE(Shape{33, 129}, Shape{4097, 3});
  const host_array x = random_array(rng, shape, TRN_DTYPE_F32, -4.0, 4.0);
  const host_array g = random_array(rng, shape, TRN_DTYPE_F32);
  DeviceTensor dx = f.tensor(TRN_DTYPE_F32, x), dg = f.tensor(TRN_DTYPE_F32, g);
  for (int log = 0; log < 2; ++log) {
    const char *name = log ? "log_softmax" : "softmax";
    const std::string backward = std::string(name) + "_backward";
    for (int64_t dim : {int64_t{-1}, int64_t{1}, int64_t{0}}) {
      const bool device = dim != 0;
      REQUIRE(trn_ops_reset_fallbacks() == TRN_SUCCESS);
      DeviceTensor dy = f.tensor(TRN_DTYPE_F32, shape), dgx = f.tensor(TRN_DTYPE_F32, shape);
      INFO(name << " dim " << dim << ": " << ops_error());
      REQUIRE(trn_ops_softmax(f.queue(), dy.get(), dx.get(), dim, log, nullptr) == TRN_SUCCESS);
      const host_array want = host::softmax(x, dim, log);
      const host_array y = f.read(dy);
      require_close(y, device ? want : rounded(want, TRN_DTYPE_F32),
                    device ? tolerance(TRN_DTYPE_F32) : kRoundedOnce, name);
      // The backward from the forward's (device) output, against the reference's backward of
      // that same output.
      REQUIRE(trn_ops_softmax_backward(f.queue(), dgx.get(), dg.get(), dy.get(), dim, log,
                                       nullptr) == TRN_SUCCESS);
      require_close(f.read(dgx), host::softmax_backward(g, y, dim, log),
                    device ? tolerance(TRN_DTYPE_F32) : kRoundedOnce, backward);
      CHECK(fallback_count(name) == (device ? 0u : 1u));
      CHECK(fallback_count(backward.c_str()) == (device ? 0u : 1u));
    }
  }
  SECTION("bf16 in, f32 and bf16 out") {
    REQUIRE(trn_ops_reset_fallbacks() == TRN_SUCCESS);
    const host_array xb = random_array(rng, {7, 4097}, TRN_DTYPE_BF16, -4.0, 4.0);
    DeviceTensor dxb = f.tensor(TRN_DTYPE_BF16, xb);
    for (trn_dtype_t out : {TRN_DTYPE_F32, TRN_DTYPE_BF16}) {
      for (int log = 0; log < 2; ++log) {
        DeviceTensor dy = f.tensor(out, xb.shape);
        INFO(trn_dtype_name(out) << (log ? " log_softmax" : " softmax") << ": " << ops_error());
        REQUIRE(trn_ops_softmax(f.queue(), dy.get(), dxb.get(), -1, log, nullptr) == TRN_SUCCESS);
        require_close(f.read(dy), rounded(host::softmax(xb, -1, log), out), tolerance(out),
                      "softmax of bf16");
      }
    }
    CHECK(fallback_count("softmax") == 0);
    CHECK(fallback_count("log_softmax") == 0);
  }
}

TEST_CASE("softmax of masked (-inf) entries and of large inputs, on the device", "[ops][softmax]") {
  OpsFixture f;
  std::mt19937 rng(21);
  host_array x = random_array(rng, {3, 9}, TRN_DTYPE_F32);
  x.data[2] = -INFINITY;
  x.data[9 + 4] = -INFINITY;
  for (int i = 1; i < 9; ++i) x.data[18 + i] = -INFINITY;  // row 2: one finite entry
  // Values near 100 overflow exp() in fp32 unless the maximum is subtracted first.
  const host_array big = random_array(rng, {2, 9}, TRN_DTYPE_F32, 80.0, 100.0);
  for (const host_array *in : {static_cast<const host_array *>(&x), &big}) {
    DeviceTensor dx = f.tensor(TRN_DTYPE_F32, *in), dy = f.tensor(TRN_DTYPE_F32, in->shape);
    for (int log = 0; log < 2; ++log) {
      INFO((in == &x ? "masked " : "large ")
           << (log ? "log_softmax" : "softmax") << ": " << ops_error());
      REQUIRE(trn_ops_softmax(f.queue(), dy.get(), dx.get(), -1, log, nullptr) == TRN_SUCCESS);
      require_close(f.read(dy), host::softmax(*in, -1, log), tolerance(TRN_DTYPE_F32), "softmax");
    }
  }
  CHECK(fallback_count("softmax") == 0);
  CHECK(fallback_count("log_softmax") == 0);
}

TEST_CASE("softmax_backward matches central finite differences of the forward", "[ops][softmax]") {
  // The finite differences are of the op library's own forward; the backward checked is the
  // device's, in fp32. Why float64 tensors (which the library runs on the host): an fp32 forward
  // rounds each output by ~6e-8 relative and the central difference divides that by 2h = 2e-5,
  // leaving errors of 1e-3 or more, far above the f32 tolerance the gradients are held to (a larger
  // h would trade that for truncation error); the f64 forward leaves ~1e-11.
  OpsFixture f;
  std::mt19937 rng(18);
  const Shape shape = {3, 9};
  const host_array x = random_array(rng, shape, TRN_DTYPE_F32);
  const host_array g = random_array(rng, shape, TRN_DTYPE_F32);
  for (int log = 0; log < 2; ++log) {
    INFO((log ? "log_softmax" : "softmax") << ": " << ops_error());
    // The device's forward and backward in f32.
    DeviceTensor dx = f.tensor(TRN_DTYPE_F32, x), dg = f.tensor(TRN_DTYPE_F32, g),
                 dy = f.tensor(TRN_DTYPE_F32, shape), dgx = f.tensor(TRN_DTYPE_F32, shape);
    REQUIRE(trn_ops_softmax(f.queue(), dy.get(), dx.get(), -1, log, nullptr) == TRN_SUCCESS);
    REQUIRE(trn_ops_softmax_backward(f.queue(), dgx.get(), dg.get(), dy.get(), -1, log, nullptr) ==
            TRN_SUCCESS);
    const host_array grad = f.read(dgx);
    // d/dx_i of sum(g * forward(x)), centrally, on f64 tensors.
    DeviceTensor px = f.tensor(TRN_DTYPE_F64, shape), py = f.tensor(TRN_DTYPE_F64, shape);
    auto loss = [&](const host_array &at) {
      f.write(px, at);
      REQUIRE(trn_ops_softmax(f.queue(), py.get(), px.get(), -1, log, nullptr) == TRN_SUCCESS);
      const host_array y = f.read(py);
      double s = 0;
      for (size_t i = 0; i < y.data.size(); ++i) s += g.data[i] * y.data[i];
      return s;
    };
    const double h = 1e-5;
    host_array fd = host_array::zeros(shape);
    for (size_t i = 0; i < x.data.size(); ++i) {
      host_array plus = x, minus = x;
      plus.data[i] += h;
      minus.data[i] -= h;
      fd.data[i] = (loss(plus) - loss(minus)) / (2 * h);
    }
    require_close(grad, fd, tolerance(TRN_DTYPE_F32), "softmax_backward vs finite differences");
    CHECK(fallback_count(log ? "log_softmax_backward" : "softmax_backward") == 0);
  }
}

TEST_CASE("bad shapes are refused with a message naming the problem, and nothing is built",
          "[ops][negative]") {
  OpsFixture f;
  DeviceTensor a45 = f.tensor(TRN_DTYPE_F32, {4, 5}), b63 = f.tensor(TRN_DTYPE_F32, {6, 3}),
               b53 = f.tensor(TRN_DTYPE_F32, {5, 3}), o43 = f.tensor(TRN_DTYPE_F32, {4, 3}),
               o44 = f.tensor(TRN_DTYPE_F32, {4, 4});
  auto refused = [&](trn_result_t r, const char *needle) {
    INFO("wanted \"" << needle << "\" in: " << ops_error());
    CHECK(r == TRN_ERROR_INVALID_ARGUMENT);
    CHECK(ops_error().find(needle) != std::string::npos);
  };
  // matmul: inner dims, the output's shape, a batch against a matrix, batch counts.
  refused(trn_ops_matmul(f.queue(), o43.get(), a45.get(), b63.get(), 0, nullptr),
          "a's columns (5) must equal b's rows (6)");
  CHECK(ops_error().find("trn_ops_matmul") == 0);
  refused(trn_ops_matmul(f.queue(), o44.get(), a45.get(), b53.get(), 0, nullptr),
          "out is f32[4, 4]; it must be [4, 3]");
  refused(trn_ops_matmul(f.queue(), o43.get(), a45.get(), b53.get(), TRN_OPS_TRANSPOSE_A, nullptr),
          "(transposed)");
  DeviceTensor a3 = f.tensor(TRN_DTYPE_F32, {3, 4, 5}), b2 = f.tensor(TRN_DTYPE_F32, {2, 5, 3}),
               o3 = f.tensor(TRN_DTYPE_F32, {3, 4, 3});
  refused(trn_ops_matmul(f.queue(), o3.get(), a3.get(), b2.get(), 0, nullptr),
          "a has 3 matrices, b 2");
  refused(trn_ops_matmul(f.queue(), o3.get(), a45.get(), b2.get(), 0, nullptr), "batch a instead");
  DeviceTensor v5 = f.tensor(TRN_DTYPE_F32, {5});
  refused(trn_ops_matmul(f.queue(), o43.get(), v5.get(), b53.get(), 0, nullptr),
          "must be a matrix or a batch");
  // addmm: a bias that does not broadcast, batches.
  DeviceTensor bias4 = f.tensor(TRN_DTYPE_F32, {4});
  refused(trn_ops_addmm(f.queue(), o43.get(), bias4.get(), a45.get(), b53.get(), 1, 1, 0, nullptr),
          "do not broadcast");
  refused(trn_ops_addmm(f.queue(), o3.get(), o43.get(), a3.get(), b2.get(), 1, 1, 0, nullptr),
          "must be matrices");
  // reduce: the output's shape, dims out of range or repeated, argmax over two dims.
  const int64_t last[] = {-1}, twice[] = {1, -1}, far[] = {2}, both[] = {0, 1};
  DeviceTensor r4 = f.tensor(TRN_DTYPE_F32, {4}), r5 = f.tensor(TRN_DTYPE_F32, {5});
  refused(trn_ops_reduce(f.queue(), TRN_OPS_SUM, r5.get(), a45.get(), last, 1, 0, nullptr),
          "out is f32[5]; it must be [4]");
  CHECK(ops_error().find("trn_ops_reduce") == 0);
  refused(trn_ops_reduce(f.queue(), TRN_OPS_SUM, r4.get(), a45.get(), last, 1, 1, nullptr),
          "it must be [4, 1]");
  refused(trn_ops_reduce(f.queue(), TRN_OPS_MAX, r4.get(), a45.get(), twice, 2, 0, nullptr),
          "given twice");
  refused(trn_ops_reduce(f.queue(), TRN_OPS_MEAN, r4.get(), a45.get(), far, 1, 0, nullptr),
          "out of range");
  DeviceTensor i0 = f.tensor(TRN_DTYPE_I64, Shape{});
  refused(trn_ops_reduce(f.queue(), TRN_OPS_ARGMAX, i0.get(), a45.get(), both, 2, 0, nullptr),
          "one dim or none");
  refused(trn_ops_reduce(f.queue(), TRN_OPS_ARGMIN, r4.get(), a45.get(), last, 1, 0, nullptr),
          "holds indices: give it an integer dtype");
  // An empty x: a max along its empty dim is undefined; along another it is empty (PyTorch).
  DeviceTensor e05 = f.tensor(TRN_DTYPE_F32, {0, 5}), e0 = f.tensor(TRN_DTYPE_F32, {0});
  const int64_t first[] = {0};
  refused(trn_ops_reduce(f.queue(), TRN_OPS_MAX, r5.get(), e05.get(), first, 1, 0, nullptr),
          "is empty along dim 0, which it reduces");
  CHECK(trn_ops_reduce(f.queue(), TRN_OPS_MAX, e0.get(), e05.get(), last, 1, 0, nullptr) ==
        TRN_SUCCESS);
  // softmax: shapes and dims.
  refused(trn_ops_softmax(f.queue(), o44.get(), a45.get(), -1, 0, nullptr),
          "out is f32[4, 4]; it must be [4, 5]");
  refused(trn_ops_softmax(f.queue(), o44.get(), o44.get(), 2, 1, nullptr), "out of range");
  refused(trn_ops_softmax_backward(f.queue(), a45.get(), o44.get(), a45.get(), -1, 0, nullptr),
          "grad_out is f32[4, 4]; it must be [4, 5]");
  f.finish();
  CHECK(fallback_entries() == 0);
  const trn_ops_cache_stats_t s = cache_stats();
  CHECK(s.builds == 0);
  CHECK(s.memory_hits == 0);
}
