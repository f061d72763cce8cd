// The program container: round trips of every field, deterministic bytes, and a specific reason
// for every class of malformed input, from images that are wrong in the model (the writer does
// not check) or patched at offsets the layout at the top of program_container.cpp gives (the
// reader is also fuzzed: fuzz/fuzz_program_loader.cpp).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "elf_bytes.hpp"
#include "isa/builder.hpp"
#include "isa/container.hpp"
#include "isa/elf_file.hpp"
#include "isa/program_container.hpp"

using namespace trn;
using namespace trn::isa;
using namespace trn::test;

namespace {

// out = x * alpha: a tensor input, a scalar and a tensor output, in that order.
Program scale_kernel() {
  ProgramBuilder b("scale");
  const auto x = b.arg("x", DType::kF32, {4, 8}, ArgDirection::kIn);
  const auto alpha = b.scalar_arg("alpha", DType::kF32);
  const auto o = b.arg("out", DType::kF32, {4, 8}, ArgDirection::kOut);
  b.dma_copy(Engine::kSync, 0, sbuf_tile(DType::kF32, 0, 4, 0, 8),
             hbm_tile(x, DType::kF32, 8, 0, 4, 0, 8))
      .signal_add(0);
  b.activation(sbuf_tile(DType::kF32, 0, 4, 64, 8), sbuf_tile(DType::kF32, 0, 4, 0, 8),
               ActFunc::kIdentity)
      .read_scalar(ImmSlot::kImm0, alpha)
      .wait_ge(0, 1)
      .signal_add(1);
  b.dma_copy(Engine::kSync, 0, hbm_tile(o, DType::kF32, 8, 0, 4, 0, 8),
             sbuf_tile(DType::kF32, 0, 4, 64, 8))
      .wait_ge(1, 1);
  return b.finish();
}

// One inout argument, updated in place.
Program bump_kernel() {
  ProgramBuilder b("bump");
  const auto io = b.arg("io", DType::kU8, {64}, ArgDirection::kInOut);
  b.memset(Engine::kVector, sbuf_tile(DType::kU8, 0, 1, 0, 64), 1.0f).signal_add(0);
  b.dma_copy(Engine::kSync, 0, hbm_tile(io, DType::kU8, 64, 0, 1, 0, 64),
             sbuf_tile(DType::kU8, 0, 1, 0, 64))
      .wait_ge(0, 1);
  return b.finish();
}

std::vector<std::byte> pattern_bytes(size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(i * seed + 1);
  return v;
}

StepArg tensor_arg(uint32_t tensor, uint64_t offset) {
  return {false, {tensor, offset}, 0};
}
StepArg scalar_bits(uint32_t bits) {
  return {true, {}, bits};
}

// Every role, step kind and binding kind; constants with padding after one of them.
// The byte offsets the tests patch follow from this layout (checked in the layout test):
//   .trn.program  40 bytes: header 32, "prog" + NUL + 3 padding
//   .trn.tensors  records at 0 (in/x), 40 (w), 80 (b), 112 (tmp), 160 (out:y), 200 (state-1),
//                 232 (k.v); 264 bytes
//   .trn.data     w 0..128, b 128..131, padding to 136, k.v 136..144
//   .trn.steps    records at 0 (launch, 3 args), 72 (copy, 1 dep), 136 (memset, 2 deps),
//                 192 (launch, 1 arg, 1 dep), 240 (copy); 296 bytes
ProgramImage sample() {
  ProgramImage p;
  p.name = "prog";
  p.kernels = {write_kernel(scale_kernel()), write_kernel(bump_kernel())};
  p.tensors = {
      {"in/x", TensorRole::kInput, DType::kF32, {4, 8}, {}, {}, {}},
      {"w", TensorRole::kConstant, DType::kF32, {4, 8}, pattern_bytes(128, 7), {}, {}},
      {"b", TensorRole::kConstant, DType::kU8, {3}, pattern_bytes(3, 11), {}, {}},
      {"tmp", TensorRole::kInternal, DType::kF32, {2, 4, 8}, {}, {}, {}},
      {"out:y", TensorRole::kOutput, DType::kF32, {4, 8}, {}, {}, {}},
      {"state-1", TensorRole::kInOut, DType::kU8, {64}, {}, {}, {}},
      {"k.v", TensorRole::kConstant, DType::kI32, {2}, pattern_bytes(8, 13), {}, {}},
  };
  ProgramStep scale;
  scale.args = {tensor_arg(0, 0), scalar_bits(0x3FC00000u), tensor_arg(3, 128)};
  ProgramStep copy;
  copy.kind = StepKind::kCopy;
  copy.core = 1;
  copy.deps = {0};
  copy.dst = {4, 0};
  copy.src = {3, 128};
  copy.bytes = 128;
  ProgramStep memset;
  memset.kind = StepKind::kMemset;
  memset.core = kMaxProgramCores - 1;
  memset.deps = {0, 1};
  memset.dst = {5, 8};
  memset.bytes = 16;
  memset.value = 0xAB;
  ProgramStep bump;
  bump.kernel = 1;
  bump.core = 2;
  bump.deps = {2};
  bump.args = {tensor_arg(5, 0)};
  ProgramStep from_constant;
  from_constant.kind = StepKind::kCopy;
  from_constant.dst = {3, 0};
  from_constant.src = {1, 0};
  from_constant.bytes = 128;
  p.steps = {scale, copy, memset, bump, from_constant};
  return p;
}

std::string read_error(const Bytes &b) {
  ProgramImage p;
  const auto e = read_program(b, p);
  return e ? *e : std::string("(read succeeded)");
}

// The image, with `section`'s bytes replaced by `data` (the ELF wrapping rewritten around it).
Bytes with_section(const Bytes &good, std::string_view section, const Bytes &data) {
  std::vector<ElfSectionIn> in;
  REQUIRE_FALSE(read_elf(good, kElfTypeTrnProgram, "a trn program", in));
  std::vector<ElfSectionOut> out;
  for (const ElfSectionIn &s : in)
    out.push_back(
        {s.name, s.entsize, s.name == section ? data : Bytes(s.data.begin(), s.data.end())});
  return write_elf(kElfTypeTrnProgram, out);
}

Bytes section_bytes(const Bytes &b, const std::string &name) {
  const size_t at = offset_of(b, name);
  return Bytes(b.begin() + static_cast<ptrdiff_t>(at),
               b.begin() + static_cast<ptrdiff_t>(at + size_of(b, name)));
}

}  // namespace

