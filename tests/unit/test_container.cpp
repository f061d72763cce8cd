// The kernel container: round trips of every field, deterministic bytes, and a specific reason
// for every class of malformed input (the reader is also fuzzed: fuzz/fuzz_kernel_loader.cpp).
#include <fmt/format.h>

#include <bit>
#include <catch2/catch.hpp>
#include <limits>
#include <random>
#include <string>

#include "elf_bytes.hpp"
#include "isa/assembler.hpp"
#include "isa/builder.hpp"
#include "isa/container.hpp"
#include "isa/disassembler.hpp"
#include "isa/target.hpp"
#include "isa/validate.hpp"

using namespace trn;
using namespace trn::isa;
using namespace trn::test;

namespace {

// ----- field-by-field comparison -----------------------------------------------------------

void check_same_ap(const AccessPattern &a, const AccessPattern &b, const char *role) {
  INFO(role);
  CHECK(a.space == b.space);
  CHECK(a.dtype == b.dtype);
  CHECK(a.arg == b.arg);
  CHECK(a.partition_start == b.partition_start);
  CHECK(a.partition_count == b.partition_count);
  CHECK(a.partition_stride == b.partition_stride);
  CHECK(a.offset == b.offset);
  CHECK(a.num_dims == b.num_dims);
  for (size_t d = 0; d < kMaxFreeDims; ++d) {
    INFO("dim " << d);
    CHECK(a.dims[d].stride == b.dims[d].stride);
    CHECK(a.dims[d].count == b.dims[d].count);
  }
}

void check_same_instruction(const Instruction &a, const Instruction &b) {
  CHECK(a.opcode == b.opcode);
  CHECK(a.engine == b.engine);
  CHECK(a.func == b.func);
  CHECK(a.func2 == b.func2);
  CHECK(a.queue == b.queue);
  CHECK(a.flags == b.flags);
  check_same_ap(a.dst, b.dst, "dst");
  check_same_ap(a.dst2, b.dst2, "dst2");
  check_same_ap(a.src0, b.src0, "src0");
  check_same_ap(a.src1, b.src1, "src1");
  check_same_ap(a.src2, b.src2, "src2");
  for (size_t i = 0; i < 2; ++i) {  // bit patterns: NaN payloads and -0 survive too
    CHECK(std::bit_cast<uint32_t>(a.imm[i]) == std::bit_cast<uint32_t>(b.imm[i]));
    CHECK(a.iimm[i] == b.iimm[i]);
  }
  CHECK(a.scalar_arg == b.scalar_arg);
  CHECK(a.wait.cmp == b.wait.cmp);
  CHECK(a.wait.sem == b.wait.sem);
  CHECK(a.wait.value == b.wait.value);
  CHECK(a.signal.op == b.signal.op);
  CHECK(a.signal.sem == b.signal.sem);
  CHECK(a.signal.value == b.signal.value);
}

void check_same_program(const Program &a, const Program &b) {
  CHECK(a.name == b.name);
  REQUIRE(a.args.size() == b.args.size());
  for (size_t i = 0; i < a.args.size(); ++i) {
    INFO("argument " << i);
    CHECK(a.args[i].name == b.args[i].name);
    CHECK(a.args[i].dtype == b.args[i].dtype);
    CHECK(a.args[i].shape == b.args[i].shape);
    CHECK(a.args[i].direction == b.args[i].direction);
    CHECK(a.args[i].kind == b.args[i].kind);
  }
  for (uint32_t e = 0; e < kEngineCount; ++e) {
    INFO("engine " << engine_name(static_cast<Engine>(e)));
    REQUIRE(a.streams[e].size() == b.streams[e].size());
    for (size_t i = 0; i < a.streams[e].size(); ++i) {
      INFO("instruction " << i);
      check_same_instruction(a.streams[e][i], b.streams[e][i]);
    }
    CHECK(a.source_lines[e] == b.source_lines[e]);
    for (size_t i = 0; i < a.streams[e].size(); ++i)
      CHECK(a.source_file_id(static_cast<Engine>(e), i) ==
            b.source_file_id(static_cast<Engine>(e), i));
  }
  CHECK(a.constants == b.constants);
  CHECK(a.source_file == b.source_file);
  CHECK(a.source_files == b.source_files);
}

// ----- programs ------------------------------------------------------------------------------

// Every opcode, and every field of an instruction set to something other than its default.
Program full_program() {
  ProgramBuilder b("every_field");
  const auto x = b.arg("x", DType::kBf16, {4, 128, 512}, ArgDirection::kIn);
  const auto y = b.arg("y_out", DType::kFp8E4m3, {128, 512}, ArgDirection::kOut);
  b.arg("io", DType::kI32, {}, ArgDirection::kInOut);
  b.arg("scratch", DType::kU8, {1, 2, 3, 4, 5, 6, 7, 8}, ArgDirection::kInOut);

  b.dma_copy(Engine::kSync, 7, sbuf_tile(DType::kF32, 0, 128, 64, 512),
             hbm(x, DType::kBf16, 1024, -512, 128, {{1, 256}, {2, 2}}))
      .signal_add(3, 1)
      .line(10);
  b.dma_copy(Engine::kGpSimd, 15, hbm(y, DType::kFp8E4m3, 0, 512, 128, {{1, 512}}),
             sbuf_tile(DType::kF32, 0, 128, 64, 512))
      .wait_eq(4, 9)
      .signal_set(5, 77);
  b.dma_copy(Engine::kSync, 1, sbuf_tile(DType::kF32, 0, 1, 0, 16),
             hbm(kConstantsArg, DType::kF32, 8, 0, 1, {{1, 16}}));
  b.matmul(psum(DType::kF32, 0, 128, 2048, {{1, 512}}), sbuf_tile(DType::kBf16, 0, 128, 0, 128),
           sbuf_tile(DType::kBf16, 0, 128, 256, 512), true)
      .wait_ge(3, 1)
      .line(11);
  b.matmul(psum_tile(DType::kF32, 0, 128, 0, 512), sbuf_tile(DType::kF16, 0, 64, 0, 128),
           sbuf_tile(DType::kF16, 0, 64, 256, 512), false);
  b.transpose(Engine::kTensor, psum_tile(DType::kF32, 0, 32, 0, 128),
              sbuf_tile(DType::kF32, 0, 128, 0, 32));
  auto act = b.activation(sbuf_tile(DType::kF32, 0, 128, 0, 512),
                          psum_tile(DType::kF32, 0, 128, 0, 512), ActFunc::kGeluTanh, 0.5f, -1.25f);
  act.get().flags = kFlagAccumulate | kFlagScaleTile | kFlagBiasTile;
  act.get().dst2 = sbuf_tile(DType::kF32, 0, 128, 8192, 1);
  act.get().src1 = sbuf_tile(DType::kF32, 0, 128, 8196, 1);
  act.get().src2 = sbuf_tile(DType::kF32, 0, 128, 8200, 1);
  b.tensor_tensor(Engine::kVector, sbuf_tile(DType::kI16, 0, 128, 0, 64),
                  sbuf_tile(DType::kI16, 0, 128, 128, 64), sbuf_tile(DType::kI8, 0, 128, 256, 64),
                  AluOp::kBitwiseXor)
      .line(20);
  auto ts = b.tensor_scalar(Engine::kGpSimd, sbuf_tile(DType::kF32, 32, 32, 0, 8),
                            sbuf_tile(DType::kF32, 32, 32, 64, 8), AluOp::kSubtract,
                            std::numeric_limits<float>::infinity(), AluOp::kMax, -0.0f);
  ts.get().flags = kFlagReverse0 | kFlagReverse1 | kFlagOperand0Tile | kFlagOperand1Tile;
  b.tensor_reduce(sbuf_tile(DType::kF32, 0, 128, 0, 1),
                  sbuf(DType::kF32, 0, 128, 64, {{64, 4}, {1, 64}}), AluOp::kMax, 1, true);
  b.tensor_copy(Engine::kScalar, sbuf_tile(DType::kFp8E5m2, 0, 128, 0, 4),
                sbuf(DType::kF32, 0, 128, 16, {{-1, 4}}));
  b.memset(Engine::kVector, sbuf_tile(DType::kU8, 0, 128, 0, 100), 3.0f);
  b.iota(sbuf_tile(DType::kI32, 0, 128, 0, 64), pattern({{1, 8}, {8, 8}}), -7, 64);
  auto sel = b.affine_select(sbuf_tile(DType::kF32, 0, 128, 0, 64), pattern({{-1, 64}}), 5, 1,
                             AluOp::kGreaterEqual, sbuf_tile(DType::kF32, 0, 128, 256, 64),
                             -std::numeric_limits<float>::max());
  sel.get().imm[1] = std::bit_cast<float>(0x7FC01234u);  // a NaN with a payload
  b.sem_wait(Engine::kScalar, 255, 0xFFFFFFFFu);
  b.sem_signal(Engine::kTensor, 254, 2);
  b.barrier();

  // A raw instruction with every field distinct and extreme, on each engine.
  for (uint32_t e = 0; e < kEngineCount; ++e) {
    Instruction in;
    in.opcode = Opcode::kNop;
    in.engine = static_cast<Engine>(e);
    in.func = 0xAB;
    in.func2 = 0xCD;
    in.queue = 0xEF;
    in.flags = 0xFFFFFFFFu;
    AccessPattern *aps[] = {&in.dst, &in.dst2, &in.src0, &in.src1, &in.src2};
    uint32_t k = 1;
    for (AccessPattern *ap : aps) {
      ap->space = static_cast<MemSpace>(k % 4);
      ap->dtype = static_cast<DType>(k % kDTypeCount);
      ap->arg = k == 1 ? kConstantsArg : static_cast<uint16_t>(k - 2);  // those that exist
      ap->partition_start = 0x80000000u + k;
      ap->partition_count = 0xFFFFFFF0u + k;
      ap->partition_stride = std::numeric_limits<int64_t>::min() + k;
      ap->offset = 0xFFFFFFFFFFFFFF00ull + k;
      ap->num_dims = k - 1;
      for (uint32_t d = 0; d < ap->num_dims; ++d)  // the dims past num_dims stay zero
        ap->dims[d] = {std::numeric_limits<int32_t>::min() + static_cast<int32_t>(d + k),
                       0xFFFFFF00u + d + k};
      ++k;
    }
    in.imm = {std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::infinity()};
    in.iimm = {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    in.wait = {SemCmp::kEq, 0xFFFF, 0xFFFFFFFFu};
    in.signal = {SemOp::kSet, 0xFFFE, 0x12345678u};
    b.add(in).line(1000 + e);
  }

  Program p = b.finish();
  p.constants.resize(77);
  for (size_t i = 0; i < p.constants.size(); ++i)
    p.constants[i] = static_cast<std::byte>(i * 37 + 1);
  p.source_file = "kernels/every_field.trn.s";
  return p;
}

// A small kernel: one argument, one instruction on the tensor and sync streams.
Program small_program() {
  ProgramBuilder b("k");
  const auto x = b.arg("x", DType::kF32, {128, 4}, ArgDirection::kInOut);
  b.dma_copy(Engine::kSync, 0, sbuf_tile(DType::kF32, 0, 128, 0, 4),
             hbm_tile(x, DType::kF32, 4, 0, 128, 0, 4))
      .signal_add(0);
  b.transpose(Engine::kTensor, psum_tile(DType::kF32, 0, 4, 0, 128),
              sbuf_tile(DType::kF32, 0, 128, 0, 4))
      .wait_ge(0, 1);
  Program p = b.finish();
  p.constants.resize(8, std::byte{1});
  return p;
}

// A valid kernel with scalar arguments in float and integer slots:
// out = x * alpha + 0.5, then column 0 = iota from n.
Program scalar_program() {
  ProgramBuilder b("scaled");
  const auto x = b.arg("x", DType::kF32, {128, 4}, ArgDirection::kIn);
  const auto alpha = b.scalar_arg("alpha", DType::kF32);
  const auto n = b.scalar_arg("n", DType::kI32);
  const auto o = b.arg("out", DType::kF32, {128, 4}, ArgDirection::kOut);
  b.dma_copy(Engine::kSync, 0, sbuf_tile(DType::kF32, 0, 128, 0, 4),
             hbm_tile(x, DType::kF32, 4, 0, 128, 0, 4))
      .signal_add(0);
  b.activation(sbuf_tile(DType::kF32, 0, 128, 64, 4), sbuf_tile(DType::kF32, 0, 128, 0, 4),
               ActFunc::kIdentity, 1.0f, 0.5f)
      .read_scalar(ImmSlot::kImm0, alpha)
      .wait_ge(0, 1)
      .signal_add(1);
  b.iota(sbuf_tile(DType::kF32, 0, 128, 64, 1), pattern({{1, 1}}), 0, 1)
      .read_scalar(ImmSlot::kIimm0, n)
      .wait_ge(1, 1)
      .signal_add(2);
  b.dma_copy(Engine::kSync, 0, hbm_tile(o, DType::kF32, 4, 0, 128, 0, 4),
             sbuf_tile(DType::kF32, 0, 128, 64, 4))
      .wait_ge(2, 1);
  return b.finish();
}

// A kernel that obeys the ISA's rules: out = relu(x) through SBUF.
Program relu_program() {
  ProgramBuilder b("relu");
  const auto x = b.arg("x", DType::kF32, {128, 512}, ArgDirection::kIn);
  const auto o = b.arg("out", DType::kF32, {128, 512}, ArgDirection::kOut);
  b.dma_copy(Engine::kSync, 0, sbuf_tile(DType::kF32, 0, 128, 0, 512),
             hbm_tile(x, DType::kF32, 512, 0, 128, 0, 512))
      .signal_add(0)
      .line(3);
  b.activation(sbuf_tile(DType::kF32, 0, 128, 2048, 512), sbuf_tile(DType::kF32, 0, 128, 0, 512),
               ActFunc::kRelu)
      .wait_ge(0, 1)
      .signal_add(1)
      .line(4);
  b.dma_copy(Engine::kSync, 1, hbm_tile(o, DType::kF32, 512, 0, 128, 0, 512),
             sbuf_tile(DType::kF32, 0, 128, 2048, 512))
      .wait_ge(1, 1)
      .line(5);
  Program p = b.finish();
  p.source_file = "relu.trn.s";
  return p;
}

std::string read_error(const Bytes &b) {
  Program p;
  auto e = read_kernel(b, p);
  return e ? *e : std::string("(read succeeded)");
}

}  // namespace

// ----- round trips ---------------------------------------------------------------------------

TEST_CASE("container: every field of every opcode round-trips") {
  const Program p = full_program();
  for (uint32_t op = 0; op < kOpcodeCount; ++op) {  // the program covers them all
    bool found = false;
    for (const auto &s : p.streams)
      for (const auto &in : s) found = found || static_cast<uint32_t>(in.opcode) == op;
    INFO("opcode " << op);
    CHECK(found);
  }
  const Bytes bytes = write_kernel(p);
  Program q;
  const auto err = read_kernel(bytes, q);
  INFO(err.value_or(""));
  REQUIRE_FALSE(err);
  check_same_program(p, q);
  CHECK(write_kernel(q) == bytes);
}

TEST_CASE("container: writing is deterministic") {
  const Program p = full_program();
  const Bytes a = write_kernel(p);
  const Program copy = p;
  CHECK(write_kernel(copy) == a);
  CHECK(write_kernel(full_program()) == a);
  CHECK(a.size() % 8 == 0);
  // Every instruction stream is a whole number of records.
  for (const char *s : {".trn.text.tensor", ".trn.text.vector", ".trn.text.scalar",
                        ".trn.text.gpsimd", ".trn.text.sync"})
    CHECK(size_of(a, s) % kInstructionRecordSize == 0);
}

TEST_CASE("container: an empty program and one without debug information round-trip") {
  Program empty;
  const Bytes e = write_kernel(empty);
  CHECK(shnum(e) == 10);  // null, meta, args, 5 streams, const, shstrtab: no .trn.debug
  Program q;
  REQUIRE_FALSE(read_kernel(e, q));
  check_same_program(empty, q);
  CHECK(write_kernel(q) == e);

  Program s = small_program();
  REQUIRE(s.source_file.empty());
  const Bytes sb = write_kernel(s);
  CHECK(shnum(sb) == 10);
  REQUIRE_FALSE(read_kernel(sb, q));
  check_same_program(s, q);
}

TEST_CASE("container: debug lines of some engines only, and lines padded to the stream") {
  Program p = small_program();
  p.source_lines[static_cast<uint32_t>(Engine::kTensor)] = {42};
  Bytes b = write_kernel(p);
  CHECK(shnum(b) == 11);
  Program q;
  REQUIRE_FALSE(read_kernel(b, q));
  check_same_program(p, q);
  CHECK(q.source_file.empty());

  // A lines vector shorter than its stream is written padded with 0.
  Program r = full_program();
  auto &lines = r.source_lines[static_cast<uint32_t>(Engine::kSync)];
  lines.resize(1);
  REQUIRE_FALSE(read_kernel(write_kernel(r), q));
  CHECK(q.source_lines[static_cast<uint32_t>(Engine::kSync)].size() ==
        r.stream(Engine::kSync).size());
  CHECK(q.source_lines[static_cast<uint32_t>(Engine::kSync)][0] == lines[0]);
}

TEST_CASE("container: a valid kernel still passes validate_program after a round trip") {
  const Program p = relu_program();
  REQUIRE_FALSE(validate_program(p, *isa::core_spec(isa::kDefaultGeneration)));
  Program q;
  REQUIRE_FALSE(read_kernel(write_kernel(p), q));
  check_same_program(p, q);
  CHECK_FALSE(validate_program(q, *isa::core_spec(isa::kDefaultGeneration)));
}

TEST_CASE("container: the file is an ELF64 little-endian image with named sections") {
  const Bytes b = write_kernel(full_program());
  CHECK(get_le(b, 0, 4) == 0x464C457Fu);
  CHECK(get_le(b, 4, 1) == 2);
  CHECK(get_le(b, 5, 1) == 1);
  CHECK(get_le(b, 16, 2) == kElfTypeTrnKernel);
  CHECK(get_le(b, 18, 2) == kElfMachineTrn);
  CHECK(shoff(b) + shnum(b) * 64 == b.size());
  CHECK(get_le(b, offset_of(b, ".trn.meta"), 4) == kKernelMagic);
  CHECK(get_le(b, offset_of(b, ".trn.meta") + 4, 4) == kKernelFormatVersion);
  CHECK(size_of(b, ".trn.const") == 77);
  CHECK(size_of(b, ".trn.text.tensor") ==
        full_program().stream(Engine::kTensor).size() * kInstructionRecordSize);
  CHECK(get_le(b, header_of(b, ".trn.text.scalar") + 56, 8) == kInstructionRecordSize);
}

// ----- malformed input -----------------------------------------------------------------------

TEST_CASE("container: every truncation of a kernel is rejected") {
  const Bytes b = write_kernel(small_program());
  for (size_t n = 0; n < b.size(); ++n) {
    INFO("length " << n);
    Program p;
    const auto e = read_kernel(std::span(b).first(n), p);
    REQUIRE(e);
    CHECK_FALSE(e->empty());
  }
  CHECK_REJECTS(Bytes(b.begin(), b.begin() + 10), "file is 10 bytes; an ELF64 header alone is 64");
  CHECK_REJECTS(Bytes(b.begin(), b.end() - 1), "past the end of the");
}

TEST_CASE("container: trailing data after the last section is rejected") {
  Bytes b = write_kernel(small_program());
  b.push_back(std::byte{0});
  CHECK_REJECTS(b, "1 bytes of trailing data after the section header table");
  b.resize(b.size() + 7, std::byte{0});
  CHECK_REJECTS(b, "8 bytes of trailing data");
}

TEST_CASE("container: bad ELF identification and header fields") {
  const Bytes good = write_kernel(small_program());
  Bytes b = good;
  b[1] = std::byte{'X'};
  CHECK_REJECTS(b, "not an ELF file: magic 7f 58 4c 46");
  b = good;
  b[4] = std::byte{1};
  CHECK_REJECTS(b, "ELF class 1 (ELFCLASS32)");
  b = good;
  b[5] = std::byte{2};
  CHECK_REJECTS(b, "a trn kernel is little endian");
  b = good;
  b[6] = std::byte{0};
  CHECK_REJECTS(b, "ELF identification version 0");
  b = good;
  b[7] = std::byte{3};
  CHECK_REJECTS(b, "ELF OS ABI 3");
  b = good;
  b[12] = std::byte{1};
  CHECK_REJECTS(b, "padding byte 12 is not zero");
  b = good;
  put_le(b, 16, 2, 1);
  CHECK_REJECTS(b, "ELF type 0x1 is not a trn kernel");
  b = good;
  put_le(b, 18, 2, 62);
  CHECK_REJECTS(b, "ELF machine 0x3e is not trn");
  b = good;
  put_le(b, 32, 8, 64);
  CHECK_REJECTS(b, "no program headers");
  b = good;
  put_le(b, 58, 2, 40);
  CHECK_REJECTS(b, "section header size 40");
  b = good;
  put_le(b, 60, 2, 0);
  CHECK_REJECTS(b, "0 sections");
  b = good;
  put_le(b, 62, 2, 10);
  CHECK_REJECTS(b, "section name table index 10 is out of range");
  b = good;
  put_le(b, 40, 8, 8);
  CHECK_REJECTS(b, "section header table offset 8 is inside the ELF header");
  b = good;
  put_le(b, 40, 8, 0xFFFFFFFFFFFFFFF8ull);  // offset + size wraps around
  CHECK_REJECTS(b, "section header table: offset 18446744073709551608 + size 640 is past the end");
}

TEST_CASE("container: bad kernel magic and format version") {
  const Bytes good = write_kernel(small_program());
  const size_t meta = offset_of(good, ".trn.meta");
  Bytes b = good;
  put_le(b, meta + 4, 4, 4);
  CHECK(read_error(b) ==
        "kernel format version 4; this trn reads versions 1, 2 and 3 (rebuild the kernel with "
        "this trn-as)");
  b = good;
  put_le(b, meta + 4, 4, 0);
  CHECK_REJECTS(b, "kernel format version 0; this trn reads versions 1, 2 and 3");
  // Version 3 exists for kernels of several source files, named in .trn.debug.
  b = good;
  put_le(b, meta + 4, 4, 3);
  CHECK(read_error(b) ==
        "kernel format version 3 without section .trn.debug; version 3 is only for kernels that "
        "name several source files there");
  // Version 2 exists for scalar arguments: a kernel without any is written as version 1.
  b = good;
  put_le(b, meta + 4, 4, 2);
  CHECK(read_error(b) ==
        "kernel format version 2 without scalar arguments; such a kernel is stored as version 1");
  b = good;
  put_le(b, meta, 4, 0x12345678);
  CHECK_REJECTS(b, "section .trn.meta: bad magic 0x12345678");
}

TEST_CASE("container: section offsets and sizes past the end of the file") {
  const Bytes good = write_kernel(small_program());
  const size_t h = header_of(good, ".trn.text.tensor");
  const uint64_t size = get_le(good, h + 32, 8);
  const std::string file = std::to_string(good.size());
  Bytes b = good;
  put_le(b, h + 24, 8, 4096);
  CHECK_REJECTS(b, "section .trn.text.tensor: offset 4096 + size " + std::to_string(size) +
                       " is past the end of the " + file + "-byte file");
  b = good;
  put_le(b, h + 32, 8, 0xFFFFFFFFFFFFFF00ull);  // offset + size wraps around
  CHECK_REJECTS(b, "section .trn.text.tensor: offset");
  CHECK_REJECTS(b, "+ size 18446744073709551360 is past the end");
  b = good;
  const size_t strtab = header_of(good, ".shstrtab");
  put_le(b, strtab + 32, 8, good.size());
  CHECK_REJECTS(b, "section name table (section 9): offset");
}

TEST_CASE("container: overlapping sections are rejected") {
  const Bytes good = write_kernel(small_program());
  Bytes b = good;
  put_le(b, header_of(b, ".trn.text.sync") + 24, 8, offset_of(good, ".trn.args"));
  CHECK_REJECTS(b, "sections .trn.args and .trn.text.sync overlap");
  b = good;
  put_le(b, header_of(b, ".trn.const") + 24, 8, 0);
  CHECK_REJECTS(b, "the ELF header overlaps section .trn.const");
  b = good;
  put_le(b, header_of(b, ".trn.const") + 24, 8, shoff(good));
  CHECK_REJECTS(b, "the section header table overlaps section .trn.const");
  // Zero-sized sections take no bytes and overlap nothing, but they have their place too: a
  // kernel is what the writer makes of its program (trn-objdump | trn-as reproduces it).
  Program empty_vector = small_program();
  REQUIRE(empty_vector.stream(Engine::kVector).empty());
  b = write_kernel(empty_vector);
  put_le(b, header_of(b, ".trn.text.vector") + 24, 8, offset_of(b, ".trn.args"));
  CHECK_REJECTS(b, "(the header of section 4) is not where the kernel format puts it");
}

TEST_CASE("container: padding and layout are the writer's, byte for byte") {
  const Bytes good = write_kernel(small_program());
  // The padding after .trn.meta (its size is not a multiple of 8).
  const size_t meta_end = offset_of(good, ".trn.meta") + size_of(good, ".trn.meta");
  REQUIRE(meta_end % 8 != 0);
  Bytes b = good;
  b[meta_end] = std::byte{1};
  CHECK_REJECTS(b, fmt::format("byte {} (padding between sections) is not where", meta_end));
}

TEST_CASE("container: section name table and string indices") {
  const Bytes good = write_kernel(small_program());
  const size_t names_at = offset_of(good, ".shstrtab");
  const size_t names_size = size_of(good, ".shstrtab");
  Bytes b = good;
  put_le(b, header_of(b, ".trn.args"), 4, 4096);
  CHECK_REJECTS(b, "section 2: name index 4096 is out of range (name table is " +
                       std::to_string(names_size) + " bytes)");
  b = good;
  b[names_at + names_size - 1] = std::byte{'x'};
  CHECK_REJECTS(b, "section name table is not NUL-terminated");
  b = good;
  b[names_at] = std::byte{'x'};
  CHECK_REJECTS(b, "section name table does not start with a NUL byte");
  b = good;
  put_le(b, header_of(b, ".shstrtab") + 4, 4, 1);
  CHECK_REJECTS(b, "section name table (section 9) has type 1; expected 3");

  // Rename .trn.const (10 characters) in place.
  auto rename = [&](const std::string &to) {
    Bytes r = good;
    const size_t at = names_at + static_cast<size_t>(get_le(r, header_of(r, ".trn.const"), 4));
    for (size_t i = 0; i < to.size(); ++i) r[at + i] = static_cast<std::byte>(to[i]);
    return r;
  };
  CHECK_REJECTS(rename(".trn.cxxxx"), "section 8: unknown section '.trn.cxxxx'");
  CHECK_REJECTS(rename(".trn.debug"), "missing section .trn.const");
  b = good;  // .trn.const named .trn.args
  put_le(b, header_of(good, ".trn.const"), 4, get_le(good, header_of(good, ".trn.args"), 4));
  CHECK_REJECTS(b, "duplicate section .trn.args (sections 2 and 8)");
}

TEST_CASE("container: section header fields other than offset and size") {
  const Bytes good = write_kernel(small_program());
  const size_t h = header_of(good, ".trn.args");
  Bytes b = good;
  put_le(b, shdr(b, 0) + 32, 8, 1);
  CHECK_REJECTS(b, "section header 0 (the null section) is not all zero");
  b = good;
  put_le(b, h + 4, 4, 8);
  CHECK_REJECTS(b, "section .trn.args: type 8; expected 1");
  b = good;
  put_le(b, h + 8, 8, 2);
  CHECK_REJECTS(b, "section .trn.args: flags 0x2; expected 0");
  b = good;
  put_le(b, h + 16, 8, 0x1000);
  CHECK_REJECTS(b, "section .trn.args: address 0x1000; expected 0");
  b = good;
  put_le(b, h + 40, 4, 3);
  CHECK_REJECTS(b, "section .trn.args: link 3 / info 0; expected 0");
  b = good;
  put_le(b, h + 48, 8, 4);
  CHECK_REJECTS(b, "section .trn.args: alignment 4; expected 8");
  b = good;
  put_le(b, h + 24, 8, get_le(good, h + 24, 8) + 4);
  CHECK_REJECTS(b, "section .trn.args: offset");
  CHECK_REJECTS(b, "is not 8-byte aligned");
  b = good;
  put_le(b, header_of(b, ".trn.text.tensor") + 56, 8, 360);
  CHECK_REJECTS(b, "section .trn.text.tensor: entry size 360; expected 368");
}

TEST_CASE("container: section sizes must be whole records and agree with .trn.meta") {
  const Bytes good = write_kernel(small_program());
  const size_t h = header_of(good, ".trn.text.tensor");
  Bytes b = good;
  put_le(b, h + 32, 8, get_le(good, h + 32, 8) - 8);
  CHECK_REJECTS(b,
                "section .trn.text.tensor: size 360 is not a multiple of the 368-byte "
                "instruction record");
  b = good;
  const size_t meta = offset_of(good, ".trn.meta");
  put_le(b, meta + 12, 4, 2);  // tensor count 2, one record
  CHECK_REJECTS(b, "section .trn.text.tensor: holds 1 instructions but .trn.meta says 2");
  b = good;
  put_le(b, meta + 40, 8, 9);
  CHECK_REJECTS(b, "section .trn.const: 8 bytes but .trn.meta says 9");
  b = good;
  put_le(b, meta + 8, 4, 2);
  CHECK_REJECTS(b, "section .trn.args:");
  b = good;
  put_le(b, meta + 36, 4, 1);
  CHECK_REJECTS(b, "section .trn.meta: reserved field is 0x1; expected 0");
}

TEST_CASE("container: too many instructions, arguments, and too-long names") {
  const Bytes good = write_kernel(small_program());
  const size_t meta = offset_of(good, ".trn.meta");
  Bytes b = good;
  put_le(b, meta + 12, 4, (1u << 24) + 1);
  CHECK_REJECTS(b,
                "section .trn.meta: 16777217 instructions in the tensor stream; at most "
                "16777216");
  b = good;
  put_le(b, meta + 28, 4, 0xFFFFFFFFu);
  CHECK_REJECTS(b, "instructions in the sync stream");
  b = good;
  put_le(b, meta + 8, 4, 0x10000);
  CHECK_REJECTS(b, "section .trn.meta: 65536 arguments; at most 65535");
  b = good;
  put_le(b, meta + 8, 4, 1000);
  CHECK_REJECTS(b, "cannot hold 1000 arguments");

  Program p = small_program();
  p.name = std::string(300, 'n');
  CHECK_REJECTS(write_kernel(p), "kernel name is 300 bytes long; at most 256");
  p = small_program();
  p.args[0].name = std::string(257, 'a');
  CHECK_REJECTS(write_kernel(p), "argument 0: name is 257 bytes long; at most 256");
  p = small_program();
  p.args[0].shape = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  CHECK_REJECTS(write_kernel(p), "argument 0: rank 9; at most 8");
  p = small_program();
  p.args[0].shape = {1ull << 40, 1ull << 30};
  CHECK_REJECTS(write_kernel(p), "argument 0: shape [1099511627776, 1073741824] is more than 2^64");
  p = small_program();
  p.source_file = std::string(5000, 'f');
  CHECK_REJECTS(write_kernel(p), "section .trn.debug: source file name is 5000 bytes long");
}

TEST_CASE("container: names must be NUL-terminated without embedded NULs") {
  Program p = small_program();
  p.args[0].name = "abc";
  const Bytes good = write_kernel(p);
  const size_t args = offset_of(good, ".trn.args");
  const size_t name_at = args + 8 + 2 * 8;  // header, shape of rank 2
  Bytes b = good;
  b[name_at + 3] = std::byte{'!'};
  CHECK_REJECTS(b, "section .trn.args: argument 0: name is not NUL-terminated");
  b = good;
  b[name_at + 1] = std::byte{0};
  CHECK_REJECTS(b, "argument 0: name contains a NUL byte at position 1");
  b = good;
  b[name_at + 5] = std::byte{1};
  CHECK_REJECTS(b, "argument 0: padding byte is not zero");
  b = good;
  const size_t meta = offset_of(good, ".trn.meta");
  b[meta + 48 + p.name.size()] = std::byte{'?'};
  CHECK_REJECTS(b, "section .trn.meta: kernel name is not NUL-terminated");
}

TEST_CASE("container: argument enums out of range") {
  const Bytes good = write_kernel(small_program());
  const size_t args = offset_of(good, ".trn.args");
  Bytes b = good;
  b[args + 4] = std::byte{0};
  CHECK_REJECTS(b, "section .trn.args: argument 0: unknown dtype 0");
  b[args + 4] = static_cast<std::byte>(kDTypeCount);
  CHECK_REJECTS(b, "argument 0: unknown dtype 10");
  b = good;
  b[args + 5] = std::byte{4};
  CHECK_REJECTS(b, "argument 0: unknown direction 4");
  b[args + 5] = std::byte{0};
  CHECK_REJECTS(b, "argument 0: unknown direction 0");
  b = good;
  b[args + 7] = std::byte{1};
  CHECK_REJECTS(b, "argument 0: reserved byte is 1; expected 0");
}

TEST_CASE("container: instruction enums out of range and engine/stream mismatch") {
  const Bytes good = write_kernel(small_program());
  const size_t tensor = offset_of(good, ".trn.text.tensor");
  const size_t sync = offset_of(good, ".trn.text.sync");
  Bytes b = good;
  b[tensor] = std::byte{77};
  CHECK_REJECTS(b, "instruction tensor[0]: unknown opcode 77");
  b = good;
  b[tensor + 1] = std::byte{9};
  CHECK_REJECTS(b, "instruction tensor[0]: unknown engine 9");
  b = good;
  b[sync + 1] = std::byte{static_cast<uint8_t>(Engine::kVector)};
  CHECK_REJECTS(b,
                "instruction sync[0]: engine is vector but the instruction is in the sync "
                "stream");
  b = good;
  b[tensor + 5] = std::byte{3};
  CHECK_REJECTS(b, "instruction tensor[0]: unknown semaphore wait comparison 3");
  b = good;
  b[tensor + 6] = std::byte{3};
  CHECK_REJECTS(b, "instruction tensor[0]: unknown semaphore update operation 3");
  b = good;
  b[tensor + 7] = std::byte{1};
  CHECK_REJECTS(b, "instruction tensor[0]: reserved byte 7 is not zero");
  b = good;
  b[tensor + 44] = std::byte{1};
  CHECK_REJECTS(b, "instruction tensor[0]: reserved bytes 40..47 are not zero");
  const size_t src0 = sync + 48 + 2 * kAccessPatternRecordSize;
  b = good;
  b[src0] = std::byte{4};
  CHECK_REJECTS(b, "instruction sync[0]: src0: unknown memory space 4");
  b = good;
  b[src0 + 1] = std::byte{200};
  CHECK_REJECTS(b, "instruction sync[0]: src0: unknown dtype 200");
  b = good;
  b[sync + 48 + 4 * kAccessPatternRecordSize + 4] = std::byte{5};
  CHECK_REJECTS(b, "instruction sync[0]: src2: 5 free dims; at most 4");
}

TEST_CASE("container: debug section line counts and sizes") {
  const Bytes good = write_kernel(relu_program());
  const size_t debug = offset_of(good, ".trn.debug");
  Bytes b = good;
  put_le(b, debug + 4 + 4 * static_cast<uint32_t>(Engine::kSync), 4, 3);
  CHECK_REJECTS(b, "section .trn.debug: 3 source lines for the sync stream of 2 instructions");
  b = good;
  put_le(b, debug + 4 + 4 * static_cast<uint32_t>(Engine::kSync), 4, 0);
  CHECK_REJECTS(b, "section .trn.debug: 12 bytes of line numbers; expected 4 (1 lines)");
  b = good;
  put_le(b, debug, 4, 3);
  CHECK_REJECTS(b, "section .trn.debug: source file name is not NUL-terminated");
}

TEST_CASE("container: flipping any byte never crashes the reader") {
  for (const Program &p : {small_program(), relu_program()}) {
    const Bytes good = write_kernel(p);
    size_t accepted = 0;
    for (size_t i = 0; i < good.size(); ++i) {
      Bytes b = good;
      b[i] ^= std::byte{0xFF};
      Program q;
      const auto e = read_kernel(b, q);
      if (e) {
        INFO("byte " << i);
        CHECK_FALSE(e->empty());
        continue;
      }
      ++accepted;
      // Whatever was accepted writes and reads back to the same bytes.
      const Bytes w = write_kernel(q);
      Program r;
      REQUIRE_FALSE(read_kernel(w, r));
      CHECK(write_kernel(r) == w);
      (void)validate_program(q, *isa::core_spec(isa::kDefaultGeneration));
    }
    // Fields without a structural constraint (values, strides, immediates) are accepted.
    CHECK(accepted > 0);
    CHECK(accepted < good.size());
  }
}

TEST_CASE("container: a semaphore without a wait or an update must be zero") {
  const Bytes good = write_kernel(small_program());
  const size_t sync = offset_of(good, ".trn.text.sync");  // sync[0] signals, it does not wait
  Bytes b = good;
  put_le(b, sync + 12, 2, 16);
  CHECK_REJECTS(b,
                "instruction sync[0]: wait semaphore 16 and value 0 are set without a wait "
                "comparison");
  b = good;
  put_le(b, sync + 16, 4, 3);
  CHECK_REJECTS(b, "wait semaphore 0 and value 3 are set without a wait comparison");
  const size_t tensor = offset_of(good, ".trn.text.tensor");  // tensor[0] waits, it does not signal
  b = good;
  put_le(b, tensor + 14, 2, 9);
  CHECK_REJECTS(b,
                "instruction tensor[0]: update semaphore 9 and value 0 are set without an "
                "update operation");
}

TEST_CASE("container: dims past num_dims must be zero") {
  const Bytes good = write_kernel(small_program());
  const size_t sync = offset_of(good, ".trn.text.sync");
  // sync[0] dma_copy: dst is sbuf [1 dim]; its dim 1 is the 8 bytes at 32 + 8.
  const size_t dst = sync + 48;
  REQUIRE(get_le(good, dst + 4, 4) == 1);
  Bytes b = good;
  b[dst + 40] = std::byte{1};
  CHECK_REJECTS(b,
                "instruction sync[0]: dst: dim 1 is past its 1 free dims but not zero "
                "(stride 1, count 0)");
  b = good;
  b[dst + 32 + 3 * 8 + 4] = std::byte{2};
  CHECK_REJECTS(b, "dst: dim 3 is past its 1 free dims but not zero (stride 0, count 2)");
  // An argument index that names nothing.
  b = good;
  put_le(b, dst + 2, 2, 1);
  CHECK_REJECTS(b, "instruction sync[0]: dst names argument 1, but the kernel has 1");
  put_le(b, dst + 2, 2, kConstantsArg);
  CHECK(read_error(b) == "(read succeeded)");
  // An unused operand (all zero) with a stray dim.
  b = good;
  b[sync + 48 + kAccessPatternRecordSize + 32] = std::byte{7};
  CHECK_REJECTS(b, "dst2: dim 0 is past its 0 free dims but not zero (stride 7, count 0)");
}

// What the loader accepts, trn-objdump | trn-as reproduces byte for byte: random bit flips of
// valid kernels, each either rejected (by the reader or the ISA rules) or round-tripped.
TEST_CASE("container: every bit-flipped kernel the loader accepts survives disassembly") {
  std::mt19937_64 rng(20240611);
  size_t accepted = 0, flips = 0;
  for (const Program &base : {relu_program(), small_program(), scalar_program()}) {
    const Bytes good = write_kernel(base);
    REQUIRE_FALSE(validate_program(base, *isa::core_spec(isa::kDefaultGeneration)));
    for (int i = 0; i < 2000; ++i) {
      Bytes b = good;
      const int bits = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < bits; ++k)
        b[rng() % b.size()] ^= static_cast<std::byte>(1u << (rng() % 8));
      ++flips;
      Program p;
      if (read_kernel(b, p) || validate_program(p, *isa::core_spec(isa::kDefaultGeneration)))
        continue;
      ++accepted;
      const std::string listing = disassemble(p);
      auto again = assemble(listing, "flipped.s");
      INFO("flip " << i << "\n" << listing);
      if (auto *e = std::get_if<AsmError>(&again))
        FAIL("the listing does not assemble: " << e->to_string());
      const Program &q = std::get<Program>(again);
      if (auto d = program_difference(p, q)) FAIL("the program changed: " << *d);
      const Bytes rewritten = write_kernel(q);
      size_t at = 0;
      while (at < b.size() && at < rewritten.size() && b[at] == rewritten[at]) ++at;
      INFO("the bytes differ first at " << at << " of " << b.size());
      REQUIRE(rewritten == b);
    }
  }
  INFO(accepted << " of " << flips << " flipped kernels were accepted");
  CHECK(accepted > 200);
}

