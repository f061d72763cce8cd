// Static validation of programs against the ISA's rules (docs/ISA.md, "Validation"): every
// violation is rejected before anything runs, with a message that names the instruction
// ("vector[12] tensor_tensor: src0 and src1 are both in PSUM").
#pragma once

#include <optional>
#include <string>

#include "isa/program.hpp"
#include "isa/target.hpp"

namespace trn::isa {

// Where an instruction is: "tensor[3] nc_matmul".
std::string instruction_label(Engine engine, size_t index, Opcode op);

// nullopt when the instruction obeys every rule; otherwise what is wrong (without the label).
std::optional<std::string> check_instruction(const Instruction &inst, const Target &target,
                                             const Program *program = nullptr);
// nullopt when the whole program is valid; otherwise the first violation, labelled.
std::optional<std::string> validate_program(const Program &program, const Target &target);

}  // namespace trn::isa
