// The disassembler: prints a Program in the assembly language of docs/assembly.md. For every
// program the assembler can produce, assemble(disassemble(p)) == p field for field (floats bit
// for bit, NaN payloads and -0.0 included). Any program prints without crashing; fields the
// assembler cannot produce (an unknown enum value, say) print in a form it rejects.
#pragma once

#include <optional>
#include <string>

#include "isa/program.hpp"

namespace trn::isa {

std::string disassemble(const Program &p);

// One instruction as it appears in a disassembly (no indentation, no newline); `stream` is the
// engine whose stream holds it.
std::string disassemble_instruction(const Program &p, Engine stream, const Instruction &inst);

// The first difference between two programs ("vector[3].src1.dims[2].stride: 5 != 6"), or
// nullopt when they are equal field for field (floats compared bit for bit).
std::optional<std::string> program_difference(const Program &a, const Program &b);

}  // namespace trn::isa
