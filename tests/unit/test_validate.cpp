// The ISA's static rules (src/isa/validate.cpp, docs/ISA.md "Validation"): for every rule a
// minimal program that passes, and a one-field mutation that fails with the instruction's label
// ("vector[0] tensor_tensor: ") and the rule's message.
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "isa/builder.hpp"
#include "isa/target.hpp"
#include "isa/validate.hpp"

namespace {

namespace isa = trn::isa;
using isa::AccessPattern;
using isa::ActFunc;
using isa::AluOp;
using isa::ArgDirection;
using isa::Argument;
using isa::DType;
using isa::Engine;
using isa::Instruction;
using isa::MemSpace;
using isa::Opcode;
using isa::Program;
using isa::ProgramBuilder;
using isa::Target;

constexpr DType kF32 = DType::kF32;
constexpr DType kBf16 = DType::kBf16;

// The default generation's core (trn2, NeuronCore-v3), as the device reports it.
const Target kDefaultTarget = *isa::core_spec(isa::kDefaultGeneration);

Target core(uint32_t version) {
  Target t = kDefaultTarget;
  t.core_version = version;
  return t;
}

// A program of one instruction (in its engine's stream), with optional arguments and constants.
Program single(const Instruction &inst, std::vector<Argument> args = {},
               size_t constant_bytes = 0) {
  Program p;
  p.name = "single";
  p.args = std::move(args);
  p.constants.resize(constant_bytes);
  p.stream(inst.engine).push_back(inst);
  return p;
}

// The instruction a builder call makes.
template <typename F>
Instruction built(F &&make) {
  ProgramBuilder b("one");
  return make(b).get();
}

// A copy of `inst` with one change.
template <typename F>
Instruction changed(Instruction inst, F &&change) {
  change(inst);
  return inst;
}

void expect_valid(const Program &program, const Target &target = kDefaultTarget) {
  const auto err = isa::validate_program(program, target);
  INFO("core_version " << target.core_version << ", unexpected error: " << err.value_or(""));
  CHECK_FALSE(err.has_value());
}

void expect_invalid(const Program &program, const Target &target, const std::string &label,
                    const std::string &needle) {
  const auto err = isa::validate_program(program, target);
  INFO("core_version " << target.core_version << ", want '" << label << "' ... '" << needle << "'");
  CHECK(err.has_value());
  if (!err) return;
  INFO("got '" << *err << "'");
  CHECK(err->rfind(label, 0) == 0);
  CHECK(err->find(needle) != std::string::npos);
}

Argument argument(std::string name, DType dtype, ArgDirection dir,
                  std::vector<uint64_t> shape = {128, 64}) {
  return Argument{std::move(name), dtype, std::move(shape), dir};
}

// ---- minimal valid instructions ----

Instruction vector_tensor_tensor() {
  return built([](ProgramBuilder &b) {
    return b.tensor_tensor(Engine::kVector, isa::sbuf_tile(kF32, 0, 128, 0, 64),
                           isa::psum_tile(kF32, 0, 128, 0, 64),
                           isa::sbuf_tile(kF32, 0, 128, 256, 64), AluOp::kAdd);
  });
}

Instruction vector_copy() {
  return built([](ProgramBuilder &b) {
    return b.tensor_copy(Engine::kVector, isa::sbuf_tile(kF32, 0, 128, 0, 64),
                         isa::psum_tile(kF32, 0, 128, 0, 64));
  });
}

Instruction vector_memset(const AccessPattern &dst) {
  return built([&](ProgramBuilder &b) { return b.memset(Engine::kVector, dst, 0.0f); });
}

Instruction matmul(const AccessPattern &dst, const AccessPattern &st, const AccessPattern &mv) {
  return built([&](ProgramBuilder &b) { return b.matmul(dst, st, mv, true); });
}

// [K=128 x M=128] bf16 stationary, [128 x N=512] moving, into one full PSUM bank.
Instruction full_matmul() {
  return matmul(isa::psum_tile(kF32, 0, 128, 0, 512), isa::sbuf_tile(kBf16, 0, 128, 0, 128),
                isa::sbuf_tile(kBf16, 0, 128, 256, 512));
}

// [K=128 x M=2] x [128 x N=2] into 2 partitions x 2 f32 at `offset` bytes of PSUM.
Instruction small_matmul(uint64_t offset, DType dst_dtype = kF32,
                         std::initializer_list<isa::Dim> dims = {{1, 2}}) {
  return matmul(isa::psum(dst_dtype, 0, 2, offset, dims), isa::sbuf_tile(kBf16, 0, 128, 0, 2),
                isa::sbuf_tile(kBf16, 0, 128, 64, 2));
}

Instruction scalar_activation() {
  return built([](ProgramBuilder &b) {
    return b.activation(isa::sbuf_tile(kF32, 0, 128, 0, 64), isa::psum_tile(kF32, 0, 128, 0, 64),
                        ActFunc::kRelu);
  });
}

Instruction tensor_scalar_on(Engine engine, AluOp op0, AluOp op1, DType dtype = kF32) {
  return built([&](ProgramBuilder &b) {
    return b.tensor_scalar(engine, isa::sbuf_tile(dtype, 0, 128, 0, 64),
                           isa::sbuf_tile(dtype, 0, 128, 256, 64), op0, 1.0f, op1, 2.0f);
  });
}

// src0 [128 x [4, 32]].
Instruction reduce(uint32_t axes, uint32_t dst_free, AluOp op = AluOp::kAdd, DType dtype = kF32) {
  return built([&](ProgramBuilder &b) {
    return b.tensor_reduce(isa::sbuf_tile(dtype, 0, 128, 0, dst_free),
                           isa::sbuf(dtype, 0, 128, 1024, {{32, 4}, {1, 32}}), op, axes);
  });
}

Instruction iota(const AccessPattern &dst, const AccessPattern &pat) {
  return built([&](ProgramBuilder &b) { return b.iota(dst, pat, 0, 1); });
}

Instruction affine_select(AluOp cmp, const AccessPattern &on_true) {
  return built([&](ProgramBuilder &b) {
    return b.affine_select(isa::sbuf_tile(kF32, 0, 128, 0, 64), isa::pattern({{1, 64}}), 0, -1, cmp,
                           on_true, -1e9f);
  });
}

Instruction dma(const AccessPattern &dst, const AccessPattern &src, uint8_t queue = 0,
                Engine issuer = Engine::kSync) {
  return built([&](ProgramBuilder &b) { return b.dma_copy(issuer, queue, dst, src); });
}

Instruction transpose(Engine engine, const AccessPattern &dst, const AccessPattern &src) {
  return built([&](ProgramBuilder &b) { return b.transpose(engine, dst, src); });
}

// Engines that run each opcode, per docs/ISA.md "Engines and memories".
bool runs_on(Opcode op, Engine e, uint32_t v) {
  switch (op) {
    case Opcode::kNop:
    case Opcode::kSemWait:
    case Opcode::kSemSignal:
    case Opcode::kBarrier: return true;
    case Opcode::kDmaCopy:
      return e == Engine::kSync || e == Engine::kScalar || e == Engine::kGpSimd;
    case Opcode::kMatmul: return e == Engine::kTensor;
    case Opcode::kTranspose: return e == Engine::kTensor || e == Engine::kVector;
    case Opcode::kActivation: return e == Engine::kScalar || (e == Engine::kGpSimd && v >= 4);
    case Opcode::kTensorTensor: return e == Engine::kVector || e == Engine::kGpSimd;
    case Opcode::kTensorScalar:
      return e == Engine::kVector || e == Engine::kScalar || e == Engine::kGpSimd;
    case Opcode::kTensorReduce: return e == Engine::kVector;
    case Opcode::kTensorCopy:
      return e == Engine::kVector || e == Engine::kGpSimd || (e == Engine::kScalar && v >= 3);
    case Opcode::kMemset: return e == Engine::kVector || e == Engine::kGpSimd;
    case Opcode::kIota:
    case Opcode::kAffineSelect: return e == Engine::kGpSimd;
  }
  return false;
}

// An instance of `op` on `engine` that is valid wherever the opcode may run there (SBUF only,
// so GpSimd accepts it; the Tensor engine's forms read SBUF and write PSUM).
Instruction instance(Opcode op, Engine engine) {
  Instruction i;
  i.opcode = op;
  i.engine = engine;
  const auto a = isa::sbuf_tile(kF32, 0, 128, 0, 64);
  const auto b = isa::sbuf_tile(kF32, 0, 128, 1024, 64);
  switch (op) {
    case Opcode::kNop:
    case Opcode::kBarrier: break;
    case Opcode::kSemWait: i.wait = {isa::SemCmp::kGe, 0, 1}; break;
    case Opcode::kSemSignal: i.signal = {isa::SemOp::kAdd, 0, 1}; break;
    case Opcode::kDmaCopy:
      i.dst = a;
      i.src0 = b;
      break;
    case Opcode::kMatmul:
      i.dst = isa::psum_tile(kF32, 0, 128, 0, 512);
      i.src0 = isa::sbuf_tile(kBf16, 0, 128, 0, 128);
      i.src1 = isa::sbuf_tile(kBf16, 0, 128, 256, 512);
      break;
    case Opcode::kTranspose:
      if (engine == Engine::kTensor) {
        i.dst = isa::psum_tile(kF32, 0, 128, 0, 128);
        i.src0 = isa::sbuf_tile(kF32, 0, 128, 0, 128);
      } else {
        i.dst = isa::sbuf_tile(kF32, 0, 32, 0, 32);
        i.src0 = isa::sbuf_tile(kF32, 0, 32, 512, 32);
      }
      break;
    case Opcode::kActivation:
      i.dst = a;
      i.src0 = b;
      i.func = static_cast<uint8_t>(ActFunc::kExp);
      break;
    case Opcode::kTensorTensor:
      i.dst = a;
      i.src0 = a;
      i.src1 = b;
      i.func = static_cast<uint8_t>(AluOp::kMultiply);
      break;
    case Opcode::kTensorScalar:
      i.dst = a;
      i.src0 = b;
      i.func = static_cast<uint8_t>(AluOp::kMultiply);
      i.func2 = static_cast<uint8_t>(AluOp::kAdd);
      break;
    case Opcode::kTensorReduce:
      i.dst = isa::sbuf_tile(kF32, 0, 128, 0, 1);
      i.src0 = b;
      i.func = static_cast<uint8_t>(AluOp::kMax);
      break;
    case Opcode::kTensorCopy:
      i.dst = a;
      i.src0 = b;
      break;
    case Opcode::kMemset: i.dst = a; break;
    case Opcode::kIota:
      i.dst = isa::sbuf_tile(DType::kI32, 0, 128, 0, 64);
      i.src0 = isa::pattern({{1, 64}});
      break;
    case Opcode::kAffineSelect:
      i.dst = a;
      i.src0 = isa::pattern({{1, 64}});
      i.src1 = b;
      i.func = static_cast<uint8_t>(AluOp::kGreaterEqual);
      break;
  }
  return i;
}

std::string label(Engine e, size_t index, Opcode op) {
  return std::string(isa::engine_name(e)) + "[" + std::to_string(index) + "] " +
         isa::opcode_name(op) + ": ";
}

}  // namespace

