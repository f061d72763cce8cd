// Data types of the ISA and their conversions (docs/ISA.md, "Data types").
//
// Encoding f32 -> narrow float is done on the bit pattern: the normal range by re-biasing the
// exponent and rounding the dropped mantissa bits to nearest even with the carry running into
// the exponent (which also produces the overflow to inf / NaN), the subnormal range by letting
// the FPU round (adding a power of two whose ulp is the target's smallest subnormal). Both
// paths are computed and one is selected, so the bulk loops stay branch free and vectorise.
// Decoding narrow -> f32 is exact: a shift for bf16, a table for f16 and the fp8 types.
// The FPU-rounding steps assume the default rounding mode (to nearest); flush-to-zero modes do
// not matter, as no intermediate is subnormal.
#include "isa/dtype.hpp"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace trn::isa {

namespace {

// cond ? x : y, written with masks so that the compiler computes both sides. A plain ?: lets
// GCC sink a floating-point operation into one arm, and with -ftrapping-math (its default) it
// then refuses to if-convert the loop, which stops vectorisation.
inline uint32_t blend(bool cond, uint32_t x, uint32_t y) {
  const uint32_t m = 0u - static_cast<uint32_t>(cond);
  return (x & m) | (y & ~m);
}

// ---- f32 -> narrow float ------------------------------------------------------------------

// A narrow binary float with `kMant` mantissa bits, exponent bias `kBias` and `kExpBits`
// exponent bits; `kIeee` types reserve the top exponent for inf/NaN, the others (e4m3fn) only
// the all-ones pattern for NaN.
template <int kExpBits, int kMant, int kBias, bool kIeee>
struct Narrow {
  static constexpr int kShift = 23 - kMant;
  // All-ones exponent, zero mantissa: inf for IEEE types, the first "beyond max" code else.
  static constexpr uint32_t kInfCode = ((1u << kExpBits) - 1u) << kMant;
  static constexpr uint32_t kNanCode =
      kIeee ? (kInfCode | (1u << (kMant - 1))) : ((1u << (kExpBits + kMant)) - 1u);
  // Largest code a finite or infinite value may produce; anything above it overflows to it.
  static constexpr uint32_t kClampCode = kIeee ? kInfCode : kNanCode;
  // f32 bits of the smallest normal of the narrow type, 2^(1-bias).
  static constexpr uint32_t kMinNormalF32 = static_cast<uint32_t>(127 + 1 - kBias) << 23;
  // f32 bits of 2^(1 - bias - mant + 23): adding it to a value below the smallest normal
  // rounds that value to a multiple of the smallest subnormal, leaving the count in the low
  // mantissa bits of the sum.
  static constexpr uint32_t kMagicF32 = static_cast<uint32_t>((127 - kBias) + (23 - kMant) + 1)
                                        << 23;
  static constexpr uint32_t kRebias = static_cast<uint32_t>(127 - kBias) << 23;
  static constexpr uint32_t kHalfMinusOne = (1u << (kShift - 1)) - 1u;

