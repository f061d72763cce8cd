// The text assembler of the ISA: turns the assembly language of docs/assembly.md into an
// isa::Program. It checks syntax, name resolution (arguments, tiles, semaphores) and the integer
// range of every field, but not the ISA's rules: run isa::validate_program on the result.
//
//   auto r = isa::assemble(text, "kernel.s");
//   if (auto *err = std::get_if<isa::AsmError>(&r)) puts(err->to_string().c_str());
//
// isa::disassemble (disassembler.hpp) prints any program the assembler produces so that
// assembling the text again gives the same program, field for field.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "isa/program.hpp"

namespace trn::isa {

// An assembly error, positioned at the offending token (line and column are 1-based).
struct AsmError {
  std::string file;
  uint32_t line = 0, column = 0;
  std::string message;

  std::string to_string() const;  // "file:line:col: error: message"
};

// The text line (1-based) each instruction of each engine stream came from, for tools that report
// later errors (validation) against the assembly source.
using AsmLineMap = std::array<std::vector<uint32_t>, kEngineCount>;

// Assembles `text`; `file_name` is only used in error positions. Never throws, never crashes on
// any input. When `lines` is given it receives the line of every instruction.
std::variant<Program, AsmError> assemble(std::string_view text, std::string_view file_name,
                                         AsmLineMap *lines = nullptr);

}  // namespace trn::isa
