// The element-wise ops of the Vector / Scalar / GpSimd engines against plain-loop references.
// The references are independent of the simulator's converters: they decode and encode every
// data type from its bit layout here, compute in double (or exact integer math), and apply the
// documented conversion rules (fp32 arithmetic, round to nearest even, saturating integers).
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <iomanip>
#include <limits>
#include <numbers>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "exec/core_memory.hpp"
#include "exec/exec_context.hpp"
#include "exec/ops.hpp"
#include "isa/builder.hpp"

namespace {

using trn::isa::AccessPattern;
using trn::isa::ActFunc;
using trn::isa::AluOp;
using trn::isa::Dim;
using trn::isa::DType;
using trn::isa::Instruction;
using trn::isa::MemSpace;
using trn::isa::Opcode;
using trn::isa::pattern;
using trn::isa::psum;
using trn::isa::sbuf;
namespace exec = trn::sim::exec;
namespace isa = trn::isa;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

const std::vector<DType> kAllTypes{DType::kF32,     DType::kBf16,    DType::kF16,
                                   DType::kFp8E4m3, DType::kFp8E5m2, DType::kI32,
                                   DType::kI16,     DType::kI8,      DType::kU8};

// ---------------------------------------------------------------------------------------------
// Independent model of the data types.

struct Fmt {
  int ebits, mbits, bias;
  bool fn;  // e4m3fn: no infinities, NaN = S.1111.111
};

std::optional<Fmt> fmt_of(DType t) {
  switch (t) {
    case DType::kF32: return Fmt{8, 23, 127, false};
    case DType::kBf16: return Fmt{8, 7, 127, false};
    case DType::kF16: return Fmt{5, 10, 15, false};
    case DType::kFp8E4m3: return Fmt{4, 3, 7, true};
    case DType::kFp8E5m2: return Fmt{5, 2, 15, false};
    default: return std::nullopt;
  }
}

bool is_float(DType t) {
  return fmt_of(t).has_value();
}

uint32_t size_of(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kI32: return 4;
    case DType::kBf16:
    case DType::kF16:
    case DType::kI16: return 2;
    default: return 1;
  }
}

const char *name_of(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kBf16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kFp8E4m3: return "e4m3";
    case DType::kFp8E5m2: return "e5m2";
    case DType::kI32: return "i32";
    case DType::kI16: return "i16";
    case DType::kI8: return "i8";
    case DType::kU8: return "u8";
    default: return "?";
  }
}

double int_min(DType t) {
  switch (t) {
    case DType::kI32: return -2147483648.0;
    case DType::kI16: return -32768.0;
    case DType::kI8: return -128.0;
    default: return 0.0;
  }
}
double int_max(DType t) {
  switch (t) {
    case DType::kI32: return 2147483647.0;
    case DType::kI16: return 32767.0;
    case DType::kI8: return 127.0;
    default: return 255.0;
  }
}

double max_finite(const Fmt &f) {
  int emax = (1 << f.ebits) - 2 - f.bias;
  double mant = 2.0 - std::ldexp(1.0, -f.mbits);
  if (f.fn) {  // the all-ones exponent holds normal numbers except the NaN mantissa
    emax += 1;
    mant = 2.0 - std::ldexp(1.0, 1 - f.mbits);
  }
  return std::ldexp(mant, emax);
}

double decode(DType t, uint32_t bits) {
  switch (t) {
    case DType::kI32: return static_cast<int32_t>(bits);
    case DType::kI16: return static_cast<int16_t>(bits & 0xFFFFu);
    case DType::kI8: return static_cast<int8_t>(bits & 0xFFu);
    case DType::kU8: return bits & 0xFFu;
    default: break;
  }
  const Fmt f = *fmt_of(t);
  const uint32_t emask = (1u << f.ebits) - 1, mmask = (1u << f.mbits) - 1;
  const bool neg = ((bits >> (f.ebits + f.mbits)) & 1u) != 0;
  const uint32_t e = (bits >> f.mbits) & emask, m = bits & mmask;
  double mag;
  if (!f.fn && e == emask) {
    mag = m != 0 ? kNaN : kInf;
  } else if (f.fn && e == emask && m == mmask) {
    mag = kNaN;
  } else if (e == 0) {
    mag = std::ldexp(static_cast<double>(m), 1 - f.bias - f.mbits);
  } else {
    mag = std::ldexp(static_cast<double>(m + (1u << f.mbits)),
                     static_cast<int>(e) - f.bias - f.mbits);
  }
  return neg ? -mag : mag;
}

// Bits of a value the type represents exactly.
uint32_t encode(DType t, double v) {
  if (!is_float(t)) {
    const auto i = static_cast<int64_t>(v);
    if (static_cast<double>(i) != v || v < int_min(t) || v > int_max(t)) {
      throw std::logic_error("encode: not representable");
    }
    const uint64_t mask = (uint64_t{1} << (8 * size_of(t))) - 1;
    return static_cast<uint32_t>(static_cast<uint64_t>(i) & mask);
  }
  const Fmt f = *fmt_of(t);
  const uint32_t emask = (1u << f.ebits) - 1;
  const uint32_t sign = std::signbit(v) ? 1u << (f.ebits + f.mbits) : 0u;
  if (std::isnan(v)) {
    return f.fn ? (emask << f.mbits) | ((1u << f.mbits) - 1)
                : (emask << f.mbits) | (1u << (f.mbits - 1));
  }
  if (std::isinf(v)) {
    if (f.fn) throw std::logic_error("encode: no infinity");
    return sign | (emask << f.mbits);
  }
  const double a = std::fabs(v);
  if (a == 0.0) return sign;
  int ex = 0;
  std::frexp(a, &ex);
  const int e = ex - 1;
  uint32_t biased, mant;
  double m;
  if (e < 1 - f.bias) {
    biased = 0;
    m = std::ldexp(a, f.mbits - (1 - f.bias));
  } else {
    biased = static_cast<uint32_t>(e + f.bias);
    m = std::ldexp(a, f.mbits - e) - std::ldexp(1.0, f.mbits);
  }
  if (m != std::floor(m) || a > max_finite(f)) throw std::logic_error("encode: not representable");
  mant = static_cast<uint32_t>(m);
  return sign | (biased << f.mbits) | mant;
}

// The documented conversion of a value (fp32 or exact) to type t: RNE, overflow to inf (NaN for
// e4m3), integers saturate with NaN -> 0.
double round_to(DType t, double v) {
  if (!is_float(t)) {
    if (std::isnan(v)) return 0.0;
    return std::clamp(std::nearbyint(v), int_min(t), int_max(t));
  }
  if (t == DType::kF32) return static_cast<double>(static_cast<float>(v));
  const Fmt f = *fmt_of(t);
  if (std::isnan(v)) return kNaN;
  if (std::isinf(v)) return f.fn ? kNaN : v;
  const double a = std::fabs(v);
  if (a == 0.0) return v;
  int ex = 0;
  std::frexp(a, &ex);
  const int q = std::max(ex - 1, 1 - f.bias) - f.mbits;
  const double r = std::ldexp(std::nearbyint(std::ldexp(a, -q)), q);
  if (r > max_finite(f)) return f.fn ? kNaN : std::copysign(kInf, v);
  return std::copysign(r, v);
}

// fp32 arithmetic result (exact double, rounded once to fp32) stored to t.
double to_dst(DType t, double exact) {
  return round_to(t, round_to(DType::kF32, exact));
}

// The spacing of t's values at v (1 for integers).
double ulp(DType t, double v) {
  if (!is_float(t)) return 1.0;
  const Fmt f = *fmt_of(t);
  if (!std::isfinite(v)) return 0.0;
  int ex = 0;
  std::frexp(std::fabs(v) == 0.0 ? std::ldexp(1.0, -f.bias) : std::fabs(v), &ex);
  return std::ldexp(1.0, std::max(ex - 1, 1 - f.bias) - f.mbits);
}

bool same(double got, double want) {
  return (std::isnan(got) && std::isnan(want)) || got == want;
}

