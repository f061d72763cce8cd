// Reductions (TRN_HAL_COMMAND_REDUCE, since driver interface 2.2): destination[i] = a[i] op b[i]
// over reserved ranges and registered host memory — f32 exact, in place, bf16 max (NaN from
// either operand), i32 wrap-around — and reduce commands refused at submission (dtype, op, a
// destination partly overlapping an operand, addresses outside the process's memory) with
// nothing run. (The suite takes drivers of this release's interface or later, which have it.)
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "loader_support.hpp"

using namespace conformance;

namespace {

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T> &values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

template <typename T>
std::vector<T> values_of(const std::vector<uint8_t> &bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return values;
}

std::vector<float> some_floats(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(count);
  for (auto &x : v) {
    auto u = static_cast<uint32_t>(rng());
    if ((u & 0x7f800000u) == 0x7f800000u) u &= ~0x40000000u;  // finite only
    std::memcpy(&x, &u, sizeof x);
  }
  return v;
}

float bf16_to_float(uint16_t bits) {
  const uint32_t u = uint32_t{bits} << 16;
  float v = 0;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

bool bf16_is_nan(uint16_t bits) {
  return (bits & 0x7f80) == 0x7f80 && (bits & 0x7f) != 0;
}

// Index of the first element whose bits differ, or -1.
template <typename T>
int64_t first_mismatch(const std::vector<T> &got, const std::vector<T> &want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) return static_cast<int64_t>(i);
  return -1;
}

}  // namespace

TEST_CASE("reduce: f32 sum of two ranges into a third is exact", "[queues][reduce]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  Range ra(inst, 0, 1 << 20), rb(inst, 0, 1 << 20), rd(inst, 0, 1 << 20);
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  const uint32_t count = 65'537;  // not a multiple of any vector width
  const uint64_t bytes = uint64_t{count} * 4;
  const auto a = some_floats(count, 1), b = some_floats(count, 2);
  std::vector<float> want(count);
  for (uint32_t i = 0; i < count; ++i) want[i] = a[i] + b[i];
  write_device(inst, 0, ra.address() + 4, bytes_of(a));
  write_device(inst, 0, rb.address() + 8, bytes_of(b));
  const auto background = pattern(bytes + 64, 3);
  write_device(inst, 0, rd.address(), background);

  q.run({reduce_command(rd.address() + 12, ra.address() + 4, rb.address() + 8, count, TRN_DTYPE_F32,
                        TRN_REDUCE_SUM)});
  const auto got = read_device(inst, 0, rd.address(), bytes + 64);
  CHECK(first_mismatch(
            values_of<float>(std::vector<uint8_t>(got.begin() + 12, got.begin() + 12 + bytes)),
            want) == -1);
  // Nothing written around it.
  CHECK(std::equal(got.begin(), got.begin() + 12, background.begin()));
  CHECK(std::equal(got.begin() + 12 + bytes, got.end(), background.begin() + 12 + bytes));
  // The operands are as they were.
  CHECK(first_mismatch(values_of<float>(read_device(inst, 0, ra.address() + 4, bytes)), a) == -1);

  // Registered host memory as an operand and as the destination.
  HostBuffer hb(inst, 0, bytes), hd(inst, 0, bytes);
  std::memcpy(hb.data(), b.data(), bytes);
  q.run({reduce_command(hd.address(), ra.address() + 4, hb.address(), count, TRN_DTYPE_F32,
                        TRN_REDUCE_SUM)});
  std::vector<float> host(count);
  std::memcpy(host.data(), hd.data(), bytes);
  CHECK(first_mismatch(host, want) == -1);
}

