// Scalar kernel arguments: values passed at launch that instructions read in place of an
// immediate (docs/ISA.md, "Scalar arguments"). The rules here are shared by the container
// reader, validation, the assembler, the disassembler and the simulator's launch path.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "isa/program.hpp"

namespace trn::isa {

const char *imm_slot_name(ImmSlot slot);  // "imm0", "imm1", "iimm0", "iimm1"
// The dtype a scalar argument read by `slot` has: f32 for imm0/imm1, i32 for iimm0/iimm1.
DType imm_slot_dtype(ImmSlot slot);
// f32 and i32: the two types an immediate holds exactly.
bool is_scalar_dtype(DType t);

bool uses_scalar_args(const Instruction &inst);
// True when the program declares a scalar argument or an instruction reads one.
bool uses_scalar_args(const Program &program);

// Whether the opcode reads `slot` as an immediate value (so that a scalar may take its place):
// activation scale/bias (imm0/imm1, unless from a tile), tensor_scalar operands (imm0/imm1,
// unless from a tile), memset value (imm0), iota offset and channel multiplier (iimm0/iimm1),
// affine_select on_false value, offset and channel multiplier (imm0, iimm0, iimm1).
bool slot_accepts_scalar(const Instruction &inst, ImmSlot slot);

// nullopt when `arg` is a well-formed scalar argument (rank 0, direction in, f32 or i32);
// otherwise what is wrong. Tensor arguments always pass.
std::optional<std::string> check_scalar_arg(const Argument &arg);

// nullopt when every slot of `inst` that reads an argument names a scalar argument of `args`
// of the slot's dtype and keeps its own value at 0; otherwise what is wrong.
std::optional<std::string> check_scalar_refs(const Instruction &inst,
                                             std::span<const Argument> args);

// The launch values of a program's arguments as raw bits (the f32 or i32 bit pattern in the
// low 32 bits; tensor arguments' entries are ignored).
using ScalarValues = std::span<const uint64_t>;

// Makes `slot` of `inst` read argument `arg` at launch; the slot's own value becomes 0.
void read_scalar_arg(Instruction &inst, ImmSlot slot, uint16_t arg);

// Writes the values of the scalar arguments `inst` reads into its immediates (checked by
// check_scalar_refs; `values` has one entry per argument).
void bind_scalar_args(Instruction &inst, ScalarValues values);

// The streams of `program` with every scalar argument bound, for engines whose stream reads
// one; other engines' entries are empty (run their stream as is).
std::array<std::vector<Instruction>, kEngineCount> bind_scalar_streams(const Program &program,
                                                                       ScalarValues values);

}  // namespace trn::isa