// ----- scalar arguments (format version 2) ---------------------------------------------------

TEST_CASE("container: scalar arguments and the slots that read them round-trip as version 2") {
  const Program p = scalar_program();
  REQUIRE_FALSE(validate_program(p, *isa::core_spec(isa::kDefaultGeneration)));
  const Bytes b = write_kernel(p);
  CHECK(get_le(b, offset_of(b, ".trn.meta") + 4, 4) == kKernelFormatVersionScalars);
  const size_t args = offset_of(b, ".trn.args");
  CHECK(get_le(b, args + 7, 1) == 0);  // x: a tensor
  // x's record is 8 + 2 * 8 + pad8(2) bytes; alpha's kind byte follows at +7.
  CHECK(get_le(b, args + 32 + 6, 1) == 0);  // alpha: rank 0
  CHECK(get_le(b, args + 32 + 7, 1) == 1);  // alpha: a scalar
  const size_t scalar = offset_of(b, ".trn.text.scalar");
  CHECK(get_le(b, scalar + 40, 2) == 2);  // imm[0] reads argument 1 (alpha): stored as 1 + 1
  CHECK(get_le(b, scalar + 42, 2) == 0);  // imm[1] is its own value
  CHECK(get_le(b, scalar + 24, 4) == 0);  // the value of a slot that reads an argument is 0
  Program q;
  const auto err = read_kernel(b, q);
  INFO(err.value_or(""));
  REQUIRE_FALSE(err);
  check_same_program(p, q);
  CHECK_FALSE(program_difference(p, q));
  // A kernel without scalars is still version 1, byte for byte what older trn wrote.
  const Bytes plain = write_kernel(relu_program());
  CHECK(get_le(plain, offset_of(plain, ".trn.meta") + 4, 4) == kKernelFormatVersion);
}

