// Strided copy: y (contiguous) = x, where x is any view of up to five dims with non-negative
// strides (a transpose, a slice with gaps, an expand), by DMA from HBM to HBM: the transfer's
// source pattern is the view itself, so no engine computes. With different dtypes the DMA casts
// through fp32 (round to nearest even); with one dtype it is bit-exact, integers included.
#pragma once

#include <cstdint>
#include <vector>

#include "kbuild/build_target.hpp"
#include "kbuild/kernels/tiling.hpp"

namespace trn::ops::kernels {

struct StridedCopyConfig {
  // The view's dims, outermost first: {size, stride in elements}. Merged and size-1 dims may be
  // left in: the generator merges what it can.
  std::vector<std::pair<uint64_t, int64_t>> dims;
  uint64_t span = 0;  // elements of x's argument: the last element the view reads, plus one
  isa::DType dtype = isa::DType::kF32, out_dtype = isa::DType::kF32;
  kbuild::BuildTarget target{};
};

// Arguments: 0 = x [span] (dtype), 1 = y [numel] (out_dtype). Refuses views that stay above
// five dims after merging, or strides beyond the ISA's 32-bit ones.
kbuild::Built build_strided_copy(const StridedCopyConfig &config);

// The view's dims merged: size-1 dims dropped, a dim folded into the next when it steps by the
// next one's whole extent.
std::vector<std::pair<uint64_t, int64_t>> merge_dims(
    std::vector<std::pair<uint64_t, int64_t>> dims);

}  // namespace trn::ops::kernels
