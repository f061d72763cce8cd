// Each device fact has one definition (isa/target.hpp, isa/cost_model.hpp): these tests fail if a
// second one appears and drifts. The kernel builder's target for a device is exactly what the
// runtime reports for it and what the simulator runs it on, and the builder's schedule estimate
// charges exactly what the simulator charges.
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "isa/cost_model.hpp"
#include "isa/target.hpp"
#include "isa/validate.hpp"
#include "support/kbuild_helpers.hpp"
#include "support/sim_env.hpp"
#include "trn/trn.h"

using namespace trn;
using isa::DType;
using isa::Engine;
using kbuild::KernelBuilder;

namespace {

const trn_generation_t kGenerations[] = {TRN_GENERATION_TRN1, TRN_GENERATION_TRN2,
                                         TRN_GENERATION_TRN3};

trn_device_properties_t first_device_properties() {
  uint32_t count = 1;
  trn_device_t device = nullptr;
  REQUIRE(trn_device_get(&count, &device) == TRN_SUCCESS);
  REQUIRE(count >= 1);
  trn_device_properties_t p = TRN_DEVICE_PROPERTIES_INIT;
  REQUIRE(trn_device_get_properties(device, &p) == TRN_SUCCESS);
  return p;
}

void check_same_core(const isa::CoreSpec &a, const isa::CoreSpec &b) {
  CHECK(a.core_version == b.core_version);
  CHECK(a.partitions == b.partitions);
  CHECK(a.sbuf_bytes_per_partition == b.sbuf_bytes_per_partition);
  CHECK(a.sbuf_usable_bytes_per_partition == b.sbuf_usable_bytes_per_partition);
  CHECK(a.psum_bytes_per_partition == b.psum_bytes_per_partition);
  CHECK(a.psum_banks == b.psum_banks);
  CHECK(a.semaphores == b.semaphores);
  CHECK(a.dma_queues == b.dma_queues);
  CHECK(a.tensor_hz == b.tensor_hz);
  CHECK(a.vector_hz == b.vector_hz);
  CHECK(a.scalar_hz == b.scalar_hz);
  CHECK(a.gpsimd_hz == b.gpsimd_hz);
  CHECK(a.dma_engine_bytes_per_s == b.dma_engine_bytes_per_s);
}

// A kernel touching every cost formula: casting and strided DMA, bf16 and fp32 matmul, transpose,
// activations with and without accumulation, tensor_tensor and tensor_scalar in the performance
// modes and out of them, reductions, memsets, iota and a select.
isa::Program build_mixed(KernelBuilder &kb) {
  const uint32_t n = 512;
  const auto x = kb.input("x", DType::kF32, {128, n});
  const auto w = kb.input("w", DType::kBf16, {128, 128});
  const auto y = kb.output("y", DType::kBf16, {128, n});
  const auto xb = kb.sbuf(DType::kBf16, 128, {n}, "xb");
  kb.load(xb, x.tile(0, 128, 0, n));  // casting copy, split across queues
  const auto xf = kb.sbuf(DType::kF32, 128, {n}, "xf");
  kb.load(xf, x.tile(0, 128, 0, n));
  const auto wb = kb.sbuf(DType::kBf16, 128, {128}, "wb");
  kb.load(wb, w.tile(0, 128, 0, 128));
  const auto acc = kb.psum(DType::kF32, 128, {n}, "acc");
  kb.matmul(acc, wb, xb, false);
  const auto wf = kb.sbuf(DType::kF32, 128, {128}, "wf");
  kb.copy(wf, wb);
  kb.matmul(acc, wf, xf, true);
  const auto t = kb.psum(DType::kF32, 128, {128}, "t");
  kb.transpose(t, wf);
  const auto a = kb.sbuf(DType::kBf16, 128, {n}, "a");
  const auto sum = kb.sbuf(DType::kF32, 128, {1}, "sum");
  kb.activation(a, acc, isa::ActFunc::kExp, 1.0f, 0.0f, sum);
  const auto b = kb.sbuf(DType::kBf16, 128, {n}, "b");
  kb.activation(b, xb, isa::ActFunc::kGelu);
  const auto c = kb.sbuf(DType::kBf16, 128, {n}, "c");
  kb.tensor_tensor(c, a, b, isa::AluOp::kAdd);           // all-bf16 SBUF fast path
  kb.tensor_tensor(c, c, b, isa::AluOp::kMax);           // bf16, not add/sub/mul
  kb.tensor_tensor(xf, xf, acc, isa::AluOp::kMultiply);  // PSUM + SBUF
  kb.tensor_scalar(c, c, isa::AluOp::kMultiply, 0.5f);   // bf16 perf mode
  kb.tensor_scalar(xf, xf, isa::AluOp::kAdd, sum);       // fp32, [P,1] operand
  const auto every16 = kb.sbuf(DType::kBf16, 128, {n / 16}, "every16");
  kb.copy(every16, c.reshape({n / 16, 16}).slice(1, 0, 1));  // innermost stride 32 bytes
  const auto r = kb.sbuf(DType::kBf16, 128, {1}, "r");
  kb.reduce(r, c, isa::AluOp::kAdd);  // bf16 add: N/2
  kb.reduce(sum, xf, isa::AluOp::kMax);
  const auto z = kb.sbuf(DType::kBf16, 128, {n}, "z");
  kb.memset(z, 0.0f);  // zero into bf16: N/2
  kb.memset(xf, 1.0f);
  const auto idx = kb.sbuf(DType::kI32, 128, {n}, "idx");
  kb.iota(idx, {{1, n}}, 0, n);
  kb.select(z, {{1, n}}, 0, 1, isa::AluOp::kGreaterEqual, c, 0.0f);
  kb.store(y.tile(0, 128, 0, n), c);
  auto built = kb.finish();
  if (auto *err = std::get_if<std::string>(&built)) FAIL(*err);
  return std::move(std::get<isa::Program>(built));
}

}  // namespace

