// Engines, opcodes and the function/operator enums of the ISA (docs/ISA.md). Numeric values are
// part of the kernel binary format: append only, never renumber.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace trn::isa {

// The five sequencers of a NeuronCore, each with its own instruction stream.
enum class Engine : uint8_t { kTensor = 0, kVector = 1, kScalar = 2, kGpSimd = 3, kSync = 4 };
constexpr uint32_t kEngineCount = 5;
const char *engine_name(Engine e);  // "tensor", "vector", "scalar", "gpsimd", "sync"
std::optional<Engine> parse_engine(std::string_view name);

enum class Opcode : uint8_t {
  kNop = 0,  // does nothing; carries a semaphore wait and/or update (sem_wait / sem_signal)
  kDmaCopy = 1,
  kMatmul = 2,
  kTranspose = 3,
  kActivation = 4,
  kTensorTensor = 5,
  kTensorScalar = 6,
  kTensorReduce = 7,
  kTensorCopy = 8,
  kMemset = 9,
  kIota = 10,
  kAffineSelect = 11,
  kSemWait = 12,
  kSemSignal = 13,
  kBarrier = 14,
};
constexpr uint32_t kOpcodeCount = 15;
const char *opcode_name(Opcode op);  // "dma_copy", "nc_matmul", ...
std::optional<Opcode> parse_opcode(std::string_view name);

// Activation functions (Scalar engine), `activation` computes func(data * scale + bias).
enum class ActFunc : uint8_t {
  kIdentity = 0,
  kRelu = 1,
  kGelu = 2,
  kGeluTanh = 3,
  kSilu = 4,
  kSigmoid = 5,
  kTanh = 6,
  kExp = 7,
  kLog = 8,
  kSqrt = 9,
  kRsqrt = 10,
  kReciprocal = 11,
  kSquare = 12,
  kErf = 13,
  kGeluDx = 14,  // gelu's derivative, Φ(x) + x·φ(x) (NKI's gelu_dx): GELU's backward
  kSin = 15,
  kCos = 16,
};
constexpr uint32_t kActFuncCount = 17;
const char *act_func_name(ActFunc f);
std::optional<ActFunc> parse_act_func(std::string_view name);

// ALU operators of tensor_tensor, tensor_scalar and tensor_reduce (docs/hardware.md §2.3).
enum class AluOp : uint8_t {
  kBypass = 0,  // no operation (tensor_scalar's second op when unused)
  // bitvec: operate on the integer bit patterns (integer dtypes only)
  kBitwiseNot = 1,
  kBitwiseAnd = 2,
  kBitwiseOr = 3,
  kBitwiseXor = 4,
  kShiftLeft = 5,
  kShiftRight = 6,  // logical
  // arithmetic: in fp32
  kAdd = 7,
  kSubtract = 8,
  kMultiply = 9,
  kMax = 10,
  kMin = 11,
  kEqual = 12,
  kNotEqual = 13,
  kGreater = 14,
  kGreaterEqual = 15,
  kLess = 16,
  kLessEqual = 17,
  kLogicalAnd = 18,
  kLogicalOr = 19,
  kLogicalXor = 20,
  kPower = 21,
  kAbsMax = 22,
  kAbsMin = 23,
  kDivide = 24,
};
constexpr uint32_t kAluOpCount = 25;
const char *alu_op_name(AluOp op);
std::optional<AluOp> parse_alu_op(std::string_view name);
bool alu_op_is_bitvec(AluOp op);
// Operators a tensor_reduce accepts (add, subtract, multiply, max, min, bitwise and/or/xor,
// logical and/or/xor).
bool alu_op_is_reduction(AluOp op);

// Semaphore wait comparison and update operation.
enum class SemCmp : uint8_t { kNone = 0, kGe = 1, kEq = 2 };
enum class SemOp : uint8_t { kNone = 0, kAdd = 1, kSet = 2 };

}  // namespace trn::isa
