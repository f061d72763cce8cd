// The executor: engines, semaphores, DMA queues, barriers, deadlock and fault reports, and
// determinism, on programs built with the ISA's builder.
#include <bit>
#include <catch2/catch.hpp>
#include <random>
#include <tuple>

#include "isa/disassembler.hpp"
#include "kbuild/kernels/tiled_matmul.hpp"
#include "support/exec_helpers.hpp"

using namespace trn;
using isa::AluOp;
using isa::DType;
using isa::Engine;
using sim::exec::Executor;
using sim::exec::RunStatus;
using test::HostBuffer;

namespace {

// out = a + b for [128, 512] f32, through SBUF, with semaphores between the engines.
isa::Program vector_add() {
  isa::ProgramBuilder b("vector_add");
  const auto a = b.arg("a", DType::kF32, {128, 512}, isa::ArgDirection::kIn);
  const auto c = b.arg("b", DType::kF32, {128, 512}, isa::ArgDirection::kIn);
  const auto o = b.arg("out", DType::kF32, {128, 512}, isa::ArgDirection::kOut);
  b.dma_copy(Engine::kSync, 0, isa::sbuf_tile(DType::kF32, 0, 128, 0, 512),
             isa::hbm_tile(a, DType::kF32, 512, 0, 128, 0, 512))
      .signal_add(0);
  b.dma_copy(Engine::kSync, 1, isa::sbuf_tile(DType::kF32, 0, 128, 2048, 512),
             isa::hbm_tile(c, DType::kF32, 512, 0, 128, 0, 512))
      .signal_add(0);
  b.tensor_tensor(Engine::kVector, isa::sbuf_tile(DType::kF32, 0, 128, 4096, 512),
                  isa::sbuf_tile(DType::kF32, 0, 128, 0, 512),
                  isa::sbuf_tile(DType::kF32, 0, 128, 2048, 512), AluOp::kAdd)
      .wait_ge(0, 2)
      .signal_add(1);
  b.dma_copy(Engine::kGpSimd, 2, isa::hbm_tile(o, DType::kF32, 512, 0, 128, 0, 512),
             isa::sbuf_tile(DType::kF32, 0, 128, 4096, 512))
      .wait_ge(1, 1);
  return b.finish();
}

uint16_t to_bf16(float v) {
  return isa::f32_to_bf16(v);
}

}  // namespace

TEST_CASE("executor: a vector add runs across three engines in order") {
  Executor ex(sim::core_spec(TRN_GENERATION_TRN2));
  HostBuffer a(128 * 512 * 4), b(128 * 512 * 4), out(128 * 512 * 4);
  for (size_t i = 0; i < 128 * 512; ++i) {
    a.set<float>(i, static_cast<float>(i));
    b.set<float>(i, 0.5f * static_cast<float>(i % 7));
  }
  const auto r = test::run_checked(ex, vector_add(), {a.binding(), b.binding(), out.binding()});
  REQUIRE(r.report.status == RunStatus::kOk);
  for (size_t i = 0; i < 128 * 512; ++i)
    REQUIRE(out.at<float>(i) == static_cast<float>(i) + 0.5f * static_cast<float>(i % 7));
  const auto &c = r.counters;
  CHECK(c.engines[int(Engine::kSync)].instructions == 2);
  CHECK(c.engines[int(Engine::kVector)].instructions == 1);
  CHECK(c.engines[int(Engine::kGpSimd)].instructions == 1);
  CHECK(c.dma_transfers == 3);
  CHECK(c.dma_bytes == 3 * 128 * 512 * 4);
  // The vector engine waited for both loads; the store waited for the add.
  CHECK(c.engines[int(Engine::kVector)].wait_ps > 0);
  CHECK(c.total_ps > c.engines[int(Engine::kVector)].busy_ps);
}

