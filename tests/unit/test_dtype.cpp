#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "isa/dtype.hpp"

using namespace trn::isa;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// An independent reference decoder for the narrow float formats, computed in double.
struct Format {
  const char *name;
  int exp_bits;
  int mant_bits;
  int bias;
  bool ieee;  // top exponent = inf/NaN; otherwise (e4m3fn) only S.1111.111 is NaN
  uint32_t (*encode)(float);
  float (*decode)(uint32_t);
  uint32_t count() const { return 1u << (1 + exp_bits + mant_bits); }
  uint32_t sign_bit() const { return 1u << (exp_bits + mant_bits); }
  // Largest finite positive code.
  uint32_t max_finite() const {
    const uint32_t exp_all = ((1u << exp_bits) - 1u) << mant_bits;
    return ieee ? exp_all - 1u : sign_bit() - 2u;
  }
  double ref(uint32_t bits) const {
    const bool neg = (bits & sign_bit()) != 0;
    const uint32_t e = (bits >> mant_bits) & ((1u << exp_bits) - 1u);
    const uint32_t m = bits & ((1u << mant_bits) - 1u);
    const uint32_t emax = (1u << exp_bits) - 1u;
    double mag;
    if (ieee && e == emax) {
      mag = m == 0 ? std::numeric_limits<double>::infinity()
                   : std::numeric_limits<double>::quiet_NaN();
    } else if (!ieee && e == emax && m == (1u << mant_bits) - 1u) {
      mag = std::numeric_limits<double>::quiet_NaN();
    } else if (e == 0) {
      mag = std::ldexp(static_cast<double>(m), 1 - bias - mant_bits);
    } else {
      mag = std::ldexp(static_cast<double>(m + (1u << mant_bits)),
                       static_cast<int>(e) - bias - mant_bits);
    }
    return neg ? -mag : mag;
  }
};

const Format kBf16{"bf16",
                   8,
                   7,
                   127,
                   true,
                   [](float v) -> uint32_t { return f32_to_bf16(v); },
                   [](uint32_t b) { return bf16_to_f32(static_cast<uint16_t>(b)); }};
const Format kF16{"f16",
                  5,
                  10,
                  15,
                  true,
                  [](float v) -> uint32_t { return f32_to_f16(v); },
                  [](uint32_t b) { return f16_to_f32(static_cast<uint16_t>(b)); }};
const Format kE4m3{"fp8e4m3",
                   4,
                   3,
                   7,
                   false,
                   [](float v) -> uint32_t { return f32_to_fp8e4m3(v); },
                   [](uint32_t b) { return fp8e4m3_to_f32(static_cast<uint8_t>(b)); }};
const Format kE5m2{"fp8e5m2",
                   5,
                   2,
                   15,
                   true,
                   [](float v) -> uint32_t { return f32_to_fp8e5m2(v); },
                   [](uint32_t b) { return fp8e5m2_to_f32(static_cast<uint8_t>(b)); }};
const Format *const kFormats[] = {&kBf16, &kF16, &kE4m3, &kE5m2};