// ----- round trips ---------------------------------------------------------------------------

TEST_CASE("program container: every field round-trips") {
  const ProgramImage p = sample();
  const Bytes bytes = write_program(p);
  ProgramImage q;
  std::vector<Program> kernels;
  const auto err = read_program(bytes, q, &kernels);
  INFO(err.value_or(""));
  REQUIRE_FALSE(err);
  CHECK(q.name == p.name);
  CHECK(q.kernels == p.kernels);
  REQUIRE(q.tensors.size() == p.tensors.size());
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    INFO("tensor " << i);
    CHECK(q.tensors[i].name == p.tensors[i].name);
    CHECK(q.tensors[i].role == p.tensors[i].role);
    CHECK(q.tensors[i].dtype == p.tensors[i].dtype);
    CHECK(q.tensors[i].shape == p.tensors[i].shape);
    CHECK(q.tensors[i].data == p.tensors[i].data);
  }
  REQUIRE(q.steps.size() == p.steps.size());
  for (size_t i = 0; i < p.steps.size(); ++i) {
    INFO("step " << i);
    const ProgramStep &a = p.steps[i], &b = q.steps[i];
    CHECK(b.kind == a.kind);
    CHECK(b.core == a.core);
    CHECK(b.deps == a.deps);
    CHECK(b.kernel == a.kernel);
    CHECK(b.args == a.args);
    CHECK(b.dst == a.dst);
    CHECK(b.src == a.src);
    CHECK(b.bytes == a.bytes);
    CHECK(b.value == a.value);
  }
  CHECK(q == p);
  CHECK(q.steps[0].args[1].scalar);
  CHECK(q.steps[0].args[1].scalar_bits == 0x3FC00000u);
  CHECK(q.tensors[6].data == pattern_bytes(8, 13));
  CHECK(write_program(q) == bytes);

  // The kernels come back decoded too.
  REQUIRE(kernels.size() == 2);
  CHECK(kernels[0].name == "scale");
  CHECK(kernels[1].name == "bump");
  CHECK(kernels[0].args.size() == 3);
  CHECK(kernels[0].args[1].is_scalar());
}

TEST_CASE("program container: an empty program round-trips") {
  const ProgramImage empty;
  const Bytes b = write_program(empty);
  ProgramImage q = sample();  // reading replaces what was there
  REQUIRE_FALSE(read_program(b, q));
  CHECK(q == empty);
  CHECK(write_program(q) == b);
}