TEST_CASE("container: malformed scalar arguments and slots are rejected with the reason") {
  const Bytes good = write_kernel(scalar_program());
  const size_t args = offset_of(good, ".trn.args");
  const size_t alpha = args + 32;  // alpha's record
  const size_t scalar = offset_of(good, ".trn.text.scalar");
  const size_t gpsimd = offset_of(good, ".trn.text.gpsimd");
  Bytes b = good;
  b[alpha + 7] = std::byte{2};
  CHECK_REJECTS(b, "section .trn.args: argument 1: unknown kind 2 (0 tensor, 1 scalar)");
  b = good;
  b[alpha + 4] = std::byte{static_cast<uint8_t>(DType::kBf16)};
  CHECK_REJECTS(b, "argument 1: scalar argument 'alpha' has dtype bf16; a scalar is f32 or i32");
  b = good;
  b[alpha + 5] = std::byte{static_cast<uint8_t>(ArgDirection::kOut)};
  CHECK_REJECTS(b, "argument 1: scalar argument 'alpha' is out; a scalar is passed in");
  b = good;
  put_le(b, scalar + 40, 2, 9);  // argument 8 of 4
  CHECK_REJECTS(b, "instruction scalar[0]: imm0 reads argument 8, but the kernel has 4");
  b = good;
  put_le(b, scalar + 40, 2, 1);  // argument 0: x, a tensor
  CHECK_REJECTS(b, "instruction scalar[0]: imm0 reads argument 0 ('x'), which is a tensor");
  b = good;
  put_le(b, scalar + 40, 2, 3);  // argument 2: n, an i32, in a float slot
  CHECK_REJECTS(b, "imm0 reads scalar argument 'n' of dtype i32; imm0 holds f32");
  b = good;
  put_le(b, gpsimd + 44, 2, 2);  // iimm[0] reads alpha, an f32
  CHECK_REJECTS(b,
                "instruction gpsimd[0]: iimm0 reads scalar argument 'alpha' of dtype f32; "
                "iimm0 holds i32");
  b = good;
  put_le(b, scalar + 24, 4, std::bit_cast<uint32_t>(2.0f));
  CHECK_REJECTS(b, "imm0 reads scalar argument 'alpha' but also holds a value; it must be 0");
  // In version 1 the kind byte and the slots are reserved.
  const Bytes old = write_kernel(small_program());
  b = old;
  b[offset_of(old, ".trn.args") + 7] = std::byte{1};
  CHECK_REJECTS(b,
                "argument 0: reserved byte is 1; expected 0 (scalar arguments need kernel "
                "format version 2)");
  b = old;
  put_le(b, offset_of(old, ".trn.text.tensor") + 40, 2, 1);
  CHECK_REJECTS(b, "instruction tensor[0]: reserved bytes 40..47 are not zero");
}

