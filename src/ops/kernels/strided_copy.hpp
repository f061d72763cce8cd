// Strided copy: y = x, where x is any view of up to five dims with non-negative strides (a
// transpose, a slice with gaps, an expand) and y contiguous or itself a view (a slice of a larger
// tensor: a column block, every other row), by DMA from HBM to HBM: the transfer's source and
// destination patterns are the views themselves, so no engine computes. With different dtypes the
// DMA casts through fp32 (round to nearest even); with one dtype it is bit-exact, integers
// included.
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
  // y's strides in elements, one per dim of `dims` (empty: y is contiguous), and the elements
  // of its argument (the last element the view writes, plus one).
  std::vector<int64_t> out_strides;
  uint64_t out_span = 0;
  isa::DType dtype = isa::DType::kF32, out_dtype = isa::DType::kF32;
  kbuild::BuildTarget target{};
};

// Arguments: 0 = x [span] (dtype), 1 = y [numel, or out_span] (out_dtype). Refuses views that
// stay above five dims after merging (the two views' dims merge only where both do), strides
// beyond the ISA's 32-bit ones, and a y that writes one element twice (a stride of 0).
kbuild::Built build_strided_copy(const StridedCopyConfig &config);

// The view's dims merged: size-1 dims dropped, a dim folded into the next when it steps by the
// next one's whole extent.
std::vector<std::pair<uint64_t, int64_t>> merge_dims(
    std::vector<std::pair<uint64_t, int64_t>> dims);

}  // namespace trn::ops::kernels
