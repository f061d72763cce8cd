// The kernel builder: results against host arithmetic, the waits it inserts (and does not),
// placement, errors naming the call site, and round trips through the text form.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>

#include "isa/assembler.hpp"
#include "isa/container.hpp"
#include "isa/disassembler.hpp"
#include "kbuild/kernel_builder.hpp"
#include "kbuild/kernels/tiled_matmul.hpp"
#include "support/kbuild_helpers.hpp"

using namespace trn;
using namespace trn::kbuild;
using isa::DType;
using sim::exec::Executor;
using sim::exec::RunStatus;
using test::HostBuffer;

namespace {

const BuildTarget kTrn2 = test::build_target(TRN_GENERATION_TRN2);

// y = 2 * x + b over row tiles of 128: load, multiply-add, store.
isa::Program scale_add(uint64_t rows, uint64_t cols, KernelBuilder::Stats *stats = nullptr) {
  KernelBuilder kb("scale_add", kTrn2);
  const HbmTensor x = kb.input("x", DType::kF32, {rows, cols});
  const HbmTensor b = kb.input("b", DType::kF32, {1, cols});
  const HbmTensor y = kb.output("y", DType::kF32, {rows, cols});
  const auto c = static_cast<uint32_t>(cols);
  const Tile bias = kb.sbuf(DType::kF32, 128, {c}, "bias");
  kb.load(bias, b.view().broadcast_rows(128));
  for (uint64_t r = 0; r < rows; r += 128) {
    const Tile t = kb.sbuf(DType::kF32, 128, {c}, "x");
    kb.load(t, x.tile(r, 128, 0, cols));
    kb.tensor_scalar(t, t, AluOp::kMultiply, 2.0f);
    kb.tensor_tensor(t, t, bias, AluOp::kAdd);
    kb.store(y.tile(r, 128, 0, cols), t);
  }
  if (stats) *stats = kb.stats();
  return test::built(kb.finish());
}

uint64_t total_waits(const isa::Program &p) {
  uint64_t n = 0;
  for (const auto &s : p.streams)
    for (const auto &i : s) n += i.wait.cmp != isa::SemCmp::kNone;
  return n;
}

}  // namespace

TEST_CASE("kbuild: a builder kernel computes what the host computes") {
  const uint64_t rows = 512, cols = 1024;
  KernelBuilder::Stats stats;
  const isa::Program p = scale_add(rows, cols, &stats);
  HostBuffer x(rows * cols * 4), b(cols * 4), y(rows * cols * 4);
  for (size_t i = 0; i < rows * cols; ++i) x.set<float>(i, float(int(i % 97) - 48));
  for (size_t i = 0; i < cols; ++i) b.set<float>(i, float(i % 5));
  Executor ex(sim::core_spec(TRN_GENERATION_TRN2));
  const auto r = test::run_checked(ex, p, {x.binding(), b.binding(), y.binding()});
  REQUIRE(r.report.status == RunStatus::kOk);
  for (size_t i = 0; i < rows * cols; ++i)
    REQUIRE(y.at<float>(i) == 2.0f * x.at<float>(i) + b.at<float>(i % cols));
  CHECK(stats.waits == total_waits(p));
  CHECK(stats.semaphores > 0);
  CHECK(stats.semaphores < 40);
  CHECK(stats.dma_transfers > rows / 128 * 2);  // 512 KiB tiles split across queues
}

