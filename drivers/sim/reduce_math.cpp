#include "sim/reduce_math.hpp"

#include <algorithm>
#include <cstddef>

#include "isa/dtype.hpp"
#include "isa/minmax.hpp"

namespace trn::sim {

namespace {

template <trn_reduce_op_t op>
inline float apply(float a, float b) {
  if constexpr (op == TRN_REDUCE_SUM) return a + b;
  if constexpr (op == TRN_REDUCE_PROD) return a * b;
  if constexpr (op == TRN_REDUCE_MAX) return isa::max_nan(a, b);
  return isa::min_nan(a, b);
}

template <trn_reduce_op_t op>
inline int32_t apply(int32_t a, int32_t b) {
  // Sums and products wrap (computed unsigned: signed overflow is undefined in C++).
  if constexpr (op == TRN_REDUCE_SUM)
    return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
  if constexpr (op == TRN_REDUCE_PROD)
    return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
  if constexpr (op == TRN_REDUCE_MAX) return std::max(a, b);
  return std::min(a, b);
}

// One loop per (type, op), so the compiler vectorises each.
template <class T, trn_reduce_op_t op>
void loop(T *out, const T *a, const T *b, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) out[i] = apply<op>(a[i], b[i]);
}

template <class T>
void dispatch(trn_reduce_op_t op, T *out, const T *a, const T *b, uint64_t n) {
  switch (op) {
    case TRN_REDUCE_SUM: loop<T, TRN_REDUCE_SUM>(out, a, b, n); return;
    case TRN_REDUCE_PROD: loop<T, TRN_REDUCE_PROD>(out, a, b, n); return;
    case TRN_REDUCE_MAX: loop<T, TRN_REDUCE_MAX>(out, a, b, n); return;
    default: loop<T, TRN_REDUCE_MIN>(out, a, b, n); return;
  }
}

// 16-bit floats: blocks widened to fp32, reduced, narrowed with the ISA's rounding.
void reduce_half(isa::DType type, trn_reduce_op_t op, std::byte *out, const std::byte *a,
                 const std::byte *b, uint64_t count) {
  constexpr uint64_t kBlock = 2048;
  float x[kBlock], y[kBlock];
  for (uint64_t at = 0; at < count; at += kBlock) {
    const auto n = static_cast<size_t>(std::min(kBlock, count - at));
    const size_t offset = at * 2;
    isa::load_f32(type, a + offset, x, n);
    isa::load_f32(type, b + offset, y, n);
    dispatch<float>(op, x, x, y, n);
    isa::store_f32(type, x, out + offset, n);
  }
}

}  // namespace

bool reduce_dtype_supported(uint32_t dtype) {
  return dtype == TRN_DTYPE_F32 || dtype == TRN_DTYPE_BF16 || dtype == TRN_DTYPE_F16 ||
         dtype == TRN_DTYPE_I32;
}

bool reduce_op_supported(uint32_t op) {
  return op <= TRN_REDUCE_MIN;
}

void reduce_elements(trn_dtype_t dtype, trn_reduce_op_t op, void *out, const void *a, const void *b,
                     uint64_t count) {
  switch (dtype) {
    case TRN_DTYPE_F32:
      dispatch<float>(op, static_cast<float *>(out), static_cast<const float *>(a),
                      static_cast<const float *>(b), count);
      return;
    case TRN_DTYPE_I32:
      dispatch<int32_t>(op, static_cast<int32_t *>(out), static_cast<const int32_t *>(a),
                        static_cast<const int32_t *>(b), count);
      return;
    case TRN_DTYPE_BF16:
    case TRN_DTYPE_F16:
      reduce_half(dtype == TRN_DTYPE_BF16 ? isa::DType::kBf16 : isa::DType::kF16, op,
                  static_cast<std::byte *>(out), static_cast<const std::byte *>(a),
                  static_cast<const std::byte *>(b), count);
      return;
    default: return;  // refused at submission
  }
}

}  // namespace trn::sim
