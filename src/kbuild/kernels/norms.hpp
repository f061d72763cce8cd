// Normalisation over the last dim of a row-major [rows, cols] matrix, one row per partition:
//   layer norm: y = (x - mean) / sqrt(var + eps) * gamma + beta   (two-pass variance)
//   RMS norm:   y = x / sqrt(mean(x^2) + eps) * gamma
// gamma and beta ([cols]) are optional; they are loaded once, to every partition.
#pragma once

#include <cstdint>

#include "kbuild/build_target.hpp"
#include "kbuild/kernels/tiling.hpp"

namespace trn::kbuild {

struct NormConfig {
  uint64_t rows = 0, cols = 0;
  isa::DType dtype = isa::DType::kF32, out_dtype = isa::DType::kF32;
  float eps = 1e-5f;
  bool affine = true;  // gamma (and, for layer norm, beta) arguments
  BuildTarget target{};
};
// Arguments: 0 = x [rows, cols], then gamma [cols] and beta [cols] when affine, then y.
Built build_layernorm(const NormConfig &config);
// Arguments: 0 = x [rows, cols], then gamma [cols] when affine, then y.
Built build_rmsnorm(const NormConfig &config);

}  // namespace trn::kbuild
