// Element types of trn-run: the kernel's dtypes as numpy names them, the element types of .npy
// files, and any element read as a double for comparisons. Float formats the ISA defines (f16,
// bf16, fp8) are decoded by the ISA's own conversions (isa/dtype.hpp), so trn-run reads values
// exactly as the device writes them.
#pragma once

#include <cstddef>
#include <optional>

#include "trn-run/npy.hpp"
#include "trn/trn.h"

namespace trn::run {

struct DTypeInfo {
  trn_dtype_t dtype;
  const char *name;        // as in the assembly language
  const char *numpy_name;  // numpy / ml_dtypes name
  size_t size;
  const char *out_descr;  // what outputs are written as
};

// The row of a kernel dtype; nullptr for a value trn-run does not know.
const DTypeInfo *find_dtype_info(trn_dtype_t dtype);

// bf16 and fp8: numpy has no type of its own for them (ml_dtypes does); files may hold their raw
// bit patterns as unsigned integers.
bool is_raw_bits_dtype(trn_dtype_t dtype);

// How the bytes of one element are read.
enum class Elem {
  kF16,
  kF32,
  kF64,
  kBF16,
  kE4M3,
  kE5M2,
  kI8,
  kU8,
  kI16,
  kU16,
  kI32,
  kU32,
  kI64,
  kU64,
  kBool
};

// The element type of a kernel dtype.
Elem elem_of(trn_dtype_t dtype);

// The element type of a file's descr, read as the argument's dtype where the file holds raw bit
// patterns of it (uint16 / void2 for bf16, uint8 / void1 for fp8). nullopt: no element type
// this tool can read.
std::optional<Elem> file_elem(const tools::npy::DType &t, trn_dtype_t arg);

size_t elem_size(Elem e);

// The element at `p` as a double (exact for every type but 64-bit integers beyond 2^53).
double to_double(Elem e, const std::byte *p);

}  // namespace trn::run