TEST_CASE("validate: a realistic multi-engine program is valid on NeuronCore-v2, v3 and v4") {
  ProgramBuilder b("mm_relu");
  const auto w = b.arg("w", kBf16, {128, 128}, ArgDirection::kIn);
  const auto x = b.arg("x", kBf16, {128, 512}, ArgDirection::kIn);
  const auto y = b.arg("y", kF32, {128, 512}, ArgDirection::kOut);
  const auto s = b.arg("s", kF32, {128, 1}, ArgDirection::kInOut);
  b.dma_copy(Engine::kSync, 0, isa::sbuf_tile(kBf16, 0, 128, 0, 128),
             isa::hbm_tile(w, kBf16, 128, 0, 128, 0, 128))
      .signal_add(0)
      .line(10);
  b.dma_copy(Engine::kScalar, 1, isa::sbuf_tile(kBf16, 0, 128, 256, 512),
             isa::hbm_tile(x, kBf16, 512, 0, 128, 0, 512))
      .signal_add(0)
      .line(11);
  b.matmul(isa::psum_tile(kF32, 0, 128, 0, 512), isa::sbuf_tile(kBf16, 0, 128, 0, 128),
           isa::sbuf_tile(kBf16, 0, 128, 256, 512), true)
      .wait_ge(0, 2)
      .signal_add(1)
      .line(12);
  b.tensor_copy(Engine::kVector, isa::sbuf_tile(kF32, 0, 128, 4096, 512),
                isa::psum_tile(kF32, 0, 128, 0, 512))
      .wait_ge(1, 1)
      .signal_add(2)
      .line(13);
  b.tensor_reduce(isa::sbuf_tile(kF32, 0, 128, 8192, 1), isa::sbuf_tile(kF32, 0, 128, 4096, 512),
                  AluOp::kMax)
      .signal_add(3)
      .line(14);
  b.sem_wait(Engine::kSync, 2, 1).line(15);
  b.dma_copy(Engine::kSync, 2, isa::hbm_tile(y, kF32, 512, 0, 128, 0, 512),
             isa::sbuf_tile(kF32, 0, 128, 4096, 512))
      .line(16);
  b.dma_copy(Engine::kGpSimd, 3, isa::hbm_tile(s, kF32, 1, 0, 128, 0, 1),
             isa::sbuf_tile(kF32, 0, 128, 8192, 1))
      .wait_ge(3, 1)
      .line(17);
  b.barrier();
  const Program p = b.finish();
  for (uint32_t v : {2u, 3u, 4u}) expect_valid(p, core(v));
}

TEST_CASE("validate: unknown opcode, engine, flags, wait comparison and signal operation") {
  Instruction nop;
  nop.engine = Engine::kSync;
  expect_valid(single(nop));

  const auto unknown_op = changed(nop, [](Instruction &i) { i.opcode = static_cast<Opcode>(15); });
  expect_invalid(single(unknown_op), kDefaultTarget, "sync[0] invalid: ", "unknown opcode 15");
  CHECK(isa::check_instruction(unknown_op, kDefaultTarget) == "unknown opcode 15");

  // An engine that does not exist cannot have a stream of its own: validate_program reports the
  // stream mismatch; check_instruction names the engine.
  const auto unknown_engine =
      changed(nop, [](Instruction &i) { i.engine = static_cast<Engine>(5); });
  Program p;
  p.stream(Engine::kTensor).push_back(unknown_engine);
  expect_invalid(p, kDefaultTarget,
                 "tensor[0] nop: ", "is in the tensor stream but says it runs on invalid");
  CHECK(isa::check_instruction(unknown_engine, kDefaultTarget) == "unknown engine 5");

  expect_valid(single(changed(nop, [](Instruction &i) { i.flags = isa::kFlagsKnown; })));
  expect_invalid(single(changed(nop, [](Instruction &i) { i.flags = 1u << 9; })), kDefaultTarget,
                 "sync[0] nop: ", "unknown flags 0x200");

  for (auto cmp : {isa::SemCmp::kGe, isa::SemCmp::kEq})
    expect_valid(single(changed(nop, [&](Instruction &i) { i.wait = {cmp, 3, 1}; })));
  expect_invalid(single(changed(nop,
                                [](Instruction &i) {
                                  i.wait = {static_cast<isa::SemCmp>(3), 0, 1};
                                })),
                 kDefaultTarget, "sync[0] nop: ", "unknown wait comparison 3");

  for (auto op : {isa::SemOp::kAdd, isa::SemOp::kSet})
    expect_valid(single(changed(nop, [&](Instruction &i) { i.signal = {op, 3, 1}; })));
  expect_invalid(single(changed(nop,
                                [](Instruction &i) {
                                  i.signal = {static_cast<isa::SemOp>(3), 0, 1};
                                })),
                 kDefaultTarget, "sync[0] nop: ", "unknown semaphore operation 3");
}

TEST_CASE("validate: semaphore indices stop at 255") {
  Instruction nop;
  nop.engine = Engine::kVector;
  expect_valid(single(changed(nop, [](Instruction &i) {
    i.wait = {isa::SemCmp::kGe, 255, 1};
    i.signal = {isa::SemOp::kAdd, 255, 1};
  })));
  expect_invalid(single(changed(nop,
                                [](Instruction &i) {
                                  i.wait = {isa::SemCmp::kGe, 256, 1};
                                })),
                 kDefaultTarget, "vector[0] nop: ", "waits on semaphore 256; the core has 256");
  expect_invalid(single(changed(nop,
                                [](Instruction &i) {
                                  i.signal = {isa::SemOp::kSet, 256, 1};
                                })),
                 kDefaultTarget, "vector[0] nop: ", "updates semaphore 256; the core has 256");
  // Builder forms.
  ProgramBuilder b("sems");
  b.sem_signal(Engine::kScalar, 300);
  expect_invalid(b.finish(), kDefaultTarget, "scalar[0] sem_signal: ", "updates semaphore 300");
}

TEST_CASE("validate: every opcode runs only on its engines, per core version") {
  for (uint32_t v : {2u, 3u, 4u}) {
    for (uint32_t o = 0; o < isa::kOpcodeCount; ++o) {
      for (uint32_t e = 0; e < isa::kEngineCount; ++e) {
        const auto op = static_cast<Opcode>(o);
        const auto engine = static_cast<Engine>(e);
        INFO(isa::opcode_name(op) << " on " << isa::engine_name(engine) << ", v" << v);
        const Program p = single(instance(op, engine));
        if (runs_on(op, engine, v)) {
          expect_valid(p, core(v));
        } else {
          expect_invalid(p, core(v), label(engine, 0, op), "runs on ");
          const auto err = isa::validate_program(p, core(v));
          REQUIRE(err);
          CHECK(err->find(std::string(", not ") + isa::engine_name(engine)) != std::string::npos);
          CHECK(err->find(": runs on ") != std::string::npos);
        }
      }
    }
  }
}

TEST_CASE("validate: wrong-engine messages name the allowed engines") {
  const Target v3 = core(3);
  expect_invalid(single(instance(Opcode::kMatmul, Engine::kVector)), v3,
                 "vector[0] nc_matmul: ", "runs on tensor, not vector");
  expect_invalid(single(instance(Opcode::kDmaCopy, Engine::kVector)), v3, "vector[0] dma_copy: ",
                 "runs on sync, scalar or gpsimd (the engines that trigger DMA), not vector");
  expect_invalid(single(instance(Opcode::kTranspose, Engine::kScalar)), v3,
                 "scalar[0] nc_transpose: ", "runs on tensor or vector, not scalar");
  expect_invalid(single(instance(Opcode::kTensorTensor, Engine::kScalar)), v3,
                 "scalar[0] tensor_tensor: ", "runs on vector or gpsimd, not scalar");
  expect_invalid(single(instance(Opcode::kTensorScalar, Engine::kTensor)), v3,
                 "tensor[0] tensor_scalar: ", "runs on vector, scalar or gpsimd, not tensor");
  expect_invalid(single(instance(Opcode::kTensorReduce, Engine::kGpSimd)), v3,
                 "gpsimd[0] tensor_reduce: ", "runs on vector, not gpsimd");
  expect_invalid(single(instance(Opcode::kMemset, Engine::kScalar)), v3,
                 "scalar[0] memset: ", "runs on vector or gpsimd, not scalar");
  expect_invalid(single(instance(Opcode::kIota, Engine::kVector)), v3,
                 "vector[0] iota: ", "runs on gpsimd, not vector");
  expect_invalid(single(instance(Opcode::kAffineSelect, Engine::kSync)), v3,
                 "sync[0] affine_select: ", "runs on gpsimd, not sync");

  // activation on GpSimd from NeuronCore-v4.
  const auto act_gpsimd = single(instance(Opcode::kActivation, Engine::kGpSimd));
  for (uint32_t v : {2u, 3u})
    expect_invalid(act_gpsimd, core(v), "gpsimd[0] activation: ",
                   "runs on scalar (gpsimd from NeuronCore-v4), not gpsimd");
  expect_valid(act_gpsimd, core(4));
  expect_invalid(single(instance(Opcode::kActivation, Engine::kVector)), core(4),
                 "vector[0] activation: ", "not vector");

  // tensor_copy on Scalar from NeuronCore-v3.
  const auto copy_scalar = single(instance(Opcode::kTensorCopy, Engine::kScalar));
  expect_invalid(copy_scalar, core(2), "scalar[0] tensor_copy: ",
                 "runs on vector, gpsimd, or scalar from NeuronCore-v3, not scalar");
  expect_valid(copy_scalar, core(3));
  expect_valid(copy_scalar, core(4));
}

TEST_CASE("validate: an instruction in another engine's stream") {
  Program p;
  p.stream(Engine::kScalar).push_back(instance(Opcode::kActivation, Engine::kScalar));
  expect_valid(p);
  p.stream(Engine::kScalar).push_back(vector_copy());
  expect_invalid(p, kDefaultTarget,
                 "scalar[1] tensor_copy: ", "is in the scalar stream but says it runs on vector");
}

