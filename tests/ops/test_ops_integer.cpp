// Integer ops are exact: int64 values beyond 2^53 (where float64 rounds) come out bit for bit,
// and overflow wraps around as PyTorch's integer kernels and casts do.
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "ops_fixture.hpp"

using namespace trn::test;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kBig = (int64_t{1} << 60) + 1;  // float64 would round it to 2^60

template <typename T>
void write_values(const DeviceTensor &t, const std::vector<T> &values) {
  REQUIRE(trn_dtype_size(t.t.dtype) == sizeof(T));
  REQUIRE(trn_mem_write(t.mem, t.t.offset, values.data(), values.size() * sizeof(T)) ==
          TRN_SUCCESS);
}

template <typename T>
std::vector<T> read_values(OpsFixture &f, const DeviceTensor &t) {
  f.finish();
  std::vector<T> out(trn_ops_tensor_numel(&t.t));
  REQUIRE(trn_dtype_size(t.t.dtype) == sizeof(T));
  REQUIRE(trn_mem_read(t.mem, t.t.offset, out.data(), out.size() * sizeof(T)) == TRN_SUCCESS);
  return out;
}

DeviceTensor i64_tensor(OpsFixture &f, const Shape &shape, const std::vector<int64_t> &values) {
  DeviceTensor t = f.tensor(TRN_DTYPE_I64, shape);
  write_values(t, values);
  return t;
}

}  // namespace

TEST_CASE("i64 arithmetic and comparisons are exact beyond 2^53 and wrap on overflow",
          "[ops][integer]") {
  OpsFixture f;
  const std::vector<int64_t> a = {kBig, -kBig, kMax, kMin, 7, -3};
  const std::vector<int64_t> b = {3, kBig - 1, 1, -1, kBig, kBig + 2};
  DeviceTensor ta = i64_tensor(f, {6}, a), tb = i64_tensor(f, {6}, b);
  DeviceTensor out = f.tensor(TRN_DTYPE_I64, Shape{6});
  auto run = [&](trn_ops_binary_op_t op) {
    REQUIRE(trn_ops_binary(f.queue(), op, out.get(), ta.get(), tb.get(), nullptr) == TRN_SUCCESS);
    return read_values<int64_t>(f, out);
  };
  auto wrap = [](uint64_t v) { return static_cast<int64_t>(v); };
  CHECK(run(TRN_OPS_ADD) == std::vector<int64_t>{kBig + 3, -1, kMin, kMax, kBig + 7, kBig - 1});
  CHECK(run(TRN_OPS_SUB) == std::vector<int64_t>{kBig - 3, wrap(0ull - 2 * uint64_t(kBig) + 1),
                                                 kMax - 1, kMin + 1, 7 - kBig, -3 - kBig - 2});
  CHECK(run(TRN_OPS_MUL) == std::vector<int64_t>{wrap(uint64_t(kBig) * 3),
                                                 wrap(uint64_t(-kBig) * uint64_t(kBig - 1)), kMax,
                                                 kMin, wrap(uint64_t(kBig) * 7),
                                                 wrap(uint64_t(-3) * uint64_t(kBig + 2))});
  CHECK(run(TRN_OPS_MAXIMUM) == std::vector<int64_t>{kBig, kBig - 1, kMax, -1, kBig, kBig + 2});
  CHECK(run(TRN_OPS_MINIMUM) == std::vector<int64_t>{3, -kBig, 1, kMin, 7, -3});
  // pow by squaring, wrapping; a negative exponent gives 0 but for bases 1 and -1.
  DeviceTensor base = i64_tensor(f, {6}, {3, int64_t{1} << 30, -2, 1, -1, 5});
  DeviceTensor exponent = i64_tensor(f, {6}, {39, 3, 63, -7, -3, -1});
  REQUIRE(trn_ops_binary(f.queue(), TRN_OPS_POW, out.get(), base.get(), exponent.get(), nullptr) ==
          TRN_SUCCESS);
  CHECK(read_values<int64_t>(f, out) ==
        std::vector<int64_t>{4052555153018976267, 0, kMin, 1, -1, 0});
  // kBig and kBig - 1 are one float64: compared as float64 they would be equal.
  DeviceTensor near = i64_tensor(f, {6}, {kBig - 1, kBig, kBig + 1, kBig, kMax - 1, kMax});
  DeviceTensor same = i64_tensor(f, {6}, {kBig, kBig, kBig, kBig, kMax, kMax});
  DeviceTensor flags = f.tensor(TRN_DTYPE_U8, Shape{6});
  REQUIRE(trn_ops_binary(f.queue(), TRN_OPS_EQ, flags.get(), near.get(), same.get(), nullptr) ==
          TRN_SUCCESS);
  CHECK(read_values<uint8_t>(f, flags) == std::vector<uint8_t>{0, 1, 0, 1, 0, 1});
  REQUIRE(trn_ops_binary(f.queue(), TRN_OPS_LT, flags.get(), near.get(), same.get(), nullptr) ==
          TRN_SUCCESS);
  CHECK(read_values<uint8_t>(f, flags) == std::vector<uint8_t>{1, 0, 0, 0, 1, 0});
  // add and sub ran on the device (16-bit limbs with a carry); mul on the host, recorded.
  CHECK(fallback_count("add") == 0);
  CHECK(fallback_count("sub") == 0);
  CHECK(fallback_count("mul") == 1);
}