TEST_CASE("program container: writing is deterministic and the layout is the documented one") {
  const ProgramImage p = sample();
  const Bytes a = write_program(p);
  const ProgramImage copy = p;
  CHECK(write_program(copy) == a);
  CHECK(write_program(sample()) == a);
  CHECK(a.size() % 8 == 0);
  CHECK(get_le(a, 0, 4) == 0x464C457Fu);
  CHECK(get_le(a, 16, 2) == kElfTypeTrnProgram);
  CHECK(get_le(a, 18, 2) == kElfMachineTrn);
  CHECK(shnum(a) == 7);  // null, five sections, .shstrtab
  CHECK(size_of(a, ".trn.program") == 40);
  CHECK(size_of(a, ".trn.tensors") == 264);
  CHECK(size_of(a, ".trn.data") == 144);
  CHECK(size_of(a, ".trn.steps") == 296);
  const size_t meta = offset_of(a, ".trn.program");
  CHECK(get_le(a, meta, 4) == kProgramMagic);
  CHECK(get_le(a, meta + 4, 4) == kProgramFormatVersion);
  CHECK(get_le(a, meta + 8, 4) == 2);
  CHECK(get_le(a, meta + 12, 4) == 7);
  CHECK(get_le(a, meta + 16, 4) == 5);
  const size_t tensors = offset_of(a, ".trn.tensors");
  CHECK(get_le(a, tensors + 80 + 8, 8) == 128);   // b's data offset
  CHECK(get_le(a, tensors + 232 + 8, 8) == 136);  // k.v's, after b's padding
  const size_t steps = offset_of(a, ".trn.steps");
  const std::pair<size_t, uint64_t> kinds[] = {{0, 1}, {72, 2}, {136, 3}, {192, 1}, {240, 2}};
  for (const auto &[at, kind] : kinds) CHECK(get_le(a, steps + at, 1) == kind);
  CHECK(get_le(a, steps + 136 + 1, 1) == 0xAB);  // the memset's value
}

TEST_CASE("program container: looks_like_program tells programs from kernels") {
  CHECK(looks_like_program(write_program(sample())));
  CHECK(looks_like_program(write_program(ProgramImage{})));
  const Bytes kernel = write_kernel(scale_kernel());
  CHECK_FALSE(looks_like_program(kernel));
  CHECK_FALSE(looks_like_program(std::span<const std::byte>{}));
  const Bytes p = write_program(sample());
  CHECK_FALSE(looks_like_program(std::span(p).first(63)));
}

// ----- malformed files -----------------------------------------------------------------------

TEST_CASE("program container: a kernel is not a program, and says so") {
  CHECK_REJECTS(write_kernel(scale_kernel()), "this is a kernel");
  CHECK_REJECTS(Bytes(10), "file is 10 bytes; an ELF64 header alone is 64");
  Bytes b = write_program(sample());
  b[0] = std::byte{0};
  CHECK_REJECTS(b, "not an ELF file");
}

TEST_CASE("program container: every truncation is rejected") {
  const Bytes b = write_program(sample());
  for (size_t n = 0; n < b.size(); ++n) {
    INFO("length " << n);
    ProgramImage p;
    const auto e = read_program(std::span(b).first(n), p);
    REQUIRE(e);
    CHECK_FALSE(e->empty());
  }
  Bytes longer = b;
  longer.push_back(std::byte{0});
  CHECK_REJECTS(longer, "does not end the");
}

TEST_CASE("program container: flipping any byte is rejected or reads back self-consistently") {
  const Bytes good = write_program(sample());
  size_t accepted = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    INFO("byte " << i);
    Bytes b = good;
    b[i] ^= std::byte{0xFF};
    ProgramImage q;
    if (const auto e = read_program(b, q)) {
      CHECK_FALSE(e->empty());
      continue;
    }
    ++accepted;
    // The reader takes only the writer's layout: what it accepts is what the writer writes.
    const Bytes w = write_program(q);
    CHECK(w == b);
    ProgramImage r;
    REQUIRE_FALSE(read_program(w, r));
    CHECK(r == q);
  }
  // Values without a structural constraint (constants' bytes, scalars, memset value) pass.
  CHECK(accepted > 0);
  CHECK(accepted < good.size());
}