// Within rel*|want| + abs of the reference, or one unit of the destination type away from it
// (the final rounding may fall either side when the fp32 value differs in its last bits).
bool near(DType t, double got, double want, double rel, double abs) {
  if (same(got, want)) return true;
  if (!std::isfinite(got) || !std::isfinite(want)) return false;
  const double d = std::fabs(got - want);
  return d <= rel * std::fabs(want) + abs || d <= ulp(t, want) * 1.0000001;
}

// Bit pattern widened as the bitvec ops do: signed integers sign-extend, others zero-extend.
uint32_t widen(DType t, uint32_t bits) {
  switch (t) {
    case DType::kI16:
      return static_cast<uint32_t>(static_cast<int32_t>(static_cast<int16_t>(bits)));
    case DType::kI8: return static_cast<uint32_t>(static_cast<int32_t>(static_cast<int8_t>(bits)));
    default: return size_of(t) == 4 ? bits : bits & ((1u << (8 * size_of(t))) - 1);
  }
}
uint32_t truncate(DType t, uint32_t bits) {
  return size_of(t) == 4 ? bits : bits & ((1u << (8 * size_of(t))) - 1);
}

// ---------------------------------------------------------------------------------------------
// A core's memories with host access by access pattern.

struct Core {
  exec::CoreMemory mem{128, 192 * 1024, 16 * 1024};
  exec::ExecContext ctx{mem, {}, {}};

  std::byte *at(const AccessPattern &ap, uint32_t p, uint64_t i) {
    int64_t off = 0;
    uint64_t rem = i;
    for (uint32_t d = ap.num_dims; d-- > 0;) {
      const uint64_t c = ap.dims[d].count;
      off += static_cast<int64_t>(rem % c) * ap.dims[d].stride;
      rem /= c;
    }
    std::byte *base = ap.space == MemSpace::kPsum ? mem.psum(ap.partition_start + p, ap.offset)
                                                  : mem.sbuf(ap.partition_start + p, ap.offset);
    return base + off * static_cast<int64_t>(size_of(ap.dtype));
  }
  void put_bits(const AccessPattern &ap, uint32_t p, uint64_t i, uint32_t bits) {
    std::memcpy(at(ap, p, i), &bits, size_of(ap.dtype));  // little endian
  }
  uint32_t get_bits(const AccessPattern &ap, uint32_t p, uint64_t i) {
    uint32_t bits = 0;
    std::memcpy(&bits, at(ap, p, i), size_of(ap.dtype));
    return bits;
  }
  // Row-major [partition][free element].
  void write(const AccessPattern &ap, const std::vector<double> &v) {
    const uint64_t n = ap.free_elements();
    for (uint32_t p = 0; p < ap.partition_count; ++p)
      for (uint64_t i = 0; i < n; ++i) put_bits(ap, p, i, encode(ap.dtype, v[p * n + i]));
  }
  void write_bits(const AccessPattern &ap, const std::vector<uint32_t> &v) {
    const uint64_t n = ap.free_elements();
    for (uint32_t p = 0; p < ap.partition_count; ++p)
      for (uint64_t i = 0; i < n; ++i) put_bits(ap, p, i, v[p * n + i]);
  }
  std::vector<uint32_t> read_bits(const AccessPattern &ap) {
    std::vector<uint32_t> out;
    const uint64_t n = ap.free_elements();
    for (uint32_t p = 0; p < ap.partition_count; ++p)
      for (uint64_t i = 0; i < n; ++i) out.push_back(get_bits(ap, p, i));
    return out;
  }
  std::vector<double> read(const AccessPattern &ap) {
    std::vector<double> out;
    for (uint32_t b : read_bits(ap)) out.push_back(decode(ap.dtype, b));
    return out;
  }
};

struct Rng {
  std::mt19937_64 g;
  explicit Rng(uint64_t seed) : g(seed) {}
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(g); }
  int64_t integer(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(g);
  }
  uint32_t bits() { return static_cast<uint32_t>(g()); }
};

// A value of type t in about [lo, hi]: a third of them integers (ties for comparisons).
double random_value(Rng &r, DType t, double lo, double hi) {
  for (;;) {
    double x = r.uniform(lo, hi);
    if (r.integer(0, 2) == 0) x = std::round(x);
    const double v = round_to(t, round_to(DType::kF32, x));
    if (std::isfinite(v)) return v;
  }
}

std::vector<double> random_values(Rng &r, const AccessPattern &ap, double lo, double hi) {
  std::vector<double> v(ap.elements());
  for (double &x : v) x = random_value(r, ap.dtype, lo, hi);
  return v;
}

// A range every type holds (u8 is kept non-negative).
void natural_range(DType t, double &lo, double &hi) {
  lo = t == DType::kU8 ? 0.0 : -8.0;
  hi = t == DType::kU8 ? 16.0 : 8.0;
}

// Counts and reports the elements where `ok` fails.
void expect_all(const std::string &what, const std::vector<double> &got,
                const std::vector<double> &want,
                const std::function<bool(size_t, double, double)> &ok) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!ok(i, got[i], want[i])) {
      if (bad++ == 0) first = i;
    }
  }
  std::ostringstream msg;
  msg << std::setprecision(17) << what << ": " << bad << " of " << got.size() << " wrong";
  if (bad != 0) msg << "; first [" << first << "] got " << got[first] << " want " << want[first];
  INFO(msg.str());
  CHECK(bad == 0);
}

void expect_exact(const std::string &what, const std::vector<double> &got,
                  const std::vector<double> &want) {
  expect_all(what, got, want, [](size_t, double g, double w) { return same(g, w); });
}

Instruction make(Opcode op, uint8_t func, const AccessPattern &dst, const AccessPattern &src0,
                 const AccessPattern &src1 = {}) {
  Instruction i;
  i.opcode = op;
  i.engine = op == Opcode::kActivation ? isa::Engine::kScalar : isa::Engine::kVector;
  i.func = func;
  i.dst = dst;
  i.src0 = src0;
  i.src1 = src1;
  return i;
}

uint8_t u8(AluOp op) {
  return static_cast<uint8_t>(op);
}
uint8_t u8(ActFunc f) {
  return static_cast<uint8_t>(f);
}

const std::vector<AluOp> kArithOps{
    AluOp::kBypass, AluOp::kAdd,       AluOp::kSubtract,   AluOp::kMultiply,  AluOp::kMax,
    AluOp::kMin,    AluOp::kEqual,     AluOp::kNotEqual,   AluOp::kGreater,   AluOp::kGreaterEqual,
    AluOp::kLess,   AluOp::kLessEqual, AluOp::kLogicalAnd, AluOp::kLogicalOr, AluOp::kLogicalXor,
    AluOp::kPower,  AluOp::kAbsMax,    AluOp::kAbsMin,     AluOp::kDivide};
const std::vector<AluOp> kBitOps{AluOp::kBitwiseNot, AluOp::kBitwiseAnd, AluOp::kBitwiseOr,
                                 AluOp::kBitwiseXor, AluOp::kShiftLeft,  AluOp::kShiftRight};

double ref_alu(AluOp op, double a, double b) {
  auto t = [](bool v) { return v ? 1.0 : 0.0; };
  const bool nan = std::isnan(a) || std::isnan(b);
  switch (op) {
    case AluOp::kBypass: return a;
    case AluOp::kAdd: return a + b;
    case AluOp::kSubtract: return a - b;
    case AluOp::kMultiply: return a * b;
    case AluOp::kMax: return nan ? kNaN : std::max(a, b);
    case AluOp::kMin: return nan ? kNaN : std::min(a, b);
    case AluOp::kEqual: return t(a == b);
    case AluOp::kNotEqual: return t(a != b);
    case AluOp::kGreater: return t(a > b);
    case AluOp::kGreaterEqual: return t(a >= b);
    case AluOp::kLess: return t(a < b);
    case AluOp::kLessEqual: return t(a <= b);
    case AluOp::kLogicalAnd: return t(a != 0 && b != 0);
    case AluOp::kLogicalOr: return t(a != 0 || b != 0);
    case AluOp::kLogicalXor: return t((a != 0) != (b != 0));
    case AluOp::kPower: return std::pow(a, b);
    case AluOp::kAbsMax: return nan ? kNaN : std::max(std::fabs(a), std::fabs(b));
    case AluOp::kAbsMin: return nan ? kNaN : std::min(std::fabs(a), std::fabs(b));
    case AluOp::kDivide: return a / b;
    default: throw std::logic_error("ref_alu: not arithmetic");
  }
}