TEST_CASE("int32 and int64 add and sub run on the device, exact and wrapping, in place too",
          "[ops][integer]") {
  OpsFixture f;
  std::mt19937_64 rng(5);
  const int64_t n = 300;  // 128 partitions and a remainder row: two launches
  std::vector<int64_t> a(n), b(n);
  for (int64_t i = 0; i < n; ++i)
    a[i] = static_cast<int64_t>(rng()), b[i] = static_cast<int64_t>(rng());
  a[0] = kMax, b[0] = 1;     // wraps to kMin
  a[1] = -1, b[1] = -1;      // borrows through every limb
  a[2] = 0xffff, b[2] = 1;   // a carry out of the lowest limb
  a[3] = kMin, b[3] = kMax;  // -1
  auto wrap_add = [](int64_t x, int64_t y) {
    return static_cast<int64_t>(uint64_t(x) + uint64_t(y));
  };
  auto wrap_sub = [](int64_t x, int64_t y) {
    return static_cast<int64_t>(uint64_t(x) - uint64_t(y));
  };
  DeviceTensor ta = i64_tensor(f, {n}, a), tb = i64_tensor(f, {n}, b);
  DeviceTensor out = f.tensor(TRN_DTYPE_I64, Shape{n});
  std::vector<int64_t> sum(n), diff(n), plus(n), minus(n);
  const int64_t s = (int64_t{1} << 40) + 12345;
  for (int64_t i = 0; i < n; ++i)
    sum[i] = wrap_add(a[i], b[i]), diff[i] = wrap_sub(a[i], b[i]), plus[i] = wrap_add(a[i], -7),
    minus[i] = wrap_sub(a[i], s);
  REQUIRE(trn_ops_binary(f.queue(), TRN_OPS_ADD, out.get(), ta.get(), tb.get(), nullptr) ==
          TRN_SUCCESS);
  CHECK(read_values<int64_t>(f, out) == sum);
  REQUIRE(trn_ops_binary(f.queue(), TRN_OPS_SUB, out.get(), ta.get(), tb.get(), nullptr) ==
          TRN_SUCCESS);
  CHECK(read_values<int64_t>(f, out) == diff);
  REQUIRE(trn_ops_binary_scalar(f.queue(), TRN_OPS_ADD, out.get(), ta.get(), -7.0, 1, nullptr) ==
          TRN_SUCCESS);
  CHECK(read_values<int64_t>(f, out) == plus);
  // In place: out is a (BatchNorm's num_batches_tracked += 1 is this form).
  REQUIRE(trn_ops_binary_scalar(f.queue(), TRN_OPS_SUB, ta.get(), ta.get(), double(s), 0,
                                nullptr) == TRN_SUCCESS);
  CHECK(read_values<int64_t>(f, ta) == minus);

  // int32: two limbs, wrapping at 2^32; a scalar beyond int32 wraps as PyTorch's does.
  const std::vector<int32_t> x = {INT32_MAX, INT32_MIN, -1, 65535, 123456789, -2};
  const std::vector<int32_t> y = {1, -1, -1, 1, 987654321, 16777217};
  DeviceTensor tx = f.tensor(TRN_DTYPE_I32, Shape{6}), ty = f.tensor(TRN_DTYPE_I32, Shape{6}),
               o32 = f.tensor(TRN_DTYPE_I32, Shape{6});
  write_values(tx, x);
  write_values(ty, y);
  REQUIRE(trn_ops_binary(f.queue(), TRN_OPS_ADD, o32.get(), tx.get(), ty.get(), nullptr) ==
          TRN_SUCCESS);
  std::vector<int32_t> want(6);
  for (size_t i = 0; i < 6; ++i) want[i] = static_cast<int32_t>(uint32_t(x[i]) + uint32_t(y[i]));
  CHECK(read_values<int32_t>(f, o32) == want);
  REQUIRE(trn_ops_binary(f.queue(), TRN_OPS_SUB, o32.get(), tx.get(), ty.get(), nullptr) ==
          TRN_SUCCESS);
  for (size_t i = 0; i < 6; ++i) want[i] = static_cast<int32_t>(uint32_t(x[i]) - uint32_t(y[i]));
  CHECK(read_values<int32_t>(f, o32) == want);
  REQUIRE(trn_ops_binary_scalar(f.queue(), TRN_OPS_ADD, o32.get(), tx.get(), 0x1p32 + 5, 0,
                                nullptr) == TRN_SUCCESS);
  for (size_t i = 0; i < 6; ++i) want[i] = static_cast<int32_t>(uint32_t(x[i]) + 5u);
  CHECK(read_values<int32_t>(f, o32) == want);
  CHECK(fallback_count("add") == 0);
  CHECK(fallback_count("sub") == 0);
  CHECK(fallback_count("add_scalar") == 0);
  CHECK(fallback_count("sub_scalar") == 0);
}

