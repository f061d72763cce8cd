#include "trn-run/elements.hpp"

#include <cstdint>
#include <cstring>

#include "isa/dtype.hpp"

namespace trn::run {

namespace {

constexpr DTypeInfo kDTypes[] = {
    {TRN_DTYPE_F32, "f32", "float32", 4, "<f4"},
    {TRN_DTYPE_BF16, "bf16", "bfloat16", 2, "<u2"},
    {TRN_DTYPE_F16, "f16", "float16", 2, "<f2"},
    {TRN_DTYPE_FP8_E4M3, "fp8e4m3", "float8_e4m3fn", 1, "|u1"},
    {TRN_DTYPE_FP8_E5M2, "fp8e5m2", "float8_e5m2", 1, "|u1"},
    {TRN_DTYPE_I32, "i32", "int32", 4, "<i4"},
    {TRN_DTYPE_I16, "i16", "int16", 2, "<i2"},
    {TRN_DTYPE_I8, "i8", "int8", 1, "|i1"},
    {TRN_DTYPE_U8, "u8", "uint8", 1, "|u1"},
};

template <typename T>
T load(const std::byte *p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

const DTypeInfo *find_dtype_info(trn_dtype_t dtype) {
  for (const DTypeInfo &info : kDTypes)
    if (info.dtype == dtype) return &info;
  return nullptr;
}

bool is_raw_bits_dtype(trn_dtype_t dtype) {
  return dtype == TRN_DTYPE_BF16 || dtype == TRN_DTYPE_FP8_E4M3 || dtype == TRN_DTYPE_FP8_E5M2;
}

Elem elem_of(trn_dtype_t dtype) {
  switch (dtype) {
    case TRN_DTYPE_F32: return Elem::kF32;
    case TRN_DTYPE_BF16: return Elem::kBF16;
    case TRN_DTYPE_F16: return Elem::kF16;
    case TRN_DTYPE_FP8_E4M3: return Elem::kE4M3;
    case TRN_DTYPE_FP8_E5M2: return Elem::kE5M2;
    case TRN_DTYPE_I32: return Elem::kI32;
    case TRN_DTYPE_I16: return Elem::kI16;
    case TRN_DTYPE_I8: return Elem::kI8;
    default: return Elem::kU8;
  }
}

std::optional<Elem> file_elem(const tools::npy::DType &t, trn_dtype_t arg) {
  if (t.kind == 'n') {
    if (t.name == "bfloat16") return Elem::kBF16;
    if (t.name == "float8_e4m3fn") return Elem::kE4M3;
    return Elem::kE5M2;
  }
  const DTypeInfo *info = find_dtype_info(arg);
  if (is_raw_bits_dtype(arg) && (t.kind == 'u' || t.kind == 'V') && info &&
      t.itemsize == info->size)
    return elem_of(arg);
  switch (t.kind) {
    case 'f': return t.itemsize == 2 ? Elem::kF16 : t.itemsize == 4 ? Elem::kF32 : Elem::kF64;
    case 'b': return Elem::kBool;
    case 'i':
      return t.itemsize == 1   ? Elem::kI8
             : t.itemsize == 2 ? Elem::kI16
             : t.itemsize == 4 ? Elem::kI32
                               : Elem::kI64;
    case 'u':
      return t.itemsize == 1   ? Elem::kU8
             : t.itemsize == 2 ? Elem::kU16
             : t.itemsize == 4 ? Elem::kU32
                               : Elem::kU64;
    default: return std::nullopt;
  }
}

size_t elem_size(Elem e) {
  switch (e) {
    case Elem::kE4M3:
    case Elem::kE5M2:
    case Elem::kI8:
    case Elem::kU8:
    case Elem::kBool: return 1;
    case Elem::kF16:
    case Elem::kBF16:
    case Elem::kI16:
    case Elem::kU16: return 2;
    case Elem::kF32:
    case Elem::kI32:
    case Elem::kU32: return 4;
    default: return 8;
  }
}

double to_double(Elem e, const std::byte *p) {
  // Every f16, bf16 and fp8 value is exact in f32, so the ISA's f32 decoders lose nothing.
  switch (e) {
    case Elem::kF16: return isa::f16_to_f32(load<uint16_t>(p));
    case Elem::kF32: return static_cast<double>(load<float>(p));
    case Elem::kF64: return load<double>(p);
    case Elem::kBF16: return isa::bf16_to_f32(load<uint16_t>(p));
    case Elem::kE4M3: return isa::fp8e4m3_to_f32(load<uint8_t>(p));
    case Elem::kE5M2: return isa::fp8e5m2_to_f32(load<uint8_t>(p));
    case Elem::kI8: return load<int8_t>(p);
    case Elem::kU8: return load<uint8_t>(p);
    case Elem::kBool: return load<uint8_t>(p) ? 1.0 : 0.0;
    case Elem::kI16: return load<int16_t>(p);
    case Elem::kU16: return load<uint16_t>(p);
    case Elem::kI32: return load<int32_t>(p);
    case Elem::kU32: return load<uint32_t>(p);
    case Elem::kI64: return static_cast<double>(load<int64_t>(p));
    case Elem::kU64: return static_cast<double>(load<uint64_t>(p));
  }
  return 0;
}

}  // namespace trn::run
