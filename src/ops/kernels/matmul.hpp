// General (batched) matmul for the op library, written with the kernel builder:
//
//   out[b] = alpha * op(A[b]) @ op(B[b]) + beta * bias        for b in [0, batch)
//
// op(A) is [M,K]: A is stored [M,K] row-major, or [K,M] when trans_a. op(B) is [K,N]: B is
// stored [K,N], or [N,K] when trans_b. Any M, N, K, batch >= 1. The products accumulate in fp32
// PSUM over K tiles of 128; alpha and beta are launch-time scalar arguments, so one binary serves
// every value of them.
//
// Arguments, in launch order:
//   0  a    [batch, M, K] (trans_a: [batch, K, M]), in_dtype
//   1  b    [batch, K, N] (trans_b: [batch, N, K]), in_dtype; without the batch dim when
//           b_batched is false (one matrix shared by every batch)
//   2  bias (only when bias != kNone) [N] or [M, N], bias_dtype; the same for every batch
//   .  out  [batch, M, N], out_dtype
//   .  alpha  f32 scalar
//   .  beta   f32 scalar (only when bias != kNone)
// The leading batch dim is there for batch == 1 too ([1, M, K]: the same bytes as [M, K]).
#pragma once

#include <cstdint>
#include <string>
#include <variant>

#include "isa/program.hpp"
#include "kbuild/build_target.hpp"

namespace trn::ops::kernels {

enum class MatmulBias : uint8_t {
  kNone,
  kRow,     // [N], added to every row
  kMatrix,  // [M, N], added to every batch's result
};

struct MatmulOpConfig {
  uint64_t m = 0, n = 0, k = 0;
  uint64_t batch = 1;
  bool trans_a = false, trans_b = false;
  bool b_batched = true;  // false: b is one [K,N] (or [N,K]) matrix for every batch
  isa::DType in_dtype = isa::DType::kF32;   // a and b: f32, bf16 or f16
  isa::DType out_dtype = isa::DType::kF32;  // any float dtype
  MatmulBias bias = MatmulBias::kNone;
  isa::DType bias_dtype = isa::DType::kF32;  // out_dtype or f32
  kbuild::BuildTarget target{};
};

// The program, or why this configuration cannot be built.
std::variant<isa::Program, std::string> build_matmul(const MatmulOpConfig &config);

}  // namespace trn::ops::kernels
