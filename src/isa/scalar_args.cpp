#include "isa/scalar_args.hpp"

#include <fmt/format.h>

#include <bit>

namespace trn::isa {

const char *imm_slot_name(ImmSlot slot) {
  switch (slot) {
    case ImmSlot::kImm0: return "imm0";
    case ImmSlot::kImm1: return "imm1";
    case ImmSlot::kIimm0: return "iimm0";
    case ImmSlot::kIimm1: return "iimm1";
  }
  return "invalid";
}

DType imm_slot_dtype(ImmSlot slot) {
  return slot == ImmSlot::kImm0 || slot == ImmSlot::kImm1 ? DType::kF32 : DType::kI32;
}

bool is_scalar_dtype(DType t) {
  return t == DType::kF32 || t == DType::kI32;
}

bool uses_scalar_args(const Instruction &inst) {
  for (uint16_t a : inst.scalar_arg)
    if (a != kNoScalarArg) return true;
  return false;
}

bool uses_scalar_args(const Program &program) {
  for (const Argument &a : program.args)
    if (a.is_scalar()) return true;
  for (const auto &stream : program.streams)
    for (const Instruction &inst : stream)
      if (uses_scalar_args(inst)) return true;
  return false;
}

bool slot_accepts_scalar(const Instruction &inst, ImmSlot slot) {
  const bool imm0 = slot == ImmSlot::kImm0, imm1 = slot == ImmSlot::kImm1;
  const bool iimm = slot == ImmSlot::kIimm0 || slot == ImmSlot::kIimm1;
  switch (inst.opcode) {
    case Opcode::kActivation:
      return (imm0 && !(inst.flags & kFlagScaleTile)) || (imm1 && !(inst.flags & kFlagBiasTile));
    case Opcode::kTensorScalar:
      return (imm0 && !(inst.flags & kFlagOperand0Tile)) ||
             (imm1 && !(inst.flags & kFlagOperand1Tile));
    case Opcode::kMemset: return imm0;
    case Opcode::kIota: return iimm;
    case Opcode::kAffineSelect: return imm0 || iimm;
    default: return false;
  }
}

std::optional<std::string> check_scalar_arg(const Argument &arg) {
  if (!arg.is_scalar()) return std::nullopt;
  if (!is_scalar_dtype(arg.dtype))
    return fmt::format("scalar argument '{}' has dtype {}; a scalar is f32 or i32", arg.name,
                       dtype_name(arg.dtype));
  if (!arg.shape.empty())
    return fmt::format("scalar argument '{}' has rank {}; a scalar has rank 0", arg.name,
                       arg.shape.size());
  if (arg.direction != ArgDirection::kIn)
    return fmt::format("scalar argument '{}' is {}; a scalar is passed in (direction in)", arg.name,
                       arg_direction_name(arg.direction));
  return std::nullopt;
}

std::optional<std::string> check_scalar_refs(const Instruction &inst,
                                             std::span<const Argument> args) {
  for (uint32_t s = 0; s < kImmSlotCount; ++s) {
    const uint16_t index = inst.scalar_arg[s];
    if (index == kNoScalarArg) continue;
    const auto slot = static_cast<ImmSlot>(s);
    const char *name = imm_slot_name(slot);
    if (index >= args.size())
      return fmt::format("{} reads argument {}, but the kernel has {}", name, index, args.size());
    const Argument &a = args[index];
    if (!a.is_scalar())
      return fmt::format(
          "{} reads argument {} ('{}'), which is a tensor; only a scalar argument "
          "can stand for an immediate",
          name, index, a.name);
    if (a.dtype != imm_slot_dtype(slot))
      return fmt::format("{} reads scalar argument '{}' of dtype {}; {} holds {}", name, a.name,
                         dtype_name(a.dtype), name, dtype_name(imm_slot_dtype(slot)));
    const bool value_zero =
        s < 2 ? std::bit_cast<uint32_t>(inst.imm[s]) == 0 : inst.iimm[s - 2] == 0;
    if (!value_zero)
      return fmt::format("{} reads scalar argument '{}' but also holds a value; it must be 0", name,
                         a.name);
  }
  return std::nullopt;
}

void read_scalar_arg(Instruction &inst, ImmSlot slot, uint16_t arg) {
  const auto s = static_cast<uint32_t>(slot);
  inst.scalar_arg[s] = arg;
  if (s < 2)
    inst.imm[s] = 0.0f;
  else
    inst.iimm[s - 2] = 0;
}

void bind_scalar_args(Instruction &inst, ScalarValues values) {
  for (uint32_t s = 0; s < kImmSlotCount; ++s) {
    const uint16_t index = inst.scalar_arg[s];
    if (index == kNoScalarArg || index >= values.size()) continue;
    const auto bits = static_cast<uint32_t>(values[index]);
    if (s < 2)
      inst.imm[s] = std::bit_cast<float>(bits);
    else
      inst.iimm[s - 2] = static_cast<int32_t>(bits);
  }
}

std::array<std::vector<Instruction>, kEngineCount> bind_scalar_streams(const Program &program,
                                                                       ScalarValues values) {
  std::array<std::vector<Instruction>, kEngineCount> out;
  for (uint32_t e = 0; e < kEngineCount; ++e) {
    const auto &stream = program.streams[e];
    bool any = false;
    for (const Instruction &inst : stream) any = any || uses_scalar_args(inst);
    if (!any) continue;
    out[e] = stream;
    for (Instruction &inst : out[e]) bind_scalar_args(inst, values);
  }
  return out;
}

}  // namespace trn::isa