TEST_CASE("program container: the header's magic, version, counts and padding") {
  const Bytes good = write_program(sample());
  const size_t meta = offset_of(good, ".trn.program");
  Bytes b = good;
  put_le(b, meta, 4, 0x4B4E5254);  // "TRNK"
  CHECK_REJECTS(b, "section .trn.program: magic 0x4b4e5254 is not \"TRNP\"");
  b = good;
  put_le(b, meta + 4, 4, 3);
  CHECK_REJECTS(b, "format version 3; this trn reads versions 1 and 2");
  b = good;  // version 2 is for programs with constants from files
  put_le(b, meta + 4, 4, 2);
  CHECK_REJECTS(b, "format version 2 without constants from files");
  b = good;
  put_le(b, meta + 24, 8, 1);
  CHECK_REJECTS(b, "section .trn.program: reserved field is not zero");
  b = good;
  put_le(b, meta + 8, 4, kMaxProgramKernels + 1);
  CHECK_REJECTS(b, "65536 kernels, 7 tensors, 5 steps; at most 65535");
  b = good;
  put_le(b, meta + 8, 4, 3);
  CHECK_REJECTS(b, "section .trn.kernels: kernel 2: its size runs past the end");
  b = good;
  put_le(b, meta + 12, 4, 8);
  CHECK_REJECTS(b, "section .trn.tensors: tensor 7: record runs past the end");
  b = good;
  put_le(b, meta + 16, 4, 6);
  CHECK_REJECTS(b, "section .trn.steps: step 5: record runs past the end");
  b = good;
  put_le(b, meta + 20, 4, 64);
  CHECK_REJECTS(b, "program name is 64 bytes long; at most 63");
  b = good;
  put_le(b, meta + 20, 4, 3);
  CHECK_REJECTS(b, "program name is not NUL-terminated");
  b = good;
  put_le(b, meta + 38, 1, 1);
  CHECK_REJECTS(b, "section .trn.program: program name: padding byte is not zero");
}

TEST_CASE("program container: sections other than the five, in another order or with more") {
  const Bytes good = write_program(sample());
  std::vector<ElfSectionIn> in;
  REQUIRE_FALSE(read_elf(good, kElfTypeTrnProgram, "a trn program", in));
  std::vector<ElfSectionOut> out;
  for (const ElfSectionIn &s : in)
    out.push_back({s.name, s.entsize, Bytes(s.data.begin(), s.data.end())});

  auto swapped = out;
  std::swap(swapped[1], swapped[2]);
  CHECK_REJECTS(write_elf(kElfTypeTrnProgram, swapped),
                "section 2 is '.trn.steps'; expected .trn.tensors");
  auto more = out;
  more.push_back({".trn.extra", 0, {}});
  CHECK_REJECTS(write_elf(kElfTypeTrnProgram, more), "6 sections besides .shstrtab");
  auto entsize = out;
  entsize[3].entsize = 8;
  CHECK_REJECTS(write_elf(kElfTypeTrnProgram, entsize),
                "section .trn.kernels: entry size 8; expected 0");

  Bytes meta = section_bytes(good, ".trn.program");
  meta.resize(meta.size() + 8, std::byte{0});
  CHECK_REJECTS(with_section(good, ".trn.program", meta),
                "section .trn.program: 8 bytes after the last record");
  Bytes steps = section_bytes(good, ".trn.steps");
  steps.resize(steps.size() + 8, std::byte{0});
  CHECK_REJECTS(with_section(good, ".trn.steps", steps),
                "section .trn.steps: 8 bytes after the last record");
  Bytes data = section_bytes(good, ".trn.data");
  data.resize(data.size() + 8, std::byte{0});
  CHECK_REJECTS(with_section(good, ".trn.data", data),
                "section .trn.data: 8 bytes after the last constant");
  CHECK_REJECTS(with_section(good, ".trn.program", Bytes(16)),
                "section .trn.program: 16 bytes; the header alone is 32");
}

TEST_CASE("program container: a kernel inside that is not a kernel container") {
  const Bytes good = write_program(sample());
  const size_t kernels = offset_of(good, ".trn.kernels");
  Bytes b = good;
  put_le(b, kernels + 8, 1, 0);  // kernel 0's ELF magic, after its size
  CHECK_REJECTS(b, "section .trn.kernels: kernel 0: not an ELF file");
  b = good;
  put_le(b, kernels, 8, get_le(good, kernels, 8) + 1);
  CHECK_REJECTS(b, "section .trn.kernels: kernel 0:");
  b = good;
  put_le(b, kernels, 8, ~uint64_t{0});
  CHECK_REJECTS(b, "kernel 0: 18446744073709551615 bytes run past the end");

  // A program's own image is not a kernel container either.
  ProgramImage p = sample();
  p.kernels[1] = write_program(ProgramImage{});
  CHECK_REJECTS(write_program(p), "section .trn.kernels: kernel 1: ELF type 0xfe50");
}

