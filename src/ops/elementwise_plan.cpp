#include "ops/elementwise_plan.hpp"

#include <algorithm>

namespace trn::ops {

namespace {

using kernels::Layout;

// A half of the dims: the input has all of the output's there (kFull), none (kNone), or a mix.
enum class Half { kFull, kNone, kMixed };

Half classify(const Shape &out, const Shape &in, size_t begin, size_t end) {
  bool all_full = true, all_none = true;
  for (size_t d = begin; d < end; ++d) {
    if (out[d] == 1) continue;
    if (in[d] == out[d])
      all_none = false;
    else
      all_full = false;
  }
  return all_full ? Half::kFull : all_none ? Half::kNone : Half::kMixed;
}

// The input's data shape aligned to the output's rank (leading dims of size 1).
Shape aligned(const Tensor &t, size_t rank) {
  Shape s = t.data_shape();
  s.insert(s.begin(), rank - s.size(), 1);
  return s;
}

}  // namespace

std::optional<ElementwisePlan> plan_elementwise(const Shape &out,
                                                const std::vector<const Tensor *> &inputs) {
  const uint64_t n = static_cast<uint64_t>(numel(out));
  std::vector<Shape> in;
  bool any_broadcast = false;
  for (const Tensor *t : inputs) {
    in.push_back(aligned(*t, out.size()));
    if (numel(in.back()) != static_cast<int64_t>(n)) any_broadcast = true;
  }
  ElementwisePlan plan;
  if (!any_broadcast) {
    plan.layouts.assign(inputs.size(), Layout::kFull);
    const uint64_t main_rows = n >= kbuild::kRowTile ? kbuild::kRowTile : 1;
    const uint64_t main_cols = n / main_rows;
    plan.pieces.push_back({main_rows, main_cols, 0});
    if (const uint64_t rest = n - main_rows * main_cols) plan.pieces.push_back({1, rest, n - rest});
    return plan;
  }
  // The split that works for every input and keeps the most partitions and columns busy.
  std::optional<size_t> best;
  uint64_t best_score = 0;
  std::vector<Layout> best_layouts;
  for (size_t k = 0; k <= out.size(); ++k) {
    std::vector<Layout> layouts;
    bool ok = true;
    for (const Shape &s : in) {
      const Half rows = classify(out, s, 0, k), cols = classify(out, s, k, out.size());
      if (rows == Half::kMixed || cols == Half::kMixed) {
        ok = false;
        break;
      }
      layouts.push_back(rows == Half::kFull
                            ? (cols == Half::kFull ? Layout::kFull : Layout::kCol)
                            : (cols == Half::kFull ? Layout::kRow : Layout::kScalar));
    }
    if (!ok) continue;
    const uint64_t r = static_cast<uint64_t>(numel(Shape(out.begin(), out.begin() + k)));
    const uint64_t c = n / std::max<uint64_t>(r, 1);
    const uint64_t score = std::min<uint64_t>(r, 128) * std::min<uint64_t>(c, 512) + 1;
    if (!best || score > best_score) {
      best = k;
      best_score = score;
      best_layouts = layouts;
    }
  }
  if (!best) return std::nullopt;
  const uint64_t r = static_cast<uint64_t>(numel(Shape(out.begin(), out.begin() + *best)));
  plan.layouts = best_layouts;
  plan.pieces.push_back({r, n / r, 0});
  return plan;
}

}  // namespace trn::ops