TEST_CASE("kbuild: waits go where engines hand data over, and only there") {
  KernelBuilder kb("chain", kTrn2);
  const HbmTensor x = kb.input("x", DType::kF32, {128, 64});
  const HbmTensor y = kb.output("y", DType::kF32, {128, 64});
  const Tile t = kb.sbuf(DType::kF32, 128, {64});
  const Tile u = kb.sbuf(DType::kF32, 128, {64});
  kb.load(t, x.view(), {.engine = Engine::kSync, .queue = 3});  // sync dma q3
  kb.tensor_scalar(t, t, AluOp::kAdd, 1.0f, AluOp::kBypass, 0.0f, false, false,
                   {.engine = Engine::kVector});  // waits for the load
  kb.tensor_scalar(u, t, AluOp::kMultiply, 3.0f, AluOp::kBypass, 0.0f, false, false,
                   {.engine = Engine::kVector});  // same engine: no wait
  // GpSimd reads u (vector's) and t (vector's, and the load's — implied by waiting for vector).
  kb.tensor_tensor(u, u, t, AluOp::kAdd, {.engine = Engine::kGpSimd});
  kb.store(y.view(), u, {.engine = Engine::kGpSimd, .queue = 5});  // same issuing engine: no wait
  CHECK(kb.stats().waits == 2);
  const isa::Program p = test::built(kb.finish());
  CHECK(total_waits(p) == 2);
  const auto &vec = p.stream(Engine::kVector);
  REQUIRE(vec.size() == 2);
  CHECK(vec[0].wait.cmp == isa::SemCmp::kGe);
  CHECK(vec[1].wait.cmp == isa::SemCmp::kNone);
  // Only the instructions something waits for signal.
  CHECK(p.stream(Engine::kSync)[0].signal.op == isa::SemOp::kAdd);
  CHECK(vec[0].signal.op == isa::SemOp::kNone);
  CHECK(vec[1].signal.op == isa::SemOp::kAdd);

  HostBuffer xb(128 * 64 * 4), yb(128 * 64 * 4);
  for (size_t i = 0; i < 128 * 64; ++i) xb.set<float>(i, float(i % 13));
  Executor ex(sim::core_spec(TRN_GENERATION_TRN2));
  const auto r = test::run_checked(ex, p, {xb.binding(), yb.binding()});
  REQUIRE(r.report.status == RunStatus::kOk);
  for (size_t i = 0; i < 128 * 64; ++i) {
    const float t1 = xb.at<float>(i) + 1.0f;
    REQUIRE(yb.at<float>(i) == 3.0f * t1 + t1);
  }
}

TEST_CASE("kbuild: write-after-read and write-after-write wait too") {
  KernelBuilder kb("war", kTrn2);
  const HbmTensor x = kb.input("x", DType::kF32, {128, 64});
  const HbmTensor y = kb.output("y", DType::kF32, {128, 64});
  const Tile t = kb.sbuf(DType::kF32, 128, {64});
  kb.load(t, x.view(), {.engine = Engine::kSync});
  kb.store(y.view(), t, {.engine = Engine::kGpSimd});  // RAW on the load
  kb.memset(t, 7.0f, {.engine = Engine::kVector});     // WAR on the store
  kb.store(y.view(), t, {.engine = Engine::kScalar});  // RAW + WAW (HBM)
  const isa::Program p = test::built(kb.finish());
  CHECK(total_waits(p) >= 3);
  HostBuffer xb(128 * 64 * 4), yb(128 * 64 * 4);
  Executor ex(sim::core_spec(TRN_GENERATION_TRN2));
  const auto r = test::run_checked(ex, p, {xb.binding(), yb.binding()});
  REQUIRE(r.report.status == RunStatus::kOk);
  for (size_t i = 0; i < 128 * 64; ++i) REQUIRE(yb.at<float>(i) == 7.0f);
}

