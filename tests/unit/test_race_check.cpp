// The executor's race check: accesses of different engines and DMA queues to the same bytes
// that no semaphore or barrier orders stop the run with a fault naming both; correctly ordered
// programs (and interleaved patterns that share no byte) run.
#include <catch2/catch.hpp>
#include <cstdio>
#include <random>
#include <tuple>

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

sim::exec::RunResult run(const isa::Program &p, std::vector<sim::exec::HbmBinding> args,
                         bool race_check = true, bool trace = false) {
  Executor ex(sim::core_spec(TRN_GENERATION_TRN2));
  if (auto err = isa::validate_program(p, ex.spec().target())) FAIL(*err);
  sim::exec::RunOptions opt;
  opt.race_check = race_check;
  opt.trace = trace;
  return ex.run(p, args, opt);
}

// Debug lines for every instruction: 100 * engine + index + 1.
void number_lines(isa::Program &p, std::string file = "kernel.cpp") {
  p.source_file = std::move(file);
  for (uint32_t e = 0; e < isa::kEngineCount; ++e) {
    p.source_lines[e].resize(p.streams[e].size());
    for (uint32_t i = 0; i < p.streams[e].size(); ++i) p.source_lines[e][i] = 100 * e + i + 1;
  }
}

const auto kTile = [](uint64_t offset, uint32_t free = 512) {
  return isa::sbuf_tile(DType::kF32, 0, 128, offset, free);
};

// sync loads x into SBUF [0, 2048); vector (after a memset elsewhere) copies it on.
isa::Program producer_consumer(bool wait) {
  isa::ProgramBuilder b("pc");
  const auto x = b.arg("x", DType::kF32, {128, 512}, isa::ArgDirection::kIn);
  b.dma_copy(Engine::kSync, 3, kTile(0), isa::hbm_tile(x, DType::kF32, 512, 0, 128, 0, 512))
      .signal_add(0);
  b.memset(Engine::kVector, kTile(16384), 0.0f);
  auto copy = b.tensor_copy(Engine::kVector, kTile(8192), kTile(0));
  if (wait) copy.wait_ge(0, 1);
  return b.finish();
}

}  // namespace

TEST_CASE("race check: a producer and consumer ordered by a semaphore run") {
  HostBuffer x(128 * 512 * 4);
  const auto r = run(producer_consumer(true), {x.binding()});
  CHECK(r.report.status == RunStatus::kOk);
  CHECK(r.report.message.empty());
}

TEST_CASE("race check: a consumer that does not wait faults, naming both accesses") {
  HostBuffer x(128 * 512 * 4);
  auto p = producer_consumer(false);
  number_lines(p);
  const auto r = run(p, {x.binding()});
  REQUIRE(r.report.status == RunStatus::kFault);
  CHECK(r.report.engine == Engine::kVector);
  CHECK(r.report.index == 1);
  CHECK(r.report.opcode == isa::Opcode::kTensorCopy);
  CHECK(r.report.message ==
        "unsynchronized access: vector[1] tensor_copy (kernel.cpp:102) reads SBUF p0-127 "
        "[0,2048) while sync[0] dma_copy on queue 3 (kernel.cpp:401) writes it; no semaphore "
        "orders them");
  // Without debug lines there is no location.
  const auto plain = run(producer_consumer(false), {x.binding()});
  CHECK(plain.report.message ==
        "unsynchronized access: vector[1] tensor_copy reads SBUF p0-127 [0,2048) while sync[0] "
        "dma_copy on queue 3 writes it; no semaphore orders them");
}

TEST_CASE("race check: race_check = false runs a racy program") {
  HostBuffer x(128 * 512 * 4);
  const auto r = run(producer_consumer(false), {x.binding()}, /*race_check=*/false);
  CHECK(r.report.status == RunStatus::kOk);
}