TEST_CASE("validate: scalar arguments are read only where an immediate is") {
  Program p = scalar_program();
  REQUIRE_FALSE(validate_program(p, *isa::core_spec(isa::kDefaultGeneration)));
  // A scalar is not memory: an HBM operand naming it is rejected.
  Program q = p;
  q.stream(Engine::kSync)[0].src0.arg = 1;
  auto e = validate_program(q, *isa::core_spec(isa::kDefaultGeneration));
  REQUIRE(e);
  CHECK_THAT(*e, Catch::Matchers::Contains("src0 names argument 'alpha', which is a scalar"));
  // dma_copy reads no immediate.
  q = p;
  q.stream(Engine::kSync)[0].scalar_arg[0] = 1;
  e = validate_program(q, *isa::core_spec(isa::kDefaultGeneration));
  REQUIRE(e);
  CHECK_THAT(*e, Catch::Matchers::Contains(
                     "sync[0] dma_copy: imm0 reads a scalar argument, but dma_copy does not read "
                     "imm0 as an immediate"));
  // An activation whose scale comes from a tile does not read imm0.
  q = p;
  Instruction &act = q.stream(Engine::kScalar)[0];
  act.flags |= kFlagScaleTile;
  act.src2 = sbuf(DType::kF32, 0, 128, 0, {{1, 1}});
  e = validate_program(q, *isa::core_spec(isa::kDefaultGeneration));
  REQUIRE(e);
  CHECK_THAT(*e, Catch::Matchers::Contains("imm0 reads a scalar argument, but activation"));
  // A scalar argument with a shape.
  q = p;
  q.args[1].shape = {1};
  e = validate_program(q, *isa::core_spec(isa::kDefaultGeneration));
  REQUIRE(e);
  CHECK_THAT(*e, Catch::Matchers::Contains("scalar argument 'alpha' has rank 1"));
}

