#include "ops/kernels/transposed_load.hpp"

#include <algorithm>

#include "kbuild/kernels/tiling.hpp"

namespace trn::ops::kernels {

using kbuild::Tile;

void load_transposed(kbuild::KernelBuilder &kb, const Tile &dst, const kbuild::HbmView &src) {
  const auto cols = static_cast<uint32_t>(src.cols());
  kbuild::for_row_tiles(src.rows(), [&](uint64_t r0, uint32_t p) {
    const Tile rows = kb.sbuf(src.dtype(), p, {cols}, "rows");
    kb.load(rows, src.row_slice(r0, p));
    const Tile flipped = kb.psum(src.dtype(), cols, {p}, "rows^T");
    kb.transpose(flipped, rows);
    kb.copy(dst.cols(static_cast<uint32_t>(r0), p), flipped);
  });
}

void load_operand(kbuild::KernelBuilder &kb, const Tile &dst, const kbuild::HbmView &src,
                  bool transposed) {
  if (transposed)
    load_transposed(kb, dst, src);
  else
    kb.load(dst, src);
}

}  // namespace trn::ops::kernels
