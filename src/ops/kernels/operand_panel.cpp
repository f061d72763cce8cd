#include "ops/kernels/operand_panel.hpp"

#include <algorithm>

#include "kbuild/kernels/tiling.hpp"

namespace trn::ops::kernels {

using kbuild::kRowTile;
using kbuild::Tile;

namespace {

// The widest fill: one moving operand of a matmul (512 columns).
constexpr uint32_t kFillColumns = 512;

uint64_t k_tiles(uint64_t k) {
  return (k + kRowTile - 1) / kRowTile;
}

}  // namespace

OperandPanel::OperandPanel(kbuild::KernelBuilder &kb, isa::DType dtype, uint64_t k, uint32_t width,
                           bool resident, Fill fill)
    : kb_(&kb), dtype_(dtype), k_(k), width_(width), fill_(std::move(fill)) {
  if (!resident) return;
  const uint64_t tiles = k_tiles(k);
  whole_ = kb.sbuf(dtype, static_cast<uint32_t>(std::min<uint64_t>(kRowTile, k)),
                   {static_cast<uint32_t>(tiles * width)}, "panel");
  if (!whole_.valid()) return;
  // Column block by column block, all of K for each: the first matmuls need every K tile of the
  // first columns, not the first K tile of every column.
  kbuild::for_col_chunks(width, kFillColumns, [&](uint64_t c0, uint32_t cols) {
    for (uint64_t kt = 0; kt < tiles; ++kt)
      fill_(
          whole_.partition_slice(0, k_rows(kt)).cols(static_cast<uint32_t>(kt * width + c0), cols),
          kt, c0);
  });
}

uint32_t OperandPanel::k_rows(uint64_t kt) const {
  return static_cast<uint32_t>(std::min<uint64_t>(kRowTile, k_ - kt * kRowTile));
}

Tile OperandPanel::tile(uint64_t kt, uint32_t col0, uint32_t cols) const {
  if (whole_.valid())
    return whole_.partition_slice(0, k_rows(kt))
        .cols(static_cast<uint32_t>(kt * width_ + col0), cols);
  const Tile t = kb_->sbuf(dtype_, k_rows(kt), {cols}, "operand");
  if (t.valid()) fill_(t, kt, col0);
  return t;
}

uint64_t OperandPanel::resident_bytes(isa::DType dtype, uint64_t k, uint32_t width) {
  return k_tiles(k) * width * isa::dtype_size(dtype);
}

}  // namespace trn::ops::kernels
