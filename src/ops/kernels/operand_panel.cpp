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
    fill_block(col0 / kFillColumns);
    return whole_.partition_slice(0, k_rows(kt))
        .cols(static_cast<uint32_t>(kt * width_ + col0), cols);
  }
  const Tile t = kb_->sbuf(dtype_, k_rows(kt), {cols}, "operand");
  if (t.valid()) fill_(t, kt, col0);
  return t;
}

void OperandPanel::prefetch() {
  if (whole_.valid())
    for (uint32_t block = 0; block < filled_.size(); ++block) fill_block(block);
}

void OperandPanel::fill_block(uint32_t block) {
  if (filled_[block]) return;
  const uint32_t c0 = block * kFillColumns, cols = std::min(kFillColumns, width_ - c0);
  for (uint64_t kt = 0; kt < k_tiles(k_); ++kt)
    fill_(whole_.partition_slice(0, k_rows(kt)).cols(static_cast<uint32_t>(kt * width_ + c0), cols),
          kt, c0);
  filled_[block] = true;
}

uint64_t OperandPanel::resident_bytes(isa::DType dtype, uint64_t k, uint32_t width) {
  return k_tiles(k) * width * isa::dtype_size(dtype);
}

}  // namespace trn::ops::kernels
