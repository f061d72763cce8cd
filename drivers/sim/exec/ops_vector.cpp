// Vector / Scalar / GpSimd element-wise ops: activation, tensor_tensor, tensor_scalar,
// tensor_reduce, tensor_copy, memset, iota and affine_select (docs/ISA.md).
//
// Arithmetic is fp32: each partition's free elements are loaded into fp32 scratch rows, run
// through a loop specialised for the operator (picked once per instruction through a table of
// template instances), and stored back with the destination's rounding. Bitvec operators run the
// same way on uint32 bit patterns.
//
// Partitions are processed in ascending order, each source row read completely before the
// destination row is written, so an instruction reads all of its inputs before it writes: a
// source that a destination could overwrite before it is read (the destination starts at a later
// partition of the same memory and their byte ranges meet) is loaded whole up front.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "exec/ops.hpp"
#include "isa/dtype.hpp"
#include "isa/minmax.hpp"

namespace trn::sim::exec {
namespace {

using isa::ActFunc;
using isa::AluOp;
using isa::DType;

// ---------------------------------------------------------------------------------------------
// Operators.

inline float truth(bool b) {
  return b ? 1.0f : 0.0f;
}

using isa::max_nan;
using isa::min_nan;

// Arithmetic operators in fp32. Bitvec operators (and kBypass) pass the first operand through:
// they never reach the fp32 paths.
template <AluOp op>
inline float alu_f32(float a, float b) {
  if constexpr (op == AluOp::kAdd) {
    return a + b;
  } else if constexpr (op == AluOp::kSubtract) {
    return a - b;
  } else if constexpr (op == AluOp::kMultiply) {
    return a * b;
  } else if constexpr (op == AluOp::kMax) {
    return max_nan(a, b);
  } else if constexpr (op == AluOp::kMin) {
    return min_nan(a, b);
  } else if constexpr (op == AluOp::kEqual) {
    return truth(a == b);
  } else if constexpr (op == AluOp::kNotEqual) {
    return truth(a != b);
  } else if constexpr (op == AluOp::kGreater) {
    return truth(a > b);
  } else if constexpr (op == AluOp::kGreaterEqual) {
    return truth(a >= b);
  } else if constexpr (op == AluOp::kLess) {
    return truth(a < b);
  } else if constexpr (op == AluOp::kLessEqual) {
    return truth(a <= b);
  } else if constexpr (op == AluOp::kLogicalAnd) {
    return truth((a != 0.0f) & (b != 0.0f));
  } else if constexpr (op == AluOp::kLogicalOr) {
    return truth((a != 0.0f) | (b != 0.0f));
  } else if constexpr (op == AluOp::kLogicalXor) {
    return truth((a != 0.0f) != (b != 0.0f));
  } else if constexpr (op == AluOp::kPower) {
    return std::pow(a, b);
  } else if constexpr (op == AluOp::kAbsMax) {
    return max_nan(std::fabs(a), std::fabs(b));
  } else if constexpr (op == AluOp::kAbsMin) {
    return min_nan(std::fabs(a), std::fabs(b));
  } else if constexpr (op == AluOp::kDivide) {
    return a / b;
  } else {
    return a;
  }
}

// Bitvec operators on uint32 patterns. bitwise_not ignores its second operand; shifts by 32 or
// more give 0. Arithmetic operators (and kBypass) pass the first operand through.
template <AluOp op>
inline uint32_t alu_bits(uint32_t a, uint32_t b) {
  if constexpr (op == AluOp::kBitwiseNot) {
    return ~a;
  } else if constexpr (op == AluOp::kBitwiseAnd) {
    return a & b;
  } else if constexpr (op == AluOp::kBitwiseOr) {
    return a | b;
  } else if constexpr (op == AluOp::kBitwiseXor) {
    return a ^ b;
  } else if constexpr (op == AluOp::kShiftLeft) {
    return b >= 32 ? 0u : a << b;
  } else if constexpr (op == AluOp::kShiftRight) {
    return b >= 32 ? 0u : a >> b;
  } else {
    return a;
  }
}

constexpr bool is_logical(AluOp op) {
  return op == AluOp::kLogicalAnd || op == AluOp::kLogicalOr || op == AluOp::kLogicalXor;
}

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kSqrt2OverPi = 0.79788456080286535588f;

// Activation functions in fp32 (model-defined: the standard library stands in for the
// hardware's polynomial approximations). gelu is 0.5x(1 + erf(x/sqrt2)) written as
// 0.5x*erfc(-x/sqrt2), gelu_tanh's 0.5x(1 + tanh(u)) as x*sigmoid(2u), so neither cancels for
// negative x.
template <ActFunc f>
inline float act(float x) {
  if constexpr (f == ActFunc::kIdentity) {
    return x;
  } else if constexpr (f == ActFunc::kRelu) {
    return x > 0.0f ? x : (x != x ? x : 0.0f);
  } else if constexpr (f == ActFunc::kGelu) {
    return 0.5f * x * std::erfc(x * -kInvSqrt2);
  } else if constexpr (f == ActFunc::kGeluTanh) {
    const float u = kSqrt2OverPi * (x + 0.044715f * x * x * x);
    return x / (1.0f + std::exp(-2.0f * u));
  } else if constexpr (f == ActFunc::kSilu) {
    return x / (1.0f + std::exp(-x));
  } else if constexpr (f == ActFunc::kSigmoid) {
    return 1.0f / (1.0f + std::exp(-x));
  } else if constexpr (f == ActFunc::kTanh) {
    return std::tanh(x);
  } else if constexpr (f == ActFunc::kExp) {
    return std::exp(x);
  } else if constexpr (f == ActFunc::kLog) {
    return std::log(x);
  } else if constexpr (f == ActFunc::kSqrt) {
    return std::sqrt(x);
  } else if constexpr (f == ActFunc::kRsqrt) {
    return 1.0f / std::sqrt(x);
  } else if constexpr (f == ActFunc::kReciprocal) {
    return 1.0f / x;
  } else if constexpr (f == ActFunc::kSquare) {
    return x * x;
  } else if constexpr (f == ActFunc::kErf) {
    return std::erf(x);
  } else if constexpr (f == ActFunc::kSin) {
    return std::sin(x);
  } else if constexpr (f == ActFunc::kCos) {
    return std::cos(x);
  } else {
    // Φ(x) + x·φ(x) in double, rounded once: near its zero (x ≈ -0.75) the two terms cancel,
    // and an fp32 sum would keep little of either.
    static_assert(f == ActFunc::kGeluDx);
    const double d = x;
    return static_cast<float>(0.5 * std::erfc(-d * std::numbers::sqrt2 / 2.0) +
                              d * std::exp(-0.5 * d * d) * std::numbers::inv_sqrtpi /
                                  std::numbers::sqrt2);
  }
}

// ---------------------------------------------------------------------------------------------
// Row kernels, one instance per operator, reached through tables indexed by the enum value.

using BinaryF32 = void (*)(const float *, const float *, float *, size_t);
using BinaryBits = void (*)(const uint32_t *, const uint32_t *, uint32_t *, size_t);
using ScalarF32 = void (*)(float *, size_t, float);
using ScalarBits = void (*)(uint32_t *, size_t, uint32_t);
using ReduceF32 = float (*)(const float *, size_t);
using ReduceBits = uint32_t (*)(const uint32_t *, size_t);
using ActRow = void (*)(float *, size_t, float, float);
using SelectRow = void (*)(const uint32_t *, const float *, float, float *, size_t);

template <AluOp op>
void binary_f32(const float *a, const float *b, float *out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = alu_f32<op>(a[i], b[i]);
}
template <AluOp op>
void binary_bits(const uint32_t *a, const uint32_t *b, uint32_t *out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = alu_bits<op>(a[i], b[i]);
}
template <AluOp op, bool reverse>
void scalar_f32(float *x, size_t n, float s) {
  for (size_t i = 0; i < n; ++i) x[i] = reverse ? alu_f32<op>(s, x[i]) : alu_f32<op>(x[i], s);
}
template <AluOp op, bool reverse>
void scalar_bits(uint32_t *x, size_t n, uint32_t s) {
  for (size_t i = 0; i < n; ++i) x[i] = reverse ? alu_bits<op>(s, x[i]) : alu_bits<op>(x[i], s);
}
// Left to right in free order; logical reductions start from the truth of the first element.
template <AluOp op>
float reduce_f32(const float *a, size_t n) {
  if (n == 0) return 0.0f;
  float acc = is_logical(op) ? truth(a[0] != 0.0f) : a[0];
  for (size_t i = 1; i < n; ++i) acc = alu_f32<op>(acc, a[i]);
  return acc;
}
template <AluOp op>
uint32_t reduce_bits(const uint32_t *a, size_t n) {
  if (n == 0) return 0;
  uint32_t acc = a[0];
  for (size_t i = 1; i < n; ++i) acc = alu_bits<op>(acc, a[i]);
  return acc;
}
template <ActFunc f>
void act_row(float *x, size_t n, float scale, float bias) {
  for (size_t i = 0; i < n; ++i) x[i] = act<f>(x[i] * scale + bias);
}
// affine_select: the predicate compares the int32 value with 0.
template <AluOp cmp>
void select_row(const uint32_t *value, const float *on_true, float on_false, float *out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const int32_t v = static_cast<int32_t>(value[i]);
    bool pred;
    if constexpr (cmp == AluOp::kEqual) {
      pred = v == 0;
    } else if constexpr (cmp == AluOp::kNotEqual) {
      pred = v != 0;
    } else if constexpr (cmp == AluOp::kGreater) {
      pred = v > 0;
    } else if constexpr (cmp == AluOp::kGreaterEqual) {
      pred = v >= 0;
    } else if constexpr (cmp == AluOp::kLess) {
      pred = v < 0;
    } else {
      static_assert(cmp == AluOp::kLessEqual);
      pred = v <= 0;
    }
    out[i] = pred ? on_true[i] : on_false;
  }
}

template <size_t... I>
constexpr auto make_binary_f32(std::index_sequence<I...>) {
  return std::array<BinaryF32, sizeof...(I)>{&binary_f32<static_cast<AluOp>(I)>...};
}
template <size_t... I>
constexpr auto make_binary_bits(std::index_sequence<I...>) {
  return std::array<BinaryBits, sizeof...(I)>{&binary_bits<static_cast<AluOp>(I)>...};
}
template <bool reverse, size_t... I>
constexpr auto make_scalar_f32(std::index_sequence<I...>) {
  return std::array<ScalarF32, sizeof...(I)>{&scalar_f32<static_cast<AluOp>(I), reverse>...};
}
template <bool reverse, size_t... I>
constexpr auto make_scalar_bits(std::index_sequence<I...>) {
  return std::array<ScalarBits, sizeof...(I)>{&scalar_bits<static_cast<AluOp>(I), reverse>...};
}
template <size_t... I>
constexpr auto make_reduce_f32(std::index_sequence<I...>) {
  return std::array<ReduceF32, sizeof...(I)>{&reduce_f32<static_cast<AluOp>(I)>...};
}
template <size_t... I>
constexpr auto make_reduce_bits(std::index_sequence<I...>) {
  return std::array<ReduceBits, sizeof...(I)>{&reduce_bits<static_cast<AluOp>(I)>...};
}
template <size_t... I>
constexpr auto make_act(std::index_sequence<I...>) {
  return std::array<ActRow, sizeof...(I)>{&act_row<static_cast<ActFunc>(I)>...};
}

using AluSeq = std::make_index_sequence<isa::kAluOpCount>;
constexpr auto kBinaryF32 = make_binary_f32(AluSeq{});
constexpr auto kBinaryBits = make_binary_bits(AluSeq{});
constexpr std::array<std::array<ScalarF32, isa::kAluOpCount>, 2> kScalarF32{
    make_scalar_f32<false>(AluSeq{}), make_scalar_f32<true>(AluSeq{})};
constexpr std::array<std::array<ScalarBits, isa::kAluOpCount>, 2> kScalarBits{
    make_scalar_bits<false>(AluSeq{}), make_scalar_bits<true>(AluSeq{})};
constexpr auto kReduceF32 = make_reduce_f32(AluSeq{});
constexpr auto kReduceBits = make_reduce_bits(AluSeq{});
constexpr auto kAct = make_act(std::make_index_sequence<isa::kActFuncCount>{});

SelectRow select_row_for(AluOp cmp) {
  switch (cmp) {
    case AluOp::kEqual: return &select_row<AluOp::kEqual>;
    case AluOp::kNotEqual: return &select_row<AluOp::kNotEqual>;
    case AluOp::kGreater: return &select_row<AluOp::kGreater>;
    case AluOp::kGreaterEqual: return &select_row<AluOp::kGreaterEqual>;
    case AluOp::kLess: return &select_row<AluOp::kLess>;
    case AluOp::kLessEqual: return &select_row<AluOp::kLessEqual>;
    default: throw ExecFault("affine_select: comparison operator expected");
  }
}

AluOp alu_op(uint8_t v, const char *what) {
  if (v >= isa::kAluOpCount) throw ExecFault(std::string(what) + ": unknown ALU operator");
  return static_cast<AluOp>(v);
}

// ---------------------------------------------------------------------------------------------
// Bit patterns: integers widened to uint32 (sign-extended for signed types), floats as their raw
// bits (zero-extended); stored back by truncation to the element width. Little-endian memory.

template <class T>
void widen(const std::byte *in, uint32_t *out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, in + i * sizeof(T), sizeof(T));
    if constexpr (std::is_signed_v<T>) {
      out[i] = static_cast<uint32_t>(static_cast<int32_t>(v));
    } else {
      out[i] = static_cast<uint32_t>(v);
    }
  }
}

