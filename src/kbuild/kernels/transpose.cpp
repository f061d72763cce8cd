#include "kbuild/kernels/transpose.hpp"

#include <fmt/format.h>

#include "kbuild/kernel_builder.hpp"

namespace trn::kbuild {

Built build_transpose(const TransposeConfig &c) {
  if (auto e = check_matrix("transpose", c.rows, c.cols, {c.dtype})) return *e;
  KernelBuilder kb(fmt::format("transpose_{}x{}_{}", c.rows, c.cols, isa::dtype_name(c.dtype)),
                   c.target);
  const HbmTensor x = kb.input("x", c.dtype, {c.rows, c.cols});
  const HbmTensor out = kb.output("out", c.dtype, {c.cols, c.rows});
  for_row_tiles(c.rows, [&](uint64_t r0, uint32_t p) {
    for_col_chunks(c.cols, kRowTile, [&](uint64_t c0, uint32_t cb) {
      const Tile in = kb.sbuf(c.dtype, p, {cb}, "x");
      kb.load(in, x.tile(r0, p, c0, cb));
      const Tile flipped = kb.psum(c.dtype, cb, {p}, "x^T");
      kb.transpose(flipped, in);
      const Tile block = kb.sbuf(c.dtype, cb, {p}, "out");
      kb.copy(block, flipped);
      kb.store(out.tile(c0, cb, r0, p), block);
    });
  });
  return kb.finish();
}

}  // namespace trn::kbuild
