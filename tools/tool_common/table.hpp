// Boxed text tables for the tools: columns size to their widest cell.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace trn::tools {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render() const;

  // A table too large to hold (a checkpoint of a million tensors): `row(i)` makes row i on
  // demand, twice (once to size the columns, once to print it), and each line goes to `out` as
  // it is made.
  using RowFn = std::function<std::vector<std::string>(size_t)>;
  static void print(std::FILE *out, const std::vector<std::string> &header, size_t rows,
                    const RowFn &row);

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace trn::tools