TEST_CASE("race check: write after read and write after write") {
  SECTION("WAR without a semaphore") {
    isa::ProgramBuilder b("war");
    b.tensor_copy(Engine::kVector, kTile(8192, 256), kTile(0, 256));
    b.memset(Engine::kGpSimd, isa::sbuf_tile(DType::kF32, 64, 64, 512, 256), 1.0f);
    const auto r = run(b.finish(), {});
    REQUIRE(r.report.status == RunStatus::kFault);
    CHECK(r.report.engine == Engine::kGpSimd);
    CHECK(r.report.message ==
          "unsynchronized access: gpsimd[0] memset writes SBUF p64-127 [512,1024) while "
          "vector[0] tensor_copy reads it; no semaphore orders them");
  }
  SECTION("WAR ordered by a semaphore") {
    isa::ProgramBuilder b("war ok");
    b.tensor_copy(Engine::kVector, kTile(8192, 256), kTile(0, 256)).signal_add(1);
    b.memset(Engine::kGpSimd, kTile(0, 256), 1.0f).wait_ge(1, 1);
    CHECK(run(b.finish(), {}).report.status == RunStatus::kOk);
  }
  SECTION("WAW without a semaphore") {
    isa::ProgramBuilder b("waw");
    b.memset(Engine::kVector, kTile(0, 256), 1.0f);
    b.memset(Engine::kGpSimd, kTile(1020, 1), 2.0f);
    const auto r = run(b.finish(), {});
    REQUIRE(r.report.status == RunStatus::kFault);
    CHECK(r.report.message ==
          "unsynchronized access: gpsimd[0] memset writes SBUF p0-127 [1020,1024) while "
          "vector[0] memset writes it; no semaphore orders them");
  }
  SECTION("two reads never race; neighbouring bytes do not touch") {
    isa::ProgramBuilder b("rr");
    b.tensor_copy(Engine::kVector, kTile(8192), kTile(0));
    b.tensor_copy(Engine::kGpSimd, kTile(16384), kTile(0));
    // Writes right after the tile the others read.
    b.tensor_scalar(Engine::kScalar, kTile(2048), kTile(0), AluOp::kMultiply, 1.0f);
    CHECK(run(b.finish(), {}).report.status == RunStatus::kOk);
  }
  SECTION("program order on one engine") {
    isa::ProgramBuilder b("same");
    b.memset(Engine::kVector, kTile(0), 1.0f);
    b.tensor_copy(Engine::kVector, kTile(0), kTile(0));
    b.memset(Engine::kVector, kTile(0), 1.0f);
    CHECK(run(b.finish(), {}).report.status == RunStatus::kOk);
  }
}

TEST_CASE("race check: DMA transfers against engines and each other") {
  HostBuffer x(128 * 512 * 4), y(128 * 512 * 4);
  auto load = [](isa::ProgramBuilder &b, Engine issuer, uint8_t queue, uint16_t arg) {
    return b.dma_copy(issuer, queue, kTile(0),
                      isa::hbm_tile(arg, DType::kF32, 512, 0, 128, 0, 512));
  };
  SECTION("one issuer, two queues") {
    isa::ProgramBuilder b("two queues");
    const auto xa = b.arg("x", DType::kF32, {128, 512}, isa::ArgDirection::kIn);
    const auto ya = b.arg("y", DType::kF32, {128, 512}, isa::ArgDirection::kIn);
    load(b, Engine::kSync, 0, xa);
    load(b, Engine::kSync, 1, ya);
    const auto r = run(b.finish(), {x.binding(), y.binding()});
    REQUIRE(r.report.status == RunStatus::kFault);
    CHECK(r.report.engine == Engine::kSync);
    CHECK(r.report.index == 1);
    CHECK(r.report.message ==
          "unsynchronized access: sync[1] dma_copy on queue 1 writes SBUF p0-127 [0,2048) while "
          "sync[0] dma_copy on queue 0 writes it; no semaphore orders them");
  }
  SECTION("two issuers, one queue") {
    isa::ProgramBuilder b("two issuers");
    const auto xa = b.arg("x", DType::kF32, {128, 512}, isa::ArgDirection::kIn);
    const auto ya = b.arg("y", DType::kF32, {128, 512}, isa::ArgDirection::kIn);
    load(b, Engine::kGpSimd, 2, xa);
    load(b, Engine::kSync, 2, ya);
    const auto r = run(b.finish(), {x.binding(), y.binding()});
    REQUIRE(r.report.status == RunStatus::kFault);
    CHECK_THAT(r.report.message, Catch::Contains("while gpsimd[0] dma_copy on queue 2 writes it"));
  }
  SECTION("one issuer, one queue: FIFO") {
    isa::ProgramBuilder b("fifo");
    const auto xa = b.arg("x", DType::kF32, {128, 512}, isa::ArgDirection::kIn);
    const auto ya = b.arg("y", DType::kF32, {128, 512}, isa::ArgDirection::kIn);
    load(b, Engine::kSync, 5, xa);
    load(b, Engine::kSync, 5, ya).signal_add(0);
    b.tensor_copy(Engine::kVector, kTile(8192), kTile(0)).wait_ge(0, 1);
    CHECK(run(b.finish(), {x.binding(), y.binding()}).report.status == RunStatus::kOk);
  }
  SECTION("a transfer is ordered after what its issuer did before it") {
    isa::ProgramBuilder b("issue order");
    const auto o = b.arg("o", DType::kF32, {128, 512}, isa::ArgDirection::kOut);
    b.memset(Engine::kGpSimd, kTile(0), 1.0f);
    b.dma_copy(Engine::kGpSimd, 0, isa::hbm_tile(o, DType::kF32, 512, 0, 128, 0, 512), kTile(0));
    CHECK(run(b.finish(), {x.binding()}).report.status == RunStatus::kOk);
  }
  SECTION("an engine overwrites what a transfer still reads") {
    isa::ProgramBuilder b("store");
    const auto o = b.arg("o", DType::kF32, {128, 512}, isa::ArgDirection::kOut);
    b.memset(Engine::kGpSimd, kTile(0), 1.0f).signal_add(0);
    b.dma_copy(Engine::kSync, 4, isa::hbm_tile(o, DType::kF32, 512, 0, 128, 0, 512), kTile(0))
        .wait_ge(0, 1);
    b.memset(Engine::kGpSimd, kTile(8192), 0.0f);
    b.memset(Engine::kGpSimd, kTile(0), 2.0f);  // the store has not been waited for
    const auto r = run(b.finish(), {x.binding()});
    REQUIRE(r.report.status == RunStatus::kFault);
    CHECK(r.report.message ==
          "unsynchronized access: gpsimd[2] memset writes SBUF p0-127 [0,2048) while sync[0] "
          "dma_copy on queue 4 reads it; no semaphore orders them");
  }
}