TEST_CASE("reduce: the destination may be an operand (in place)", "[queues][reduce]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  Range ra(inst, 0, 1 << 20), rb(inst, 0, 1 << 20);
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  const uint32_t count = 100'003;
  const uint64_t bytes = uint64_t{count} * 4;
  const auto a = some_floats(count, 11), b = some_floats(count, 12);
  write_device(inst, 0, ra.address(), bytes_of(a));
  write_device(inst, 0, rb.address(), bytes_of(b));
  // a = a * b, then b = a + b (with the new a), in one buffer: in order.
  q.run({reduce_command(ra.address(), ra.address(), rb.address(), count, TRN_DTYPE_F32,
                        TRN_REDUCE_PROD),
         reduce_command(rb.address(), ra.address(), rb.address(), count, TRN_DTYPE_F32,
                        TRN_REDUCE_SUM)});
  std::vector<float> prod(count), sum(count);
  for (uint32_t i = 0; i < count; ++i) {
    prod[i] = a[i] * b[i];
    sum[i] = prod[i] + b[i];
  }
  CHECK(first_mismatch(values_of<float>(read_device(inst, 0, ra.address(), bytes)), prod) == -1);
  CHECK(first_mismatch(values_of<float>(read_device(inst, 0, rb.address(), bytes)), sum) == -1);
}

TEST_CASE("reduce: bf16 max returns the larger operand, NaN when either is NaN",
          "[queues][reduce]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  Range ra(inst, 0, 1 << 20), rb(inst, 0, 1 << 20), rd(inst, 0, 1 << 20);
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  const uint32_t count = 10'007;
  std::mt19937 rng(21);
  std::vector<uint16_t> a(count), b(count);
  for (uint32_t i = 0; i < count; ++i) {
    for (uint16_t *x : {&a[i], &b[i]}) {
      auto u = static_cast<uint16_t>(rng());
      if ((u & 0x7f80) == 0x7f80) u = static_cast<uint16_t>(u & ~0x4000u);  // finite
      if ((u & 0x7fff) == 0) u = 0x3f80;  // no zeros: which zero MAX gives is not the contract
      *x = u;
    }
  }
  for (uint32_t i = 0; i < count; i += 97) a[i] = 0x7fc0;  // NaN in a
  for (uint32_t i = 5; i < count; i += 89) b[i] = 0xffc1;  // NaN in b
  write_device(inst, 0, ra.address(), bytes_of(a));
  write_device(inst, 0, rb.address(), bytes_of(b));
  q.run({reduce_command(rd.address(), ra.address(), rb.address(), count, TRN_DTYPE_BF16,
                        TRN_REDUCE_MAX)});
  const auto got = values_of<uint16_t>(read_device(inst, 0, rd.address(), uint64_t{count} * 2));
  size_t nans = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const bool nan = bf16_is_nan(a[i]) || bf16_is_nan(b[i]);
    nans += nan;
    // Without zeros, equal values have equal bits: the larger operand, exactly.
    const uint16_t larger = bf16_to_float(a[i]) > bf16_to_float(b[i]) ? a[i] : b[i];
    if (nan ? !bf16_is_nan(got[i]) : got[i] != larger) {
      FAIL_CHECK("element " << i << ": max(0x" << std::hex << a[i] << ", 0x" << b[i] << ") gave 0x"
                            << got[i]);
      break;
    }
  }
  CHECK(nans > 200);
}

TEST_CASE("reduce: i32 sums wrap around", "[queues][reduce]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  Range ra(inst, 0, 1 << 20), rb(inst, 0, 1 << 20), rd(inst, 0, 1 << 20);
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  const std::vector<int32_t> a = {INT32_MAX, INT32_MIN, INT32_MAX, -1, 123456789, INT32_MIN};
  const std::vector<int32_t> b = {1, -1, INT32_MAX, 1, -123456789, INT32_MIN};
  const std::vector<int32_t> want = {INT32_MIN, INT32_MAX, -2, 0, 0, 0};
  write_device(inst, 0, ra.address(), bytes_of(a));
  write_device(inst, 0, rb.address(), bytes_of(b));
  q.run({reduce_command(rd.address(), ra.address(), rb.address(), static_cast<uint32_t>(a.size()),
                        TRN_DTYPE_I32, TRN_REDUCE_SUM)});
  CHECK(values_of<int32_t>(read_device(inst, 0, rd.address(), a.size() * 4)) == want);
}

