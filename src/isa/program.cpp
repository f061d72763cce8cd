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

const std::string &Program::source_file_name(uint32_t id) const {
  static const std::string kNone;
  if (id == 0) return source_file;
  return id <= source_files.size() ? source_files[id - 1] : kNone;
}

uint32_t Program::source_file_id(Engine engine, size_t index) const {
  const auto e = static_cast<uint32_t>(engine);
  if (e >= kEngineCount) return 0;
  const auto &ids = source_file_ids[e];
  return index < ids.size() ? ids[index] : 0;
}

uint32_t Program::intern_source_file(std::string_view file) {
  if (source_file.empty() && source_files.empty()) {
    source_file = std::string(file);
    return 0;
  }
  if (file == source_file) return 0;
  for (size_t i = 0; i < source_files.size(); ++i)
    if (source_files[i] == file) return static_cast<uint32_t>(i + 1);
  source_files.emplace_back(file);
  return static_cast<uint32_t>(source_files.size());
}

std::string source_location_text(const Program &program, Engine engine, size_t index) {
  const auto e = static_cast<uint32_t>(engine);
  if (e >= kEngineCount) return {};
  const auto &lines = program.source_lines[e];
  if (index >= lines.size() || lines[index] == 0) return {};
  const std::string &file = program.source_file_name(program.source_file_id(engine, index));
  if (file.empty()) return fmt::format("line {}", lines[index]);
  return fmt::format("{}:{}", file, lines[index]);
}

}  // namespace trn::isa
