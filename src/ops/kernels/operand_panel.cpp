#include "ops/kernels/operand_panel.hpp"

#include <algorithm>

#include "kbuild/kernels/tiling.hpp"  // kRowTile

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
  whole_ = kb.sbuf(dtype, static_cast<uint32_t>(std::min<uint64_t>(kRowTile, k)),
                   {static_cast<uint32_t>(k_tiles(k) * width)}, "panel");
  filled_.assign((width + kFillColumns - 1) / kFillColumns, false);
}

uint32_t OperandPanel::k_rows(uint64_t kt) const {
  return static_cast<uint32_t>(std::min<uint64_t>(kRowTile, k_ - kt * kRowTile));
}

Tile OperandPanel::tile(uint64_t kt, uint32_t col0, uint32_t cols) {
  if (whole_.valid()) {
    const uint32_t block = col0 / kFillColumns;
    if (!filled_[block]) {
      const uint32_t c0 = block * kFillColumns, n = std::min(kFillColumns, width_ - c0);
      for (uint64_t t = 0; t < k_tiles(k_); ++t)
        fill_(whole_.partition_slice(0, k_rows(t)).cols(static_cast<uint32_t>(t * width_ + c0), n),
              t, c0);
      filled_[block] = true;
    }
    return whole_.partition_slice(0, k_rows(kt))
        .cols(static_cast<uint32_t>(kt * width_ + col0), cols);
  }
  const Tile t = kb_->sbuf(dtype_, k_rows(kt), {cols}, "operand");
  if (t.valid()) fill_(t, kt, col0);
  return t;
}

uint64_t OperandPanel::resident_bytes(isa::DType dtype, uint64_t k, uint32_t width) {
  return k_tiles(k) * width * isa::dtype_size(dtype);
}

}  // namespace trn::ops::kernels
