// The cost model against the published figures (docs/hardware.md §1.2, §1.5, §3).
#include <catch2/catch.hpp>

#include "support/exec_helpers.hpp"

using namespace trn;
using isa::DType;
using isa::Engine;
using sim::exec::Executor;
using sim::exec::RunStatus;
using test::HostBuffer;

namespace {

// `count` back-to-back 128x128x512 matmuls on operands already in SBUF, accumulating.
double matmul_tflops(trn_generation_t gen, DType dtype, int count) {
  isa::ProgramBuilder b("peak");
  for (int i = 0; i < count; ++i)
    b.matmul(isa::psum_tile(DType::kF32, 0, 128, uint64_t(i % 8) * 2048, 512),
             isa::sbuf_tile(dtype, 0, 128, 0, 128), isa::sbuf_tile(dtype, 0, 128, 128 * 4, 512),
             i < 8);
  Executor ex(sim::core_spec(gen));
  const auto r = test::run_checked(ex, b.finish(), {});
  REQUIRE(r.report.status == RunStatus::kOk);
  return double(r.counters.flops) / (double(r.counters.total_ps) * 1e-12) / 1e12;
}

sim::exec::RunResult run_one(trn_generation_t gen, isa::ProgramBuilder &b,
                             std::vector<sim::exec::HbmBinding> args = {}) {
  Executor ex(sim::core_spec(gen));
  auto r = test::run_checked(ex, b.finish(), std::move(args));
  REQUIRE(r.report.status == RunStatus::kOk);
  return r;
}

}  // namespace

TEST_CASE("cost: back-to-back bf16 matmuls reach the published per-core peak") {
  // 92 TFLOPS on NeuronCore-v2 (trn1), 79 on v3 (trn2) and v4 (trn3), within 2 %.
  CHECK(matmul_tflops(TRN_GENERATION_TRN1, DType::kBf16, 256) == Approx(92.0).epsilon(0.02));
  CHECK(matmul_tflops(TRN_GENERATION_TRN2, DType::kBf16, 256) == Approx(79.0).epsilon(0.02));
  CHECK(matmul_tflops(TRN_GENERATION_TRN3, DType::kBf16, 256) == Approx(79.0).epsilon(0.02));
  // fp8 runs at bf16 speed without double-row mode; fp32 at a quarter (23 / 20 TFLOPS).
  CHECK(matmul_tflops(TRN_GENERATION_TRN2, DType::kFp8E4m3, 256) == Approx(79.0).epsilon(0.02));
  CHECK(matmul_tflops(TRN_GENERATION_TRN1, DType::kF32, 256) == Approx(23.0).epsilon(0.02));
  CHECK(matmul_tflops(TRN_GENERATION_TRN2, DType::kF32, 256) == Approx(19.7).epsilon(0.02));
}

TEST_CASE("cost: matmul cycles follow max(min(64, M), N)") {
  isa::ProgramBuilder b("short moving");
  b.matmul(isa::psum_tile(DType::kF32, 0, 128, 0, 32), isa::sbuf_tile(DType::kBf16, 0, 128, 0, 128),
           isa::sbuf_tile(DType::kBf16, 0, 128, 256, 32), true);  // N = 32 < 64: 64 cycles
  b.matmul(isa::psum_tile(DType::kF32, 0, 16, 2048, 200),
           isa::sbuf_tile(DType::kBf16, 0, 128, 0, 16),
           isa::sbuf_tile(DType::kBf16, 0, 128, 256, 200), true);  // M = 16, N = 200: 200
  const auto r = run_one(TRN_GENERATION_TRN2, b);
  CHECK(r.counters.engines[int(Engine::kTensor)].cycles == 64 + 200);
}

