// What the row-wise op kernels (log softmax, the softmax gradients, the norms with statistics and
// their gradients) share: one row per partition and the whole row in one tile, row tiles of up
// to 128 rows, two row tiles in flight (kbuild::pipelined), and the check that a row fits.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "kbuild/build_target.hpp"
#include "kbuild/kernels/tiling.hpp"
#include "kbuild/tile.hpp"

namespace trn::ops::kernels {

// Rows [r0, r0 + p) of a [rows, cols] matrix: row tile `t`.
struct RowBlock {
  uint64_t r0 = 0;
  uint32_t p = 0;
};

inline uint64_t row_blocks(uint64_t rows) {
  return (rows + kbuild::kRowTile - 1) / kbuild::kRowTile;
}

inline RowBlock row_block(uint64_t rows, uint64_t t) {
  const uint64_t r0 = t * kbuild::kRowTile;
  return {r0, static_cast<uint32_t>(std::min<uint64_t>(kbuild::kRowTile, rows - r0))};
}

// Elements [r0, r0 + p) of a vector argument ([n]), as the column DMA of a [p, 1] tile: one value
// per row, for the per-row statistics.
inline kbuild::HbmView rows_of(const kbuild::HbmTensor &vector, const RowBlock &rb) {
  return vector.as_matrix(vector.shape()[0], 1).row_slice(rb.r0, rb.p);
}

// Why rows of `cols` columns do not fit, when the tiles of the two row tiles in flight take
// `per_column` bytes per partition for each column and `fixed` bytes go to other tiles; nothing
// when they fit (an instruction's free size caps a row at 65535 elements too).
inline std::optional<std::string> check_row_fits(const char *kernel, uint64_t cols,
                                                 uint64_t per_column, uint64_t fixed,
                                                 const kbuild::BuildTarget &target) {
  const uint64_t widest =
      std::min<uint64_t>(kbuild::widest_row(target.sbuf_bytes(), per_column, fixed), 65535);
  if (cols <= widest) return std::nullopt;
  return fmt::format(
      "{}: rows of {} columns; this kernel keeps two row tiles in SBUF at once and at most {} "
      "columns fit ({} bytes per partition)",
      kernel, cols, widest, target.sbuf_bytes());
}

// The bytes a tile of one column takes in `dtype`, or 0 when the tile is not needed.
inline uint64_t column_bytes(isa::DType dtype, bool needed = true) {
  return needed ? isa::dtype_size(dtype) : 0;
}

}  // namespace trn::ops::kernels