  static inline uint32_t encode(float v) {
    const uint32_t u = std::bit_cast<uint32_t>(v);
    const uint32_t sign = (u >> 31) << (kExpBits + kMant);
    const uint32_t a = u & 0x7FFFFFFFu;
    // Normal range: rebias, round to nearest even, let the carry ripple into the exponent.
    // Wraps (harmlessly, unsigned) for inputs below the normal range, which take the other path.
    const uint32_t odd = (a >> kShift) & 1u;
    uint32_t normal = (a - kRebias + kHalfMinusOne + odd) >> kShift;
    normal = normal < kClampCode ? normal : kClampCode;  // overflow (and inf, NaN) clamps
    // Subnormal range: the FPU rounds |v| to a multiple of the smallest subnormal.
    const float sum = std::bit_cast<float>(a) + std::bit_cast<float>(kMagicF32);
    const uint32_t sub = std::bit_cast<uint32_t>(sum) - kMagicF32;
    uint32_t r = blend(a < kMinNormalF32, sub, normal);
    r = blend(a > 0x7F800000u, kNanCode, r);
    return r | sign;
  }
};

using F16 = Narrow<5, 10, 15, true>;
using E4m3 = Narrow<4, 3, 7, false>;
using E5m2 = Narrow<5, 2, 15, true>;

inline uint16_t enc_bf16(float v) {
  const uint32_t u = std::bit_cast<uint32_t>(v);
  // Unsigned wrap for NaNs with the top bits set is harmless: NaNs are replaced below.
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = ((u >> 16) & 0x8000u) | 0x7FC0u;
  return static_cast<uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}
inline float dec_bf16(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

// ---- narrow float -> f32 (exact), used to build the tables ---------------------------------

template <int kExpBits, int kMant, int kBias, bool kIeee>
float decode_slow(uint32_t bits) {
  const bool neg = ((bits >> (kExpBits + kMant)) & 1u) != 0;
  const uint32_t e = (bits >> kMant) & ((1u << kExpBits) - 1u);
  const uint32_t m = bits & ((1u << kMant) - 1u);
  const uint32_t emax = (1u << kExpBits) - 1u;
  float mag;
  if (kIeee && e == emax) {
    mag = m == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  } else if (!kIeee && e == emax && m == (1u << kMant) - 1u) {
    mag = std::numeric_limits<float>::quiet_NaN();
  } else if (e == 0) {
    mag = std::ldexp(static_cast<float>(m), 1 - kBias - kMant);
  } else {
    mag = std::ldexp(static_cast<float>(m | (1u << kMant)), static_cast<int>(e) - kBias - kMant);
  }
  return neg ? -mag : mag;
}

struct F16Table {
  std::array<float, 65536> v;
  F16Table() {
    for (uint32_t i = 0; i < 65536; ++i) v[i] = decode_slow<5, 10, 15, true>(i);
  }
};
struct Fp8Tables {
  std::array<float, 256> e4m3;
  std::array<float, 256> e5m2;
  Fp8Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      e4m3[i] = decode_slow<4, 3, 7, false>(i);
      e5m2[i] = decode_slow<5, 2, 15, true>(i);
    }
  }
};
const float *f16_table() {
  static const F16Table t;  // thread-safe static initialisation
  return t.v.data();
}
const Fp8Tables &fp8_tables() {
  static const Fp8Tables t;
  return t;
}

// ---- f32 -> integers ------------------------------------------------------------------------

// f32 bits <-> a signed integer ordered like the floats (NaNs aside); the map is its own
// inverse. Clamping in this domain needs no floating-point comparison (see blend()).
inline int32_t order_key(uint32_t u) {
  const auto s = static_cast<int32_t>(u);
  return s ^ ((s >> 31) & 0x7FFFFFFF);
}
inline float from_key(int32_t k) {
  return std::bit_cast<float>(static_cast<uint32_t>(k ^ ((k >> 31) & 0x7FFFFFFF)));
}
inline int32_t key_of(float v) {
  return order_key(std::bit_cast<uint32_t>(v));
}

// Clamps v to [lo, hi] (NaN -> 0) and rounds it to nearest even. |lo|, |hi| < 2^31.
inline float clamp_round(float v, float lo, float hi) {
  const uint32_t u = std::bit_cast<uint32_t>(v);
  int32_t k = order_key(u);
  const int32_t klo = key_of(lo);
  const int32_t khi = key_of(hi);
  k = k < klo ? klo : k;
  k = k > khi ? khi : k;
  k = static_cast<int32_t>(blend((u & 0x7FFFFFFFu) > 0x7F800000u, 0u, static_cast<uint32_t>(k)));
  const float c = from_key(k);
  // Adding 2^23 to |c| < 2^23 rounds it to an integer (nearest even); |c| >= 2^23 already is.
  const float mag = std::fabs(c);
  const float small = std::copysign((mag + 8388608.0f) - 8388608.0f, c);
  const bool big = std::bit_cast<uint32_t>(mag) >= 0x4B000000u;
  return std::bit_cast<float>(
      blend(big, std::bit_cast<uint32_t>(c), std::bit_cast<uint32_t>(small)));
}