template <class T>
void narrow(const uint32_t *in, std::byte *out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const T v = static_cast<T>(in[i]);
    std::memcpy(out + i * sizeof(T), &v, sizeof(T));
  }
}

void widen_bits(DType t, const std::byte *in, uint32_t *out, size_t n) {
  switch (t) {
    case DType::kF32:
    case DType::kI32: widen<uint32_t>(in, out, n); return;
    case DType::kBf16:
    case DType::kF16: widen<uint16_t>(in, out, n); return;
    case DType::kI16: widen<int16_t>(in, out, n); return;
    case DType::kI8: widen<int8_t>(in, out, n); return;
    case DType::kU8:
    case DType::kFp8E4m3:
    case DType::kFp8E5m2: widen<uint8_t>(in, out, n); return;
    case DType::kInvalid: break;
  }
  throw ExecFault("invalid dtype");
}

void narrow_bits(DType t, const uint32_t *in, std::byte *out, size_t n) {
  switch (isa::dtype_size(t)) {
    case 4: narrow<uint32_t>(in, out, n); return;
    case 2: narrow<uint16_t>(in, out, n); return;
    case 1: narrow<uint8_t>(in, out, n); return;
    default: throw ExecFault("invalid dtype");
  }
}

// The conversions between the two domains inside tensor_scalar and for scalar operands:
// fp32 -> bits by the float -> int32 rule, bits -> fp32 as the int32 value.
inline uint32_t f32_to_bits(float v) {
  return static_cast<uint32_t>(isa::f32_to_i32(v));
}
inline float bits_to_f32(uint32_t v) {
  return static_cast<float>(static_cast<int32_t>(v));
}

