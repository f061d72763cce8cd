// Conformance: trn_queue_reduce — elementwise destination = a op b by the DMA engines. f32, bf16,
// f16 and i32 against host references (exact, round to nearest even for the 16-bit floats, NaN
// and signed-zero rules of MAX and MIN, wrapping integers), large counts (the vectorised loop's
// tail, the split across host threads), in place, host memory and offsets, copy and compute
// queues in order with other commands, semaphores, count 0, every refusal at submission (with
// nothing submitted), memory freed before the reduce runs, capture, and simulated time.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "isa/dtype.hpp"
#include "support/api_helpers.hpp"
#include "support/result_printing.hpp"
#include "support/sim_env.hpp"
#include "trn/trn.h"

namespace {

using trn::test::alloc;
using trn::test::core_at;
using trn::test::error_contains;
using trn::test::fault_of;
using trn::test::first_device;
using trn::test::last_error;
using trn::test::make_pool;
using trn::test::make_queue;
using trn::test::make_sem;
using trn::test::mem_info;
using trn::test::SimEnv;
using trn::test::timeline_of;
using trn::test::value_of;

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kLong = 10'000'000'000;  // "forever" in a test: a hang fails, never blocks

constexpr trn_reduce_op_t kOps[] = {TRN_REDUCE_SUM, TRN_REDUCE_PROD, TRN_REDUCE_MAX,
                                    TRN_REDUCE_MIN};

const char *op_name(trn_reduce_op_t op) {
  switch (op) {
    case TRN_REDUCE_SUM: return "sum";
    case TRN_REDUCE_PROD: return "prod";
    case TRN_REDUCE_MAX: return "max";
    case TRN_REDUCE_MIN: return "min";
    default: return "?";
  }
}

void finish(trn_queue_t queue) {
  const trn_result_t r = trn_queue_finish(queue, kLong);
  INFO(last_error());
  REQUIRE(r == TRN_SUCCESS);
}

// The sequence number the queue's next command gets (a barrier, run to completion).
uint64_t next_sequence(trn_queue_t queue) {
  uint64_t seq = 0;
  INFO(last_error());
  REQUIRE(trn_queue_barrier(queue, nullptr, &seq) == TRN_SUCCESS);
  finish(queue);
  return seq;
}

template <typename T>
void write_vec(trn_mem_t mem, uint64_t offset, const std::vector<T> &values) {
  INFO(last_error());
  REQUIRE(trn_mem_write(mem, offset, values.data(), values.size() * sizeof(T)) == TRN_SUCCESS);
}

template <typename T>
std::vector<T> read_vec(trn_mem_t mem, uint64_t offset, size_t count) {
  std::vector<T> values(count);
  INFO(last_error());
  REQUIRE(trn_mem_read(mem, offset, values.data(), count * sizeof(T)) == TRN_SUCCESS);
  return values;
}

std::vector<uint8_t> read_bytes(trn_mem_t mem, uint64_t offset, uint64_t size) {
  return read_vec<uint8_t>(mem, offset, size);
}

// Reduces and waits for it, REQUIRE-ing success.
void reduce(trn_queue_t queue, trn_mem_t destination, uint64_t destination_offset, trn_mem_t a,
            uint64_t a_offset, trn_mem_t b, uint64_t b_offset, uint64_t count, trn_dtype_t dtype,
            trn_reduce_op_t op) {
  INFO("reduce of " << count << " " << trn_dtype_name(dtype) << " (" << op_name(op) << ")");
  {
    const trn_result_t r = trn_queue_reduce(queue, destination, destination_offset, a, a_offset, b,
                                            b_offset, count, dtype, op, nullptr, nullptr);
    INFO(last_error());
    REQUIRE(r == TRN_SUCCESS);
  }
  finish(queue);
  CHECK(fault_of(queue).result == TRN_SUCCESS);
}

uint32_t bits_of(float v) {
  uint32_t u = 0;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

float float_of(uint32_t u) {
  float v = 0;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

// bf16 <-> fp32 written here, independently of the project's conversions: widening is exact;
// narrowing rounds to nearest even (NaN stays a quiet NaN).
float bf16_to_float(uint16_t bits) {
  return float_of(uint32_t{bits} << 16);
}

uint16_t float_to_bf16(float v) {
  const uint32_t u = bits_of(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

bool bf16_is_nan(uint16_t bits) {
  return (bits & 0x7f80) == 0x7f80 && (bits & 0x7f) != 0;
}

bool f16_is_nan(uint16_t bits) {
  return (bits & 0x7c00) == 0x7c00 && (bits & 0x3ff) != 0;
}

// The API's MAX and MIN in fp32: NaN from either side; between equal operands (+0 and -0
// included) the second.
float ref_max(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
  return a > b ? a : b;
}

float ref_min(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
  return a < b ? a : b;
}

float ref_f32(trn_reduce_op_t op, float a, float b) {
  switch (op) {
    case TRN_REDUCE_SUM: return a + b;
    case TRN_REDUCE_PROD: return a * b;
    case TRN_REDUCE_MAX: return ref_max(a, b);
    default: return ref_min(a, b);
  }
}

int32_t ref_i32(trn_reduce_op_t op, int32_t a, int32_t b) {
  switch (op) {
    case TRN_REDUCE_SUM:
      return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
    case TRN_REDUCE_PROD:
      return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
    case TRN_REDUCE_MAX: return a > b ? a : b;
    default: return a < b ? a : b;
  }
}

// Finite fp32 values of every magnitude (subnormals, zeros of both signs, values near overflow).
std::vector<float> random_floats(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(count);
  for (auto &x : v) {
    auto u = static_cast<uint32_t>(rng());
    if ((u & 0x7f800000u) == 0x7f800000u) u &= ~0x00800000u;  // no infinity or NaN
    x = float_of(u);
  }
  // Some everyday values too.
  for (size_t i = 0; i < count; i += 3)
    v[i] = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 8.0f;
  return v;
}

// Finite 16-bit float bit patterns: exponent field not all ones (`exponent_mask` 0x7f80 for
// bf16, 0x7c00 for f16).
std::vector<uint16_t> random_halves(size_t count, uint32_t seed, uint16_t exponent_mask) {
  std::mt19937 rng(seed);
  std::vector<uint16_t> v(count);
  for (auto &x : v) {
    auto u = static_cast<uint16_t>(rng());
    // Both formats' exponent fields start at bit 14: clearing it leaves a finite value.
    if ((u & exponent_mask) == exponent_mask) u = static_cast<uint16_t>(u & ~0x4000u);
    x = u;
  }
  return v;
}

// Index of the first element whose bits differ from the reference, or -1.
template <typename T>
int64_t first_mismatch(const std::vector<T> &got, const std::vector<T> &want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) return static_cast<int64_t>(i);
  return -1;
}

// One device, a pool of each kind and a queue.
struct Fixture {
  SimEnv env;
  trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device);
  trn_pool_t host_pool = make_pool(device, TRN_POOL_KIND_HOST);
  trn_queue_t queue = make_queue(core_at(device, 0));
  std::vector<trn_mem_t> mems;

  trn_mem_t mem(uint64_t bytes, bool host = false) {
    mems.push_back(alloc(host ? host_pool : pool, bytes));
    return mems.back();
  }
  ~Fixture() {
    trn_queue_destroy(queue);
    for (trn_mem_t m : mems) trn_mem_free(m);
    trn_pool_destroy(pool);
    trn_pool_destroy(host_pool);
  }
};

struct Call {
  std::string what;
  std::function<trn_result_t(uint64_t *sequence)> run;
  const char *detail;
};

// Each call fails with `expected`, names the function and `detail`, and sets no sequence number.
void expect_refused(const std::vector<Call> &calls, trn_result_t expected) {
  for (const Call &call : calls) {
    INFO(call.what);
    uint64_t sequence = 55;
    const trn_result_t r = call.run(&sequence);
    INFO("trn_last_error: " << last_error());
    CHECK(r == expected);
    CHECK(last_error().rfind("trn_queue_reduce: ", 0) == 0);
    CHECK(error_contains(call.detail));
    CHECK(sequence == 55);
  }
}

}  // namespace

TEST_CASE("reduce: f32 sum, prod, max and min equal a host reference bit for bit",
          "[queues][reduce]") {
  Fixture f;
  // Not a multiple of 4, 8 or 16: the vectorised loop's tail runs too.
  constexpr size_t kCount = 1'000'003;
  const auto a = random_floats(kCount, 1);
  const auto b = random_floats(kCount, 2);
  trn_mem_t ma = f.mem(kCount * 4), mb = f.mem(kCount * 4), md = f.mem(kCount * 4 + 64);
  write_vec(ma, 0, a);
  write_vec(mb, 0, b);
  for (const trn_reduce_op_t op : kOps) {
    INFO("op " << op_name(op));
    REQUIRE(trn_mem_set(md, 0, 0xcd, kCount * 4 + 64) == TRN_SUCCESS);
    reduce(f.queue, md, 0, ma, 0, mb, 0, kCount, TRN_DTYPE_F32, op);
    std::vector<float> want(kCount);
    for (size_t i = 0; i < kCount; ++i) want[i] = ref_f32(op, a[i], b[i]);
    const auto got = read_vec<float>(md, 0, kCount);
    const int64_t at = first_mismatch(got, want);
    if (at >= 0)
      FAIL_CHECK("element " << at << ": " << a[at] << " " << op_name(op) << " " << b[at] << " gave "
                            << got[at] << " (0x" << std::hex << bits_of(got[at]) << "), expected "
                            << want[at] << " (0x" << bits_of(want[at]) << ")");
    // Nothing past the last element.
    const auto after = read_bytes(md, kCount * 4, 64);
    CHECK(after == std::vector<uint8_t>(64, 0xcd));
  }
}

TEST_CASE("reduce: a reduce of more than 8 MiB (split across host threads) is exact everywhere",
          "[queues][reduce]") {
  Fixture f;
  constexpr size_t kCount = 3'000'001;  // 12 MB of f32, an odd tail in the last part
  std::vector<float> a(kCount), b(kCount);
  std::vector<int32_t> ia(kCount), ib(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    a[i] = static_cast<float>(i % 8191) * 0.25f;
    b[i] = static_cast<float>(i % 127) - 60.5f;
    ia[i] = static_cast<int32_t>(i * 2654435761u);
    ib[i] = static_cast<int32_t>(i * 40503u + 7);
  }
  trn_mem_t ma = f.mem(kCount * 4), mb = f.mem(kCount * 4), md = f.mem(kCount * 4);
  write_vec(ma, 0, a);
  write_vec(mb, 0, b);
  reduce(f.queue, md, 0, ma, 0, mb, 0, kCount, TRN_DTYPE_F32, TRN_REDUCE_SUM);
  std::vector<float> want(kCount);
  for (size_t i = 0; i < kCount; ++i) want[i] = a[i] + b[i];
  CHECK(first_mismatch(read_vec<float>(md, 0, kCount), want) == -1);

  // The same bytes as i32 products (wrapping) through the same split.
  write_vec(ma, 0, ia);
  write_vec(mb, 0, ib);
  reduce(f.queue, md, 0, ma, 0, mb, 0, kCount, TRN_DTYPE_I32, TRN_REDUCE_PROD);
  std::vector<int32_t> iwant(kCount);
  for (size_t i = 0; i < kCount; ++i) iwant[i] = ref_i32(TRN_REDUCE_PROD, ia[i], ib[i]);
  CHECK(first_mismatch(read_vec<int32_t>(md, 0, kCount), iwant) == -1);
}

TEST_CASE("reduce: max and min give NaN when either operand is NaN", "[queues][reduce]") {
  Fixture f;
  constexpr size_t kCount = 1003;  // NaNs in every vector lane and in the tail
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> a(kCount), b(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    a[i] = static_cast<float>(i) - 500.0f;
    b[i] = 500.0f - static_cast<float>(i);
    switch (i % 7) {
      case 1: a[i] = nan; break;
      case 2: b[i] = nan; break;
      case 3: a[i] = b[i] = nan; break;
      case 4:
        a[i] = nan;
        b[i] = (i % 2) ? inf : -inf;
        break;
      case 5:
        a[i] = (i % 2) ? inf : -inf;
        b[i] = nan;
        break;
      default: break;
    }
  }
  a[kCount - 1] = nan;  // the last element, in the tail
  b[kCount - 2] = nan;
  trn_mem_t ma = f.mem(kCount * 4), mb = f.mem(kCount * 4), md = f.mem(kCount * 4);
  write_vec(ma, 0, a);
  write_vec(mb, 0, b);
  for (const trn_reduce_op_t op : {TRN_REDUCE_MAX, TRN_REDUCE_MIN}) {
    INFO("op " << op_name(op));
    reduce(f.queue, md, 0, ma, 0, mb, 0, kCount, TRN_DTYPE_F32, op);
    const auto got = read_vec<float>(md, 0, kCount);
    for (size_t i = 0; i < kCount; ++i) {
      const float want = ref_f32(op, a[i], b[i]);
      if (std::isnan(want) ? !std::isnan(got[i]) : bits_of(got[i]) != bits_of(want)) {
        FAIL_CHECK("element " << i << ": " << op_name(op) << "(" << a[i] << ", " << b[i]
                              << ") gave " << got[i] << ", expected " << want);
        break;
      }
    }
  }

  // bf16 and f16 too: a NaN in a or in b.
  for (const trn_dtype_t dtype : {TRN_DTYPE_BF16, TRN_DTYPE_F16}) {
    const bool bf16 = dtype == TRN_DTYPE_BF16;
    const uint16_t qnan = bf16 ? 0x7fc0 : 0x7e00, one = bf16 ? 0x3f80 : 0x3c00;
    const uint16_t ninf = bf16 ? 0xff80 : 0xfc00;
    const std::vector<uint16_t> ha = {qnan, one, qnan, ninf, one, one, one, qnan, one};
    const std::vector<uint16_t> hb = {one, qnan, qnan, qnan, one, one, one, one, qnan};
    write_vec(ma, 0, ha);
    write_vec(mb, 0, hb);
    for (const trn_reduce_op_t op : {TRN_REDUCE_MAX, TRN_REDUCE_MIN}) {
      INFO(trn_dtype_name(dtype) << " " << op_name(op));
      reduce(f.queue, md, 0, ma, 0, mb, 0, ha.size(), dtype, op);
      const auto got = read_vec<uint16_t>(md, 0, ha.size());
      for (size_t i = 0; i < ha.size(); ++i) {
        INFO("element " << i << ": 0x" << std::hex << got[i]);
        const bool any_nan = bf16 ? bf16_is_nan(ha[i]) || bf16_is_nan(hb[i])
                                  : f16_is_nan(ha[i]) || f16_is_nan(hb[i]);
        if (any_nan)
          CHECK((bf16 ? bf16_is_nan(got[i]) : f16_is_nan(got[i])));
        else
          CHECK(got[i] == one);
      }
    }
  }
}

TEST_CASE("reduce: max and min of equal operands (+0 and -0) return the second operand",
          "[queues][reduce]") {
  Fixture f;
  trn_mem_t ma = f.mem(4096), mb = f.mem(4096), md = f.mem(4096);
  constexpr size_t kCount = 37;  // vector lanes and a tail
  // f32: alternate (+0, -0) and (-0, +0).
  std::vector<uint32_t> a(kCount), b(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    a[i] = (i % 2) ? 0x80000000u : 0x00000000u;
    b[i] = (i % 2) ? 0x00000000u : 0x80000000u;
  }
  write_vec(ma, 0, a);
  write_vec(mb, 0, b);
  for (const trn_reduce_op_t op : {TRN_REDUCE_MAX, TRN_REDUCE_MIN}) {
    INFO("f32 " << op_name(op));
    reduce(f.queue, md, 0, ma, 0, mb, 0, kCount, TRN_DTYPE_F32, op);
    const auto got = read_vec<uint32_t>(md, 0, kCount);
    for (size_t i = 0; i < kCount; ++i) {
      INFO("element " << i << ": 0x" << std::hex << a[i] << " and 0x" << b[i] << " gave 0x"
                      << got[i]);
      CHECK(got[i] == b[i]);
    }
  }
  // And the sum of two negative zeros is a negative zero.
  std::vector<uint32_t> negative(kCount, 0x80000000u);
  write_vec(ma, 0, negative);
  write_vec(mb, 0, negative);
  reduce(f.queue, md, 0, ma, 0, mb, 0, kCount, TRN_DTYPE_F32, TRN_REDUCE_SUM);
  CHECK(read_vec<uint32_t>(md, 0, kCount) == negative);

  for (const trn_dtype_t dtype : {TRN_DTYPE_BF16, TRN_DTYPE_F16}) {
    std::vector<uint16_t> ha(kCount), hb(kCount);
    for (size_t i = 0; i < kCount; ++i) {
      ha[i] = static_cast<uint16_t>((i % 2) ? 0x8000 : 0x0000);
      hb[i] = static_cast<uint16_t>((i % 2) ? 0x0000 : 0x8000);
    }
    write_vec(ma, 0, ha);
    write_vec(mb, 0, hb);
    for (const trn_reduce_op_t op : {TRN_REDUCE_MAX, TRN_REDUCE_MIN}) {
      INFO(trn_dtype_name(dtype) << " " << op_name(op));
      reduce(f.queue, md, 0, ma, 0, mb, 0, kCount, dtype, op);
      CHECK(read_vec<uint16_t>(md, 0, kCount) == hb);
    }
  }
}

TEST_CASE("reduce: bf16 results are the fp32 results rounded to nearest even", "[queues][reduce]") {
  Fixture f;
  constexpr size_t kCount = 100'003;  // more than one block of 2048, and a tail
  auto a = random_halves(kCount, 11, 0x7f80);
  auto b = random_halves(kCount, 12, 0x7f80);
  // Exact ties at 1.0 (ulp 2^-7): 1 + 2^-8 rounds down to the even 1.0; (1 + 2^-7) + 2^-8 up to
  // the even 1 + 2^-6. And a sum that overflows to infinity.
  const std::vector<std::pair<uint16_t, uint16_t>> ties = {
      {0x3f80, 0x3b80}, {0x3f81, 0x3b80}, {0x3b80, 0x3f83}, {0x7f7f, 0x7f7f}, {0xff7f, 0xff7f}};
  const std::vector<uint16_t> tie_sums = {0x3f80, 0x3f82, 0x3f84, 0x7f80, 0xff80};
  for (size_t i = 0; i < ties.size(); ++i) {
    a[i] = ties[i].first;
    b[i] = ties[i].second;
  }
  trn_mem_t ma = f.mem(kCount * 2), mb = f.mem(kCount * 2), md = f.mem(kCount * 2);
  write_vec(ma, 0, a);
  write_vec(mb, 0, b);
  for (const trn_reduce_op_t op : kOps) {
    INFO("op " << op_name(op));
    reduce(f.queue, md, 0, ma, 0, mb, 0, kCount, TRN_DTYPE_BF16, op);
    const auto got = read_vec<uint16_t>(md, 0, kCount);
    if (op == TRN_REDUCE_SUM)
      for (size_t i = 0; i < ties.size(); ++i) {
        INFO("tie case " << i << ": got 0x" << std::hex << got[i]);
        CHECK(got[i] == tie_sums[i]);
      }
    std::vector<uint16_t> want(kCount);
    for (size_t i = 0; i < kCount; ++i)
      want[i] = float_to_bf16(ref_f32(op, bf16_to_float(a[i]), bf16_to_float(b[i])));
    const int64_t at = first_mismatch(got, want);
    if (at >= 0)
      FAIL_CHECK("element " << at << ": 0x" << std::hex << a[at] << " " << op_name(op) << " 0x"
                            << b[at] << " gave 0x" << got[at] << ", expected 0x" << want[at]);
  }
}

TEST_CASE("reduce: f16 sums are exact for representable values and round to nearest even",
          "[queues][reduce]") {
  Fixture f;
  constexpr size_t kCount = 5003;
  // Halves between -100 and 100: every sum is exactly representable in f16.
  std::vector<uint16_t> a(kCount), b(kCount);
  std::vector<float> fa(kCount), fb(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    fa[i] = static_cast<float>(static_cast<int>(i % 401) - 200) * 0.5f;
    fb[i] = static_cast<float>(static_cast<int>((i * 7) % 397) - 198) * 0.5f;
    a[i] = trn::isa::f32_to_f16(fa[i]);
    b[i] = trn::isa::f32_to_f16(fb[i]);
    REQUIRE(trn::isa::f16_to_f32(a[i]) == fa[i]);
  }
  // Hand-encoded: 1.5 + 2 = 3.5; ties at 2048 (ulp 2): 2048 + 1 -> 2048, 2050 + 1 -> 2052.
  const uint16_t hand_a[] = {0x3e00, 0x6800, 0x6801};
  const uint16_t hand_b[] = {0x4000, 0x3c00, 0x3c00};
  const uint16_t hand_sum[] = {0x4300, 0x6800, 0x6802};
  for (size_t i = 0; i < 3; ++i) {
    a[i] = hand_a[i];
    b[i] = hand_b[i];
  }
  trn_mem_t ma = f.mem(kCount * 2), mb = f.mem(kCount * 2), md = f.mem(kCount * 2);
  write_vec(ma, 0, a);
  write_vec(mb, 0, b);
  reduce(f.queue, md, 0, ma, 0, mb, 0, kCount, TRN_DTYPE_F16, TRN_REDUCE_SUM);
  const auto got = read_vec<uint16_t>(md, 0, kCount);
  for (size_t i = 0; i < 3; ++i) {
    INFO("hand case " << i << ": got 0x" << std::hex << got[i]);
    CHECK(got[i] == hand_sum[i]);
  }
  for (size_t i = 3; i < kCount; ++i)
    if (trn::isa::f16_to_f32(got[i]) != fa[i] + fb[i]) {
      FAIL_CHECK("element " << i << ": " << fa[i] << " + " << fb[i] << " gave "
                            << trn::isa::f16_to_f32(got[i]));
      break;
    }

  // Random finite values: the project's conversion of the fp32 result.
  const auto ra = random_halves(kCount, 21, 0x7c00), rb = random_halves(kCount, 22, 0x7c00);
  write_vec(ma, 0, ra);
  write_vec(mb, 0, rb);
  for (const trn_reduce_op_t op : kOps) {
    INFO("op " << op_name(op));
    reduce(f.queue, md, 0, ma, 0, mb, 0, kCount, TRN_DTYPE_F16, op);
    std::vector<uint16_t> want(kCount);
    for (size_t i = 0; i < kCount; ++i)
      want[i] = trn::isa::f32_to_f16(
          ref_f32(op, trn::isa::f16_to_f32(ra[i]), trn::isa::f16_to_f32(rb[i])));
    const auto out = read_vec<uint16_t>(md, 0, kCount);
    const int64_t at = first_mismatch(out, want);
    if (at >= 0)
      FAIL_CHECK("element " << at << ": 0x" << std::hex << ra[at] << " " << op_name(op) << " 0x"
                            << rb[at] << " gave 0x" << out[at] << ", expected 0x" << want[at]);
  }
}

TEST_CASE("reduce: i32 sums and products wrap, max and min are signed", "[queues][reduce]") {
  Fixture f;
  const std::vector<int32_t> a = {INT32_MAX, INT32_MIN, 65536, INT32_MAX, -1, INT32_MIN, 7, -3, 0};
  const std::vector<int32_t> b = {1, -1, 65536, 2, 1, 0, -7, -3, INT32_MIN};
  const std::vector<int32_t> sum = {INT32_MIN, INT32_MAX, 131072, INT32_MIN + 1, 0,
                                    INT32_MIN, 0,         -6,     INT32_MIN};
  const std::vector<int32_t> prod = {INT32_MAX, INT32_MIN, 0, -2, -1, 0, -49, 9, 0};
  const std::vector<int32_t> max = {INT32_MAX, -1, 65536, INT32_MAX, 1, 0, 7, -3, 0};
  const std::vector<int32_t> min = {1, INT32_MIN, 65536, 2, -1, INT32_MIN, -7, -3, INT32_MIN};
  trn_mem_t ma = f.mem(1 << 20), mb = f.mem(1 << 20), md = f.mem(1 << 20);
  write_vec(ma, 0, a);
  write_vec(mb, 0, b);
  const std::pair<trn_reduce_op_t, const std::vector<int32_t> *> expected[] = {
      {TRN_REDUCE_SUM, &sum},
      {TRN_REDUCE_PROD, &prod},
      {TRN_REDUCE_MAX, &max},
      {TRN_REDUCE_MIN, &min}};
  for (const auto &[op, want] : expected) {
    INFO("op " << op_name(op));
    reduce(f.queue, md, 0, ma, 0, mb, 0, a.size(), TRN_DTYPE_I32, op);
    CHECK(read_vec<int32_t>(md, 0, a.size()) == *want);
  }

  // Random values through the vectorised loop, against the reference.
  constexpr size_t kCount = 100'001;
  std::mt19937 rng(5);
  std::vector<int32_t> ra(kCount), rb(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    ra[i] = static_cast<int32_t>(rng());
    rb[i] = static_cast<int32_t>(rng());
  }
  write_vec(ma, 0, ra);
  write_vec(mb, 0, rb);
  for (const trn_reduce_op_t op : kOps) {
    INFO("op " << op_name(op));
    reduce(f.queue, md, 0, ma, 0, mb, 0, kCount, TRN_DTYPE_I32, op);
    std::vector<int32_t> want(kCount);
    for (size_t i = 0; i < kCount; ++i) want[i] = ref_i32(op, ra[i], rb[i]);
    CHECK(first_mismatch(read_vec<int32_t>(md, 0, kCount), want) == -1);
  }
}

TEST_CASE("reduce: in place, the destination may be operand a or operand b", "[queues][reduce]") {
  Fixture f;
  constexpr size_t kCount = 20'003;
  constexpr uint64_t kOffset = 4096 + 12;
  const auto a = random_floats(kCount, 31);
  const auto b = random_floats(kCount, 32);
  trn_mem_t ma = f.mem(kOffset + kCount * 4), mb = f.mem(kCount * 4 + 8);
  std::vector<float> want(kCount);

  // destination == a: a = a + b.
  write_vec(ma, kOffset, a);
  write_vec(mb, 8, b);
  reduce(f.queue, ma, kOffset, ma, kOffset, mb, 8, kCount, TRN_DTYPE_F32, TRN_REDUCE_SUM);
  for (size_t i = 0; i < kCount; ++i) want[i] = a[i] + b[i];
  CHECK(first_mismatch(read_vec<float>(ma, kOffset, kCount), want) == -1);
  CHECK(first_mismatch(read_vec<float>(mb, 8, kCount), b) == -1);  // b untouched

  // destination == b: b = a * b.
  write_vec(ma, kOffset, a);
  reduce(f.queue, mb, 8, ma, kOffset, mb, 8, kCount, TRN_DTYPE_F32, TRN_REDUCE_PROD);
  for (size_t i = 0; i < kCount; ++i) want[i] = a[i] * b[i];
  CHECK(first_mismatch(read_vec<float>(mb, 8, kCount), want) == -1);
  CHECK(first_mismatch(read_vec<float>(ma, kOffset, kCount), a) == -1);  // a untouched

  // All three the same: x = x + x.
  write_vec(ma, kOffset, a);
  reduce(f.queue, ma, kOffset, ma, kOffset, ma, kOffset, kCount, TRN_DTYPE_F32, TRN_REDUCE_SUM);
  for (size_t i = 0; i < kCount; ++i) want[i] = a[i] + a[i];
  CHECK(first_mismatch(read_vec<float>(ma, kOffset, kCount), want) == -1);

  // Operands may overlap each other (only the destination must not overlap them partly).
  write_vec(ma, kOffset, a);
  trn_mem_t md = f.mem(kCount * 4);
  reduce(f.queue, md, 0, ma, kOffset, ma, kOffset + 4, kCount - 1, TRN_DTYPE_F32, TRN_REDUCE_MAX);
  std::vector<float> shifted(kCount - 1);
  for (size_t i = 0; i + 1 < kCount; ++i) shifted[i] = ref_max(a[i], a[i + 1]);
  CHECK(first_mismatch(read_vec<float>(md, 0, kCount - 1), shifted) == -1);
}

TEST_CASE("reduce: operands in host pool memory and at offsets in every operand",
          "[queues][reduce]") {
  Fixture f;
  constexpr size_t kCount = 10'007;
  constexpr uint64_t kBytes = kCount * 4;
  const auto a = random_floats(kCount, 41);
  const auto b = random_floats(kCount, 42);
  std::vector<float> want(kCount);
  for (size_t i = 0; i < kCount; ++i) want[i] = a[i] + b[i];
  // Which operands live in the host pool: destination, a, b.
  struct Placement {
    bool d, a, b;
  };
  const Placement placements[] = {{true, true, true},
                                  {false, true, false},
                                  {true, false, false},
                                  {false, false, true},
                                  {true, false, true}};
  const uint64_t d_off = 12, a_off = 4, b_off = 4096 + 100;
  for (const Placement &p : placements) {
    INFO("host: destination " << p.d << ", a " << p.a << ", b " << p.b);
    trn_mem_t md = f.mem(d_off + kBytes + 32, p.d);
    trn_mem_t ma = f.mem(a_off + kBytes, p.a);
    trn_mem_t mb = f.mem(b_off + kBytes, p.b);
    CHECK(mem_info(md).kind == (p.d ? TRN_POOL_KIND_HOST : TRN_POOL_KIND_DEVICE));
    REQUIRE(trn_mem_set(md, 0, 0x5a, d_off + kBytes + 32) == TRN_SUCCESS);
    write_vec(ma, a_off, a);
    write_vec(mb, b_off, b);
    reduce(f.queue, md, d_off, ma, a_off, mb, b_off, kCount, TRN_DTYPE_F32, TRN_REDUCE_SUM);
    CHECK(first_mismatch(read_vec<float>(md, d_off, kCount), want) == -1);
    // Bytes around the range are as they were.
    CHECK(read_bytes(md, 0, d_off) == std::vector<uint8_t>(d_off, 0x5a));
    CHECK(read_bytes(md, d_off + kBytes, 32) == std::vector<uint8_t>(32, 0x5a));
    if (p.d) {
      // The result is in the host mapping.
      void *host = nullptr;
      REQUIRE(trn_mem_map(md, &host) == TRN_SUCCESS);
      float first = 0;
      std::memcpy(&first, static_cast<const char *>(host) + d_off, 4);
      CHECK(bits_of(first) == bits_of(want[0]));
    }
  }
}

TEST_CASE("reduce: copy and compute queues run it in order with copies, numbering it",
          "[queues][reduce]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device);
  constexpr size_t kCount = 65'537;
  constexpr uint64_t kBytes = kCount * 4;
  const auto a = random_floats(kCount, 51);
  const auto b = random_floats(kCount, 52);
  const auto stale = random_floats(kCount, 53);
  std::vector<float> want(kCount);
  for (size_t i = 0; i < kCount; ++i) want[i] = ref_max(a[i], b[i]);
  const trn_queue_kind_t kind = GENERATE(TRN_QUEUE_KIND_COPY, TRN_QUEUE_KIND_COMPUTE);
  INFO((kind == TRN_QUEUE_KIND_COPY ? "copy queue" : "compute queue"));
  trn_queue_t queue = make_queue(core_at(device, 1), kind);
  trn_mem_t staging = alloc(pool, kBytes), ma = alloc(pool, kBytes), mb = alloc(pool, kBytes);
  trn_mem_t md = alloc(pool, kBytes), out = alloc(pool, kBytes);
  write_vec(staging, 0, a);
  write_vec(ma, 0, stale);  // what the reduce would see without the copy before it
  write_vec(mb, 0, b);

  uint64_t s[4] = {};
  REQUIRE(trn_queue_copy(queue, ma, 0, staging, 0, kBytes, nullptr, &s[0]) == TRN_SUCCESS);
  REQUIRE(trn_queue_reduce(queue, md, 0, ma, 0, mb, 0, kCount, TRN_DTYPE_F32, TRN_REDUCE_MAX,
                           nullptr, &s[1]) == TRN_SUCCESS);
  REQUIRE(trn_queue_copy(queue, out, 0, md, 0, kBytes, nullptr, &s[2]) == TRN_SUCCESS);
  // A NULL sequence pointer is allowed, and the numbering goes on.
  REQUIRE(trn_queue_reduce(queue, md, 0, md, 0, md, 0, kCount, TRN_DTYPE_F32, TRN_REDUCE_SUM,
                           nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_barrier(queue, nullptr, &s[3]) == TRN_SUCCESS);
  CHECK(s[0] == 1);
  CHECK(s[1] == 2);
  CHECK(s[2] == 3);
  CHECK(s[3] == 5);
  finish(queue);
  CHECK(value_of(timeline_of(queue)) == 5);
  CHECK(fault_of(queue).result == TRN_SUCCESS);
  CHECK(first_mismatch(read_vec<float>(out, 0, kCount), want) == -1);
  // The reduce after the copy doubled the destination.
  std::vector<float> doubled(kCount);
  for (size_t i = 0; i < kCount; ++i) doubled[i] = want[i] + want[i];
  CHECK(first_mismatch(read_vec<float>(md, 0, kCount), doubled) == -1);

  trn_core_activity_t activity = TRN_CORE_ACTIVITY_INIT;
  REQUIRE(trn_core_get_activity(core_at(device, 1), &activity) == TRN_SUCCESS);
  CHECK(activity.commands_completed == 5);
  CHECK(activity.commands_failed == 0);

  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  for (trn_mem_t m : {staging, ma, mb, md, out}) REQUIRE(trn_mem_free(m) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("reduce: waits for and signals semaphores", "[queues][reduce][sync]") {
  Fixture f;
  constexpr size_t kCount = 4099;
  std::vector<int32_t> a(kCount), b(kCount), want(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    a[i] = static_cast<int32_t>(i);
    b[i] = static_cast<int32_t>(3 * i + 1);
    want[i] = a[i] + b[i];
  }
  trn_mem_t ma = f.mem(kCount * 4), mb = f.mem(kCount * 4), md = f.mem(kCount * 4);
  trn_mem_t out = f.mem(kCount * 4);
  write_vec(ma, 0, a);
  write_vec(mb, 0, b);
  trn_sem_t gate = make_sem(f.device);
  trn_sem_t done = make_sem(f.device);
  trn_queue_t other = make_queue(core_at(f.device, 3));

  // The reduce waits for the host's signal and signals `done`; another queue copies its result
  // once `done` is signalled.
  trn_sem_point_t wait{gate, 1}, signal{done, 1};
  const trn_sync_t sync{&wait, 1, &signal, 1};
  uint64_t seq = 0;
  REQUIRE(trn_queue_reduce(f.queue, md, 0, ma, 0, mb, 0, kCount, TRN_DTYPE_I32, TRN_REDUCE_SUM,
                           &sync, &seq) == TRN_SUCCESS);
  CHECK(seq == 1);
  trn_sem_point_t after{done, 1};
  const trn_sync_t then{&after, 1, nullptr, 0};
  REQUIRE(trn_queue_copy(other, out, 0, md, 0, kCount * 4, &then, nullptr) == TRN_SUCCESS);

  // Nothing ran before the signal.
  CHECK(trn_queue_finish(f.queue, 50 * kMs) == TRN_TIMEOUT);
  CHECK(trn_queue_finish(other, 0) == TRN_TIMEOUT);
  CHECK(value_of(done) == 0);
  CHECK(value_of(timeline_of(f.queue)) == 0);
  CHECK(read_vec<int32_t>(md, 0, kCount) == std::vector<int32_t>(kCount, 0));

  REQUIRE(trn_sem_signal(gate, 1) == TRN_SUCCESS);
  CHECK(trn_sem_wait(done, 1, kLong) == TRN_SUCCESS);
  finish(f.queue);
  finish(other);
  CHECK(value_of(done) == 1);
  CHECK(read_vec<int32_t>(md, 0, kCount) == want);
  CHECK(read_vec<int32_t>(out, 0, kCount) == want);

  REQUIRE(trn_queue_destroy(other) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(gate) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(done) == TRN_SUCCESS);
}

TEST_CASE("reduce: a count of 0 is accepted and changes nothing", "[queues][reduce]") {
  Fixture f;
  trn_mem_t ma = f.mem(4096), mb = f.mem(4096), md = f.mem(4096);
  REQUIRE(trn_mem_set(ma, 0, 1, 4096) == TRN_SUCCESS);
  REQUIRE(trn_mem_set(mb, 0, 2, 4096) == TRN_SUCCESS);
  REQUIRE(trn_mem_set(md, 0, 0x77, 4096) == TRN_SUCCESS);
  uint64_t seq = 0;
  for (const trn_dtype_t dtype : {TRN_DTYPE_F32, TRN_DTYPE_BF16, TRN_DTYPE_F16, TRN_DTYPE_I32}) {
    INFO(trn_dtype_name(dtype));
    REQUIRE(trn_queue_reduce(f.queue, md, 0, ma, 0, mb, 0, 0, dtype, TRN_REDUCE_SUM, nullptr,
                             &seq) == TRN_SUCCESS);
  }
  CHECK(seq == 4);
  // At the very end of each allocation (an empty range there is inside it).
  REQUIRE(trn_queue_reduce(f.queue, md, 4096, ma, 4096, mb, 4096, 0, TRN_DTYPE_F32, TRN_REDUCE_MAX,
                           nullptr, &seq) == TRN_SUCCESS);
  CHECK(seq == 5);
  finish(f.queue);
  CHECK(fault_of(f.queue).result == TRN_SUCCESS);
  CHECK(read_bytes(md, 0, 4096) == std::vector<uint8_t>(4096, 0x77));
  // Past the end is still refused, even for nothing.
  CHECK(trn_queue_reduce(f.queue, md, 4097, ma, 0, mb, 0, 0, TRN_DTYPE_F32, TRN_REDUCE_SUM, nullptr,
                         &seq) == TRN_ERROR_OUT_OF_RANGE);
  CHECK(error_contains("destination"));
  CHECK(seq == 5);
}

TEST_CASE("reduce: dtypes the DMA engines do not reduce are refused",
          "[queues][reduce][negative]") {
  Fixture f;
  const trn_queue_t q = f.queue;
  trn_mem_t ma = f.mem(4096), mb = f.mem(4096), md = f.mem(4096);
  REQUIRE(trn_mem_set(md, 0, 0x77, 4096) == TRN_SUCCESS);
  // dtypes of trn.h the DMA engines do not reduce: INVALID_ARGUMENT.
  std::vector<Call> calls;
  for (const trn_dtype_t dtype : {TRN_DTYPE_FP8_E4M3, TRN_DTYPE_FP8_E5M2, TRN_DTYPE_I16,
                                  TRN_DTYPE_I8, TRN_DTYPE_U8, TRN_DTYPE_F64, TRN_DTYPE_I64})
    calls.push_back({"dtype " + std::to_string(dtype),
                     [=](uint64_t *seq) {
                       return trn_queue_reduce(q, md, 0, ma, 0, mb, 0, 16, dtype, TRN_REDUCE_SUM,
                                               nullptr, seq);
                     },
                     "cannot be reduced"});
  expect_refused(calls, TRN_ERROR_INVALID_ARGUMENT);
  // Values that are no dtype at all (in the enum's range: C++ may hold no other): INVALID_ENUM.
  calls.clear();
  for (const int dtype : {0, 10, 63, 66, 999, 0x7ffffffe, 0x7fffffff})
    calls.push_back({"dtype " + std::to_string(dtype),
                     [=](uint64_t *seq) {
                       return trn_queue_reduce(q, md, 0, ma, 0, mb, 0, 16,
                                               static_cast<trn_dtype_t>(dtype), TRN_REDUCE_SUM,
                                               nullptr, seq);
                     },
                     "is not a trn_dtype_t"});
  expect_refused(calls, TRN_ERROR_INVALID_ENUM);
  // The message names the dtype and what is supported.
  CHECK(trn_queue_reduce(f.queue, md, 0, ma, 0, mb, 0, 16, TRN_DTYPE_I8, TRN_REDUCE_SUM, nullptr,
                         nullptr) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("i8"));
  CHECK(error_contains("F32"));
  CHECK(trn_queue_reduce(f.queue, md, 0, ma, 0, mb, 0, 16, static_cast<trn_dtype_t>(999),
                         TRN_REDUCE_SUM, nullptr, nullptr) == TRN_ERROR_INVALID_ENUM);
  CHECK(error_contains("999"));
  // Nothing was submitted.
  CHECK(next_sequence(f.queue) == 1);
  CHECK(read_bytes(md, 0, 4096) == std::vector<uint8_t>(4096, 0x77));
}

TEST_CASE("reduce: ops other than sum, prod, max and min are refused",
          "[queues][reduce][negative]") {
  Fixture f;
  const trn_queue_t q = f.queue;
  trn_mem_t ma = f.mem(4096), mb = f.mem(4096), md = f.mem(4096);
  REQUIRE(trn_mem_set(md, 0, 0x77, 4096) == TRN_SUCCESS);
  std::vector<Call> calls;
  // AVG, ARGMAX and ARGMIN are ops of the enum the DMA engines do not compute.
  for (const int op : std::initializer_list<int>{TRN_REDUCE_AVG, TRN_REDUCE_ARGMAX,
                                                 TRN_REDUCE_ARGMIN, 7, 99, 0x40000000, 0x7fffffff})
    calls.push_back({"op " + std::to_string(op),
                     [=](uint64_t *seq) {
                       return trn_queue_reduce(q, md, 0, ma, 0, mb, 0, 16, TRN_DTYPE_F32,
                                               static_cast<trn_reduce_op_t>(op), nullptr, seq);
                     },
                     "reduce op"});
  expect_refused(calls, TRN_ERROR_INVALID_ENUM);
  CHECK(trn_queue_reduce(f.queue, md, 0, ma, 0, mb, 0, 16, TRN_DTYPE_F32,
                         static_cast<trn_reduce_op_t>(4), nullptr,
                         nullptr) == TRN_ERROR_INVALID_ENUM);
  CHECK(error_contains("op 4 (avg)"));
  CHECK(error_contains("TRN_REDUCE_SUM, _PROD, _MAX or _MIN"));
  CHECK(trn_queue_reduce(f.queue, md, 0, ma, 0, mb, 0, 16, TRN_DTYPE_F32,
                         static_cast<trn_reduce_op_t>(99), nullptr,
                         nullptr) == TRN_ERROR_INVALID_ENUM);
  CHECK(error_contains("op 99 is not a trn_reduce_op_t"));
  CHECK(next_sequence(f.queue) == 1);
  CHECK(read_bytes(md, 0, 4096) == std::vector<uint8_t>(4096, 0x77));
}

TEST_CASE("reduce: a count of 2^32 elements or more is refused", "[queues][reduce][negative]") {
  Fixture f;
  const trn_queue_t q = f.queue;
  trn_mem_t ma = f.mem(4096), mb = f.mem(4096), md = f.mem(4096);
  std::vector<Call> calls;
  for (const uint64_t count :
       {uint64_t{1} << 32, (uint64_t{1} << 32) + 1, uint64_t{1} << 62, UINT64_MAX})
    for (const trn_dtype_t dtype : {TRN_DTYPE_F32, TRN_DTYPE_BF16, TRN_DTYPE_I32})
      calls.push_back({"count " + std::to_string(count) + " of " + trn_dtype_name(dtype),
                       [=](uint64_t *seq) {
                         return trn_queue_reduce(q, md, 0, ma, 0, mb, 0, count, dtype,
                                                 TRN_REDUCE_SUM, nullptr, seq);
                       },
                       "2^32"});
  expect_refused(calls, TRN_ERROR_INVALID_ARGUMENT);
  // 2^32 - 1 elements is a count one command takes: here it is too many for the memory.
  uint64_t seq = 55;
  CHECK(trn_queue_reduce(f.queue, md, 0, ma, 0, mb, 0, UINT32_MAX, TRN_DTYPE_F32, TRN_REDUCE_SUM,
                         nullptr, &seq) == TRN_ERROR_OUT_OF_RANGE);
  CHECK(seq == 55);
  CHECK(next_sequence(f.queue) == 1);
}

TEST_CASE("reduce: ranges outside an allocation give TRN_ERROR_OUT_OF_RANGE naming the operand",
          "[queues][reduce][negative]") {
  Fixture f;
  const trn_queue_t q = f.queue;
  trn_mem_t small = f.mem(4096), big = f.mem(8192), md = f.mem(4096);
  REQUIRE(trn_mem_set(md, 0, 0x77, 4096) == TRN_SUCCESS);
  auto run = [&](trn_mem_t d, uint64_t d_off, trn_mem_t a, uint64_t a_off, trn_mem_t b,
                 uint64_t b_off, uint64_t count, trn_dtype_t dtype) {
    return [=](uint64_t *seq) {
      return trn_queue_reduce(q, d, d_off, a, a_off, b, b_off, count, dtype, TRN_REDUCE_SUM,
                              nullptr, seq);
    };
  };
  const std::vector<Call> calls = {
      {"destination past the end", run(small, 0, big, 0, big, 4096, 1025, TRN_DTYPE_F32),
       "destination: bytes 0..4100 are outside the allocation of 4096 bytes"},
      {"destination at an offset, one element too many",
       run(small, 4092, big, 0, big, 0, 2, TRN_DTYPE_F32), "destination"},
      {"a past the end", run(big, 0, small, 4, big, 0, 1024, TRN_DTYPE_F32),
       "trn_queue_reduce: a: bytes 4..4100 are outside"},
      {"b past the end", run(big, 0, big, 0, small, 2, 2048, TRN_DTYPE_BF16),
       "trn_queue_reduce: b: bytes 2..4098 are outside"},
      {"b at an offset past the end", run(big, 0, big, 4096, small, 4097, 0, TRN_DTYPE_F32),
       "trn_queue_reduce: b: "},
      {"an offset that would wrap", run(small, 0, big, UINT64_MAX - 2, big, 0, 1, TRN_DTYPE_F32),
       "trn_queue_reduce: a: bytes 18446744073709551613..18446744073709551613 + 4 are outside"},
      {"a count whose bytes pass the allocation",
       run(big, 0, big, 0, big, 0, UINT32_MAX, TRN_DTYPE_I32), "destination"},
  };
  expect_refused(calls, TRN_ERROR_OUT_OF_RANGE);
  for (const Call &c : calls) {
    c.run(nullptr);
    INFO(c.what << ": " << last_error());
    CHECK(error_contains("outside the allocation"));
  }
  // Exactly to the end is fine, in every operand.
  reduce(f.queue, small, 4092, big, 8188, small, 4092, 1, TRN_DTYPE_F32, TRN_REDUCE_SUM);
  CHECK(next_sequence(f.queue) == 2);
  CHECK(read_bytes(md, 0, 4096) == std::vector<uint8_t>(4096, 0x77));
}

TEST_CASE("reduce: a destination partly overlapping an operand is refused",
          "[queues][reduce][negative]") {
  Fixture f;
  const trn_queue_t q = f.queue;
  trn_mem_t m = f.mem(1 << 16), other = f.mem(1 << 16);
  constexpr uint64_t kCount = 1024;  // 4 KiB of f32
  const auto a = random_floats(kCount * 4, 61);
  write_vec(m, 0, a);
  auto run = [&](uint64_t d_off, trn_mem_t ma, uint64_t a_off, trn_mem_t mb, uint64_t b_off,
                 trn_dtype_t dtype = TRN_DTYPE_F32) {
    return [=](uint64_t *seq) {
      return trn_queue_reduce(q, m, d_off, ma, a_off, mb, b_off, kCount, dtype, TRN_REDUCE_SUM,
                              nullptr, seq);
    };
  };
  const std::vector<Call> calls = {
      {"destination 4 bytes after a", run(4, m, 0, other, 0), "partly overlaps operand a"},
      {"destination 4 bytes before a", run(4096, m, 4100, other, 0), "partly overlaps operand a"},
      {"destination ending one element into a", run(0, m, 4092, other, 0),
       "partly overlaps operand a"},
      {"destination 4 bytes after b", run(8196, other, 0, m, 8192), "partly overlaps operand b"},
      {"destination 2 bytes before b (bf16)", run(100, other, 0, m, 102, TRN_DTYPE_BF16),
       "partly overlaps operand b"},
      {"destination in place of a, overlapping b", run(0, m, 0, m, 8), "partly overlaps operand b"},
  };
  expect_refused(calls, TRN_ERROR_INVALID_ARGUMENT);
  CHECK(next_sequence(f.queue) == 1);
  CHECK(first_mismatch(read_vec<float>(m, 0, kCount * 4), a) == -1);  // nothing written
  // Adjacent ranges do not overlap.
  reduce(f.queue, m, 4096, m, 0, m, 8192, kCount, TRN_DTYPE_F32, TRN_REDUCE_SUM);
  const auto got = read_vec<float>(m, 4096, kCount);
  std::vector<float> want(kCount);
  for (size_t i = 0; i < kCount; ++i) want[i] = a[i] + a[2048 + i];
  CHECK(first_mismatch(got, want) == -1);
}

TEST_CASE("reduce: NULL, stale and wrong-kind memory handles are refused, naming the operand",
          "[queues][reduce][negative][handle]") {
  Fixture f;
  const trn_queue_t q = f.queue;
  trn_mem_t good = f.mem(4096);
  REQUIRE(trn_mem_set(good, 0, 0x77, 4096) == TRN_SUCCESS);
  trn_mem_t freed = alloc(f.pool, 4096);
  REQUIRE(trn_mem_free(freed) == TRN_SUCCESS);
  const std::vector<std::pair<trn_mem_t, const char *>> bad = {
      {nullptr, "memory handle is NULL"},
      {freed, "stale"},
      {reinterpret_cast<trn_mem_t>(f.pool), "expected a memory handle but got a pool handle"},
      {reinterpret_cast<trn_mem_t>(f.queue), "got a queue handle"},
      {reinterpret_cast<trn_mem_t>(uintptr_t{0x1234}), "handle"},
  };
  for (const auto &[handle, detail] : bad) {
    INFO("memory handle " << handle);
    const trn_mem_t h = handle;
    const std::vector<Call> calls = {
        {"bad destination",
         [=](uint64_t *seq) {
           return trn_queue_reduce(q, h, 0, good, 0, good, 0, 16, TRN_DTYPE_F32, TRN_REDUCE_SUM,
                                   nullptr, seq);
         },
         "trn_queue_reduce: destination: "},
        {"bad a",
         [=](uint64_t *seq) {
           return trn_queue_reduce(q, good, 0, h, 0, good, 0, 16, TRN_DTYPE_F32, TRN_REDUCE_SUM,
                                   nullptr, seq);
         },
         "trn_queue_reduce: a: "},
        {"bad b",
         [=](uint64_t *seq) {
           return trn_queue_reduce(q, good, 0, good, 0, h, 0, 16, TRN_DTYPE_F32, TRN_REDUCE_SUM,
                                   nullptr, seq);
         },
         "trn_queue_reduce: b: "},
    };
    expect_refused(calls, TRN_ERROR_INVALID_HANDLE);
    for (const Call &c : calls) {
      c.run(nullptr);
      INFO(c.what << ": " << last_error());
      CHECK(error_contains(detail));
    }
  }
  CHECK(next_sequence(f.queue) == 1);
  CHECK(read_bytes(good, 0, 4096) == std::vector<uint8_t>(4096, 0x77));
}

TEST_CASE("reduce: NULL and stale queue handles are refused as by the other queue commands",
          "[queues][reduce][negative][handle]") {
  Fixture f;
  trn_mem_t m = f.mem(4096);
  // What the other commands say for a NULL queue.
  REQUIRE(trn_queue_copy(nullptr, m, 0, m, 2048, 16, nullptr, nullptr) == TRN_ERROR_INVALID_HANDLE);
  const trn_sem_t timeline = timeline_of(f.queue);
  trn_queue_t gone = make_queue(core_at(f.device, 2));
  REQUIRE(trn_queue_destroy(gone) == TRN_SUCCESS);
  const std::vector<Call> calls = {
      {"NULL queue",
       [=](uint64_t *seq) {
         return trn_queue_reduce(nullptr, m, 0, m, 0, m, 0, 16, TRN_DTYPE_F32, TRN_REDUCE_SUM,
                                 nullptr, seq);
       },
       "queue handle is NULL"},
      {"destroyed queue",
       [=](uint64_t *seq) {
         return trn_queue_reduce(gone, m, 0, m, 0, m, 0, 16, TRN_DTYPE_F32, TRN_REDUCE_SUM, nullptr,
                                 seq);
       },
       "stale"},
      {"a semaphore as the queue",
       [=](uint64_t *seq) {
         return trn_queue_reduce(reinterpret_cast<trn_queue_t>(timeline), m, 0, m, 0, m, 0, 16,
                                 TRN_DTYPE_F32, TRN_REDUCE_SUM, nullptr, seq);
       },
       "expected a queue handle but got a semaphore handle"},
  };
  expect_refused(calls, TRN_ERROR_INVALID_HANDLE);
  CHECK(next_sequence(f.queue) == 1);
}

TEST_CASE("reduce: a read-only registered destination is refused, read-only operands work",
          "[queues][reduce][negative][register]") {
  Fixture f;
  const trn_queue_t q = f.queue;
  constexpr size_t kCount = 1024;
  std::vector<float> host_a(kCount), host_b(kCount), host_d(kCount, 42.0f);
  for (size_t i = 0; i < kCount; ++i) {
    host_a[i] = static_cast<float>(i);
    host_b[i] = 0.5f * static_cast<float>(i);
  }
  trn_mem_t ro_a = nullptr, ro_d = nullptr, rw_d = nullptr;
  REQUIRE(trn_mem_register_host(f.device, host_a.data(), kCount * 4, TRN_MEM_REGISTER_READ_ONLY,
                                &ro_a) == TRN_SUCCESS);
  REQUIRE(trn_mem_register_host(f.device, host_d.data(), kCount * 4, TRN_MEM_REGISTER_READ_ONLY,
                                &ro_d) == TRN_SUCCESS);
  trn_mem_t mb = f.mem(kCount * 4);
  write_vec(mb, 0, host_b);

  const std::vector<Call> calls = {
      {"read-only destination",
       [=](uint64_t *seq) {
         return trn_queue_reduce(q, ro_d, 0, ro_a, 0, mb, 0, kCount, TRN_DTYPE_F32, TRN_REDUCE_SUM,
                                 nullptr, seq);
       },
       "destination: host memory registered with TRN_MEM_REGISTER_READ_ONLY"},
      {"read-only destination, in place",
       [=](uint64_t *seq) {
         return trn_queue_reduce(q, ro_a, 0, ro_a, 0, mb, 0, kCount, TRN_DTYPE_F32, TRN_REDUCE_SUM,
                                 nullptr, seq);
       },
       "TRN_MEM_REGISTER_READ_ONLY"},
  };
  expect_refused(calls, TRN_ERROR_INVALID_ARGUMENT);
  CHECK(next_sequence(f.queue) == 1);
  CHECK(host_d == std::vector<float>(kCount, 42.0f));

  // Read-only memory as an operand, into writable registered memory.
  std::vector<float> host_out(kCount, -1.0f);
  REQUIRE(trn_mem_register_host(f.device, host_out.data(), kCount * 4, 0, &rw_d) == TRN_SUCCESS);
  reduce(f.queue, rw_d, 0, ro_a, 0, mb, 0, kCount, TRN_DTYPE_F32, TRN_REDUCE_SUM);
  for (size_t i = 0; i < kCount; ++i)
    if (host_out[i] != host_a[i] + host_b[i]) {
      FAIL_CHECK("element " << i << " is " << host_out[i]);
      break;
    }
  for (trn_mem_t m : {ro_a, ro_d, rw_d}) REQUIRE(trn_mem_free(m) == TRN_SUCCESS);
}

TEST_CASE("reduce: memory freed before the reduce runs faults the queue",
          "[queues][reduce][fault]") {
  Fixture f;
  constexpr size_t kCount = 2048;
  constexpr uint64_t kBytes = kCount * 4;
  const int which = GENERATE(0, 1, 2);  // destination, a, b
  const char *const names[] = {"destination", "operand a", "operand b"};
  INFO("freed: " << names[which]);
  trn_mem_t mems[3] = {alloc(f.pool, 8192 + 512), alloc(f.pool, 8192 + 1024), alloc(f.pool, 8192)};
  const uint64_t offsets[3] = {512, 1024, 0};
  const uint64_t d_address = mem_info(mems[0]).device_address;
  const uint64_t a_address = mem_info(mems[1]).device_address;
  trn_mem_t keep = f.mem(4096);
  for (trn_mem_t m : mems) REQUIRE(trn_mem_set(m, 0, 0x3f, 8192) == TRN_SUCCESS);
  trn_sem_t gate = make_sem(f.device);
  trn_sem_t later = make_sem(f.device);

  trn_sem_point_t wait{gate, 1};
  const trn_sync_t blocked{&wait, 1, nullptr, 0};
  REQUIRE(trn_queue_barrier(f.queue, &blocked, nullptr) == TRN_SUCCESS);  // #1
  uint64_t seq = 0;
  REQUIRE(trn_queue_reduce(f.queue, mems[0], offsets[0], mems[1], offsets[1], mems[2], offsets[2],
                           kCount, TRN_DTYPE_F32, TRN_REDUCE_SUM, nullptr, &seq) == TRN_SUCCESS);
  CHECK(seq == 2);
  trn_sem_point_t signal{later, 1};
  const trn_sync_t signals{nullptr, 0, &signal, 1};
  REQUIRE(trn_queue_memset(f.queue, keep, 0, 0x11, 4096, &signals, nullptr) == TRN_SUCCESS);  // #3
  // Freeing memory a queued command uses is allowed; the command faults when it runs.
  REQUIRE(trn_mem_free(mems[which]) == TRN_SUCCESS);
  REQUIRE(trn_sem_signal(gate, 1) == TRN_SUCCESS);

  CHECK(trn_queue_finish(f.queue, kLong) == TRN_ERROR_INVALID_HANDLE);
  {
    INFO(last_error());
    CHECK(error_contains("trn_queue_finish: "));
    CHECK(error_contains("reduce #2"));
    CHECK(error_contains("freed"));
  }
  const trn_queue_fault_t fault = fault_of(f.queue);
  CHECK(fault.result == TRN_ERROR_INVALID_HANDLE);
  CHECK(std::string(fault.command) == "reduce");
  CHECK(fault.sequence == 2);
  INFO("reason: " << fault.reason);
  CHECK(std::string(fault.reason).find(names[which]) != std::string::npos);
  CHECK(std::string(fault.reason).find("freed before the reduce ran") != std::string::npos);
  CHECK(fault.destination_address == d_address + offsets[0]);
  CHECK(fault.source_address == a_address + offsets[1]);
  CHECK(fault.size == kBytes);
  CHECK(fault.cancelled == 1);
  CHECK(trn_sem_wait(later, 1, kLong) == TRN_ERROR_CANCELLED);
  CHECK(read_bytes(keep, 0, 4096) == std::vector<uint8_t>(4096, 0));  // the memset never ran
  if (which != 0)  // the destination is as it was
    CHECK(read_bytes(mems[0], 0, 8192) == std::vector<uint8_t>(8192, 0x3f));

  // Reset: the queue takes reduces again.
  REQUIRE(trn_queue_reset(f.queue) == TRN_SUCCESS);
  CHECK(fault_of(f.queue).result == TRN_SUCCESS);
  trn_mem_t x = f.mem(4096);
  REQUIRE(trn_queue_reduce(f.queue, x, 0, keep, 0, keep, 0, 1024, TRN_DTYPE_I32, TRN_REDUCE_SUM,
                           nullptr, &seq) == TRN_SUCCESS);
  CHECK(seq == 4);
  finish(f.queue);
  for (int i = 0; i < 3; ++i)
    if (i != which) REQUIRE(trn_mem_free(mems[i]) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(gate) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(later) == TRN_SUCCESS);
}

TEST_CASE("reduce: a capturing queue refuses it, and the capture goes on",
          "[queues][reduce][capture]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device);
  trn_queue_t queue = make_queue(core_at(device, 0), TRN_QUEUE_KIND_COMPUTE);
  trn_mem_t ma = alloc(pool, 4096), mb = alloc(pool, 4096), md = alloc(pool, 4096);
  REQUIRE(trn_mem_set(ma, 0, 0, 4096) == TRN_SUCCESS);
  REQUIRE(trn_mem_set(mb, 0, 0, 4096) == TRN_SUCCESS);
  REQUIRE(trn_mem_set(md, 0, 0x77, 4096) == TRN_SUCCESS);

  REQUIRE(trn_queue_begin_capture(queue) == TRN_SUCCESS);
  REQUIRE(trn_queue_memset(queue, ma, 0, 0x11, 64, nullptr, nullptr) == TRN_SUCCESS);
  uint64_t seq = 7;
  CHECK(trn_queue_reduce(queue, md, 0, ma, 0, mb, 0, 16, TRN_DTYPE_F32, TRN_REDUCE_SUM, nullptr,
                         &seq) == TRN_ERROR_INVALID_ARGUMENT);
  {
    INFO(last_error());
    CHECK(error_contains("trn_queue_reduce: "));
    CHECK(error_contains("command (reduce) cannot be captured"));
  }
  CHECK(seq == 7);
  trn_program_t program = nullptr;
  INFO(last_error());
  REQUIRE(trn_queue_end_capture(queue, &program) == TRN_SUCCESS);
  REQUIRE(program != nullptr);
  finish(queue);
  CHECK(read_bytes(md, 0, 4096) == std::vector<uint8_t>(4096, 0x77));  // nothing ran
  CHECK(read_bytes(ma, 0, 64) == std::vector<uint8_t>(64, 0));

  // Outside the capture it runs.
  REQUIRE(trn_queue_reduce(queue, md, 0, ma, 0, mb, 0, 16, TRN_DTYPE_I32, TRN_REDUCE_SUM, nullptr,
                           &seq) == TRN_SUCCESS);
  CHECK(seq == 1);
  finish(queue);
  CHECK(read_vec<int32_t>(md, 0, 16) == std::vector<int32_t>(16, 0));

  REQUIRE(trn_program_destroy(program) == TRN_SUCCESS);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  for (trn_mem_t m : {ma, mb, md}) REQUIRE(trn_mem_free(m) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("reduce: simulated time and DMA activity grow with the bytes reduced",
          "[queues][reduce][telemetry]") {
  Fixture f;
  constexpr uint64_t kSmall = 1 << 20, kLarge = 64 << 20;
  trn_mem_t ma = f.mem(kLarge), mb = f.mem(kLarge), md = f.mem(kLarge);
  const trn_core_t core = core_at(f.device, 0);
  trn_core_activity_t before = TRN_CORE_ACTIVITY_INIT, after = TRN_CORE_ACTIVITY_INIT;
  REQUIRE(trn_core_get_activity(core, &before) == TRN_SUCCESS);

  trn_timestamp_t t[3] = {};
  REQUIRE(trn_queue_write_timestamp(f.queue, &t[0], nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_reduce(f.queue, md, 0, ma, 0, mb, 0, kSmall / 4, TRN_DTYPE_F32, TRN_REDUCE_SUM,
                           nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_write_timestamp(f.queue, &t[1], nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_reduce(f.queue, md, 0, ma, 0, mb, 0, kLarge / 4, TRN_DTYPE_F32, TRN_REDUCE_SUM,
                           nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_write_timestamp(f.queue, &t[2], nullptr, nullptr) == TRN_SUCCESS);
  finish(f.queue);
  REQUIRE(trn_core_get_activity(core, &after) == TRN_SUCCESS);

  const uint64_t small_ns = t[1].device_ns - t[0].device_ns;
  const uint64_t large_ns = t[2].device_ns - t[1].device_ns;
  INFO("1 MiB: " << small_ns << " ns, 64 MiB: " << large_ns << " ns of device time");
  CHECK(t[1].device_ns >= t[0].device_ns);
  CHECK(t[2].device_ns >= t[1].device_ns);
  CHECK(small_ns > 0);
  CHECK(large_ns > small_ns);
  CHECK(large_ns > 32 * small_ns);  // 64x the bytes; a fixed start cost aside

  // Activity: one operand's bytes per reduce, at the DMA engines' rate for reductions (half
  // of it on trn1 and trn2, whose reductions go through the collective engines).
  trn_device_properties_t props = TRN_DEVICE_PROPERTIES_INIT;
  REQUIRE(trn_device_get_properties(f.device, &props) == TRN_SUCCESS);
  const double share = props.generation == TRN_GENERATION_TRN3 ? 1.0 : 0.5;
  const double bytes_per_ns =
      static_cast<double>(props.dma_engine_bytes_per_s) * props.dma_engines_per_core * share / 1e9;
  CHECK(after.dma_bytes - before.dma_bytes == kSmall + kLarge);
  const auto expected =
      static_cast<uint64_t>(2 * 1900 + kSmall / bytes_per_ns + kLarge / bytes_per_ns);
  INFO("dma_busy_ns " << after.dma_busy_ns - before.dma_busy_ns << ", expected about " << expected);
  CHECK(after.dma_busy_ns - before.dma_busy_ns + 4 >= expected);
  CHECK(after.dma_busy_ns - before.dma_busy_ns <= expected + 4);
  CHECK(after.commands_completed - before.commands_completed == 5);
}