TEST_CASE("int64 arange and fill run on the device where fp32 holds the values exactly",
          "[ops][integer]") {
  OpsFixture f;
  DeviceTensor out = f.tensor(TRN_DTYPE_I64, Shape{300});
  REQUIRE(trn_ops_arange(f.queue(), out.get(), -150.0, 3.0, nullptr) == TRN_SUCCESS);
  std::vector<int64_t> want(300);
  for (int64_t i = 0; i < 300; ++i) want[i] = -150 + 3 * i;
  CHECK(read_values<int64_t>(f, out) == want);
  REQUIRE(trn_ops_fill(f.queue(), out.get(), -16777216.0, nullptr) == TRN_SUCCESS);
  CHECK(read_values<int64_t>(f, out) == std::vector<int64_t>(300, -16777216));
  CHECK(fallback_count("arange") == 0);
  CHECK(fallback_count("fill") == 0);
  // Beyond 2^24 fp32 would round: the host computes it, recorded.
  const int64_t beyond = (int64_t{1} << 40) + 1;
  REQUIRE(trn_ops_fill(f.queue(), out.get(), double(beyond), nullptr) == TRN_SUCCESS);
  CHECK(read_values<int64_t>(f, out) == std::vector<int64_t>(300, beyond));
  CHECK(fallback_count("fill") == 1);
}