TEST_CASE("cost: a 32 KiB HBM to SBUF copy on one DMA engine takes about 1.4 us on trn2") {
  // One contiguous 32 KiB run, and the recommended 8 partitions x 4 KiB split.
  for (uint32_t parts : {1u, 8u}) {
    isa::ProgramBuilder b("dma");
    const uint32_t per = 32768 / parts;
    const auto x = b.arg("x", DType::kU8, {32768}, isa::ArgDirection::kIn);
    b.dma_copy(Engine::kSync, 0, isa::sbuf_tile(DType::kU8, 0, parts, 0, per),
               isa::hbm_tile(x, DType::kU8, per, 0, parts, 0, per));
    HostBuffer xb(32768);
    const auto r = run_one(TRN_GENERATION_TRN2, b, {xb.binding()});
    const double dma_us = double(r.counters.dma_busy_ps[0]) * 1e-6;
    const double total_us = double(r.counters.total_ps) * 1e-6;
    INFO(parts << " partitions: transfer " << dma_us << " us, kernel " << total_us << " us");
    CHECK(dma_us == Approx(1.416).epsilon(0.05));  // measured 1416 ns [docs/hardware.md §1.5]
    CHECK(total_us == Approx(1.416).epsilon(0.08));
  }
}

TEST_CASE("cost: vector and scalar instructions cost max(64, N) cycles at their clocks") {
  for (auto gen : {TRN_GENERATION_TRN1, TRN_GENERATION_TRN2}) {
    const auto spec = sim::core_spec(gen);
    isa::ProgramBuilder b("elementwise");
    const auto t = [](uint32_t off, uint32_t n) {
      return isa::sbuf_tile(DType::kF32, 0, 128, off, n);
    };
    b.activation(t(0, 16), t(4096, 16), isa::ActFunc::kExp);      // 64 cycles (MIN_II)
    b.activation(t(0, 1000), t(4096, 1000), isa::ActFunc::kExp);  // 1000
    // Each engine writes its own bytes: the engines run unordered (no race).
    b.tensor_scalar(Engine::kVector, t(12288, 1000), t(4096, 1000), isa::AluOp::kMultiply,
                    2.0f);  // 1000
    b.tensor_tensor(Engine::kVector, t(12288, 300), t(4096, 300), t(8192, 300),
                    isa::AluOp::kAdd);  // 2N = 600
    b.tensor_tensor(Engine::kVector, t(12288, 20), t(4096, 20), t(8192, 20),
                    isa::AluOp::kAdd);  // 2N = 40: 64
    b.iota(isa::sbuf_tile(DType::kI32, 0, 128, 16384, 100), isa::pattern({{1, 100}}), 0,
           1);  // 150 + 100
    const auto r = run_one(gen, b);
    CHECK(r.counters.engines[int(Engine::kScalar)].cycles == 64 + 1000);
    CHECK(r.counters.engines[int(Engine::kVector)].cycles == 1000 + 600 + 64);
    CHECK(r.counters.engines[int(Engine::kGpSimd)].cycles == 250);
    // Busy time is cycles at the engine's clock.
    CHECK(double(r.counters.engines[int(Engine::kScalar)].busy_ps) ==
          Approx(1064.0 / double(spec.scalar_hz) * 1e12).epsilon(1e-6));
    CHECK(double(r.counters.engines[int(Engine::kVector)].busy_ps) ==
          Approx(1664.0 / double(spec.vector_hz) * 1e12).epsilon(1e-6));
  }
}

TEST_CASE("cost: trn2 vector performance modes for 16-bit data") {
  isa::ProgramBuilder b("perf mode");
  const auto t = [](DType d, uint32_t off, uint32_t n) {
    return isa::sbuf_tile(d, 0, 128, off, n);
  };
  b.tensor_copy(Engine::kVector, t(DType::kBf16, 0, 2048), t(DType::kBf16, 8192, 2048));  // 4x: 512
  b.tensor_copy(Engine::kVector, t(DType::kF32, 0, 2048), t(DType::kF32, 16384, 2048));   // 2048
  b.tensor_tensor(Engine::kVector, t(DType::kBf16, 0, 1024), t(DType::kBf16, 8192, 1024),
                  t(DType::kBf16, 12288, 1024), isa::AluOp::kMax);  // 2N/2 = 1024
  const auto r = run_one(TRN_GENERATION_TRN2, b);
  CHECK(r.counters.engines[int(Engine::kVector)].cycles == 512 + 2048 + 1024);
  // NeuronCore-v2 has no performance mode.
  isa::ProgramBuilder b1("no perf mode");
  b1.tensor_copy(Engine::kVector, t(DType::kBf16, 0, 2048), t(DType::kBf16, 8192, 2048));
  CHECK(run_one(TRN_GENERATION_TRN1, b1).counters.engines[int(Engine::kVector)].cycles == 2048);
}