// Per-thread buffers for the non-fp32 rows (ExecContext's scratch is fp32).
struct ThreadBuffers {
  std::vector<std::byte> raw;
  std::array<std::vector<uint32_t>, 3> bits;
  std::array<std::vector<float>, 2> column;
  std::array<std::vector<uint32_t>, 2> column_bits;
  std::vector<float> tmp;
};
ThreadBuffers &buffers() {
  thread_local ThreadBuffers b;
  return b;
}

template <class T>
T *sized(std::vector<T> &v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

std::byte *raw_buffer(size_t bytes) {
  return sized(buffers().raw, std::max<size_t>(bytes, 1));
}

void load_row_bits(const Tile &t, uint32_t p, uint32_t *out) {
  std::byte *raw = raw_buffer(static_cast<size_t>(t.free_elements) * t.elem_size);
  load_row_raw(t, p, raw);
  widen_bits(t.dtype, raw, out, static_cast<size_t>(t.free_elements));
}

void store_row_bits(const Tile &t, uint32_t p, const uint32_t *in) {
  std::byte *raw = raw_buffer(static_cast<size_t>(t.free_elements) * t.elem_size);
  narrow_bits(t.dtype, in, raw, static_cast<size_t>(t.free_elements));
  store_row_raw(t, p, raw);
}

// ---------------------------------------------------------------------------------------------
// Shapes and hazards.

size_t row_elements(const Tile &t) {
  return static_cast<size_t>(t.free_elements);
}

void check_like(const Tile &dst, const Tile &src, const char *what) {
  if (src.partitions != dst.partitions || src.free_elements != dst.free_elements) {
    throw ExecFault(std::string(what) + ": shape does not match dst");
  }
}

void check_column(const Tile &dst, const Tile &col, const char *what) {
  if (col.partitions != dst.partitions || col.free_elements < 1) {
    throw ExecFault(std::string(what) + ": expected a [P,1] tile matching dst's partitions");
  }
}

bool byte_ranges_meet(const isa::AccessPattern &a, const isa::AccessPattern &b) {
  auto range = [](const isa::AccessPattern &ap, int64_t &lo, int64_t &hi) {
    const int64_t size = isa::dtype_size(ap.dtype);
    lo = 0;
    hi = 0;
    for (uint32_t d = 0; d < ap.num_dims && d < isa::kMaxFreeDims; ++d) {
      if (ap.dims[d].count == 0) return false;
      const int64_t span = int64_t{ap.dims[d].stride} * (int64_t{ap.dims[d].count} - 1) * size;
      (span < 0 ? lo : hi) += span;
    }
    lo += static_cast<int64_t>(ap.offset);
    hi += static_cast<int64_t>(ap.offset) + size;
    return true;
  };
  int64_t alo, ahi, blo, bhi;
  if (!range(a, alo, ahi) || !range(b, blo, bhi)) return false;
  return alo < bhi && blo < ahi;
}

// Whether writing `dst` partition by partition could overwrite part of `src` before it is read.
bool must_preload(const isa::AccessPattern &dst, const isa::AccessPattern &src) {
  if (!dst.used() || !src.used() || dst.space != src.space) return false;
  if (dst.space == isa::MemSpace::kHbm) return dst.arg == src.arg;  // rows may interleave
  if (dst.partition_start <= src.partition_start) return false;
  if (dst.partition_start >= src.partition_start + src.partition_count) return false;
  return byte_ranges_meet(dst, src);
}

// Partition p of a contiguous fp32 tile, as the row of floats it is.
float *f32_row(const Tile &t, uint32_t p) {
  return reinterpret_cast<float *>(t.partition(p));
}

// Whether an element-wise op may read fp32 rows of `src` and write fp32 rows of `dst` where they
// lie, row by row: both contiguous fp32, and `dst` either `src` itself or nowhere near it (a
// partial overlap could write elements of `src` not yet read).
bool f32_in_place(const Tile &dst, const Tile &src) {
  if (dst.dtype != isa::DType::kF32 || src.dtype != isa::DType::kF32) return false;
  if (dst.partitions == 0 || dst.free_elements == 0) return false;
  // Rows that overlap each other (an HBM pattern's rows may) need the general path.
  auto rows_apart = [](const Tile &t) {
    const auto pitch = static_cast<uint64_t>(std::abs(t.partition_pitch));
    return t.contiguous() && (t.partitions == 1 || pitch >= t.free_elements * t.elem_size);
  };
  if (!rows_apart(dst) || !rows_apart(src)) return false;
  if (dst.partition_pitch == src.partition_pitch && dst.partition_pitch != 0) {
    // Same pitch (rows of SBUF partitions): no row of one meets a row of the other, or each
    // row is the other's.
    const int64_t pitch = std::abs(int64_t{dst.partition_pitch});
    const int64_t row = static_cast<int64_t>(dst.free_elements * dst.elem_size);
    const int64_t apart = src.base - dst.base;
    const int64_t r = (apart % pitch + pitch) % pitch;  // within-row distance, mod the pitch
    if (apart == 0 || (r >= row && r <= pitch - row)) return true;
  }
  auto extent = [](const Tile &t, const std::byte *&lo, const std::byte *&hi) {
    const std::byte *first = t.partition(0);
    const std::byte *last = t.partition(t.partitions - 1);
    lo = std::min(first, last);
    hi = std::max(first, last) + t.free_elements * t.elem_size;
  };
  const std::byte *dlo, *dhi, *slo, *shi;
  extent(dst, dlo, dhi);
  extent(src, slo, shi);
  return dhi <= slo || shi <= dlo;
}

// Rows of a source tile, loaded partition by partition into one row of buffer, or all at once
// when `preload` (the destination overlaps the source). Rows may be modified in place.
template <typename T, void (*Load)(const Tile &, uint32_t, T *)>
class Rows {
 public:
  T *row(uint32_t p) {
    if (all_) return buf_ + p * n_;
    Load(t_, p, buf_);
    return buf_;
  }

 protected:
  Rows(const Tile &t, bool preload) : t_(t), n_(row_elements(t)), all_(preload) {}
  size_t needed() const { return std::max<size_t>(all_ ? n_ * t_.partitions : n_, 1); }
  void fill(T *buffer) {
    buf_ = buffer;
    if (all_)
      for (uint32_t p = 0; p < t_.partitions; ++p) Load(t_, p, buf_ + p * n_);
  }

 private:
  Tile t_;
  size_t n_;
  bool all_;
  T *buf_ = nullptr;
};

// fp32 rows in scratch `slot`.
class F32Rows : public Rows<float, load_row_f32> {
 public:
  F32Rows(ExecContext &ctx, unsigned slot, const Tile &t, bool preload) : Rows(t, preload) {
    fill(ctx.scratch(slot, needed()));
  }
};

// Bit-pattern rows in per-thread buffer `index`.
class BitsRows : public Rows<uint32_t, load_row_bits> {
 public:
  BitsRows(unsigned index, const Tile &t, bool preload) : Rows(t, preload) {
    fill(sized(buffers().bits[index], needed()));
  }
};

// Per-partition scalars: element 0 of each partition of a [P,1] tile, or `imm` everywhere.
const float *column_f32(ExecContext &ctx, const isa::AccessPattern &ap, bool from_tile, float imm,
                        const Tile &dst, unsigned index, const char *what) {
  float *col = sized(buffers().column[index], std::max<uint32_t>(dst.partitions, 1));
  if (!from_tile) {
    std::fill(col, col + dst.partitions, imm);
    return col;
  }
  const Tile t = ctx.resolve(ap, what);
  check_column(dst, t, what);
  if (t.free_elements == 1) {
    for (uint32_t p = 0; p < t.partitions; ++p) load_row_f32(t, p, col + p);
  } else {
    float *tmp = sized(buffers().tmp, row_elements(t));
    for (uint32_t p = 0; p < t.partitions; ++p) {
      load_row_f32(t, p, tmp);
      col[p] = tmp[0];
    }
  }
  return col;
}

// Scalars for bitvec operators: an immediate or a float tile's value by the float -> int32 rule,
// an integer tile's value as it is.
const uint32_t *column_bits(ExecContext &ctx, const isa::AccessPattern &ap, bool from_tile,
                            float imm, const Tile &dst, unsigned index, const char *what) {
  uint32_t *col = sized(buffers().column_bits[index], std::max<uint32_t>(dst.partitions, 1));
  if (!from_tile) {
    std::fill(col, col + dst.partitions, f32_to_bits(imm));
    return col;
  }
  const Tile t = ctx.resolve(ap, what);
  check_column(dst, t, what);
  if (isa::dtype_is_float(t.dtype)) {
    const float *f = column_f32(ctx, ap, true, imm, dst, index, what);
    for (uint32_t p = 0; p < t.partitions; ++p) col[p] = f32_to_bits(f[p]);
  } else {
    uint32_t *tmp = sized(buffers().bits[2], row_elements(t));
    for (uint32_t p = 0; p < t.partitions; ++p) {
      load_row_bits(t, p, tmp);
      col[p] = tmp[0];
    }
  }
  return col;
}

// ---------------------------------------------------------------------------------------------
// Affine patterns (iota, affine_select): value = base + sum(step_d * i_d), int32 wrap-around.

void affine_row(const isa::AccessPattern &pattern, uint32_t base, uint32_t *out) {
  std::array<uint32_t, 4> count{1, 1, 1, 1};
  std::array<uint32_t, 4> step{0, 0, 0, 0};
  const uint32_t nd = std::min(pattern.num_dims, isa::kMaxFreeDims);
  for (uint32_t d = 0; d < nd; ++d) {
    count[4 - nd + d] = pattern.dims[d].count;
    step[4 - nd + d] = static_cast<uint32_t>(pattern.dims[d].stride);
  }
  size_t k = 0;
  for (uint32_t i0 = 0; i0 < count[0]; ++i0) {
    const uint32_t v0 = base + i0 * step[0];
    for (uint32_t i1 = 0; i1 < count[1]; ++i1) {
      const uint32_t v1 = v0 + i1 * step[1];
      for (uint32_t i2 = 0; i2 < count[2]; ++i2) {
        const uint32_t v2 = v1 + i2 * step[2];
        for (uint32_t i3 = 0; i3 < count[3]; ++i3) out[k++] = v2 + i3 * step[3];
      }
    }
  }
}

uint32_t affine_base(const isa::Instruction &inst, uint32_t p) {
  return static_cast<uint32_t>(inst.iimm[0]) + p * static_cast<uint32_t>(inst.iimm[1]);
}

void check_pattern(const isa::Instruction &inst, const Tile &dst, const char *what) {
  if (inst.src0.free_elements() != dst.free_elements) {
    throw ExecFault(std::string(what) + ": pattern element count does not match dst");
  }
}

void saturate_int32(const uint32_t *in, uint32_t *out, size_t n, int32_t lo, int32_t hi) {
  for (size_t i = 0; i < n; ++i) {
    out[i] = static_cast<uint32_t>(std::clamp(static_cast<int32_t>(in[i]), lo, hi));
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------

void op_activation(const isa::Instruction &inst, ExecContext &ctx) {
  if (inst.func >= isa::kActFuncCount) throw ExecFault("activation: unknown function");
  const Tile dst = ctx.resolve(inst.dst, "dst");
  const Tile src = ctx.resolve(inst.src0, "src0");
  check_like(dst, src, "src0");
  const bool accumulate = (inst.flags & isa::kFlagAccumulate) != 0;
  Tile acc;
  if (accumulate) {
    acc = ctx.resolve(inst.dst2, "dst2");
    if (acc.partitions != dst.partitions || acc.free_elements != 1) {
      throw ExecFault("dst2: expected a [P,1] tile matching dst's partitions");
    }
  }
  const float *scale = column_f32(ctx, inst.src2, (inst.flags & isa::kFlagScaleTile) != 0,
                                  inst.imm[0], dst, 0, "src2");
  const float *bias = column_f32(ctx, inst.src1, (inst.flags & isa::kFlagBiasTile) != 0,
                                 inst.imm[1], dst, 1, "src1");
  F32Rows in(
      ctx, 0, src,
      must_preload(inst.dst, inst.src0) || (accumulate && must_preload(inst.dst2, inst.src0)));
  const ActRow fn = kAct[inst.func];
  const size_t n = row_elements(dst);
  for (uint32_t p = 0; p < dst.partitions; ++p) {
    float *row = in.row(p);
    fn(row, n, scale[p], bias[p]);
    store_row_f32(dst, p, row);
    if (accumulate) {
      float sum = 0.0f;
      for (size_t i = 0; i < n; ++i) sum += row[i];
      store_row_f32(acc, p, &sum);
    }
  }
}

void op_tensor_tensor(const isa::Instruction &inst, ExecContext &ctx) {
  const AluOp op = alu_op(inst.func, "tensor_tensor");
  const Tile dst = ctx.resolve(inst.dst, "dst");
  const Tile a = ctx.resolve(inst.src0, "src0");
  const Tile b = ctx.resolve(inst.src1, "src1");
  check_like(dst, a, "src0");
  check_like(dst, b, "src1");
  const size_t n = row_elements(dst);
  const auto idx = static_cast<size_t>(op);
  if (isa::alu_op_is_bitvec(op)) {
    BitsRows ra(0, a, must_preload(inst.dst, inst.src0));
    BitsRows rb(1, b, must_preload(inst.dst, inst.src1));
    const BinaryBits fn = kBinaryBits[idx];
    for (uint32_t p = 0; p < dst.partitions; ++p) {
      uint32_t *x = ra.row(p);
      fn(x, rb.row(p), x, n);
      store_row_bits(dst, p, x);
    }
    return;
  }
  const BinaryF32 fn = kBinaryF32[idx];
  if (f32_in_place(dst, a) && f32_in_place(dst, b)) {
    // fp32 rows need no conversion: computed where they lie (the same values, fewer passes).
    for (uint32_t p = 0; p < dst.partitions; ++p)
      fn(f32_row(a, p), f32_row(b, p), f32_row(dst, p), n);
    return;
  }
  F32Rows ra(ctx, 0, a, must_preload(inst.dst, inst.src0));
  F32Rows rb(ctx, 1, b, must_preload(inst.dst, inst.src1));
  for (uint32_t p = 0; p < dst.partitions; ++p) {
    float *x = ra.row(p);
    const float *y = rb.row(p);
    fn(x, y, x, n);
    store_row_f32(dst, p, x);
  }
}

void op_tensor_scalar(const isa::Instruction &inst, ExecContext &ctx) {
  const std::array<AluOp, 2> ops{alu_op(inst.func, "tensor_scalar"),
                                 alu_op(inst.func2, "tensor_scalar")};
  const Tile dst = ctx.resolve(inst.dst, "dst");
  const Tile src = ctx.resolve(inst.src0, "src0");
  check_like(dst, src, "src0");
  const size_t n = row_elements(dst);
  const std::array<bool, 2> from_tile{(inst.flags & isa::kFlagOperand0Tile) != 0,
                                      (inst.flags & isa::kFlagOperand1Tile) != 0};
  const std::array<bool, 2> reverse{(inst.flags & isa::kFlagReverse0) != 0,
                                    (inst.flags & isa::kFlagReverse1) != 0};
  const std::array<const isa::AccessPattern *, 2> operand_ap{&inst.src1, &inst.src2};
  const std::array<const char *, 2> operand_name{"src1", "src2"};
  const bool preload = must_preload(inst.dst, inst.src0);

  const bool any_bits = isa::alu_op_is_bitvec(ops[0]) || isa::alu_op_is_bitvec(ops[1]);
  if (!any_bits) {
    std::array<const float *, 2> s{};
    std::array<ScalarF32, 2> fn{};
    for (size_t k = 0; k < 2; ++k) {
      if (ops[k] == AluOp::kBypass) continue;
      s[k] = column_f32(ctx, *operand_ap[k], from_tile[k], inst.imm[k], dst,
                        static_cast<unsigned>(k), operand_name[k]);
      fn[k] = kScalarF32[reverse[k]][static_cast<size_t>(ops[k])];
    }
    auto apply = [&](float *x, uint32_t p) {
      for (size_t k = 0; k < 2; ++k) {
        if (fn[k] != nullptr) fn[k](x, n, s[k][p]);
      }
    };
    if (f32_in_place(dst, src)) {
      for (uint32_t p = 0; p < dst.partitions; ++p) {
        float *x = f32_row(dst, p);
        if (x != f32_row(src, p)) std::memcpy(x, f32_row(src, p), n * sizeof(float));
        apply(x, p);
      }
      return;
    }
    F32Rows rows(ctx, 0, src, preload);
    for (uint32_t p = 0; p < dst.partitions; ++p) {
      float *x = rows.row(p);
      apply(x, p);
      store_row_f32(dst, p, x);
    }
    return;
  }

  // Mixed or bitvec: each op runs in its own domain (bit patterns or fp32); the row is converted
  // between them as needed (fp32 -> int32 by the float -> int rule, int32 -> fp32 by value).
  // The data is loaded in the domain of the first op that runs, stored from the last one's.
  std::array<const float *, 2> sf{};
  std::array<const uint32_t *, 2> sb{};
  std::array<ScalarF32, 2> ff{};
  std::array<ScalarBits, 2> fb{};
  for (size_t k = 0; k < 2; ++k) {
    if (ops[k] == AluOp::kBypass) continue;
    const auto idx = static_cast<size_t>(ops[k]);
    if (isa::alu_op_is_bitvec(ops[k])) {
      sb[k] = column_bits(ctx, *operand_ap[k], from_tile[k], inst.imm[k], dst,
                          static_cast<unsigned>(k), operand_name[k]);
      fb[k] = kScalarBits[reverse[k]][idx];
    } else {
      sf[k] = column_f32(ctx, *operand_ap[k], from_tile[k], inst.imm[k], dst,
                         static_cast<unsigned>(k), operand_name[k]);
      ff[k] = kScalarF32[reverse[k]][idx];
    }
  }
  const bool load_bits =
      ops[0] != AluOp::kBypass ? isa::alu_op_is_bitvec(ops[0]) : isa::alu_op_is_bitvec(ops[1]);
  float *frow = ctx.scratch(2, std::max<size_t>(n, 1));
  uint32_t *brow = sized(buffers().bits[1], std::max<size_t>(n, 1));
  F32Rows frows(ctx, 0, load_bits ? Tile{} : src, preload && !load_bits);
  BitsRows brows(0, load_bits ? src : Tile{}, preload && load_bits);
  for (uint32_t p = 0; p < dst.partitions; ++p) {
    bool in_bits = load_bits;
    if (in_bits) {
      std::memcpy(brow, brows.row(p), n * sizeof(uint32_t));
    } else {
      std::memcpy(frow, frows.row(p), n * sizeof(float));
    }
    for (size_t k = 0; k < 2; ++k) {
      if (ops[k] == AluOp::kBypass) continue;
      const bool want_bits = fb[k] != nullptr;
      if (want_bits && !in_bits) {
        for (size_t i = 0; i < n; ++i) brow[i] = f32_to_bits(frow[i]);
      } else if (!want_bits && in_bits) {
        for (size_t i = 0; i < n; ++i) frow[i] = bits_to_f32(brow[i]);
      }
      in_bits = want_bits;
      if (in_bits) {
        fb[k](brow, n, sb[k][p]);
      } else {
        ff[k](frow, n, sf[k][p]);
      }
    }
    if (in_bits) {
      store_row_bits(dst, p, brow);
    } else {
      store_row_f32(dst, p, frow);
    }
  }
}

void op_tensor_reduce(const isa::Instruction &inst, ExecContext &ctx) {
  const AluOp op = alu_op(inst.func, "tensor_reduce");
  if (!isa::alu_op_is_reduction(op)) throw ExecFault("tensor_reduce: not a reduction operator");
  if (inst.iimm[0] < 0) throw ExecFault("tensor_reduce: negative axis count");
  const Tile dst = ctx.resolve(inst.dst, "dst");
  const Tile src = ctx.resolve(inst.src0, "src0");
  // The reduced dims are the last k of src0's pattern as written (not as resolved).
  const uint32_t nd = std::min(inst.src0.num_dims, isa::kMaxFreeDims);
  const auto k = static_cast<uint32_t>(inst.iimm[0]);
  uint64_t inner = 1;
  if (k == 0 || k >= nd) {
    inner = src.free_elements;
  } else {
    for (uint32_t d = nd - k; d < nd; ++d) inner *= inst.src0.dims[d].count;
  }
  const uint64_t outer = inner == 0 ? 0 : src.free_elements / inner;
  if (src.partitions != dst.partitions || dst.free_elements != outer) {
    throw ExecFault("tensor_reduce: dst shape does not match the reduction of src0");
  }
  const bool negate = (inst.flags & isa::kFlagNegate) != 0;
  const auto n_inner = static_cast<size_t>(inner);
  const auto n_outer = static_cast<size_t>(outer);
  const auto idx = static_cast<size_t>(op);
  const bool preload = must_preload(inst.dst, inst.src0);
  if (isa::alu_op_is_bitvec(op)) {
    BitsRows rows(0, src, preload);
    uint32_t *out = sized(buffers().bits[1], std::max<size_t>(n_outer, 1));
    const ReduceBits fn = kReduceBits[idx];
    for (uint32_t p = 0; p < dst.partitions; ++p) {
      const uint32_t *x = rows.row(p);
      for (size_t o = 0; o < n_outer; ++o) {
        const uint32_t r = fn(x + o * n_inner, n_inner);
        out[o] = negate ? 0u - r : r;
      }
      store_row_bits(dst, p, out);
    }
    return;
  }
  F32Rows rows(ctx, 0, src, preload);
  float *out = ctx.scratch(2, std::max<size_t>(n_outer, 1));
  const ReduceF32 fn = kReduceF32[idx];
  for (uint32_t p = 0; p < dst.partitions; ++p) {
    const float *x = rows.row(p);
    for (size_t o = 0; o < n_outer; ++o) {
      const float r = fn(x + o * n_inner, n_inner);
      out[o] = negate ? -r : r;
    }
    store_row_f32(dst, p, out);
  }
}

void op_tensor_copy(const isa::Instruction &inst, ExecContext &ctx) {
  const Tile dst = ctx.resolve(inst.dst, "dst");
  const Tile src = ctx.resolve(inst.src0, "src0");
  check_like(dst, src, "src0");
  const bool preload = must_preload(inst.dst, inst.src0);
  if (dst.dtype != src.dtype) {
    F32Rows rows(ctx, 0, src, preload);
    for (uint32_t p = 0; p < dst.partitions; ++p) store_row_f32(dst, p, rows.row(p));
    return;
  }
  // Bit-exact: move raw bytes through fp32 scratch storage (std::byte may alias it).
  const size_t row_bytes = row_elements(src) * src.elem_size;
  const size_t row_floats = (row_bytes + sizeof(float) - 1) / sizeof(float);
  float *buf =
      ctx.scratch(0, std::max<size_t>(preload ? row_floats * src.partitions : row_floats, 1));
  auto row = [&](uint32_t p) {
    return reinterpret_cast<std::byte *>(buf + (preload ? p * row_floats : 0));
  };
  if (preload) {
    for (uint32_t p = 0; p < src.partitions; ++p) load_row_raw(src, p, row(p));
  }
  for (uint32_t p = 0; p < dst.partitions; ++p) {
    if (!preload) load_row_raw(src, p, row(p));
    store_row_raw(dst, p, row(p));
  }
}

void op_memset(const isa::Instruction &inst, ExecContext &ctx) {
  const Tile dst = ctx.resolve(inst.dst, "dst");
  const size_t n = row_elements(dst);
  float *row = ctx.scratch(0, std::max<size_t>(n, 1));
  std::fill(row, row + n, inst.imm[0]);
  for (uint32_t p = 0; p < dst.partitions; ++p) store_row_f32(dst, p, row);
}

void op_iota(const isa::Instruction &inst, ExecContext &ctx) {
  const Tile dst = ctx.resolve(inst.dst, "dst");
  check_pattern(inst, dst, "iota");
  const size_t n = row_elements(dst);
  uint32_t *value = sized(buffers().bits[0], std::max<size_t>(n, 1));
  if (isa::dtype_is_float(dst.dtype)) {
    // int32 -> fp32 (round to nearest even) -> dst dtype.
    float *row = ctx.scratch(0, std::max<size_t>(n, 1));
    for (uint32_t p = 0; p < dst.partitions; ++p) {
      affine_row(inst.src0, affine_base(inst, p), value);
      for (size_t i = 0; i < n; ++i) row[i] = bits_to_f32(value[i]);
      store_row_f32(dst, p, row);
    }
    return;
  }
  // int32 -> i32 as is; narrower integers saturate.
  uint32_t *out = sized(buffers().bits[1], std::max<size_t>(n, 1));
  for (uint32_t p = 0; p < dst.partitions; ++p) {
    affine_row(inst.src0, affine_base(inst, p), value);
    switch (dst.dtype) {
      case DType::kI16: saturate_int32(value, out, n, INT16_MIN, INT16_MAX); break;
      case DType::kI8: saturate_int32(value, out, n, INT8_MIN, INT8_MAX); break;
      case DType::kU8: saturate_int32(value, out, n, 0, UINT8_MAX); break;
      default: std::copy(value, value + n, out); break;
    }
    store_row_bits(dst, p, out);
  }
}

void op_affine_select(const isa::Instruction &inst, ExecContext &ctx) {
  const SelectRow fn = select_row_for(alu_op(inst.func, "affine_select"));
  const Tile dst = ctx.resolve(inst.dst, "dst");
  check_pattern(inst, dst, "affine_select");
  const Tile on_true = ctx.resolve(inst.src1, "src1");
  check_like(dst, on_true, "src1");
  const size_t n = row_elements(dst);
  F32Rows rows(ctx, 0, on_true, must_preload(inst.dst, inst.src1));
  float *out = ctx.scratch(2, std::max<size_t>(n, 1));
  uint32_t *value = sized(buffers().bits[0], std::max<size_t>(n, 1));
  for (uint32_t p = 0; p < dst.partitions; ++p) {
    affine_row(inst.src0, affine_base(inst, p), value);
    fn(value, rows.row(p), inst.imm[0], out, n);
    store_row_f32(dst, p, out);
  }
}

}  // namespace trn::sim::exec