TEST_CASE("race check: interleaved patterns that share no byte do not race") {
  SECTION("stride-2 halves") {
    isa::ProgramBuilder b("interleaved");
    b.memset(Engine::kVector, isa::sbuf(DType::kF32, 0, 128, 0, {{2, 256}}), 1.0f);
    b.memset(Engine::kGpSimd, isa::sbuf(DType::kF32, 0, 128, 4, {{2, 256}}), 2.0f);
    b.tensor_scalar(Engine::kScalar, isa::sbuf(DType::kF32, 0, 128, 8196, {{2, 256}}),
                    isa::sbuf(DType::kF32, 0, 128, 4100, {{2, 256}}), AluOp::kMultiply, 1.0f);
    b.tensor_scalar(Engine::kScalar, isa::sbuf(DType::kF32, 0, 128, 4096, {{2, 256}}),
                    isa::sbuf(DType::kF32, 0, 128, 8192, {{2, 256}}), AluOp::kMultiply, 1.0f);
    CHECK(run(b.finish(), {}).report.status == RunStatus::kOk);
  }
  SECTION("column slices of a wider tile") {
    isa::ProgramBuilder b("columns");
    b.memset(Engine::kVector, isa::sbuf(DType::kF32, 0, 128, 0, {{128, 4}, {1, 64}}), 1.0f);
    b.memset(Engine::kGpSimd, isa::sbuf(DType::kF32, 0, 128, 256, {{128, 4}, {1, 64}}), 2.0f);
    CHECK(run(b.finish(), {}).report.status == RunStatus::kOk);
  }
  SECTION("partition halves") {
    isa::ProgramBuilder b("partitions");
    b.memset(Engine::kVector, isa::sbuf_tile(DType::kF32, 0, 64, 0, 512), 1.0f);
    b.memset(Engine::kGpSimd, isa::sbuf_tile(DType::kF32, 64, 64, 0, 512), 2.0f);
    CHECK(run(b.finish(), {}).report.status == RunStatus::kOk);
  }
  SECTION("strided patterns that do share bytes race, reporting the shared range") {
    isa::ProgramBuilder b("shared");
    b.memset(Engine::kVector, isa::sbuf(DType::kF32, 0, 128, 0, {{2, 256}}), 1.0f);
    b.memset(Engine::kGpSimd, isa::sbuf(DType::kF32, 0, 128, 8, {{2, 256}}), 2.0f);
    const auto r = run(b.finish(), {});
    REQUIRE(r.report.status == RunStatus::kFault);
    CHECK_THAT(r.report.message, Catch::Contains("writes SBUF p0-127 [8,2044) while vector[0]"));
  }
  SECTION("a column slice against a whole row") {
    isa::ProgramBuilder b("column row");
    b.memset(Engine::kVector, isa::sbuf(DType::kF32, 0, 128, 256, {{128, 4}, {1, 64}}), 1.0f);
    b.memset(Engine::kGpSimd, isa::sbuf_tile(DType::kF32, 0, 128, 512, 128), 2.0f);
    const auto r = run(b.finish(), {});
    REQUIRE(r.report.status == RunStatus::kFault);
    CHECK_THAT(r.report.message, Catch::Contains("writes SBUF p0-127 [768,1024)"));
  }
}

