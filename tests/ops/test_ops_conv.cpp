// conv2d and its backward on the simulated device against the float64 host reference: strides,
// padding, dilation, bias, f32 and bf16, every combination of wanted gradients, nothing recorded
// as a fallback; and a grouped convolution (no device kernel) still right through the host.
#include "ops_fixture.hpp"

using namespace trn::test;
namespace host = trn::ops::host;

namespace {

struct Case {
  Shape x, w;
  trn_ops_conv2d_params_t params;
  bool bias;
};

const Case kCases[] = {
    {{2, 3, 5, 5}, {4, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, true},
    {{1, 129, 9, 7}, {3, 129, 2, 5}, {{2, 1}, {2, 1}, {1, 2}, 1}, false},
    {{2, 5, 17, 1}, {130, 5, 3, 1}, {{2, 1}, {0, 1}, {2, 1}, 1}, true},
};

host::Conv2dParams host_params(const trn_ops_conv2d_params_t &p) {
  host::Conv2dParams h;
  for (int i = 0; i < 2; ++i) {
    h.stride[i] = p.stride[i] ? p.stride[i] : 1;
    h.padding[i] = p.padding[i];
    h.dilation[i] = p.dilation[i] ? p.dilation[i] : 1;
  }
  h.groups = p.groups ? p.groups : 1;
  return h;
}

// fp32 sums of `terms` products of values up to 1, then one rounding to d.
double conv_tolerance(trn_dtype_t d, int64_t terms) {
  return std::max(tolerance(d), 2e-7 * static_cast<double>(terms));
}

}  // namespace

TEST_CASE("conv2d runs on the device and matches the float64 reference", "[ops][conv]") {
  OpsFixture f;
  std::mt19937 rng(7);
  const trn_dtype_t dtype = GENERATE(TRN_DTYPE_F32, TRN_DTYPE_BF16);
  for (const Case &c : kCases) {
    const host::Conv2dParams p = host_params(c.params);
    const host_array x = random_array(rng, c.x, dtype, -1, 1),
                     w = random_array(rng, c.w, dtype, -1, 1),
                     b = random_array(rng, {c.w[0]}, dtype, -1, 1);
    const host_array want = host::conv2d(x, w, c.bias ? &b : nullptr, p);
    DeviceTensor tx = f.tensor(dtype, x), tw = f.tensor(dtype, w), tb = f.tensor(dtype, b),
                 to = f.tensor(dtype, want.shape);
    INFO(trn_dtype_name(dtype) << " x " << c.x[1] << "x" << c.x[2] << "x" << c.x[3] << ": "
                               << ops_error());
    REQUIRE(trn_ops_conv2d(f.queue(), to.get(), tx.get(), tw.get(), c.bias ? tb.get() : nullptr,
                           &c.params, nullptr) == TRN_SUCCESS);
    require_close(f.read(to), want, conv_tolerance(dtype, c.w[1] * c.w[2] * c.w[3]), "conv2d");
  }
  CHECK(fallback_count("conv2d") == 0);
}

TEST_CASE("conv2d_backward runs on the device and matches the float64 reference", "[ops][conv]") {
  OpsFixture f;
  std::mt19937 rng(8);
  const trn_dtype_t dtype = GENERATE(TRN_DTYPE_F32, TRN_DTYPE_BF16);
  for (const Case &c : kCases)
    for (int wanted : {7, 1, 6}) {  // all three; grad_x alone; grad_w and grad_bias
      const host::Conv2dParams p = host_params(c.params);
      const host_array x = random_array(rng, c.x, dtype, -1, 1),
                       w = random_array(rng, c.w, dtype, -1, 1);
      const Shape out_shape = host::conv2d(x, w, nullptr, p).shape;
      const host_array g = random_array(rng, out_shape, dtype, -1, 1);
      const host::Conv2dGrads want = host::conv2d_backward(g, x, w, true, p);
      DeviceTensor tg = f.tensor(dtype, g), tx = f.tensor(dtype, x), tw = f.tensor(dtype, w),
                   tgx = f.tensor(dtype, c.x), tgw = f.tensor(dtype, c.w),
                   tgb = f.tensor(TRN_DTYPE_F32, Shape{c.w[0]});
      INFO(trn_dtype_name(dtype) << " wanted " << wanted << ": " << ops_error());
      REQUIRE(trn_ops_conv2d_backward(f.queue(), wanted & 1 ? tgx.get() : nullptr,
                                      wanted & 2 ? tgw.get() : nullptr,
                                      wanted & 4 ? tgb.get() : nullptr, tg.get(), tx.get(),
                                      tw.get(), &c.params, nullptr) == TRN_SUCCESS);
      const int64_t pixels = out_shape[0] * out_shape[2] * out_shape[3];
      if (wanted & 1)
        require_close(f.read(tgx), want.grad_x, conv_tolerance(dtype, c.w[0] * c.w[2] * c.w[3]),
                      "grad_x");
      if (wanted & 2)
        require_close(f.read(tgw), want.grad_w, conv_tolerance(dtype, pixels), "grad_w");
      if (wanted & 4)
        require_close(f.read(tgb), want.grad_bias, conv_tolerance(TRN_DTYPE_F32, pixels),
                      "grad_bias");
    }
  CHECK(fallback_count("conv2d_backward") == 0);
}

TEST_CASE("a grouped conv2d falls back to the host and is still right", "[ops][conv]") {
  OpsFixture f;
  std::mt19937 rng(9);
  const trn_ops_conv2d_params_t params = {{1, 1}, {1, 1}, {1, 1}, 2};
  const host::Conv2dParams p = host_params(params);
  const host_array x = random_array(rng, {2, 4, 5, 6}, TRN_DTYPE_F32, -1, 1),
                   w = random_array(rng, {6, 2, 3, 3}, TRN_DTYPE_F32, -1, 1),
                   b = random_array(rng, {6}, TRN_DTYPE_F32, -1, 1);
  const host_array want = host::conv2d(x, w, &b, p);
  DeviceTensor tx = f.tensor(TRN_DTYPE_F32, x), tw = f.tensor(TRN_DTYPE_F32, w),
               tb = f.tensor(TRN_DTYPE_F32, b), to = f.tensor(TRN_DTYPE_F32, want.shape);
  REQUIRE(trn_ops_conv2d(f.queue(), to.get(), tx.get(), tw.get(), tb.get(), &params, nullptr) ==
          TRN_SUCCESS);
  require_close(f.read(to), want, tolerance(TRN_DTYPE_F32), "grouped conv2d");
  const host_array g = random_array(rng, want.shape, TRN_DTYPE_F32, -1, 1);
  const host::Conv2dGrads grads = host::conv2d_backward(g, x, w, true, p);
  DeviceTensor tg = f.tensor(TRN_DTYPE_F32, g), tgx = f.tensor(TRN_DTYPE_F32, x.shape),
               tgw = f.tensor(TRN_DTYPE_F32, w.shape), tgb = f.tensor(TRN_DTYPE_F32, Shape{6});
  REQUIRE(trn_ops_conv2d_backward(f.queue(), tgx.get(), tgw.get(), tgb.get(), tg.get(), tx.get(),
                                  tw.get(), &params, nullptr) == TRN_SUCCESS);
  require_close(f.read(tgx), grads.grad_x, tolerance(TRN_DTYPE_F32), "grouped grad_x");
  require_close(f.read(tgw), grads.grad_w, tolerance(TRN_DTYPE_F32), "grouped grad_w");
  require_close(f.read(tgb), grads.grad_bias, tolerance(TRN_DTYPE_F32), "grouped grad_bias");
  CHECK(fallback_count("conv2d") == 1);
  CHECK(fallback_count("conv2d_backward") == 1);
  // The reason names the groups.
  uint32_t n = 0;
  REQUIRE(trn_ops_get_fallbacks(&n, nullptr) == TRN_SUCCESS);
  std::vector<trn_ops_fallback_t> list(n, TRN_OPS_FALLBACK_INIT);
  REQUIRE(trn_ops_get_fallbacks(&n, list.data()) == TRN_SUCCESS);
  for (const trn_ops_fallback_t &fb : list)
    CHECK_THAT(std::string(fb.reason), Catch::Contains("groups = 2"));
}
