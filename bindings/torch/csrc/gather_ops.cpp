// index_select, gather, scatter, scatter_add, index_add and flip on the device (and roll, as
// concatenated slices), through
// gather.hpp's one-hot matches: the dim indexed moved last, the other dims a batch. Cases
// gather_fits() refuses, and arguments PyTorch's kernels would refuse, go to the CPU's kernel
// (recorded), which raises its own message for the latter.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <set>
#include <vector>

#include "fallback.hpp"
#include "gather.hpp"
#include "op_support.hpp"

namespace torch_trn {
namespace {

// An op's result computed on the CPU into `out` (sized to it).
at::Tensor &from_cpu(const char *name, const at::Tensor &result, at::Tensor &out) {
  record_cpu_run(name);
  resize_out(out, result.sizes());
  return out.copy_(result);
}

// `x` narrowed to `like`'s sizes in every dim but `dim`.
at::Tensor narrowed_to(at::Tensor x, const at::Tensor &like, int64_t dim) {
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i != dim && x.size(i) != like.size(i)) x = x.narrow(i, 0, like.size(i));
  return x;
}

// A 0-dim tensor as the 1-D tensor of its element (PyTorch's kernels treat it so).
at::Tensor at_least_1d(const at::Tensor &t) {
  return t.dim() == 0 ? t.view({1}) : t;
}

// gather and scatter's rule: index has self's (and src's) dims, and sizes no larger than
// theirs in every dim but `dim` (src's in every dim); 0-dim tensors count as 1-D.
bool index_fits(const at::Tensor &index_any, const at::Tensor &self_any, int64_t dim,
                const at::Tensor *src_any) {
  const at::Tensor index = at_least_1d(index_any), self = at_least_1d(self_any);
  const at::Tensor src = src_any ? at_least_1d(*src_any) : at::Tensor();
  const at::Tensor *src_p = src_any ? &src : nullptr;
  if (index.dim() != self.dim() || (src_p && src_p->dim() != self.dim())) return false;
  for (int64_t i = 0; i < self.dim(); ++i) {
    if (i != dim && index.size(i) > self.size(i)) return false;
    if (src_p && index.size(i) > src_p->size(i)) return false;
  }
  return true;
}

at::Tensor &index_select_out(const at::Tensor &self, int64_t dim, const at::Tensor &index,
                             at::Tensor &out) {
  check_same_device("index_select", {self, index, out});
  const bool shaped = index.dim() <= 1 && (self.dim() > 0 || index.numel() == 1) &&
                      out.scalar_type() == self.scalar_type();
  const int64_t d = shaped ? c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1)) : 0;
  const at::Tensor x = at_least_1d(self);
  const int64_t size = shaped ? x.size(d) : 0;
  const int64_t batch = size > 0 ? x.numel() / size : 0;
  if (!shaped || !gather_fits(self.scalar_type(), index, size, batch * index.numel() * size)) {
    return from_cpu("aten::index_select.out", at::index_select(self.cpu(), dim, index.cpu()), out);
  }
  OpScope scope(self);
  const at::Tensor match =
      match_positions(index_positions(index.reshape({-1}), self, size, /*wrap=*/false), size);
  const at::Tensor result = pick(x.movedim(d, -1), match).movedim(-1, d);
  resize_out(out, self.dim() == 0 ? at::IntArrayRef{} : result.sizes());
  return out.copy_(result.view(out.sizes()));
}

at::Tensor index_select(const at::Tensor &self, int64_t dim, const at::Tensor &index) {
  at::Tensor out = at::empty({0}, self.options());
  return index_select_out(self, dim, index, out);
}

at::Tensor &gather_out(const at::Tensor &self, int64_t dim, const at::Tensor &index,
                       bool sparse_grad, at::Tensor &out) {
  check_same_device("gather", {self, index, out});
  const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const bool shaped =
      index_fits(index, self, d, nullptr) && out.scalar_type() == self.scalar_type();
  const at::Tensor x = at_least_1d(self), i = at_least_1d(index);
  const int64_t size = shaped ? x.size(d) : 0;
  if (shaped && index.numel() == 0 && is_float_type(self.scalar_type())) {
    resize_out(out, index.sizes());
    return out;
  }
  if (!shaped || !gather_fits(self.scalar_type(), index, size, index.numel() * size)) {
    return from_cpu("aten::gather.out", at::gather(self.cpu(), dim, index.cpu(), sparse_grad), out);
  }
  OpScope scope(self);
  const at::Tensor values = narrowed_to(x, i, d).movedim(d, -1);
  const at::Tensor match =
      match_positions(index_positions(i.movedim(d, -1), self, size, /*wrap=*/false), size);
  const at::Tensor result = pick(values, match).movedim(-1, d);
  resize_out(out, index.sizes());
  return out.copy_(result.view(index.sizes()));
}

