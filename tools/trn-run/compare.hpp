// Comparing a kernel's output with an expected array, element by element, within tolerances.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trn-run/elements.hpp"
#include "trn-run/npy.hpp"

namespace trn::run {

// How many mismatching elements a comparison keeps to show.
inline constexpr size_t kMismatchesShown = 5;

struct Mismatch {
  uint64_t index;
  double got, want;
};

struct Comparison {
  std::string name, path;
  uint64_t elements = 0, mismatches = 0;
  double max_abs = 0, max_rel = 0;
  std::vector<Mismatch> first;  // the first kMismatchesShown
};

// |got - want| <= atol + rtol * |want| for each element; NaN matches NaN only, an infinity the
// same infinity only.
Comparison compare(const std::string &name, const std::string &path, Elem got_elem,
                   const std::vector<std::byte> &got, Elem want_elem, const tools::npy::Array &want,
                   double rtol, double atol);

// The multi-dimensional index of a flat (row-major) one.
std::vector<uint64_t> unravel(uint64_t flat, const std::vector<uint64_t> &shape);
// "[1, 2, 3]"
std::string format_index(const std::vector<uint64_t> &index);

}  // namespace trn::run