TEST_CASE("race check: a barrier orders everything before it") {
  HostBuffer x(128 * 512 * 4);
  isa::ProgramBuilder b("barrier");
  const auto xa = b.arg("x", DType::kF32, {128, 512}, isa::ArgDirection::kIn);
  b.dma_copy(Engine::kSync, 3, kTile(0), isa::hbm_tile(xa, DType::kF32, 512, 0, 128, 0, 512));
  b.memset(Engine::kVector, kTile(8192), 1.0f);
  b.barrier();
  b.tensor_copy(Engine::kGpSimd, kTile(8192), kTile(0));
  b.dma_copy(Engine::kScalar, 1, kTile(0), isa::hbm_tile(xa, DType::kF32, 512, 0, 128, 0, 512));
  const auto r = run(b.finish(), {x.binding()});
  // The barrier orders the first two; the two after it race with each other (the load may land
  // while gpsimd still reads).
  REQUIRE(r.report.status == RunStatus::kFault);
  CHECK_THAT(r.report.message,
             Catch::Contains("gpsimd[1] tensor_copy reads SBUF p0-127 [0,2048) while scalar[1] "
                             "dma_copy on queue 1 writes it"));

  isa::ProgramBuilder ok("barrier ok");
  const auto xo = ok.arg("x", DType::kF32, {128, 512}, isa::ArgDirection::kIn);
  ok.dma_copy(Engine::kSync, 3, kTile(0), isa::hbm_tile(xo, DType::kF32, 512, 0, 128, 0, 512));
  ok.memset(Engine::kVector, kTile(8192), 1.0f);
  ok.barrier();
  ok.tensor_copy(Engine::kGpSimd, kTile(8192), kTile(0));
  CHECK(run(ok.finish(), {x.binding()}).report.status == RunStatus::kOk);
}

TEST_CASE("race check: a wait orders only after the updates it needed") {
  // Two producers add to semaphore 0: a small load into A lands first, a large one into B
  // later. A consumer that waits for >= 1 and then reads B is ordered after the first only,
  // even though, by the time it issues, both updates have landed: joining the whole history
  // would hide this race.
  HostBuffer x(128 * 4096 * 4);
  auto build = [](uint32_t needed) {
    isa::ProgramBuilder b("prefix");
    const auto xa = b.arg("x", DType::kF32, {128, 4096}, isa::ArgDirection::kIn);
    b.dma_copy(Engine::kSync, 0, kTile(0, 16), isa::hbm_tile(xa, DType::kF32, 4096, 0, 128, 0, 16))
        .signal_add(0);
    b.dma_copy(Engine::kGpSimd, 1, kTile(4096, 4096),
               isa::hbm_tile(xa, DType::kF32, 4096, 0, 128, 0, 4096))
        .signal_add(0);
    for (int i = 0; i < 20; ++i) b.memset(Engine::kVector, kTile(65536, 8192), 0.0f);
    b.tensor_copy(Engine::kVector, kTile(32768, 4096), kTile(4096, 4096)).wait_ge(0, needed);
    return b.finish();
  };
  const auto r = run(build(1), {x.binding()}, true, true);
  REQUIRE(r.report.status == RunStatus::kFault);
  CHECK(r.report.message ==
        "unsynchronized access: vector[20] tensor_copy reads SBUF p0-127 [4096,20480) while "
        "gpsimd[0] dma_copy on queue 1 writes it; no semaphore orders them");
  // Both transfers had completed when the consumer issued.
  const auto quiet = run(build(1), {x.binding()}, false, true);
  REQUIRE(quiet.report.status == RunStatus::kOk);
  uint64_t dma_end = 0, copy_start = 0;
  for (const auto &t : quiet.trace) {
    if (t.track >= isa::kEngineCount) dma_end = std::max(dma_end, t.end_ps);
    if (t.opcode == isa::Opcode::kTensorCopy) copy_start = t.start_ps;
  }
  CHECK(copy_start > dma_end);
  // Waiting for both orders it.
  CHECK(run(build(2), {x.binding()}).report.status == RunStatus::kOk);
}

