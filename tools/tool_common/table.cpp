#include "tool_common/table.hpp"

#include <algorithm>

namespace trn::tools {

namespace {

// Sizes the columns over every row, then hands the lines to `emit` in order.
void lay_out(const std::vector<std::string> &header, size_t rows, const Table::RowFn &row,
             const std::function<void(const std::string &)> &emit) {
  std::vector<size_t> widths(header.size());
  auto measure = [&](const std::vector<std::string> &cells) {
    for (size_t i = 0; i < cells.size() && i < widths.size(); ++i)
      widths[i] = std::max(widths[i], cells[i].size());
  };
  measure(header);
  for (size_t r = 0; r < rows; ++r) measure(row(r));

  std::string rule = "+";
  for (size_t w : widths) rule += std::string(w + 2, '-') + "+";
  rule += "\n";
  auto line = [&](const std::vector<std::string> &cells) {
    std::string out = "|";
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < cells.size() ? cells[i] : "";
      out += " " + cell + std::string(widths[i] - cell.size(), ' ') + " |";
    }
    return out + "\n";
  };
  emit(rule);
  emit(line(header));
  emit(rule);
  for (size_t r = 0; r < rows; ++r) emit(line(row(r)));
  emit(rule);
}

}  // namespace

std::string Table::render() const {
  std::string out;
  lay_out(
      header_, rows_.size(), [&](size_t r) { return rows_[r]; },
      [&](const std::string &text) { out += text; });
  return out;
}

void Table::print(std::FILE *out, const std::vector<std::string> &header, size_t rows,
                  const RowFn &row) {
  lay_out(header, rows, row, [&](const std::string &text) { std::fputs(text.c_str(), out); });
}

}  // namespace trn::tools