TEST_CASE("kbuild: errors name the call that caused them") {
  {
    KernelBuilder kb("bad_shapes", kTrn2);
    const Tile a = kb.sbuf(DType::kF32, 128, {64});
    const Tile b = kb.sbuf(DType::kF32, 128, {32});
    const int line = __LINE__ + 1;
    kb.tensor_tensor(a, a, b, AluOp::kAdd);
    kb.memset(a, 1.0f);  // ignored after the first error
    auto r = kb.finish();
    REQUIRE(std::holds_alternative<std::string>(r));
    const std::string &e = std::get<std::string>(r);
    CHECK(e.starts_with("test_kernel_builder.cpp:" + std::to_string(line) + ": tensor_tensor: "));
    CHECK(e.find("differ in shape") != std::string::npos);
  }
  {
    KernelBuilder kb("too_big", kTrn2);
    const int line = __LINE__ + 1;
    const Tile a = kb.sbuf(DType::kF32, 128, {1 << 20}, "huge");
    CHECK_FALSE(a.valid());
    REQUIRE(kb.error());
    CHECK(kb.error()->starts_with("test_kernel_builder.cpp:" + std::to_string(line) + ": "));
    CHECK(kb.error()->find("SBUF tile 'huge' of 4194304 bytes per partition does not fit") !=
          std::string::npos);
  }
  {
    KernelBuilder kb("wrong_engine", kTrn2);
    const Tile a = kb.sbuf(DType::kF32, 128, {64});
    const Tile s = kb.sbuf(DType::kF32, 128, {1});
    kb.reduce(s, a, AluOp::kAdd, 0, false, {.engine = Engine::kGpSimd});
    REQUIRE(kb.error());
    CHECK(kb.error()->find("tensor_reduce on gpsimd: runs on vector") != std::string::npos);
  }
  {
    KernelBuilder kb("psum_load", kTrn2);
    const HbmTensor x = kb.input("x", DType::kF32, {128, 64});
    const Tile p = kb.psum(DType::kF32, 128, {64});
    kb.load(p, x.view());
    REQUIRE(kb.error());
    CHECK(kb.error()->find("is in PSUM; DMA loads go to SBUF") != std::string::npos);
  }
  {
    KernelBuilder kb("matmul_shapes", kTrn2);
    const Tile d = kb.psum(DType::kF32, 128, {512});
    const Tile st = kb.sbuf(DType::kBf16, 128, {128});
    const Tile mv = kb.sbuf(DType::kBf16, 64, {512});
    kb.matmul(d, st, mv, false);
    REQUIRE(kb.error());
    CHECK(kb.error()->find("must have the same partitions (K)") != std::string::npos);
  }
  {
    KernelBuilder kb("bad_view", kTrn2);
    const Tile a = kb.sbuf(DType::kF32, 128, {64});
    kb.memset(a.cols(60, 8), 0.0f);  // past the end: an invalid view
    REQUIRE(kb.error());
    CHECK(kb.error()->find("memset: dst is a view that does not fit its tile") !=
          std::string::npos);
  }
  {
    KernelBuilder kb("bad_sum", kTrn2);
    const Tile a = kb.sbuf(DType::kF32, 128, {64});
    const Tile sum = kb.sbuf(DType::kF32, 128, {1});
    kb.activation(a, a, ActFunc::kExp, 1.0f, 0.0f, sum.partition_slice(0, 200));
    REQUIRE(kb.error());  // a failed view, not "no sum wanted"
    CHECK(
        kb.error()->find("activation: the sum's tile (reduce_into) is a view that does not fit") !=
        std::string::npos);
  }
  {
    KernelBuilder kb("store_to_input", kTrn2);
    const HbmTensor x = kb.input("x", DType::kF32, {128, 64});
    const Tile a = kb.sbuf(DType::kF32, 128, {64});
    kb.memset(a, 0.0f);
    kb.store(x.view(), a);
    REQUIRE(kb.error());
    CHECK(kb.error()->find("store: x[0:128, 0:64] is an input of the kernel; declare it with "
                           "output() or inout()") != std::string::npos);
  }
  {
    KernelBuilder kb("bad_queue", kTrn2);
    const HbmTensor x = kb.input("x", DType::kF32, {128, 64});
    const Tile a = kb.sbuf(DType::kF32, 128, {64});
    kb.load(a, x.view(), {.queue = 16});
    REQUIRE(kb.error());
    CHECK(kb.error()->find("DMA queue 16; the core has queues 0 to 15") != std::string::npos);
  }
  {
    KernelBuilder kb("bad_hbm_view", kTrn2);
    const HbmTensor x = kb.input("x", DType::kF32, {128, 64});
    const Tile a = kb.sbuf(DType::kF32, 128, {64});
    kb.load(a, x.row_slice(UINT64_MAX, 2));  // no wrap-around: a bad view
    REQUIRE(kb.error());
    CHECK(kb.error()->find("load: src is a view that does not fit its tensor") !=
          std::string::npos);
  }
  {
    // A matmul planned for a core too small for its tiles says so (never a crash).
    MatmulConfig cfg{256, 1024, 384, DType::kBf16, DType::kF32};
    cfg.target = kTrn2;
    cfg.target.core.partitions = 64;
    auto r = build_tiled_matmul(cfg);
    REQUIRE(std::holds_alternative<std::string>(r));
    CHECK(std::get<std::string>(r).find("128 partitions; a core has 1 to 64") != std::string::npos);
  }
  {
    // A ring whose allocation failed hands out invalid tiles (never a crash).
    KernelBuilder kb("bad_ring", kTrn2);
    TileRing ring = kb.ring(Memory::kPsum, DType::kF32, 128, {512}, 9);  // 8 banks
    CHECK_FALSE(ring.valid());
    CHECK_FALSE(ring[3].valid());
    CHECK_FALSE(ring.next().valid());
    REQUIRE(kb.error());
  }
}