TEST_CASE("race check: a set restarts a semaphore's history") {
  isa::ProgramBuilder b("set");
  b.memset(Engine::kVector, kTile(0), 1.0f).signal_add(0);  // lands first
  for (int i = 0; i < 4; ++i) b.memset(Engine::kGpSimd, kTile(8192, 4096), 0.0f);
  b.memset(Engine::kGpSimd, kTile(4096), 1.0f).signal_set(0, 5);
  // After the set: ordered after gpsimd, but not after vector's write.
  b.tensor_scalar(Engine::kScalar, kTile(16384), kTile(4096), AluOp::kMultiply, 1.0f).wait_ge(0, 5);
  b.tensor_scalar(Engine::kScalar, kTile(20480), kTile(0), AluOp::kMultiply, 1.0f);
  const auto r = run(b.finish(), {});
  REQUIRE(r.report.status == RunStatus::kFault);
  CHECK(r.report.engine == Engine::kScalar);
  CHECK(r.report.index == 1);
  CHECK_THAT(r.report.message, Catch::Contains("while vector[0] memset writes it"));
}

TEST_CASE("race check: matmul accumulation chains in PSUM") {
  HostBuffer x(128 * 512 * 4);
  auto build = [](bool wait) {
    isa::ProgramBuilder b("accumulate");
    const auto xa = b.arg("x", DType::kF32, {128, 512}, isa::ArgDirection::kIn);
    b.dma_copy(Engine::kSync, 0, kTile(0), isa::hbm_tile(xa, DType::kF32, 512, 0, 128, 0, 512))
        .signal_add(0);
    const auto acc = isa::psum_tile(DType::kF32, 0, 128, 0, 128);
    for (uint32_t k = 0; k < 4; ++k) {
      auto mm = b.matmul(acc, kTile(k * 512, 128), kTile(((k + 1) % 4) * 512, 128), k == 0);
      if (k == 0) mm.wait_ge(0, 1);
      if (k == 3) mm.signal_add(1);
    }
    auto out = b.tensor_copy(Engine::kVector, kTile(8192, 128), acc);
    if (wait) out.wait_ge(1, 1);
    return b.finish();
  };
  CHECK(run(build(true), {x.binding()}).report.status == RunStatus::kOk);
  const auto r = run(build(false), {x.binding()});
  REQUIRE(r.report.status == RunStatus::kFault);
  CHECK_THAT(r.report.message, Catch::Contains("PSUM p0-127 [0,512)"));
}