// Saturating conversion for integer types whose range is exact in f32 (all but i32).
template <typename I>
inline I to_small_int(float v) {
  constexpr auto lo = static_cast<float>(std::numeric_limits<I>::min());
  constexpr auto hi = static_cast<float>(std::numeric_limits<I>::max());
  return static_cast<I>(static_cast<int32_t>(clamp_round(v, lo, hi)));
}

inline int32_t to_i32(float v) {
  // INT32_MAX is not a float: clamp to the largest float below 2^31, then saturate values
  // >= 2^31 (inf included) by comparing keys.
  constexpr float kTwo31 = 2147483648.0f;
  constexpr float kBelow2_31 = 2147483520.0f;
  const auto i = static_cast<int32_t>(clamp_round(v, -kTwo31, kBelow2_31));
  const int32_t k = key_of(v);
  const bool over = k >= key_of(kTwo31) && k <= key_of(std::numeric_limits<float>::infinity());
  return static_cast<int32_t>(blend(over, 0x7FFFFFFFu, static_cast<uint32_t>(i)));
}

// ---- bulk loops -----------------------------------------------------------------------------

// The loops run in blocks of kBlock elements staged through a local array: the conversion
// loop then has a constant trip count and no possible aliasing, so GCC vectorises it even at
// -O2 (its "very cheap" cost model), and a strided access only costs a scalar gather/scatter
// into the staging array. kContig: elements are sizeof(Bits) apart, else `stride` bytes.
constexpr size_t kBlock = 32;

template <typename Bits, bool kContig, typename Fn>
inline void load_loop(const std::byte *src, ptrdiff_t stride, float *dst, size_t n, Fn fn) {
  const ptrdiff_t s = kContig ? static_cast<ptrdiff_t>(sizeof(Bits)) : stride;
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    Bits tmp[kBlock];
    const std::byte *p = src + static_cast<ptrdiff_t>(i) * s;
    if constexpr (kContig) {
      std::memcpy(tmp, p, sizeof tmp);
    } else {
      for (size_t j = 0; j < kBlock; ++j)
        std::memcpy(&tmp[j], p + static_cast<ptrdiff_t>(j) * s, sizeof(Bits));
    }
    float out[kBlock];
    for (size_t j = 0; j < kBlock; ++j) out[j] = fn(tmp[j]);
    std::memcpy(dst + i, out, sizeof out);
  }
  for (; i < n; ++i) {
    Bits b;
    std::memcpy(&b, src + static_cast<ptrdiff_t>(i) * s, sizeof b);
    dst[i] = fn(b);
  }
}

template <typename Bits, bool kContig, typename Fn>
inline void store_loop(const float *src, std::byte *dst, ptrdiff_t stride, size_t n, Fn fn) {
  const ptrdiff_t s = kContig ? static_cast<ptrdiff_t>(sizeof(Bits)) : stride;
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    float in[kBlock];
    std::memcpy(in, src + i, sizeof in);
    Bits tmp[kBlock];
    for (size_t j = 0; j < kBlock; ++j) tmp[j] = fn(in[j]);
    std::byte *p = dst + static_cast<ptrdiff_t>(i) * s;
    if constexpr (kContig) {
      std::memcpy(p, tmp, sizeof tmp);
    } else {
      for (size_t j = 0; j < kBlock; ++j)
        std::memcpy(p + static_cast<ptrdiff_t>(j) * s, &tmp[j], sizeof(Bits));
    }
  }
  for (; i < n; ++i) {
    const Bits b = fn(src[i]);
    std::memcpy(dst + static_cast<ptrdiff_t>(i) * s, &b, sizeof b);
  }
}