std::string hex(uint32_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

// Collects mismatches and reports the first few, so that exhaustive loops do not produce
// hundreds of thousands of assertions.
struct Failures {
  std::vector<std::string> list;
  void add(const std::string &s) { list.push_back(s); }
  void check() const {
    std::string msg;
    for (size_t i = 0; i < list.size() && i < 10; ++i) msg += list[i] + "\n";
    INFO(list.size() << " failures\n" << msg);
    CHECK(list.empty());
  }
};

void check_encode(Failures &f, const Format &fmt, float in, uint32_t want, const char *what) {
  const uint32_t got = fmt.encode(in);
  if (got != want) {
    std::ostringstream os;
    os.precision(10);
    os << fmt.name << " " << what << ": encode(" << in << " = " << hex(std::bit_cast<uint32_t>(in))
       << ") = " << hex(got) << ", want " << hex(want);
    f.add(os.str());
  }
}

void exhaustive(const Format &fmt) {
  Failures f;
  uint32_t nans = 0;
  for (uint32_t bits = 0; bits < fmt.count(); ++bits) {
    const double want = fmt.ref(bits);
    const float got = fmt.decode(bits);
    const bool neg = (bits & fmt.sign_bit()) != 0;
    if (std::isnan(want)) {
      ++nans;
      if (!std::isnan(got) || std::signbit(got) != neg) f.add(fmt.name + (" decode " + hex(bits)));
      // NaN re-encodes to a NaN of the same sign.
      const uint32_t back = fmt.encode(got);
      if (!std::isnan(fmt.ref(back)) || ((back & fmt.sign_bit()) != 0) != neg)
        f.add(fmt.name + (" NaN round trip " + hex(bits) + " -> " + hex(back)));
      continue;
    }
    if (static_cast<double>(got) != want || std::signbit(got) != neg)
      f.add(fmt.name + (" decode " + hex(bits)));
    const uint32_t back = fmt.encode(got);
    if (back != bits) f.add(fmt.name + (" round trip " + hex(bits) + " -> " + hex(back)));
  }
  f.check();
  // NaN count: IEEE types have 2 * (2^mant - 1), e4m3fn exactly two.
  const uint32_t want_nans = fmt.ieee ? 2u * ((1u << fmt.mant_bits) - 1u) : 2u;
  CHECK(nans == want_nans);
}

// Every pair of adjacent representable values: the exact midpoint ties to even, one f32 ulp
// either side rounds down / up. Both signs.
void rounding(const Format &fmt) {
  Failures f;
  const uint32_t maxf = fmt.max_finite();
  for (uint32_t c = 0; c < maxf; ++c) {
    const double lo = fmt.ref(c);
    const double hi = fmt.ref(c + 1);
    const double mid = (lo + hi) / 2;
    const auto midf = static_cast<float>(mid);
    if (static_cast<double>(midf) != mid) {
      f.add(fmt.name + (" midpoint not exact in f32 at " + hex(c)));
      continue;
    }
    const uint32_t even = (c % 2 == 0) ? c : c + 1;
    const float below = std::nextafter(midf, 0.0f);
    const float above = std::nextafter(midf, kInf);
    for (const uint32_t s : {0u, fmt.sign_bit()}) {
      const float sg = s ? -1.0f : 1.0f;
      check_encode(f, fmt, sg * midf, even | s, "tie");
      check_encode(f, fmt, sg * below, c | s, "below tie");
      check_encode(f, fmt, sg * above, (c + 1) | s, "above tie");
      check_encode(f, fmt, sg * static_cast<float>(lo), c | s, "exact");
    }
  }
  f.check();
}

}  // namespace

TEST_CASE("dtype: names, sizes and parsing") {
  struct Row {
    DType t;
    const char *name;
    const char *alias;
    uint32_t size;
    bool is_float;
  };
  const Row rows[] = {
      {DType::kF32, "f32", "float32", 4, true},
      {DType::kBf16, "bf16", "bfloat16", 2, true},
      {DType::kF16, "f16", "float16", 2, true},
      {DType::kFp8E4m3, "fp8e4m3", "float8_e4m3fn", 1, true},
      {DType::kFp8E5m2, "fp8e5m2", "float8_e5m2", 1, true},
      {DType::kI32, "i32", "int32", 4, false},
      {DType::kI16, "i16", "int16", 2, false},
      {DType::kI8, "i8", "int8", 1, false},
      {DType::kU8, "u8", "uint8", 1, false},
  };
  STATIC_REQUIRE(kDTypeCount == 10);
  for (const Row &r : rows) {
    INFO(r.name);
    CHECK(dtype_size(r.t) == r.size);
    CHECK(std::string(dtype_name(r.t)) == r.name);
    CHECK(dtype_is_float(r.t) == r.is_float);
    CHECK(dtype_is_valid(r.t));
    CHECK(parse_dtype(r.name) == r.t);
    CHECK(parse_dtype(r.alias) == r.t);
  }
  CHECK(dtype_size(DType::kInvalid) == 0);
  CHECK_FALSE(dtype_is_valid(DType::kInvalid));
  CHECK_FALSE(dtype_is_valid(static_cast<DType>(10)));
  CHECK_FALSE(dtype_is_valid(static_cast<DType>(255)));
  CHECK_FALSE(dtype_is_float(DType::kInvalid));
  for (const char *bad : {"", "F32", "f64", "float", "fp8", "float8_e4m3", "invalid", "u16",
                          "bf16 ", " f16", "uint32"}) {
    INFO(bad);
    CHECK_FALSE(parse_dtype(bad).has_value());
  }
}

