#include <fmt/format.h>

#include <bit>
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>

#include "isa/assembler.hpp"
#include "isa/builder.hpp"
#include "isa/disassembler.hpp"

using namespace trn::isa;

namespace {

uint32_t fbits(float f) {
  return std::bit_cast<uint32_t>(f);
}

// Field-by-field comparison written independently of isa::program_difference.
void check_ap_equal(const AccessPattern &a, const AccessPattern &b, const std::string &what) {
  INFO(what);
  CHECK(a.space == b.space);
  CHECK(a.dtype == b.dtype);
  CHECK(a.arg == b.arg);
  CHECK(a.partition_start == b.partition_start);
  CHECK(a.partition_count == b.partition_count);
  CHECK(a.partition_stride == b.partition_stride);
  CHECK(a.offset == b.offset);
  CHECK(a.num_dims == b.num_dims);
  for (size_t d = 0; d < kMaxFreeDims; ++d) {
    CHECK(a.dims[d].stride == b.dims[d].stride);
    CHECK(a.dims[d].count == b.dims[d].count);
  }
}

void check_programs_equal(const Program &a, const Program &b) {
  CHECK(a.name == b.name);
  CHECK(a.source_file == b.source_file);
  CHECK(a.source_files == b.source_files);
  REQUIRE(a.args.size() == b.args.size());
  for (size_t i = 0; i < a.args.size(); ++i) {
    INFO("arg " << i);
    CHECK(a.args[i].name == b.args[i].name);
    CHECK(a.args[i].dtype == b.args[i].dtype);
    CHECK(a.args[i].shape == b.args[i].shape);
    CHECK(a.args[i].direction == b.args[i].direction);
    CHECK(a.args[i].kind == b.args[i].kind);
  }
  CHECK(a.constants == b.constants);
  for (uint32_t e = 0; e < kEngineCount; ++e) {
    INFO("engine " << engine_name(static_cast<Engine>(e)));
    CHECK(a.source_lines[e] == b.source_lines[e]);
    REQUIRE(a.streams[e].size() == b.streams[e].size());
    for (size_t i = 0; i < a.streams[e].size(); ++i) {
      INFO("instruction " << i);
      CHECK(a.source_file_id(static_cast<Engine>(e), i) ==
            b.source_file_id(static_cast<Engine>(e), i));
      const Instruction &x = a.streams[e][i], &y = b.streams[e][i];
      CHECK(x.opcode == y.opcode);
      CHECK(x.engine == y.engine);
      CHECK(x.func == y.func);
      CHECK(x.func2 == y.func2);
      CHECK(x.queue == y.queue);
      CHECK(x.flags == y.flags);
      check_ap_equal(x.dst, y.dst, "dst");
      check_ap_equal(x.dst2, y.dst2, "dst2");
      check_ap_equal(x.src0, y.src0, "src0");
      check_ap_equal(x.src1, y.src1, "src1");
      check_ap_equal(x.src2, y.src2, "src2");
      CHECK(fbits(x.imm[0]) == fbits(y.imm[0]));
      CHECK(fbits(x.imm[1]) == fbits(y.imm[1]));
      CHECK(x.iimm == y.iimm);
      CHECK(x.scalar_arg == y.scalar_arg);
      CHECK(x.wait.cmp == y.wait.cmp);
      CHECK(x.wait.sem == y.wait.sem);
      CHECK(x.wait.value == y.wait.value);
      CHECK(x.signal.op == y.signal.op);
      CHECK(x.signal.sem == y.signal.sem);
      CHECK(x.signal.value == y.signal.value);
    }
  }
}

Program assemble_ok(const std::string &text, const std::string &file = "test.s") {
  auto r = assemble(text, file);
  if (auto *e = std::get_if<AsmError>(&r)) FAIL(e->to_string() << "\n--- text:\n" << text);
  return std::get<Program>(std::move(r));
}

void check_round_trip(const Program &p) {
  std::string text = disassemble(p);
  INFO(text);
  Program q = assemble_ok(text, "roundtrip.s");
  check_programs_equal(p, q);
  auto diff = program_difference(p, q);
  CHECK_FALSE(diff);
  if (diff) WARN(*diff);
  CHECK(disassemble(q) == text);
}

void expect_error(const std::string &text, uint32_t line, uint32_t column,
                  const std::string &message) {
  auto r = assemble(text, "bad.s");
  INFO(text);
  REQUIRE(std::holds_alternative<AsmError>(r));
  const AsmError &e = std::get<AsmError>(r);
  INFO(e.to_string());
  CHECK(e.file == "bad.s");
  CHECK(e.line == line);
  CHECK(e.column == column);
  CHECK_THAT(e.message, Catch::Contains(message));
}

const std::string kHeader =
    ".kernel k\n.arg a in f32[128,512]\n.arg b out f32[128,512]\n.tile xa sbuf.f32 p0:128 "
    "[1,512]\n.sem ready = 3\n.engine vector\n";  // 6 lines: the test line is line 7

}  // namespace