// ----- several source files (format version 3) ----------------------------------------------

namespace {

// Instructions from three files: the kernel's .cpp (file 0), a helper header and this test.
Program multi_file_program() {
  ProgramBuilder b("multi_file");
  const auto x = b.arg("x", DType::kF32, {128, 64}, ArgDirection::kIn);
  b.dma_copy(Engine::kSync, 0, sbuf_tile(DType::kF32, 0, 128, 0, 64),
             hbm_tile(x, DType::kF32, 64, 0, 128, 0, 64))
      .signal_add(0)
      .at("kernels/softmax.cpp", 12);
  b.memset(Engine::kVector, sbuf_tile(DType::kF32, 0, 128, 256, 64), 1.0f)
      .wait_ge(0, 1)
      .at("kernels/help.h", 57);
  b.memset(Engine::kVector, sbuf_tile(DType::kF32, 0, 128, 512, 64), 2.0f)
      .at("kernels/softmax.cpp", 13);
  b.memset(Engine::kGpSimd, sbuf_tile(DType::kF32, 0, 128, 768, 64), 3.0f).at();
  b.memset(Engine::kGpSimd, sbuf_tile(DType::kF32, 0, 128, 1024, 64), 4.0f);
  return b.finish();
}

// The offset of the source file table in .trn.debug (version 3): after the header, file 0's
// name and the lines.
size_t file_table_offset(const Bytes &b) {
  const size_t debug = offset_of(b, ".trn.debug");
  size_t at = debug + kDebugHeaderSize + (get_le(b, debug, 4) + 1 + 3) / 4 * 4;
  for (size_t e = 0; e < kEngineCount; ++e) at += 4 * get_le(b, debug + 4 + 4 * e, 4);
  return at;
}

}  // namespace