TEST_CASE("dtype: bf16 all 65536 patterns decode exactly and round-trip") {
  exhaustive(kBf16);
}
TEST_CASE("dtype: f16 all 65536 patterns decode exactly and round-trip") {
  exhaustive(kF16);
}
TEST_CASE("dtype: fp8e4m3 all 256 patterns decode exactly and round-trip") {
  exhaustive(kE4m3);
}
TEST_CASE("dtype: fp8e5m2 all 256 patterns decode exactly and round-trip") {
  exhaustive(kE5m2);
}

TEST_CASE("dtype: format constants") {
  CHECK(fp8e4m3_to_f32(0x7E) == 448.0f);
  CHECK(fp8e4m3_to_f32(0x08) == std::ldexp(1.0f, -6));
  CHECK(fp8e4m3_to_f32(0x01) == std::ldexp(1.0f, -9));
  CHECK(std::isnan(fp8e4m3_to_f32(0x7F)));
  CHECK(std::isnan(fp8e4m3_to_f32(0xFF)));
  CHECK(fp8e4m3_to_f32(0x78) == 256.0f);  // S.1111.000 is a normal number in e4m3fn
  CHECK(fp8e5m2_to_f32(0x7B) == 57344.0f);
  CHECK(fp8e5m2_to_f32(0x7C) == kInf);
  CHECK(fp8e5m2_to_f32(0xFC) == -kInf);
  CHECK(fp8e5m2_to_f32(0x04) == std::ldexp(1.0f, -14));
  CHECK(fp8e5m2_to_f32(0x01) == std::ldexp(1.0f, -16));
  CHECK(f16_to_f32(0x7BFF) == 65504.0f);
  CHECK(f16_to_f32(0x0001) == std::ldexp(1.0f, -24));
  CHECK(f16_to_f32(0x0400) == std::ldexp(1.0f, -14));
  CHECK(bf16_to_f32(0x7F7F) == std::ldexp(255.0f, 120));
  CHECK(bf16_to_f32(0x0001) == std::ldexp(1.0f, -133));
  CHECK(bf16_to_f32(0x0080) == std::numeric_limits<float>::min());
}

TEST_CASE("dtype: f32 to narrow floats rounds every midpoint to even") {
  for (const Format *fmt : kFormats) {
    SECTION(fmt->name) {
      rounding(*fmt);
    }
  }
}