TEST_CASE("kbuild: placement rotates through free space, PSUM by banks") {
  KernelBuilder kb("placement", kTrn2);
  uint64_t first = 0;
  {
    const Tile a = kb.sbuf(DType::kF32, 128, {256});
    first = a.pattern().offset;
  }
  const Tile b = kb.sbuf(DType::kF32, 128, {256});
  CHECK(b.pattern().offset != first);  // a was freed, but the next tile goes after it
  TileRing ring = kb.ring(Memory::kSbuf, DType::kBf16, 128, {512}, 3, "ring");
  const uint64_t o0 = ring.next().pattern().offset, o1 = ring.next().pattern().offset,
                 o2 = ring.next().pattern().offset, o3 = ring.next().pattern().offset;
  CHECK(o0 != o1);
  CHECK(o1 != o2);
  CHECK(o3 == o0);
  // PSUM: 2 KiB banks; a small tile then a bank-sized one: the second starts on a bank.
  const Tile small = kb.psum(DType::kF32, 128, {128});
  const Tile bank = kb.psum(DType::kF32, 128, {512});
  CHECK(bank.pattern().offset % 2048 == 0);
  std::vector<Tile> banks;
  for (int i = 0; i < 6; ++i) banks.push_back(kb.psum(DType::kF32, 128, {512}));
  CHECK_FALSE(kb.error());
  const Tile one_more = kb.psum(DType::kF32, 128, {512});
  CHECK_FALSE(one_more.valid());
  REQUIRE(kb.error());
  CHECK(kb.error()->find("PSUM tile of 2048 bytes per partition does not fit") !=
        std::string::npos);
}

TEST_CASE("kbuild: views slice, broadcast and reshape") {
  KernelBuilder kb("views", kTrn2);
  const Tile a = kb.sbuf(DType::kF32, 128, {4, 64});
  CHECK(a.free_size() == 256);
  CHECK(a.partition_slice(32, 64).partitions() == 64);
  CHECK(a.slice(0, 1, 2).free_shape() == std::vector<uint32_t>{2, 64});
  CHECK(a.reshape({256}).free_shape() == std::vector<uint32_t>{256});
  CHECK_FALSE(a.slice(1, 0, 8).reshape({512}).valid());  // not contiguous
  const Tile col = kb.sbuf(DType::kF32, 128, {1});
  CHECK(col.broadcast(64).free_size() == 64);
  CHECK(col.broadcast(64).pattern().dims[0].stride == 0);
  CHECK_FALSE(a.broadcast(4).valid());
  CHECK_FALSE(a.partition_slice(100, 64).valid());
}

TEST_CASE("kbuild: every instruction records its call site, and the text form round-trips") {
  const isa::Program p = scale_add(256, 512);
  for (uint32_t e = 0; e < isa::kEngineCount; ++e) {
    REQUIRE(p.source_lines[e].size() == p.streams[e].size());
    for (uint32_t line : p.source_lines[e]) CHECK(line > 0);
  }
  const std::string where = isa::source_location_text(p, Engine::kVector, 0);
  CHECK(where.starts_with("test_kernel_builder.cpp:"));
  const std::vector<std::byte> image = isa::write_kernel(p);
  auto again = isa::assemble(isa::disassemble(p), "scale_add.s");
  REQUIRE(std::holds_alternative<isa::Program>(again));
  CHECK(isa::write_kernel(std::get<isa::Program>(again)) == image);
}

TEST_CASE("kbuild: scalar arguments and tile operands") {
  KernelBuilder kb("axpb", kTrn2);
  const HbmTensor x = kb.input("x", DType::kF32, {128, 256});
  const ScalarArg alpha = kb.scalar("alpha");
  const HbmTensor y = kb.output("y", DType::kF32, {128, 256});
  const Tile t = kb.sbuf(DType::kF32, 128, {256});
  const Tile rowsum = kb.sbuf(DType::kF32, 128, {1});
  kb.load(t, x.view());
  kb.reduce(rowsum, t, AluOp::kAdd);
  // y = x * alpha + rowsum (per partition)
  kb.tensor_scalar(t, t, AluOp::kMultiply, alpha, AluOp::kAdd, rowsum);
  kb.store(y.view(), t);
  const isa::Program p = test::built(kb.finish());
  HostBuffer xb(128 * 256 * 4), yb(128 * 256 * 4);
  for (size_t i = 0; i < 128 * 256; ++i) xb.set<float>(i, float(int(i % 11) - 5));
  std::vector<sim::exec::HbmBinding> args = {xb.binding(), {}, yb.binding()};
  const float a = 3.0f;
  uint32_t bits;
  std::memcpy(&bits, &a, 4);
  args[1].scalar = bits;
  Executor ex(sim::core_spec(TRN_GENERATION_TRN2));
  const auto r = test::run_checked(ex, p, args);
  REQUIRE(r.report.status == RunStatus::kOk);
  for (size_t row = 0; row < 128; ++row) {
    float sum = 0;
    for (size_t c = 0; c < 256; ++c) sum += xb.at<float>(row * 256 + c);
    for (size_t c = 0; c < 256; ++c)
      REQUIRE(yb.at<float>(row * 256 + c) == xb.at<float>(row * 256 + c) * 3.0f + sum);
  }
}