TEST_CASE("race check: HBM writes by address, through any argument") {
  SECTION("two queues store the same rows") {
    HostBuffer out(256 * 512 * 4);
    isa::ProgramBuilder b("stores");
    const auto o = b.arg("out", DType::kF32, {256, 512}, isa::ArgDirection::kOut);
    b.memset(Engine::kVector, kTile(0), 1.0f).signal_add(0);
    b.dma_copy(Engine::kSync, 0, isa::hbm_tile(o, DType::kF32, 512, 0, 128, 0, 512), kTile(0))
        .wait_ge(0, 1);
    b.dma_copy(Engine::kSync, 1, isa::hbm_tile(o, DType::kF32, 512, 64, 128, 0, 512), kTile(0));
    const auto r = run(b.finish(), {out.binding()});
    REQUIRE(r.report.status == RunStatus::kFault);
    CHECK(r.report.message ==
          "unsynchronized access: sync[1] dma_copy on queue 1 writes HBM argument 'out' "
          "[131072,262144) while sync[0] dma_copy on queue 0 writes it; no semaphore orders them");
  }
  SECTION("different rows do not race") {
    HostBuffer out(384 * 512 * 4);
    isa::ProgramBuilder b("stores ok");
    const auto o = b.arg("out", DType::kF32, {384, 512}, isa::ArgDirection::kOut);
    b.memset(Engine::kVector, kTile(0), 1.0f).signal_add(0);
    b.dma_copy(Engine::kSync, 0, isa::hbm_tile(o, DType::kF32, 512, 0, 128, 0, 512), kTile(0))
        .wait_ge(0, 1);
    b.dma_copy(Engine::kSync, 1, isa::hbm_tile(o, DType::kF32, 512, 128, 128, 0, 512), kTile(0));
    // Column halves of the same rows, from two queues.
    b.dma_copy(Engine::kGpSimd, 2, isa::hbm_tile(o, DType::kF32, 512, 256, 128, 0, 256),
               kTile(0, 256))
        .wait_ge(0, 1);
    b.dma_copy(Engine::kGpSimd, 3, isa::hbm_tile(o, DType::kF32, 512, 256, 128, 256, 256),
               kTile(0, 256));
    CHECK(run(b.finish(), {out.binding()}).report.status == RunStatus::kOk);
  }
  SECTION("two arguments bound to the same memory") {
    HostBuffer mem(128 * 512 * 4);
    isa::ProgramBuilder b("alias");
    const auto o1 = b.arg("a", DType::kF32, {128, 512}, isa::ArgDirection::kOut);
    const auto o2 = b.arg("b", DType::kF32, {128, 512}, isa::ArgDirection::kOut);
    b.memset(Engine::kVector, kTile(0), 1.0f).signal_add(0);
    b.dma_copy(Engine::kSync, 0, isa::hbm_tile(o1, DType::kF32, 512, 0, 128, 0, 512), kTile(0))
        .wait_ge(0, 1);
    b.dma_copy(Engine::kSync, 1, isa::hbm_tile(o2, DType::kF32, 512, 0, 1, 0, 512),
               isa::sbuf_tile(DType::kF32, 0, 1, 0, 512))
        .wait_ge(0, 1);
    auto p = b.finish();
    REQUIRE(run(p, {mem.binding(), HostBuffer(128 * 512 * 4).binding()}).report.status ==
            RunStatus::kOk);
    HostBuffer shared(128 * 512 * 4);
    const auto r = run(p, {shared.binding(), shared.binding()});
    REQUIRE(r.report.status == RunStatus::kFault);
    CHECK(r.report.message ==
          "unsynchronized access: sync[1] dma_copy on queue 1 writes HBM argument 'b' [0,2048) "
          "while sync[0] dma_copy on queue 0 writes HBM argument 'a' [0,2048); no semaphore "
          "orders them");
  }
}

TEST_CASE("race check: the tiled matmul kernel runs clean, with bounded state") {
  const auto spec = sim::core_spec(TRN_GENERATION_TRN2);
  for (auto [m, n, k] : {std::tuple{512u, 2048u, 1024u}, std::tuple{2048u, 1024u, 1024u}}) {
    kbuild::MatmulConfig cfg{m, n, k, DType::kBf16, DType::kF32, spec.sbuf_bytes_per_partition};
    const auto prog = std::get<isa::Program>(kbuild::build_tiled_matmul(cfg));
    HostBuffer lhsT(cfg.k * cfg.m * 2), rhs(cfg.k * cfg.n * 2), out(cfg.m * cfg.n * 4);
    std::mt19937 rng(3);
    for (size_t i = 0; i < cfg.k * cfg.m; ++i) lhsT.set<uint16_t>(i, uint16_t(rng() & 0x3f7f));
    for (size_t i = 0; i < cfg.k * cfg.n; ++i) rhs.set<uint16_t>(i, uint16_t(rng() & 0x3f7f));
    Executor ex(spec);
    // One run with the check on (the default); its cost against a run without is a matter for
    // benchmarks, not for a test.
    const std::vector<sim::exec::HbmBinding> args{lhsT.binding(), rhs.binding(), out.binding()};
    const auto r = ex.run(prog, args);
    REQUIRE(r.report.status == RunStatus::kOk);
    const sim::exec::Counters &counters = r.counters;
    CHECK(counters.race_accesses >= prog.instruction_count());
    CHECK(counters.race_records_peak < 512);
  }
}

