#include "isa/opcodes.hpp"

#include <array>

namespace trn::isa {

namespace {

// One name table per enum, indexed by value; parse is the reverse lookup.
template <size_t N>
const char *name_of(const std::array<const char *, N> &names, uint32_t value) {
  return value < N ? names[value] : "invalid";
}

template <typename Enum, size_t N>
std::optional<Enum> parse_name(const std::array<const char *, N> &names, std::string_view name) {
  for (uint32_t i = 0; i < N; ++i)
    if (name == names[i]) return static_cast<Enum>(i);
  return std::nullopt;
}

constexpr std::array<const char *, kEngineCount> kEngineNames = {"tensor", "vector", "scalar",
                                                                 "gpsimd", "sync"};
constexpr std::array<const char *, kOpcodeCount> kOpcodeNames = {
    "nop",           "dma_copy",      "nc_matmul",     "nc_transpose", "activation",
    "tensor_tensor", "tensor_scalar", "tensor_reduce", "tensor_copy",  "memset",
    "iota",          "affine_select", "sem_wait",      "sem_signal",   "barrier"};
constexpr std::array<const char *, kActFuncCount> kActNames = {
    "identity", "relu",  "gelu",       "gelu_tanh", "silu", "sigmoid", "tanh", "exp", "log",
    "sqrt",     "rsqrt", "reciprocal", "square",    "erf",  "gelu_dx", "sin",  "cos"};
constexpr std::array<const char *, kAluOpCount> kAluNames = {
    "bypass",        "bitwise_not", "bitwise_and", "bitwise_or",  "bitwise_xor",
    "shift_left",    "shift_right", "add",         "subtract",    "multiply",
    "max",           "min",         "equal",       "not_equal",   "greater",
    "greater_equal", "less",        "less_equal",  "logical_and", "logical_or",
    "logical_xor",   "power",       "abs_max",     "abs_min",     "divide"};

}  // namespace

const char *engine_name(Engine e) {
  return name_of(kEngineNames, static_cast<uint32_t>(e));
}
std::optional<Engine> parse_engine(std::string_view name) {
  return parse_name<Engine>(kEngineNames, name);
}
const char *opcode_name(Opcode op) {
  return name_of(kOpcodeNames, static_cast<uint32_t>(op));
}
std::optional<Opcode> parse_opcode(std::string_view name) {
  return parse_name<Opcode>(kOpcodeNames, name);
}
const char *act_func_name(ActFunc f) {
  return name_of(kActNames, static_cast<uint32_t>(f));
}
std::optional<ActFunc> parse_act_func(std::string_view name) {
  return parse_name<ActFunc>(kActNames, name);
}
const char *alu_op_name(AluOp op) {
  return name_of(kAluNames, static_cast<uint32_t>(op));
}
std::optional<AluOp> parse_alu_op(std::string_view name) {
  return parse_name<AluOp>(kAluNames, name);
}

bool alu_op_is_bitvec(AluOp op) {
  return op >= AluOp::kBitwiseNot && op <= AluOp::kShiftRight;
}

bool alu_op_is_reduction(AluOp op) {
  switch (op) {
    case AluOp::kAdd:
    case AluOp::kSubtract:
    case AluOp::kMultiply:
    case AluOp::kMax:
    case AluOp::kMin:
    case AluOp::kBitwiseAnd:
    case AluOp::kBitwiseOr:
    case AluOp::kBitwiseXor:
    case AluOp::kLogicalAnd:
    case AluOp::kLogicalOr:
    case AluOp::kLogicalXor: return true;
    default: return false;
  }
}

}  // namespace trn::isa
