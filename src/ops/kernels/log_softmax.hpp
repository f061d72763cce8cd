// Row log softmax over the last dim of a row-major [rows, cols] matrix, numerically stable:
//   y[r, :] = x[r, :] - max(x[r, :]) - log(sum(exp(x[r, :] - max(x[r, :]))))
// one row per partition, the whole row in one tile; fp32 arithmetic, any float input and output
// dtype.
#pragma once

#include <cstdint>

#include "kbuild/build_target.hpp"
#include "kbuild/kernels/tiling.hpp"

namespace trn::ops::kernels {

// Arguments: 0 = x [rows, cols] (dtype), 1 = y [rows, cols] (out_dtype). Rows wider than two
// row tiles in SBUF allow are refused, naming the widest that builds.
kbuild::Built build_log_softmax(uint64_t rows, uint64_t cols, isa::DType dtype,
                                isa::DType out_dtype, const kbuild::BuildTarget &target);

}  // namespace trn::ops::kernels