TEST_CASE("program container: tensor names") {
  ProgramImage p = sample();
  p.tensors[4].name = "in/x";
  CHECK_REJECTS(write_program(p),
                "section .trn.tensors: tensor 4: a tensor named 'in/x' comes before it");
  for (const char *bad : {"bad name", "a\tb", "x,y", "caf\xc3\xa9", "q\"", "a\\b"}) {
    INFO(bad);
    p = sample();
    p.tensors[3].name = bad;
    CHECK_REJECTS(write_program(p), fmt::format("tensor 3 name '{}' has a character outside "
                                                "[A-Za-z0-9_.:/-]",
                                                bad));
  }
  p = sample();
  p.tensors[3].name = "";
  CHECK_REJECTS(write_program(p), "tensor 3 has no name");
  p.tensors[3].name = std::string(kMaxTensorNameLength + 1, 'n');
  CHECK_REJECTS(write_program(p), "tensor 3 name is 64 bytes long; at most 63");
  p.tensors[3].name = std::string(kMaxTensorNameLength, 'n');
  ProgramImage q;
  CHECK_FALSE(read_program(write_program(p), q));
  p.tensors[3].name = std::string("a\0b", 3);
  CHECK_REJECTS(write_program(p), "tensor 3 name contains a NUL byte at position 1");
}

TEST_CASE("program container: tensor roles, dtypes, ranks and shapes") {
  const Bytes good = write_program(sample());
  const size_t t2 = offset_of(good, ".trn.tensors") + 80;  // tensor 2 ('b', rank 1)
  for (uint64_t role : {0, 6, 255}) {
    Bytes b = good;
    put_le(b, t2 + 4, 1, role);
    CHECK_REJECTS(b, fmt::format("tensor 2: role {} is not 1 (input) .. 5 (internal)", role));
  }
  Bytes b = good;
  put_le(b, t2 + 5, 1, 200);
  CHECK_REJECTS(b, "tensor 2: dtype 200 is not a trn dtype");
  for (uint64_t rank : {uint64_t{0}, uint64_t{kMaxArgRank + 1}}) {
    b = good;
    put_le(b, t2 + 6, 1, rank);
    CHECK_REJECTS(
        b, fmt::format("tensor 2: rank {}; a tensor has 1 to {} dimensions", rank, kMaxArgRank));
  }

  ProgramImage p = sample();
  p.tensors[3].shape = {4, 0, 8};
  CHECK_REJECTS(write_program(p), "tensor 3: dimension 1 is 0");
  p.tensors[3].shape = {uint64_t{1} << 18, uint64_t{1} << 20, 2};  // 2 TiB of f32
  CHECK_REJECTS(write_program(p), "tensor 3: dimension 2 is 2; tensors are 1 byte to 1 TiB");
  p.tensors[3].shape = {~uint64_t{0}};
  CHECK_REJECTS(write_program(p), "tensor 3: dimension 0 is 18446744073709551615");
  p.tensors[3].shape = {uint64_t{1} << 38, 4};  // 4 TiB of f32
  CHECK_REJECTS(write_program(p), "tensor 3: dimension 1 is 4");
  p.tensors[3].dtype = DType::kU8;
  p.tensors[3].shape = {uint64_t{1} << 40};  // 1 TiB of bytes: the largest there may be
  ProgramImage q;
  CHECK_FALSE(read_program(write_program(p), q));
}

