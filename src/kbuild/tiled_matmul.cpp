#include "kbuild/tiled_matmul.hpp"

#include <fmt/format.h>

#include "isa/builder.hpp"

namespace trn::kbuild {

using isa::DType;
using isa::Engine;

namespace {

constexpr uint32_t kTileK = 128, kTileM = 128, kTileN = 512;
constexpr uint32_t kRing = 16;     // lhsT ring slots
constexpr uint32_t kRhsSplit = 4;  // DMAs per rhs k-tile (32 partitions each)
constexpr uint32_t kPsumBankBytes = 2048;
constexpr uint32_t kBanksPerSet = 4;  // two sets of four banks: compute one, drain the other
constexpr uint32_t kSemaphores = 256;
constexpr uint64_t kMaxStoreBytes = 64 * 1024;

// Semaphore map.
struct Sems {
  uint16_t ring_loaded(uint32_t s) const { return static_cast<uint16_t>(s); }
  uint16_t ring_free(uint32_t s) const { return static_cast<uint16_t>(kRing + s); }
  uint16_t rhs_free() const { return 2 * kRing; }        // Tensor done with an rhs k-tile
  uint16_t block_done() const { return 2 * kRing + 1; }  // Tensor finished a block
  uint16_t drained() const { return 2 * kRing + 2; }     // Vector moved a block out of PSUM
  uint16_t stored() const { return 2 * kRing + 3; }      // output DMAs completed
  uint16_t rhs_loaded(uint64_t kt) const { return static_cast<uint16_t>(2 * kRing + 4 + kt); }
};

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
  const Sems sem;
  if (sem.rhs_loaded(kt_count - 1) >= kSemaphores)
    return fmt::format("matmul: K = {} needs {} semaphores; at most K = {} fits", c.k,
                       sem.rhs_loaded(kt_count - 1) + 1,
                       (kSemaphores - sem.rhs_loaded(0)) * kTileK);

  // Largest output block whose resident rhs, lhsT ring and staging fit in SBUF.
  const Shape shapes[] = {{2, 2}, {4, 1}, {1, 4}, {2, 1}, {1, 2}, {1, 1}};
  Shape shape{0, 0};
  uint64_t rhs_bytes = 0, ring_bytes = 0, stage_bytes = 0;
  for (const Shape s : shapes) {
    if (c.m % (uint64_t{s.mt} * kTileM) || c.n % (uint64_t{s.nt} * kTileN)) continue;
    rhs_bytes = kt_count * s.nt * kTileN * es;
    ring_bytes = uint64_t{kRing} * s.mt * kTileM * es;
    stage_bytes = 2ull * s.mt * s.nt * kTileN * oes;
    if (rhs_bytes + ring_bytes + stage_bytes <= c.sbuf_bytes_per_partition) {
      shape = s;
      break;
    }
  }
  if (!shape.mt)
    return fmt::format(
        "matmul: K = {} is too long to keep an rhs block of {} columns in {} "
        "bytes of SBUF per partition",
        c.k, kTileN, c.sbuf_bytes_per_partition);
  const uint32_t bm = shape.mt * kTileM, bn = shape.nt * kTileN;
  const uint64_t ring_off = rhs_bytes, stage_off = rhs_bytes + ring_bytes;
  if (plan) *plan = {bm, bn, kRing, stage_off + stage_bytes};

  isa::ProgramBuilder b(
      fmt::format("matmul_{}x{}x{}_{}", c.m, c.n, c.k, isa::dtype_name(c.in_dtype)));
  const uint16_t lhs = b.arg("lhsT", c.in_dtype, {c.k, c.m}, isa::ArgDirection::kIn);
  const uint16_t rhs = b.arg("rhs", c.in_dtype, {c.k, c.n}, isa::ArgDirection::kIn);
  const uint16_t out = b.arg("out", c.out_dtype, {c.m, c.n}, isa::ArgDirection::kOut);

  const uint64_t m_blocks = c.m / bm, n_blocks = c.n / bn;
  uint32_t store_splits = 1;
  while (store_splits < kTileM && uint64_t{kTileM / store_splits} * bn * oes > kMaxStoreBytes)
    store_splits *= 2;
  uint64_t ring_uses = 0;  // lhsT tiles loaded so far (Sync) == consumed (Tensor), in order
  uint32_t queue = 0;
  auto next_queue = [&queue] { return static_cast<uint8_t>(queue++ % 16); };