TEST_CASE("i64 ops broadcast, take integer scalars exactly and keep unary results exact",
          "[ops][integer]") {
  OpsFixture f;
  DeviceTensor rows = i64_tensor(f, {2, 1}, {kBig, -kBig});
  DeviceTensor cols = i64_tensor(f, {1, 3}, {0, 1, 2});
  DeviceTensor grid = f.tensor(TRN_DTYPE_I64, Shape{2, 3});
  REQUIRE(trn_ops_binary(f.queue(), TRN_OPS_ADD, grid.get(), rows.get(), cols.get(), nullptr) ==
          TRN_SUCCESS);
  CHECK(read_values<int64_t>(f, grid) ==
        std::vector<int64_t>{kBig, kBig + 1, kBig + 2, -kBig, -kBig + 1, -kBig + 2});

  DeviceTensor x = i64_tensor(f, {4}, {kBig, kMin, -5, kMax});
  DeviceTensor out = f.tensor(TRN_DTYPE_I64, Shape{4});
  REQUIRE(trn_ops_binary_scalar(f.queue(), TRN_OPS_SUB, out.get(), x.get(), 3.0, 1, nullptr) ==
          TRN_SUCCESS);  // 3 - x
  CHECK(read_values<int64_t>(f, out) == std::vector<int64_t>{3 - kBig, kMin + 3, 8, kMin + 4});
  REQUIRE(trn_ops_binary_scalar(f.queue(), TRN_OPS_ADD, out.get(), x.get(), 1.0, 0, nullptr) ==
          TRN_SUCCESS);
  CHECK(read_values<int64_t>(f, out) == std::vector<int64_t>{kBig + 1, kMin + 1, -4, kMin});

  auto unary = [&](trn_ops_unary_op_t op) {
    REQUIRE(trn_ops_unary(f.queue(), op, out.get(), x.get(), nullptr) == TRN_SUCCESS);
    return read_values<int64_t>(f, out);
  };
  CHECK(unary(TRN_OPS_NEG) == std::vector<int64_t>{-kBig, kMin, 5, -kMax});
  CHECK(unary(TRN_OPS_ABS) == std::vector<int64_t>{kBig, kMin, 5, kMax});  // abs(min) wraps
  CHECK(unary(TRN_OPS_RELU) == std::vector<int64_t>{kBig, 0, 0, kMax});
  const auto square = unary(TRN_OPS_SQUARE);
  CHECK(square[2] == 25);
  CHECK(square[0] == static_cast<int64_t>(uint64_t(kBig) * uint64_t(kBig)));

  DeviceTensor cond = f.tensor(TRN_DTYPE_U8, Shape{4});
  write_values<uint8_t>(cond, {1, 0, 0, 1});
  DeviceTensor other = i64_tensor(f, {1}, {kBig + 2});
  REQUIRE(trn_ops_where(f.queue(), out.get(), cond.get(), x.get(), other.get(), nullptr) ==
          TRN_SUCCESS);
  CHECK(read_values<int64_t>(f, out) == std::vector<int64_t>{kBig, kBig + 2, kBig + 2, kMax});
}

