// One matmul operand as the tensor engine takes it: K along partitions, in tiles of up to 128
// rows of K, each `width` columns wide. A panel is either resident (each 512-column block filled,
// for all of K, when it is first asked for, and read from there by every later matmul) or
// streamed (each tile filled into a fresh SBUF tile when it is asked for; the builder's next-fit
// placement rotates those, so the next tile's load overlaps this one's matmuls). Filling on first
// use keeps the loads in the order the matmuls need them: a whole panel loaded up front would
// queue ahead of the other operand's first tiles. The caller decides which from the SBUF the
// resident copy would take.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kbuild/kernel_builder.hpp"

namespace trn::ops::kernels {

class OperandPanel {
 public:
  // Fills dst ([rows of K tile kt, cols]) with columns [col0, col0 + cols) of K tile kt.
  using Fill = std::function<void(const kbuild::Tile &dst, uint64_t kt, uint64_t col0)>;

  OperandPanel(kbuild::KernelBuilder &kb, isa::DType dtype, uint64_t k, uint32_t width,
               bool resident, Fill fill);

  // The rows of K in tile kt (128, or what is left at the end).
  uint32_t k_rows(uint64_t kt) const;
  // Columns [col0, col0 + cols) of K tile kt, ready for a matmul; they lie in one block of 512
  // columns (col0 / 512 == (col0 + cols - 1) / 512).
  kbuild::Tile tile(uint64_t kt, uint32_t col0, uint32_t cols);

  // Fills every block of a resident panel now (a streamed one fills nothing ahead).
  void prefetch();

  // SBUF bytes per partition a resident panel of this shape takes.
  static uint64_t resident_bytes(isa::DType dtype, uint64_t k, uint32_t width);

 private:
  void fill_block(uint32_t block);

  kbuild::KernelBuilder *kb_;
  isa::DType dtype_;
  uint64_t k_;
  uint32_t width_;
  Fill fill_;
  kbuild::Tile whole_;        // resident panels: every K tile side by side
  std::vector<bool> filled_;  // resident panels: which 512-column blocks are loaded
};

}  // namespace trn::ops::kernels