namespace {

// Every wait the builder inserted, as (engine, index).
std::vector<std::pair<uint32_t, size_t>> waits_of(const isa::Program &p) {
  std::vector<std::pair<uint32_t, size_t>> out;
  for (uint32_t e = 0; e < isa::kEngineCount; ++e)
    for (size_t i = 0; i < p.streams[e].size(); ++i)
      if (p.streams[e][i].wait.cmp != isa::SemCmp::kNone) out.emplace_back(e, i);
  return out;
}

// Runs `p` with one wait removed; returns the run's report.
sim::exec::RunReport without_wait(isa::Program p, std::pair<uint32_t, size_t> wait,
                                  std::vector<sim::exec::HbmBinding> args) {
  isa::Instruction &inst = p.streams[wait.first][wait.second];
  inst.wait = {};
  if (inst.opcode == isa::Opcode::kSemWait) inst.opcode = isa::Opcode::kNop;  // waits for nothing
  Executor ex(sim::core_spec(TRN_GENERATION_TRN2));
  return test::run_checked(ex, p, args).report;
}

}  // namespace

TEST_CASE("kbuild: every wait the builder inserts is needed: without it the race is reported") {
  const isa::Program p = scale_add(256, 512);
  HostBuffer x(256 * 512 * 4), b(512 * 4), y(256 * 512 * 4);
  const auto waits = waits_of(p);
  REQUIRE(waits.size() >= 8);
  {
    Executor ex(sim::core_spec(TRN_GENERATION_TRN2));
    REQUIRE(test::run_checked(ex, p, {x.binding(), b.binding(), y.binding()}).report.status ==
            RunStatus::kOk);
  }
  for (const auto &w : waits) {
    CAPTURE(isa::engine_name(Engine(w.first)), w.second);
    const auto r = without_wait(p, w, {x.binding(), b.binding(), y.binding()});
    REQUIRE(r.status == RunStatus::kFault);
    CHECK_THAT(r.message, Catch::StartsWith("unsynchronized access: "));
    CHECK_THAT(r.message, Catch::Contains("(test_kernel_builder.cpp:"));
    CHECK_THAT(r.message, Catch::EndsWith("; no semaphore orders them"));
  }
}

TEST_CASE("kbuild: the tiled matmul without one of its waits races") {
  const BuildTarget target = test::build_target(TRN_GENERATION_TRN2);
  MatmulConfig cfg{256, 1024, 384, DType::kBf16, DType::kF32};
  cfg.target = target;
  const isa::Program p = test::built(build_tiled_matmul(cfg));
  HostBuffer lhsT(384 * 256 * 2), rhs(384 * 1024 * 2), out(256 * 1024 * 4);
  const auto waits = waits_of(p);
  REQUIRE(waits.size() > 20);
  // A sample across engines (each run is a whole matmul).
  for (size_t i = 0; i < waits.size(); i += waits.size() / 9) {
    CAPTURE(isa::engine_name(Engine(waits[i].first)), waits[i].second);
    const auto r = without_wait(p, waits[i], {lhsT.binding(), rhs.binding(), out.binding()});
    REQUIRE(r.status == RunStatus::kFault);
    CHECK_THAT(r.message, Catch::StartsWith("unsynchronized access: "));
    CHECK_THAT(r.message, Catch::Contains("tiled_matmul.cpp:"));
  }
}