TEST_CASE("container: a kernel of several source files round-trips as version 3") {
  const Program p = multi_file_program();
  REQUIRE(p.source_file == "kernels/softmax.cpp");
  REQUIRE(p.source_files.size() == 2);
  CHECK(p.source_files[0] == "kernels/help.h");
  CHECK_THAT(p.source_files[1], Catch::Matchers::EndsWith("test_container.cpp"));
  CHECK(source_location_text(p, Engine::kVector, 0) == "kernels/help.h:57");
  CHECK(source_location_text(p, Engine::kVector, 1) == "kernels/softmax.cpp:13");
  CHECK(source_location_text(p, Engine::kGpSimd, 1).empty());
  const Bytes b = write_kernel(p);
  CHECK(get_le(b, offset_of(b, ".trn.meta") + 4, 4) == kKernelFormatVersionFiles);
  Program q;
  const auto err = read_kernel(b, q);
  INFO(err.value_or(""));
  REQUIRE_FALSE(err);
  check_same_program(p, q);
  const auto diff = program_difference(p, q);
  CHECK_FALSE(diff);
  if (diff) WARN(*diff);
  CHECK(write_kernel(q) == b);
  CHECK(source_location_text(q, Engine::kSync, 0) == "kernels/softmax.cpp:12");
  CHECK(source_location_text(q, Engine::kVector, 0) == "kernels/help.h:57");
  CHECK_FALSE(validate_program(q, *isa::core_spec(isa::kDefaultGeneration)));

  // Through the text form too, byte for byte.
  const std::string text = disassemble(q);
  auto r = assemble(text, "multi.s");
  REQUIRE(std::holds_alternative<Program>(r));
  CHECK(write_kernel(std::get<Program>(r)) == b);

  // A file id of one program differs from another's.
  Program other = q;
  other.source_file_ids[static_cast<uint32_t>(Engine::kVector)][0] = 0;
  REQUIRE(program_difference(q, other));
  CHECK_THAT(*program_difference(q, other), Catch::Matchers::Contains("vector[0] source file id"));
}

