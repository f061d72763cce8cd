// How the row-wise kernels walk a [rows, cols] matrix: row tiles of up to 128 partitions, and
// column chunks small enough that several iterations' tiles fit in SBUF at once (the builder
// places each iteration's tiles after the last ones, so loads of the next iteration overlap the
// compute and stores of this one).
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "isa/dtype.hpp"
#include "isa/program.hpp"

namespace trn::kbuild {

using Built = std::variant<isa::Program, std::string>;

constexpr uint32_t kRowTile = 128;

// What is wrong with a kernel's shape or dtypes before anything is built, if anything.
inline std::optional<std::string> check_matrix(const char *kernel, uint64_t rows, uint64_t cols,
                                               std::initializer_list<isa::DType> dtypes) {
  if (rows == 0 || cols == 0)
    return std::string(kernel) + ": the shape [" + std::to_string(rows) + ", " +
           std::to_string(cols) + "] is empty";
  for (isa::DType t : dtypes)
    if (!isa::dtype_size(t)) return std::string(kernel) + ": an invalid dtype";
  return std::nullopt;
}

// The widest row (columns) a kernel can keep whole when each column costs `bytes_per_column`
// of SBUF per partition and `fixed` bytes go to other tiles, or 0 when not even one fits.
inline uint64_t widest_row(uint64_t sbuf_bytes, uint64_t bytes_per_column, uint64_t fixed) {
  return sbuf_bytes > fixed ? (sbuf_bytes - fixed) / bytes_per_column : 0;
}

// Calls body(row0, rows) for each row tile.
template <typename Body>
void for_row_tiles(uint64_t rows, Body &&body) {
  for (uint64_t r = 0; r < rows; r += kRowTile)
    body(r, static_cast<uint32_t>(std::min<uint64_t>(kRowTile, rows - r)));
}

// Calls body(col0, cols) for each chunk of at most `chunk` columns.
template <typename Body>
void for_col_chunks(uint64_t cols, uint64_t chunk, Body &&body) {
  for (uint64_t c = 0; c < cols; c += chunk)
    body(c, static_cast<uint32_t>(std::min<uint64_t>(chunk, cols - c)));
}

// Software pipelining for in-order engines: emits first(i + 1) before second(i), so that an
// engine's stream has the next item's early work ahead of this item's late work instead of behind
// it (an engine waiting for item i's late inputs would otherwise hold up item i + 1). `first`
// returns the state `second` takes.
template <typename First, typename Second>
void pipelined(uint64_t count, First &&first, Second &&second) {
  std::optional<decltype(first(uint64_t{0}))> pending;
  for (uint64_t i = 0; i < count; ++i) {
    auto state = first(i);
    if (pending) second(*pending);
    pending.emplace(std::move(state));
  }
  if (pending) second(*pending);
}

}  // namespace trn::kbuild
