// Elementwise ops on the simulated device against the float64 host reference: every unary op and
// its backward, every binary op with broadcasting and scalar variants, where, copy/cast, fill and
// arange, at awkward sizes; and the same ops run on the host (TRN_OPS_CONFIG_HOST_ONLY) giving the
// same answers.
#include "ops_fixture.hpp"
#include "support/fault_injection.hpp"

using namespace trn::test;
namespace host = trn::ops::host;

namespace {

const Shape kSizes[] = {{1}, {127}, {129}, {4097}, {3, 129}, {2, 3, 130}};

// Inputs inside each op's domain (log, sqrt, rsqrt, reciprocal need x > 0).
bool positive_domain(trn_ops_unary_op_t op) {
  return op == TRN_OPS_LOG || op == TRN_OPS_SQRT || op == TRN_OPS_RSQRT || op == TRN_OPS_RECIPROCAL;
}

}  // namespace

TEST_CASE("every unary op matches the float64 reference at awkward sizes", "[ops][unary]") {
  OpsFixture f;
  std::mt19937 rng(1);
  const trn_dtype_t dtype = GENERATE(TRN_DTYPE_F32, TRN_DTYPE_BF16);
  for (int op = TRN_OPS_NEG; op <= TRN_OPS_COS; ++op) {
    const auto u = static_cast<trn_ops_unary_op_t>(op);
    for (const Shape &shape : kSizes) {
      const bool pos = positive_domain(u);
      const host_array x = random_array(rng, shape, dtype, pos ? 0.1 : -3.0, 3.0);
      DeviceTensor tx = f.tensor(dtype, x), ty = f.tensor(dtype, shape);
      INFO(trn_ops_unary_op_name(u)
           << " " << trn_dtype_name(dtype) << " numel " << x.data.size() << ": " << ops_error());
      REQUIRE(trn_ops_unary(f.queue(), u, ty.get(), tx.get(), nullptr) == TRN_SUCCESS);
      host_array want = host::unary(static_cast<host::Unary>(op - 1), x);
      for (double &v : want.data) v = as_dtype(dtype, v);
      require_close(f.read(ty), want, tolerance(dtype) * 4, trn_ops_unary_op_name(u));
    }
  }
  // Everything ran on the device: nothing was recorded as a fallback.
  uint32_t n = 0;
  REQUIRE(trn_ops_get_fallbacks(&n, nullptr) == TRN_SUCCESS);
  CHECK(n == 0);
}

TEST_CASE("unary backward ops match the reference, all on the device", "[ops][unary]") {
  OpsFixture f;
  std::mt19937 rng(2);
  for (int op = TRN_OPS_NEG; op <= TRN_OPS_COS; ++op) {
    const auto u = static_cast<trn_ops_unary_op_t>(op);
    const Shape shape = {129, 5};
    const bool pos = positive_domain(u);
    const host_array x = random_array(rng, shape, TRN_DTYPE_F32, pos ? 0.2 : -3.0, 3.0);
    const host_array g = random_array(rng, shape, TRN_DTYPE_F32);
    DeviceTensor tx = f.tensor(TRN_DTYPE_F32, x), tg = f.tensor(TRN_DTYPE_F32, g),
                 tgx = f.tensor(TRN_DTYPE_F32, shape);
    INFO(trn_ops_unary_op_name(u) << ": " << ops_error());
    REQUIRE(trn_ops_unary_backward(f.queue(), u, tgx.get(), tg.get(), tx.get(), nullptr) ==
            TRN_SUCCESS);
    require_close(f.read(tgx), host::unary_backward(static_cast<host::Unary>(op - 1), g, x), 1e-4,
                  trn_ops_unary_op_name(u));
  }
  CHECK(fallback_count("unary_backward") == 0);  // gelu's erf form too: gelu_dx
}

TEST_CASE("relu's backward selects: an infinite or NaN gradient where x <= 0 gives 0",
          "[ops][unary]") {
  OpsFixture f;
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const host_array x{{5}, {-1.0, 0.0, 2.0, nan, -inf}};
  const host_array g{{5}, {inf, nan, inf, 3.0, -inf}};
  const host_array want{{5}, {0.0, 0.0, inf, 3.0, 0.0}};  // a NaN x lets its gradient through
  require_close(host::unary_backward(host::Unary::kRelu, g, x), want, 0, "host reference");
  for (uint32_t flags : {0u, uint32_t{TRN_OPS_CONFIG_HOST_ONLY}}) {
    f.configure(flags);
    DeviceTensor tx = f.tensor(TRN_DTYPE_F32, x), tg = f.tensor(TRN_DTYPE_F32, g),
                 tgx = f.tensor(TRN_DTYPE_F32, Shape{5});
    REQUIRE(trn_ops_unary_backward(f.queue(), TRN_OPS_RELU, tgx.get(), tg.get(), tx.get(),
                                   nullptr) == TRN_SUCCESS);
    require_close(f.read(tgx), want, 0, flags ? "host" : "device");
  }
}