TEST_CASE("container: a kernel of one source file stays as it was") {
  // at() with one file is .line() with that file as source_file: the same bytes, version 1.
  ProgramBuilder a("one_file");
  a.memset(Engine::kVector, sbuf_tile(DType::kF32, 0, 128, 0, 64), 1.0f).at("k.cpp", 3);
  a.memset(Engine::kVector, sbuf_tile(DType::kF32, 0, 128, 64, 64), 2.0f).at("k.cpp", 4);
  ProgramBuilder l("one_file");
  l.memset(Engine::kVector, sbuf_tile(DType::kF32, 0, 128, 0, 64), 1.0f).line(3);
  l.memset(Engine::kVector, sbuf_tile(DType::kF32, 0, 128, 64, 64), 2.0f).line(4);
  Program lp = l.finish();
  lp.source_file = "k.cpp";
  const Program ap = a.finish();
  CHECK(ap.source_files.empty());
  const Bytes b = write_kernel(ap);
  CHECK(b == write_kernel(lp));
  CHECK(get_le(b, offset_of(b, ".trn.meta") + 4, 4) == kKernelFormatVersion);
  CHECK(source_location_text(ap, Engine::kVector, 1) == "k.cpp:4");
}

TEST_CASE("container: a malformed source file table is rejected with the reason") {
  const Bytes good = write_kernel(multi_file_program());
  REQUIRE(read_error(good) == "(read succeeded)");
  const size_t table = file_table_offset(good);
  REQUIRE(get_le(good, table, 4) == 2);
  REQUIRE(get_le(good, table + 4, 4) == 14);  // "kernels/help.h": 14 bytes, NUL, 1 padding byte
  const size_t ids = offset_of(good, ".trn.debug") + size_of(good, ".trn.debug") - 4 * 5;
  Bytes b = good;
  put_le(b, table, 4, 0);
  CHECK_REJECTS(b,
                "section .trn.debug: the source file table is empty; a kernel with one source "
                "file is stored as version 1 or 2");
  b = good;
  put_le(b, table, 4, 1000);
  CHECK_REJECTS(b, "cannot hold 1000 source files");
  b = good;
  put_le(b, table, 4, 70000);
  CHECK_REJECTS(b, "section .trn.debug: 70000 source files; at most 65535");
  b = good;
  put_le(b, table, 4, 1);
  CHECK_REJECTS(b, "bytes of source file ids; expected 20 (one per line, 5 lines)");
  b = good;
  put_le(b, table + 4, 4, 0);
  CHECK_REJECTS(b, "section .trn.debug: source file 1: the name is empty");
  b = good;
  put_le(b, table + 4, 4, 4000);
  CHECK_REJECTS(b,
                "section .trn.debug: source file 1 name (4000 bytes and its NUL) runs past the "
                "end of the section");
  b = good;
  put_le(b, table + 4, 4, 5000);
  CHECK_REJECTS(b, "source file 1 name is 5000 bytes long; at most 4096");
  b = good;
  put_le(b, table + 4, 4, 13);
  CHECK_REJECTS(b, "source file 1 name is not NUL-terminated");
  b = good;
  b.at(table + 8 + 3) = std::byte{0};
  CHECK_REJECTS(b, "source file 1 name contains a NUL byte at position 3");
  b = good;
  b.at(table + 8 + 15) = std::byte{1};
  CHECK_REJECTS(b, "section .trn.debug: source file 1: padding byte is not zero");
  // File ids, engine by engine: vector[0], vector[1], gpsimd[0], gpsimd[1], sync[0].
  REQUIRE(get_le(good, ids, 4) == 1);
  REQUIRE(get_le(good, ids + 8, 4) == 2);
  b = good;
  put_le(b, ids, 4, 9);
  CHECK_REJECTS(b,
                "section .trn.debug: source file id 9 of vector[0] is out of range (files 0..2)");
  b = good;
  put_le(b, ids + 12, 4, 3);
  CHECK_REJECTS(b, "source file id 3 of gpsimd[1] is out of range (files 0..2)");
  // A version 1 or 2 reader's view: bytes after the lines.
  b = good;
  put_le(b, offset_of(b, ".trn.meta") + 4, 4, 1);
  CHECK_REJECTS(b, "section .trn.debug: ");
  CHECK_REJECTS(b, "bytes of line numbers; expected 20 (5 lines)");
  // Version 3 with nothing after the lines.
  Program one = multi_file_program();
  one.source_files.clear();
  for (auto &v : one.source_file_ids) v.clear();
  b = write_kernel(one);
  put_le(b, offset_of(b, ".trn.meta") + 4, 4, 3);
  CHECK_REJECTS(b,
                "section .trn.debug: 0 bytes after the line numbers; expected the source file "
                "count (format version 3)");
}

TEST_CASE("builder: at() without arguments records the call site") {
  ProgramBuilder b("here");
  const auto line = static_cast<uint32_t>(__LINE__ + 1);
  b.memset(Engine::kVector, sbuf_tile(DType::kF32, 0, 128, 0, 64), 1.0f).at();
  const Program p = b.finish();
  CHECK_THAT(p.source_file, Catch::Matchers::EndsWith("test_container.cpp"));
  CHECK(p.source_lines[static_cast<uint32_t>(Engine::kVector)] == std::vector<uint32_t>{line});
#if defined(__cpp_lib_source_location)
  ProgramBuilder c("given");
  const std::source_location loc = std::source_location::current();
  c.memset(Engine::kVector, sbuf_tile(DType::kF32, 0, 128, 0, 64), 1.0f).at(loc);
  const Program q = c.finish();
  CHECK(q.source_file == loc.file_name());
  CHECK(q.source_lines[static_cast<uint32_t>(Engine::kVector)] ==
        std::vector<uint32_t>{static_cast<uint32_t>(loc.line())});
#endif
}