TEST_CASE("validate: operands set but unused, and used but missing") {
  const Target t = kDefaultTarget;
  const auto set = isa::sbuf_tile(kF32, 0, 128, 2048, 64);
  expect_valid(single(vector_memset(isa::sbuf_tile(kF32, 0, 128, 0, 64))));
  expect_invalid(single(changed(vector_memset(isa::sbuf_tile(kF32, 0, 128, 0, 64)),
                                [&](Instruction &i) { i.src0 = set; })),
                 t, "vector[0] memset: ", "operand src0 is set but memset does not use it");
  expect_invalid(single(changed(vector_copy(), [&](Instruction &i) { i.dst2 = set; })), t,
                 "vector[0] tensor_copy: ", "operand dst2 is set but tensor_copy does not use it");
  expect_invalid(single(changed(vector_copy(), [&](Instruction &i) { i.src1 = set; })), t,
                 "vector[0] tensor_copy: ", "operand src1 is set but tensor_copy does not use it");
  expect_invalid(
      single(changed(vector_tensor_tensor(), [&](Instruction &i) { i.src2 = set; })), t,
      "vector[0] tensor_tensor: ", "operand src2 is set but tensor_tensor does not use it");
  Instruction nop;
  nop.engine = Engine::kGpSimd;
  expect_invalid(single(changed(nop, [&](Instruction &i) { i.dst = set; })), t,
                 "gpsimd[0] nop: ", "operand dst is set but nop does not use it");

  // activation: src1 / src2 / dst2 only with their flags.
  const auto col = isa::sbuf_tile(kF32, 0, 128, 4096, 1);
  expect_invalid(single(changed(scalar_activation(), [&](Instruction &i) { i.src1 = col; })), t,
                 "scalar[0] activation: ", "operand src1 is set but activation does not use it");
  expect_invalid(single(changed(scalar_activation(), [&](Instruction &i) { i.src2 = col; })), t,
                 "scalar[0] activation: ", "operand src2 is set but activation does not use it");
  expect_invalid(single(changed(scalar_activation(), [&](Instruction &i) { i.dst2 = col; })), t,
                 "scalar[0] activation: ", "operand dst2 is set but activation does not use it");
  // tensor_scalar: src1 / src2 only with the operand flags.
  const auto ts = tensor_scalar_on(Engine::kVector, AluOp::kAdd, AluOp::kMultiply);
  expect_valid(single(ts));
  expect_invalid(
      single(changed(ts, [&](Instruction &i) { i.src1 = col; })), t,
      "vector[0] tensor_scalar: ", "operand src1 is set but tensor_scalar does not use it");
  expect_invalid(
      single(changed(ts, [&](Instruction &i) { i.src2 = col; })), t,
      "vector[0] tensor_scalar: ", "operand src2 is set but tensor_scalar does not use it");

  // Used operands left unset read as a memory space of 0 ("none").
  expect_invalid(
      single(changed(vector_tensor_tensor(), [](Instruction &i) { i.src1 = {}; })), t,
      "vector[0] tensor_tensor: ", "src1 is missing: this instruction reads or writes it");
  expect_invalid(single(changed(vector_copy(), [](Instruction &i) { i.dst = {}; })), t,
                 "vector[0] tensor_copy: ", "dst is missing: this instruction reads or writes it");
  expect_invalid(
      single(changed(scalar_activation(), [](Instruction &i) { i.flags |= isa::kFlagAccumulate; })),
      t, "scalar[0] activation: ", "dst2 is missing: this instruction reads or writes it");
  expect_invalid(
      single(changed(scalar_activation(), [](Instruction &i) { i.flags |= isa::kFlagBiasTile; })),
      t, "scalar[0] activation: ", "src1 is missing: this instruction reads or writes it");
  expect_invalid(
      single(changed(ts, [](Instruction &i) { i.flags |= isa::kFlagOperand1Tile; })), t,
      "vector[0] tensor_scalar: ", "src2 is missing: this instruction reads or writes it");
  expect_invalid(single(changed(instance(Opcode::kMatmul, Engine::kTensor),
                                [](Instruction &i) { i.src0 = {}; })),
                 t,
                 "tensor[0] nc_matmul: ", "src0 is missing: this instruction reads or writes it");
}

TEST_CASE("validate: access pattern space, dtype, dims, counts and partitions") {
  const Target t = kDefaultTarget;
  const auto copy = vector_copy();
  expect_valid(single(copy));
  expect_invalid(
      single(changed(copy, [](Instruction &i) { i.dst.space = static_cast<MemSpace>(4); })), t,
      "vector[0] tensor_copy: ", "dst has an unknown memory space 4");
  expect_invalid(
      single(changed(copy, [](Instruction &i) { i.src0.dtype = static_cast<DType>(10); })), t,
      "vector[0] tensor_copy: ", "src0 has an unknown dtype 10");
  expect_invalid(single(changed(copy, [](Instruction &i) { i.src0.dtype = DType::kInvalid; })), t,
                 "vector[0] tensor_copy: ", "src0 has an unknown dtype 0");

  // Four dims pass, five do not.
  const auto four = changed(copy, [](Instruction &i) {
    i.src0 = isa::psum(kF32, 0, 128, 0, {{32, 2}, {16, 2}, {4, 4}, {1, 4}});
  });
  expect_valid(single(four));
  expect_invalid(single(changed(four, [](Instruction &i) { i.src0.num_dims = 5; })), t,
                 "vector[0] tensor_copy: ", "src0 has 5 free dims; at most 4 are allowed");
  expect_invalid(single(changed(four, [](Instruction &i) { i.src0.dims[2].count = 0; })), t,
                 "vector[0] tensor_copy: ", "src0 dim 2 has count 0");
  expect_invalid(single(changed(copy, [](Instruction &i) { i.dst.partition_count = 0; })), t,
                 "vector[0] tensor_copy: ", "dst has 0 partitions");

  // Partition ranges past the core's 128.
  const auto at = [&](uint32_t start, uint32_t count) {
    return changed(copy, [=](Instruction &i) {
      i.dst = isa::sbuf_tile(kF32, start, count, 0, 64);
      i.src0 = isa::psum_tile(kF32, start, count, 0, 64);
    });
  };
  expect_valid(single(at(96, 32)));
  expect_invalid(single(at(0, 129)), t,
                 "vector[0] tensor_copy: ", "dst covers partitions 0..128; the core has 128");
  expect_invalid(single(at(128, 32)), t,
                 "vector[0] tensor_copy: ", "dst covers partitions 128..159; the core has 128");
  expect_invalid(single(at(96, 64)), t,
                 "vector[0] tensor_copy: ", "dst covers partitions 96..159; the core has 128");
  // A target with fewer partitions.
  Target narrow = kDefaultTarget;
  narrow.partitions = 64;
  expect_valid(single(at(0, 64)), narrow);
  expect_invalid(single(at(64, 32)), narrow,
                 "vector[0] tensor_copy: ", "dst covers partitions 64..95; the core has 64");
  // DMA is held to the partition range too.
  const auto d = dma(isa::sbuf_tile(kF32, 96, 32, 0, 64), isa::sbuf_tile(kF32, 0, 32, 1024, 64));
  expect_valid(single(d));
  expect_invalid(single(changed(d, [](Instruction &i) { i.dst.partition_start = 100; })), t,
                 "sync[0] dma_copy: ", "dst covers partitions 100..131");
}

TEST_CASE("validate: partition start alignment of engine access patterns") {
  struct Case {
    uint32_t count, start;
    bool ok;
  };
  const Case cases[] = {
      {128, 0, true},  {96, 32, false}, {65, 0, true},    {65, 32, false}, {65, 63, false},
      {64, 64, true},  {64, 0, true},   {64, 32, false},  {33, 64, true},  {33, 32, false},
      {40, 16, false}, {32, 96, true},  {32, 0, true},    {32, 64, true},  {32, 32, true},
      {16, 8, false},  {1, 127, false}, {16, 112, false}, {1, 96, true},   {8, 48, false},
  };
  for (const auto &c : cases) {
    INFO(c.count << "@" << c.start);
    const auto copy = changed(vector_copy(), [&](Instruction &i) {
      i.dst = isa::sbuf_tile(kF32, c.start, c.count, 0, 64);
      i.src0 = isa::psum_tile(kF32, c.start, c.count, 0, 64);
    });
    if (c.ok) {
      expect_valid(single(copy));
    } else {
      expect_invalid(single(copy), kDefaultTarget, "vector[0] tensor_copy: ",
                     "dst starts at partition " + std::to_string(c.start) + " with " +
                         std::to_string(c.count) + " partitions; engines need start 0");
      // The source alone misaligned is caught too.
      const auto src_only = changed(copy, [](Instruction &i) {
        i.dst = isa::sbuf_tile(kF32, 0, i.src0.partition_count, 0, 64);
      });
      expect_invalid(single(src_only), kDefaultTarget, "vector[0] tensor_copy: ",
                     "src0 starts at partition " + std::to_string(c.start));
      // DMA is not an engine access pattern: any start.
      expect_valid(single(dma(isa::sbuf_tile(kF32, c.start, c.count, 0, 64),
                              isa::sbuf_tile(kF32, 0, c.count, 1024, 64))));
    }
  }
}

TEST_CASE("validate: engine counts and strides are 16-bit, DMA is exempt") {
  const Target t = kDefaultTarget;
  const auto mem = [](std::initializer_list<isa::Dim> dims) {
    return vector_memset(isa::sbuf(DType::kU8, 0, 1, 32768, dims));  // room for -32768
  };
  expect_valid(single(mem({{1, 65535}})));
  expect_invalid(single(mem({{1, 65536}})), t, "vector[0] memset: ",
                 "dst dim 0 has 65536 elements; engines address at most 65535 per dim");
  expect_invalid(single(mem({{1, 2}, {1, 70000}})), t,
                 "vector[0] memset: ", "dst dim 1 has 70000 elements");
  expect_valid(single(mem({{32767, 2}})));
  expect_valid(single(mem({{-32768, 2}})));
  expect_invalid(single(mem({{32768, 2}})), t, "vector[0] memset: ",
                 "dst dim 0 has stride 32768; engine strides are 16-bit (-32768..32767)");
  expect_invalid(single(mem({{1, 2}, {-32769, 2}})), t,
                 "vector[0] memset: ", "dst dim 1 has stride -32769");
  // A source operand too.
  expect_invalid(
      single(changed(vector_copy(), [](Instruction &i) { i.src0.dims[0].stride = 40000; })), t,
      "vector[0] tensor_copy: ", "src0 dim 0 has stride 40000");

  // DMA: counts past 65535, strides past int16 and free sizes past 64 Ki are fine.
  const auto big = dma(isa::sbuf(DType::kU8, 0, 1, 0, {{1, 70000}}),
                       isa::hbm(0, DType::kU8, 0, 70000, 1, {{1, 70000}}));
  expect_valid(single(big, {argument("x", DType::kU8, ArgDirection::kIn, {70000})}));
  const auto strided = dma(isa::sbuf(DType::kU8, 0, 1, 0, {{40000, 2}}),
                           isa::hbm(0, DType::kU8, 0, 2, 1, {{50000, 2}}));
  expect_valid(single(strided, {argument("x", DType::kU8, ArgDirection::kIn, {100000})}));
}

TEST_CASE("validate: free sizes per partition: 64 Ki elements in SBUF, 4 Ki in PSUM") {
  const Target t = kDefaultTarget;
  expect_valid(single(vector_memset(isa::sbuf(DType::kU8, 0, 128, 0, {{256, 256}, {1, 256}}))));
  expect_invalid(
      single(vector_memset(isa::sbuf(DType::kU8, 0, 128, 0, {{256, 256}, {1, 257}}))), t,
      "vector[0] memset: ", "dst has 65792 free elements per partition; SBUF allows at most 65536");
  expect_valid(single(vector_memset(isa::psum_tile(kF32, 0, 128, 0, 4096))));
  expect_invalid(
      single(vector_memset(isa::psum_tile(kF32, 0, 128, 0, 4097))), t,
      "vector[0] memset: ", "dst has 4097 free elements per partition; PSUM allows at most 4096");
  expect_invalid(
      single(changed(vector_copy(),
                     [](Instruction &i) {
                       i.src0 = isa::psum(kF32, 0, 128, 0, {{64, 64}, {1, 65}});
                     })),
      t, "vector[0] tensor_copy: ", "src0 has 4160 free elements per partition; PSUM allows");
}

