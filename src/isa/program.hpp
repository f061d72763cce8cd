// A kernel program in memory: its arguments, one instruction stream per engine, a constants
// block and optional source lines. The kernel container (de)serialises exactly this.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
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
  // Debug information (optional): the source each instruction came from. Source file 0 is
  // `source_file`; a kernel built from several files (a C++ kernel and its helper headers)
  // names the others in `source_files`: file k (k >= 1) is source_files[k - 1]. An
  // instruction's file is source_file_ids[engine][index], 0 (source_file) where that is absent.
  std::string source_file;
  std::array<std::vector<uint32_t>, kEngineCount> source_lines;     // empty or one per instruction
  std::vector<std::string> source_files;                            // files 1, 2, ...
  std::array<std::vector<uint32_t>, kEngineCount> source_file_ids;  // empty or one per instruction

  std::vector<Instruction> &stream(Engine e) { return streams[static_cast<uint32_t>(e)]; }
  const std::vector<Instruction> &stream(Engine e) const {
    return streams[static_cast<uint32_t>(e)];
  }
  uint64_t instruction_count() const;
  // Source file `id` (0: source_file), "" when out of range.
  const std::string &source_file_name(uint32_t id) const;
  // The file id of instruction `index` of `engine`'s stream (0 when it has none).
  uint32_t source_file_id(Engine engine, size_t index) const;
  // The file id for `file`, adding it to the table (as source_file first, while that is
  // empty) when it is new. The returned id is the one source_file_ids should hold.
  uint32_t intern_source_file(std::string_view file);
};

// Where instruction `index` of `engine`'s stream came from, as "file:line" with the
// instruction's own source file ("line N" when that file has no name), or "" when the program
// carries no debug line for it. Faults, race reports and profile events use this to name the
// source.
std::string source_location_text(const Program &program, Engine engine, size_t index);

}  // namespace trn::isa
