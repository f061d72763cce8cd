#include "tool_common/table.hpp"

#include <algorithm>

namespace trn::tools {

std::string Table::render() const {
  std::vector<size_t> widths(header_.size());
  auto measure = [&](const std::vector<std::string> &row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i)
      widths[i] = std::max(widths[i], row[i].size());
  };
  measure(header_);
  for (const auto &row : rows_) measure(row);

  std::string rule = "+";
  for (size_t w : widths) rule += std::string(w + 2, '-') + "+";
  rule += "\n";
  auto line = [&](const std::vector<std::string> &row) {
    std::string out = "|";
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      out += " " + cell + std::string(widths[i] - cell.size(), ' ') + " |";
    }
    return out + "\n";
  };
  std::string out = rule + line(header_) + rule;
  for (const auto &row : rows_) out += line(row);
  return out + rule;
}

}  // namespace trn::tools
