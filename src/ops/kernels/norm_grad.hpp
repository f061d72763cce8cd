// The backward pass of layer norm and RMS norm over the last dim of [rows, cols], from the
// statistics the forward pass wrote (build_norm_forward). Per row, with n = cols,
// xhat = (x - mean) * rstd (RMS norm: x * rstd) and gg = g * gamma (g without gamma):
//   layer norm: grad_x = rstd * (gg - mean(gg) - xhat * mean(gg * xhat))
//   RMS norm:   grad_x = rstd * (gg - xhat * mean(gg * xhat))
//   grad_gamma = sum over rows of g * xhat,  grad_beta = sum over rows of g  (layer norm)
// One row per partition and the whole row in one tile, fp32 arithmetic. The column sums run on
// the tensor engine: each 128-column block of a row tile is the stationary operand of a matmul
// with a ones column, accumulating over the row tiles in PSUM.
#pragma once

#include <cstdint>

#include "kbuild/build_target.hpp"
#include "kbuild/kernels/tiling.hpp"
#include "ops/kernels/norm_stats.hpp"

namespace trn::ops::kernels {

struct NormGradConfig {
  NormKind kind = NormKind::kLayer;
  uint64_t rows = 0, cols = 0;
  isa::DType dtype = isa::DType::kF32;       // grad_out, x, gamma
  isa::DType grad_dtype = isa::DType::kF32;  // grad_x
  bool affine = true;  // a gamma argument, and grad_gamma (and grad_beta) outputs
  kbuild::BuildTarget target{};
};

// Arguments: grad_out [rows, cols], x [rows, cols], mean [rows] f32 (layer norm only),
// rstd [rows] f32, gamma [cols] (when affine); then the outputs grad_x [rows, cols]
// (grad_dtype) and, when affine, grad_gamma [cols] f32 and (layer norm) grad_beta [cols] f32.
kbuild::Built build_norm_backward(const NormGradConfig &config);

}  // namespace trn::ops::kernels