TEST_CASE(
    "binary ops broadcast as numpy does, on the device (middle-dim broadcasts expanded first)",
    "[ops][binary]") {
  OpsFixture f;
  std::mt19937 rng(3);
  struct Case {
    Shape a, b;
    bool device;
  } cases[] = {{{129, 33}, {129, 33}, true}, {{7, 129}, {129}, true},
               {{129, 7}, {129, 1}, true},   {{}, {5, 7}, true},
               {{4, 1, 5}, {3, 1}, true},    {{2, 3, 4}, {2, 1, 4}, true},
               {{4097}, {1}, true},          {{1, 130}, {127, 1}, true}};
  for (int op = TRN_OPS_ADD; op <= TRN_OPS_GE; ++op) {
    const auto b = static_cast<trn_ops_binary_op_t>(op);
    const bool comparison = op >= TRN_OPS_EQ;
    for (const Case &c : cases) {
      REQUIRE(trn_ops_reset_fallbacks() == TRN_SUCCESS);
      const bool pow = b == TRN_OPS_POW;
      host_array va = random_array(rng, c.a, TRN_DTYPE_F32, pow ? 0.5 : -3.0, 3.0);
      host_array vb = random_array(rng, c.b, TRN_DTYPE_F32, pow ? -2.0 : -3.0, 3.0);
      if (comparison)  // some equal elements, so that eq and ne see both answers
        for (size_t i = 0; i < va.data.size(); i += 3) va.data[i] = std::round(va.data[i]);
      if (comparison)
        for (size_t i = 0; i < vb.data.size(); i += 2) vb.data[i] = std::round(vb.data[i]);
      if (b == TRN_OPS_DIV)
        for (double &v : vb.data)
          if (std::fabs(v) < 0.1) v = 0.5;
      const host_array want = host::binary(static_cast<host::Binary>(op - 1), va, vb);
      const trn_dtype_t out_dtype = comparison ? TRN_DTYPE_U8 : TRN_DTYPE_F32;
      DeviceTensor ta = f.tensor(TRN_DTYPE_F32, va), tb = f.tensor(TRN_DTYPE_F32, vb),
                   to = f.tensor(out_dtype, want.shape);
      INFO(trn_ops_binary_op_name(b)
           << " " << va.shape.size() << "-d vs " << vb.shape.size() << "-d: " << ops_error());
      REQUIRE(trn_ops_binary(f.queue(), b, to.get(), ta.get(), tb.get(), nullptr) == TRN_SUCCESS);
      require_close(f.read(to), want, pow ? 1e-4 : 2e-6, trn_ops_binary_op_name(b));
      CHECK(fallback_count(trn_ops_binary_op_name(b)) == (c.device ? 0u : 1u));
    }
  }
}

TEST_CASE("scalar variants pass the scalar at launch: one kernel serves every value",
          "[ops][binary]") {
  OpsFixture f;
  std::mt19937 rng(4);
  const host_array x = random_array(rng, {128, 9}, TRN_DTYPE_F32, 0.5, 3.0);  // one launch
  DeviceTensor tx = f.tensor(TRN_DTYPE_F32, x), ty = f.tensor(TRN_DTYPE_F32, x.shape);
  for (double s : {2.5, -1.25, 7.0}) {
    for (int first = 0; first < 2; ++first) {
      REQUIRE(trn_ops_binary_scalar(f.queue(), TRN_OPS_SUB, ty.get(), tx.get(), s, first,
                                    nullptr) == TRN_SUCCESS);
      const host_array sv = host_array::full({}, s);
      require_close(
          f.read(ty),
          first ? host::binary(host::Binary::kSub, sv, x) : host::binary(host::Binary::kSub, x, sv),
          2e-6, "sub scalar");
    }
  }
  // Two kernels (x - s and s - x), each built once, then hit for the other values.
  const trn_ops_cache_stats_t s = cache_stats();
  CHECK(s.builds == 2);
  CHECK(s.memory_hits == 4);
}

TEST_CASE("where picks exactly, infinities and NaN included, on the device", "[ops][binary]") {
  OpsFixture f;
  host_array cond{{2, 3}, {1, 0, 1, 0, 0, 1}};
  host_array a{{3}, {1, -INFINITY, 3}};
  host_array b{{2, 1}, {INFINITY, -5}};
  DeviceTensor tc = f.tensor(TRN_DTYPE_U8, cond), ta = f.tensor(TRN_DTYPE_F32, a),
               tb = f.tensor(TRN_DTYPE_F32, b), to = f.tensor(TRN_DTYPE_F32, {2, 3});
  REQUIRE(trn_ops_where(f.queue(), to.get(), tc.get(), ta.get(), tb.get(), nullptr) == TRN_SUCCESS);
  const host_array got = f.read(to);
  CHECK(got.data == std::vector<double>{1, INFINITY, 3, -5, -5, 3});
  CHECK(fallback_count("where") == 0);
  // Attention-style masking at awkward sizes: scores [4, 129, 129] where a [129, 129] causal mask
  // keeps them, -inf elsewhere; NaN kept where chosen; bf16 out.
  std::mt19937 rng(10);
  host_array scores = random_array(rng, {4, 129, 129}, TRN_DTYPE_F32);
  scores.data[5] = NAN;
  host_array mask = host_array::zeros({129, 129});
  for (int64_t i = 0; i < 129; ++i)
    for (int64_t j = 0; j <= i; ++j) mask.data[i * 129 + j] = 1;
  const host_array minus_inf = host_array::full({}, -INFINITY);
  DeviceTensor ts = f.tensor(TRN_DTYPE_F32, scores), tm = f.tensor(TRN_DTYPE_U8, mask),
               tinf = f.tensor(TRN_DTYPE_F32, minus_inf),
               tout = f.tensor(TRN_DTYPE_BF16, scores.shape);
  REQUIRE(trn_ops_where(f.queue(), tout.get(), tm.get(), ts.get(), tinf.get(), nullptr) ==
          TRN_SUCCESS);
  host_array want = host::where(mask, scores, minus_inf);
  for (double &v : want.data) v = as_dtype(TRN_DTYPE_BF16, v);
  require_close(f.read(tout), want, 0, "masked scores");
  CHECK(fallback_count("where") == 0);
  // Float values into an integer output convert as a cast does (toward zero), not rounded.
  host_array fractions{{3}, {2.7, -2.7, 1.5}};
  DeviceTensor tf = f.tensor(TRN_DTYPE_F32, fractions), ti = f.tensor(TRN_DTYPE_I32, Shape{3}),
               tc3 = f.tensor(TRN_DTYPE_U8, host_array{{3}, {1, 1, 1}});
  REQUIRE(trn_ops_where(f.queue(), ti.get(), tc3.get(), tf.get(), tf.get(), nullptr) ==
          TRN_SUCCESS);
  CHECK(f.read(ti).data == std::vector<double>{2, -2, 1});
}

