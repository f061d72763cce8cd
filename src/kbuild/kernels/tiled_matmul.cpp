#include "kbuild/kernels/tiled_matmul.hpp"

#include <fmt/format.h>

#include "kbuild/kernel_builder.hpp"

namespace trn::kbuild {

namespace {

constexpr uint32_t kTileK = 128, kTileM = 128, kTileN = 512;
constexpr uint32_t kRing = 16;        // lhsT tiles in flight
constexpr uint32_t kRhsSplit = 4;     // DMAs per rhs k-tile (32 partitions each)
constexpr uint32_t kBanksPerSet = 4;  // two sets of four PSUM banks: compute one, drain the other
constexpr uint64_t kMaxStoreBytes = 64 * 1024;

struct Shape {
  uint32_t mt, nt;  // m and n tiles per output block
};

}  // namespace

std::variant<isa::Program, std::string> build_tiled_matmul(const MatmulConfig &c,
                                                           MatmulPlan *plan) {
  if (c.m == 0 || c.n == 0 || c.k == 0 || c.m % kTileM || c.n % kTileN || c.k % kTileK)
    return fmt::format("matmul [{},{}]@[{},{}]: M and K must be multiples of 128 and N of 512", c.m,
                       c.k, c.k, c.n);
  const uint32_t es = isa::dtype_size(c.in_dtype), oes = isa::dtype_size(c.out_dtype);
  if (!es || !oes) return std::string("matmul: invalid dtype");
  const uint64_t kt_count = c.k / kTileK;
  BuildTarget target = c.target;
  if (!target.sbuf_usable_bytes) target.sbuf_usable_bytes = c.sbuf_bytes_per_partition;

  // Largest output block whose resident rhs, lhsT ring and staging fit in SBUF.
  const Shape shapes[] = {{2, 2}, {4, 1}, {1, 4}, {2, 1}, {1, 2}, {1, 1}};
  Shape shape{0, 0};
  uint64_t rhs_bytes = 0, ring_bytes = 0, stage_bytes = 0;
  for (const Shape s : shapes) {
    if (c.m % (uint64_t{s.mt} * kTileM) || c.n % (uint64_t{s.nt} * kTileN)) continue;
    rhs_bytes = kt_count * s.nt * kTileN * es;
    ring_bytes = uint64_t{kRing} * s.mt * kTileM * es;
    stage_bytes = 2ull * s.mt * s.nt * kTileN * oes;
    if (rhs_bytes + ring_bytes + stage_bytes <= target.sbuf_bytes()) {
      shape = s;
      break;
    }
  }
  if (!shape.mt)
    return fmt::format(
        "matmul: K = {} is too long to keep an rhs block of {} columns in {} "
        "bytes of SBUF per partition",
        c.k, kTileN, target.sbuf_bytes());
  const uint32_t bm = shape.mt * kTileM, bn = shape.nt * kTileN;
  if (plan) *plan = {bm, bn, kRing, rhs_bytes + ring_bytes + stage_bytes};

  KernelBuilder kb(fmt::format("matmul_{}x{}x{}_{}", c.m, c.n, c.k, isa::dtype_name(c.in_dtype)),
                   target);
  const HbmTensor lhsT = kb.input("lhsT", c.in_dtype, {c.k, c.m});
  const HbmTensor rhs = kb.input("rhs", c.in_dtype, {c.k, c.n});
  const HbmTensor out = kb.output("out", c.out_dtype, {c.m, c.n});

  // The rhs block stays resident for all of K; k-tile kt of the next block loads into the same
  // place once the last row block of this one is done with it.
  const Tile rhs_block = kb.sbuf(c.in_dtype, kTileK, {static_cast<uint32_t>(kt_count * bn)}, "rhs");
  TileRing lhs_ring = kb.ring(Memory::kSbuf, c.in_dtype, kTileK, {bm}, kRing, "lhsT");
  TileRing stage = kb.ring(Memory::kSbuf, c.out_dtype, kTileM, {shape.mt * bn}, 2, "stage");
  TileRing acc =
      kb.ring(Memory::kPsum, isa::DType::kF32, kTileM, {kTileN}, 2 * kBanksPerSet, "acc");

  const uint64_t m_blocks = c.m / bm, n_blocks = c.n / bn;
  uint32_t store_splits = 1;
  while (store_splits < kTileM && uint64_t{kTileM / store_splits} * bn * oes > kMaxStoreBytes)
    store_splits *= 2;
  constexpr uint32_t kRhsRows = kTileK / kRhsSplit;

  for (uint64_t nb = 0; nb < n_blocks; ++nb) {
    const uint64_t n0 = nb * bn;
    // Scalar engine: this rhs block, k-tile by k-tile (its own queues, away from the lhsT ring).
    for (uint64_t kt = 0; kt < kt_count; ++kt)
      for (uint32_t part = 0; part < kRhsSplit; ++part)
        kb.load(rhs_block.cols(static_cast<uint32_t>(kt * bn), bn)
                    .partition_slice(part * kRhsRows, kRhsRows),
                rhs.tile(kt * kTileK + part * kRhsRows, kRhsRows, n0, bn),
                {.engine = Engine::kScalar, .dma_parts = 1});

    for (uint64_t mb = 0; mb < m_blocks; ++mb) {
      const uint64_t block = nb * m_blocks + mb, m0 = mb * bm;
      const uint32_t set = static_cast<uint32_t>(block % 2);
      // Sync streams lhsT tiles through the ring; Tensor accumulates the block over K in PSUM
      // set `set` (the other set drains meanwhile).
      for (uint64_t kt = 0; kt < kt_count; ++kt) {
        const Tile lhs_tile = lhs_ring.next();
        kb.load(lhs_tile, lhsT.tile(kt * kTileK, kTileK, m0, bm),
                {.engine = Engine::kSync, .dma_parts = 1});
        for (uint32_t mi = 0; mi < shape.mt; ++mi)
          for (uint32_t ni = 0; ni < shape.nt; ++ni)
            kb.matmul(acc[set * kBanksPerSet + mi * shape.nt + ni],
                      lhs_tile.cols(mi * kTileM, kTileM),
                      rhs_block.cols(static_cast<uint32_t>(kt * bn + ni * kTileN), kTileN),
                      /*accumulate=*/kt != 0);
      }
      // Vector drains the block's PSUM tiles into staging set `set`; GpSimd stores its rows in
      // transfers of at most kMaxStoreBytes, so no queue holds a long store in front of the lhsT
      // loads that share it.
      const Tile staged = stage[set];
      for (uint32_t mi = 0; mi < shape.mt; ++mi)
        for (uint32_t ni = 0; ni < shape.nt; ++ni)
          kb.copy(staged.cols(mi * bn + ni * kTileN, kTileN),
                  acc[set * kBanksPerSet + mi * shape.nt + ni], {.engine = Engine::kVector});
      for (uint32_t mi = 0; mi < shape.mt; ++mi)
        kb.store(out.tile(m0 + uint64_t{mi} * kTileM, kTileM, n0, bn), staged.cols(mi * bn, bn),
                 {.engine = Engine::kGpSimd, .dma_parts = store_splits});
    }
  }
  return kb.finish();
}

}  // namespace trn::kbuild