TEST_CASE("i64 sums, extremes and their indices are exact over any dims", "[ops][integer]") {
  OpsFixture f;
  // [2, 3, 2]: values one apart beyond 2^53, which float64 cannot tell apart.
  const std::vector<int64_t> v = {kBig,  kBig + 1,  kBig + 2, kBig - 1, kBig, kBig,
                                  -kBig, -kBig - 1, kBig + 3, 5,        kMax, 1};
  DeviceTensor x = i64_tensor(f, {2, 3, 2}, v);
  auto reduce = [&](trn_ops_reduce_op_t op, const std::vector<int64_t> &dims, const Shape &shape,
                    int keepdim = 0) {
    DeviceTensor out = f.tensor(TRN_DTYPE_I64, shape);
    REQUIRE(trn_ops_reduce(f.queue(), op, out.get(), x.get(), dims.data(),
                           static_cast<uint32_t>(dims.size()), keepdim, nullptr) == TRN_SUCCESS);
    return read_values<int64_t>(f, out);
  };
  // Over the middle dim (the host path's own layout).
  CHECK(reduce(TRN_OPS_SUM, {1}, {2, 2}) ==
        std::vector<int64_t>{3 * kBig + 2, 3 * kBig, static_cast<int64_t>(uint64_t(kMax) + 3),
                             5 - kBig});  // kMax + 3 wraps
  CHECK(reduce(TRN_OPS_MAX, {1}, {2, 2}) == std::vector<int64_t>{kBig + 2, kBig + 1, kMax, 5});
  CHECK(reduce(TRN_OPS_MIN, {1}, {2, 1, 2}, 1) ==
        std::vector<int64_t>{kBig, kBig - 1, -kBig, -kBig - 1});
  CHECK(reduce(TRN_OPS_ARGMAX, {1}, {2, 2}) == std::vector<int64_t>{1, 0, 2, 1});
  CHECK(reduce(TRN_OPS_ARGMIN, {2}, {2, 3}) == std::vector<int64_t>{0, 1, 0, 1, 1, 1});
  // Everything: the sum wraps past INT64_MAX as PyTorch's does.
  uint64_t total = 0;
  for (int64_t e : v) total += static_cast<uint64_t>(e);
  CHECK(reduce(TRN_OPS_SUM, {}, {}) == std::vector<int64_t>{static_cast<int64_t>(total)});
  CHECK(fallback_count("sum") == 2);
}

TEST_CASE("integer casts keep every bit that fits and wrap the rest, views included",
          "[ops][integer]") {
  OpsFixture f;
  DeviceTensor x = i64_tensor(f, {2, 3}, {kBig, -1, 300, (int64_t{1} << 31), -129, kMax});
  DeviceTensor i32 = f.tensor(TRN_DTYPE_I32, Shape{2, 3});
  REQUIRE(trn_ops_copy(f.queue(), i32.get(), x.get(), nullptr) == TRN_SUCCESS);
  CHECK(read_values<int32_t>(f, i32) ==
        std::vector<int32_t>{1, -1, 300, std::numeric_limits<int32_t>::min(), -129, -1});
  DeviceTensor u8 = f.tensor(TRN_DTYPE_U8, Shape{2, 3});
  REQUIRE(trn_ops_copy(f.queue(), u8.get(), x.get(), nullptr) == TRN_SUCCESS);
  CHECK(read_values<uint8_t>(f, u8) == std::vector<uint8_t>{1, 255, 44, 0, 127, 255});
  // i32 arithmetic wraps too (2^31 - 1 + 1), and widening back to i64 sign-extends.
  DeviceTensor one = f.tensor(TRN_DTYPE_I32, Shape{1});
  write_values<int32_t>(one, {1});
  DeviceTensor top = f.tensor(TRN_DTYPE_I32, Shape{1}), sum = f.tensor(TRN_DTYPE_I32, Shape{1});
  write_values<int32_t>(top, {std::numeric_limits<int32_t>::max()});
  REQUIRE(trn_ops_binary(f.queue(), TRN_OPS_ADD, sum.get(), top.get(), one.get(), nullptr) ==
          TRN_SUCCESS);
  CHECK(read_values<int32_t>(f, sum) == std::vector<int32_t>{std::numeric_limits<int32_t>::min()});
  DeviceTensor wide = f.tensor(TRN_DTYPE_I64, Shape{2, 3});
  REQUIRE(trn_ops_copy(f.queue(), wide.get(), i32.get(), nullptr) == TRN_SUCCESS);
  CHECK(read_values<int64_t>(f, wide) ==
        std::vector<int64_t>{1, -1, 300, std::numeric_limits<int32_t>::min(), -129, -1});
  // A transposed view cast to i32: the strided path, still exact.
  trn_ops_tensor_t xt = x.t;
  std::swap(xt.shape[0], xt.shape[1]);
  std::swap(xt.strides[0], xt.strides[1]);
  DeviceTensor t32 = f.tensor(TRN_DTYPE_I32, Shape{3, 2});
  REQUIRE(trn_ops_copy(f.queue(), t32.get(), &xt, nullptr) == TRN_SUCCESS);
  CHECK(read_values<int32_t>(f, t32) ==
        std::vector<int32_t>{1, std::numeric_limits<int32_t>::min(), -1, -129, 300, -1});
}