TEST_CASE("copy casts between dtypes, makes views contiguous and expands broadcasts",
          "[ops][copy]") {
  OpsFixture f;
  std::mt19937 rng(5);
  SECTION("float casts on the device") {
    const host_array x = random_array(rng, {129, 17}, TRN_DTYPE_F32, -100, 100);
    for (trn_dtype_t to : {TRN_DTYPE_BF16, TRN_DTYPE_F16, TRN_DTYPE_F32}) {
      DeviceTensor tx = f.tensor(TRN_DTYPE_F32, x), ty = f.tensor(to, x.shape);
      REQUIRE(trn_ops_copy(f.queue(), ty.get(), tx.get(), nullptr) == TRN_SUCCESS);
      host_array want = x;
      for (double &v : want.data) v = as_dtype(to, v);
      require_close(f.read(ty), want, 0, trn_dtype_name(to));
    }
    CHECK(fallback_count("copy") == 0);
  }
  SECTION("int32 casts to floats round to nearest even on the device, as PyTorch's do") {
    // Beyond 2^24 an int32 has no exact fp32 value: the conversion rounds, it does not compute.
    const host_array x{{8},
                       {0, -7, 16777216, 16777217, 16777219, -16777217, 2147483647, -2147483648.0}};
    for (trn_dtype_t to : {TRN_DTYPE_F32, TRN_DTYPE_BF16, TRN_DTYPE_F16}) {
      DeviceTensor tx = f.tensor(TRN_DTYPE_I32, x), ty = f.tensor(to, x.shape);
      REQUIRE(trn_ops_copy(f.queue(), ty.get(), tx.get(), nullptr) == TRN_SUCCESS);
      host_array want = x;
      for (double &v : want.data) v = as_dtype(to, v);
      CHECK(f.read(ty).data == want.data);
    }
    CHECK(fallback_count("copy") == 0);
  }
  SECTION("casts to integers truncate toward zero, as PyTorch's do") {
    DeviceTensor tx = f.tensor(TRN_DTYPE_F32, host_array{{4}, {2.7, -2.7, 0.5, 1e10}});
    DeviceTensor ty = f.tensor(TRN_DTYPE_I32, {4});
    REQUIRE(trn_ops_copy(f.queue(), ty.get(), tx.get(), nullptr) == TRN_SUCCESS);
    CHECK(f.read(ty).data == std::vector<double>{2, -2, 0, 2147483647});
    CHECK(fallback_count("copy") == 1);
  }
  SECTION("a transposed view becomes contiguous; a broadcast view is expanded") {
    const host_array x = random_array(rng, {5, 7}, TRN_DTYPE_F32);
    DeviceTensor tx = f.tensor(TRN_DTYPE_F32, x), ty = f.tensor(TRN_DTYPE_F32, {7, 5});
    trn_ops_tensor_t view = tx.t;  // x^T as a view: shape [7, 5], strides [1, 7]
    view.shape[0] = 7;
    view.shape[1] = 5;
    view.strides[0] = 1;
    view.strides[1] = 7;
    REQUIRE(trn_ops_copy(f.queue(), ty.get(), &view, nullptr) == TRN_SUCCESS);
    const host_array got = f.read(ty);
    for (int64_t i = 0; i < 7; ++i)
      for (int64_t j = 0; j < 5; ++j) CHECK(got.data[i * 5 + j] == x.data[j * 7 + i]);
    DeviceTensor row = f.tensor(TRN_DTYPE_F32, host_array{{1, 3}, {1, 2, 3}});
    trn_ops_tensor_t expanded = row.t;
    expanded.shape[0] = 129;
    expanded.strides[0] = 0;
    DeviceTensor big = f.tensor(TRN_DTYPE_F32, {129, 3});
    REQUIRE(trn_ops_copy(f.queue(), big.get(), &expanded, nullptr) == TRN_SUCCESS);
    const host_array e = f.read(big);
    for (int64_t i = 0; i < 129; ++i)
      CHECK(std::vector<double>(e.data.begin() + i * 3, e.data.begin() + i * 3 + 3) ==
            std::vector<double>{1, 2, 3});
    CHECK(fallback_count("copy") == 0);  // the transpose by DMA, the expand by a kernel
  }
  SECTION("into a strided output (a column block of a wider tensor), casts included") {
    // y[:, 3:8] = x for y [6, 11]: the destination is a view with a row step of 11; what lies
    // outside the block stays as it was.
    const host_array x = random_array(rng, {6, 5}, TRN_DTYPE_F32, -50, 50);
    DeviceTensor tx = f.tensor(TRN_DTYPE_F32, x);
    for (trn_dtype_t to : {TRN_DTYPE_F32, TRN_DTYPE_BF16}) {
      const host_array before = host_array::full({6, 11}, 7);
      DeviceTensor ty = f.tensor(to, before);
      trn_ops_tensor_t block = ty.t;
      block.offset = 3 * trn_dtype_size(to);
      block.shape[1] = 5;  // strides stay [11, 1]
      REQUIRE(trn_ops_copy(f.queue(), &block, tx.get(), nullptr) == TRN_SUCCESS);
      const host_array got = f.read(ty);
      for (int64_t i = 0; i < 6; ++i)
        for (int64_t j = 0; j < 11; ++j) {
          const bool inside = j >= 3 && j < 8;
          const double want = inside ? as_dtype(to, x.data[i * 5 + (j - 3)]) : 7.0;
          CHECK(got.data[i * 11 + j] == want);
        }
    }
    // Both sides strided: a transposed source into every other row of the destination.
    const host_array src = random_array(rng, {4, 3}, TRN_DTYPE_F32);
    DeviceTensor ts = f.tensor(TRN_DTYPE_F32, src), td = f.tensor(TRN_DTYPE_F32, {6, 4});
    REQUIRE(trn_ops_fill(f.queue(), td.get(), 0.0, nullptr) == TRN_SUCCESS);
    trn_ops_tensor_t transposed = ts.t;  // src^T: [3, 4], strides [1, 3]
    transposed.shape[0] = 3, transposed.shape[1] = 4;
    transposed.strides[0] = 1, transposed.strides[1] = 3;
    trn_ops_tensor_t rows = td.t;  // td[::2]: [3, 4], strides [8, 1]
    rows.shape[0] = 3;
    rows.strides[0] = 8;
    REQUIRE(trn_ops_copy(f.queue(), &rows, &transposed, nullptr) == TRN_SUCCESS);
    const host_array d = f.read(td);
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 4; ++j)
        CHECK(d.data[i * 4 + j] == (i % 2 == 0 ? src.data[j * 3 + i / 2] : 0.0));
    CHECK(fallback_count("copy") == 0);
  }
  SECTION("strided views of every kind, with casts, on the DMA engines") {
    // A [4, 6, 10] tensor viewed as x[:, 1:5, ::3] transposed to [10/3, 4, 4] style shapes.
    const host_array x = random_array(rng, {4, 6, 10}, TRN_DTYPE_F32, -50, 50);
    DeviceTensor tx = f.tensor(TRN_DTYPE_F32, x);
    trn_ops_tensor_t view = tx.t;  // x[:, 1:5, ::3].permute(2, 0, 1): shape [4, 4, 4]
    view.offset = 1 * 10 * 4;
    view.shape[0] = 4, view.strides[0] = 3;
    view.shape[1] = 4, view.strides[1] = 60;
    view.shape[2] = 4, view.strides[2] = 10;
    host_array want = host_array::zeros({4, 4, 4});
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 4; ++j)
        for (int64_t k = 0; k < 4; ++k)
          want.data[(i * 4 + j) * 4 + k] = x.data[10 + i * 3 + j * 60 + k * 10];
    for (trn_dtype_t to : {TRN_DTYPE_F32, TRN_DTYPE_BF16}) {
      DeviceTensor ty = f.tensor(to, {4, 4, 4});
      REQUIRE(trn_ops_copy(f.queue(), ty.get(), &view, nullptr) == TRN_SUCCESS);
      host_array w = want;
      for (double &v : w.data) v = as_dtype(to, v);
      require_close(f.read(ty), w, 0, trn_dtype_name(to));
    }
    // An integer tensor's transpose, bit-exact.
    host_array ints = host_array::zeros({3, 5});
    for (size_t i = 0; i < ints.data.size(); ++i)
      ints.data[i] = 100000 * static_cast<double>(i) + 7;
    DeviceTensor ti = f.tensor(TRN_DTYPE_I32, ints), tt = f.tensor(TRN_DTYPE_I32, {5, 3});
    trn_ops_tensor_t tv = ti.t;
    tv.shape[0] = 5, tv.strides[0] = 1, tv.shape[1] = 3, tv.strides[1] = 5;
    REQUIRE(trn_ops_copy(f.queue(), tt.get(), &tv, nullptr) == TRN_SUCCESS);
    const host_array got = f.read(tt);
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 3; ++j) CHECK(got.data[i * 3 + j] == ints.data[j * 5 + i]);
    CHECK(fallback_count("copy") == 0);
  }
}