TEST_CASE("validate: memory spaces each engine may touch") {
  const Target t = kDefaultTarget;
  // Tensor engine: reads SBUF, writes PSUM.
  const auto mm = full_matmul();
  expect_valid(single(mm));
  expect_invalid(
      single(
          changed(mm, [](Instruction &i) { i.src0 = isa::psum_tile(kBf16, 0, 128, 2048, 128); })),
      t, "tensor[0] nc_matmul: ", "src0 is in PSUM; the tensor engine reads SBUF and writes PSUM");
  expect_invalid(
      single(
          changed(mm, [](Instruction &i) { i.src1 = isa::psum_tile(kBf16, 0, 128, 2048, 512); })),
      t, "tensor[0] nc_matmul: ", "src1 is in PSUM; the tensor engine reads SBUF");
  expect_invalid(
      single(changed(mm, [](Instruction &i) { i.dst = isa::sbuf_tile(kF32, 0, 128, 8192, 512); })),
      t, "tensor[0] nc_matmul: ", "dst is in SBUF; the tensor engine reads SBUF");
  const auto tt = instance(Opcode::kTranspose, Engine::kTensor);
  expect_valid(single(tt));
  expect_invalid(
      single(changed(tt, [](Instruction &i) { i.dst = isa::sbuf_tile(kF32, 0, 128, 8192, 128); })),
      t, "tensor[0] nc_transpose: ", "dst is in SBUF; the tensor engine reads SBUF");
  expect_invalid(
      single(changed(tt, [](Instruction &i) { i.src0 = isa::psum_tile(kF32, 0, 128, 2048, 128); })),
      t, "tensor[0] nc_transpose: ", "src0 is in PSUM; the tensor engine");

  // GpSimd never touches PSUM; the Vector engine may.
  const auto gp_tt = instance(Opcode::kTensorTensor, Engine::kGpSimd);
  expect_valid(single(gp_tt));
  expect_invalid(
      single(changed(gp_tt, [](Instruction &i) { i.src1 = isa::psum_tile(kF32, 0, 128, 0, 64); })),
      t, "gpsimd[0] tensor_tensor: ", "src1 is in PSUM; gpsimd cannot access PSUM");
  expect_valid(single(vector_memset(isa::psum_tile(kF32, 0, 128, 0, 64))));
  expect_invalid(
      single(changed(instance(Opcode::kMemset, Engine::kGpSimd),
                     [](Instruction &i) { i.dst = isa::psum_tile(kF32, 0, 128, 0, 64); })),
      t, "gpsimd[0] memset: ", "dst is in PSUM; gpsimd cannot access PSUM");
  expect_invalid(
      single(changed(instance(Opcode::kDmaCopy, Engine::kGpSimd),
                     [](Instruction &i) { i.src0 = isa::psum_tile(kF32, 0, 128, 0, 64); })),
      t, "gpsimd[0] dma_copy: ", "src0 is in PSUM; gpsimd cannot access PSUM");

  // Only dma_copy reaches HBM.
  const std::vector<Argument> args = {argument("x", kF32, ArgDirection::kInOut)};
  const auto x = isa::hbm_tile(0, kF32, 64, 0, 128, 0, 64);
  expect_valid(single(dma(isa::sbuf_tile(kF32, 0, 128, 0, 64), x), args));
  expect_invalid(single(changed(vector_copy(), [&](Instruction &i) { i.src0 = x; }), args), t,
                 "vector[0] tensor_copy: ", "src0 is in HBM; only dma_copy reaches HBM");
  expect_invalid(single(changed(vector_copy(), [&](Instruction &i) { i.dst = x; }), args), t,
                 "vector[0] tensor_copy: ", "dst is in HBM; only dma_copy reaches HBM");
  expect_invalid(single(changed(scalar_activation(), [&](Instruction &i) { i.src0 = x; }), args), t,
                 "scalar[0] activation: ", "src0 is in HBM; only dma_copy reaches HBM");

  // dma_copy: SBUF and HBM, in any pairing, never PSUM.
  const std::vector<Argument> two = {argument("x", kF32, ArgDirection::kIn),
                                     argument("y", kF32, ArgDirection::kOut)};
  const auto y = isa::hbm_tile(1, kF32, 64, 0, 128, 0, 64);
  const auto s = isa::sbuf_tile(kF32, 0, 128, 0, 64);
  expect_valid(single(dma(s, x), two));
  expect_valid(single(dma(y, s), two));
  expect_valid(single(dma(y, x), two));
  expect_valid(single(dma(s, isa::sbuf_tile(kF32, 0, 128, 4096, 64)), two));
  expect_invalid(single(dma(isa::psum_tile(kF32, 0, 128, 0, 64), s), two), t, "sync[0] dma_copy: ",
                 "dma_copy moves between SBUF and HBM; dst is PSUM and src0 SBUF");
  expect_invalid(
      single(dma(y, isa::psum_tile(kF32, 0, 128, 0, 64), 0, Engine::kScalar), two), t,
      "scalar[0] dma_copy: ", "dma_copy moves between SBUF and HBM; dst is HBM and src0 PSUM");
}

TEST_CASE("validate: dma_copy queues, element counts, arguments and constants") {
  const Target t = kDefaultTarget;
  const std::vector<Argument> args = {argument("x", kF32, ArgDirection::kIn)};
  const auto s = isa::sbuf_tile(kF32, 0, 128, 0, 64);
  const auto x = isa::hbm_tile(0, kF32, 64, 0, 128, 0, 64);
  expect_valid(single(dma(s, x, 15), args));
  expect_invalid(single(dma(s, x, 16), args), t,
                 "sync[0] dma_copy: ", "DMA queue 16 does not exist; the core has 16");
  expect_invalid(single(dma(s, x, 255, Engine::kGpSimd), args), t,
                 "gpsimd[0] dma_copy: ", "DMA queue 255 does not exist");

  // Same element count, any shape.
  expect_valid(single(dma(isa::sbuf(kF32, 0, 64, 0, {{1, 128}}), x), args));
  expect_valid(single(dma(isa::sbuf(kF32, 0, 128, 0, {{8, 8}, {1, 8}}), x), args));
  expect_invalid(single(dma(s, isa::hbm_tile(0, kF32, 64, 0, 128, 0, 32)), args), t,
                 "sync[0] dma_copy: ", "dst has 8192 elements but src0 has 4096");
  expect_invalid(single(dma(isa::sbuf_tile(kF32, 0, 127, 0, 64), x), args), t,
                 "sync[0] dma_copy: ", "dst has 8128 elements but src0 has 8192");

  // Arguments that exist.
  expect_invalid(single(dma(s, isa::hbm_tile(1, kF32, 64, 0, 128, 0, 64)), args), t,
                 "sync[0] dma_copy: ", "src0 names argument 1, but the kernel has 1");
  expect_invalid(single(dma(s, x)), t,
                 "sync[0] dma_copy: ", "src0 names argument 0, but the kernel has 0");

  // The constants block: readable when there is one, never writable.
  const auto c = isa::hbm_tile(isa::kConstantsArg, kF32, 64, 0, 128, 0, 64);
  expect_valid(single(dma(s, c), args, 128 * 64 * 4));
  expect_invalid(single(dma(s, c), args), t,
                 "sync[0] dma_copy: ", "src0 uses the constants block, but the kernel has none");
  expect_invalid(single(dma(c, s), args, 128 * 64 * 4), t,
                 "sync[0] dma_copy: ", "dst writes the read-only constants");
  // Without a block the write is reported as a missing block ("reads" although it writes).
  expect_invalid(single(dma(c, s), args), t,
                 "sync[0] dma_copy: ", "dst uses the constants block, but the kernel has none");

  // Writing an argument needs `out` or `inout`.
  for (auto dir : {ArgDirection::kOut, ArgDirection::kInOut})
    expect_valid(single(dma(x, s), {argument("x", kF32, dir)}));
  expect_invalid(single(dma(x, s), args), t, "sync[0] dma_copy: ",
                 "dst writes argument 'x', which is declared 'in' (make it out or inout)");
  const std::vector<Argument> named = {argument("weights", kF32, ArgDirection::kOut),
                                       argument("bias", kF32, ArgDirection::kIn)};
  expect_invalid(single(dma(isa::hbm_tile(1, kF32, 64, 0, 128, 0, 64), s), named), t,
                 "sync[0] dma_copy: ", "dst writes argument 'bias', which is declared 'in'");
  // Reading an `out` argument is allowed.
  expect_valid(single(dma(s, x), {argument("x", kF32, ArgDirection::kOut)}));
}

TEST_CASE("validate: nc_matmul input and output dtypes") {
  const auto with_inputs = [](DType a, DType b, DType d = kF32) {
    return matmul(isa::psum_tile(d, 0, 128, 0, 512), isa::sbuf_tile(a, 0, 128, 0, 128),
                  isa::sbuf_tile(b, 0, 128, 256, 512));
  };
  for (DType dt : {kBf16, DType::kF16, DType::kFp8E4m3, DType::kFp8E5m2, kF32})
    for (uint32_t v : {2u, 3u, 4u}) expect_valid(single(with_inputs(dt, dt)), core(v));
  expect_valid(single(with_inputs(kBf16, DType::kFp8E4m3)));
  expect_valid(single(with_inputs(DType::kF16, kBf16)));
  const Target t = kDefaultTarget;
  expect_invalid(single(with_inputs(DType::kI8, kBf16)), t, "tensor[0] nc_matmul: ",
                 "inputs are i8 and bf16; nc_matmul takes bf16, f16, fp8e4m3, fp8e5m2, f32");
  expect_invalid(single(with_inputs(kBf16, DType::kI32)), t,
                 "tensor[0] nc_matmul: ", "inputs are bf16 and i32; nc_matmul takes");
  expect_invalid(single(with_inputs(DType::kU8, DType::kU8)), t,
                 "tensor[0] nc_matmul: ", "inputs are u8 and u8");
  expect_invalid(single(with_inputs(kF32, kBf16)), t,
                 "tensor[0] nc_matmul: ", "inputs are f32 and bf16; if one is f32 both must be");
  expect_invalid(single(with_inputs(DType::kFp8E5m2, kF32)), t,
                 "tensor[0] nc_matmul: ", "inputs are fp8e5m2 and f32; if one is f32 both must be");

  // dst f32; bf16 from NeuronCore-v4 only; nothing else.
  const auto bf16_dst = single(with_inputs(kBf16, kBf16, kBf16));
  for (uint32_t v : {2u, 3u})
    expect_invalid(bf16_dst, core(v), "tensor[0] nc_matmul: ",
                   "dst is bf16; PSUM accumulates in f32 (bf16 from NeuronCore-v4)");
  expect_valid(bf16_dst, core(4));
  for (DType dt : {DType::kF16, DType::kI32, DType::kFp8E4m3})
    expect_invalid(single(with_inputs(kBf16, kBf16, dt)), core(4), "tensor[0] nc_matmul: ",
                   std::string("dst is ") + isa::dtype_name(dt) + "; PSUM accumulates in f32");
}

