#include "isa/program.hpp"

#include <fmt/format.h>

namespace trn::isa {

const char *arg_direction_name(ArgDirection d) {
  switch (d) {
    case ArgDirection::kIn: return "in";
    case ArgDirection::kOut: return "out";
    case ArgDirection::kInOut: return "inout";
  }
  return "invalid";
}

uint64_t AccessPattern::free_elements() const {
  uint64_t n = 1;
  for (uint32_t d = 0; d < num_dims && d < kMaxFreeDims; ++d) n *= dims[d].count;
  return n;
}

uint64_t Argument::elements() const {
  uint64_t n = 1;
  for (uint64_t s : shape) n *= s;
  return n;
}

uint64_t Program::instruction_count() const {
  uint64_t n = 0;
  for (const auto &s : streams) n += s.size();
  return n;
}

std::string source_location_text(const Program &program, Engine engine, size_t index) {
  const auto e = static_cast<uint32_t>(engine);
  if (e >= kEngineCount) return {};
  const auto &lines = program.source_lines[e];
  if (index >= lines.size() || lines[index] == 0) return {};
  if (program.source_file.empty()) return fmt::format("line {}", lines[index]);
  return fmt::format("{}:{}", program.source_file, lines[index]);
}

}  // namespace trn::isa
