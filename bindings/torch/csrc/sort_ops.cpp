// topk and sort on the device by ranking, with no data-dependent control flow: along the dim
// (moved last), each element's rank is how many elements come before it in the output order
// (compares of every pair, K x K per row), and output place r takes the element of rank r through
// gather.hpp's pick. The order is PyTorch's: NaN above every number (first when descending or
// largest, last otherwise), equal values by their index (a stable sort; topk's CPU kernel leaves
// ties' order unspecified). Values are exact; indices are int64 written on the device. Rows of more
// than 2^24 / K elements' pairs, and non-float dtypes, run on the CPU (recorded).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <tuple>

#include "fallback.hpp"
#include "gather.hpp"
#include "op_support.hpp"

namespace torch_trn {
namespace {

constexpr int64_t kMaxPairs = int64_t{1} << 24;

bool ranks_fit(const at::Tensor &self, int64_t dim) {
  if (!is_float_type(self.scalar_type()) || self.numel() == 0) return false;
  const int64_t k = self.dim() == 0 ? 1 : self.size(dim);
  return k < (int64_t{1} << 24) && self.numel() <= kMaxPairs / k;
}

// The first `count` elements of each row of x [..., K] in order, and their indices (int64).
std::tuple<at::Tensor, at::Tensor> ranked(const at::Tensor &x, int64_t count, bool descending) {
  const int64_t k = x.size(-1);
  const at::Tensor nan = x != x;
  const at::Tensor v = at::where(nan, 0.0, x);  // NaNs compare by their flag alone
  // [..., i, j]: element j comes before element i.
  const at::Tensor vi = v.unsqueeze(-1), vj = v.unsqueeze(-2);
  const at::Tensor ni = nan.unsqueeze(-1), nj = nan.unsqueeze(-2);
  const auto as_float = x.options().dtype(at::kFloat);
  const at::Tensor lower_index =
      at::arange(k, as_float).unsqueeze(0) < at::arange(k, as_float).unsqueeze(1);
  const at::Tensor by_value =
      at::where(vj == vi, lower_index, descending ? at::gt(vj, vi) : at::lt(vj, vi));
  const at::Tensor by_nan = descending ? at::gt(nj, ni) : at::lt(nj, ni);
  const at::Tensor before = at::where(at::eq(nj, ni), by_value, by_nan);
  const at::Tensor rank = before.to(at::kFloat).sum(-1);  // a permutation of 0..K-1 per row
  // Place r of the output takes the element whose rank is r: a match [..., count, K].
  const at::Tensor places = rank.unsqueeze(-2) == at::arange(count, as_float).unsqueeze(-1);
  // Each place's index as int64: the argmax of its one-hot row (the device writes int64 indices,
  // where a float-to-int64 cast would go through the host).
  return {pick(x, places), at::argmax(places.to(at::kFloat), -1)};
}

void order_out(const at::Tensor &self, int64_t count, int64_t dim, bool descending,
               const at::Tensor &values, const at::Tensor &indices) {
  OpScope scope(self);
  const at::Tensor x = self.dim() == 0 ? self.view({1}) : self.movedim(dim, -1);
  auto [v, i] = ranked(x, count, descending);
  if (self.dim() == 0) {
    v = v.view(at::IntArrayRef{});
    i = i.view(at::IntArrayRef{});
  } else {
    v = v.movedim(-1, dim);
    i = i.movedim(-1, dim);
  }
  resize_out(values, v.sizes());
  resize_out(indices, i.sizes());
  values.copy_(v);
  indices.copy_(i);
}

std::tuple<at::Tensor &, at::Tensor &> topk_out(const at::Tensor &self, c10::SymInt k_sym,
                                                int64_t dim, bool largest, bool sorted,
                                                at::Tensor &values, at::Tensor &indices) {
  check_same_device("topk", {self, values, indices});
  const int64_t k = k_sym.guard_int(__FILE__, __LINE__);
  const int64_t d = c10::maybe_wrap_dim(dim, self.dim());
  const int64_t size = self.dim() == 0 ? 1 : self.size(d);
  if (k < 0 || k > size || !ranks_fit(self, d) || values.scalar_type() != self.scalar_type() ||
      indices.scalar_type() != at::kLong) {
    const auto [v, i] = at::topk(self.cpu(), k, dim, largest, sorted);  // raises for a bad k
    record_cpu_run("aten::topk.values");
    resize_out(values, v.sizes());
    resize_out(indices, i.sizes());
    values.copy_(v);
    indices.copy_(i);
  } else {
    order_out(self, k, d, largest, values, indices);
  }
  return {values, indices};
}

std::tuple<at::Tensor &, at::Tensor &> sort_out(const at::Tensor &self, c10::optional<bool> stable,
                                                int64_t dim, bool descending, at::Tensor &values,
                                                at::Tensor &indices) {
  check_same_device("sort", {self, values, indices});
  const int64_t d = c10::maybe_wrap_dim(dim, self.dim());
  if (!ranks_fit(self, d) || values.scalar_type() != self.scalar_type() ||
      indices.scalar_type() != at::kLong) {
    const auto [v, i] = at::sort(self.cpu(), stable, dim, descending);
    if (self.numel() != 0) record_cpu_run("aten::sort.values_stable");
    resize_out(values, v.sizes());
    resize_out(indices, i.sizes());
    values.copy_(v);
    indices.copy_(i);
  } else {
    order_out(self, self.dim() == 0 ? 1 : self.size(d), d, descending, values, indices);
  }
  return {values, indices};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("topk.values", TORCH_FN(topk_out));
  m.impl("sort.values_stable", TORCH_FN(sort_out));
}

}  // namespace torch_trn