TEST_CASE("validate: nc_matmul shapes: K, M, N and dst") {
  const Target t = kDefaultTarget;
  const auto mm = [](AccessPattern d, AccessPattern st, AccessPattern mv) {
    return single(matmul(d, st, mv));
  };
  // Contraction dim K: the same partitions for both inputs.
  expect_valid(mm(isa::psum_tile(kF32, 0, 16, 0, 64), isa::sbuf_tile(kBf16, 32, 32, 0, 16),
                  isa::sbuf_tile(kBf16, 32, 32, 64, 64)));
  expect_invalid(mm(isa::psum_tile(kF32, 0, 128, 0, 512), isa::sbuf_tile(kBf16, 0, 128, 0, 128),
                    isa::sbuf_tile(kBf16, 0, 64, 256, 512)),
                 t, "tensor[0] nc_matmul: ",
                 "stationary covers partitions 0+128 and moving 0+64; the contraction dim K must "
                 "be the same partitions for both");
  expect_invalid(mm(isa::psum_tile(kF32, 0, 16, 0, 64), isa::sbuf_tile(kBf16, 0, 32, 0, 16),
                    isa::sbuf_tile(kBf16, 32, 32, 64, 64)),
                 t, "tensor[0] nc_matmul: ", "stationary covers partitions 0+32 and moving 32+32");

  // M <= 128 (stationary free size), N <= 512 (moving free size).
  expect_invalid(mm(isa::psum_tile(kF32, 0, 128, 0, 512), isa::sbuf_tile(kBf16, 0, 128, 0, 129),
                    isa::sbuf_tile(kBf16, 0, 128, 512, 512)),
                 t, "tensor[0] nc_matmul: ", "stationary has 129 free elements (M); at most 128");
  expect_invalid(mm(isa::psum_tile(kF32, 0, 128, 0, 513), isa::sbuf_tile(kBf16, 0, 128, 0, 128),
                    isa::sbuf_tile(kBf16, 0, 128, 256, 513)),
                 t, "tensor[0] nc_matmul: ", "moving has 513 free elements (N); at most 512");

  // dst is [M x N].
  expect_valid(mm(isa::psum_tile(kF32, 0, 64, 0, 100), isa::sbuf_tile(kBf16, 0, 128, 0, 64),
                  isa::sbuf_tile(kBf16, 0, 128, 256, 100)));
  expect_valid(mm(isa::psum(kF32, 0, 64, 0, {{20, 5}, {1, 20}}),
                  isa::sbuf_tile(kBf16, 0, 128, 0, 64), isa::sbuf_tile(kBf16, 0, 128, 256, 100)));
  expect_invalid(mm(isa::psum_tile(kF32, 0, 128, 0, 256), isa::sbuf_tile(kBf16, 0, 128, 0, 128),
                    isa::sbuf_tile(kBf16, 0, 128, 256, 512)),
                 t,
                 "tensor[0] nc_matmul: ", "dst is [128 x 256] but the product is [M=128 x N=512]");
  expect_invalid(mm(isa::psum_tile(kF32, 0, 64, 0, 512), isa::sbuf_tile(kBf16, 0, 128, 0, 128),
                    isa::sbuf_tile(kBf16, 0, 128, 256, 512)),
                 t,
                 "tensor[0] nc_matmul: ", "dst is [64 x 512] but the product is [M=128 x N=512]");
}

TEST_CASE("validate: nc_matmul writes within one 2 KiB PSUM bank") {
  const Target t = kDefaultTarget;
  const std::string lbl = "tensor[0] nc_matmul: ";
  expect_valid(single(small_matmul(0)));
  expect_valid(single(small_matmul(2048 - 8)));  // bytes 2040..2047
  expect_invalid(single(small_matmul(2048 - 4)), t, lbl,
                 "dst spans PSUM bytes 2044..2051; a matmul writes within one of the 8 banks of "
                 "2048 bytes per partition");
  expect_valid(single(small_matmul(2048 * 3 + 100)));
  // A full bank, the last one.
  expect_valid(single(matmul(isa::psum_tile(kF32, 0, 128, 2048 * 7, 512),
                             isa::sbuf_tile(kBf16, 0, 128, 0, 128),
                             isa::sbuf_tile(kBf16, 0, 128, 256, 512))));
  expect_invalid(single(matmul(isa::psum_tile(kF32, 0, 128, 2048 * 7 + 4, 512),
                               isa::sbuf_tile(kBf16, 0, 128, 0, 128),
                               isa::sbuf_tile(kBf16, 0, 128, 256, 512))),
                 t, lbl, "dst spans PSUM bytes 14340..");
  expect_invalid(
      single(matmul(isa::psum_tile(kF32, 0, 128, 4, 512), isa::sbuf_tile(kBf16, 0, 128, 0, 128),
                    isa::sbuf_tile(kBf16, 0, 128, 256, 512))),
      t, lbl, "dst spans PSUM bytes 4..2051");
  // Past the 8 banks.
  expect_invalid(single(small_matmul(2048 * 8)), t, lbl, "within one of the 8 banks");
  expect_invalid(single(small_matmul(uint64_t{1} << 40)), t, lbl, "within one of the 8 banks");
  Target four_banks = kDefaultTarget;
  four_banks.psum_banks = 4;
  expect_valid(single(small_matmul(2048 * 3)), four_banks);
  expect_invalid(single(small_matmul(2048 * 4)), four_banks, lbl, "within one of the 4 banks");
  // Strides count: 256 f32 two apart stay in the bank, 512 do not.
  expect_valid(
      single(matmul(isa::psum(kF32, 0, 128, 0, {{2, 256}}), isa::sbuf_tile(kBf16, 0, 128, 0, 128),
                    isa::sbuf_tile(kBf16, 0, 128, 256, 256))));
  expect_invalid(
      single(matmul(isa::psum(kF32, 0, 128, 0, {{2, 512}}), isa::sbuf_tile(kBf16, 0, 128, 0, 128),
                    isa::sbuf_tile(kBf16, 0, 128, 256, 512))),
      t, lbl, "dst spans PSUM bytes 0..4091");
  // Negative strides reach below the offset.
  expect_valid(single(small_matmul(4, kF32, {{-1, 2}})));  // bytes 0..7
  expect_invalid(single(small_matmul(0, kF32, {{-1, 2}})), t, lbl, "dst spans PSUM bytes -1..");
  expect_invalid(single(small_matmul(2048, kF32, {{-1, 2}})), t, lbl,
                 "dst spans PSUM bytes 2044..2051");
  // bf16 dst (v4): 2-byte elements.
  expect_valid(single(small_matmul(2048 - 4, kBf16)), core(4));  // bytes 2044..2047
  expect_invalid(single(small_matmul(2048 - 2, kBf16)), core(4), lbl,
                 "dst spans PSUM bytes 2046..2049");
}

TEST_CASE("validate: nc_transpose sizes, shapes and dtypes") {
  const Target t = kDefaultTarget;
  // Tensor engine: up to 128 x 128.
  expect_valid(single(transpose(Engine::kTensor, isa::psum_tile(kF32, 0, 128, 0, 128),
                                isa::sbuf_tile(kF32, 0, 128, 0, 128))));
  expect_valid(single(transpose(Engine::kTensor, isa::psum_tile(kF32, 0, 32, 0, 64),
                                isa::sbuf_tile(kF32, 0, 64, 0, 32))));
  expect_invalid(single(transpose(Engine::kTensor, isa::psum_tile(kF32, 0, 128, 0, 64),
                                  isa::sbuf_tile(kF32, 0, 64, 0, 129))),
                 t, "tensor[0] nc_transpose: ",
                 "src0 is [64 x 129]; nc_transpose on tensor takes at most [128 x 128]");
  // Vector engine: up to 32 x 32.
  expect_valid(single(transpose(Engine::kVector, isa::sbuf_tile(kF32, 0, 32, 0, 32),
                                isa::sbuf_tile(kF32, 0, 32, 512, 32))));
  expect_valid(single(transpose(Engine::kVector, isa::sbuf_tile(kF32, 0, 16, 0, 8),
                                isa::psum_tile(kF32, 0, 8, 0, 16))));
  expect_invalid(single(transpose(Engine::kVector, isa::sbuf_tile(kF32, 0, 33, 0, 32),
                                  isa::sbuf_tile(kF32, 0, 32, 512, 33))),
                 t, "vector[0] nc_transpose: ",
                 "src0 is [32 x 33]; nc_transpose on vector takes at most [32 x 32]");
  expect_invalid(single(transpose(Engine::kVector, isa::sbuf_tile(kF32, 0, 16, 0, 64),
                                  isa::sbuf_tile(kF32, 0, 64, 512, 16))),
                 t, "vector[0] nc_transpose: ",
                 "src0 is [64 x 16]; nc_transpose on vector takes at most [32 x 32]");
  // dst is the transpose.
  expect_invalid(
      single(transpose(Engine::kTensor, isa::psum_tile(kF32, 0, 64, 0, 32),
                       isa::sbuf_tile(kF32, 0, 64, 0, 32))),
      t, "tensor[0] nc_transpose: ", "dst is [64 x 32]; the transpose of [64 x 32] is [32 x 64]");
  expect_invalid(single(transpose(Engine::kVector, isa::sbuf_tile(kF32, 0, 32, 0, 16),
                                  isa::sbuf_tile(kF32, 0, 32, 512, 32))),
                 t, "vector[0] nc_transpose: ", "the transpose of [32 x 32] is [32 x 32]");
  // Same dtype, or widened to f32.
  expect_valid(single(transpose(Engine::kTensor, isa::psum_tile(kBf16, 0, 128, 0, 128),
                                isa::sbuf_tile(kBf16, 0, 128, 0, 128))));
  expect_valid(single(transpose(Engine::kTensor, isa::psum_tile(kF32, 0, 128, 0, 128),
                                isa::sbuf_tile(DType::kFp8E4m3, 0, 128, 0, 128))));
  expect_invalid(single(transpose(Engine::kTensor, isa::psum_tile(kBf16, 0, 128, 0, 128),
                                  isa::sbuf_tile(kF32, 0, 128, 0, 128))),
                 t, "tensor[0] nc_transpose: ",
                 "dst is bf16 and src0 f32; a transpose keeps the dtype or widens to f32");
  expect_invalid(single(transpose(Engine::kVector, isa::sbuf_tile(DType::kF16, 0, 32, 0, 32),
                                  isa::sbuf_tile(kBf16, 0, 32, 512, 32))),
                 t, "vector[0] nc_transpose: ", "dst is f16 and src0 bf16");
}