  for (uint64_t nb = 0; nb < n_blocks; ++nb) {
    const uint64_t n0 = nb * bn;
    // Scalar engine: this rhs block, k-tile by k-tile, each tile as soon as the Tensor engine
    // is done with the previous block's tile in the same place.
    for (uint64_t kt = 0; kt < kt_count; ++kt)
      for (uint32_t part = 0; part < kRhsSplit; ++part) {
        const uint32_t rows = kTileK / kRhsSplit;
        auto dma = b.dma_copy(
            Engine::kScalar, next_queue(),
            isa::sbuf(c.in_dtype, part * rows, rows, kt * bn * es, {{1, bn}}),
            isa::hbm_tile(rhs, c.in_dtype, c.n, kt * kTileK + part * rows, rows, n0, bn));
        if (part == 0 && nb > 0)
          dma.wait_ge(sem.rhs_free(), static_cast<uint32_t>((nb - 1) * kt_count + kt + 1));
        dma.signal_add(sem.rhs_loaded(kt));
      }

    for (uint64_t mb = 0; mb < m_blocks; ++mb) {
      const uint64_t block = nb * m_blocks + mb, m0 = mb * bm;
      const uint32_t set = static_cast<uint32_t>(block % 2);
      // Tensor: PSUM set `set` was last used by block - 2; Vector must have drained it.
      if (block >= 2) b.sem_wait(Engine::kTensor, sem.drained(), static_cast<uint32_t>(block - 1));
      for (uint64_t kt = 0; kt < kt_count; ++kt) {
        const uint32_t slot = static_cast<uint32_t>(ring_uses % kRing);
        const uint32_t use = static_cast<uint32_t>(ring_uses / kRing);
        ++ring_uses;
        // Sync: load lhsT[kt, m0:m0+bm] into the ring slot once its last use is consumed.
        auto load = b.dma_copy(
            Engine::kSync, next_queue(),
            isa::sbuf(c.in_dtype, 0, kTileK, ring_off + uint64_t{slot} * bm * es, {{1, bm}}),
            isa::hbm_tile(lhs, c.in_dtype, c.m, kt * kTileK, kTileK, m0, bm));
        if (use > 0) load.wait_ge(sem.ring_free(slot), use);
        load.signal_add(sem.ring_loaded(slot));

        if (mb == 0)
          b.sem_wait(Engine::kTensor, sem.rhs_loaded(kt),
                     static_cast<uint32_t>(kRhsSplit * (nb + 1)));
        for (uint32_t mi = 0; mi < shape.mt; ++mi)
          for (uint32_t ni = 0; ni < shape.nt; ++ni) {
            const uint32_t bank = set * kBanksPerSet + mi * shape.nt + ni;
            auto mm = b.matmul(
                isa::psum(DType::kF32, 0, kTileM, uint64_t{bank} * kPsumBankBytes, {{1, kTileN}}),
                isa::sbuf(c.in_dtype, 0, kTileK,
                          ring_off + (uint64_t{slot} * bm + uint64_t{mi} * kTileM) * es,
                          {{1, kTileM}}),
                isa::sbuf(c.in_dtype, 0, kTileK, (kt * bn + uint64_t{ni} * kTileN) * es,
                          {{1, kTileN}}),
                kt == 0);
            if (mi == 0 && ni == 0) mm.wait_ge(sem.ring_loaded(slot), use + 1);
            if (mi == shape.mt - 1 && ni == shape.nt - 1) mm.signal_add(sem.ring_free(slot));
          }
        if (mb == m_blocks - 1 && nb + 1 < n_blocks) b.sem_signal(Engine::kTensor, sem.rhs_free());
      }
      b.sem_signal(Engine::kTensor, sem.block_done());

      // Vector: drain the block's PSUM tiles into staging set `set`, once the output DMAs of
      // block - 2 (same staging set) are done.
      if (block >= 2)
        b.sem_wait(Engine::kVector, sem.stored(),
                   static_cast<uint32_t>((block - 1) * shape.mt * store_splits));
      const uint64_t stage = stage_off + uint64_t{set} * shape.mt * bn * oes;
      for (uint32_t mi = 0; mi < shape.mt; ++mi)
        for (uint32_t ni = 0; ni < shape.nt; ++ni) {
          const uint32_t bank = set * kBanksPerSet + mi * shape.nt + ni;
          auto copy = b.tensor_copy(
              Engine::kVector,
              isa::sbuf(c.out_dtype, 0, kTileM,
                        stage + (uint64_t{mi} * bn + uint64_t{ni} * kTileN) * oes, {{1, kTileN}}),
              isa::psum(DType::kF32, 0, kTileM, uint64_t{bank} * kPsumBankBytes, {{1, kTileN}}));
          if (mi == 0 && ni == 0) copy.wait_ge(sem.block_done(), static_cast<uint32_t>(block + 1));
          if (mi == shape.mt - 1 && ni == shape.nt - 1) copy.signal_add(sem.drained());
        }
      // GpSimd: store the block's rows, in transfers of at most kMaxStoreBytes so that no queue
      // holds a long store in front of the lhsT loads that share it.
      for (uint32_t mi = 0; mi < shape.mt; ++mi)
        for (uint32_t part = 0; part < store_splits; ++part) {
          const uint32_t rows = kTileM / store_splits;
          auto store =
              b.dma_copy(Engine::kGpSimd, next_queue(),
                         isa::hbm_tile(out, c.out_dtype, c.n,
                                       m0 + uint64_t{mi} * kTileM + part * rows, rows, n0, bn),
                         isa::sbuf(c.out_dtype, part * rows, rows, stage + uint64_t{mi} * bn * oes,
                                   {{1, bn}}));
          if (mi == 0 && part == 0) store.wait_ge(sem.drained(), static_cast<uint32_t>(block + 1));
          store.signal_add(sem.stored());
        }
    }
  }
  return b.finish();
}

}  // namespace trn::kbuild