TEST_CASE("fill and arange, floats and integers", "[ops][fill]") {
  OpsFixture f;
  DeviceTensor a = f.tensor(TRN_DTYPE_F32, {4097});
  REQUIRE(trn_ops_fill(f.queue(), a.get(), -1.5, nullptr) == TRN_SUCCESS);
  for (double v : f.read(a).data) REQUIRE(v == -1.5);
  DeviceTensor b = f.tensor(TRN_DTYPE_I32, {129, 2});
  REQUIRE(trn_ops_fill(f.queue(), b.get(), 7, nullptr) == TRN_SUCCESS);
  for (double v : f.read(b).data) REQUIRE(v == 7);
  for (trn_dtype_t d : {TRN_DTYPE_F32, TRN_DTYPE_I32}) {
    DeviceTensor r = f.tensor(d, {4097});
    REQUIRE(trn_ops_arange(f.queue(), r.get(), 3, 2, nullptr) == TRN_SUCCESS);
    const host_array got = f.read(r);
    for (int64_t i = 0; i < 4097; ++i) REQUIRE(got.data[i] == static_cast<double>(3 + 2 * i));
  }
  CHECK(fallback_count("fill") == 0);
  CHECK(fallback_count("arange") == 0);
}

TEST_CASE("float64 tensors run on the host, recorded once per signature with a count",
          "[ops][fallback]") {
  OpsFixture f;
  std::mt19937 rng(6);
  const host_array x = random_array(rng, {33, 3}, TRN_DTYPE_F64);
  DeviceTensor tx = f.tensor(TRN_DTYPE_F64, x), ty = f.tensor(TRN_DTYPE_F64, x.shape);
  for (int i = 0; i < 3; ++i)
    REQUIRE(trn_ops_unary(f.queue(), TRN_OPS_TANH, ty.get(), tx.get(), nullptr) == TRN_SUCCESS);
  require_close(f.read(ty), host::unary(host::Unary::kTanh, x), 1e-15, "f64 tanh");
  uint32_t n = 0;
  REQUIRE(trn_ops_get_fallbacks(&n, nullptr) == TRN_SUCCESS);
  REQUIRE(n == 1);
  trn_ops_fallback_t fb = TRN_OPS_FALLBACK_INIT;
  REQUIRE(trn_ops_get_fallbacks(&n, &fb) == TRN_SUCCESS);
  CHECK(std::string(fb.op) == "tanh");
  CHECK(std::string(fb.signature) == "f64[33, 3] -> f64[33, 3]");
  CHECK(std::string(fb.reason).find("f64") != std::string::npos);
  CHECK(fb.count == 3);
}