TEST_CASE("program container: constants' data") {
  const Bytes good = write_program(sample());
  const size_t tensors = offset_of(good, ".trn.tensors");
  const size_t data = offset_of(good, ".trn.data");
  Bytes b = good;
  put_le(b, tensors + 80 + 8, 8, 132);  // b's data, not at the 8-aligned offset after w's
  CHECK_REJECTS(b,
                "section .trn.tensors: tensor 2 ('b'): its data is at offset 132 of .trn.data; "
                "the next constant's is at 128");
  b = good;
  put_le(b, tensors + 80 + 8, 8, 0);  // overlapping w's
  CHECK_REJECTS(b, "tensor 2 ('b'): its data is at offset 0 of .trn.data");
  b = good;
  put_le(b, tensors + 8, 8, 8);  // in/x is an input
  CHECK_REJECTS(b, "tensor 0 ('in/x', input): data offset 8; only constants have data");
  b = good;
  put_le(b, data + 131, 1, 0x5A);
  CHECK_REJECTS(b, "section .trn.data: padding byte 131 is not zero");

  // Data of the wrong size shifts the next constant or runs off the section.
  ProgramImage p = sample();
  p.tensors[1].data.resize(120);
  CHECK_REJECTS(write_program(p),
                "tensor 2 ('b'): its data is at offset 120 of .trn.data; "
                "the next constant's is at 128");
  p = sample();
  p.tensors[6].shape = {4};  // 16 bytes, of which the data has 8
  CHECK_REJECTS(write_program(p), "tensor 6 ('k.v'): its 16 bytes run past the end of .trn.data");
  p = sample();
  p.tensors[6].data.resize(16);
  CHECK_REJECTS(write_program(p), "section .trn.data: 8 bytes after the last constant");
  // The last constant's padding must be in the section too.
  ProgramImage odd = sample();
  odd.tensors[6].dtype = DType::kU8;
  odd.tensors[6].shape = {5};
  odd.tensors[6].data.resize(5);
  const Bytes o = write_program(odd);
  Bytes d = section_bytes(o, ".trn.data");
  d.resize(d.size() - 3);
  CHECK_REJECTS(with_section(o, ".trn.data", d),
                "section .trn.data: padding after tensor 'k.v' runs past the end");
}

TEST_CASE("program container: reserved fields and padding of tensors and steps") {
  const Bytes good = write_program(sample());
  const size_t tensors = offset_of(good, ".trn.tensors");
  const size_t steps = offset_of(good, ".trn.steps");
  Bytes b = good;
  put_le(b, tensors + 80 + 7, 1, 1);
  CHECK_REJECTS(b, "section .trn.tensors: tensor 2: reserved byte is not zero");
  b = good;
  put_le(b, tensors + 80 + 24 + 2 + 1, 1, 1);  // after "b" and its NUL
  CHECK_REJECTS(b, "section .trn.tensors: tensor 2: padding byte is not zero");
  b = good;
  put_le(b, steps + 72 + 2, 2, 1);
  CHECK_REJECTS(b, "section .trn.steps: step 1: reserved field is not zero");
  b = good;
  put_le(b, steps + 72 + 20, 4, 1);
  CHECK_REJECTS(b, "section .trn.steps: step 1: reserved field is not zero");
  b = good;
  put_le(b, steps + 136 + 24 + 4, 4, 1);
  CHECK_REJECTS(b, "section .trn.steps: step 2 (memset): reserved field is not zero");
  b = good;
  put_le(b, steps + 72 + 24 + 32 + 4, 1, 1);  // after step 1's one dependency
  CHECK_REJECTS(b, "section .trn.steps: step 1: padding byte is not zero");
  b = good;
  put_le(b, steps + 24 + 16 + 8, 8, 1);  // the offset field of the scalar argument
  CHECK_REJECTS(b,
                "step 0 (launch of kernel 'scale'): argument 'alpha': a scalar's offset "
                "field must be 0");
  b = good;
  put_le(b, steps + 72 + 1, 1, 7);
  CHECK_REJECTS(b, "step 1 (copy): value must be 0");
  b = good;
  put_le(b, steps + 192 + 1, 1, 7);
  CHECK_REJECTS(b, "step 3 (launch): value must be 0");
  b = good;
  put_le(b, steps + 72 + 16, 4, 1);
  CHECK_REJECTS(b, "step 1 (copy): argument count and kernel must be 0");
  b = good;
  put_le(b, steps + 136 + 12, 4, 1);
  CHECK_REJECTS(b, "step 2 (memset): argument count and kernel must be 0");
}