TEST_CASE(
    "facts: the builder's target for a device is what the runtime reports and the "
    "simulator runs") {
  for (const trn_generation_t g : kGenerations) {
    INFO("generation " << trn_generation_name(g));
    test::SimEnv env;
    env.set("TRN_SIM_GENERATION", trn_generation_name(g));
    const trn_device_properties_t p = first_device_properties();
    REQUIRE(p.generation == g);
    const kbuild::BuildTarget target = kbuild::build_target(p);
    // The core the simulator validates and times kernels with, and the ISA's table entry.
    check_same_core(target.core, sim::core_spec(g));
    check_same_core(target.core, *isa::core_spec(static_cast<isa::Generation>(g)));
    CHECK(target.sbuf_bytes() == p.sbuf_usable_bytes_per_partition);
    // The runtime reports the same figures (it derives none of them).
    CHECK(p.dma_engines_per_core == target.core.dma_queues);
    CHECK(p.tensor_clock_hz == target.core.tensor_hz);
    CHECK(p.peak_bf16_flops_per_core == target.core.tensor_hz * isa::kBf16FlopsPerTensorCycle);
  }
}

TEST_CASE("facts: an unknown generation is the default one for the builder and the simulator") {
  trn_device_properties_t p = TRN_DEVICE_PROPERTIES_INIT;
  p.generation = static_cast<trn_generation_t>(99);
  const isa::CoreSpec &fallback = sim::core_spec(static_cast<trn_generation_t>(99));
  check_same_core(kbuild::build_target(p).core, fallback);
  check_same_core(fallback, *isa::core_spec(isa::kDefaultGeneration));
  CHECK_FALSE(isa::core_spec(static_cast<isa::Generation>(99)));
  CHECK(std::string(trn_generation_name(static_cast<trn_generation_t>(99))) == "unknown");
}