TEST_CASE("host-only mode gives the device's answers", "[ops][fallback]") {
  OpsFixture f;
  std::mt19937 rng(7);
  const host_array a = random_array(rng, {129, 65}, TRN_DTYPE_F32);
  const host_array b = random_array(rng, {65}, TRN_DTYPE_F32);
  auto run = [&](bool host_only) {
    f.configure(host_only ? TRN_OPS_CONFIG_HOST_ONLY : 0);
    DeviceTensor ta = f.tensor(TRN_DTYPE_F32, a), tb = f.tensor(TRN_DTYPE_F32, b),
                 t1 = f.tensor(TRN_DTYPE_F32, a.shape), t2 = f.tensor(TRN_DTYPE_BF16, a.shape);
    REQUIRE(trn_ops_binary(f.queue(), TRN_OPS_MUL, t1.get(), ta.get(), tb.get(), nullptr) ==
            TRN_SUCCESS);
    REQUIRE(trn_ops_unary(f.queue(), TRN_OPS_SILU, t2.get(), t1.get(), nullptr) == TRN_SUCCESS);
    return f.read(t2);
  };
  const host_array device = run(false);
  CHECK(fallback_count("silu") == 0);
  const host_array on_host = run(true);
  CHECK(fallback_count("silu") == 1);
  require_close(device, on_host, tolerance(TRN_DTYPE_BF16), "device vs host");
}

