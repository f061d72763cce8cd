// Writes a few kernels built with ProgramBuilder into a directory, the seed corpus of
// fuzz_kernel_loader, (given a second directory) their disassembly, seeds of fuzz_assembler,
// and (given a third) safetensors files, seeds of fuzz_safetensors_header.
// Usage: trn-fuzz-make-seeds KERNEL_DIR [ASSEMBLY_DIR [SAFETENSORS_DIR]]
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "isa/builder.hpp"
#include "isa/container.hpp"
#include "isa/disassembler.hpp"

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

int main(int argc, char **argv) {
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: %s KERNEL_DIR [ASSEMBLY_DIR [SAFETENSORS_DIR]]\n", argv[0]);
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  const std::filesystem::path text_dir = argc >= 3 ? argv[2] : "";
  const std::filesystem::path safetensors_dir = argc == 4 ? argv[3] : "";
  for (const auto &d : {dir, text_dir, safetensors_dir}) {
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
    const auto bytes = write_kernel(program);
    std::ofstream f(dir / name, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char *>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
    if (!f) {
      std::fprintf(stderr, "%s: write failed\n", (dir / name).c_str());
      return 1;
    }
    if (text_dir.empty()) continue;
    std::ofstream t(text_dir / (std::string(name) + ".s"), std::ios::trunc);
    t << disassemble(program);
    if (!t) {
      std::fprintf(stderr, "%s.s: write failed\n", (text_dir / name).c_str());
      return 1;
    }
  }
  if (!safetensors_dir.empty() && !write_safetensors_seeds(safetensors_dir)) return 1;
  return 0;
}
