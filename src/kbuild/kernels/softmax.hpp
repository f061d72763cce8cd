// Row softmax, numerically stable: y[r, :] = exp(x[r, :] - max(x[r, :])) / sum(...), one row per
// partition and the whole row in one tile. The max goes through the vector engine, the exp (with
// its row sum, in the same instruction) through the scalar engine, the division through whichever
// engine is free; fp32 throughout, any input and output dtype.
#pragma once

#include <cstdint>

#include "kbuild/build_target.hpp"
#include "kbuild/kernels/tiling.hpp"

namespace trn::kbuild {

struct SoftmaxConfig {
  uint64_t rows = 0, cols = 0;
  isa::DType dtype = isa::DType::kF32, out_dtype = isa::DType::kF32;
  BuildTarget target{};
};
// Arguments: 0 = x [rows, cols], 1 = y [rows, cols]. Rows of up to 12288 columns.
Built build_softmax(const SoftmaxConfig &config);

}  // namespace trn::kbuild
