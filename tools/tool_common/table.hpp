// Boxed text tables for the tools: columns size to their widest cell.
#pragma once

#include <string>
#include <vector>

namespace trn::tools {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace trn::tools
