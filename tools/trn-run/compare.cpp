#include "trn-run/compare.hpp"

#include <algorithm>
#include <cmath>

namespace trn::run {

Comparison compare(const std::string &name, const std::string &path, Elem got_elem,
                   const std::vector<std::byte> &got, Elem want_elem, const tools::npy::Array &want,
                   double rtol, double atol) {
  Comparison c{name, path, want.elements(), 0, 0, 0, {}};
  const size_t gs = elem_size(got_elem), ws = elem_size(want_elem);
  for (uint64_t i = 0; i < c.elements; ++i) {
    const double g = to_double(got_elem, got.data() + i * gs);
    const double w = to_double(want_elem, want.data.data() + i * ws);
    bool ok;
    if (std::isnan(g) || std::isnan(w)) {
      ok = std::isnan(g) && std::isnan(w);
    } else if (std::isinf(g) || std::isinf(w)) {
      ok = g == w;
    } else {
      const double diff = std::fabs(g - w);
      ok = diff <= atol + rtol * std::fabs(w);
      c.max_abs = std::max(c.max_abs, diff);
      if (diff > 0) c.max_rel = std::max(c.max_rel, w != 0 ? diff / std::fabs(w) : INFINITY);
    }
    if (!ok) {
      if (c.first.size() < kMismatchesShown) c.first.push_back({i, g, w});
      ++c.mismatches;
    }
  }
  return c;
}

std::vector<uint64_t> unravel(uint64_t flat, const std::vector<uint64_t> &shape) {
  std::vector<uint64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return index;
}

std::string format_index(const std::vector<uint64_t> &index) {
  std::string s = "[";
  for (size_t i = 0; i < index.size(); ++i) s += (i ? ", " : "") + std::to_string(index[i]);
  return s + "]";
}

}  // namespace trn::run
