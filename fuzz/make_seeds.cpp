// Writes a few kernels built with ProgramBuilder into a directory, the seed corpus of
// fuzz_kernel_loader, (given a second directory) their disassembly, seeds of fuzz_assembler,
// (given a third) safetensors files, seeds of fuzz_safetensors_header, and (given a fourth)
// programs of those kernels, seeds of fuzz_program_loader.
// Usage: trn-fuzz-make-seeds KERNEL_DIR [ASSEMBLY_DIR [SAFETENSORS_DIR [PROGRAM_DIR]]]
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "isa/builder.hpp"
#include "isa/container.hpp"
#include "isa/disassembler.hpp"
#include "isa/program_container.hpp"

using namespace trn::isa;

namespace {

Program empty_kernel() {
  return ProgramBuilder("empty").finish();
}

// out = relu(x) through SBUF, with source lines.
Program relu_kernel() {
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

// One instruction of every opcode, constants, no debug section.
Program all_opcodes_kernel() {
  ProgramBuilder b("all_opcodes");
  const auto a = b.arg("a", DType::kBf16, {128, 128}, ArgDirection::kIn);
  const auto o = b.arg("o", DType::kF32, {128, 128}, ArgDirection::kInOut);
  b.dma_copy(Engine::kSync, 0, sbuf_tile(DType::kBf16, 0, 128, 0, 128),
             hbm_tile(a, DType::kBf16, 128, 0, 128, 0, 128))
      .signal_add(0);
  b.dma_copy(Engine::kSync, 1, sbuf_tile(DType::kF32, 0, 1, 4096, 4),
             hbm(kConstantsArg, DType::kF32, 0, 0, 1, {{1, 4}}));
  b.matmul(psum_tile(DType::kF32, 0, 128, 0, 128), sbuf_tile(DType::kBf16, 0, 128, 0, 128),
           sbuf_tile(DType::kBf16, 0, 128, 0, 128), true)
      .wait_ge(0, 1);
  b.transpose(Engine::kTensor, psum_tile(DType::kF32, 0, 128, 1024, 128),
              sbuf_tile(DType::kF32, 0, 128, 512, 128));
  b.activation(sbuf_tile(DType::kF32, 0, 128, 512, 128), psum_tile(DType::kF32, 0, 128, 0, 128),
               ActFunc::kGelu, 0.5f, 0.25f);
  b.tensor_tensor(Engine::kVector, sbuf_tile(DType::kF32, 0, 128, 1024, 128),
                  sbuf_tile(DType::kF32, 0, 128, 512, 128),
                  sbuf_tile(DType::kF32, 0, 128, 512, 128), AluOp::kAdd);
  b.tensor_scalar(Engine::kGpSimd, sbuf_tile(DType::kF32, 0, 128, 1536, 128),
                  sbuf_tile(DType::kF32, 0, 128, 1024, 128), AluOp::kMultiply, 2.0f, AluOp::kAdd,
                  1.0f);
  b.tensor_reduce(sbuf_tile(DType::kF32, 0, 128, 2048, 1),
                  sbuf_tile(DType::kF32, 0, 128, 1536, 128), AluOp::kMax, 0, true);
  b.tensor_copy(Engine::kScalar, sbuf_tile(DType::kF16, 0, 128, 2560, 128),
                sbuf_tile(DType::kF32, 0, 128, 1536, 128));
  b.memset(Engine::kVector, sbuf_tile(DType::kI32, 0, 128, 3072, 4), 7.0f);
  b.iota(sbuf_tile(DType::kI32, 0, 128, 3072, 16), pattern({{1, 16}}), 0, 16);
  b.affine_select(sbuf_tile(DType::kF32, 0, 128, 3584, 16), pattern({{-1, 16}}), 0, 1,
                  AluOp::kGreaterEqual, sbuf_tile(DType::kF32, 0, 128, 1536, 16), -1.0f);
  b.sem_wait(Engine::kScalar, 1, 1);
  b.sem_signal(Engine::kVector, 1, 1);
  b.barrier();
  b.dma_copy(Engine::kGpSimd, 2, hbm_tile(o, DType::kF32, 128, 0, 128, 0, 128),
             sbuf_tile(DType::kF32, 0, 128, 1024, 128))
      .wait_eq(0, 1)
      .signal_set(2, 5);
  Program p = b.finish();
  p.constants = {std::byte{0}, std::byte{0}, std::byte{0x80}, std::byte{0x3F}};
  p.constants.resize(16, std::byte{0});
  return p;
}

// Scalar arguments (format version 2) in a float and an integer slot.
Program scalar_kernel() {
  ProgramBuilder b("scalars");
  const auto alpha = b.scalar_arg("alpha", DType::kF32);
  const auto n = b.scalar_arg("n", DType::kI32);
  const auto tile = sbuf_tile(DType::kF32, 0, 128, 0, 64);
  b.activation(tile, tile, ActFunc::kIdentity).read_scalar(ImmSlot::kImm0, alpha);
  b.iota(tile, pattern({{1, 64}}), 0, 1).read_scalar(ImmSlot::kIimm0, n);
  return b.finish();
}

// Instructions from several source files (format version 3): a file table in .trn.debug.
Program several_files_kernel() {
  ProgramBuilder b("several_files");
  const auto tile = sbuf_tile(DType::kF32, 0, 128, 0, 64);
  b.memset(Engine::kVector, tile, 0.0f).at("kernels/softmax.cpp", 57);
  b.memset(Engine::kVector, tile, 1.0f).at("kernels/softmax_helpers.hpp", 12);
  b.memset(Engine::kGpSimd, tile, 2.0f).at("lib/tile.h", 3);
  return b.finish();
}

// relu on an input into an output: the smallest useful program.
ProgramImage relu_program() {
  ProgramImage p;
  p.name = "relu";
  p.kernels = {write_kernel(relu_kernel())};
  p.tensors = {{"x", TensorRole::kInput, DType::kF32, {128, 512}, {}, {}, {}},
               {"y", TensorRole::kOutput, DType::kF32, {128, 512}, {}, {}, {}}};
  ProgramStep launch;
  launch.args = {{false, {0, 0}, 0}, {false, {1, 0}, 0}};
  p.steps = {launch};
  return p;
}

// Every role, step kind and binding kind, constants with padding after them, dependencies and
// cores, so that mutations start from every record the format has.
ProgramImage mixed_program() {
  ProgramImage p;
  p.name = "mixed.v1";
  p.kernels = {write_kernel(relu_kernel()), write_kernel(scalar_kernel())};
  std::vector<std::byte> w(4 * 4 * 4);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<std::byte>(i * 7 + 1);
  const std::vector<std::byte> b = {std::byte{1}, std::byte{2}, std::byte{3}};
  p.tensors = {{"in/x", TensorRole::kInput, DType::kF32, {128, 512}, {}, {}, {}},
               {"w", TensorRole::kConstant, DType::kF32, {4, 4}, w, {}, {}},
               {"b", TensorRole::kConstant, DType::kU8, {3}, b, {}, {}},
               {"tmp", TensorRole::kInternal, DType::kF32, {2, 128, 512}, {}, {}, {}},
               {"out:y", TensorRole::kOutput, DType::kF32, {128, 512}, {}, {}, {}},
               {"state", TensorRole::kInOut, DType::kU8, {64}, {}, {}, {}}};
  ProgramStep relu;
  relu.args = {{false, {0, 0}, 0}, {false, {3, 128 * 512 * 4}, 0}};
  ProgramStep copy;
  copy.kind = StepKind::kCopy;
  copy.core = 1;
  copy.deps = {0};
  copy.dst = {4, 0};
  copy.src = {3, 128 * 512 * 4};
  copy.bytes = 128 * 512 * 4;
  ProgramStep memset;
  memset.kind = StepKind::kMemset;
  memset.core = 63;
  memset.deps = {0, 1};
  memset.dst = {5, 8};
  memset.bytes = 16;
  memset.value = 0xAB;
  ProgramStep scalars;
  scalars.kernel = 1;
  scalars.core = 2;
  scalars.deps = {2};
  scalars.args = {{true, {}, 0x3FC00000u}, {true, {}, 0xFFFFFFFFu}};
  ProgramStep from_constant;
  from_constant.kind = StepKind::kCopy;
  from_constant.dst = {3, 0};
  from_constant.src = {1, 0};
  from_constant.bytes = w.size();
  p.steps = {relu, copy, memset, scalars, from_constant};
  return p;
}

}  // namespace

// A safetensors file: the header's 8-byte little-endian length, the header, `data` bytes.
bool write_safetensors(const std::filesystem::path &path, const std::string &header, size_t data) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(header.size() >> (8 * i));
  bytes += header;
  bytes.append(data, '\x11');
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(f);
}

