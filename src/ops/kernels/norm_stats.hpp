// Layer norm and RMS norm over the last dim of a row-major [rows, cols] matrix, forward, also
// writing the per-row statistics the backward pass takes (one row per partition, the whole row in
// one tile, fp32 arithmetic):
//   layer norm: mean = sum(x) / n, rstd = 1 / sqrt(sum((x - mean)^2) / n + eps)  (two-pass)
//               y = (x - mean) * rstd * gamma + beta
//   RMS norm:   rstd = 1 / sqrt(sum(x^2) / n + eps),  y = x * rstd * gamma
// gamma and beta ([cols]) are optional (`affine`), loaded once to every partition.
#pragma once

#include <cstdint>

#include "kbuild/build_target.hpp"
#include "kbuild/kernels/tiling.hpp"

namespace trn::ops::kernels {

enum class NormKind : uint8_t { kLayer, kRms };

struct NormStatsConfig {
  NormKind kind = NormKind::kLayer;
  uint64_t rows = 0, cols = 0;
  isa::DType dtype = isa::DType::kF32;      // x, gamma, beta
  isa::DType out_dtype = isa::DType::kF32;  // y
  float eps = 1e-5f;
  bool affine = true;  // gamma (and, for layer norm, beta) arguments
  kbuild::BuildTarget target{};
};

// Arguments: x [rows, cols]; gamma [cols], then (layer norm) beta [cols] when affine;
// y [rows, cols] (out_dtype); mean [rows] f32 (layer norm only); rstd [rows] f32.
kbuild::Built build_norm_forward(const NormStatsConfig &config);

}  // namespace trn::ops::kernels