TEST_CASE("program container: step kinds, cores and dependencies") {
  const Bytes good = write_program(sample());
  const size_t steps = offset_of(good, ".trn.steps");
  for (uint64_t kind : {0, 4}) {
    Bytes b = good;
    put_le(b, steps + 72, 1, kind);
    CHECK_REJECTS(b,
                  fmt::format("step 1: kind {} is not 1 (launch), 2 (copy) or 3 (memset)", kind));
  }
  Bytes b = good;
  put_le(b, steps + 72 + 8, 4, kMaxStepDependencies + 1);
  CHECK_REJECTS(b, "step 1: 65536 dependencies run past the end");

  ProgramImage p = sample();
  p.steps[1].core = kMaxProgramCores;
  CHECK_REJECTS(write_program(p), "section .trn.steps: step 1: core 64; at most 63");
  p.steps[1].core = ~uint32_t{0};
  CHECK_REJECTS(write_program(p), "step 1: core 4294967295; at most 63");

  const std::pair<std::vector<uint32_t>, uint32_t> bad_deps[] = {
      {{1, 0}, 0}, {{0, 0}, 0}, {{2}, 2}, {{0, 3}, 3}, {{~uint32_t{0}}, ~uint32_t{0}}};
  for (const auto &[deps, named] : bad_deps) {
    p = sample();
    p.steps[2].deps = deps;
    CHECK_REJECTS(write_program(p),
                  fmt::format("section .trn.steps: step 2: dependency {} is not an earlier step "
                              "in ascending order",
                              named));
  }
  p = sample();
  p.steps[0].deps = {0};
  CHECK_REJECTS(write_program(p), "step 0: dependency 0 is not an earlier step");
  p = sample();
  p.steps[4].deps = {0, 1, 2, 3};
  ProgramImage q;
  CHECK_FALSE(read_program(write_program(p), q));
}

TEST_CASE("program container: launches bind every argument by its kind and size") {
  ProgramImage p = sample();
  p.steps[0].args.pop_back();
  CHECK_REJECTS(write_program(p),
                "section .trn.steps: step 0 (launch of kernel 'scale'): 2 arguments; the kernel "
                "takes 3");
  p.steps[0].args = {};
  CHECK_REJECTS(write_program(p), "step 0 (launch of kernel 'scale'): 0 arguments");
  p = sample();
  p.steps[3].args.push_back(tensor_arg(5, 0));
  CHECK_REJECTS(write_program(p),
                "step 3 (launch of kernel 'bump'): 2 arguments; the kernel "
                "takes 1");
  p = sample();
  p.steps[0].kernel = 2;
  CHECK_REJECTS(write_program(p), "step 0 launches kernel 2; the program has 2");

  p = sample();
  p.steps[0].args[1] = tensor_arg(0, 0);
  CHECK_REJECTS(write_program(p), "argument 'alpha' is a scalar argument but bound as a tensor");
  p = sample();
  p.steps[0].args[0] = scalar_bits(1);
  CHECK_REJECTS(write_program(p), "argument 'x' is a tensor argument but bound as a scalar");
  const Bytes good = write_program(sample());
  Bytes b = good;
  put_le(b, offset_of(good, ".trn.steps") + 24, 4, 3);
  CHECK_REJECTS(b, "argument 'x': binding kind 3 is not 1 (tensor) or 2 (scalar)");

  // Ranges: the kernel argument's bytes from the offset, inside the tensor.
  p = sample();
  p.steps[0].args[2] = tensor_arg(3, 129);
  CHECK_REJECTS(write_program(p),
                "step 0 (launch of kernel 'scale'): argument 'out': bytes 129..257 of tensor "
                "'tmp' are outside its 256 bytes");
  p.steps[0].args[2] = tensor_arg(3, ~uint64_t{0});
  CHECK_REJECTS(write_program(p), "argument 'out': bytes 18446744073709551615..");
  p.steps[0].args[2] = tensor_arg(3, 128);
  p.steps[0].args[0] = tensor_arg(2, 0);  // 3 bytes for a 128-byte argument
  CHECK_REJECTS(write_program(p), "argument 'x': bytes 0..128 of tensor 'b' are outside its 3");
  p.steps[0].args[0] = tensor_arg(7, 0);
  CHECK_REJECTS(write_program(p), "argument 'x' names tensor 7; the program has 7");
  // Reading a constant or an output is fine; the argument's bytes are what is checked.
  p.steps[0].args[0] = tensor_arg(1, 0);
  ProgramImage q;
  CHECK_FALSE(read_program(write_program(p), q));
  p.steps[0].args[0] = tensor_arg(4, 0);
  CHECK_FALSE(read_program(write_program(p), q));
}