TEST_CASE("executor: the tiled matmul kernel matches exact integer math", "[numerics]") {
  for (auto gen : {TRN_GENERATION_TRN1, TRN_GENERATION_TRN2}) {
    const auto spec = sim::core_spec(gen);
    kbuild::MatmulConfig cfg{256,          1024,        384,
                             DType::kBf16, DType::kF32, spec.sbuf_bytes_per_partition};
    auto built = kbuild::build_tiled_matmul(cfg);
    REQUIRE(std::holds_alternative<isa::Program>(built));
    const auto &prog = std::get<isa::Program>(built);
    HostBuffer lhsT(cfg.k * cfg.m * 2), rhs(cfg.k * cfg.n * 2), out(cfg.m * cfg.n * 4);
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> small(-8, 8);
    std::vector<int> av(cfg.k * cfg.m), bv(cfg.k * cfg.n);
    for (size_t i = 0; i < av.size(); ++i)
      lhsT.set<uint16_t>(i, to_bf16(float(av[i] = small(rng))));
    for (size_t i = 0; i < bv.size(); ++i) rhs.set<uint16_t>(i, to_bf16(float(bv[i] = small(rng))));
    Executor ex(spec);
    const auto r = test::run_checked(ex, prog, {lhsT.binding(), rhs.binding(), out.binding()});
    REQUIRE(r.report.status == RunStatus::kOk);
    for (uint64_t m = 0; m < cfg.m; ++m)
      for (uint64_t n = 0; n < cfg.n; ++n) {
        long ref = 0;
        for (uint64_t k = 0; k < cfg.k; ++k) ref += long{av[k * cfg.m + m]} * bv[k * cfg.n + n];
        REQUIRE(out.at<float>(m * cfg.n + n) == float(ref));
      }
    CHECK(r.counters.flops == 2 * cfg.m * cfg.n * cfg.k);
  }
}

TEST_CASE("executor: two runs give identical bytes, cycles and traces") {
  const auto spec = sim::core_spec(TRN_GENERATION_TRN2);
  kbuild::MatmulConfig cfg{256,          1024,         512,
                           DType::kBf16, DType::kBf16, spec.sbuf_bytes_per_partition};
  const auto prog = std::get<isa::Program>(kbuild::build_tiled_matmul(cfg));
  HostBuffer lhsT(cfg.k * cfg.m * 2), rhs(cfg.k * cfg.n * 2);
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  for (size_t i = 0; i < cfg.k * cfg.m; ++i) lhsT.set<uint16_t>(i, to_bf16(nd(rng)));
  for (size_t i = 0; i < cfg.k * cfg.n; ++i) rhs.set<uint16_t>(i, to_bf16(nd(rng)));
  HostBuffer out1(cfg.m * cfg.n * 2), out2(cfg.m * cfg.n * 2);
  Executor ex1(spec), ex2(spec);
  const auto r1 =
      test::run_checked(ex1, prog, {lhsT.binding(), rhs.binding(), out1.binding()}, true);
  const auto r2 =
      test::run_checked(ex2, prog, {lhsT.binding(), rhs.binding(), out2.binding()}, true);
  REQUIRE(r1.report.status == RunStatus::kOk);
  CHECK(out1.bytes == out2.bytes);
  CHECK(r1.counters.total_ps == r2.counters.total_ps);
  for (uint32_t e = 0; e < isa::kEngineCount; ++e) {
    CHECK(r1.counters.engines[e].cycles == r2.counters.engines[e].cycles);
    CHECK(r1.counters.engines[e].busy_ps == r2.counters.engines[e].busy_ps);
  }
  REQUIRE(r1.trace.size() == r2.trace.size());
  for (size_t i = 0; i < r1.trace.size(); ++i) {
    REQUIRE(r1.trace[i].start_ps == r2.trace[i].start_ps);
    REQUIRE(r1.trace[i].end_ps == r2.trace[i].end_ps);
  }
  // And the same executor again (memory cleared between runs).
  HostBuffer out3(cfg.m * cfg.n * 2);
  const auto r3 = test::run_checked(ex1, prog, {lhsT.binding(), rhs.binding(), out3.binding()});
  CHECK(out3.bytes == out1.bytes);
  CHECK(r3.counters.total_ps == r1.counters.total_ps);
}

