// Advanced indexing: x[i] and x[:, i] = v (one int64 or int32 index tensor, at any dim) on the
// device through gather.hpp's matches, negative indices counting from the end as Python's do.
// Other forms (x[mask], whose size depends on the data, and x[i, j]) run on the CPU: the generic
// fallback moves `self` to the host but not the optional index tensors, which PyTorch then
// refuses as being on another device, so they move here too and the result comes back.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <torch/library.h>

#include <vector>

#include "fallback.hpp"
#include "gather.hpp"
#include "op_support.hpp"

namespace torch_trn {
namespace {

using Indices = c10::List<c10::optional<at::Tensor>>;

Indices on_cpu(const at::Tensor &self, const Indices &indices, const char *op) {
  Indices moved;
  for (size_t k = 0; k < indices.size(); ++k) {
    const c10::optional<at::Tensor> i = indices.get(k);
    if (i) check_same_device(op, {self, *i});
    moved.push_back(i && i->defined() ? c10::optional<at::Tensor>(i->cpu()) : c10::nullopt);
  }
  return moved;
}

// The one index tensor of x[..., i, ...] (int64 or int32) and the dim it indexes, when the
// indices are that form and the gather fits; nothing otherwise.
struct OneIndex {
  at::Tensor index;
  int64_t dim = -1;
};
OneIndex one_index(const at::Tensor &self, const Indices &indices) {
  OneIndex found;
  for (size_t k = 0; k < indices.size(); ++k) {
    const c10::optional<at::Tensor> i = indices.get(k);
    if (!i || !i->defined()) continue;
    if (found.dim >= 0) return {};
    found = {*i, static_cast<int64_t>(k)};
  }
  if (found.dim < 0 || found.dim >= self.dim() || found.index.numel() == 0) return {};
  const int64_t size = self.size(found.dim);
  const int64_t batch = size > 0 ? self.numel() / size : 0;
  if (!gather_fits(self.scalar_type(), found.index, size, batch * found.index.numel() * size))
    return {};
  return found;
}

// self's sizes with dim k replaced by `middle`.
std::vector<int64_t> sizes_around(const at::Tensor &self, int64_t k, at::IntArrayRef middle) {
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().begin() + k);
  sizes.insert(sizes.end(), middle.begin(), middle.end());
  sizes.insert(sizes.end(), self.sizes().begin() + k + 1, self.sizes().end());
  return sizes;
}

at::Tensor index(const at::Tensor &self, const Indices &indices) {
  const OneIndex one = one_index(self, indices);
  if (one.dim < 0) {
    const at::Tensor result = at::index(self.cpu(), on_cpu(self, indices, "index"));
    record_cpu_run("aten::index.Tensor");
    return result.to(self.device());
  }
  check_same_device("index", {self, one.index});
  OpScope scope(self);
  const int64_t k = one.dim, size = self.size(k);
  const at::Tensor match =
      match_positions(index_positions(one.index.reshape({-1}), self, size, /*wrap=*/true), size);
  return pick(self.movedim(k, -1), match)
      .movedim(-1, k)
      .reshape(sizes_around(self, k, one.index.sizes()));
}

at::Tensor &index_put(at::Tensor &self, const Indices &indices, const at::Tensor &values,
                      bool accumulate, bool unsafe) {
  const OneIndex one = one_index(self, indices);
  const std::vector<int64_t> target =
      one.dim < 0 ? std::vector<int64_t>{} : sizes_around(self, one.dim, one.index.sizes());
  if (one.dim < 0 || values.scalar_type() != self.scalar_type() ||
      !at::is_expandable_to(values.sizes(), target)) {
    at::Tensor host = self.cpu();
    at::_index_put_impl_(host, on_cpu(self, indices, "index_put_"), values.cpu(), accumulate,
                         unsafe);
    record_cpu_run("aten::_index_put_impl_");
    return self.copy_(host);
  }
  check_same_device("index_put_", {self, one.index, values});
  OpScope scope(self);
  const int64_t k = one.dim, size = self.size(k);
  const at::Tensor match =
      match_positions(index_positions(one.index.reshape({-1}), self, size, /*wrap=*/true), size);
  // values as [..., N] with the index's N positions last, as the match's rows.
  const at::Tensor rows =
      values.expand(target).reshape(sizes_around(self, k, {one.index.numel()})).movedim(k, -1);
  // An index out of range makes every row it could reach NaN, written or not.
  const at::Tensor poisoned = any_unmatched(match);
  at::Tensor region = self.movedim(k, -1);
  if (accumulate)
    region.add_(poison_if(spread(rows, match), poisoned));
  else
    region.copy_(
        poison_if(at::where(match.any(0), place(rows, last_matches(match)), region), poisoned));
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index.Tensor", TORCH_FN(index));
  m.impl("_index_put_impl_", TORCH_FN(index_put));
}

}  // namespace torch_trn