uint32_t ref_bits(AluOp op, uint32_t a, uint32_t b) {
  switch (op) {
    case AluOp::kBitwiseNot: return ~a;
    case AluOp::kBitwiseAnd: return a & b;
    case AluOp::kBitwiseOr: return a | b;
    case AluOp::kBitwiseXor: return a ^ b;
    case AluOp::kShiftLeft: return b >= 32 ? 0 : static_cast<uint32_t>(uint64_t{a} << b);
    case AluOp::kShiftRight: return b >= 32 ? 0 : a >> b;
    default: throw std::logic_error("ref_bits: not bitvec");
  }
}

double ref_act(ActFunc f, double x) {
  switch (f) {
    case ActFunc::kIdentity: return x;
    case ActFunc::kRelu: return x > 0 ? x : 0.0;
    // 1 + erf(t) = erfc(-t) and 1 + tanh(u) = 2 / (1 + exp(-2u)): the literal forms cancel to
    // nothing in double for x below about -6.
    case ActFunc::kGelu: return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    case ActFunc::kGeluTanh: {
      const double u = std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x);
      return x / (1.0 + std::exp(-2.0 * u));
    }
    case ActFunc::kSilu: return x / (1.0 + std::exp(-x));
    case ActFunc::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
    case ActFunc::kTanh: return std::tanh(x);
    case ActFunc::kExp: return std::exp(x);
    case ActFunc::kLog: return std::log(x);
    case ActFunc::kSqrt: return std::sqrt(x);
    case ActFunc::kRsqrt: return 1.0 / std::sqrt(x);
    case ActFunc::kReciprocal: return 1.0 / x;
    case ActFunc::kSquare: return x * x;
    case ActFunc::kErf: return std::erf(x);
    case ActFunc::kSin: return std::sin(x);
    case ActFunc::kCos: return std::cos(x);
    case ActFunc::kGeluDx:
      return 0.5 * std::erfc(-x / std::sqrt(2.0)) +
             x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
  }
  throw std::logic_error("ref_act");
}

bool is_exact_op(AluOp op) {
  return op != AluOp::kPower;
}

