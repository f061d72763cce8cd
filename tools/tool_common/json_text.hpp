// JSON as the tools print it. Text that is not UTF-8 (another process's command line, a file
// name, bytes a parse error quotes) is printed with U+FFFD in its place: nlohmann's default
// throws, which would end a tool in the middle of its report.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace trn::tools {

inline std::string json_text(const nlohmann::json &doc, int indent = -1) {
  return doc.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace trn::tools