TEST_CASE("executor: a deadlock stops with a report of every blocked engine") {
  isa::ProgramBuilder b("stuck");
  b.memset(Engine::kVector, isa::sbuf_tile(DType::kF32, 0, 128, 0, 64), 1.0f).wait_ge(6, 1);
  b.sem_wait(Engine::kTensor, 5, 1);
  b.sem_signal(Engine::kSync, 6, 1);  // vector proceeds; tensor never does
  b.memset(Engine::kGpSimd, isa::sbuf_tile(DType::kF32, 0, 128, 512, 64), 2.0f).wait_eq(7, 3);
  Executor ex(sim::core_spec(TRN_GENERATION_TRN2));
  const auto r = test::run_checked(ex, b.finish(), {});
  REQUIRE(r.report.status == RunStatus::kDeadlock);
  CHECK(r.report.engine == Engine::kTensor);
  CHECK(r.report.index == 0);
  CHECK_THAT(r.report.message,
             Catch::Contains("tensor[0] sem_wait waits for semaphore 5 >= 1 (it is 0)"));
  CHECK_THAT(r.report.message,
             Catch::Contains("gpsimd[0] memset waits for semaphore 7 == 3 (it is 0)"));
  CHECK_THAT(r.report.message, !Catch::Contains("vector"));
  // The vector memset did run.
  float v;
  std::memcpy(&v, ex.memory().sbuf(5, 0), 4);
  CHECK(v == 1.0f);
}

TEST_CASE("executor: barriers join every engine and outstanding DMA") {
  isa::ProgramBuilder b("barrier");
  const auto x = b.arg("x", DType::kF32, {128, 256}, isa::ArgDirection::kIn);
  b.dma_copy(Engine::kSync, 3, isa::sbuf_tile(DType::kF32, 0, 128, 0, 256),
             isa::hbm_tile(x, DType::kF32, 256, 0, 128, 0, 256));
  b.barrier();
  // After the barrier the data is there without any semaphore.
  b.activation(isa::sbuf_tile(DType::kF32, 0, 128, 1024, 256),
               isa::sbuf_tile(DType::kF32, 0, 128, 0, 256), isa::ActFunc::kIdentity, 2.0f, 1.0f);
  HostBuffer xb(128 * 256 * 4);
  for (size_t i = 0; i < 128 * 256; ++i) xb.set<float>(i, float(i % 100));
  Executor ex(sim::core_spec(TRN_GENERATION_TRN2));
  const auto r = test::run_checked(ex, b.finish(), {xb.binding()}, true);
  REQUIRE(r.report.status == RunStatus::kOk);
  float v;
  std::memcpy(&v, ex.memory().sbuf(3, 1024 + 4 * 10), 4);
  CHECK(v == 2.0f * float((3 * 256 + 10) % 100) + 1.0f);
  // The activation started after the DMA completed.
  uint64_t dma_end = 0, act_start = 0;
  for (const auto &t : r.trace) {
    if (t.track >= isa::kEngineCount) dma_end = t.end_ps;
    if (t.opcode == isa::Opcode::kActivation) act_start = t.start_ps;
  }
  CHECK(act_start >= dma_end);

  // A barrier that one engine never reaches is a deadlock, not a hang.
  isa::ProgramBuilder bad("bad barrier");
  bad.add([] {
    isa::Instruction i;
    i.opcode = isa::Opcode::kBarrier;
    i.engine = Engine::kVector;
    return i;
  }());
  const auto d = test::run_checked(ex, bad.finish(), {});
  REQUIRE(d.report.status == RunStatus::kDeadlock);
  CHECK_THAT(d.report.message, Catch::Contains("vector[0] barrier waits at the barrier"));
}

