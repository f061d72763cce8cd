// argmax and argmin along the rows of a [rows, cols] matrix, as PyTorch picks them: the first
// index of the largest (smallest) value, and the first NaN's where a row has one (NaN propagates
// through PyTorch's max and min). Per column chunk: the chunk's extreme (a reduction), the
// candidates (equal to it, or NaN), and the first candidate's index as the largest of
// candidate x (cols - index); chunks combine keeping the earlier on ties. Indices are exact in
// fp32 below 2^24 columns.
#pragma once

#include <cstdint>
#include <string>

#include "kbuild/build_target.hpp"
#include "kbuild/kernels/tiling.hpp"

namespace trn::ops::kernels {

struct ArgExtremeConfig {
  uint64_t rows = 0, cols = 0;
  isa::DType dtype = isa::DType::kF32;  // x's: a float dtype
  bool largest = true;                  // argmax; false: argmin
  bool int64 = true;                    // indices as int64 ((low, high) int32 words), else int32
  kbuild::BuildTarget target{};
};

// Arguments: 0 = x [rows, cols], 1 = indices: i32 [rows, 2] (int64) or i32 [rows].
std::string arg_extreme_signature(const ArgExtremeConfig &config);
kbuild::Built build_arg_extreme(const ArgExtremeConfig &config);

}  // namespace trn::ops::kernels
