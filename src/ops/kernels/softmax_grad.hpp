// The gradients of row softmax and row log softmax over the last dim of [rows, cols], from the
// forward output y and the gradient of the loss with respect to it, g:
//   softmax:     grad_in = y * (g - sum(g * y))
//   log softmax: grad_in = g - exp(y) * sum(g)
// with the sums over each row; one row per partition, the whole row in one tile, fp32
// arithmetic.
#pragma once

#include <cstdint>

#include "kbuild/build_target.hpp"
#include "kbuild/kernels/tiling.hpp"

namespace trn::ops::kernels {

// Arguments: 0 = grad_out [rows, cols] (dtype), 1 = out [rows, cols] (dtype: the forward's
// output, y), 2 = grad_in [rows, cols] (grad_dtype). `log` picks the log softmax gradient. Rows
// wider than two row tiles in SBUF allow are refused, naming the widest that builds.
kbuild::Built build_softmax_backward(uint64_t rows, uint64_t cols, bool log, isa::DType dtype,
                                     isa::DType grad_dtype, const kbuild::BuildTarget &target);

}  // namespace trn::ops::kernels
