// The data types of the ISA and the exact conversions between them (docs/ISA.md, "Data types").
// Every conversion to a narrower type rounds to nearest, ties to even; the overflow, NaN and
// subnormal rules of each type are written down in docs/ISA.md and tested exhaustively.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace trn::isa {

// Values are part of the kernel binary format: append only.
enum class DType : uint8_t {
  kInvalid = 0,
  kF32 = 1,
  kBf16 = 2,
  kF16 = 3,
  kFp8E4m3 = 4,  // OCP float8 e4m3fn: no infinities, NaN = S.1111.111, max 448
  kFp8E5m2 = 5,  // OCP float8 e5m2: IEEE-like, infinities, max 57344
  kI32 = 6,
  kI16 = 7,
  kI8 = 8,
  kU8 = 9,
};
constexpr uint32_t kDTypeCount = 10;

// Size of one element in bytes (0 for kInvalid).
uint32_t dtype_size(DType t);
// "f32", "bf16", "f16", "fp8e4m3", "fp8e5m2", "i32", "i16", "i8", "u8".
const char *dtype_name(DType t);
// Accepts the names above plus numpy-style aliases ("float32", "bfloat16", "float16",
// "float8_e4m3fn", "float8_e5m2", "int32", "int16", "int8", "uint8").
std::optional<DType> parse_dtype(std::string_view name);
bool dtype_is_float(DType t);
bool dtype_is_valid(DType t);

// Scalar conversions. f32 -> narrower: round to nearest even. Overflow: bf16/f16/e5m2 give
// +-inf, e4m3 gives NaN (it has no infinity), integers saturate; NaN -> NaN for floats and 0
// for integers. Narrower -> f32 is exact (i32 rounds to nearest even above 2^24).
float bf16_to_f32(uint16_t bits);
uint16_t f32_to_bf16(float v);
float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float v);
float fp8e4m3_to_f32(uint8_t bits);
uint8_t f32_to_fp8e4m3(float v);
float fp8e5m2_to_f32(uint8_t bits);
uint8_t f32_to_fp8e5m2(float v);
int32_t f32_to_i32(float v);
int16_t f32_to_i16(float v);
int8_t f32_to_i8(float v);
uint8_t f32_to_u8(float v);

// Bulk conversions between memory of type `t` (n contiguous elements, any alignment) and f32.
// Hot paths of the simulator: table or bit-trick driven, no per-element dispatch.
void load_f32(DType t, const std::byte *src, float *dst, size_t n);
void store_f32(DType t, const float *src, std::byte *dst, size_t n);
// Strided variants: element i is at src + i * stride_bytes.
void load_f32_strided(DType t, const std::byte *src, ptrdiff_t stride_bytes, float *dst, size_t n);
void store_f32_strided(DType t, const float *src, std::byte *dst, ptrdiff_t stride_bytes, size_t n);

}  // namespace trn::isa
