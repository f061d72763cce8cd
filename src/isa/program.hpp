// A kernel program in memory: its arguments, one instruction stream per engine, a constants
// block and optional source lines. The kernel container (de)serialises exactly this.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "isa/instruction.hpp"

namespace trn::isa {

enum class ArgDirection : uint8_t { kIn = 1, kOut = 2, kInOut = 3 };
const char *arg_direction_name(ArgDirection d);  // "in", "out", "inout"

// A tensor argument is memory the kernel addresses in HBM; a scalar argument is one value (f32 or
// i32, rank 0, direction in) passed at launch and read by instructions as an immediate.
enum class ArgKind : uint8_t { kTensor = 0, kScalar = 1 };

struct Argument {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;
  ArgDirection direction = ArgDirection::kIn;
  ArgKind kind = ArgKind::kTensor;

  uint64_t elements() const;
  uint64_t bytes() const { return elements() * dtype_size(dtype); }
  bool is_scalar() const { return kind == ArgKind::kScalar; }
};

struct Program {
  std::string name;
  std::vector<Argument> args;
  std::array<std::vector<Instruction>, kEngineCount> streams;
  std::vector<std::byte> constants;  // read-only HBM block, addressed with arg = kConstantsArg
  // Debug information (optional): the source each instruction came from.
  std::string source_file;
  std::array<std::vector<uint32_t>, kEngineCount> source_lines;  // empty or one per instruction

  std::vector<Instruction> &stream(Engine e) { return streams[static_cast<uint32_t>(e)]; }
  const std::vector<Instruction> &stream(Engine e) const {
    return streams[static_cast<uint32_t>(e)];
  }
  uint64_t instruction_count() const;
};

// Where instruction `index` of `engine`'s stream came from, as "file:line" ("line N" without a
// file), or "" when the program carries no debug line for it. Faults, race reports and profile
// events use this to name the source.
std::string source_location_text(const Program &program, Engine engine, size_t index);

}  // namespace trn::isa
