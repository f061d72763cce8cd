#include "kbuild/kernels/elementwise.hpp"

#include <fmt/format.h>

#include "isa/dtype.hpp"
#include "kbuild/kernel_builder.hpp"

namespace trn::kbuild {

namespace {

// Columns per chunk: 16 KiB of the widest dtype per partition, so a few iterations' tiles fit.
uint64_t chunk_columns(isa::DType a, isa::DType b) {
  return 16384 / std::max(isa::dtype_size(a), isa::dtype_size(b));
}

}  // namespace

Built build_unary(const UnaryConfig &c) {
  if (auto e = check_matrix("unary", c.rows, c.cols, {c.dtype, c.out_dtype})) return *e;
  const std::string op = c.op.kind == UnaryOp::Kind::kActivation ? isa::act_func_name(c.op.func)
                                                                 : isa::alu_op_name(c.op.op0);
  KernelBuilder kb(fmt::format("unary_{}_{}x{}_{}", op, c.rows, c.cols, isa::dtype_name(c.dtype)),
                   c.target);
  const HbmTensor x = kb.input("x", c.dtype, {c.rows, c.cols});
  const HbmTensor y = kb.output("y", c.out_dtype, {c.rows, c.cols});
  for_col_chunks(c.cols, chunk_columns(c.dtype, c.out_dtype), [&](uint64_t c0, uint32_t cc) {
    for_row_tiles(c.rows, [&](uint64_t r0, uint32_t p) {
      const Tile in = kb.sbuf(c.dtype, p, {cc}, "x");
      kb.load(in, x.tile(r0, p, c0, cc));
      const Tile out = c.out_dtype == c.dtype ? in : kb.sbuf(c.out_dtype, p, {cc}, "y");
      if (c.op.kind == UnaryOp::Kind::kActivation)
        kb.activation(out, in, c.op.func, c.op.scale, c.op.bias);
      else
        kb.tensor_scalar(out, in, c.op.op0, c.op.operand0, c.op.op1, c.op.operand1);
      kb.store(y.tile(r0, p, c0, cc), out);
    });
  });
  return kb.finish();
}

namespace {

// One input of a binary kernel and how it broadcasts against the output.
struct Input {
  HbmTensor tensor;
  bool row_broadcast = false;  // [1, cols]: the same row for every partition
  bool col_broadcast = false;  // [rows, 1]: one value per partition, for every column
  Tile resident;               // loaded once per column chunk (row broadcast) or once (both)

  // The tile holding this input for rows [r0, r0 + p) x columns [c0, c0 + cc).
  Tile tile(KernelBuilder &kb, isa::DType dtype, uint64_t r0, uint32_t p, uint64_t c0,
            uint32_t cc) const {
    if (resident.valid()) return resident.partition_slice(0, p);
    const uint32_t width = col_broadcast ? 1 : cc;
    const Tile t = kb.sbuf(dtype, p, {width}, "in");
    kb.load(t, tensor.tile(r0, p, col_broadcast ? 0 : c0, width));
    return t;
  }
};

}  // namespace

Built build_binary(const BinaryConfig &c) {
  if (auto e = check_matrix("binary", c.rows, c.cols, {c.dtype, c.out_dtype})) return *e;
  const uint64_t shape[2][2] = {{c.a_rows ? c.a_rows : c.rows, c.a_cols ? c.a_cols : c.cols},
                                {c.b_rows ? c.b_rows : c.rows, c.b_cols ? c.b_cols : c.cols}};
  for (int i = 0; i < 2; ++i)
    if ((shape[i][0] != c.rows && shape[i][0] != 1) || (shape[i][1] != c.cols && shape[i][1] != 1))
      return fmt::format(
          "binary: input {} is [{}, {}]; it must broadcast to the output [{}, {}] "
          "(each dim equal or 1)",
          i == 0 ? "a" : "b", shape[i][0], shape[i][1], c.rows, c.cols);
  KernelBuilder kb(fmt::format("binary_{}_{}x{}_{}", isa::alu_op_name(c.op), c.rows, c.cols,
                               isa::dtype_name(c.dtype)),
                   c.target);
  Input in[2];
  for (int i = 0; i < 2; ++i) {
    in[i].tensor = kb.input(i == 0 ? "a" : "b", c.dtype, {shape[i][0], shape[i][1]});
    in[i].row_broadcast = shape[i][0] == 1 && c.rows > 1;
    in[i].col_broadcast = shape[i][1] == 1 && c.cols > 1;
  }
  const HbmTensor out = kb.output("out", c.out_dtype, {c.rows, c.cols});
  const uint32_t partitions = static_cast<uint32_t>(std::min<uint64_t>(kRowTile, c.rows));

  for_col_chunks(c.cols, chunk_columns(c.dtype, c.out_dtype), [&](uint64_t c0, uint32_t cc) {
    // A row-broadcast input is the same for every row tile: load it once per chunk, to every
    // partition (the DMA reads its row once per partition).
    for (Input &i : in) {
      if (!i.row_broadcast) continue;
      const uint32_t width = i.col_broadcast ? 1 : cc;
      if (i.col_broadcast && i.resident.valid()) continue;  // [1, 1]: once for the kernel
      i.resident = kb.sbuf(c.dtype, partitions, {width}, "broadcast");
      kb.load(i.resident,
              i.tensor.tile(0, 1, i.col_broadcast ? 0 : c0, width).broadcast_rows(partitions));
    }
    for_row_tiles(c.rows, [&](uint64_t r0, uint32_t p) {
      const Tile a = in[0].tile(kb, c.dtype, r0, p, c0, cc);
      const Tile b = in[1].tile(kb, c.dtype, r0, p, c0, cc);
      const Tile o = kb.sbuf(c.out_dtype, p, {cc}, "out");
      // A column-broadcast input is a per-partition scalar: tensor_scalar takes it as a [P,1]
      // operand (a op b keeps its order with the operand first when a is the scalar). When both
      // are, combine the two values per row and spread the result along the row.
      if (in[0].col_broadcast && in[1].col_broadcast) {
        const Tile t = kb.sbuf(c.out_dtype, p, {1}, "row value");
        kb.tensor_tensor(t, a, b, c.op);
        kb.copy(o, t.broadcast(cc));
      } else if (in[0].col_broadcast) {
        kb.tensor_scalar(o, b, c.op, a, isa::AluOp::kBypass, 0.0f, /*reverse0=*/true);
      } else if (in[1].col_broadcast) {
        kb.tensor_scalar(o, a, c.op, b);
      } else {
        kb.tensor_tensor(o, a, b, c.op);
      }
      kb.store(out.tile(r0, p, c0, cc), o);
    });
  });
  return kb.finish();
}

Built build_vector_add(uint64_t rows, uint64_t cols, isa::DType dtype, const BuildTarget &target) {
  BinaryConfig c;
  c.rows = rows;
  c.cols = cols;
  c.dtype = c.out_dtype = dtype;
  c.op = isa::AluOp::kAdd;
  c.target = target;
  return build_binary(c);
}

}  // namespace trn::kbuild