TEST_CASE("an int64 view copies on the device as its int32 word pairs, every bit kept",
          "[ops][integer]") {
  OpsFixture f;
  DeviceTensor x = i64_tensor(f, {2, 3}, {kBig, -1, 300, kMin, -129, kMax});
  trn_ops_tensor_t xt = x.t;  // a transpose: the DMA engines' strided path
  std::swap(xt.shape[0], xt.shape[1]);
  std::swap(xt.strides[0], xt.strides[1]);
  DeviceTensor t64 = f.tensor(TRN_DTYPE_I64, Shape{3, 2});
  REQUIRE(trn_ops_copy(f.queue(), t64.get(), &xt, nullptr) == TRN_SUCCESS);
  CHECK(read_values<int64_t>(f, t64) == std::vector<int64_t>{kBig, kMin, -1, -129, 300, kMax});
  // A broadcast row into a strided output (every other column of a [2, 6]).
  DeviceTensor wide = i64_tensor(f, {2, 6}, std::vector<int64_t>(12, 7));
  trn_ops_tensor_t every_other = wide.t;
  every_other.shape[1] = 3;
  every_other.strides[1] = 2;
  trn_ops_tensor_t row = x.t;
  row.shape[0] = 1;
  REQUIRE(trn_ops_copy(f.queue(), &every_other, &row, nullptr) == TRN_SUCCESS);
  CHECK(read_values<int64_t>(f, wide) ==
        std::vector<int64_t>{kBig, 7, -1, 7, 300, 7, kBig, 7, -1, 7, 300, 7});
  CHECK(fallback_count("copy") == 0);
}

TEST_CASE("integer tensors with a float operand or result keep the float path", "[ops][integer]") {
  OpsFixture f;
  DeviceTensor x = i64_tensor(f, {3}, {4, -6, 1});
  // A fractional scalar makes the result a float's: 4 * 0.5 into f32 is 2, not 0.
  DeviceTensor half = f.tensor(TRN_DTYPE_F32, Shape{3});
  REQUIRE(trn_ops_binary_scalar(f.queue(), TRN_OPS_MUL, half.get(), x.get(), 0.5, 0, nullptr) ==
          TRN_SUCCESS);
  CHECK(read_values<float>(f, half) == std::vector<float>{2.0f, -3.0f, 0.5f});
  // Division of integers is true division.
  DeviceTensor y = i64_tensor(f, {3}, {8, 4, 4});
  REQUIRE(trn_ops_binary(f.queue(), TRN_OPS_DIV, half.get(), x.get(), y.get(), nullptr) ==
          TRN_SUCCESS);
  CHECK(read_values<float>(f, half) == std::vector<float>{0.5f, -1.5f, 0.25f});
  // A mean has no integer form: its value (truncated into an integer output) comes from float64.
  DeviceTensor mean = f.tensor(TRN_DTYPE_I64, Shape{});
  REQUIRE(trn_ops_reduce(f.queue(), TRN_OPS_MEAN, mean.get(), y.get(), nullptr, 0, 0, nullptr) ==
          TRN_SUCCESS);
  CHECK(read_values<int64_t>(f, mean) == std::vector<int64_t>{5});
  // Bad arguments are still refused before anything runs.
  DeviceTensor wrong = f.tensor(TRN_DTYPE_I64, Shape{4});
  CHECK(trn_ops_binary(f.queue(), TRN_OPS_ADD, wrong.get(), x.get(), y.get(), nullptr) ==
        TRN_ERROR_INVALID_ARGUMENT);
  CHECK(ops_error().find("broadcast") != std::string::npos);
}