TEST_CASE("validate: activation function, shapes and [P,1] columns") {
  const Target t = kDefaultTarget;
  const std::string lbl = "scalar[0] activation: ";
  const auto act = scalar_activation();
  expect_valid(single(act));
  expect_valid(single(
      changed(act, [](Instruction &i) { i.func = static_cast<uint8_t>(ActFunc::kGeluDx); })));
  expect_invalid(
      single(
          changed(act, [](Instruction &i) { i.func = static_cast<uint8_t>(isa::kActFuncCount); })),
      t, lbl, "unknown activation function 17");
  expect_invalid(single(changed(act, [](Instruction &i) { i.func = 200; })), t, lbl,
                 "unknown activation function 200");
  expect_invalid(
      single(changed(act, [](Instruction &i) { i.src0 = isa::psum_tile(kF32, 0, 128, 0, 32); })), t,
      lbl, "dst is [128 partitions x 64] but src0 is [128 x 32]; they must match");
  // Same element count in another shape is fine.
  expect_valid(single(changed(act, [](Instruction &i) {
    i.src0 = isa::psum(kF32, 0, 128, 0, {{8, 8}, {1, 8}});
  })));

  const auto col = isa::sbuf_tile(kF32, 0, 128, 4096, 1);
  const auto wide = isa::sbuf_tile(kF32, 0, 128, 4096, 2);
  const auto short_col = isa::sbuf_tile(kF32, 0, 64, 4096, 1);
  // bias from src1.
  const auto bias = changed(act, [&](Instruction &i) {
    i.flags |= isa::kFlagBiasTile;
    i.src1 = col;
  });
  expect_valid(single(bias));
  expect_invalid(single(changed(bias, [&](Instruction &i) { i.src1 = wide; })), t, lbl,
                 "bias (src1) must be a [128 partitions x 1] column, it is [128 x 2]");
  expect_invalid(single(changed(bias, [&](Instruction &i) { i.src1 = short_col; })), t, lbl,
                 "bias (src1) must be a [128 partitions x 1] column, it is [64 x 1]");
  // scale from src2.
  const auto scale = changed(act, [&](Instruction &i) {
    i.flags |= isa::kFlagScaleTile;
    i.src2 = col;
  });
  expect_valid(single(scale));
  expect_invalid(single(changed(scale, [&](Instruction &i) { i.src2 = wide; })), t, lbl,
                 "scale (src2) must be a [128 partitions x 1] column, it is [128 x 2]");
  // accumulate into dst2.
  const auto acc = changed(act, [&](Instruction &i) {
    i.flags |= isa::kFlagAccumulate;
    i.dst2 = isa::sbuf_tile(kF32, 0, 128, 8192, 1);
  });
  expect_valid(single(acc));
  expect_invalid(
      single(changed(acc, [](Instruction &i) { i.dst2 = isa::sbuf_tile(kF32, 0, 128, 8192, 4); })),
      t, lbl, "reduce result (dst2) must be a [128 partitions x 1] column, it is [128 x 4]");
  // All three at once, on GpSimd (NeuronCore-v4, SBUF only).
  auto all = changed(acc, [&](Instruction &i) {
    i.engine = Engine::kGpSimd;
    i.src0 = isa::sbuf_tile(kF32, 0, 128, 1024, 64);
    i.flags |= isa::kFlagBiasTile | isa::kFlagScaleTile;
    i.src1 = col;
    i.src2 = isa::sbuf_tile(kF32, 0, 128, 4100, 1);
  });
  expect_valid(single(all), core(4));
  expect_invalid(
      single(changed(all, [](Instruction &i) { i.dst2 = isa::psum_tile(kF32, 0, 128, 0, 1); })),
      core(4), "gpsimd[0] activation: ", "dst2 is in PSUM; gpsimd cannot access PSUM");
}

TEST_CASE("validate: tensor_tensor operator, PSUM inputs and shapes") {
  const Target t = kDefaultTarget;
  const std::string lbl = "vector[0] tensor_tensor: ";
  const auto tt = vector_tensor_tensor();
  expect_valid(single(tt));
  expect_valid(
      single(changed(tt, [](Instruction &i) { i.func = static_cast<uint8_t>(AluOp::kDivide); })));
  expect_invalid(single(changed(tt, [](Instruction &i) { i.func = 0; })), t, lbl,
                 "op 0 is not a binary ALU operator");
  expect_invalid(
      single(changed(tt, [](Instruction &i) { i.func = static_cast<uint8_t>(isa::kAluOpCount); })),
      t, lbl, "op 25 is not a binary ALU operator");
  expect_invalid(
      single(changed(tt, [](Instruction &i) { i.src1 = isa::psum_tile(kF32, 0, 128, 1024, 64); })),
      t, lbl, "src0 and src1 are both in PSUM; at most one input may be in PSUM");
  // dst in PSUM with one input in PSUM is fine.
  expect_valid(
      single(changed(tt, [](Instruction &i) { i.dst = isa::psum_tile(kF32, 0, 128, 2048, 64); })));
  expect_invalid(
      single(changed(tt, [](Instruction &i) { i.src0 = isa::psum_tile(kF32, 0, 128, 0, 32); })), t,
      lbl, "dst is [128 partitions x 64] but src0 is [128 x 32]; they must match");
  expect_invalid(
      single(changed(tt, [](Instruction &i) { i.src1 = isa::sbuf_tile(kF32, 0, 64, 256, 64); })), t,
      lbl, "dst is [128 partitions x 64] but src1 is [64 x 64]; they must match");
  expect_valid(single(changed(tt, [](Instruction &i) {
    i.src1 = isa::sbuf(kF32, 0, 128, 256, {{16, 4}, {1, 16}});
  })));
}

TEST_CASE("validate: tensor_scalar operators, engines and columns") {
  const Target t = kDefaultTarget;
  const std::string lbl = "vector[0] tensor_scalar: ";
  const auto ts = tensor_scalar_on(Engine::kVector, AluOp::kSubtract, AluOp::kBypass);
  expect_valid(single(ts));
  expect_invalid(single(changed(ts, [](Instruction &i) { i.func = 0; })), t, lbl,
                 "op0 is bypass; tensor_scalar needs a first operator");
  expect_invalid(
      single(changed(ts, [](Instruction &i) { i.func = static_cast<uint8_t>(isa::kAluOpCount); })),
      t, lbl, "unknown ALU operator 25/0");
  expect_invalid(
      single(changed(ts, [](Instruction &i) { i.func2 = static_cast<uint8_t>(isa::kAluOpCount); })),
      t, lbl, "unknown ALU operator 8/25");
  expect_invalid(
      single(changed(ts, [](Instruction &i) { i.src0 = isa::sbuf_tile(kF32, 0, 128, 256, 65); })),
      t, lbl, "dst is [128 partitions x 64] but src0 is [128 x 65]");

  // Operands from [P,1] columns.
  const auto col = isa::sbuf_tile(kF32, 0, 128, 4096, 1);
  const auto op0 = changed(ts, [&](Instruction &i) {
    i.flags |= isa::kFlagOperand0Tile;
    i.src1 = col;
  });
  expect_valid(single(op0));
  expect_invalid(
      single(changed(op0, [](Instruction &i) { i.src1 = isa::sbuf_tile(kF32, 0, 128, 4096, 2); })),
      t, lbl, "operand0 (src1) must be a [128 partitions x 1] column, it is [128 x 2]");
  const auto op1 = changed(ts, [&](Instruction &i) {
    i.func2 = static_cast<uint8_t>(AluOp::kMax);
    i.flags |= isa::kFlagOperand1Tile;
    i.src2 = col;
  });
  expect_valid(single(op1));
  expect_invalid(
      single(changed(op1, [](Instruction &i) { i.src2 = isa::psum_tile(kF32, 0, 32, 0, 1); })), t,
      lbl, "operand1 (src2) must be a [128 partitions x 1] column, it is [32 x 1]");

  // Bitvec operators on the Vector engine only.
  for (auto e : {Engine::kScalar, Engine::kGpSimd}) {
    const std::string l = std::string(isa::engine_name(e)) + "[0] tensor_scalar: ";
    expect_invalid(single(tensor_scalar_on(e, AluOp::kBitwiseAnd, AluOp::kBypass, DType::kI32)),
                   core(4), l, "bitvec operators run on the vector engine only");
    expect_invalid(single(tensor_scalar_on(e, AluOp::kAdd, AluOp::kShiftLeft, DType::kI32)),
                   core(4), l, "bitvec operators run on the vector engine only");
  }
  for (auto op : {AluOp::kBitwiseNot, AluOp::kBitwiseAnd, AluOp::kBitwiseOr, AluOp::kBitwiseXor,
                  AluOp::kShiftLeft, AluOp::kShiftRight}) {
    expect_valid(single(tensor_scalar_on(Engine::kVector, op, op, DType::kI32)));
    expect_invalid(single(tensor_scalar_on(Engine::kGpSimd, AluOp::kMultiply, op, DType::kI32)), t,
                   "gpsimd[0] tensor_scalar: ", "bitvec operators");
  }

  // The Scalar engine: add and multiply only up to NeuronCore-v3.
  for (uint32_t v : {2u, 3u}) {
    const Target tv = core(v);
    const std::string sl = "scalar[0] tensor_scalar: ";
    expect_valid(single(tensor_scalar_on(Engine::kScalar, AluOp::kAdd, AluOp::kMultiply)), tv);
    expect_valid(single(tensor_scalar_on(Engine::kScalar, AluOp::kMultiply, AluOp::kBypass)), tv);
    expect_invalid(single(tensor_scalar_on(Engine::kScalar, AluOp::kSubtract, AluOp::kBypass)), tv,
                   sl,
                   "the scalar engine of NeuronCore-v" + std::to_string(v) +
                       " supports only add and multiply in tensor_scalar, not subtract/bypass");
    expect_invalid(single(tensor_scalar_on(Engine::kScalar, AluOp::kAdd, AluOp::kMax)), tv, sl,
                   "supports only add and multiply in tensor_scalar, not add/max");
    // Other engines are not limited.
    expect_valid(single(tensor_scalar_on(Engine::kGpSimd, AluOp::kSubtract, AluOp::kMax)), tv);
    expect_valid(single(tensor_scalar_on(Engine::kVector, AluOp::kDivide, AluOp::kPower)), tv);
  }
  expect_valid(single(tensor_scalar_on(Engine::kScalar, AluOp::kSubtract, AluOp::kMax)), core(4));
  expect_valid(single(tensor_scalar_on(Engine::kScalar, AluOp::kDivide, AluOp::kBypass)), core(4));
}