TEST_CASE("kbuild: iota and select build a causal mask") {
  // y[p, i] = x[p, i] where i <= p (row p of a lower-triangular mask), else -1000; and the
  // column index i + 10 * p from iota.
  KernelBuilder kb("causal", kTrn2);
  const HbmTensor x = kb.input("x", DType::kF32, {128, 128});
  const HbmTensor y = kb.output("y", DType::kF32, {128, 128});
  const HbmTensor idx = kb.output("idx", DType::kI32, {128, 128});
  const Tile t = kb.sbuf(DType::kF32, 128, {128});
  kb.load(t, x.view());
  const Tile masked = kb.sbuf(DType::kF32, 128, {128});
  kb.select(masked, {{-1, 128}}, 0, 1, AluOp::kGreaterEqual, t, -1000.0f);  // p - i >= 0
  kb.store(y.view(), masked);
  const Tile ids = kb.sbuf(DType::kI32, 128, {128});
  kb.iota(ids, {{1, 128}}, 0, 10);
  kb.store(idx.view(), ids);
  const isa::Program p = test::built(kb.finish());
  HostBuffer xb(128 * 128 * 4), yb(128 * 128 * 4), ib(128 * 128 * 4);
  for (size_t i = 0; i < 128 * 128; ++i) xb.set<float>(i, float(i % 101));
  Executor ex(sim::core_spec(TRN_GENERATION_TRN2));
  const auto r = test::run_checked(ex, p, {xb.binding(), yb.binding(), ib.binding()});
  REQUIRE(r.report.status == RunStatus::kOk);
  for (uint32_t row = 0; row < 128; ++row)
    for (uint32_t i = 0; i < 128; ++i) {
      REQUIRE(yb.at<float>(row * 128 + i) == (i <= row ? xb.at<float>(row * 128 + i) : -1000.0f));
      REQUIRE(ib.at<int32_t>(row * 128 + i) == int32_t(i + 10 * row));
    }
  CHECK(p.stream(Engine::kGpSimd).size() >= 2);  // iota and affine_select run on gpsimd
}

TEST_CASE("kbuild: a kernel written across two files names both, in the binary and in faults") {
  KernelBuilder kb("two_files", kTrn2);
  const HbmTensor x = kb.input("x", DType::kF32, {128, 64});
  const HbmTensor y = kb.output("y", DType::kF32, {128, 64});
  const Tile t = kb.sbuf(DType::kF32, 128, {64});
  test::load_doubled(kb, t, x.view());  // kbuild_helpers.hpp
  const int store_line = __LINE__ + 1;
  kb.store(y.view(), t, {.engine = Engine::kSync, .queue = 0});
  const isa::Program p = test::built(kb.finish());
  REQUIRE(p.source_files.size() == 1);
  // The multiply, wherever the builder put it, comes from the helper's file.
  std::string multiply;
  Engine multiply_engine = Engine::kVector;
  for (uint32_t e = 0; e < isa::kEngineCount; ++e)
    for (size_t i = 0; i < p.streams[e].size(); ++i)
      if (p.streams[e][i].opcode == isa::Opcode::kTensorScalar) {
        multiply = isa::source_location_text(p, Engine(e), i);
        multiply_engine = Engine(e);
      }
  CHECK(multiply.starts_with("kbuild_helpers.hpp:"));
  const auto &sync = p.stream(Engine::kSync);
  REQUIRE(!sync.empty());
  CHECK(isa::source_location_text(p, Engine::kSync, sync.size() - 1) ==
        "test_kernel_builder.cpp:" + std::to_string(store_line));
  // Through the binary and back, and as text.
  isa::Program read;
  REQUIRE_FALSE(isa::read_kernel(isa::write_kernel(p), read));
  CHECK(isa::source_location_text(read, Engine::kSync, sync.size() - 1) ==
        isa::source_location_text(p, Engine::kSync, sync.size() - 1));
  CHECK(read.source_files == p.source_files);
  auto again = isa::assemble(isa::disassemble(p), "two_files.s");
  REQUIRE(std::holds_alternative<isa::Program>(again));
  CHECK(isa::write_kernel(std::get<isa::Program>(again)) == isa::write_kernel(p));
  // Without the store's wait, the race names the store here and the multiply in the helper.
  HostBuffer xb(128 * 64 * 4), yb(128 * 64 * 4);
  // The store's wait: the last one on the sync engine (the multiply's engine signals it).
  std::pair<uint32_t, size_t> store_wait{uint32_t(Engine::kSync), sync.size() - 1};
  REQUIRE(sync.back().wait.cmp != isa::SemCmp::kNone);
  CAPTURE(isa::engine_name(multiply_engine));
  const auto r = without_wait(p, store_wait, {xb.binding(), yb.binding()});
  REQUIRE(r.status == RunStatus::kFault);
  CHECK_THAT(r.message,
             Catch::Contains("(test_kernel_builder.cpp:" + std::to_string(store_line) + ")"));
  CHECK_THAT(r.message, Catch::Contains("(" + multiply + ")"));
}
