// Exact int64 forms of the host ops that PyTorch also runs on integers (arithmetic, extremes,
// comparisons, sums), for tensors whose dtypes are all integers: float64 holds integers exactly
// only up to 2^53, so the float64 reference would round int64 values beyond it. Arithmetic wraps
// around on overflow (two's complement), as PyTorch's integer kernels do.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/host/reference.hpp"

namespace trn::ops::host {

// neg, abs, relu and square; the others give floats.
bool has_integer_form(Unary op);
int64_t apply_integer(Unary op, int64_t x);

// add, sub, mul, pow (a negative exponent as PyTorch: 0 but for bases 1 and -1), maximum,
// minimum and the comparisons (1 or 0); div gives floats.
bool has_integer_form(Binary op);
int64_t apply_integer(Binary op, int64_t a, int64_t b);

// sum, max, min, argmax and argmin (mean gives a float): x holds `shape`'s elements in row-major
// order; the result holds the reduced shape's (keepdim or not, the same elements). Throws as
// reduce() does for bad dims or a max of nothing.
bool has_integer_form(Reduce op);
std::vector<int64_t> reduce_integer(Reduce op, const Shape &shape, const std::vector<int64_t> &x,
                                    const std::vector<int64_t> &dims);

}  // namespace trn::ops::host
