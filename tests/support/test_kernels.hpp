// Kernels the conformance and stress tests launch, built with the ISA builder.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "isa/builder.hpp"
#include "isa/container.hpp"
#include "kbuild/kernels/tiled_matmul.hpp"
#include "support/api_helpers.hpp"
#include "trn/trn.h"

namespace trn::test {

constexpr uint32_t kAddRows = 128;
constexpr uint32_t kAddCols = 512;
constexpr uint64_t kAddBytes = uint64_t{kAddRows} * kAddCols * sizeof(float);

// out = a + b for [128, 512] f32: two loads on sync (DMA queues 0 and 1), the add on vector, the
// store on gpsimd (DMA queue 2), with semaphores between them. Optional source lines.
inline isa::Program vector_add_program(bool lines = false) {
  using isa::DType;
  using isa::Engine;
  isa::ProgramBuilder b("vector_add");
  const auto a = b.arg("a", DType::kF32, {kAddRows, kAddCols}, isa::ArgDirection::kIn);
  const auto c = b.arg("b", DType::kF32, {kAddRows, kAddCols}, isa::ArgDirection::kIn);
  const auto o = b.arg("out", DType::kF32, {kAddRows, kAddCols}, isa::ArgDirection::kOut);
  auto load_a = b.dma_copy(Engine::kSync, 0, isa::sbuf_tile(DType::kF32, 0, kAddRows, 0, kAddCols),
                           isa::hbm_tile(a, DType::kF32, kAddCols, 0, kAddRows, 0, kAddCols));
  load_a.signal_add(0);
  auto load_b =
      b.dma_copy(Engine::kSync, 1, isa::sbuf_tile(DType::kF32, 0, kAddRows, 2048, kAddCols),
                 isa::hbm_tile(c, DType::kF32, kAddCols, 0, kAddRows, 0, kAddCols));
  load_b.signal_add(0);
  auto add =
      b.tensor_tensor(Engine::kVector, isa::sbuf_tile(DType::kF32, 0, kAddRows, 4096, kAddCols),
                      isa::sbuf_tile(DType::kF32, 0, kAddRows, 0, kAddCols),
                      isa::sbuf_tile(DType::kF32, 0, kAddRows, 2048, kAddCols), isa::AluOp::kAdd);
  add.wait_ge(0, 2).signal_add(1);
  auto store = b.dma_copy(Engine::kGpSimd, 2,
                          isa::hbm_tile(o, DType::kF32, kAddCols, 0, kAddRows, 0, kAddCols),
                          isa::sbuf_tile(DType::kF32, 0, kAddRows, 4096, kAddCols));
  store.wait_ge(1, 1);
  if (lines) {
    load_a.line(10);
    load_b.line(11);
    add.line(12);
    store.line(13);
  }
  return b.finish();
}

// C[m, n] f32 = A[m, k] bf16 x B[k, n] bf16, tiled (the kernel builder's matmul).
inline isa::Program tiled_matmul_program(uint64_t m, uint64_t n, uint64_t k) {
  kbuild::MatmulConfig config;
  config.m = m;
  config.n = n;
  config.k = k;
  config.in_dtype = isa::DType::kBf16;
  config.out_dtype = isa::DType::kF32;
  auto built = kbuild::build_tiled_matmul(config);
  if (auto *why = std::get_if<std::string>(&built)) FAIL(*why);
  return std::get<isa::Program>(std::move(built));
}

inline trn_kernel_t load_program(trn_device_t device, const isa::Program &program) {
  const auto image = isa::write_kernel(program);
  trn_kernel_t kernel = nullptr;
  const trn_result_t r = trn_kernel_load(device, image.data(), image.size(), &kernel);
  INFO(last_error());
  REQUIRE(r == TRN_SUCCESS);
  REQUIRE(kernel != nullptr);
  return kernel;
}

}  // namespace trn::test