TEST_CASE("dtype: f32 to narrow floats, overflow, subnormal edges, zeros and NaN") {
  for (const Format *fmt : kFormats) {
    SECTION(fmt->name) {
      Failures f;
      const uint32_t maxc = fmt->max_finite();
      const uint32_t sb = fmt->sign_bit();
      const auto maxv = static_cast<float>(fmt->ref(maxc));
      const double step = fmt->ref(maxc) - fmt->ref(maxc - 1);
      const auto over_mid = static_cast<float>(fmt->ref(maxc) + step / 2);
      REQUIRE(static_cast<double>(over_mid) == fmt->ref(maxc) + step / 2);
      // The overflow code: +inf for IEEE types, NaN (0x7F) for e4m3fn.
      const uint32_t ovf = fmt->ieee ? maxc + 1 : 0x7F;
      const uint32_t nan = fmt->ieee ? (maxc + 1) | (1u << (fmt->mant_bits - 1)) : 0x7F;
      for (const uint32_t s : {0u, sb}) {
        const float sg = s ? -1.0f : 1.0f;
        check_encode(f, *fmt, sg * maxv, maxc | s, "max finite");
        check_encode(f, *fmt, sg * std::nextafter(over_mid, 0.0f), maxc | s, "below max+half");
        // IEEE: max has an odd mantissa, so the tie goes up to inf. e4m3fn: max (mantissa
        // 110) is even, so the tie at 464 stays at 448 (as ml_dtypes); above it is NaN.
        check_encode(f, *fmt, sg * over_mid, (fmt->ieee ? ovf : maxc) | s, "max+half");
        check_encode(f, *fmt, sg * std::nextafter(over_mid, kInf), ovf | s, "above max+half");
        check_encode(f, *fmt, sg * std::numeric_limits<float>::max(), ovf | s, "FLT_MAX");
        check_encode(f, *fmt, sg * kInf, ovf | s, "inf");
        // Subnormal edges.
        const auto sub = static_cast<float>(fmt->ref(1));
        check_encode(f, *fmt, sg * sub, 1u | s, "min subnormal");
        check_encode(f, *fmt, sg * sub * 0.5f, 0u | s, "half min subnormal");
        check_encode(f, *fmt, sg * std::nextafter(sub * 0.5f, kInf), 1u | s, "above half");
        check_encode(f, *fmt, sg * std::nextafter(sub * 0.5f, 0.0f), 0u | s, "below half");
        check_encode(f, *fmt, sg * sub * 0.75f, 1u | s, "0.75 min subnormal");
        check_encode(f, *fmt, sg * sub * 0.25f, 0u | s, "0.25 min subnormal");
        check_encode(f, *fmt, sg * sub * 1.5f, 2u | s, "1.5 min subnormal (tie to even)");
        check_encode(f, *fmt, sg * std::numeric_limits<float>::denorm_min(), 0u | s, "f32 min");
        // The largest subnormal and the smallest normal.
        const uint32_t min_normal = 1u << fmt->mant_bits;
        const auto mn = static_cast<float>(fmt->ref(min_normal));
        check_encode(f, *fmt, sg * mn, min_normal | s, "min normal");
        check_encode(f, *fmt, sg * std::nextafter(mn, 0.0f), min_normal | s, "just below normal");
        // Zeros and NaNs keep the sign.
        check_encode(f, *fmt, sg * 0.0f, s, "zero");
        check_encode(f, *fmt, std::copysign(std::numeric_limits<float>::quiet_NaN(), sg), nan | s,
                     "qNaN");
        check_encode(f, *fmt, std::bit_cast<float>(0x7F800001u | (s ? 0x80000000u : 0u)), nan | s,
                     "sNaN");
        check_encode(f, *fmt, std::bit_cast<float>(0x7FFFFFFFu | (s ? 0x80000000u : 0u)), nan | s,
                     "NaN all ones");
      }
      f.check();
    }
  }
  // Spot values from the documentation.
  CHECK(f32_to_fp8e4m3(448.0f) == 0x7E);
  CHECK(f32_to_fp8e4m3(460.0f) == 0x7E);
  CHECK(f32_to_fp8e4m3(464.0f) == 0x7E);
  CHECK(f32_to_fp8e4m3(464.0001f) == 0x7F);
  CHECK(f32_to_fp8e4m3(-500.0f) == 0xFF);
  CHECK(f32_to_fp8e4m3(-kInf) == 0xFF);
  CHECK(f32_to_fp8e5m2(57344.0f) == 0x7B);
  CHECK(f32_to_fp8e5m2(61439.0f) == 0x7B);
  CHECK(f32_to_fp8e5m2(61440.0f) == 0x7C);
  CHECK(f32_to_fp8e5m2(-kInf) == 0xFC);
  CHECK(f32_to_f16(65504.0f) == 0x7BFF);
  CHECK(f32_to_f16(65519.0f) == 0x7BFF);
  CHECK(f32_to_f16(65520.0f) == 0x7C00);
  CHECK(f32_to_bf16(-std::numeric_limits<float>::quiet_NaN()) == 0xFFC0);
  CHECK(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()) == 0x7FC0);
  CHECK(f32_to_bf16(std::bit_cast<float>(0x7F800001u)) == 0x7FC0);
  CHECK(f32_to_bf16(std::bit_cast<float>(0xFFFFFFFFu)) == 0xFFC0);
  CHECK(f32_to_bf16(1.00390625f) == 0x3F80);  // 1 + 2^-8: tie, 0x3F80 is even
  CHECK(f32_to_bf16(1.01171875f) == 0x3F82);  // 1 + 3 * 2^-8: tie, rounds up to even
  CHECK(f32_to_f16(std::ldexp(1.0f, -25)) == 0x0000);
  CHECK(f32_to_f16(-std::ldexp(1.0f, -25)) == 0x8000);
  CHECK(f32_to_f16(std::ldexp(3.0f, -26)) == 0x0001);
  CHECK(f32_to_fp8e4m3(std::ldexp(1.0f, -10)) == 0x00);
  CHECK(f32_to_fp8e4m3(std::ldexp(3.0f, -11)) == 0x01);
}