// scatter_add (sums into self) and scatter (assigns; of a repeated place, the last value, as
// the CPU's loop leaves it), from a tensor src or a scalar value.
enum class Scatter { kAdd, kAssign };
// `src` is a CPU 0-dim tensor for scatter.value.
at::Tensor &scatter_out(const char *name, Scatter mode, const at::Tensor &self, int64_t dim,
                        const at::Tensor &index, const at::Tensor &src, bool from_value,
                        at::Tensor &out) {
  const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const bool shaped = index_fits(index, self, d, from_value ? nullptr : &src) &&
                      (from_value || src.scalar_type() == self.scalar_type()) &&
                      out.scalar_type() == self.scalar_type();
  const int64_t size = shaped ? at_least_1d(self).size(d) : 0;
  if (shaped && index.numel() == 0 && is_float_type(self.scalar_type())) {
    resize_out(out, self.sizes());
    return out.is_same(self) ? out : out.copy_(self);
  }
  if (!shaped || !gather_fits(self.scalar_type(), index, size, index.numel() * size)) {
    const at::Tensor host = src.cpu();
    return from_cpu(name,
                    mode == Scatter::kAdd ? at::scatter_add(self.cpu(), dim, index.cpu(), host)
                    : from_value          ? at::scatter(self.cpu(), dim, index.cpu(), host.item())
                                          : at::scatter(self.cpu(), dim, index.cpu(), host),
                    out);
  }
  OpScope scope(self);
  const at::Tensor i = at_least_1d(index), from = from_value ? src : at_least_1d(src);
  const at::Tensor match =
      match_positions(index_positions(i.movedim(d, -1), self, size, /*wrap=*/false), size);
  const at::Tensor poisoned = any_unmatched(match);
  resize_out(out, self.sizes());
  if (!out.is_same(self)) out.copy_(self);
  // The places the index reaches, as a view of out (strided: written through a copy).
  const at::Tensor region = narrowed_to(at_least_1d(out), i, d).movedim(d, -1);
  if (mode == Scatter::kAdd) {
    const at::Tensor values = narrowed_to(from, i, /*dim=*/-1).movedim(d, -1);
    region.copy_(region.contiguous() + poison_if(spread(values, match), poisoned));
    return out;
  }
  const at::Tensor values =
      from_value ? from.to(out.options())
                 : place(narrowed_to(from, i, /*dim=*/-1).movedim(d, -1), last_matches(match));
  region.copy_(poison_if(at::where(match.any(-2), values, region), poisoned));
  return out;
}

at::Tensor &scatter_add_out(const at::Tensor &self, int64_t dim, const at::Tensor &index,
                            const at::Tensor &src, at::Tensor &out) {
  check_same_device("scatter_add", {self, index, src, out});
  return scatter_out("aten::scatter_add.out", Scatter::kAdd, self, dim, index, src, false, out);
}
at::Tensor &scatter_src_out(const at::Tensor &self, int64_t dim, const at::Tensor &index,
                            const at::Tensor &src, at::Tensor &out) {
  check_same_device("scatter", {self, index, src, out});
  return scatter_out("aten::scatter.src_out", Scatter::kAssign, self, dim, index, src, false, out);
}
at::Tensor &scatter_value_out(const at::Tensor &self, int64_t dim, const at::Tensor &index,
                              const at::Scalar &value, at::Tensor &out) {
  check_same_device("scatter", {self, index, out});
  return scatter_out("aten::scatter.value_out", Scatter::kAssign, self, dim, index,
                     at::scalar_tensor(value, self.options().device(at::kCPU)), true, out);
}