template <bool kContig>
void load_any(DType t, const std::byte *src, ptrdiff_t stride, float *dst, size_t n) {
  switch (t) {
    case DType::kF32:
      load_loop<uint32_t, kContig>(src, stride, dst, n,
                                   [](uint32_t b) { return std::bit_cast<float>(b); });
      return;
    case DType::kBf16:
      load_loop<uint16_t, kContig>(src, stride, dst, n, [](uint16_t b) { return dec_bf16(b); });
      return;
    case DType::kF16: {
      const float *tab = f16_table();
      load_loop<uint16_t, kContig>(src, stride, dst, n, [tab](uint16_t b) { return tab[b]; });
      return;
    }
    case DType::kFp8E4m3: {
      const float *tab = fp8_tables().e4m3.data();
      load_loop<uint8_t, kContig>(src, stride, dst, n, [tab](uint8_t b) { return tab[b]; });
      return;
    }
    case DType::kFp8E5m2: {
      const float *tab = fp8_tables().e5m2.data();
      load_loop<uint8_t, kContig>(src, stride, dst, n, [tab](uint8_t b) { return tab[b]; });
      return;
    }
    case DType::kI32:
      load_loop<int32_t, kContig>(src, stride, dst, n,
                                  [](int32_t b) { return static_cast<float>(b); });
      return;
    case DType::kI16:
      load_loop<int16_t, kContig>(src, stride, dst, n,
                                  [](int16_t b) { return static_cast<float>(b); });
      return;
    case DType::kI8:
      load_loop<int8_t, kContig>(src, stride, dst, n,
                                 [](int8_t b) { return static_cast<float>(b); });
      return;
    case DType::kU8:
      load_loop<uint8_t, kContig>(src, stride, dst, n,
                                  [](uint8_t b) { return static_cast<float>(b); });
      return;
    case DType::kInvalid: break;
  }
  // Invalid type: nothing sensible to read; produce zeros rather than garbage.
  for (size_t i = 0; i < n; ++i) dst[i] = 0.0f;
}

template <bool kContig>
void store_any(DType t, const float *src, std::byte *dst, ptrdiff_t stride, size_t n) {
  switch (t) {
    case DType::kF32:
      store_loop<uint32_t, kContig>(src, dst, stride, n,
                                    [](float v) { return std::bit_cast<uint32_t>(v); });
      return;
    case DType::kBf16:
      store_loop<uint16_t, kContig>(src, dst, stride, n, [](float v) { return enc_bf16(v); });
      return;
    case DType::kF16:
      store_loop<uint16_t, kContig>(src, dst, stride, n,
                                    [](float v) { return static_cast<uint16_t>(F16::encode(v)); });
      return;
    case DType::kFp8E4m3:
      store_loop<uint8_t, kContig>(src, dst, stride, n,
                                   [](float v) { return static_cast<uint8_t>(E4m3::encode(v)); });
      return;
    case DType::kFp8E5m2:
      store_loop<uint8_t, kContig>(src, dst, stride, n,
                                   [](float v) { return static_cast<uint8_t>(E5m2::encode(v)); });
      return;
    case DType::kI32:
      store_loop<int32_t, kContig>(src, dst, stride, n, [](float v) { return to_i32(v); });
      return;
    case DType::kI16:
      store_loop<int16_t, kContig>(src, dst, stride, n,
                                   [](float v) { return to_small_int<int16_t>(v); });
      return;
    case DType::kI8:
      store_loop<int8_t, kContig>(src, dst, stride, n,
                                  [](float v) { return to_small_int<int8_t>(v); });
      return;
    case DType::kU8:
      store_loop<uint8_t, kContig>(src, dst, stride, n,
                                   [](float v) { return to_small_int<uint8_t>(v); });
      return;
    case DType::kInvalid: return;  // nothing to write
  }
}

}  // namespace

// ---- type properties --------------------------------------------------------------------------

