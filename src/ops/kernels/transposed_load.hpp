// Loading an HBM rectangle into SBUF as its transpose, through the tensor engine: what a matmul
// operand needs when the tensor is stored the other way round (the contraction dim must lie
// along partitions, and a DMA reading columns would move one element per descriptor).
#pragma once

#include "kbuild/kernel_builder.hpp"

namespace trn::ops::kernels {

// dst[c, r] = src[r, c]: src is up to 128 columns by any number of rows, dst an SBUF view of
// src.cols() partitions by src.rows() columns, in src's dtype. Rows go 128 at a time through an
// SBUF staging tile, a tensor-engine transpose into PSUM and a copy out (exact for every dtype).
void load_transposed(kbuild::KernelBuilder &kb, const kbuild::Tile &dst,
                     const kbuild::HbmView &src);

// dst = src, or its transpose when `transposed` (then as load_transposed).
void load_operand(kbuild::KernelBuilder &kb, const kbuild::Tile &dst, const kbuild::HbmView &src,
                  bool transposed);

}  // namespace trn::ops::kernels