at::Tensor &index_add_out(const at::Tensor &self, int64_t dim, const at::Tensor &index,
                          const at::Tensor &source, const at::Scalar &alpha, at::Tensor &out) {
  check_same_device("index_add", {self, index, source, out});
  const at::Tensor x = at_least_1d(self), from = at_least_1d(source);
  const bool shaped = from.dim() == x.dim() && index.dim() <= 1 &&
                      source.scalar_type() == self.scalar_type() &&
                      out.scalar_type() == self.scalar_type();
  const int64_t d = shaped ? c10::maybe_wrap_dim(dim, x.dim()) : 0;
  bool same_batch = shaped && from.size(d) == index.numel();
  for (int64_t i = 0; same_batch && i < x.dim(); ++i)
    same_batch = i == d || from.size(i) == x.size(i);
  const int64_t size = same_batch ? x.size(d) : 0;
  if (!same_batch ||
      !gather_fits(self.scalar_type(), index, size, source.numel() * std::max<int64_t>(size, 1))) {
    return from_cpu("aten::index_add.out",
                    at::index_add(self.cpu(), dim, index.cpu(), source.cpu(), alpha), out);
  }
  OpScope scope(self);
  const at::Tensor match =
      match_positions(index_positions(index.reshape({-1}), self, size, /*wrap=*/false), size);
  at::Tensor sums = spread(from.movedim(d, -1), match);
  if (!(alpha.isIntegral(false) && alpha.toLong() == 1)) sums = sums * alpha;
  const at::Tensor result =
      self + poison_if(sums, any_unmatched(match)).movedim(-1, d).view(self.sizes());
  resize_out(out, self.sizes());
  return out.copy_(result);
}

// flip as a gather of each dim's positions in reverse.
at::Tensor flip(const at::Tensor &self, at::IntArrayRef dims) {
  check_same_device("flip", {self});
  const std::vector<int64_t> wrapped = [&] {
    std::vector<int64_t> w;
    for (const int64_t dim : dims) w.push_back(c10::maybe_wrap_dim(dim, self.dim()));
    return w;
  }();
  bool fits = is_float_type(self.scalar_type()) &&
              std::set<int64_t>(wrapped.begin(), wrapped.end()).size() == wrapped.size();
  for (const int64_t d : wrapped) {
    fits = fits && self.size(d) < (int64_t{1} << 24) &&
           self.numel() * self.size(d) <= (int64_t{1} << 24);
  }
  if (!fits || self.numel() == 0) {
    const at::Tensor result = at::flip(self.cpu(), dims);  // raises for a repeated dim
    if (self.numel() != 0) record_cpu_run("aten::flip");
    return result.to(self.device());
  }
  OpScope scope(self);
  at::Tensor x = self;
  for (const int64_t d : wrapped) {
    const int64_t n = x.size(d);
    if (n == 1) continue;
    const at::Tensor reversed = at::arange(n - 1, -1, -1, x.options().dtype(at::kFloat));
    x = pick(x.movedim(d, -1), match_positions(reversed, n)).movedim(-1, d);
  }
  return x.is_same(self) ? self.clone() : x.contiguous();
}

// roll: along each dim, the last `shift` elements and the rest, concatenated in that order (DMA
// copies: exact for every dtype). No dims rolls the flattened tensor.
at::Tensor roll(const at::Tensor &self, c10::SymIntArrayRef shifts_sym, at::IntArrayRef dims) {
  check_same_device("roll", {self});
  const auto shifts = C10_AS_INTARRAYREF_SLOW(shifts_sym);
  if (shifts.size() != dims.size() && !(dims.empty() && shifts.size() == 1)) {
    return at::roll(self.cpu(), shifts, dims).to(self.device());  // raises PyTorch's message
  }
  if (self.numel() == 0) return self.clone();
  if (dims.empty()) return roll(self.reshape({-1}), shifts_sym, {0}).view(self.sizes());
  at::Tensor x = self;
  for (size_t k = 0; k < dims.size(); ++k) {
    const int64_t d = c10::maybe_wrap_dim(dims[k], self.dim());
    const int64_t n = x.size(d), s = ((shifts[k] % n) + n) % n;
    if (s != 0) x = at::cat({x.narrow(d, n - s, s), x.narrow(d, 0, n - s)}, d);
  }
  return x.is_same(self) ? self.clone() : x;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index_select", TORCH_FN(index_select));
  m.impl("index_select.out", TORCH_FN(index_select_out));
  m.impl("gather.out", TORCH_FN(gather_out));
  m.impl("scatter_add.out", TORCH_FN(scatter_add_out));
  m.impl("scatter.src_out", TORCH_FN(scatter_src_out));
  m.impl("scatter.value_out", TORCH_FN(scatter_value_out));
  m.impl("index_add.out", TORCH_FN(index_add_out));
  m.impl("flip", TORCH_FN(flip));
  m.impl("roll", TORCH_FN(roll));
}

}  // namespace torch_trn