bool write_safetensors_seeds(const std::filesystem::path &dir) {
  const std::pair<const char *, std::pair<std::string, size_t>> seeds[] = {
      {"empty.safetensors", {"{}      ", 0}},
      {"one.safetensors", {R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", 16}},
      {"metadata.safetensors",
       {R"({"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,6]},)"
        R"("b":{"dtype":"U8","shape":[0],"data_offsets":[6,6]},)"
        R"("c":{"dtype":"F8_E4M3","shape":[2,1],"data_offsets":[6,8]}})",
        8}},
      {"f64.safetensors", {R"({"x":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8}},
      {"bytes-only.safetensors",
       {R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]},)"
        R"("u":{"dtype":"U32","shape":[1],"data_offsets":[3,7]},)"
        R"("q":{"dtype":"F4","shape":[2,3],"data_offsets":[7,10]}})",
        10}},
      {"overlap.safetensors",
       {R"({"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I16","shape":[2],)"
        R"("data_offsets":[4,8]}})",
        8}},
  };
  for (const auto &[name, seed] : seeds)
    if (!write_safetensors(dir / name, seed.first, seed.second)) {
      std::fprintf(stderr, "%s: write failed\n", (dir / name).c_str());
      return false;
    }
  return true;
}

bool write_file(const std::filesystem::path &path, const std::vector<std::byte> &bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) std::fprintf(stderr, "%s: write failed\n", path.c_str());
  return static_cast<bool>(f);
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 5) {
    std::fprintf(stderr, "usage: %s KERNEL_DIR [ASSEMBLY_DIR [SAFETENSORS_DIR [PROGRAM_DIR]]]\n",
                 argv[0]);
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  const std::filesystem::path text_dir = argc >= 3 ? argv[2] : "";
  const std::filesystem::path safetensors_dir = argc >= 4 ? argv[3] : "";
  const std::filesystem::path program_dir = argc == 5 ? argv[4] : "";
  for (const auto &d : {dir, text_dir, safetensors_dir, program_dir}) {
    if (d.empty()) continue;
    std::error_code ec;
    std::filesystem::create_directories(d, ec);
    if (ec) {
      std::fprintf(stderr, "%s: %s\n", d.c_str(), ec.message().c_str());
      return 1;
    }
  }
  const std::vector<std::pair<const char *, Program>> kernels = {
      {"empty.trnk", empty_kernel()},
      {"relu.trnk", relu_kernel()},
      {"all_opcodes.trnk", all_opcodes_kernel()},
      {"scalars.trnk", scalar_kernel()},
      {"several_files.trnk", several_files_kernel()}};
  for (const auto &[name, program] : kernels) {
    if (!write_file(dir / name, write_kernel(program))) return 1;
    if (text_dir.empty()) continue;
    std::ofstream t(text_dir / (std::string(name) + ".s"), std::ios::trunc);
    t << disassemble(program);
    if (!t) {
      std::fprintf(stderr, "%s.s: write failed\n", (text_dir / name).c_str());
      return 1;
    }
  }
  if (!safetensors_dir.empty() && !write_safetensors_seeds(safetensors_dir)) return 1;
  if (program_dir.empty()) return 0;
  // Format version 2: a constant from a safetensors file.
  ProgramImage from_file = mixed_program();
  from_file.tensors[2].data.clear();
  from_file.tensors[2].source_file = "weights.safetensors";
  from_file.tensors[2].source_tensor = "layers.0.w";
  for (const auto &[name, image] :
       {std::pair{"relu.trnp", relu_program()}, std::pair{"mixed.trnp", mixed_program()},
        std::pair{"from_file.trnp", from_file}}) {
    // The writer does not check: a seed the reader rejects would only test the first error.
    const auto bytes = write_program(image);
    ProgramImage back;
    if (const auto err = read_program(bytes, back)) {
      std::fprintf(stderr, "%s: not a valid program: %s\n", name, err->c_str());
      return 1;
    }
    if (!write_file(program_dir / name, bytes)) return 1;
  }
  return 0;
}