// Runs tensor_tensor `op` on random inputs in the given patterns and checks every element.
void check_tensor_tensor(Core &core, Rng &rng, AluOp op, const AccessPattern &dst,
                         const AccessPattern &a, const AccessPattern &b, const std::string &what) {
  double alo, ahi, blo, bhi;
  natural_range(a.dtype, alo, ahi);
  natural_range(b.dtype, blo, bhi);
  if (op == AluOp::kPower) {
    alo = 0.0;
    ahi = 4.0;
    blo = b.dtype == DType::kU8 ? 0.0 : -3.0;
    bhi = 3.0;
  }
  core.write(a, random_values(rng, a, alo, ahi));
  core.write(b, random_values(rng, b, blo, bhi));
  const std::vector<double> va = core.read(a), vb = core.read(b);  // as stored (b may alias a)
  exec::op_tensor_tensor(make(Opcode::kTensorTensor, u8(op), dst, a, b), core.ctx);
  std::vector<double> want(va.size());
  for (size_t i = 0; i < va.size(); ++i) {
    want[i] =
        to_dst(dst.dtype, ref_alu(op, round_to(DType::kF32, va[i]), round_to(DType::kF32, vb[i])));
  }
  const std::string name = what + " " + isa::alu_op_name(op) + " " + name_of(a.dtype) + "," +
                           name_of(b.dtype) + "->" + name_of(dst.dtype);
  if (is_exact_op(op)) {
    expect_exact(name, core.read(dst), want);
  } else {
    expect_all(name, core.read(dst), want,
               [&](size_t, double g, double w) { return near(dst.dtype, g, w, 1e-6, 0.0); });
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------

TEST_CASE("ops: tensor_tensor arithmetic operators on every dtype pair class") {
  Core core;
  Rng rng(1);
  std::vector<std::array<DType, 3>> triples;  // a, b, dst
  for (DType t : kAllTypes) {
    triples.push_back({t, t, t});
    triples.push_back({t, DType::kBf16, DType::kF32});
    triples.push_back({DType::kF32, DType::kF16, t});
  }
  triples.push_back({DType::kI8, DType::kU8, DType::kI16});
  triples.push_back({DType::kFp8E4m3, DType::kFp8E5m2, DType::kBf16});
  triples.push_back({DType::kI32, DType::kF16, DType::kFp8E4m3});
  for (const auto &[ta, tb, td] : triples) {
    const auto a = sbuf(ta, 0, 8, 0, {{1, 24}});
    const auto b = sbuf(tb, 0, 8, 4096, {{1, 24}});
    const auto d = sbuf(td, 0, 8, 8192, {{1, 24}});
    for (AluOp op : kArithOps) check_tensor_tensor(core, rng, op, d, a, b, "contiguous");
  }
}

TEST_CASE("ops: tensor_tensor bitvec operators on integer and float bit patterns") {
  Core core;
  Rng rng(2);
  std::vector<std::array<DType, 3>> triples;
  for (DType t : kAllTypes) triples.push_back({t, t, t});
  triples.push_back({DType::kI8, DType::kI32, DType::kI16});
  triples.push_back({DType::kU8, DType::kI8, DType::kI32});
  triples.push_back({DType::kI16, DType::kU8, DType::kU8});
  triples.push_back({DType::kI32, DType::kI32, DType::kI8});
  for (const auto &[ta, tb, td] : triples) {
    const auto a = sbuf(ta, 16, 8, 64, {{1, 40}});
    const auto b = sbuf(tb, 16, 8, 4096, {{1, 40}});
    const auto d = sbuf(td, 16, 8, 8192, {{1, 40}});
    for (AluOp op : kBitOps) {
      const bool shift = op == AluOp::kShiftLeft || op == AluOp::kShiftRight;
      std::vector<uint32_t> va(a.elements()), vb(b.elements());
      for (auto &x : va) x = truncate(ta, rng.bits());
      for (auto &x : vb)
        x = truncate(tb, shift ? static_cast<uint32_t>(rng.integer(0, 40)) : rng.bits());
      core.write_bits(a, va);
      core.write_bits(b, vb);
      exec::op_tensor_tensor(make(Opcode::kTensorTensor, u8(op), d, a, b), core.ctx);
      std::vector<double> want(va.size()), got;
      for (size_t i = 0; i < va.size(); ++i) {
        want[i] = truncate(td, ref_bits(op, widen(ta, va[i]), widen(tb, vb[i])));
      }
      for (uint32_t x : core.read_bits(d)) got.push_back(x);
      expect_exact(std::string(isa::alu_op_name(op)) + " " + name_of(ta) + "," + name_of(tb) +
                       "->" + name_of(td),
                   got, want);
    }
  }
}

TEST_CASE("ops: tensor_tensor over access-pattern shape classes") {
  Core core;
  Rng rng(3);
  const std::vector<AluOp> ops{AluOp::kAdd, AluOp::kMultiply, AluOp::kMax, AluOp::kDivide,
                               AluOp::kGreaterEqual};
  struct Case {
    const char *name;
    AccessPattern d, a, b;
  };
  const std::vector<Case> cases{
      {"strided", sbuf(DType::kF32, 0, 16, 0, {{3, 16}}),
       sbuf(DType::kBf16, 0, 16, 1024, {{2, 16}}), sbuf(DType::kF32, 0, 16, 2048, {{1, 16}})},
      {"negative stride", sbuf(DType::kBf16, 0, 4, 0, {{1, 64}}),
       sbuf(DType::kF32, 0, 4, 4 * 63 + 1024, {{-1, 64}}),
       sbuf(DType::kF16, 0, 4, 2 * 70 + 4096, {{-2, 32}, {1, 2}})},
      {"3 dims", sbuf(DType::kF32, 0, 8, 4 * 45, {{1, 3}, {-15, 4}, {3, 5}}),
       sbuf(DType::kI16, 0, 8, 2048, {{20, 3}, {5, 4}, {1, 5}}),
       sbuf(DType::kF32, 0, 8, 4096, {{1, 3}, {3, 4}, {12, 5}})},
      {"4 dims", sbuf(DType::kF32, 0, 4, 24, {{100, 2}, {30, 3}, {-6, 2}, {2, 3}}),
       sbuf(DType::kBf16, 0, 4, 2048, {{36, 2}, {12, 3}, {6, 2}, {1, 3}}),
       sbuf(DType::kFp8E4m3, 0, 4, 4096, {{-1, 2}, {2, 3}, {6, 2}, {12, 3}})},
      {"partitions 32..63", sbuf(DType::kF32, 32, 32, 0, {{1, 8}}),
       sbuf(DType::kF32, 32, 32, 512, {{1, 8}}), sbuf(DType::kF32, 32, 32, 1024, {{1, 8}})},
      {"partitions 64..127", sbuf(DType::kBf16, 64, 64, 0, {{1, 8}}),
       sbuf(DType::kBf16, 64, 64, 512, {{1, 8}}), sbuf(DType::kF32, 64, 64, 1024, {{1, 8}})},
      {"different partitions", sbuf(DType::kF32, 96, 32, 0, {{1, 8}}),
       sbuf(DType::kF32, 0, 32, 512, {{1, 8}}), sbuf(DType::kF32, 40, 32, 1024, {{1, 8}})},
      {"[P,1]", sbuf(DType::kF32, 0, 128, 0, {{1, 1}}), sbuf(DType::kF32, 0, 128, 64, {{1, 1}}),
       sbuf(DType::kI32, 0, 128, 128, {})},
      {"PSUM", psum(DType::kF32, 0, 16, 0, {{1, 32}}), psum(DType::kF32, 0, 16, 2048, {{1, 32}}),
       sbuf(DType::kBf16, 0, 16, 0, {{1, 32}})},
  };
  for (const Case &c : cases) {
    for (AluOp op : ops) check_tensor_tensor(core, rng, op, c.d, c.a, c.b, c.name);
  }
}

TEST_CASE("ops: sources are read before the destination is written") {
  Core core;
  Rng rng(4);
  SECTION("in place") {
    const auto t = sbuf(DType::kF32, 0, 16, 0, {{1, 32}});
    check_tensor_tensor(core, rng, AluOp::kSubtract, t, t, sbuf(DType::kF32, 0, 16, 512, {{1, 32}}),
                        "in place");
    check_tensor_tensor(core, rng, AluOp::kAdd, t, sbuf(DType::kF32, 0, 16, 512, {{1, 32}}), t,
                        "in place");
  }
  SECTION("destination at later partitions of the same bytes") {
    const auto a = sbuf(DType::kF32, 0, 64, 0, {{1, 16}});
    const auto b = sbuf(DType::kF32, 0, 64, 1024, {{1, 16}});
    check_tensor_tensor(core, rng, AluOp::kAdd, sbuf(DType::kF32, 32, 64, 0, {{1, 16}}), a, b,
                        "shifted up");
    check_tensor_tensor(core, rng, AluOp::kAdd, sbuf(DType::kF32, 0, 64, 0, {{1, 16}}),
                        sbuf(DType::kF32, 32, 64, 0, {{1, 16}}), b, "shifted down");
    check_tensor_tensor(core, rng, AluOp::kAdd, sbuf(DType::kF32, 1, 64, 60, {{-1, 16}}),
                        sbuf(DType::kF32, 0, 64, 0, {{1, 16}}), b, "shifted, reversed");
  }
  SECTION("destination a few elements along the same rows") {
    // fp32 rows are computed where they lie when nothing but the same element is shared; a
    // destination that overlaps a source's row at another element is not.
    const auto b = sbuf(DType::kF32, 0, 16, 1024, {{1, 32}});
    const auto row = sbuf(DType::kF32, 0, 16, 0, {{1, 32}});
    check_tensor_tensor(core, rng, AluOp::kAdd, sbuf(DType::kF32, 0, 16, 8, {{1, 32}}), row, b,
                        "two elements later");
    check_tensor_tensor(core, rng, AluOp::kAdd, row, sbuf(DType::kF32, 0, 16, 8, {{1, 32}}), b,
                        "two elements earlier");
    check_tensor_tensor(core, rng, AluOp::kMultiply, sbuf(DType::kF32, 0, 16, 128, {{1, 32}}), row,
                        b, "right after the source's row");
    check_tensor_tensor(core, rng, AluOp::kAdd, row, row, row, "every operand the same tile");
    for (uint64_t offset : {uint64_t{8}, uint64_t{128}}) {
      const auto dst = sbuf(DType::kF32, 0, 16, offset, {{1, 32}});
      auto v = random_values(rng, row, -4, 4);
      core.write(row, v);
      auto ts = make(Opcode::kTensorScalar, u8(AluOp::kMultiply), dst, row);
      ts.imm = {3.0f, 0.0f};
      exec::op_tensor_scalar(ts, core.ctx);
      std::vector<double> want(v.size());
      for (size_t i = 0; i < v.size(); ++i) want[i] = to_dst(DType::kF32, v[i] * 3.0);
      expect_exact("tensor_scalar to offset " + std::to_string(offset), core.read(dst), want);
    }
  }
  SECTION("copy, activation and tensor_scalar shifted") {
    const auto src = sbuf(DType::kBf16, 0, 64, 0, {{1, 16}});
    const auto dst = sbuf(DType::kBf16, 16, 64, 0, {{1, 16}});
    auto v = random_values(rng, src, -4, 4);
    core.write(src, v);
    exec::op_tensor_copy(make(Opcode::kTensorCopy, 0, dst, src), core.ctx);
    expect_exact("raw copy", core.read(dst), v);

    core.write(src, v);
    exec::op_tensor_copy(make(Opcode::kTensorCopy, 0, sbuf(DType::kF32, 8, 64, 0, {{1, 8}}),
                              sbuf(DType::kBf16, 0, 64, 0, {{1, 8}})),
                         core.ctx);
    // bf16 [P,16] at offset 0 and f32 [P,8] at offset 0 share bytes: the result is the input.
    std::vector<double> first(64 * 8);
    for (size_t p = 0; p < 64; ++p)
      for (size_t i = 0; i < 8; ++i) first[p * 8 + i] = v[p * 16 + i];
    // (the f32 dst holds 8 values per partition, the first 8 of each source row)
    expect_exact("converting copy", core.read(sbuf(DType::kF32, 8, 64, 0, {{1, 8}})), first);

    core.write(src, v);
    auto act = make(Opcode::kActivation, u8(ActFunc::kSquare), dst, src);
    act.imm = {1.0f, 0.0f};
    exec::op_activation(act, core.ctx);
    std::vector<double> sq(v.size());
    for (size_t i = 0; i < v.size(); ++i) sq[i] = to_dst(DType::kBf16, v[i] * v[i]);
    expect_exact("activation", core.read(dst), sq);

    core.write(src, v);
    auto ts = make(Opcode::kTensorScalar, u8(AluOp::kAdd), dst, src);
    ts.imm = {1.0f, 0.0f};
    exec::op_tensor_scalar(ts, core.ctx);
    std::vector<double> plus(v.size());
    for (size_t i = 0; i < v.size(); ++i) plus[i] = to_dst(DType::kBf16, v[i] + 1.0);
    expect_exact("tensor_scalar", core.read(dst), plus);
  }
}

TEST_CASE("ops: tensor_scalar arithmetic with immediates, reverse flags and tile operands") {
  Core core;
  Rng rng(5);
  const std::vector<std::array<DType, 2>> pairs{
      {DType::kBf16, DType::kF32},    {DType::kF32, DType::kBf16},   {DType::kI16, DType::kI32},
      {DType::kFp8E4m3, DType::kF16}, {DType::kU8, DType::kFp8E5m2}, {DType::kF32, DType::kI8}};
  size_t counter = 0;
  for (const auto &[ts, td] : pairs) {
    for (AluOp op0 : kArithOps) {
      for (int variant = 0; variant < 2; ++variant) {
        ++counter;
        const AluOp op1 = kArithOps[(counter * 7) % kArithOps.size()];
        const bool rev0 = (counter & 1) != 0, rev1 = (counter & 2) != 0;
        const bool tiles = variant == 1;
        const bool has_pow = op0 == AluOp::kPower || op1 == AluOp::kPower;
        const auto src = sbuf(ts, 32, 32, 0, {{2, 12}});
        const auto dst = sbuf(td, 32, 32, 1024, {{1, 12}});
        const auto col0 = sbuf(DType::kBf16, 32, 32, 2048, {{1, 1}});
        const auto col1 = sbuf(DType::kI32, 32, 32, 2052, {{1, 1}});
        double lo, hi;
        natural_range(ts, lo, hi);
        if (has_pow) lo = std::max(lo, 0.25), hi = std::min(hi, 3.0);
        core.write(src, random_values(rng, src, lo, hi));
        const auto vs = core.read(src);
        Instruction inst = make(Opcode::kTensorScalar, u8(op0), dst, src);
        inst.func2 = u8(op1);
        inst.flags = (rev0 ? isa::kFlagReverse0 : 0u) | (rev1 ? isa::kFlagReverse1 : 0u);
        std::vector<double> s0(32), s1(32);
        if (tiles) {
          inst.flags |= isa::kFlagOperand0Tile | isa::kFlagOperand1Tile;
          inst.src1 = col0;
          inst.src2 = col1;
          core.write(col0, random_values(rng, col0, has_pow ? 0.5 : -4.0, has_pow ? 2.0 : 4.0));
          core.write(col1, random_values(rng, col1, has_pow ? 1.0 : -4.0, 4.0));
          s0 = core.read(col0);
          s1 = core.read(col1);
          inst.imm = {99.0f, 99.0f};  // ignored
        } else {
          inst.imm = {has_pow ? 1.5f : 1.75f, has_pow ? 2.0f : -0.5f};
          std::fill(s0.begin(), s0.end(), inst.imm[0]);
          std::fill(s1.begin(), s1.end(), inst.imm[1]);
        }
        exec::op_tensor_scalar(inst, core.ctx);
        std::vector<double> want(vs.size());
        for (size_t i = 0; i < vs.size(); ++i) {
          const size_t p = i / 12;
          double x = round_to(DType::kF32, vs[i]);
          if (op0 != AluOp::kBypass) {
            x = round_to(DType::kF32, rev0 ? ref_alu(op0, s0[p], x) : ref_alu(op0, x, s0[p]));
          }
          if (op1 != AluOp::kBypass) {
            x = round_to(DType::kF32, rev1 ? ref_alu(op1, s1[p], x) : ref_alu(op1, x, s1[p]));
          }
          want[i] = round_to(td, x);
        }
        std::ostringstream name;
        name << "(" << name_of(ts) << " " << isa::alu_op_name(op0) << (rev0 ? "~" : "") << ") "
             << isa::alu_op_name(op1) << (rev1 ? "~" : "") << " -> " << name_of(td)
             << (tiles ? " tiles" : " imm");
        if (has_pow) {
          expect_all(name.str(), core.read(dst), want,
                     [&](size_t, double g, double w) { return near(td, g, w, 1e-5, 1e-6); });
        } else {
          expect_exact(name.str(), core.read(dst), want);
        }
      }
    }
  }
}

TEST_CASE("ops: tensor_scalar bitvec operators and mixed domains") {
  Core core;
  Rng rng(6);
  struct Case {
    DType src, dst;
    AluOp op0, op1;
    float imm0, imm1;
    bool rev0;
  };
  const std::vector<Case> cases{
      {DType::kI32, DType::kI32, AluOp::kBitwiseAnd, AluOp::kBypass, 240.0f, 0.0f, false},
      {DType::kI16, DType::kI16, AluOp::kShiftLeft, AluOp::kBitwiseOr, 3.0f, 5.0f, false},
      {DType::kI8, DType::kI32, AluOp::kShiftRight, AluOp::kBypass, 4.0f, 0.0f, false},
      {DType::kU8, DType::kU8, AluOp::kShiftRight, AluOp::kBitwiseXor, 40.0f, 255.0f, false},
      {DType::kI32, DType::kI32, AluOp::kShiftLeft, AluOp::kBypass, 3.0f, 0.0f, true},
      {DType::kI32, DType::kI16, AluOp::kBitwiseNot, AluOp::kBypass, 0.0f, 0.0f, false},
      {DType::kF32, DType::kF32, AluOp::kBitwiseAnd, AluOp::kBypass, 2147483647.0f, 0.0f, false},
      {DType::kBf16, DType::kBf16, AluOp::kBitwiseXor, AluOp::kBypass, -32768.0f, 0.0f, false},
      // mixed: bits -> fp32 by int32 value, fp32 -> bits by the float -> int32 rule
      {DType::kI16, DType::kF32, AluOp::kShiftLeft, AluOp::kMultiply, 2.0f, 0.5f, false},
      {DType::kF32, DType::kI32, AluOp::kMultiply, AluOp::kBitwiseAnd, 2.5f, 0xFF, false},
      {DType::kU8, DType::kBf16, AluOp::kAdd, AluOp::kShiftRight, 1.0f, 1.0f, false},
  };
  for (const Case &c : cases) {
    const auto src = sbuf(c.src, 8, 16, 0, {{1, 20}});
    const auto dst = sbuf(c.dst, 8, 16, 1024, {{1, 20}});
    std::vector<uint32_t> bits(src.elements());
    for (auto &b : bits) {
      b = truncate(c.src, rng.bits());
      if (is_float(c.src) && std::isnan(decode(c.src, b))) b = 0;
    }
    if (c.src == DType::kF32 && c.op0 == AluOp::kMultiply) {
      for (auto &b : bits) b = encode(c.src, random_value(rng, c.src, -100, 100));
    }
    core.write_bits(src, bits);
    Instruction inst = make(Opcode::kTensorScalar, u8(c.op0), dst, src);
    inst.func2 = u8(c.op1);
    inst.imm = {c.imm0, c.imm1};
    inst.flags = c.rev0 ? isa::kFlagReverse0 : 0u;
    exec::op_tensor_scalar(inst, core.ctx);

    std::vector<double> want(bits.size()), got;
    for (size_t i = 0; i < bits.size(); ++i) {
      bool in_bits = isa::alu_op_is_bitvec(c.op0);
      uint32_t xb = widen(c.src, bits[i]);
      double xf = round_to(DType::kF32, decode(c.src, bits[i]));
      const AluOp ops[2] = {c.op0, c.op1};
      const double imms[2] = {c.imm0, c.imm1};
      for (int k = 0; k < 2; ++k) {
        if (ops[k] == AluOp::kBypass) continue;
        const bool want_bits = isa::alu_op_is_bitvec(ops[k]);
        if (want_bits && !in_bits)
          xb = static_cast<uint32_t>(static_cast<int32_t>(round_to(DType::kI32, xf)));
        if (!want_bits && in_bits) xf = round_to(DType::kF32, static_cast<int32_t>(xb));
        in_bits = want_bits;
        if (in_bits) {
          const auto s =
              static_cast<uint32_t>(static_cast<int32_t>(round_to(DType::kI32, imms[k])));
          xb = k == 0 && c.rev0 ? ref_bits(ops[k], s, xb) : ref_bits(ops[k], xb, s);
        } else {
          xf = round_to(DType::kF32, ref_alu(ops[k], xf, imms[k]));
        }
      }
      want[i] = in_bits ? truncate(c.dst, xb) : encode(c.dst, round_to(c.dst, xf));
    }
    for (uint32_t b : core.read_bits(dst)) got.push_back(b);
    expect_exact(std::string(name_of(c.src)) + " " + isa::alu_op_name(c.op0) + " " +
                     isa::alu_op_name(c.op1) + " -> " + name_of(c.dst),
                 got, want);
  }

  SECTION("bitvec operands from [P,1] tiles") {
    const auto src = sbuf(DType::kI32, 0, 4, 0, {{1, 8}});
    const auto dst = sbuf(DType::kI32, 0, 4, 64, {{1, 8}});
    const auto mask = sbuf(DType::kI32, 0, 4, 128, {{1, 1}});
    const auto shift = sbuf(DType::kF32, 0, 4, 132, {{1, 1}});
    std::vector<uint32_t> v(32);
    for (auto &x : v) x = rng.bits();
    core.write_bits(src, v);
    core.write_bits(mask, {0x0000FFFFu, 0xFFFF0000u, 0x80000001u, 0xFFFFFFFFu});
    core.write(shift, {1.0, 2.5, 31.0, 33.0});  // 2.5 -> 2 (nearest even)
    Instruction inst = make(Opcode::kTensorScalar, u8(AluOp::kBitwiseAnd), dst, src);
    inst.func2 = u8(AluOp::kShiftLeft);
    inst.flags = isa::kFlagOperand0Tile | isa::kFlagOperand1Tile;
    inst.src1 = mask;
    inst.src2 = shift;
    exec::op_tensor_scalar(inst, core.ctx);
    const uint32_t masks[4] = {0x0000FFFFu, 0xFFFF0000u, 0x80000001u, 0xFFFFFFFFu};
    const uint32_t shifts[4] = {1, 2, 31, 33};
    std::vector<double> want, got;
    for (size_t i = 0; i < 32; ++i)
      want.push_back(ref_bits(AluOp::kShiftLeft, v[i] & masks[i / 8], shifts[i / 8]));
    for (uint32_t b : core.read_bits(dst)) got.push_back(b);
    expect_exact("tile operands", got, want);
  }
}

TEST_CASE("ops: activation functions with immediates, tiles and accumulate") {
  Core core;
  Rng rng(7);
  const std::vector<std::array<DType, 2>> pairs{
      {DType::kF32, DType::kF32},     {DType::kBf16, DType::kF32},    {DType::kF32, DType::kBf16},
      {DType::kF16, DType::kF16},     {DType::kFp8E4m3, DType::kF32}, {DType::kI8, DType::kF32},
      {DType::kF32, DType::kFp8E5m2}, {DType::kU8, DType::kI16}};
  for (uint32_t fi = 0; fi < isa::kActFuncCount; ++fi) {
    const auto f = static_cast<ActFunc>(fi);
    double lo = -5.0, hi = 5.0;
    float scale = 1.25f, bias = -0.5f;
    switch (f) {
      case ActFunc::kLog:
      case ActFunc::kSqrt:
      case ActFunc::kRsqrt: lo = 0.1, hi = 6.0, bias = 0.5f; break;
      case ActFunc::kReciprocal: lo = 0.25, hi = 6.0, scale = -1.25f; break;
      case ActFunc::kExp: lo = -6.0, hi = 6.0; break;
      default: break;
    }
    for (int mode = 0; mode < 3; ++mode) {  // 0: immediates, 1: tiles, 2: tiles + accumulate
      for (const auto &[ts, td] : pairs) {
        const uint32_t p0 = mode == 0 ? 0 : 64, np = mode == 0 ? 16 : 64;
        const auto src = sbuf(ts, p0, np, 0, {{1, 24}});
        const auto dst = sbuf(td, p0, np, 1024, {{1, 24}});
        const auto scale_t = sbuf(DType::kF32, p0, np, 2048, {{1, 1}});
        const auto bias_t = sbuf(DType::kBf16, p0, np, 2052, {{1, 1}});
        const auto acc_t = sbuf(mode == 2 && ts == DType::kBf16 ? DType::kBf16 : DType::kF32, p0,
                                np, 2056, {{1, 1}});
        core.write(src, random_values(rng, src, std::max(lo, ts == DType::kU8 ? 0.0 : lo), hi));
        const auto vs = core.read(src);
        Instruction inst = make(Opcode::kActivation, u8(f), dst, src);
        std::vector<double> sc(np, scale), bi(np, bias);
        inst.imm = {scale, bias};
        if (mode > 0) {
          inst.flags = isa::kFlagScaleTile | isa::kFlagBiasTile;
          inst.src2 = scale_t;
          inst.src1 = bias_t;
          inst.imm = {1e9f, 1e9f};
          const bool positive_pre = f == ActFunc::kLog || f == ActFunc::kSqrt ||
                                    f == ActFunc::kRsqrt || f == ActFunc::kReciprocal;
          core.write(scale_t, random_values(rng, scale_t, positive_pre ? 0.5 : -1.5, 1.5));
          core.write(bias_t, random_values(rng, bias_t, positive_pre ? 0.25 : -1.0, 1.0));
          sc = core.read(scale_t);
          bi = core.read(bias_t);
        }
        if (mode == 2) {
          inst.flags |= isa::kFlagAccumulate;
          inst.dst2 = acc_t;
          core.write(acc_t, std::vector<double>(np, 77.0));
        }
        exec::op_activation(inst, core.ctx);
        std::vector<double> want(vs.size()), rel(vs.size()), sums(np, 0.0), abs_sums(np, 0.0);
        for (size_t i = 0; i < vs.size(); ++i) {
          const size_t p = i / 24;
          // The affine part is fp32 arithmetic; the function itself is compared in double.
          const float pre =
              static_cast<float>(static_cast<float>(vs[i]) * static_cast<float>(sc[p])) +
              static_cast<float>(bi[p]);
          const double y = round_to(DType::kF32, ref_act(f, pre));
          // fp32 rounding inside the function's argument (x/sqrt2, the cubic of gelu_tanh) is
          // amplified by its condition number, about x^2 in the negative tail of the gelus.
          const bool gelu = f == ActFunc::kGelu || f == ActFunc::kGeluTanh || f == ActFunc::kGeluDx;
          rel[i] = 2e-6 * (gelu ? 1.0 + static_cast<double>(pre) * pre : 1.0);
          want[i] = round_to(td, y);
          sums[p] += y;
          abs_sums[p] += std::fabs(y);
        }
        // gelu_dx crosses zero (x ≈ -0.75): relative error means nothing there, and an fp32
        // argument off by an ulp moves the value by up to |gelu''| ≈ 0.5 of it.
        const double abs_tol = f == ActFunc::kGeluDx ? 1e-6 : 1e-30;
        std::ostringstream name;
        name << isa::act_func_name(f) << " " << name_of(ts) << "->" << name_of(td) << " mode "
             << mode;
        expect_all(name.str(), core.read(dst), want,
                   [&](size_t i, double g, double w) { return near(td, g, w, rel[i], abs_tol); });
        if (mode == 2) {
          std::vector<double> want_sum(np);
          for (size_t p = 0; p < np; ++p) want_sum[p] = round_to(acc_t.dtype, sums[p]);
          expect_all(name.str() + " accumulate", core.read(acc_t), want_sum,
                     [&](size_t p, double g, double w) {
                       return near(acc_t.dtype, g, w, 0.0, 4e-6 * abs_sums[p] + 1e-30);
                     });
        }
      }
    }
  }
}

TEST_CASE("ops: tensor_reduce over the last axes, all axes, negated") {
  Core core;
  Rng rng(8);
  struct Shape {
    const char *name;
    std::vector<Dim> dims;  // src dims; the offset is chosen so negative strides stay inside
    int64_t min_elem;       // lowest element offset reached (<= 0)
    int32_t k;
    uint32_t outer;
  };
  const std::vector<Shape> shapes{
      {"[P,6,10] last 1", {{10, 6}, {1, 10}}, 0, 1, 6},
      {"[P,6,10] all (0)", {{10, 6}, {1, 10}}, 0, 0, 1},
      {"[P,6,10] last 2", {{10, 6}, {1, 10}}, 0, 2, 1},
      {"[P,3,4,5] last 2, permuted", {{1, 3}, {15, 4}, {3, 5}}, 0, 2, 3},
      {"[P,3,5] last 1, negative outer stride", {{-5, 3}, {1, 5}}, -10, 1, 3},
      {"[P,4,2,3,2] last 3", {{12, 4}, {6, 2}, {2, 3}, {1, 2}}, 0, 3, 4},
  };
  const std::vector<AluOp> float_ops{AluOp::kAdd,       AluOp::kSubtract,  AluOp::kMultiply,
                                     AluOp::kMax,       AluOp::kMin,       AluOp::kLogicalAnd,
                                     AluOp::kLogicalOr, AluOp::kLogicalXor};
  const std::vector<std::array<DType, 2>> float_pairs{{DType::kF32, DType::kF32},
                                                      {DType::kBf16, DType::kF32},
                                                      {DType::kI16, DType::kI32},
                                                      {DType::kFp8E5m2, DType::kBf16}};
  const std::vector<std::array<DType, 2>> bit_pairs{{DType::kI32, DType::kI32},
                                                    {DType::kI8, DType::kI32},
                                                    {DType::kU8, DType::kI16},
                                                    {DType::kI16, DType::kU8}};
  int counter = 0;
  for (const Shape &sh : shapes) {
    auto run = [&](DType ts, DType td, AluOp op) {
      const bool negate = (++counter % 2) == 0;
      AccessPattern src = sbuf(ts, 8, 8, 0, {});
      src.num_dims = static_cast<uint32_t>(sh.dims.size());
      for (size_t d = 0; d < sh.dims.size(); ++d) src.dims[d] = sh.dims[d];
      src.offset = static_cast<uint64_t>(-sh.min_elem) * size_of(ts);
      const auto dst = sbuf(td, 8, 8, 1024, {{1, sh.outer}});
      const size_t n = src.free_elements(), inner = n / sh.outer;
      Instruction inst = make(Opcode::kTensorReduce, u8(op), dst, src);
      inst.iimm[0] = sh.k;
      inst.flags = negate ? isa::kFlagNegate : 0u;
      std::ostringstream name;
      name << sh.name << " " << isa::alu_op_name(op) << (negate ? " negated " : " ") << name_of(ts)
           << "->" << name_of(td);
      if (isa::alu_op_is_bitvec(op)) {
        std::vector<uint32_t> bits(src.elements());
        for (auto &b : bits) b = truncate(ts, rng.bits() | rng.bits());
        core.write_bits(src, bits);
        exec::op_tensor_reduce(inst, core.ctx);
        std::vector<double> want, got;
        for (size_t p = 0; p < 8; ++p) {
          for (size_t o = 0; o < sh.outer; ++o) {
            uint32_t acc = widen(ts, bits[p * n + o * inner]);
            for (size_t j = 1; j < inner; ++j)
              acc = ref_bits(op, acc, widen(ts, bits[p * n + o * inner + j]));
            want.push_back(truncate(td, negate ? 0u - acc : acc));
          }
        }
        for (uint32_t b : core.read_bits(dst)) got.push_back(b);
        expect_exact(name.str(), got, want);
        return;
      }
      std::vector<double> v(src.elements());
      for (double &x : v) {
        if (op == AluOp::kMultiply) {
          x = random_value(rng, ts, is_float(ts) ? 0.5 : -2.0, is_float(ts) ? 1.5 : 2.0);
        } else if (op >= AluOp::kLogicalAnd) {
          x = round_to(ts, 0.5 * static_cast<double>(rng.integer(-1, 1)) * (is_float(ts) ? 1 : 2));
        } else {
          x = random_value(rng, ts, -8, 8);
        }
      }
      core.write(src, v);
      v = core.read(src);
      exec::op_tensor_reduce(inst, core.ctx);
      std::vector<double> want, tol;
      for (size_t p = 0; p < 8; ++p) {
        for (size_t o = 0; o < sh.outer; ++o) {
          const double *x = &v[p * n + o * inner];
          double acc = x[0], mag = std::fabs(x[0]);
          if (op >= AluOp::kLogicalAnd) acc = x[0] != 0 ? 1 : 0;
          for (size_t j = 1; j < inner; ++j) {
            acc = ref_alu(op, acc, x[j]);
            mag = op == AluOp::kMultiply ? std::fabs(acc) : mag + std::fabs(x[j]);
          }
          want.push_back(round_to(td, round_to(DType::kF32, negate ? -acc : acc)));
          tol.push_back(static_cast<double>(inner) * std::ldexp(mag, -24));
        }
      }
      expect_all(name.str(), core.read(dst), want,
                 [&](size_t i, double g, double w) { return near(td, g, w, 0.0, tol[i]); });
    };
    for (const auto &[ts, td] : float_pairs)
      for (AluOp op : float_ops) run(ts, td, op);
    for (const auto &[ts, td] : bit_pairs)
      for (AluOp op : {AluOp::kBitwiseAnd, AluOp::kBitwiseOr, AluOp::kBitwiseXor}) run(ts, td, op);
  }
}

TEST_CASE("ops: tensor_copy between every pair of dtypes") {
  Core core;
  Rng rng(9);
  for (DType ts : kAllTypes) {
    for (DType td : kAllTypes) {
      const auto src = sbuf(ts, 4, 4, 0, {{1, 32}});
      const auto dst = sbuf(td, 4, 4, 1024, {{1, 32}});
      const std::string name = std::string(name_of(ts)) + "->" + name_of(td);
      if (ts == td) {  // bit-exact, NaN payloads and -0 included
        std::vector<uint32_t> bits(src.elements());
        for (auto &b : bits) b = truncate(ts, rng.bits());
        core.write_bits(src, bits);
        exec::op_tensor_copy(make(Opcode::kTensorCopy, 0, dst, src), core.ctx);
        std::vector<double> got, want(bits.begin(), bits.end());
        for (uint32_t b : core.read_bits(dst)) got.push_back(b);
        expect_exact(name, got, want);
        continue;
      }
      std::vector<double> v(src.elements());
      const double big = is_float(ts) ? std::min(1e5, max_finite(*fmt_of(ts))) : int_max(ts);
      for (double &x : v) {
        x = rng.integer(0, 4) == 0 ? random_value(rng, ts, -big, big)
                                   : random_value(rng, ts, ts == DType::kU8 ? 0 : -300, 300);
      }
      if (is_float(ts)) {
        v[0] = kNaN;
        if (ts != DType::kFp8E4m3) v[1] = -kInf;
      }
      core.write(src, v);
      exec::op_tensor_copy(make(Opcode::kTensorCopy, 0, dst, src), core.ctx);
      std::vector<double> want(v.size());
      for (size_t i = 0; i < v.size(); ++i) want[i] = to_dst(td, v[i]);
      expect_exact(name, core.read(dst), want);
    }
  }
  SECTION("i32 above 2^24 rounds to nearest even through fp32") {
    const auto src = sbuf(DType::kI32, 0, 1, 0, {{1, 5}});
    const auto dst = sbuf(DType::kF32, 0, 1, 64, {{1, 5}});
    core.write(src, {16777217, 16777219, -16777217, 2147483647, -2147483648.0});
    exec::op_tensor_copy(make(Opcode::kTensorCopy, 0, dst, src), core.ctx);
    expect_exact("i32->f32", core.read(dst),
                 {16777216, 16777220, -16777216, 2147483648.0, -2147483648.0});
  }
  SECTION("strided and reversed raw copy") {
    const auto src = sbuf(DType::kBf16, 0, 8, 2 * 15, {{-1, 16}});
    const auto dst = sbuf(DType::kBf16, 0, 8, 512, {{8, 4}, {2, 4}});
    const auto v = random_values(rng, src, -4, 4);
    core.write(src, v);
    exec::op_tensor_copy(make(Opcode::kTensorCopy, 0, dst, src), core.ctx);
    expect_exact("bf16 reversed -> strided", core.read(dst), v);
  }
}

TEST_CASE("ops: memset into integer and float tiles") {
  Core core;
  const std::vector<float> values{
      3.7f, -1.5f, 2.5f, 300.0f, -1e10f, 0.1f, std::numeric_limits<float>::quiet_NaN()};
  for (DType t : kAllTypes) {
    for (float value : values) {
      core.mem.note_sbuf_use(4096);  // written through sbuf() pointers
      core.mem.clear();
      const auto dst = sbuf(t, 32, 32, 16, {{3, 5}, {1, 2}});  // a gap of 1 after every pair
      Instruction inst = make(Opcode::kMemset, 0, dst, {});
      inst.imm[0] = value;
      exec::op_memset(inst, core.ctx);
      const std::vector<double> want(dst.elements(), round_to(t, value));
      expect_exact(std::string("memset ") + name_of(t) + " " + std::to_string(value),
                   core.read(dst), want);
      const auto gaps = sbuf(t, 32, 32, 16 + 2 * size_of(t), {{3, 4}});
      expect_exact("gaps untouched", core.read(gaps), std::vector<double>(gaps.elements(), 0.0));
    }
  }
}

namespace {

int32_t wrap32(int64_t v) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
}

// value(p, i) of iota / affine_select for pattern element i (row-major over the pattern's dims).
int32_t affine_value(const AccessPattern &pat, int32_t offset, int32_t cm, uint32_t p, uint64_t i) {
  int64_t v = int64_t{offset} + int64_t{p} * cm;
  uint64_t rem = i;
  for (uint32_t d = pat.num_dims; d-- > 0;) {
    v += static_cast<int64_t>(rem % pat.dims[d].count) * pat.dims[d].stride;
    rem /= pat.dims[d].count;
  }
  return wrap32(v);
}

}  // namespace

TEST_CASE("ops: iota over 1-3 dim patterns with channel multipliers") {
  Core core;
  struct Case {
    AccessPattern pat;
    int32_t offset, cm;
    DType t;
    uint32_t p0, np;
  };
  const std::vector<Case> cases{
      {pattern({{1, 16}}), 5, 16, DType::kI32, 0, 8},
      {pattern({{1, 16}}), 0, 1, DType::kF32, 32, 32},
      {pattern({{-3, 4}, {2, 5}}), -7, -2, DType::kF32, 64, 64},
      {pattern({{100, 2}, {10, 3}, {1, 4}}), 1000, 1, DType::kBf16, 0, 16},
      {pattern({{100, 2}, {10, 3}, {1, 4}}), 1000, 3, DType::kI16, 0, 16},
      {pattern({{100, 2}, {10, 3}, {1, 4}}), -150, 20, DType::kU8, 0, 32},
      {pattern({{-40, 2}, {7, 3}, {1, 4}}), 60, -5, DType::kI8, 0, 32},
      {pattern({{3, 2}, {-1, 8}}), 0, 40000, DType::kF16, 0, 4},
      {pattern({{1, 4}}), 2147483646, 1, DType::kI32, 0, 4},  // wraps
      {pattern({{1, 4}}), 2147483646, 1, DType::kF32, 0, 4},
      {pattern({{1, 6}}), -3, 1, DType::kFp8E4m3, 0, 4},
      {pattern({{1, 6}}), -3, 1000, DType::kFp8E5m2, 0, 4},
  };
  for (const Case &c : cases) {
    const uint64_t n = c.pat.free_elements();
    const auto dst = sbuf(c.t, c.p0, c.np, 256, {{1, static_cast<uint32_t>(n)}});
    Instruction inst = make(Opcode::kIota, 0, dst, c.pat);
    inst.engine = isa::Engine::kGpSimd;
    inst.iimm = {c.offset, c.cm};
    exec::op_iota(inst, core.ctx);
    std::vector<double> want;
    for (uint32_t p = 0; p < c.np; ++p) {
      for (uint64_t i = 0; i < n; ++i) {
        const int32_t v = affine_value(c.pat, c.offset, c.cm, p, i);
        want.push_back(is_float(c.t)
                           ? round_to(c.t, static_cast<double>(static_cast<float>(v)))
                           : std::clamp(static_cast<double>(v), int_min(c.t), int_max(c.t)));
      }
    }
    expect_exact(std::string("iota -> ") + name_of(c.t), core.read(dst), want);
  }
}

TEST_CASE("ops: affine_select builds causal masks and honours every comparison") {
  Core core;
  Rng rng(10);
  SECTION("causal mask") {
    const auto dst = sbuf(DType::kF32, 0, 128, 0, {{1, 128}});
    const auto on_true = sbuf(DType::kBf16, 0, 128, 1024, {{1, 128}});
    const auto v = random_values(rng, on_true, -4, 4);
    core.write(on_true, v);
    Instruction inst =
        make(Opcode::kAffineSelect, u8(AluOp::kGreaterEqual), dst, pattern({{-1, 128}}), on_true);
    inst.iimm = {0, 1};
    inst.imm[0] = -std::numeric_limits<float>::infinity();
    exec::op_affine_select(inst, core.ctx);
    std::vector<double> want(v.size());
    for (size_t p = 0; p < 128; ++p)
      for (size_t i = 0; i < 128; ++i) want[p * 128 + i] = i <= p ? v[p * 128 + i] : -kInf;
    expect_exact("causal", core.read(dst), want);
  }
  SECTION("every comparison, 1-3 dims") {
    struct Case {
      AccessPattern pat;
      int32_t offset, cm;
      DType t, on_true_t;
      float on_false;
    };
    const std::vector<Case> cases{
        {pattern({{1, 12}}), -6, 0, DType::kF32, DType::kF32, -1.0f},
        {pattern({{3, 4}, {-1, 6}}), -5, 2, DType::kBf16, DType::kF32, -1e4f},
        {pattern({{5, 2}, {-2, 3}, {1, 4}}), 1, -1, DType::kI16, DType::kI8, 7.5f},
    };
    for (const Case &c : cases) {
      for (AluOp cmp : {AluOp::kEqual, AluOp::kNotEqual, AluOp::kGreater, AluOp::kGreaterEqual,
                        AluOp::kLess, AluOp::kLessEqual}) {
        const auto n = static_cast<uint32_t>(c.pat.free_elements());
        const auto dst = sbuf(c.t, 32, 32, 0, {{1, n}});
        const auto on_true = sbuf(c.on_true_t, 32, 32, 512, {{1, n}});
        const auto v = random_values(rng, on_true, -100, 100);
        core.write(on_true, v);
        Instruction inst = make(Opcode::kAffineSelect, u8(cmp), dst, c.pat, on_true);
        inst.iimm = {c.offset, c.cm};
        inst.imm[0] = c.on_false;
        exec::op_affine_select(inst, core.ctx);
        std::vector<double> want(v.size());
        for (uint32_t p = 0; p < 32; ++p) {
          for (uint32_t i = 0; i < n; ++i) {
            const int32_t x = affine_value(c.pat, c.offset, c.cm, p, i);
            bool pred = false;
            switch (cmp) {
              case AluOp::kEqual: pred = x == 0; break;
              case AluOp::kNotEqual: pred = x != 0; break;
              case AluOp::kGreater: pred = x > 0; break;
              case AluOp::kGreaterEqual: pred = x >= 0; break;
              case AluOp::kLess: pred = x < 0; break;
              default: pred = x <= 0; break;
            }
            want[p * n + i] = round_to(c.t, pred ? v[p * n + i] : c.on_false);
          }
        }
        expect_exact(std::string("affine_select ") + isa::alu_op_name(cmp) + " -> " + name_of(c.t),
                     core.read(dst), want);
      }
    }
  }
}

TEST_CASE("ops: out-of-bounds tiles fault instead of touching memory") {
  Core core;
  const auto ok = sbuf(DType::kF32, 0, 16, 0, {{1, 8}});
  CHECK_THROWS_AS(exec::op_tensor_tensor(make(Opcode::kTensorTensor, u8(AluOp::kAdd), ok,
                                              sbuf(DType::kF32, 120, 16, 0, {{1, 8}}), ok),
                                         core.ctx),
                  exec::ExecFault);
  CHECK_THROWS_AS(
      exec::op_tensor_copy(
          make(Opcode::kTensorCopy, 0, sbuf(DType::kF32, 0, 16, 192 * 1024 - 16, {{1, 8}}), ok),
          core.ctx),
      exec::ExecFault);
  CHECK_THROWS_AS(
      exec::op_memset(make(Opcode::kMemset, 0, sbuf(DType::kF32, 0, 16, 0, {{-1, 8}}), {}),
                      core.ctx),
      exec::ExecFault);
}