TEST_CASE("executor: out-of-bounds accesses fault at their instruction") {
  Executor ex(sim::core_spec(TRN_GENERATION_TRN2));
  isa::ProgramBuilder b("oob");
  const auto x = b.arg("x", DType::kF32, {128, 512}, isa::ArgDirection::kInOut);
  b.memset(Engine::kVector, isa::sbuf_tile(DType::kF32, 0, 128, 0, 512), 3.0f).signal_add(0);
  b.dma_copy(Engine::kSync, 0, isa::hbm_tile(x, DType::kF32, 512, 0, 128, 0, 512),
             isa::sbuf_tile(DType::kF32, 0, 128, 0, 512))
      .wait_ge(0, 1);
  b.dma_copy(Engine::kSync, 0, isa::hbm_tile(x, DType::kF32, 512, 64, 128, 0, 512),
             isa::sbuf_tile(DType::kF32, 0, 128, 0, 512));
  HostBuffer xb(128 * 512 * 4);
  const auto r = test::run_checked(ex, b.finish(), {xb.binding()});
  REQUIRE(r.report.status == RunStatus::kFault);
  CHECK(r.report.engine == Engine::kSync);
  CHECK(r.report.index == 1);
  CHECK(r.report.opcode == isa::Opcode::kDmaCopy);
  CHECK_THAT(r.report.message, Catch::Contains("argument 0 ('x'), which has 262144 bytes"));
  CHECK(xb.at<float>(0) == 3.0f);  // the first copy happened

  // SBUF overflow: the partition has 224 KiB on trn2 (fine on trn3's 256 KiB). Validation
  // rejects it; the executor still refuses it on its own.
  isa::ProgramBuilder s("sbuf overflow");
  s.memset(Engine::kGpSimd, isa::sbuf_tile(DType::kF32, 0, 128, 224 * 1024 - 1024, 512), 1.0f);
  const isa::Program overflow = s.finish();
  const auto rejected = isa::validate_program(overflow, ex.spec().target());
  REQUIRE(rejected);
  CHECK_THAT(*rejected, Catch::Contains("SBUF partition, which has 229376 bytes"));
  const auto so = ex.run(overflow, {}, {});
  REQUIRE(so.report.status == RunStatus::kFault);
  CHECK(so.report.engine == Engine::kGpSimd);
  CHECK_THAT(so.report.message, Catch::Contains("SBUF partition, which has 229376 bytes"));

  // An offset near 2^64 is printed as the unsigned byte offset it is.
  isa::ProgramBuilder far("far");
  const auto z = far.arg("z", DType::kF32, {128}, isa::ArgDirection::kIn);
  isa::AccessPattern src = isa::hbm_tile(z, DType::kF32, 128, 0, 1, 0, 128);
  src.offset = ~uint64_t{0} - 15;
  far.dma_copy(Engine::kSync, 0, isa::sbuf_tile(DType::kF32, 0, 1, 0, 128), src);
  HostBuffer zb(128 * 4);
  const auto fr = test::run_checked(ex, far.finish(), {zb.binding()});
  REQUIRE(fr.report.status == RunStatus::kFault);
  CHECK_THAT(fr.report.message,
             Catch::Contains("reaches bytes [18446744073709551600, 18446744073709552112) of "
                             "argument 0 ('z')"));

  // An argument the launch did not bind.
  isa::ProgramBuilder u("unbound");
  const auto y = u.arg("y", DType::kF32, {128}, isa::ArgDirection::kIn);
  u.dma_copy(Engine::kSync, 0, isa::sbuf_tile(DType::kF32, 0, 1, 0, 128),
             isa::hbm_tile(y, DType::kF32, 128, 0, 1, 0, 128));
  const auto ub = test::run_checked(ex, u.finish(), {});
  REQUIRE(ub.report.status == RunStatus::kFault);
  CHECK_THAT(ub.report.message, Catch::Contains("names argument 0 but the launch bound 0"));
}