TEST_CASE("asm: every opcode built with ProgramBuilder round-trips") {
  ProgramBuilder b("every_opcode");
  uint16_t x = b.arg("x", DType::kBf16, {128, 512}, ArgDirection::kIn);
  uint16_t y = b.arg("y", DType::kF32, {4, 128, 512}, ArgDirection::kOut);
  b.arg("scalar", DType::kI32, {}, ArgDirection::kInOut);
  auto s = [](uint64_t off, uint32_t n) { return sbuf_tile(DType::kF32, 0, 128, off, n); };
  b.dma_copy(Engine::kSync, 3, s(0, 512), hbm(x, DType::kBf16, 0, 512, 128, {{1, 512}}))
      .signal_add(0, 1)
      .line(10);
  b.dma_copy(Engine::kSync, 15, hbm(y, DType::kF32, 1024, -512, 128, {{-1, 512}}),
             sbuf(DType::kF32, 32, 32, 64, {{2, 8}, {-3, 4}, {1, 2}, {7, 1}}))
      .wait_eq(1, 7)
      .line(11);
  b.dma_copy(Engine::kGpSimd, 0, s(0, 4), hbm(kConstantsArg, DType::kF32, 8, 4, 128, {{1, 4}}));
  b.matmul(psum_tile(DType::kF32, 0, 128, 0, 512), sbuf_tile(DType::kBf16, 0, 128, 0, 128),
           sbuf_tile(DType::kBf16, 0, 128, 256, 512), true)
      .wait_ge(0, 2);
  b.matmul(psum_tile(DType::kF32, 0, 128, 2048, 512), s(0, 128), s(512, 512), false);
  b.transpose(Engine::kTensor, psum_tile(DType::kF32, 0, 32, 0, 128), s(0, 32));
  b.activation(s(0, 512), psum_tile(DType::kF32, 0, 128, 0, 512), ActFunc::kGeluTanh, 0.125f, -3.5f)
      .signal_set(2, 42);
  b.activation(s(0, 512), s(0, 512), ActFunc::kIdentity);
  b.tensor_tensor(Engine::kVector, s(0, 512), s(2048, 512), s(4096, 512), AluOp::kDivide);
  b.tensor_tensor(Engine::kGpSimd, sbuf_tile(DType::kI32, 0, 128, 0, 512),
                  sbuf_tile(DType::kI32, 0, 128, 0, 512), sbuf_tile(DType::kI32, 0, 128, 0, 512),
                  AluOp::kShiftLeft);
  b.tensor_scalar(Engine::kVector, s(0, 512), s(0, 512), AluOp::kMultiply, 0.1f);
  b.tensor_scalar(Engine::kScalar, s(0, 512), s(0, 512), AluOp::kSubtract, -0.0f, AluOp::kMax,
                  1e-45f);
  b.tensor_reduce(s(0, 1), s(0, 512), AluOp::kMax, 1, true);
  b.tensor_reduce(s(0, 1), s(0, 512), AluOp::kAdd);
  b.tensor_copy(Engine::kScalar, sbuf_tile(DType::kFp8E4m3, 0, 128, 0, 512), s(0, 512));
  b.memset(Engine::kGpSimd, s(0, 512), std::numeric_limits<float>::infinity());
  b.memset(Engine::kVector, s(0, 512), -std::numeric_limits<float>::infinity());
  b.memset(Engine::kVector, s(0, 512), std::numeric_limits<float>::quiet_NaN());
  b.memset(Engine::kVector, s(0, 512), std::bit_cast<float>(0xffc00000u));
  b.memset(Engine::kVector, s(0, 512), std::bit_cast<float>(0x7f800001u));  // signalling NaN
  b.memset(Engine::kVector, s(0, 512), std::bit_cast<float>(0xffffffffu));
  b.memset(Engine::kVector, s(0, 512), std::numeric_limits<float>::max());
  b.memset(Engine::kVector, s(0, 512), std::numeric_limits<float>::denorm_min());
  b.iota(sbuf_tile(DType::kI32, 0, 128, 0, 64), pattern({{1, 64}}),
         std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
  b.affine_select(s(0, 512), pattern({{-1, 512}, {3, 1}}), -7, 1, AluOp::kGreaterEqual, s(0, 512),
                  -std::numeric_limits<float>::infinity());
  b.sem_wait(Engine::kScalar, 255, 0xFFFFFFFFu);
  b.sem_signal(Engine::kTensor, 65535, 9);
  b.barrier();
  Program p = b.finish();
  p.constants = {std::byte{0x00}, std::byte{0x00}, std::byte{0x80}, std::byte{0x3f},
                 std::byte{0xff}, std::byte{0x01}, std::byte{0xbf}};
  p.source_file = "kernels/every \"op\".py";
  check_round_trip(p);
}

TEST_CASE("asm: odd fields, tiles flags and generic clauses round-trip") {
  ProgramBuilder b("odd name with spaces\t\x01");
  b.arg("dup", DType::kU8, {1}, ArgDirection::kIn);
  b.arg("dup", DType::kI8, {2, 3}, ArgDirection::kOut);
  b.arg("const", DType::kI16, {0}, ArgDirection::kIn);
  b.arg("not an identifier", DType::kFp8E5m2, {18446744073709551615ull}, ArgDirection::kInOut);
  b.arg("", DType::kF16, {5}, ArgDirection::kIn);

  Instruction act;
  act.opcode = Opcode::kActivation;
  act.engine = Engine::kScalar;
  act.func = static_cast<uint8_t>(ActFunc::kExp);
  act.flags = kFlagScaleTile | kFlagBiasTile | kFlagAccumulate;
  act.dst = sbuf_tile(DType::kBf16, 0, 128, 0, 512);
  act.src0 = psum_tile(DType::kF32, 0, 128, 0, 512);
  act.src1 = sbuf_tile(DType::kF32, 0, 128, 4, 1);
  act.src2 = sbuf_tile(DType::kF32, 0, 128, 8, 1);
  act.dst2 = sbuf_tile(DType::kF32, 0, 128, 12, 1);
  act.imm = {2.0f, 0.5f};  // not used while the tiles are, but kept
  b.add(act).wait_ge(4, 1).signal_add(5, 2);
  act.flags = kFlagAccumulate;  // accumulate flag without dst2, scale/bias immediates
  act.dst2 = {};
  act.src1 = {};
  act.src2 = hbm(0, DType::kF32, 0, 0, 1, {});  // src2 without the flag
  act.imm = {-0.0f, std::numeric_limits<float>::quiet_NaN()};
  b.add(act);

  Instruction ts;
  ts.opcode = Opcode::kTensorScalar;
  ts.engine = Engine::kVector;
  ts.func = static_cast<uint8_t>(AluOp::kSubtract);
  ts.func2 = static_cast<uint8_t>(AluOp::kBypass);
  ts.flags = kFlagOperand0Tile | kFlagOperand1Tile | kFlagReverse0 | kFlagReverse1;
  ts.dst = sbuf_tile(DType::kF32, 0, 128, 0, 512);
  ts.src0 = ts.dst;
  ts.src1 = sbuf_tile(DType::kF32, 0, 128, 4096, 1);
  ts.imm = {3.0f, 0.0f};
  b.add(ts);

  Instruction odd;  // every generic clause on a nop in the wrong stream
  odd.opcode = Opcode::kNop;
  odd.engine = Engine::kTensor;
  odd.func = 200;
  odd.func2 = 7;
  odd.queue = 255;
  odd.flags = 0xFFFFFFFFu;
  odd.dst = hbm(3, DType::kFp8E5m2, std::numeric_limits<uint64_t>::max(),
                std::numeric_limits<int64_t>::min(), std::numeric_limits<uint32_t>::max(),
                {{std::numeric_limits<int32_t>::min(), std::numeric_limits<uint32_t>::max()}});
  odd.dst2 = pattern({{5, 6}});
  odd.dst2.offset = 3;
  odd.dst2.partition_start = 2;
  odd.src0 = hbm(kConstantsArg, DType::kU8, 0, 0, 0, {});
  odd.src1 = hbm(0, DType::kU8, 0, 0, 0, {});  // ambiguous name: printed by index
  odd.src2 = sbuf(DType::kInvalid, 0, 0, 0, {});
  odd.src2.arg = 4;  // empty name
  odd.src2.partition_stride = -1;
  odd.imm = {std::bit_cast<float>(0x80000001u), 1e38f};
  odd.iimm = {-1, 1};
  odd.wait = {SemCmp::kEq, 65535, 0};
  odd.signal = {SemOp::kSet, 0, 0xFFFFFFFFu};
  Instruction mem;
  mem.opcode = Opcode::kMemset;
  mem.engine = Engine::kGpSimd;
  mem.dst = pattern({});
  mem.dst.partition_count = 3;
  b.add(mem);
  b.add(Instruction{});  // a plain nop in the tensor stream
  Program p = b.finish();
  p.stream(Engine::kGpSimd).push_back(odd);  // tensor-engine nop in the gpsimd stream
  p.source_lines[static_cast<uint32_t>(Engine::kGpSimd)] = {0, 0};
  p.source_lines[static_cast<uint32_t>(Engine::kScalar)] = {7, 0};
  check_round_trip(p);
}

TEST_CASE("asm: random programs round-trip") {
  std::mt19937_64 rng(12345);
  auto u = [&](uint64_t n) { return n ? rng() % n : rng(); };
  auto pick32 = [&]() -> uint32_t {
    switch (u(4)) {
      case 0: return 0;
      case 1: return static_cast<uint32_t>(u(10));
      case 2: return 0xFFFFFFFFu - static_cast<uint32_t>(u(3));
      default: return static_cast<uint32_t>(rng());
    }
  };
  for (int iter = 0; iter < 300; ++iter) {
    Program p;
    p.name = u(3) ? fmt::format("k{}", iter) : std::string("\"x y\"\\");
    size_t nargs = u(4);
    for (size_t i = 0; i < nargs; ++i) {
      Argument a;
      a.name = u(5) ? fmt::format("a{}", u(3)) : std::string("1bad");
      a.dtype = static_cast<DType>(1 + u(kDTypeCount - 1));
      for (size_t d = u(4); d > 0; --d) a.shape.push_back(u(4) ? u(1000) : rng());
      a.direction = static_cast<ArgDirection>(1 + u(3));
      p.args.push_back(a);
    }
    for (size_t i = u(3) ? 0 : u(80); i > 0; --i)
      p.constants.push_back(static_cast<std::byte>(rng()));
    if (u(2)) p.source_file = "f.py";
    if (u(3) == 0) p.source_files = {"lib/helpers.hpp", "k \"2\".cpp"};
    auto rand_ap = [&]() {
      AccessPattern ap;
      if (u(3) == 0) return ap;
      ap.space = static_cast<MemSpace>(u(4));
      if (u(4)) ap.dtype = static_cast<DType>(u(kDTypeCount));
      if (ap.space == MemSpace::kHbm || u(4) == 0) {
        uint64_t choice = u(nargs + 1);
        ap.arg = choice == nargs ? kConstantsArg : static_cast<uint16_t>(choice);
        if (ap.space != MemSpace::kHbm && choice == nargs && nargs > 0) ap.arg = 0;
      }
      ap.partition_start = u(3) ? 0 : pick32();
      ap.partition_count = pick32();
      ap.partition_stride = u(2) ? 0 : static_cast<int64_t>(rng());
      ap.offset = u(2) ? 0 : rng();
      ap.num_dims = static_cast<uint32_t>(u(kMaxFreeDims + 1));
      for (uint32_t d = 0; d < ap.num_dims; ++d)
        ap.dims[d] = {static_cast<int32_t>(pick32()), pick32()};
      return ap;
    };
    auto rand_float = [&]() {
      switch (u(5)) {
        case 0: return 0.0f;
        case 1: return static_cast<float>(u(100)) / 8.0f;
        default: return std::bit_cast<float>(static_cast<uint32_t>(rng()));
      }
    };
    for (uint32_t e = 0; e < kEngineCount; ++e) {
      size_t n = u(6);
      for (size_t i = 0; i < n; ++i) {
        Instruction in;
        in.opcode = static_cast<Opcode>(u(kOpcodeCount));
        in.engine = u(5) ? static_cast<Engine>(e) : static_cast<Engine>(u(256));
        in.func = static_cast<uint8_t>(u(3) ? u(kAluOpCount) : rng());
        in.func2 = static_cast<uint8_t>(u(3) ? 0 : rng());
        in.queue = static_cast<uint8_t>(u(2) ? 0 : rng());
        in.flags = u(2) ? 0 : static_cast<uint32_t>(rng());
        for (AccessPattern *ap : {&in.dst, &in.dst2, &in.src0, &in.src1, &in.src2}) *ap = rand_ap();
        in.imm = {rand_float(), rand_float()};
        if (in.opcode == Opcode::kActivation && u(2)) in.imm[0] = 1.0f;
        in.iimm = {static_cast<int32_t>(pick32()), static_cast<int32_t>(pick32())};
        if (u(2)) in.wait = {static_cast<SemCmp>(1 + u(2)), static_cast<uint16_t>(rng()), pick32()};
        if (u(2))
          in.signal = {static_cast<SemOp>(1 + u(2)), static_cast<uint16_t>(rng()), pick32()};
        p.streams[e].push_back(in);
      }
      if (n && u(2))
        for (size_t i = 0; i < n; ++i) {
          p.source_lines[e].push_back(u(2) ? 0 : pick32());
          if (!p.source_files.empty()) p.source_file_ids[e].push_back(static_cast<uint32_t>(u(3)));
        }
    }
    INFO("iteration " << iter);
    std::string text = disassemble(p);
    auto r = assemble(text, "random.s");
    if (auto *err = std::get_if<AsmError>(&r)) FAIL(err->to_string() << "\n" << text);
    auto diff = program_difference(p, std::get<Program>(r));
    if (diff) FAIL(*diff << "\n" << text);
  }
}

TEST_CASE("asm: the docs example assembles and round-trips") {
  std::string path = __FILE__;
  path = path.substr(0, path.rfind("/tests/unit/")) + "/docs/assembly.md";
  std::ifstream f(path);
  REQUIRE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  std::string doc = ss.str();
  auto start = doc.find("```asm\n");
  REQUIRE(start != std::string::npos);
  start += 7;
  auto end = doc.find("```", start);
  REQUIRE(end != std::string::npos);
  std::string example = doc.substr(start, end - start);
  AsmLineMap lines;
  auto r = assemble(example, "example.s", &lines);
  if (auto *e = std::get_if<AsmError>(&r)) FAIL(e->to_string());
  const Program &p = std::get<Program>(r);
  CHECK(p.name == "vector_add");
  CHECK(p.args.size() == 3);
  CHECK(p.stream(Engine::kSync).size() >= 3);
  CHECK(lines[static_cast<uint32_t>(Engine::kSync)].size() == p.stream(Engine::kSync).size());
  check_round_trip(p);
}

TEST_CASE("asm: syntax sugar assembles to the same fields") {
  Program p = assemble_ok(kHeader +
                          "wait ready >= 2 tensor_copy xa, hbm(a).f32 rows[512,128] [1,512]\n"
                          "wait s3 == 1\n"
                          "signal ready = 4\n"
                          ".loc 99\n"
                          "tensor_scalar xa, xa, add 1, multiply -2.5e-3 # comment\n"
                          "activation relu xa, xa ; defaults: scale 1, bias 0\n");
  const auto &v = p.stream(Engine::kVector);
  REQUIRE(v.size() == 5);
  CHECK(v[0].wait.cmp == SemCmp::kGe);
  CHECK(v[0].wait.sem == 3);
  CHECK(v[0].wait.value == 2);
  CHECK(v[0].src0.space == MemSpace::kHbm);
  CHECK(v[0].src0.partition_stride == 512);
  CHECK(v[0].src0.partition_count == 128);
  CHECK(v[1].opcode == Opcode::kSemWait);
  CHECK(v[1].wait.cmp == SemCmp::kEq);
  CHECK(v[2].opcode == Opcode::kSemSignal);
  CHECK(v[2].signal.op == SemOp::kSet);
  CHECK(v[2].signal.value == 4);
  CHECK(v[3].func2 == static_cast<uint8_t>(AluOp::kMultiply));
  CHECK(v[3].imm[1] == -2.5e-3f);
  CHECK(v[4].imm[0] == 1.0f);
  CHECK(p.source_lines[static_cast<uint32_t>(Engine::kVector)] ==
        std::vector<uint32_t>{0, 0, 0, 99, 99});
}

TEST_CASE("asm: .const and arguments") {
  Program p = assemble_ok(
      ".const f32 1.0, -2\n.const 00ff 0102\n.const i16 -2\n.arg \"a b\" inout "
      "float32[]\n");
  std::vector<std::byte> want = {std::byte{0x00}, std::byte{0x00}, std::byte{0x80}, std::byte{0x3f},
                                 std::byte{0x00}, std::byte{0x00}, std::byte{0x00}, std::byte{0xc0},
                                 std::byte{0x00}, std::byte{0xff}, std::byte{0x01}, std::byte{0x02},
                                 std::byte{0xfe}, std::byte{0xff}};
  CHECK(p.constants == want);
  REQUIRE(p.args.size() == 1);
  CHECK(p.args[0].name == "a b");
  CHECK(p.args[0].shape.empty());
  CHECK(p.args[0].direction == ArgDirection::kInOut);
}

TEST_CASE("asm: errors point at the offending token") {
  expect_error(kHeader + "tensr_tensor add xa, xa, xa\n", 7, 1,
               "unknown opcode 'tensr_tensor' (did you mean tensor_tensor?)");
  expect_error(kHeader + "tensor_copy sbuf.f33 p0:128 [1,4], xa\n", 7, 18,
               "dtype 'f33' is unknown (did you mean f32?); expected one of f32, bf16");
  expect_error(kHeader + "tensor_copy xa xa\n", 7, 16, "expected ',' after dst");
  expect_error(kHeader + "dma_copy q0 xa, hbm(c).f32 rows[1,1]\n", 7, 21,
               "argument 'c' is not declared");
  expect_error(kHeader + "tensor_copy xa, xc\n", 7, 17, "tile 'xc' is not declared");
  expect_error(kHeader + "tensor_copy xa, xa wait redy >= 1\n", 7, 25,
               "semaphore 'redy' is not declared (did you mean ready?)");
  expect_error(kHeader + "tensor_copy xa, sbuf.f32 p0:128 [1,4294967296]\n", 7, 36,
               "dim count 4294967296 is out of range (0..4294967295)");
  expect_error(kHeader + "tensor_copy xa, sbuf.f32 p0:128 [-2147483649,1]\n", 7, 34,
               "dim stride -2147483649 is out of range (-2147483648..2147483647)");
  expect_error(kHeader + "tensor_copy xa, xa signal s65536 += 1\n", 7, 27,
               "semaphore index 65536 is out of range");
  expect_error(kHeader + "dma_copy q16000 xa, xa\n", 7, 10, "queue 16000 is out of range");
  expect_error(kHeader + "tensor_copy xa, sbuf.f32 p0:128 [1,1][1,1][1,1][1,1][1,1]\n", 7, 53,
               "too many free dims: an access pattern has at most 4");
  expect_error(kHeader + "tensor_copy xa, sbuf.f32 p0-128 [1,1]\n", 7, 26,
               "bad partition range 'p0': expected pSTART:COUNT");
  expect_error(kHeader + "tensor_copy xa, sbuf.f32 p:128 [1,1]\n", 7, 26, "bad partition range");
  expect_error(kHeader + "tensor_copy xa, sbuf.f32 p0: [1,1]\n", 7, 30,
               "expected a count after 'p0:'");
  expect_error(kHeader + "tensor_copy xa, xa )\n", 7, 20,
               "unexpected ')' after the operands of tensor_copy");
  expect_error(kHeader + "tensor_copy xa, xa bogus\n", 7, 20, "unknown clause 'bogus'");
  expect_error(kHeader + "tensor_copy xa, xa wait s0 >= 1 wait s1 >= 1\n", 7, 33,
               "wait given twice");
  expect_error(kHeader + "memset xa, 1e39\n", 7, 12, "out of range for f32");
  expect_error(kHeader + "memset xa, nan:0x3f800000\n", 7, 16, "is not the bit pattern of a NaN");
  expect_error(kHeader + "activation expp xa, xa\n", 7, 12,
               "unknown activation function 'expp' (did you mean exp?)");
  expect_error(kHeader + "tensor_copy xa, xa scale=2\n", 7, 20,
               "'scale' applies only to activation");
  expect_error(kHeader + "tensor_copy xa, hbm.f32 rows[1,1]\n", 7, 17,
               "an hbm access pattern names its argument");
  expect_error(kHeader + "tensor_copy xa, sbuf.f32 p0:128 rows[1,64]\n", 7, 33,
               "row count 64 differs from the partition count 128");
  expect_error(".kernel k\ntensor_copy a, b\n", 2, 1, "instruction outside an engine section");
  expect_error(".kernle k\n", 1, 2, "unknown directive '.kernle' (did you mean kernel?)");
  expect_error(".kernel \"abc\n", 1, 9, "unterminated string");
  expect_error(".kernel k extra\n", 1, 11, "unexpected 'extra' after the .kernel directive");
  expect_error(".arg a sideways f32[1]\n", 1, 8, "unknown direction 'sideways'");
  expect_error(".arg a in f32[1,-1]\n", 1, 17, "shape dimension -1 is out of range");
  expect_error(".arg a in f32[18446744073709551616]\n", 1, 15, "out of range");
  expect_error(".engine vectr\n", 1, 9, "unknown engine 'vectr' (did you mean vector?)");
  expect_error(".tile s3 sbuf.f32 p0:1 [1,1]\n", 1, 7, "reserved word");
  expect_error(".const 0f0\n", 1, 8, "expected hex bytes");
  expect_error(".engine sync\n  dma_copy q0 sbuf.f32 p0:1 @-4 [1,1], none\n", 2, 30,
               "byte offset -4 is out of range");
  expect_error(".engine sync\n\tnop $\n", 2, 6, "unexpected character '$'");
}

TEST_CASE("asm: hostile input never crashes") {
  // A few shapes the fuzzer found interesting; each must fail or succeed cleanly.
  const char *inputs[] = {"",
                          "\n\n",
                          ".",
                          ". kernel",
                          ".engine",
                          ".engine sync\nwait",
                          ".engine sync\nwait s0",
                          ".engine sync\nwait s0 >=",
                          ".engine sync\nsignal s0",
                          ".const f32",
                          ".const f32 ,,",
                          ".engine sync\ntensor_scalar none, none, add",
                          "\"\\x",
                          ".engine vector\nmemset none, -",
                          ".engine vector\nmemset none, nan:",
                          ".engine vector\nmemset none, 0x",
                          ".arg a in f32[",
                          ".tile t sbuf(",
                          ".engine sync\nnop src0=sbuf p99999999999:1",
                          ".sem x = 70000"};
  for (const char *in : inputs) {
    INFO(in);
    auto r = assemble(in, "h.s");
    if (auto *p = std::get_if<Program>(&r)) check_round_trip(*p);
  }
  std::string big(100000, '[');
  CHECK(std::holds_alternative<AsmError>(assemble(".engine sync\nnop dst=sbuf " + big, "h.s")));
  std::string nul("\0\xff\x80", 3);
  CHECK(std::holds_alternative<AsmError>(assemble(nul, "h.s")));
}

TEST_CASE("asm: a scale or bias is given once, as a value or a tile") {
  const std::string act = kHeader + ".tile tb sbuf.f32 p0:128 @4096 [1,1]\n.engine scalar\n";
  // Line 9 is the instruction.
  expect_error(act + "activation relu xa, xa bias=0.5 bias=tb\n", 9, 33,
               "bias given twice (as a value); an activation has one bias");
  expect_error(act + "activation relu xa, xa bias=tb bias=0.5\n", 9, 32,
               "bias given twice (as a tile)");
  expect_error(act + "activation relu xa, xa scale=2 scale=tb\n", 9, 32,
               "scale given twice (as a value)");
  expect_error(act + "activation relu xa, xa bias=0.5 bias=1\n", 9, 33, "bias given twice");
  expect_error(act + "activation relu xa, xa bias=tb src1=tb\n", 9, 32, "src1 given twice");
  expect_error(act + "activation relu xa, xa bias=0.5 imm1=1\n", 9, 33, "imm1 given twice");
  // One of each is fine.
  const Program p = assemble_ok(act + "activation relu xa, xa scale=2 bias=tb\n");
  CHECK(p.stream(Engine::kScalar).at(0).imm[0] == 2.0f);
  CHECK(p.stream(Engine::kScalar).at(0).src1.offset == 4096);
}

TEST_CASE("asm: without .loc every instruction carries its own line of the .s file") {
  const Program p = assemble_ok(kHeader +
                                    "tensor_copy xa, xa\n"
                                    "\n"
                                    "    memset xa, 1 ; comment\n"
                                    ".engine sync\n"
                                    "nop\n",
                                "kernels/k.s");
  CHECK(p.source_lines[static_cast<uint32_t>(Engine::kVector)] == std::vector<uint32_t>{7, 9});
  CHECK(p.source_lines[static_cast<uint32_t>(Engine::kSync)] == std::vector<uint32_t>{11});
  CHECK(p.source_lines[static_cast<uint32_t>(Engine::kTensor)].empty());
  CHECK(p.source_file == "kernels/k.s");
  check_round_trip(p);

  // .file names the source; the lines are still the .s lines.
  const Program f = assemble_ok(".file \"model.py\"\n" + kHeader + "tensor_copy xa, xa\n");
  CHECK(f.source_file == "model.py");
  CHECK(f.source_lines[static_cast<uint32_t>(Engine::kVector)] == std::vector<uint32_t>{8});

  // Any .loc: the lines are the .loc lines, as before.
  const Program l = assemble_ok(kHeader + "tensor_copy xa, xa\n.loc 40\nmemset xa, 1\n");
  CHECK(l.source_lines[static_cast<uint32_t>(Engine::kVector)] == std::vector<uint32_t>{0, 40});
  CHECK(l.source_file.empty());
  const Program none = assemble_ok(".loc none\n" + kHeader + "tensor_copy xa, xa\n");
  CHECK(none.source_lines[static_cast<uint32_t>(Engine::kVector)].empty());
  CHECK(none.source_file.empty());

  // A program without lines keeps none through its listing (which starts with .loc none).
  ProgramBuilder b("no_lines");
  b.memset(Engine::kVector, sbuf_tile(DType::kF32, 0, 128, 0, 4), 1.0f);
  const Program built = b.finish();
  CHECK_THAT(disassemble(built), Catch::Contains(".loc none\n    memset"));
  check_round_trip(built);
}

// ----- scalar arguments ----------------------------------------------------------------------

namespace {

// 8 lines: the test line is line 9.
const std::string kScalarHeader =
    ".kernel k\n.arg x in f32[128,4]\n.arg alpha scalar f32\n.arg n scalar i32\n"
    ".arg out out f32[128,4]\n.tile t sbuf.f32 p0:128 [1,4]\n.tile col sbuf.f32 p0:128 [1,1]\n"
    ".engine vector\n";

uint16_t slot_arg(const Instruction &inst, ImmSlot slot) {
  return inst.scalar_arg[static_cast<uint32_t>(slot)];
}

}  // namespace

TEST_CASE("asm: .arg NAME scalar DTYPE declares a scalar argument") {
  const Program p = assemble_ok(kScalarHeader);
  REQUIRE(p.args.size() == 4);
  CHECK(p.args[0].kind == ArgKind::kTensor);
  CHECK(p.args[1].kind == ArgKind::kScalar);
  CHECK(p.args[1].dtype == DType::kF32);
  CHECK(p.args[1].shape.empty());
  CHECK(p.args[1].direction == ArgDirection::kIn);
  CHECK(p.args[1].bytes() == 4);
  CHECK(p.args[2].kind == ArgKind::kScalar);
  CHECK(p.args[2].dtype == DType::kI32);
  CHECK(p.args[3].kind == ArgKind::kTensor);
}

TEST_CASE("asm: a scalar argument stands for an immediate in every slot that takes one") {
  const Program p = assemble_ok(kScalarHeader +
                                "tensor_scalar t, t, multiply alpha, add arg(1)\n"
                                "memset t, alpha\n"
                                ".engine scalar\n"
                                "activation identity t, t scale=alpha bias=arg(alpha)\n"
                                "activation identity t, t bias=alpha\n"
                                ".engine gpsimd\n"
                                "iota col, pattern [1,1], n, arg(2)\n"
                                "affine_select greater_equal t, pattern [1,4], n, -1, t, alpha\n"
                                "tensor_copy t, t imm1=alpha\n");
  const auto &v = p.stream(Engine::kVector);
  const auto &sc = p.stream(Engine::kScalar);
  const auto &g = p.stream(Engine::kGpSimd);
  CHECK(slot_arg(v[0], ImmSlot::kImm0) == 1);
  CHECK(slot_arg(v[0], ImmSlot::kImm1) == 1);
  CHECK(slot_arg(v[1], ImmSlot::kImm0) == 1);
  CHECK(slot_arg(v[1], ImmSlot::kImm1) == kNoScalarArg);
  CHECK(slot_arg(sc[0], ImmSlot::kImm0) == 1);
  CHECK(fbits(sc[0].imm[0]) == 0);  // the slot's own value is 0, not activation's default 1
  CHECK(slot_arg(sc[0], ImmSlot::kImm1) == 1);
  CHECK(slot_arg(sc[1], ImmSlot::kImm0) == kNoScalarArg);
  CHECK(sc[1].imm[0] == 1.0f);
  CHECK(slot_arg(sc[1], ImmSlot::kImm1) == 1);
  CHECK(slot_arg(g[0], ImmSlot::kIimm0) == 2);
  CHECK(slot_arg(g[0], ImmSlot::kIimm1) == 2);
  CHECK(slot_arg(g[1], ImmSlot::kIimm0) == 2);
  CHECK(slot_arg(g[1], ImmSlot::kIimm1) == kNoScalarArg);
  CHECK(g[1].iimm[1] == -1);
  CHECK(slot_arg(g[1], ImmSlot::kImm0) == 1);
  // A generic clause takes one too (the listing of any slot the canonical form does not print).
  CHECK(slot_arg(g[2], ImmSlot::kImm1) == 1);
  check_round_trip(p);
  // The listing names the arguments.
  const std::string text = disassemble(p);
  CHECK_THAT(text, Catch::Contains(".arg alpha scalar f32\n.arg n scalar i32\n"));
  CHECK_THAT(text, Catch::Contains("activation identity sbuf.f32 p0:128 @0 [1,4], sbuf.f32 "
                                   "p0:128 @0 [1,4] scale=alpha bias=alpha"));
  CHECK_THAT(text, Catch::Contains("memset sbuf.f32 p0:128 @0 [1,4], alpha"));
}

TEST_CASE("asm: scalars whose names do not read back print as arg(INDEX)") {
  // A quoted name, a name two arguments share, and a reserved word.
  Program p = assemble_ok(
      ".arg \"a b\" scalar f32\n.arg twice scalar f32\n.arg twice scalar f32\n"
      ".arg nan scalar f32\n.engine vector\n"
      "memset sbuf.f32 p0:128 [1,1], arg(0)\n"
      "memset sbuf.f32 p0:128 [1,1], arg(2)\n"
      "memset sbuf.f32 p0:128 [1,1], arg(nan)\n"
      "memset sbuf.f32 p0:128 [1,1], arg(\"a b\")\n");
  const auto &v = p.stream(Engine::kVector);
  CHECK(slot_arg(v[0], ImmSlot::kImm0) == 0);
  CHECK(slot_arg(v[1], ImmSlot::kImm0) == 2);
  CHECK(slot_arg(v[2], ImmSlot::kImm0) == 3);
  CHECK(slot_arg(v[3], ImmSlot::kImm0) == 0);
  const std::string text = disassemble(p);
  CHECK_THAT(text, Catch::Contains("[1,1], arg(0)\n"));
  CHECK_THAT(text, Catch::Contains("[1,1], arg(2)\n"));
  CHECK_THAT(text, Catch::Contains("[1,1], arg(nan)\n"));
  check_round_trip(p);
  // A builder program round-trips too.
  ProgramBuilder b("built");
  const auto beta = b.scalar_arg("beta", DType::kF32);
  b.tensor_scalar(Engine::kVector, sbuf_tile(DType::kF32, 0, 128, 0, 4),
                  sbuf_tile(DType::kF32, 0, 128, 0, 4), AluOp::kMultiply, 0.0f, AluOp::kBypass)
      .read_scalar(ImmSlot::kImm1, beta);
  check_round_trip(b.finish());
}

TEST_CASE("asm: scalar argument errors name the line and the problem") {
  // Declarations.
  expect_error(".arg alpha scalar bf16\n", 1, 19,
               "a scalar argument is f32 or i32 (what an immediate holds), not bf16");
  expect_error(".arg alpha scalar f32[1]\n", 1, 22, "a scalar argument has no shape");
  expect_error(".arg alpha scalar\n", 1, 18, "expected a dtype");
  expect_error(".tile t sbuf.f32 p0:128 [1,4]\n.arg t scalar f32\n", 2, 6,
               "'t' is already declared as a tile");
  expect_error(".arg alpha scalar f32\n.tile alpha sbuf.f32 p0:128 [1,4]\n", 2, 7,
               "'alpha' is already declared as a scalar argument");
  // Uses.
  expect_error(kScalarHeader + "memset t, beta\n", 9, 11,
               "expected value (a number, inf or nan), found 'beta'");
  expect_error(kScalarHeader + "memset t, arg(beta)\n", 9, 15, "argument 'beta' is not declared");
  expect_error(kScalarHeader + "memset t, x\n", 9, 11,
               "argument 'x' is a tensor; only a scalar argument (.arg NAME scalar f32 or i32) "
               "can stand for value");
  expect_error(kScalarHeader + "memset t, arg(const)\n", 9, 11,
               "the constants block cannot stand for value");
  expect_error(kScalarHeader + "memset t, n\n", 9, 11,
               "scalar argument 'n' is i32, but value is an f32 (float) immediate; declare it f32");
  expect_error(kScalarHeader + ".engine gpsimd\niota col, pattern [1,1], alpha, 1\n", 10, 26,
               "scalar argument 'alpha' is f32, but offset is an i32 (integer) immediate; declare "
               "it i32");
  expect_error(kScalarHeader + ".engine scalar\nactivation exp t, t scale=n\n", 10, 27,
               "scalar argument 'n' is i32, but scale is an f32 (float) immediate");
  expect_error(kScalarHeader + "tensor_scalar t, t, add alpha, multiply x\n", 9, 41,
               "argument 'x' is a tensor");
  expect_error(kScalarHeader + ".engine sync\ndma_copy q0 t, hbm(alpha).f32 rows[4,128] [1,4]\n",
               10, 20, "argument 'alpha' is a scalar; it stands for an immediate");
  expect_error(
      ".arg a scalar f32\n.arg a scalar f32\n.engine vector\nmemset "
      "sbuf.f32 p0:128 [1,1], a\n",
      4, 31, "argument name 'a' is ambiguous (2 arguments have it); use its index");
  expect_error(kScalarHeader + "memset t, alpha scale=alpha\n", 9, 17,
               "'scale' applies only to activation");
  expect_error(kScalarHeader + "memset t, arg(9)\n", 9, 15, "argument index 9 is out of range");
}

// ----- several source files: .file N and .loc FILE LINE ---------------------------------------

TEST_CASE("asm: .file N declares further source files and .loc FILE LINE selects one") {
  const Program p = assemble_ok(
      ".file \"kernels/softmax.cpp\"\n"
      ".file 1 \"kernels/helpers.hpp\"\n"
      ".file 2 \"lib/tile ops.hpp\"\n" +
      kHeader +
      ".loc 12\n"
      "tensor_copy xa, xa\n"
      ".loc 1 57\n"
      "memset xa, 1\n"
      ".loc 2 3\n"
      "memset xa, 2\n"
      ".loc 0 14\n"
      "memset xa, 3\n"
      ".engine sync\n"
      ".loc none\n"
      "nop\n");
  CHECK(p.source_file == "kernels/softmax.cpp");
  CHECK(p.source_files == std::vector<std::string>{"kernels/helpers.hpp", "lib/tile ops.hpp"});
  const auto v = static_cast<uint32_t>(Engine::kVector);
  CHECK(p.source_lines[v] == std::vector<uint32_t>{12, 57, 3, 14});
  CHECK(p.source_file_ids[v] == std::vector<uint32_t>{0, 1, 2, 0});
  CHECK(p.source_lines[static_cast<uint32_t>(Engine::kSync)].empty());
  CHECK(source_location_text(p, Engine::kVector, 1) == "kernels/helpers.hpp:57");
  CHECK(source_location_text(p, Engine::kVector, 2) == "lib/tile ops.hpp:3");
  CHECK(source_location_text(p, Engine::kVector, 3) == "kernels/softmax.cpp:14");
  const std::string text = disassemble(p);
  CHECK_THAT(text, Catch::Contains(".file 1 \"kernels/helpers.hpp\"\n"
                                   ".file 2 \"lib/tile ops.hpp\"\n"));
  CHECK_THAT(text, Catch::Contains(".loc 1 57\n"));
  CHECK_THAT(text, Catch::Contains(".loc 14\n"));
  check_round_trip(p);

  // Numbered files without a file 0: those instructions are "line N".
  const Program q = assemble_ok(".file 1 \"a.cpp\"\n" + kHeader +
                                ".loc 5\nmemset xa, 1\n.loc 1 6\nmemset xa, 2\n");
  CHECK(q.source_file.empty());
  CHECK(source_location_text(q, Engine::kVector, 0) == "line 5");
  CHECK(source_location_text(q, Engine::kVector, 1) == "a.cpp:6");
  check_round_trip(q);

  // Without any .loc, the lines are the .s lines, all in file 0.
  const Program t = assemble_ok(".file 1 \"a.cpp\"\n" + kHeader + "memset xa, 1\n", "k.s");
  CHECK(t.source_file == "k.s");
  CHECK(t.source_lines[v] == std::vector<uint32_t>{8});
  CHECK(t.source_file_ids[v] == std::vector<uint32_t>{0});
  check_round_trip(t);
}

TEST_CASE("asm: .file N and .loc FILE LINE errors") {
  expect_error(kHeader + ".loc 9 3\n", 7, 6, "source file 9 is not declared");
  expect_error(".file 1 \"a.cpp\"\n" + kHeader + ".loc 2 3\n", 8, 6,
               "source file 2 is not declared");
  expect_error(".file 1 \"a.cpp\"\n.file 2 \"b.cpp\"\n.file 2 \"c.cpp\"\n", 3, 7,
               "source file 2 is already declared");
  expect_error(".file 2 \"b.cpp\"\n", 1, 7,
               "source file 2 is declared before file 1; number the files 1, 2, 3, ... in order");
  expect_error(".file 0 \"b.cpp\"\n", 1, 7, "source file 0 is the one '.file \"name\"' names");
  expect_error(".file 1 \"\"\n", 1, 9, "a source file name cannot be empty");
  expect_error(".file 1\n", 1, 8, "expected a source file name");
  expect_error(".file 70000 \"x\"\n", 1, 7, "source file number 70000 is out of range (0..65535)");
  expect_error(".file 1 \"a.cpp\"\n.loc 1 2 3\n", 2, 10, "after the .loc directive");
  expect_error(".file 1 \"a.cpp\"\n.loc 1 x\n", 2, 8, "");
  // The unnumbered .file is still given once.
  expect_error(".file \"a\"\n.file 1 \"b\"\n.file \"c\"\n", 3, 2, ".file given twice");
}