TEST_CASE("dtype: f32 to integers rounds to even and saturates") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  SECTION("i32") {
    CHECK(f32_to_i32(0.5f) == 0);
    CHECK(f32_to_i32(-0.5f) == 0);
    CHECK(f32_to_i32(0.49999997f) == 0);
    CHECK(f32_to_i32(0.50000006f) == 1);
    CHECK(f32_to_i32(1.5f) == 2);
    CHECK(f32_to_i32(2.5f) == 2);
    CHECK(f32_to_i32(-1.5f) == -2);
    CHECK(f32_to_i32(-2.5f) == -2);
    CHECK(f32_to_i32(3.5f) == 4);
    CHECK(f32_to_i32(-0.0f) == 0);
    CHECK(f32_to_i32(8388606.5f) == 8388606);
    CHECK(f32_to_i32(8388607.5f) == 8388608);
    CHECK(f32_to_i32(8388609.0f) == 8388609);
    CHECK(f32_to_i32(-8388607.5f) == -8388608);
    CHECK(f32_to_i32(2147483520.0f) == 2147483520);
    CHECK(f32_to_i32(2147483648.0f) == INT32_MAX);
    CHECK(f32_to_i32(1e10f) == INT32_MAX);
    CHECK(f32_to_i32(std::numeric_limits<float>::max()) == INT32_MAX);
    CHECK(f32_to_i32(kInf) == INT32_MAX);
    CHECK(f32_to_i32(-2147483648.0f) == INT32_MIN);
    CHECK(f32_to_i32(-2147483904.0f) == INT32_MIN);
    CHECK(f32_to_i32(-1e10f) == INT32_MIN);
    CHECK(f32_to_i32(-kInf) == INT32_MIN);
    CHECK(f32_to_i32(nan) == 0);
    CHECK(f32_to_i32(-nan) == 0);
    CHECK(f32_to_i32(std::bit_cast<float>(0x7F800001u)) == 0);
    CHECK(f32_to_i32(std::bit_cast<float>(0xFFFFFFFFu)) == 0);
  }
  SECTION("i16") {
    CHECK(f32_to_i16(0.5f) == 0);
    CHECK(f32_to_i16(-0.5f) == 0);
    CHECK(f32_to_i16(1.5f) == 2);
    CHECK(f32_to_i16(2.5f) == 2);
    CHECK(f32_to_i16(-2.5f) == -2);
    CHECK(f32_to_i16(32766.5f) == 32766);
    CHECK(f32_to_i16(32767.0f) == 32767);
    CHECK(f32_to_i16(32767.5f) == 32767);
    CHECK(f32_to_i16(32768.0f) == 32767);
    CHECK(f32_to_i16(1e9f) == 32767);
    CHECK(f32_to_i16(kInf) == 32767);
    CHECK(f32_to_i16(-32768.0f) == -32768);
    CHECK(f32_to_i16(-32768.5f) == -32768);
    CHECK(f32_to_i16(-32769.0f) == -32768);
    CHECK(f32_to_i16(-kInf) == -32768);
    CHECK(f32_to_i16(nan) == 0);
    CHECK(f32_to_i16(-nan) == 0);
  }
  SECTION("i8") {
    CHECK(f32_to_i8(0.5f) == 0);
    CHECK(f32_to_i8(-0.5f) == 0);
    CHECK(f32_to_i8(1.5f) == 2);
    CHECK(f32_to_i8(2.5f) == 2);
    CHECK(f32_to_i8(-2.5f) == -2);
    CHECK(f32_to_i8(126.5f) == 126);
    CHECK(f32_to_i8(127.5f) == 127);
    CHECK(f32_to_i8(128.0f) == 127);
    CHECK(f32_to_i8(300.0f) == 127);
    CHECK(f32_to_i8(kInf) == 127);
    CHECK(f32_to_i8(-127.5f) == -128);
    CHECK(f32_to_i8(-128.5f) == -128);
    CHECK(f32_to_i8(-129.0f) == -128);
    CHECK(f32_to_i8(-kInf) == -128);
    CHECK(f32_to_i8(nan) == 0);
  }
  SECTION("u8") {
    CHECK(f32_to_u8(0.5f) == 0);
    CHECK(f32_to_u8(-0.5f) == 0);
    CHECK(f32_to_u8(1.5f) == 2);
    CHECK(f32_to_u8(2.5f) == 2);
    CHECK(f32_to_u8(-2.5f) == 0);
    CHECK(f32_to_u8(-1.0f) == 0);
    CHECK(f32_to_u8(253.5f) == 254);
    CHECK(f32_to_u8(254.5f) == 254);
    CHECK(f32_to_u8(255.0f) == 255);
    CHECK(f32_to_u8(255.5f) == 255);
    CHECK(f32_to_u8(256.0f) == 255);
    CHECK(f32_to_u8(kInf) == 255);
    CHECK(f32_to_u8(-kInf) == 0);
    CHECK(f32_to_u8(nan) == 0);
    CHECK(f32_to_u8(-nan) == 0);
  }
}