TEST_CASE("executor: scalar arguments are bound per run, the program keeps its own immediates") {
  // out[p, i] = x * alpha + 1 (activation), then column 0 = iota from n; memset of 0 into bf16
  // is the fast case of the cost model: with a scalar it must see the bound value.
  isa::ProgramBuilder b("scalars");
  const auto x = b.arg("x", DType::kF32, {128, 8}, isa::ArgDirection::kIn);
  const auto alpha = b.scalar_arg("alpha", DType::kF32);
  const auto n = b.scalar_arg("n", DType::kI32);
  const auto zero = b.scalar_arg("zero", DType::kF32);
  const auto o = b.arg("out", DType::kF32, {128, 8}, isa::ArgDirection::kOut);
  b.dma_copy(Engine::kSync, 0, isa::sbuf_tile(DType::kF32, 0, 128, 0, 8),
             isa::hbm_tile(x, DType::kF32, 8, 0, 128, 0, 8))
      .signal_add(0);
  b.activation(isa::sbuf_tile(DType::kF32, 0, 128, 64, 8),
               isa::sbuf_tile(DType::kF32, 0, 128, 0, 8), isa::ActFunc::kIdentity, 1.0f, 1.0f)
      .read_scalar(isa::ImmSlot::kImm0, alpha)
      .wait_ge(0, 1)
      .signal_add(1);
  b.iota(isa::sbuf_tile(DType::kF32, 0, 128, 64, 1), isa::pattern({{1, 1}}), 0, 1)
      .read_scalar(isa::ImmSlot::kIimm0, n)
      .wait_ge(1, 1);
  b.memset(Engine::kGpSimd, isa::sbuf_tile(DType::kBf16, 0, 128, 1024, 4096), 0.0f)
      .read_scalar(isa::ImmSlot::kImm0, zero)
      .signal_add(2);
  b.dma_copy(Engine::kSync, 0, isa::hbm_tile(o, DType::kF32, 8, 0, 128, 0, 8),
             isa::sbuf_tile(DType::kF32, 0, 128, 64, 8))
      .wait_ge(2, 1);
  const isa::Program program = b.finish();
  const isa::Program before = program;
  Executor ex(sim::core_spec(TRN_GENERATION_TRN2));
  HostBuffer xb(128 * 8 * 4), out(128 * 8 * 4);
  for (size_t i = 0; i < 128 * 8; ++i) xb.set<float>(i, static_cast<float>(i % 9) - 4.0f);
  auto scalar = [](uint32_t bits) {
    sim::exec::HbmBinding s;
    s.scalar = bits;
    return s;
  };
  uint64_t gpsimd_busy[2] = {};
  int run = 0;
  for (const auto &[a, base, fill] :
       std::vector<std::tuple<float, int32_t, float>>{{3.0f, -5, 0.0f}, {-0.5f, 1000, 2.0f}}) {
    INFO("alpha " << a << ", n " << base);
    const auto r = test::run_checked(
        ex, program,
        {xb.binding(), scalar(std::bit_cast<uint32_t>(a)), scalar(static_cast<uint32_t>(base)),
         scalar(std::bit_cast<uint32_t>(fill)), out.binding()});
    REQUIRE(r.report.status == RunStatus::kOk);
    for (size_t p = 0; p < 128; ++p)
      for (size_t i = 0; i < 8; ++i) {
        const float want = i == 0 ? static_cast<float>(base + static_cast<int32_t>(p))
                                  : xb.at<float>(p * 8 + i) * a + 1.0f;
        REQUIRE(out.at<float>(p * 8 + i) == want);
      }
    gpsimd_busy[run++] = r.counters.engines[int(Engine::kGpSimd)].busy_ps;
  }
  // The memset of 0 into bf16 costs half (first run); of 2.0 the full count (second run).
  CHECK(gpsimd_busy[0] < gpsimd_busy[1]);
  // Binding is per run: the loaded program is unchanged.
  CHECK_FALSE(isa::program_difference(program, before));
}