TEST_CASE("program container: nothing writes an input or a constant") {
  ProgramImage p = sample();
  p.steps[0].args[2] = tensor_arg(1, 0);
  CHECK_REJECTS(write_program(p),
                "section .trn.steps: step 0 (launch of kernel 'scale'): argument 'out' writes "
                "constant tensor 'w', which the program only reads");
  p.steps[0].args[2] = tensor_arg(0, 0);
  CHECK_REJECTS(write_program(p), "argument 'out' writes input tensor 'in/x'");
  p = sample();
  p.steps[3].args[0] = tensor_arg(1, 0);  // an inout argument writes too
  CHECK_REJECTS(write_program(p), "argument 'io' writes constant tensor 'w'");
  p = sample();
  p.steps[1].dst = {0, 0};
  CHECK_REJECTS(write_program(p),
                "step 1 (copy) destination writes input tensor 'in/x', which the program only "
                "reads");
  p = sample();
  p.steps[2].dst = {6, 0};
  p.steps[2].bytes = 8;
  CHECK_REJECTS(write_program(p), "step 2 (memset) destination writes constant tensor 'k.v'");
  // Outputs, inouts and internals may be written.
  for (uint32_t t : {3u, 4u, 5u}) {
    p = sample();
    p.steps[2].dst = {t, 0};
    ProgramImage q;
    INFO("tensor " << t);
    CHECK_FALSE(read_program(write_program(p), q));
  }
}

TEST_CASE("program container: copies and memsets move some bytes, inside their tensors") {
  ProgramImage p = sample();
  p.steps[2].bytes = 0;
  CHECK_REJECTS(write_program(p), "section .trn.steps: step 2 (memset) moves 0 bytes");
  p = sample();
  p.steps[1].bytes = 0;
  CHECK_REJECTS(write_program(p), "step 1 (copy) moves 0 bytes");
  p = sample();
  p.steps[2].dst = {5, 49};
  CHECK_REJECTS(write_program(p),
                "step 2 (memset) destination: bytes 49..65 of tensor 'state-1' "
                "are outside its 64 bytes");
  p = sample();
  p.steps[1].src = {3, 129};
  CHECK_REJECTS(write_program(p),
                "step 1 (copy) source: bytes 129..257 of tensor 'tmp' are "
                "outside its 256 bytes");
  p = sample();
  p.steps[1].bytes = 256;
  CHECK_REJECTS(write_program(p), "step 1 (copy) destination: bytes 0..256 of tensor 'out:y'");
  p = sample();
  p.steps[1].src = {9, 0};
  CHECK_REJECTS(write_program(p), "step 1 (copy) source names tensor 9; the program has 7");
  p = sample();
  p.steps[2].dst = {5, 48};  // the last 16 bytes exactly
  ProgramImage q;
  CHECK_FALSE(read_program(write_program(p), q));
}

TEST_CASE("program container: constants from safetensors files (format version 2)") {
  ProgramImage p = sample();
  p.tensors[1].data.clear();
  p.tensors[1].source_file = "weights/model.safetensors";
  p.tensors[1].source_tensor = "layers.0.w";
  const Bytes bytes = write_program(p);
  CHECK(get_le(bytes, offset_of(bytes, ".trn.program") + 4, 4) == 2);
  ProgramImage back;
  INFO(read_program(bytes, back).value_or(""));
  REQUIRE_FALSE(read_program(bytes, back));
  CHECK(back == p);
  CHECK(write_program(back) == bytes);
  // Inline programs stay version 1.
  CHECK(get_le(write_program(sample()), offset_of(write_program(sample()), ".trn.program") + 4,
               4) == 1);
  // Only constants come from files, with a path and a tensor name.
  ProgramImage internal = p;
  internal.tensors[3].source_file = "x.safetensors";
  internal.tensors[3].source_tensor = "t";
  CHECK_REJECTS(write_program(internal), "only constants come from files");
  ProgramImage no_name = p;
  no_name.tensors[1].source_tensor.clear();
  CHECK_REJECTS(write_program(no_name), "an empty file path or tensor name");
  ProgramImage long_path = p;
  long_path.tensors[1].source_file = std::string(kMaxSourcePathLength + 1, 'a');
  CHECK_REJECTS(write_program(long_path), "source file is 4097 bytes long; at most 4096");
  // An unknown source kind.
  Bytes b = bytes;
  const size_t tensors = offset_of(b, ".trn.tensors");
  // Tensor 0's record: 16 bytes + 2 dims + "in/x" padded to 8; tensor 1 follows.
  const size_t second = tensors + 16 + 16 + 8;
  CHECK(get_le(b, second + 7, 1) == 1);
  put_le(b, second + 7, 1, 2);
  CHECK_REJECTS(b, "tensor 1: source 2 is not 0 (inline) or 1 (a safetensors file)");
}