uint32_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kI32: return 4;
    case DType::kBf16:
    case DType::kF16:
    case DType::kI16: return 2;
    case DType::kFp8E4m3:
    case DType::kFp8E5m2:
    case DType::kI8:
    case DType::kU8: return 1;
    case DType::kInvalid: break;
  }
  return 0;
}

const char *dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kBf16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kFp8E4m3: return "fp8e4m3";
    case DType::kFp8E5m2: return "fp8e5m2";
    case DType::kI32: return "i32";
    case DType::kI16: return "i16";
    case DType::kI8: return "i8";
    case DType::kU8: return "u8";
    case DType::kInvalid: break;
  }
  return "invalid";
}

std::optional<DType> parse_dtype(std::string_view name) {
  struct Entry {
    std::string_view name;
    DType type;
  };
  static constexpr Entry kNames[] = {
      {"f32", DType::kF32},         {"float32", DType::kF32},
      {"bf16", DType::kBf16},       {"bfloat16", DType::kBf16},
      {"f16", DType::kF16},         {"float16", DType::kF16},
      {"fp8e4m3", DType::kFp8E4m3}, {"float8_e4m3fn", DType::kFp8E4m3},
      {"fp8e5m2", DType::kFp8E5m2}, {"float8_e5m2", DType::kFp8E5m2},
      {"i32", DType::kI32},         {"int32", DType::kI32},
      {"i16", DType::kI16},         {"int16", DType::kI16},
      {"i8", DType::kI8},           {"int8", DType::kI8},
      {"u8", DType::kU8},           {"uint8", DType::kU8},
  };
  for (const Entry &e : kNames) {
    if (e.name == name) return e.type;
  }
  return std::nullopt;
}

bool dtype_is_float(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kBf16:
    case DType::kF16:
    case DType::kFp8E4m3:
    case DType::kFp8E5m2: return true;
    default: return false;
  }
}

bool dtype_is_valid(DType t) {
  const auto v = static_cast<uint32_t>(t);
  return v > 0 && v < kDTypeCount;
}

// ---- scalar conversions -----------------------------------------------------------------------

float bf16_to_f32(uint16_t bits) {
  return dec_bf16(bits);
}
uint16_t f32_to_bf16(float v) {
  return enc_bf16(v);
}
float f16_to_f32(uint16_t bits) {
  return f16_table()[bits];
}
uint16_t f32_to_f16(float v) {
  return static_cast<uint16_t>(F16::encode(v));
}
float fp8e4m3_to_f32(uint8_t bits) {
  return fp8_tables().e4m3[bits];
}
uint8_t f32_to_fp8e4m3(float v) {
  return static_cast<uint8_t>(E4m3::encode(v));
}
float fp8e5m2_to_f32(uint8_t bits) {
  return fp8_tables().e5m2[bits];
}
uint8_t f32_to_fp8e5m2(float v) {
  return static_cast<uint8_t>(E5m2::encode(v));
}
int32_t f32_to_i32(float v) {
  return to_i32(v);
}
int16_t f32_to_i16(float v) {
  return to_small_int<int16_t>(v);
}
int8_t f32_to_i8(float v) {
  return to_small_int<int8_t>(v);
}
uint8_t f32_to_u8(float v) {
  return to_small_int<uint8_t>(v);
}

// ---- bulk conversions -------------------------------------------------------------------------

void load_f32(DType t, const std::byte *src, float *dst, size_t n) {
  load_any<true>(t, src, 0, dst, n);
}
void store_f32(DType t, const float *src, std::byte *dst, size_t n) {
  store_any<true>(t, src, dst, 0, n);
}
void load_f32_strided(DType t, const std::byte *src, ptrdiff_t stride_bytes, float *dst, size_t n) {
  load_any<false>(t, src, stride_bytes, dst, n);
}
void store_f32_strided(DType t, const float *src, std::byte *dst, ptrdiff_t stride_bytes,
                       size_t n) {
  store_any<false>(t, src, dst, stride_bytes, n);
}

}  // namespace trn::isa