TEST_CASE("validate: tensor_reduce operators, axes and the dst shape that keeps outer dims") {
  const Target t = kDefaultTarget;
  const std::string lbl = "vector[0] tensor_reduce: ";
  // src0 is [128 x [4, 32]].
  expect_valid(single(reduce(1, 4)));
  expect_valid(single(reduce(2, 1)));
  expect_valid(single(reduce(0, 1)));  // 0 = all axes
  expect_invalid(single(reduce(1, 1)), t, lbl,
                 "dst is [128 x 1] but reducing 1 axes of src0 leaves [128 x 4]");
  expect_invalid(single(reduce(0, 4)), t, lbl,
                 "dst is [128 x 4] but reducing 2 axes of src0 leaves [128 x 1]");
  expect_invalid(single(reduce(2, 4)), t, lbl, "reducing 2 axes of src0 leaves [128 x 1]");
  expect_invalid(single(changed(reduce(1, 4),
                                [](Instruction &i) { i.dst = isa::sbuf_tile(kF32, 0, 64, 0, 4); })),
                 t, lbl, "dst is [64 x 4] but reducing 1 axes of src0 leaves [128 x 4]");
  expect_invalid(single(reduce(3, 1)), t, lbl, "reduces 3 axes but src0 has 2 free dims");
  expect_invalid(single(changed(reduce(1, 4), [](Instruction &i) { i.iimm[0] = -1; })), t, lbl,
                 "reduces -1 axes but src0 has 2 free dims");
  // Three dims, keeping the outer two.
  expect_valid(single(built([](ProgramBuilder &b) {
    return b.tensor_reduce(isa::sbuf(kF32, 0, 128, 0, {{4, 2}, {1, 3}}),
                           isa::sbuf(kF32, 0, 128, 1024, {{24, 2}, {8, 3}, {1, 8}}), AluOp::kMax,
                           1);
  })));

  for (auto op : {AluOp::kAdd, AluOp::kSubtract, AluOp::kMultiply, AluOp::kMax, AluOp::kMin,
                  AluOp::kBitwiseAnd, AluOp::kBitwiseOr, AluOp::kBitwiseXor, AluOp::kLogicalAnd,
                  AluOp::kLogicalOr, AluOp::kLogicalXor})
    expect_valid(single(reduce(0, 1, op, DType::kI32)));
  for (auto op : {AluOp::kBypass, AluOp::kDivide, AluOp::kEqual, AluOp::kBitwiseNot,
                  AluOp::kShiftLeft, AluOp::kPower, AluOp::kAbsMax})
    expect_invalid(single(reduce(0, 1, op)), t, lbl,
                   std::string(isa::alu_op_name(op)) + " is not a reduction operator");
  expect_invalid(single(changed(reduce(0, 1), [](Instruction &i) { i.func = 99; })), t, lbl,
                 "? is not a reduction operator");
}

TEST_CASE("validate: tensor_copy and memset") {
  const Target t = kDefaultTarget;
  expect_valid(single(vector_copy()));
  // Casts are allowed; shapes must match in element count per partition.
  expect_valid(single(changed(vector_copy(), [](Instruction &i) {
    i.dst = isa::sbuf(kBf16, 0, 128, 0, {{8, 8}, {1, 8}});
  })));
  expect_invalid(
      single(changed(vector_copy(),
                     [](Instruction &i) { i.src0 = isa::psum_tile(kF32, 0, 128, 0, 32); })),
      t, "vector[0] tensor_copy: ",
      "dst is [128 partitions x 64] but src0 is [128 x 32]; they must match");
  // GpSimd: SBUF only. (The rule's own message, "tensor_copy on gpsimd works in SBUF only", is
  // shadowed by the general GpSimd and HBM rules, which fire first.)
  const auto gp = instance(Opcode::kTensorCopy, Engine::kGpSimd);
  expect_valid(single(gp));
  expect_invalid(
      single(changed(gp, [](Instruction &i) { i.src0 = isa::psum_tile(kF32, 0, 128, 0, 64); })), t,
      "gpsimd[0] tensor_copy: ", "src0 is in PSUM; gpsimd cannot access PSUM");
  expect_invalid(
      single(changed(gp, [](Instruction &i) { i.dst = isa::psum_tile(kF32, 0, 128, 0, 64); })), t,
      "gpsimd[0] tensor_copy: ", "dst is in PSUM; gpsimd cannot access PSUM");
  // Scalar (from v3) may read PSUM.
  const auto sc = changed(vector_copy(), [](Instruction &i) { i.engine = Engine::kScalar; });
  expect_valid(single(sc), core(3));
  expect_invalid(
      single(changed(sc, [](Instruction &i) { i.dst = isa::sbuf_tile(kF32, 0, 128, 0, 63); })),
      core(4), "scalar[0] tensor_copy: ", "dst is [128 partitions x 63] but src0");
  // memset: any shape, SBUF or (Vector) PSUM.
  expect_valid(single(instance(Opcode::kMemset, Engine::kGpSimd)));
  expect_valid(single(vector_memset(isa::psum(kBf16, 32, 32, 0, {{1, 7}}))));
}

TEST_CASE("validate: iota destination and pattern") {
  const Target t = kDefaultTarget;
  const std::string lbl = "gpsimd[0] iota: ";
  const auto dst = isa::sbuf_tile(DType::kI32, 0, 128, 0, 64);
  expect_valid(single(iota(dst, isa::pattern({{1, 64}}))));
  expect_valid(single(iota(dst, isa::pattern({{8, 8}, {1, 8}}))));
  expect_valid(single(iota(isa::sbuf_tile(kF32, 0, 128, 0, 1), isa::pattern({}))));
  expect_invalid(single(iota(dst, isa::sbuf_tile(DType::kI32, 0, 128, 1024, 64))), t, lbl,
                 "src0 must be a pattern (no memory), it is in SBUF");
  expect_invalid(single(iota(dst, isa::pattern({{1, 32}}))), t, lbl,
                 "the pattern has 32 elements per partition but dst has 64");
  expect_invalid(single(iota(dst, isa::pattern({{1, 64}, {1, 2}}))), t, lbl,
                 "the pattern has 128 elements per partition but dst has 64");
  expect_invalid(single(changed(iota(dst, isa::pattern({{1, 64}})),
                                [](Instruction &i) { i.src0.num_dims = 5; })),
                 t, lbl, "the pattern has 5 dims; at most 4");
  // dst must be SBUF. (iota's own "iota writes SBUF only" is shadowed by the GpSimd / HBM rules.)
  expect_invalid(single(iota(isa::psum_tile(DType::kI32, 0, 128, 0, 64), isa::pattern({{1, 64}}))),
                 t, lbl, "dst is in PSUM; gpsimd cannot access PSUM");
  expect_invalid(
      single(iota(isa::hbm_tile(0, DType::kI32, 64, 0, 128, 0, 64), isa::pattern({{1, 64}})),
             {argument("o", DType::kI32, ArgDirection::kOut)}),
      t, lbl, "dst is in HBM; only dma_copy reaches HBM");
  // The dst is an engine access pattern: aligned.
  expect_invalid(single(iota(isa::sbuf_tile(DType::kI32, 16, 16, 0, 64), isa::pattern({{1, 64}}))),
                 t, lbl, "dst starts at partition 16 with 16 partitions");
}

TEST_CASE("validate: affine_select comparison, memories, pattern and on_true shape") {
  const Target t = kDefaultTarget;
  const std::string lbl = "gpsimd[0] affine_select: ";
  const auto on_true = isa::sbuf_tile(kF32, 0, 128, 1024, 64);
  for (auto cmp : {AluOp::kEqual, AluOp::kNotEqual, AluOp::kGreater, AluOp::kGreaterEqual,
                   AluOp::kLess, AluOp::kLessEqual})
    expect_valid(single(affine_select(cmp, on_true)));
  for (auto cmp : {AluOp::kBypass, AluOp::kAdd, AluOp::kMax, AluOp::kLogicalAnd, AluOp::kDivide})
    expect_invalid(single(affine_select(cmp, on_true)), t, lbl,
                   "affine_select compares with equal, not_equal, greater(_equal) or less(_equal)");
  expect_invalid(
      single(changed(affine_select(AluOp::kLess, on_true),
                     [](Instruction &i) { i.func = static_cast<uint8_t>(isa::kAluOpCount); })),
      t, lbl, "affine_select compares with");
  // on_true has dst's shape.
  expect_invalid(single(affine_select(AluOp::kLess, isa::sbuf_tile(kF32, 0, 128, 1024, 32))), t,
                 lbl,
                 "dst is [128 partitions x 64] but on_true (src1) is [128 x 32]; they must match");
  expect_invalid(single(affine_select(AluOp::kLess, isa::sbuf_tile(kF32, 0, 64, 1024, 64))), t, lbl,
                 "but on_true (src1) is [64 x 64]");
  // The pattern.
  const auto sel = affine_select(AluOp::kGreaterEqual, on_true);
  expect_invalid(single(changed(sel,
                                [](Instruction &i) {
                                  i.src0 = isa::pattern({{1, 63}});
                                })),
                 t, lbl, "the pattern has 63 elements per partition but dst has 64");
  expect_invalid(
      single(changed(sel, [](Instruction &i) { i.src0 = isa::psum_tile(kF32, 0, 128, 0, 64); })), t,
      lbl, "src0 must be a pattern (no memory), it is in PSUM");
  expect_invalid(single(changed(sel, [](Instruction &i) { i.src0.num_dims = 5; })), t, lbl,
                 "the pattern has 5 dims; at most 4");
  // SBUF only. (The rule's own "affine_select works in SBUF only" is shadowed by the GpSimd
  // rule, which fires first.)
  expect_invalid(
      single(changed(sel, [](Instruction &i) { i.src1 = isa::psum_tile(kF32, 0, 128, 0, 64); })), t,
      lbl, "src1 is in PSUM; gpsimd cannot access PSUM");
  expect_invalid(
      single(changed(sel, [](Instruction &i) { i.dst = isa::psum_tile(kF32, 0, 128, 0, 64); })), t,
      lbl, "dst is in PSUM; gpsimd cannot access PSUM");
  expect_invalid(single(changed(sel, [](Instruction &i) { i.src1 = {}; })), t, lbl,
                 "src1 is missing: this instruction reads or writes it");
}

TEST_CASE("validate: sem_wait needs a wait, sem_signal an update") {
  const Target t = kDefaultTarget;
  ProgramBuilder b("sems");
  b.sem_wait(Engine::kVector, 4, 2);
  b.sem_signal(Engine::kGpSimd, 4, 2).wait_eq(5, 1);
  b.sem_wait(Engine::kTensor, 5, 1).signal_set(6, 0);
  b.barrier();
  expect_valid(b.program());

  Instruction wait;
  wait.opcode = Opcode::kSemWait;
  wait.engine = Engine::kScalar;
  expect_invalid(single(wait), t, "scalar[0] sem_wait: ", "sem_wait has no wait condition");
  expect_invalid(single(changed(wait,
                                [](Instruction &i) {
                                  i.signal = {isa::SemOp::kAdd, 1, 1};
                                })),
                 t, "scalar[0] sem_wait: ", "sem_wait has no wait condition");
  Instruction signal;
  signal.opcode = Opcode::kSemSignal;
  signal.engine = Engine::kTensor;
  expect_invalid(single(signal), t, "tensor[0] sem_signal: ", "sem_signal has no semaphore update");
  expect_invalid(single(changed(signal,
                                [](Instruction &i) {
                                  i.wait = {isa::SemCmp::kEq, 1, 1};
                                })),
                 t, "tensor[0] sem_signal: ", "sem_signal has no semaphore update");
}

