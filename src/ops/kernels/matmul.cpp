#include "ops/kernels/matmul.hpp"

#include <fmt/format.h>

#include <optional>

#include "kbuild/kernel_builder.hpp"
#include "kbuild/kernels/tiling.hpp"
#include "ops/kernels/operand_panel.hpp"
#include "ops/kernels/transposed_load.hpp"

namespace trn::ops::kernels {

namespace {

using isa::AluOp;
using isa::DType;
using kbuild::HbmTensor;
using kbuild::KernelBuilder;
using kbuild::Memory;
using kbuild::ScalarArg;
using kbuild::Tile;

constexpr uint32_t kTileM = 128, kTileN = 512;  // an output tile: one PSUM bank of fp32
constexpr uint32_t kAccumulators = 4;           // PSUM banks: one accumulates while others drain

bool is_float(DType t) {
  return t == DType::kF32 || t == DType::kBf16 || t == DType::kF16 || t == DType::kFp8E4m3 ||
         t == DType::kFp8E5m2;
}

std::optional<std::string> check(const MatmulOpConfig &c) {
  if (!c.m || !c.n || !c.k || !c.batch)
    return fmt::format("matmul: the shape batch {} of [{}, {}] @ [{}, {}] is empty", c.batch, c.m,
                       c.k, c.k, c.n);
  if (c.m > UINT32_MAX || c.n > UINT32_MAX)
    return fmt::format("matmul: M = {} or N = {} is 2^32 or more", c.m, c.n);
  if (c.in_dtype != DType::kF32 && c.in_dtype != DType::kBf16 && c.in_dtype != DType::kF16)
    return fmt::format("matmul: inputs of {}; f32, bf16 and f16 are supported",
                       isa::dtype_name(c.in_dtype));
  if (!is_float(c.out_dtype))
    return fmt::format("matmul: an output of {}; the output must be a float dtype",
                       isa::dtype_name(c.out_dtype));
  if (c.bias != MatmulBias::kNone && c.bias_dtype != c.out_dtype && c.bias_dtype != DType::kF32)
    return fmt::format("matmul: a bias of {}; it must be the output's dtype ({}) or f32",
                       isa::dtype_name(c.bias_dtype), isa::dtype_name(c.out_dtype));
  return std::nullopt;
}

std::string kernel_name(const MatmulOpConfig &c) {
  std::string name = fmt::format("matmul_{}_{}x{}x{}", isa::dtype_name(c.in_dtype), c.m, c.n, c.k);
  if (c.batch > 1) name += fmt::format("_batch{}{}", c.batch, c.b_batched ? "" : "_shared_b");
  if (c.trans_a) name += "_ta";
  if (c.trans_b) name += "_tb";
  if (c.bias == MatmulBias::kRow) name += "_row_bias";
  if (c.bias == MatmulBias::kMatrix) name += "_bias";
  if (c.out_dtype != c.in_dtype) name += fmt::format("_to_{}", isa::dtype_name(c.out_dtype));
  return name;
}

}  // namespace

std::variant<isa::Program, std::string> build_matmul(const MatmulOpConfig &c) {
  if (auto e = check(c)) return *e;
  const DType in = c.in_dtype;
  const uint64_t sbuf = c.target.sbuf_bytes();
  // Output rows are staged in SBUF across a window of columns and stored in one transfer per
  // window: the builder splits it by partitions, so its parts (and the next row tile's store)
  // write disjoint HBM rows. Stores of neighbouring 512-column blocks of the same rows would
  // overlap in their bounding byte ranges and be ordered one after another.
  const uint32_t out_size = isa::dtype_size(c.out_dtype);
  const auto stage_cols =
      static_cast<uint32_t>(std::max<uint64_t>(kTileN, sbuf / 16 / out_size / kTileN * kTileN));
  // A quarter of SBUF and two staging windows stay for streamed operand tiles and the epilogue;
  // the rest holds what can stay resident: two panels of op(A)^T (this output row tile's and the
  // next one's, which loads meanwhile), then op(B) (two when each batch has its own), so that
  // neither is loaded (or transposed) again for every tile of the other. What does not fit is
  // streamed.
  const uint64_t reserved = sbuf / 4 + 2ull * stage_cols * out_size;
  const uint64_t for_panels = sbuf > reserved ? sbuf - reserved : 0;
  const uint64_t a_bytes = 2 * OperandPanel::resident_bytes(in, c.k, kTileM);
  const bool a_resident = a_bytes <= for_panels / 2;
  const uint64_t b_bytes = OperandPanel::resident_bytes(in, c.k, static_cast<uint32_t>(c.n)) *
                           (c.b_batched && c.batch > 1 ? 2 : 1);
  const bool b_resident = b_bytes <= for_panels - (a_resident ? a_bytes : 0);

  KernelBuilder kb(kernel_name(c), c.target);
  const uint64_t m = c.m, n = c.n, k = c.k;
  const HbmTensor a =
      kb.input("a", in, c.trans_a ? std::vector{c.batch, k, m} : std::vector{c.batch, m, k});
  std::vector<uint64_t> b_shape = c.trans_b ? std::vector{n, k} : std::vector{k, n};
  if (c.b_batched) b_shape.insert(b_shape.begin(), c.batch);
  const HbmTensor b = kb.input("b", in, b_shape);
  HbmTensor bias;
  if (c.bias == MatmulBias::kRow) bias = kb.input("bias", c.bias_dtype, {n});
  if (c.bias == MatmulBias::kMatrix) bias = kb.input("bias", c.bias_dtype, {m, n});
  const HbmTensor out = kb.output("out", c.out_dtype, {c.batch, m, n});
  const ScalarArg alpha = kb.scalar("alpha");
  ScalarArg beta;
  if (c.bias != MatmulBias::kNone) beta = kb.scalar("beta");

  kbuild::TileRing acc =
      kb.ring(Memory::kPsum, DType::kF32, kTileM, {kTileN}, kAccumulators, "acc");

  // op(B[bb]): K tile kt is rows [k0, k0 + kk) of op(B), i.e. of B, or columns of B when it is
  // stored [N, K] (then transposed on the way in).
  auto b_panel = [&](uint64_t bb) {
    return OperandPanel(kb, in, k, static_cast<uint32_t>(n), b_resident,
                        [&, bb](const Tile &dst, uint64_t kt, uint64_t n0) {
                          const uint64_t k0 = kt * kbuild::kRowTile, kk = dst.partitions(),
                                         cols = dst.free_size();
                          load_operand(kb, dst,
                                       c.trans_b ? b.tile(bb * n + n0, cols, k0, kk)
                                                 : b.tile(bb * k + k0, kk, n0, cols),
                                       c.trans_b);
                        });
  };
  // op(A[bb])^T for output rows [m0, m0 + rows): the stationary operand is [K, M], so A stored
  // [M, K] is the one that goes through the transpose.
  auto a_panel = [&](uint64_t bb, uint64_t m0, uint32_t rows) {
    return OperandPanel(
        kb, in, k, rows, a_resident, [&, bb, m0](const Tile &dst, uint64_t kt, uint64_t c0) {
          const uint64_t k0 = kt * kbuild::kRowTile, kk = dst.partitions(), cols = dst.free_size();
          load_operand(kb, dst,
                       c.trans_a ? a.tile(bb * k + k0, kk, m0 + c0, cols)
                                 : a.tile(bb * m + m0 + c0, cols, k0, kk),
                       !c.trans_a);
        });
  };
  // result = alpha * sum (+ beta * bias) for output rows [m0, ...) and columns [n0, ...), rounded
  // once to the output dtype at the end.
  auto epilogue = [&](const Tile &result, const Tile &sum, uint64_t m0, uint64_t n0) {
    const uint32_t rows = sum.partitions(), cols = static_cast<uint32_t>(sum.free_size());
    if (c.bias == MatmulBias::kNone) {
      kb.tensor_scalar(result, sum, AluOp::kMultiply, alpha);
    } else {
      const Tile raw = kb.sbuf(c.bias_dtype, rows, {cols}, "bias");
      kb.load(raw, c.bias == MatmulBias::kRow ? bias.view().col_slice(n0, cols).broadcast_rows(rows)
                                              : bias.tile(m0, rows, n0, cols));
      const Tile scaled_bias =
          c.bias_dtype == DType::kF32 ? raw : kb.sbuf(DType::kF32, rows, {cols}, "beta*bias");
      kb.tensor_scalar(scaled_bias, raw, AluOp::kMultiply, beta);
      const Tile scaled = kb.sbuf(DType::kF32, rows, {cols}, "alpha*sum");
      kb.tensor_scalar(scaled, sum, AluOp::kMultiply, alpha);
      kb.tensor_tensor(result, scaled, scaled_bias, AluOp::kAdd);
    }
  };

  const uint64_t k_tiles = (k + kbuild::kRowTile - 1) / kbuild::kRowTile;
  struct RowTile {
    uint64_t m0;
    uint32_t rows;
    OperandPanel a;
  };
  std::optional<OperandPanel> shared_b;
  if (!c.b_batched) shared_b.emplace(b_panel(0));
  for (uint64_t bb = 0; bb < c.batch; ++bb) {
    std::optional<OperandPanel> own_b;
    if (c.b_batched) own_b.emplace(b_panel(bb));
    OperandPanel &bp = own_b ? *own_b : *shared_b;
    // The next row tile's op(A)^T panel is loaded (prefetched) before this one's matmuls are
    // emitted, so its loads and transposes are not queued behind this tile's epilogue.
    kbuild::pipelined((m + kTileM - 1) / kTileM,
                      [&](uint64_t t) {
                        const uint64_t m0 = t * kTileM;
                        const auto rows = static_cast<uint32_t>(std::min<uint64_t>(kTileM, m - m0));
                        RowTile r{m0, rows, a_panel(bb, m0, rows)};
                        r.a.prefetch();
                        return r;
                      },
                      [&](RowTile &r) {
                        kbuild::for_col_chunks(n, stage_cols, [&](uint64_t w0, uint32_t width) {
                          const Tile staged = kb.sbuf(c.out_dtype, r.rows, {width}, "out");
                          kbuild::for_col_chunks(width, kTileN, [&](uint64_t off, uint32_t cols) {
                            const Tile sum = acc.next().partition_slice(0, r.rows).cols(0, cols);
                            for (uint64_t kt = 0; kt < k_tiles; ++kt)
                              kb.matmul(sum, r.a.tile(kt, 0, r.rows),
                                        bp.tile(kt, static_cast<uint32_t>(w0 + off), cols),
                                        /*accumulate=*/kt != 0);
                            epilogue(staged.cols(static_cast<uint32_t>(off), cols), sum, r.m0,
                                     w0 + off);
                          });
                          kb.store(out.tile(bb * m + r.m0, r.rows, w0, width), staged);
                        });
                      });
  }
  return kb.finish();
}

}  // namespace trn::ops::kernels