TEST_CASE("ops are ordered by their sync: waits before the first command, signals after the last",
          "[ops][sync]") {
  OpsFixture f;
  trn_sem_t gate = make_sem(f.device()), done = make_sem(f.device());
  DeviceTensor x = f.tensor(TRN_DTYPE_F32, host_array::full({4097}, 2.0)),
               y = f.tensor(TRN_DTYPE_F32, {4097});
  const trn_sem_point_t wait = {gate, 1}, signal = {done, 1};
  const trn_sync_t sync = {&wait, 1, &signal, 1};
  // Two launches (4096 + 1 elements) and, for f64, a host round trip: both wait for the gate.
  REQUIRE(trn_ops_unary(f.queue(), TRN_OPS_SQUARE, y.get(), x.get(), &sync) == TRN_SUCCESS);
  uint64_t value = 0;
  REQUIRE(trn_sem_query(done, &value) == TRN_SUCCESS);
  CHECK(value == 0);
  REQUIRE(trn_sem_signal(gate, 1) == TRN_SUCCESS);
  REQUIRE(trn_sem_wait(done, 1, 30'000'000'000ull) == TRN_SUCCESS);
  for (double v : f.read(y).data) REQUIRE(v == 4.0);
  trn_sem_destroy(gate);
  trn_sem_destroy(done);
}

TEST_CASE("bad arguments are refused with a message, and nothing is queued", "[ops][negative]") {
  OpsFixture f;
  DeviceTensor a = f.tensor(TRN_DTYPE_F32, {4, 5}), b = f.tensor(TRN_DTYPE_F32, {3, 5}),
               o = f.tensor(TRN_DTYPE_F32, {4, 5});
  CHECK(trn_ops_binary(f.queue(), TRN_OPS_ADD, o.get(), a.get(), b.get(), nullptr) ==
        TRN_ERROR_INVALID_ARGUMENT);
  CHECK(ops_error().find("do not broadcast") != std::string::npos);
  CHECK(trn_ops_binary(f.queue(), static_cast<trn_ops_binary_op_t>(99), o.get(), a.get(), a.get(),
                       nullptr) == TRN_ERROR_INVALID_ENUM);
  CHECK(trn_ops_unary(nullptr, TRN_OPS_EXP, o.get(), a.get(), nullptr) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_ops_unary(f.queue(), TRN_OPS_EXP, nullptr, a.get(), nullptr) == TRN_ERROR_NULL_POINTER);
  trn_ops_tensor_t past = a.t;
  past.offset = 8;  // 20 floats from byte 8 run past the 80-byte allocation
  CHECK(trn_ops_unary(f.queue(), TRN_OPS_EXP, o.get(), &past, nullptr) ==
        TRN_ERROR_INVALID_ARGUMENT);
  CHECK(ops_error().find("past the end") != std::string::npos);
  trn_ops_tensor_t negative = a.t;
  negative.strides[0] = -5;
  CHECK(trn_ops_unary(f.queue(), TRN_OPS_EXP, o.get(), &negative, nullptr) ==
        TRN_ERROR_INVALID_ARGUMENT);
  trn_ops_tensor_t bad_dtype = a.t;
  bad_dtype.dtype = static_cast<trn_dtype_t>(77);
  CHECK(trn_ops_unary(f.queue(), TRN_OPS_EXP, o.get(), &bad_dtype, nullptr) ==
        TRN_ERROR_INVALID_ENUM);
  DeviceTensor small = f.tensor(TRN_DTYPE_F32, {4});
  CHECK(trn_ops_unary(f.queue(), TRN_OPS_EXP, small.get(), a.get(), nullptr) ==
        TRN_ERROR_INVALID_ARGUMENT);
  CHECK(ops_error().find("trn_ops_unary") == 0);
  f.finish();
  uint32_t n = 0;
  REQUIRE(trn_ops_get_fallbacks(&n, nullptr) == TRN_SUCCESS);
  CHECK(n == 0);
  const trn_ops_cache_stats_t s = cache_stats();
  CHECK(s.builds == 0);
}

TEST_CASE("a bad sync, host memory or a misaligned view is refused before anything is queued",
          "[ops][negative]") {
  OpsFixture f;
  DeviceTensor a = f.tensor(TRN_DTYPE_F32, {4, 5}), o = f.tensor(TRN_DTYPE_F32, {5, 4});
  DeviceTensor ai = f.tensor(TRN_DTYPE_I32, {4, 5}), oi = f.tensor(TRN_DTYPE_I32, {4, 5});
  trn_ops_tensor_t transposed = a.t;  // staged by a strided copy before the kernel
  std::swap(transposed.shape[0], transposed.shape[1]);
  std::swap(transposed.strides[0], transposed.strides[1]);
  const trn_sem_point_t null_point{nullptr, 1};
  const trn_sync_t null_signal{nullptr, 0, &null_point, 1};
  const trn_sync_t missing_waits{nullptr, 2, nullptr, 0};
  // The queue's sequence numbers tell how many commands went in.
  auto queued = [&] {
    uint64_t seq = 0;
    REQUIRE(trn_queue_barrier(f.queue(), nullptr, &seq) == TRN_SUCCESS);
    return seq;
  };
  const uint64_t before = queued();
  // The host path (i32 arithmetic) queues five commands; the strided input's copy comes first.
  CHECK(trn_ops_binary(f.queue(), TRN_OPS_ADD, oi.get(), ai.get(), ai.get(), &null_signal) ==
        TRN_ERROR_INVALID_HANDLE);
  CHECK(ops_error().find("sync->signals[0]") != std::string::npos);
  CHECK(trn_ops_unary(f.queue(), TRN_OPS_NEG, o.get(), &transposed, &null_signal) ==
        TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_ops_unary(f.queue(), TRN_OPS_NEG, o.get(), &transposed, &missing_waits) ==
        TRN_ERROR_NULL_POINTER);
  CHECK(ops_error().find("sync->waits is NULL") != std::string::npos);
  CHECK(queued() == before + 1);  // only the probe's own barrier

  trn_pool_t host_pool = make_pool(f.device(), TRN_POOL_KIND_HOST);
  trn_mem_t host = alloc(host_pool, 80);
  trn_ops_tensor_t in_host{};
  const int64_t shape[2] = {4, 5};
  CHECK(trn_ops_tensor_init(&in_host, host, 0, TRN_DTYPE_F32, 2, shape) ==
        TRN_ERROR_INVALID_ARGUMENT);
  CHECK(ops_error().find("host memory") != std::string::npos);
  trn_mem_free(host);
  trn_pool_destroy(host_pool);

  trn_ops_tensor_t misaligned = a.t;
  misaligned.offset = 2;  // also past the end: the alignment is what is wrong first
  CHECK(trn_ops_unary(f.queue(), TRN_OPS_EXP, a.get(), &misaligned, nullptr) ==
        TRN_ERROR_INVALID_ARGUMENT);
  CHECK(ops_error().find("not a multiple of its element size") != std::string::npos);
  CHECK(queued() == before + 2);
}

TEST_CASE("a bf16 or f16 tensor is compared with a scalar in its own dtype, as PyTorch does",
          "[ops][binary]") {
  OpsFixture f;
  for (const trn_dtype_t dtype : {TRN_DTYPE_BF16, TRN_DTYPE_F16}) {
    INFO(trn_dtype_name(dtype));
    // 0.1 as the tensor holds it is not 0.1, but the scalar rounds to the same value.
    DeviceTensor x = f.tensor(dtype, host_array{{130}, std::vector<double>(130, 0.1)});
    DeviceTensor eq = f.tensor(TRN_DTYPE_U8, Shape{130}), lt = f.tensor(TRN_DTYPE_U8, Shape{130});
    REQUIRE(trn_ops_binary_scalar(f.queue(), TRN_OPS_EQ, eq.get(), x.get(), 0.1, 0, nullptr) ==
            TRN_SUCCESS);
    REQUIRE(trn_ops_binary_scalar(f.queue(), TRN_OPS_LT, lt.get(), x.get(), 0.1, 0, nullptr) ==
            TRN_SUCCESS);
    const host_array e = f.read(eq), l = f.read(lt);
    CHECK(std::count(e.data.begin(), e.data.end(), 1.0) == 130);
    CHECK(std::count(l.data.begin(), l.data.end(), 0.0) == 130);
  }
}

TEST_CASE("overlapping outputs are refused before anything is queued", "[ops][negative]") {
  OpsFixture f;
  DeviceTensor a = f.tensor(TRN_DTYPE_F32, {4, 5}), sq = f.tensor(TRN_DTYPE_F32, {5, 5});
  // An output that partly overlaps its input: the same memory 4 bytes on.
  trn_ops_tensor_t in = a.t, shifted = a.t;
  in.shape[0] = 3;
  shifted.shape[0] = 3;
  shifted.offset = 4;
  CHECK(trn_ops_unary(f.queue(), TRN_OPS_NEG, &shifted, &in, nullptr) ==
        TRN_ERROR_INVALID_ARGUMENT);
  CHECK(ops_error().find("partly overlaps the input") != std::string::npos);
  // An output that broadcasts (stride 0) would write one element many times.
  trn_ops_tensor_t spread = a.t;
  spread.strides[0] = 0;
  CHECK(trn_ops_unary(f.queue(), TRN_OPS_NEG, &spread, a.get(), nullptr) ==
        TRN_ERROR_INVALID_ARGUMENT);
  CHECK(ops_error().find("stride 0") != std::string::npos);
  // Two outputs in one place.
  DeviceTensor x = f.tensor(TRN_DTYPE_F32, {4, 8}), y = f.tensor(TRN_DTYPE_F32, {4, 8}),
               stats = f.tensor(TRN_DTYPE_F32, {4, 1});
  CHECK(trn_ops_layer_norm(f.queue(), y.get(), stats.get(), stats.get(), x.get(), nullptr, nullptr,
                           1, 1e-5, nullptr) == TRN_ERROR_INVALID_ARGUMENT);
  INFO(ops_error());
  CHECK(ops_error().find("overlap") != std::string::npos);
  // A matmul does not run in place.
  CHECK(trn_ops_matmul(f.queue(), sq.get(), sq.get(), sq.get(), 0, nullptr) ==
        TRN_ERROR_INVALID_ARGUMENT);
  CHECK(ops_error().find("does not run in place") != std::string::npos);
  // softmax and addmm check too: a shifted softmax output, an addmm output that is a row of its
  // bias' memory, and Adam state given twice.
  CHECK(trn_ops_softmax(f.queue(), &shifted, &in, -1, 0, nullptr) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(ops_error().find("partly overlaps the input") != std::string::npos);
  DeviceTensor a45 = f.tensor(TRN_DTYPE_F32, {4, 5}), b55 = f.tensor(TRN_DTYPE_F32, {5, 5});
  trn_ops_tensor_t bias_rows = sq.t, out_rows = sq.t;
  bias_rows.shape[0] = out_rows.shape[0] = 4;
  out_rows.offset = 4 * 5;  // one row on
  CHECK(trn_ops_addmm(f.queue(), &out_rows, &bias_rows, a45.get(), b55.get(), 1, 1, 0, nullptr) ==
        TRN_ERROR_INVALID_ARGUMENT);
  CHECK(ops_error().find("partly overlaps the input") != std::string::npos);
  DeviceTensor p = f.tensor(TRN_DTYPE_F32, {8}), g = f.tensor(TRN_DTYPE_F32, {8}),
               m = f.tensor(TRN_DTYPE_F32, {8});
  const trn_ops_adam_params_t adam{1e-3, 0.9, 0.999, 1e-8, 0.0, 0, 0, 0, 0};
  CHECK(trn_ops_adam_step(f.queue(), p.get(), g.get(), m.get(), m.get(), nullptr, 1, &adam,
                          nullptr) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(ops_error().find("overlap") != std::string::npos);
  // Interleaved views that share no element (two columns) are fine, and so is exactly in place.
  trn_ops_tensor_t col0 = a.t, col1 = a.t;
  col0.shape[1] = col1.shape[1] = 1;
  col1.offset = 4;
  CHECK(trn_ops_copy(f.queue(), &col1, &col0, nullptr) == TRN_SUCCESS);
  CHECK(trn_ops_unary(f.queue(), TRN_OPS_NEG, a.get(), a.get(), nullptr) == TRN_SUCCESS);
  f.finish();
}

TEST_CASE("elementwise ops work in place: the output may be one of the inputs", "[ops][binary]") {
  OpsFixture f;
  std::mt19937 rng(8);
  const host_array a = random_array(rng, {4097}, TRN_DTYPE_F32);
  const host_array b = random_array(rng, {4097}, TRN_DTYPE_F32);
  DeviceTensor ta = f.tensor(TRN_DTYPE_F32, a), tb = f.tensor(TRN_DTYPE_F32, b);
  // a += b, then a = relu(a), then a *= 3 (PyTorch's add_, relu_, mul_).
  REQUIRE(trn_ops_binary(f.queue(), TRN_OPS_ADD, ta.get(), ta.get(), tb.get(), nullptr) ==
          TRN_SUCCESS);
  REQUIRE(trn_ops_unary(f.queue(), TRN_OPS_RELU, ta.get(), ta.get(), nullptr) == TRN_SUCCESS);
  REQUIRE(trn_ops_binary_scalar(f.queue(), TRN_OPS_MUL, ta.get(), ta.get(), 3.0, 0, nullptr) ==
          TRN_SUCCESS);
  host_array want = host::binary(host::Binary::kAdd, a, b);
  want = host::unary(host::Unary::kRelu, want);
  want = host::binary(host::Binary::kMul, want, host_array::full({}, 3.0));
  require_close(f.read(ta), want, 1e-6, "in place");
  CHECK(fallback_count("add") == 0);
}

TEST_CASE("strided inputs are made contiguous on the device, then freed in queue order",
          "[ops][strided]") {
  OpsFixture f;
  std::mt19937 rng(9);
  const host_array a = random_array(rng, {33, 130}, TRN_DTYPE_F32);
  const host_array b = random_array(rng, {130, 33}, TRN_DTYPE_F32);
  DeviceTensor ta = f.tensor(TRN_DTYPE_F32, a), tb = f.tensor(TRN_DTYPE_F32, b);
  trn_ops_tensor_t at = ta.t;  // a^T: [130, 33], strides [1, 130]
  at.shape[0] = 130, at.shape[1] = 33, at.strides[0] = 1, at.strides[1] = 130;
  trn_mem_stats_t before = TRN_MEM_STATS_INIT;
  REQUIRE(trn_device_get_memory_stats(f.device(), 0, &before) == TRN_SUCCESS);
  trn_sem_t gate = make_sem(f.device()), done = make_sem(f.device());
  const trn_sem_point_t wait = {gate, 1}, signal = {done, 1};
  const trn_sync_t sync = {&wait, 1, &signal, 1};
  DeviceTensor sum = f.tensor(TRN_DTYPE_F32, {130, 33}), prod = f.tensor(TRN_DTYPE_F32, {130, 130});
  // a^T + b, with the op's sync: the staging copy waits for the gate, the op signals `done`.
  REQUIRE(trn_ops_binary(f.queue(), TRN_OPS_ADD, sum.get(), &at, tb.get(), &sync) == TRN_SUCCESS);
  uint64_t value = 0;
  REQUIRE(trn_sem_query(done, &value) == TRN_SUCCESS);
  CHECK(value == 0);
  REQUIRE(trn_sem_signal(gate, 1) == TRN_SUCCESS);
  REQUIRE(trn_sem_wait(done, 1, 30'000'000'000ull) == TRN_SUCCESS);
  host_array a_t = host_array::zeros({130, 33});
  for (int64_t i = 0; i < 130; ++i)
    for (int64_t j = 0; j < 33; ++j) a_t.data[i * 33 + j] = a.data[j * 130 + i];
  require_close(f.read(sum), host::binary(host::Binary::kAdd, a_t, b), 1e-6, "a^T + b");
  // a^T @ a through a transposed view (not the flag), and a softmax of it.
  REQUIRE(trn_ops_matmul(f.queue(), prod.get(), &at, ta.get(), 0, nullptr) == TRN_SUCCESS);
  require_close(f.read(prod), host::matmul(a_t, a, false, false), 1e-4, "a^T @ a");
  CHECK(fallback_count("add") == 0);
  CHECK(fallback_count("matmul") == 0);
  // The scratch copies went back to the pool once the queue passed the ops.
  f.finish();
  trn_mem_stats_t after = TRN_MEM_STATS_INIT;
  REQUIRE(trn_device_get_memory_stats(f.device(), 0, &after) == TRN_SUCCESS);
  CHECK(after.by_category[TRN_MEM_CATEGORY_SCRATCH].allocation_count ==
        before.by_category[TRN_MEM_CATEGORY_SCRATCH].allocation_count);
  trn_sem_destroy(gate);
  trn_sem_destroy(done);
}

TEST_CASE("an op that runs out of host memory returns the result, whenever it happens",
          "[ops][negative]") {
  // Each allocation of a first-use op fails in turn (one, then all that follow): the op says out
  // of host memory or succeeds with the right answer; nothing escapes, and the op works after.
  OpsFixture f;
  const Shape shape{3, 129};
  std::mt19937 rng(7);
  const host_array x = random_array(rng, shape, TRN_DTYPE_F32, -3.0, 3.0);
  host_array want = host::unary(static_cast<host::Unary>(TRN_OPS_TANH - 1), x);
  for (const uint64_t failures : {uint64_t{1}, uint64_t{1'000'000}}) {
    bool succeeded = false, refused = false;
    for (uint64_t allowed = 0; allowed < 5000 && !succeeded; allowed += 1 + allowed / 8) {
      INFO("allocations allowed: " << allowed << ", failing " << failures);
      DeviceTensor tx = f.tensor(TRN_DTYPE_F32, x), ty = f.tensor(TRN_DTYPE_F32, shape);
      trn_result_t r = TRN_SUCCESS;
      {
        AllocationFailure failure(allowed, failures);
        r = trn_ops_unary(f.queue(), TRN_OPS_TANH, ty.get(), tx.get(), nullptr);
      }
      INFO(ops_error());
      REQUIRE((r == TRN_SUCCESS || r == TRN_ERROR_OUT_OF_HOST_MEMORY));
      succeeded = r == TRN_SUCCESS;
      refused = refused || r == TRN_ERROR_OUT_OF_HOST_MEMORY;
      if (succeeded) require_close(f.read(ty), want, tolerance(TRN_DTYPE_F32) * 4, "tanh");
      trn_queue_finish(f.queue(), 30'000'000'000ull);
      trn_queue_reset(f.queue());
    }
    CHECK(succeeded);
    CHECK(refused);  // the failures reached the op
  }
}