TEST_CASE("dtype: integers to f32") {
  auto load1 = [](DType t, const void *p) {
    float out = 0;
    load_f32(t, static_cast<const std::byte *>(p), &out, 1);
    return out;
  };
  const int32_t i32s[] = {0, 1, -1, 16777216, 16777217, 16777219, INT32_MAX, INT32_MIN};
  const float want[] = {0.0f,        1.0f,        -1.0f,         16777216.0f,
                        16777216.0f, 16777220.0f, 2147483648.0f, -2147483648.0f};
  for (size_t i = 0; i < std::size(i32s); ++i) CHECK(load1(DType::kI32, &i32s[i]) == want[i]);
  const int16_t i16 = -32768;
  CHECK(load1(DType::kI16, &i16) == -32768.0f);
  const int8_t i8 = -128;
  CHECK(load1(DType::kI8, &i8) == -128.0f);
  const uint8_t u8 = 255;
  CHECK(load1(DType::kU8, &u8) == 255.0f);
}

namespace {

const DType kAllTypes[] = {DType::kF32, DType::kBf16, DType::kF16, DType::kFp8E4m3, DType::kFp8E5m2,
                           DType::kI32, DType::kI16,  DType::kI8,  DType::kU8};

// Scalar reference for one element, through the scalar API.
float scalar_load(DType t, const std::byte *p) {
  switch (t) {
    case DType::kF32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kBf16:
    case DType::kF16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return t == DType::kBf16 ? bf16_to_f32(b) : f16_to_f32(b);
    }
    case DType::kFp8E4m3: return fp8e4m3_to_f32(static_cast<uint8_t>(*p));
    case DType::kFp8E5m2: return fp8e5m2_to_f32(static_cast<uint8_t>(*p));
    case DType::kI32: {
      int32_t b;
      std::memcpy(&b, p, 4);
      return static_cast<float>(b);
    }
    case DType::kI16: {
      int16_t b;
      std::memcpy(&b, p, 2);
      return static_cast<float>(b);
    }
    case DType::kI8: return static_cast<float>(static_cast<int8_t>(*p));
    case DType::kU8: return static_cast<float>(static_cast<uint8_t>(*p));
    case DType::kInvalid: break;
  }
  return 0.0f;
}

void scalar_store(DType t, float v, std::byte *p) {
  auto put = [p](auto x) { std::memcpy(p, &x, sizeof x); };
  switch (t) {
    case DType::kF32: put(v); return;
    case DType::kBf16: put(f32_to_bf16(v)); return;
    case DType::kF16: put(f32_to_f16(v)); return;
    case DType::kFp8E4m3: put(f32_to_fp8e4m3(v)); return;
    case DType::kFp8E5m2: put(f32_to_fp8e5m2(v)); return;
    case DType::kI32: put(f32_to_i32(v)); return;
    case DType::kI16: put(f32_to_i16(v)); return;
    case DType::kI8: put(f32_to_i8(v)); return;
    case DType::kU8: put(f32_to_u8(v)); return;
    case DType::kInvalid: return;
  }
}