TEST_CASE("facts: every per-queue array holds every generation's DMA queues") {
  for (const trn_generation_t g : kGenerations) {
    CHECK(sim::core_spec(g).dma_queues <= isa::kMaxDmaQueues);
    CHECK(sim::core_spec(g).dma_queues == 16);  // 16 DMA engines per core on v2-v4
  }
}

TEST_CASE("facts: the builder's schedule estimate charges what the simulator charges") {
  for (const trn_generation_t g : kGenerations) {
    INFO("generation " << trn_generation_name(g));
    KernelBuilder kb("mixed", test::build_target(g));
    const isa::Program program = build_mixed(kb);
    const KernelBuilder::Stats st = kb.stats();

    test::HostBuffer x(128 * 512 * 4), w(128 * 128 * 2), y(128 * 512 * 2);
    sim::exec::Executor ex(sim::core_spec(g));
    const auto r = test::run_checked(ex, program, {x.binding(), w.binding(), y.binding()});
    INFO(r.report.message);
    REQUIRE(r.report.status == sim::exec::RunStatus::kOk);
    for (uint32_t e = 0; e < isa::kEngineCount; ++e) {
      INFO("engine " << isa::engine_name(static_cast<Engine>(e)));
      CHECK(st.engine_cycles[e] == r.counters.engines[e].cycles);
    }
    uint64_t dma_ps = 0;
    for (uint32_t q = 0; q < isa::kMaxDmaQueues; ++q) {
      INFO("DMA queue " << q);
      CHECK(st.dma_busy_ps[q] == r.counters.dma_busy_ps[q]);
      dma_ps += st.dma_busy_ps[q];
    }
    CHECK(dma_ps > 0);
    CHECK(st.engine_cycles[static_cast<uint32_t>(Engine::kTensor)] > 0);
  }
}

TEST_CASE("facts: the builder picks engines by the simulator's cost of each candidate") {
  // A bf16 copy in SBUF costs a quarter on the NeuronCore-v3+ Vector engine (performance mode)
  // and full price elsewhere; NeuronCore-v2 has no such mode and runs copies on Vector or GpSimd
  // only, and its GpSimd clock is the faster. The builder's choice (the first of vector, gpsimd,
  // scalar that the core allows and finishes first) must follow the shared model's numbers.
  for (const trn_generation_t g : kGenerations) {
    const isa::CoreSpec &core = sim::core_spec(g);
    isa::Instruction copy;
    copy.opcode = isa::Opcode::kTensorCopy;
    copy.dst = isa::sbuf_tile(DType::kBf16, 0, 128, 0, 2048);
    copy.src0 = isa::sbuf_tile(DType::kBf16, 0, 128, 8192, 2048);
    double best = 0;
    int expected = -1;
    for (Engine e : {Engine::kVector, Engine::kGpSimd, Engine::kScalar}) {
      copy.engine = e;
      if (isa::check_instruction(copy, core)) continue;
      const double s = double(isa::instruction_cost(copy, core).cycles) / double(core.clock_hz(e));
      if (expected < 0 || s < best) {
        best = s;
        expected = static_cast<int>(e);
      }
    }
    REQUIRE(expected >= 0);
    KernelBuilder kb("copy", test::build_target(g));
    const auto in = kb.input("x", DType::kBf16, {128, 2048});
    const auto src = kb.sbuf(DType::kBf16, 128, {2048});
    const auto dst = kb.sbuf(DType::kBf16, 128, {2048});
    kb.load(src, in.tile(0, 128, 0, 2048));
    kb.copy(dst, src);
    auto built = kb.finish();
    if (auto *err = std::get_if<std::string>(&built)) FAIL(*err);
    const isa::Program &p = std::get<isa::Program>(built);
    INFO("generation " << trn_generation_name(g) << ": expected on "
                       << isa::engine_name(static_cast<Engine>(expected)));
    CHECK_FALSE(p.streams[static_cast<uint32_t>(expected)].empty());
  }
}