TEST_CASE("race check: a long pipelined kernel keeps bounded state") {
  // Column blocks of x stream through a 4-slot ring: sync loads, vector scales, gpsimd stores;
  // counting semaphores free the slots. Every HBM block spans all rows, so bounding intervals
  // overlap and the exact comparison runs.
  constexpr uint32_t kTiles = 1000, kCols = 32, kSlots = 4;
  HostBuffer xb(128 * kCols * kTiles * 4), ob(128 * kCols * kTiles * 4);
  for (size_t i = 0; i < 128 * kCols * kTiles; ++i) xb.set<float>(i, float(i % 1000));
  Executor ex(sim::core_spec(TRN_GENERATION_TRN2));
  for (bool independent : {false, true}) {
    isa::ProgramBuilder b("pipeline");
    const auto x = b.arg("x", DType::kF32, {128, kCols * kTiles}, isa::ArgDirection::kIn);
    const auto o = b.arg("out", DType::kF32, {128, kCols * kTiles}, isa::ArgDirection::kOut);
    for (uint32_t i = 0; i < kTiles; ++i) {
      const uint32_t slot = i % kSlots;
      auto load =
          b.dma_copy(Engine::kSync, 0, kTile(slot * kCols * 4, kCols),
                     isa::hbm_tile(x, DType::kF32, kCols * kTiles, 0, 128, i * kCols, kCols));
      load.signal_add(0);
      if (i >= kSlots) load.wait_ge(1, i - kSlots + 1);                 // vector has read the slot
      if (i >= kSlots) b.sem_wait(Engine::kVector, 2, i - kSlots + 1);  // the store has read it
      b.tensor_scalar(Engine::kVector, kTile(8192 + slot * kCols * 4, kCols),
                      kTile(slot * kCols * 4, kCols), AluOp::kMultiply, 2.0f)
          .wait_ge(0, i + 1)
          .signal_add(1);
      b.dma_copy(Engine::kGpSimd, 1,
                 isa::hbm_tile(o, DType::kF32, kCols * kTiles, 0, 128, i * kCols, kCols),
                 kTile(8192 + slot * kCols * 4, kCols))
          .wait_ge(1, i + 1)
          .signal_add(2);
    }
    // An engine that never synchronises with the others is not ordered after their records;
    // they go once nothing it has left to run can touch their bytes.
    if (independent)
      for (uint32_t i = 0; i < kTiles; ++i)
        b.tensor_scalar(Engine::kScalar, kTile(65536, 64), kTile(65536, 64), AluOp::kMultiply,
                        1.0f);
    const auto prog = b.finish();
    REQUIRE(!isa::validate_program(prog, ex.spec().target()));
    const std::vector<sim::exec::HbmBinding> args{xb.binding(), ob.binding()};
    const auto r = ex.run(prog, args);
    REQUIRE(r.report.status == RunStatus::kOk);
    CHECK(ob.at<float>(12345) == 2.0f * float(12345 % 1000));
    CHECK(r.counters.race_records_kept < 64);
  }

  // Without the wait for the store, the ring overwrites a slot the store still reads.
  isa::ProgramBuilder bad("pipeline race");
  const auto xb2 = bad.arg("x", DType::kF32, {128, kCols * kTiles}, isa::ArgDirection::kIn);
  const auto ob2 = bad.arg("out", DType::kF32, {128, kCols * kTiles}, isa::ArgDirection::kOut);
  for (uint32_t i = 0; i < 64; ++i) {
    const uint32_t slot = i % kSlots;
    auto load =
        bad.dma_copy(Engine::kSync, 0, kTile(slot * kCols * 4, kCols),
                     isa::hbm_tile(xb2, DType::kF32, kCols * kTiles, 0, 128, i * kCols, kCols));
    load.signal_add(0);
    if (i >= kSlots) load.wait_ge(1, i - kSlots + 1);
    bad.tensor_scalar(Engine::kVector, kTile(8192 + slot * kCols * 4, kCols),
                      kTile(slot * kCols * 4, kCols), AluOp::kMultiply, 2.0f)
        .wait_ge(0, i + 1)
        .signal_add(1);
    bad.dma_copy(Engine::kGpSimd, 1,
                 isa::hbm_tile(ob2, DType::kF32, kCols * kTiles, 0, 128, i * kCols, kCols),
                 kTile(8192 + slot * kCols * 4, kCols))
        .wait_ge(1, i + 1)
        .signal_add(2);
  }
  const auto r = run(bad.finish(), {xb.binding(), ob.binding()});
  REQUIRE(r.report.status == RunStatus::kFault);
  CHECK_THAT(r.report.message, Catch::Contains("tensor_scalar"));
  CHECK_THAT(r.report.message, Catch::Contains("dma_copy on queue 1"));
}