TEST_CASE("validate: the failing instruction's index within its stream") {
  ProgramBuilder b("index");
  for (int k = 0; k < 3; ++k) b.memset(Engine::kVector, isa::sbuf_tile(kF32, 0, 128, 0, 64), 0.0f);
  b.memset(Engine::kGpSimd, isa::sbuf_tile(kF32, 0, 128, 0, 64), 0.0f);
  expect_valid(b.program());
  b.memset(Engine::kVector, isa::sbuf_tile(kF32, 0, 0, 0, 64), 0.0f);
  expect_invalid(b.program(), kDefaultTarget, "vector[3] memset: ", "dst has 0 partitions");
  // The first violation in engine order is the one reported.
  b.matmul(isa::sbuf_tile(kF32, 0, 128, 0, 512), isa::sbuf_tile(kBf16, 0, 128, 0, 128),
           isa::sbuf_tile(kBf16, 0, 128, 256, 512), true);
  expect_invalid(b.program(), kDefaultTarget, "tensor[0] nc_matmul: ", "dst is in SBUF");
}

TEST_CASE("validate: source lines, one per instruction or none") {
  ProgramBuilder b("lines");
  b.memset(Engine::kVector, isa::sbuf_tile(kF32, 0, 128, 0, 64), 0.0f).line(3);
  b.memset(Engine::kVector, isa::sbuf_tile(kF32, 0, 128, 0, 64), 1.0f);
  b.memset(Engine::kGpSimd, isa::sbuf_tile(kF32, 0, 128, 0, 64), 1.0f);
  Program p = b.finish();
  REQUIRE(p.source_lines[1].size() == 2);
  expect_valid(p);
  p.source_lines[1].push_back(9);
  auto err = isa::validate_program(p, kDefaultTarget);
  REQUIRE(err);
  CHECK(*err == "vector has 2 instructions but 3 source lines");
  p.source_lines[1].clear();
  expect_valid(p);
  p.source_lines[3] = {1, 2};
  err = isa::validate_program(p, kDefaultTarget);
  REQUIRE(err);
  CHECK(*err == "gpsimd has 1 instructions but 2 source lines");
  // Lines for an engine without instructions.
  p.source_lines[3] = {1};
  p.source_lines[0] = {7};
  err = isa::validate_program(p, kDefaultTarget);
  REQUIRE(err);
  CHECK(*err == "tensor has 0 instructions but 1 source lines");
}

TEST_CASE("validate: arguments need a known dtype and direction") {
  const auto with_arg = [](DType dtype, ArgDirection dir) {
    Program p;
    p.args.push_back(argument("x", kF32, ArgDirection::kIn));
    p.args.push_back(argument("bad", dtype, dir));
    return p;
  };
  for (auto dir : {ArgDirection::kIn, ArgDirection::kOut, ArgDirection::kInOut})
    for (DType dt : {kF32, kBf16, DType::kF16, DType::kFp8E4m3, DType::kFp8E5m2, DType::kI32,
                     DType::kI16, DType::kI8, DType::kU8})
      expect_valid(with_arg(dt, dir));
  for (DType dt : {DType::kInvalid, static_cast<DType>(10), static_cast<DType>(255)}) {
    const auto err = isa::validate_program(with_arg(dt, ArgDirection::kIn), kDefaultTarget);
    REQUIRE(err);
    CHECK(*err == "argument 'bad' has an unknown dtype");
  }
  for (auto dir : {static_cast<ArgDirection>(0), static_cast<ArgDirection>(4)}) {
    const auto err = isa::validate_program(with_arg(kF32, dir), kDefaultTarget);
    REQUIRE(err);
    CHECK(*err == "argument 'bad' has an unknown direction");
  }
}

TEST_CASE("validate: check_instruction without a program skips the argument checks") {
  const auto d =
      dma(isa::sbuf_tile(kF32, 0, 128, 0, 64), isa::hbm_tile(7, kF32, 64, 0, 128, 0, 64));
  CHECK_FALSE(isa::check_instruction(d, kDefaultTarget).has_value());
  const auto c = dma(isa::sbuf_tile(kF32, 0, 128, 0, 64),
                     isa::hbm_tile(isa::kConstantsArg, kF32, 64, 0, 128, 0, 64));
  CHECK_FALSE(isa::check_instruction(c, kDefaultTarget).has_value());
  // Writing the constants is still caught.
  CHECK(isa::check_instruction(dma(c.src0, c.dst), kDefaultTarget) ==
        "dst writes the read-only constants");
  // Labels.
  CHECK(isa::instruction_label(Engine::kTensor, 3, Opcode::kMatmul) == "tensor[3] nc_matmul");
  CHECK(label(Engine::kGpSimd, 12, Opcode::kAffineSelect) == "gpsimd[12] affine_select: ");
}

TEST_CASE("validate: SBUF and PSUM byte ranges against the target's partition size") {
  const Target trn2 = kDefaultTarget;  // NeuronCore-v3: 224 KiB of SBUF per partition
  Target trn3 = core(4);
  trn3.sbuf_bytes_per_partition = 256 * 1024;
  const std::string lbl = "vector[0] memset: ";
  // @229000 [1,512] f32: bytes [229000, 231048), past trn2's 229376, inside trn3's 262144.
  const auto past = single(vector_memset(isa::sbuf_tile(kF32, 0, 128, 229000, 512)));
  expect_invalid(past, trn2, lbl,
                 "dst reaches bytes [229000, 231048) of each SBUF partition, which has 229376 "
                 "bytes on NeuronCore-v3");
  expect_valid(past, trn3);
  // The last byte of the partition is fine, one more is not.
  expect_valid(single(vector_memset(isa::sbuf_tile(kF32, 0, 128, 229376 - 2048, 512))));
  expect_invalid(single(vector_memset(isa::sbuf_tile(kF32, 0, 128, 229376 - 2047, 512))), trn2, lbl,
                 "reaches bytes [227329, 229377)");
  // Negative strides reach below the offset.
  expect_valid(single(vector_memset(isa::sbuf(kF32, 0, 128, 12, {{-1, 4}}))));
  expect_invalid(single(vector_memset(isa::sbuf(kF32, 0, 128, 8, {{-1, 4}}))), trn2, lbl,
                 "dst reaches bytes [-4, 12) of each SBUF partition");
  // Offsets near 2^64 are not wrapped.
  expect_invalid(single(vector_memset(isa::sbuf_tile(kF32, 0, 128, ~uint64_t{0} - 3, 1))), trn2,
                 lbl, "reaches bytes [18446744073709551612, 18446744073709551616)");
  // PSUM: 16 KiB per partition.
  expect_valid(single(vector_memset(isa::psum_tile(kF32, 0, 128, 16384 - 64, 16))));
  expect_invalid(single(vector_memset(isa::psum_tile(kF32, 0, 128, 16384 - 60, 16))), trn2, lbl,
                 "dst reaches bytes [16324, 16388) of each PSUM partition, which has 16384 bytes");
  // Every operand, dma_copy's SBUF side included.
  expect_invalid(
      single(changed(vector_tensor_tensor(),
                     [](Instruction &i) { i.src1 = isa::sbuf_tile(kF32, 0, 128, 300000, 64); })),
      trn2, "vector[0] tensor_tensor: ", "src1 reaches bytes [300000, 300256)");
  const auto dma = built([](ProgramBuilder &b) {
    const auto x = b.arg("x", kF32, {128, 64}, ArgDirection::kIn);
    return b.dma_copy(Engine::kSync, 0, isa::sbuf_tile(kF32, 0, 128, 229376, 64),
                      isa::hbm_tile(x, kF32, 64, 0, 128, 0, 64));
  });
  expect_invalid(single(dma, {argument("x", kF32, ArgDirection::kIn)}), trn2,
                 "sync[0] dma_copy: ", "dst reaches bytes [229376, 229632) of each SBUF partition");
}

TEST_CASE("validate: tensor_tensor bypass is rejected, pointing at tensor_copy") {
  const auto tt = changed(vector_tensor_tensor(),
                          [](Instruction &i) { i.func = static_cast<uint8_t>(AluOp::kBypass); });
  expect_invalid(single(tt), kDefaultTarget, "vector[0] tensor_tensor: ",
                 "op 0 is not a binary ALU operator (bypass: to copy src0, use tensor_copy)");
}

TEST_CASE("validate: an instruction's error names its source file and line") {
  ProgramBuilder b("located");
  b.memset(Engine::kVector, isa::sbuf_tile(kF32, 0, 128, 0, 64), 0.0f).at("kernels/softmax.cpp", 9);
  b.memset(Engine::kVector, isa::sbuf_tile(kF32, 0, 128, 1u << 20, 64), 1.0f)
      .at("kernels/helpers.hpp", 57);
  Program p = b.finish();
  auto err = isa::validate_program(p, kDefaultTarget);
  REQUIRE(err);
  CHECK(err->rfind("vector[1] memset (kernels/helpers.hpp:57): ", 0) == 0);
  // The program's only file: "file:line"; without a file: "line N".
  p.source_files.clear();
  p.source_file_ids = {};
  err = isa::validate_program(p, kDefaultTarget);
  REQUIRE(err);
  CHECK(err->rfind("vector[1] memset (kernels/softmax.cpp:57): ", 0) == 0);
  p.source_file.clear();
  err = isa::validate_program(p, kDefaultTarget);
  REQUIRE(err);
  CHECK(err->rfind("vector[1] memset (line 57): ", 0) == 0);
  // No line: the label alone, as before.
  p.source_lines = {};
  err = isa::validate_program(p, kDefaultTarget);
  REQUIRE(err);
  CHECK(err->rfind("vector[1] memset: ", 0) == 0);
}

TEST_CASE("validate: source file ids, one per instruction or none, naming declared files") {
  ProgramBuilder b("files");
  b.memset(Engine::kVector, isa::sbuf_tile(kF32, 0, 128, 0, 64), 0.0f).at("a.cpp", 1);
  b.memset(Engine::kVector, isa::sbuf_tile(kF32, 0, 128, 64, 64), 1.0f).at("b.hpp", 2);
  Program p = b.finish();
  REQUIRE(p.source_file_ids[1] == std::vector<uint32_t>{0, 1});
  expect_valid(p);
  p.source_file_ids[1] = {0, 2};
  auto err = isa::validate_program(p, kDefaultTarget);
  REQUIRE(err);
  CHECK(*err == "vector[1] names source file 2, but the program has files 0..1");
  p.source_file_ids[1] = {0};
  err = isa::validate_program(p, kDefaultTarget);
  REQUIRE(err);
  CHECK(*err == "vector has 2 instructions but 1 source file ids");
  p.source_file_ids[1] = {0, 1};
  p.source_files[0].clear();
  err = isa::validate_program(p, kDefaultTarget);
  REQUIRE(err);
  CHECK(*err == "source file 1 has an empty name");
}