// Inputs that exercise every class: random bit patterns (NaN, inf, subnormal, huge), values
// near the type's range with halves, exact ties of narrow types.
std::vector<float> random_floats(std::mt19937 &rng, size_t n) {
  std::vector<float> v(n);
  std::uniform_int_distribution<uint32_t> bits;
  std::uniform_int_distribution<int> kind(0, 3);
  std::uniform_int_distribution<int> small(-70000, 70000);
  std::uniform_int_distribution<int> expo(-30, 20);
  for (float &x : v) {
    switch (kind(rng)) {
      case 0: x = std::bit_cast<float>(bits(rng)); break;
      case 1: x = static_cast<float>(small(rng)) * 0.5f; break;
      case 2: x = std::ldexp(static_cast<float>(small(rng)), expo(rng)); break;
      default: x = static_cast<float>(small(rng) % 600) * 0.25f; break;
    }
  }
  return v;
}

bool same_bits(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

}  // namespace

TEST_CASE("dtype: bulk and strided conversions agree with the scalar ones") {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> byte(0, 255);
  for (const DType t : kAllTypes) {
    const auto size = static_cast<ptrdiff_t>(dtype_size(t));
    for (const size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{31}, size_t{32}, size_t{33},
                           size_t{100}, size_t{1000}}) {
      // Strides: contiguous, padded with an odd (so unaligned) gap, negative, negative padded.
      for (const ptrdiff_t stride : {size, 3 * size + 1, -size, -(2 * size + 3)}) {
        INFO(dtype_name(t) << " n=" << n << " stride=" << stride);
        const size_t span = n == 0 ? 0 : (n - 1) * static_cast<size_t>(std::abs(stride)) + size;
        // One byte of offset so that nothing is aligned.
        std::vector<std::byte> mem(span + 2);
        for (std::byte &b : mem) b = static_cast<std::byte>(byte(rng));
        std::byte *base = mem.data() + 1 + (stride < 0 && n > 0 ? span - size : 0);
        auto at = [&](size_t i) { return base + static_cast<ptrdiff_t>(i) * stride; };

        // Loads.
        std::vector<float> got(n + 1, -7.0f);
        if (stride == size) {
          load_f32(t, base, got.data(), n);
        } else {
          load_f32_strided(t, base, stride, got.data(), n);
        }
        size_t bad = 0;
        for (size_t i = 0; i < n; ++i) bad += !same_bits(got[i], scalar_load(t, at(i)));
        CHECK(bad == 0);
        CHECK(got[n] == -7.0f);  // nothing written past n

        // Stores; the gaps between strided elements keep their sentinel.
        const std::vector<float> in = random_floats(rng, n);
        std::vector<std::byte> want(mem.size(), std::byte{0xA5});
        std::vector<std::byte> out(mem.size(), std::byte{0xA5});
        std::byte *wbase = want.data() + (base - mem.data());
        std::byte *obase = out.data() + (base - mem.data());
        for (size_t i = 0; i < n; ++i)
          scalar_store(t, in[i], wbase + static_cast<ptrdiff_t>(i) * stride);
        if (stride == size) {
          store_f32(t, in.data(), obase, n);
        } else {
          store_f32_strided(t, in.data(), obase, stride, n);
        }
        CHECK(out == want);
      }
    }
  }
}

TEST_CASE("dtype: bulk store matches scalar on every f16 and bf16 tie") {
  // All bf16/f16 midpoints through the vectorised path (the scalar path is tested above).
  for (const Format *fmt : {&kBf16, &kF16}) {
    std::vector<float> in;
    for (uint32_t c = 0; c < fmt->max_finite(); ++c) {
      const auto mid = static_cast<float>((fmt->ref(c) + fmt->ref(c + 1)) / 2);
      in.push_back(mid);
      in.push_back(-mid);
      in.push_back(std::nextafter(mid, kInf));
    }
    const DType t = fmt == &kBf16 ? DType::kBf16 : DType::kF16;
    std::vector<uint16_t> out(in.size());
    store_f32(t, in.data(), reinterpret_cast<std::byte *>(out.data()), in.size());
    size_t bad = 0;
    for (size_t i = 0; i < in.size(); ++i) bad += out[i] != fmt->encode(in[i]);
    INFO(fmt->name);
    CHECK(bad == 0);
  }
}