TEST_CASE("reduce: malformed reduce commands are refused at submission, nothing runs",
          "[queues][reduce]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  Range r(inst, 0, 1 << 20);
  const uint64_t base = r.address(), end = r.address() + r.bytes();
  uint64_t released = 0;
  {
    Range gone(inst, 0, 1 << 20);
    released = gone.address();
  }
  HostBuffer h(inst, 0, 4096);
  HostCalls calls;
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  const uint64_t a = base + 65536, b = base + 131072;
  struct Case {
    const char *what;
    trn_hal_command_t command;
  };
  const Case cases[] = {
      {"dtype 4 (fp8 e4m3)", reduce_command(base, a, b, 16, 4, TRN_REDUCE_SUM)},
      {"dtype 0", reduce_command(base, a, b, 16, 0, TRN_REDUCE_SUM)},
      {"dtype 9 (u8)", reduce_command(base, a, b, 16, 9, TRN_REDUCE_MAX)},
      {"dtype 64 (f64)", reduce_command(base, a, b, 16, 64, TRN_REDUCE_SUM)},
      {"op 7", reduce_command(base, a, b, 16, TRN_DTYPE_F32, 7)},
      {"op 4", reduce_command(base, a, b, 16, TRN_DTYPE_I32, 4)},
      {"a destination 4 bytes into operand a",
       reduce_command(a + 4, a, b, 16, TRN_DTYPE_F32, TRN_REDUCE_SUM)},
      {"a destination ending inside operand b",
       reduce_command(b - 32, a, b, 16, TRN_DTYPE_F32, TRN_REDUCE_SUM)},
      {"a destination 2 bytes into operand b (bf16)",
       reduce_command(b + 2, a, b, 16, TRN_DTYPE_BF16, TRN_REDUCE_SUM)},
      {"operand a at an address that is not device memory",
       reduce_command(base, 16, b, 16, TRN_DTYPE_F32, TRN_REDUCE_SUM)},
      {"a destination at address 0", reduce_command(0, a, b, 16, TRN_DTYPE_F32, TRN_REDUCE_SUM)},
      {"operand b in a released range",
       reduce_command(base, a, released, 16, TRN_DTYPE_F32, TRN_REDUCE_SUM)},
      {"operand b past the end of the range",
       reduce_command(base, a, end - 32, 16, TRN_DTYPE_F32, TRN_REDUCE_SUM)},
      {"a destination past the end of the range",
       reduce_command(end - 8, a, b, 4, TRN_DTYPE_I32, TRN_REDUCE_SUM)},
      {"a destination past registered host memory",
       reduce_command(h.address() + 4000, a, b, 100, TRN_DTYPE_F32, TRN_REDUCE_SUM)},
      {"a destination that wraps the address space",
       reduce_command(UINT64_MAX - 8, a, b, 16, TRN_DTYPE_F32, TRN_REDUCE_SUM)},
  };
  const bool sim = std::string(ops().name) == "sim";
  uint32_t index = 0;
  for (const Case &c : cases) {
    INFO("buffer with " << c.what);
    Err err;
    const trn_result_t res =
        q.try_submit({memset_command(base, 16, 0x77), calls.command(index++), c.command}, err);
    INFO("driver said: " << err.message);
    CHECK(res == TRN_ERROR_INVALID_ARGUMENT);
    CHECK_FALSE(err.empty());
    if (sim) CHECK(std::string(err.message).find("reduce") != std::string::npos);
  }
  // Nothing ran and nothing was accepted; the queue still reduces.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(calls.count() == 0);
  CHECK(q.status().submitted == 0);
  CHECK(read_device(inst, 0, base, 1)[0] == 0);
  write_device(inst, 0, a, bytes_of(std::vector<int32_t>(16, 20)));
  write_device(inst, 0, b, bytes_of(std::vector<int32_t>(16, 22)));
  q.run({reduce_command(base, a, b, 16, TRN_DTYPE_I32, TRN_REDUCE_SUM)});
  CHECK(values_of<int32_t>(read_device(inst, 0, base, 64)) == std::vector<int32_t>(16, 42));
  CHECK(q.status().fault.result == TRN_SUCCESS);
}
