// Matrix transpose: out[cols, rows] = x[rows, cols]^T, in 128 x 128 blocks through the tensor
// engine (SBUF -> PSUM), drained to SBUF and stored.
#pragma once

#include <cstdint>

#include "kbuild/build_target.hpp"
#include "kbuild/kernels/tiling.hpp"

namespace trn::kbuild {

struct TransposeConfig {
  uint64_t rows = 0, cols = 0;
  isa::DType dtype = isa::DType::kF32;
  BuildTarget target{};
};
// Arguments: 0 = x [rows, cols], 1 = out [cols, rows].
Built build_transpose(const TransposeConfig &config);

}  // namespace trn::kbuild
