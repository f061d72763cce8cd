// Reductions: sum and mean over dims (bias gradients, losses, the attention block's mean), as
// the .out overloads torch's structured kernels call with the output already shaped.
#include <ATen/native/ReduceOpsUtils.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "fallback.hpp"
#include "op_support.hpp"

namespace torch_trn {
namespace {

void run_reduce(trn_queue_t queue, trn_ops_reduce_op_t op, const at::Tensor &out,
                const at::Tensor &x, const std::vector<int64_t> &dims, bool keepdim,
                const char *name) {
  const auto o = view_of(out), v = view_of(x);
  check_ops(trn_ops_reduce(queue, op, &o, &v, dims.data(), static_cast<uint32_t>(dims.size()),
                           keepdim ? 1 : 0, nullptr),
            name);
}

void reduce(trn_ops_reduce_op_t op, const at::Tensor &self, at::OptionalIntArrayRef dim,
            bool keepdim, const at::Tensor &out, const char *name) {
  if (out.numel() == 0) return;
  OpScope scope(out);
  if (self.numel() == 0) {  // an empty sum is 0; an empty mean NaN, as torch gives
    out.fill_(op == TRN_OPS_SUM ? 0.0 : std::numeric_limits<double>::quiet_NaN());
    return;
  }
  const int64_t rank = self.dim();
  if (rank == 0) {  // any dim of a scalar (0 or -1) reduces it to itself
    if (dim)
      for (int64_t d : *dim) c10::maybe_wrap_dim(d, rank);  // refuses dims a scalar lacks
    t_copy(scope.queue(), out, self);
    return;
  }
  std::vector<bool> reduced(static_cast<size_t>(rank), !dim || dim->empty());
  if (dim)
    for (int64_t d : *dim) reduced[static_cast<size_t>(c10::maybe_wrap_dim(d, rank))] = true;
  // The device reduces leading or trailing dims: other dims to reduce are moved last (a strided
  // view, made contiguous on the device), and the output is taken without its reduced dims.
  std::vector<int64_t> perm, kept_sizes, dims;
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[static_cast<size_t>(d)]) {
      dims.push_back(d);
    } else {
      perm.push_back(d);
      kept_sizes.push_back(self.size(d));
    }
  }
  const int64_t count = static_cast<int64_t>(dims.size());
  const bool leading = count == 0 || dims.back() == count - 1;
  const bool trailing = count == 0 || dims.front() == rank - count;
  at::Tensor x = self, o = out;
  bool keep = keepdim;
  if (!leading && !trailing && out.is_contiguous()) {
    perm.insert(perm.end(), dims.begin(), dims.end());
    x = self.permute(perm);
    o = out.view(kept_sizes);
    keep = false;
    const int64_t first = rank - count;
    for (int64_t i = 0; i < count; ++i) dims[static_cast<size_t>(i)] = first + i;
  }
  // A mean into a narrow dtype: the device's means are taken in f32, rounded once here.
  const auto type = out.scalar_type();
  if (op == TRN_OPS_MEAN && (type == at::kBFloat16 || type == at::kHalf)) {
    at::Tensor wide = empty_on(o, o.sizes(), at::kFloat);
    run_reduce(scope.queue(), op, wide, x, dims, keep, name);
    t_copy(scope.queue(), o, wide);
    return;
  }
  run_reduce(scope.queue(), op, o, x, dims, keep, name);
}

// The .out overloads, also reached with a user's out= that no meta function has shaped: it is
// sized here. A sum or mean casts its input to its dtype first, as PyTorch's (0.6 + 0.6 into
// int64 is 0).
at::Tensor &reduce_out(trn_ops_reduce_op_t op, const at::Tensor &self, at::OptionalIntArrayRef dim,
                       bool keepdim, c10::optional<at::ScalarType> dtype, at::Tensor &out,
                       const char *name) {
  resize_out(out, at::native::shape_from_dim_mask(self, at::native::make_dim_mask(dim, self.dim()),
                                                  keepdim));
  if (op == TRN_OPS_MAX || op == TRN_OPS_MIN) {
    TORCH_CHECK(self.scalar_type() == out.scalar_type(), name,
                "(): expected the dtype for input and out to match, but got ", self.scalar_type(),
                " for input's dtype and ", out.scalar_type(), " for out's dtype.");
    reduce(op, self, dim, keepdim, out, name);
    return out;
  }
  // A sum or mean computes in its dtype: dtype=, else out's (a float sum into an int64 out= adds
  // the truncated elements, as PyTorch's does).
  const at::ScalarType type = dtype.value_or(out.scalar_type());
  reduce(op, type != self.scalar_type() ? self.to(type) : self, dim, keepdim, out, name);
  return out;
}

at::Tensor &sum_out(const at::Tensor &self, at::OptionalIntArrayRef dim, bool keepdim,
                    c10::optional<at::ScalarType> dtype, at::Tensor &out) {
  return reduce_out(TRN_OPS_SUM, self, dim, keepdim, dtype, out, "sum");
}

at::Tensor &mean_out(const at::Tensor &self, at::OptionalIntArrayRef dim, bool keepdim,
                     c10::optional<at::ScalarType> dtype, at::Tensor &out) {
  return reduce_out(TRN_OPS_MEAN, self, dim, keepdim, dtype, out, "mean");
}

at::Tensor &amax_out(const at::Tensor &self, at::IntArrayRef dim, bool keepdim, at::Tensor &out) {
  return reduce_out(TRN_OPS_MAX, self, dim, keepdim, c10::nullopt, out, "amax");
}

at::Tensor &amin_out(const at::Tensor &self, at::IntArrayRef dim, bool keepdim, at::Tensor &out) {
  return reduce_out(TRN_OPS_MIN, self, dim, keepdim, c10::nullopt, out, "amin");
}

// x.max() and x.min(): over every element, a 0-dim result (an error for an empty tensor, as
// torch gives).
at::Tensor full_extreme(trn_ops_reduce_op_t op, const at::Tensor &self, const char *name) {
  TORCH_CHECK(self.numel() > 0, name,
              "(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
              "reduction dim with the 'dim' argument.");
  at::Tensor out = at::empty({}, self.options());
  reduce(op, self, c10::nullopt, false, out, name);
  return out;
}
// argmax and argmin (and max.dim / min.dim's indices): the dim moved last (a strided view, made
// contiguous on the device), or every element as one row, into int64 indices on the device.
void arg_extreme(trn_ops_reduce_op_t op, const at::Tensor &self, c10::optional<int64_t> dim,
                 bool keepdim, const at::Tensor &out, const char *name) {
  if (out.numel() == 0) return;
  OpScope scope(out);
  at::Tensor x = self, o = out;
  std::vector<int64_t> dims;
  bool keep = keepdim;
  const int64_t rank = self.dim();
  if (dim && rank > 0) {
    const int64_t d = c10::maybe_wrap_dim(*dim, rank);
    if (d != rank - 1) {
      x = self.movedim(d, -1);
      if (keepdim) {
        o = out.squeeze(d);
        keep = false;
      }
    }
    dims.push_back(rank - 1);
  }
  run_reduce(scope.queue(), op, o, x, dims, keep, name);
}

at::Tensor &argmax_out(const at::Tensor &self, c10::optional<int64_t> dim, bool keepdim,
                       at::Tensor &out) {
  arg_extreme(TRN_OPS_ARGMAX, self, dim, keepdim, out, "argmax");
  return out;
}
at::Tensor &argmin_out(const at::Tensor &self, c10::optional<int64_t> dim, bool keepdim,
                       at::Tensor &out) {
  arg_extreme(TRN_OPS_ARGMIN, self, dim, keepdim, out, "argmin");
  return out;
}

// max(dim) and min(dim): the extreme values (NaN where a row has one) and their first indices.
std::tuple<at::Tensor &, at::Tensor &> extreme_dim(trn_ops_reduce_op_t values_op,
                                                   trn_ops_reduce_op_t index_op,
                                                   const at::Tensor &self, int64_t dim,
                                                   bool keepdim, at::Tensor &values,
                                                   at::Tensor &indices, const char *name) {
  reduce(values_op, self, at::IntArrayRef(dim), keepdim, values, name);
  arg_extreme(index_op, self, dim, keepdim, indices, name);
  return {values, indices};
}
std::tuple<at::Tensor &, at::Tensor &> max_dim_out(const at::Tensor &self, int64_t dim,
                                                   bool keepdim, at::Tensor &values,
                                                   at::Tensor &indices) {
  return extreme_dim(TRN_OPS_MAX, TRN_OPS_ARGMAX, self, dim, keepdim, values, indices, "max");
}
std::tuple<at::Tensor &, at::Tensor &> min_dim_out(const at::Tensor &self, int64_t dim,
                                                   bool keepdim, at::Tensor &values,
                                                   at::Tensor &indices) {
  return extreme_dim(TRN_OPS_MIN, TRN_OPS_ARGMIN, self, dim, keepdim, values, indices, "min");
}

at::Tensor max_all(const at::Tensor &self) {
  return full_extreme(TRN_OPS_MAX, self, "max");
}
at::Tensor min_all(const at::Tensor &self) {
  return full_extreme(TRN_OPS_MIN, self, "min");
}

}  // namespace

namespace {

// The vector norms clip_grad_norm_ and the optimizers take, on the device: 2 (the root of the
// sum of squares), 1 (the sum of magnitudes), inf and -inf (the largest and smallest magnitude),
// 0 (how many are not zero) and any other p ((sum |x|^p)^(1/p)) of floating tensors. float64 and
// integer dtypes run on the CPU, recorded.
at::Tensor &vector_norm_out(const at::Tensor &self, const at::Scalar &ord,
                            at::OptionalIntArrayRef dim, bool keepdim,
                            std::optional<at::ScalarType> dtype, at::Tensor &out) {
  const double p = ord.toDouble();
  const at::ScalarType type = dtype.value_or(self.scalar_type());
  const double inf = std::numeric_limits<double>::infinity();
  const bool on_device = at::isFloatingType(type) && type != at::kDouble &&
                         at::isFloatingType(self.scalar_type()) && !std::isnan(p) &&
                         (self.numel() > 0 || p >= 0.0);
  at::Tensor result;
  if (on_device) {
    const at::Tensor x = self.to(type);
    const at::Tensor magnitude = x.abs();
    const auto extreme = [&](bool largest) {
      return dim && !dim->empty() ? (largest ? at::amax(magnitude, *dim, keepdim)
                                             : at::amin(magnitude, *dim, keepdim))
                                  : (largest ? at::amax(magnitude, at::IntArrayRef{}, keepdim)
                                             : at::amin(magnitude, at::IntArrayRef{}, keepdim));
    };
    if (p == 2.0)
      result = at::sum(x * x, dim, keepdim).sqrt();
    else if (p == 1.0)
      result = at::sum(magnitude, dim, keepdim);
    else if (p == inf || p == -inf)
      result = extreme(p > 0);
    else if (p == 0.0)  // how many elements are not zero
      result = at::sum(at::ne(x, 0).to(type), dim, keepdim);
    else
      result = at::pow(at::sum(at::pow(magnitude, p), dim, keepdim), 1.0 / p);
  } else {
    record_cpu_run("aten::linalg_vector_norm.out");
    result = at::linalg_vector_norm(self.cpu(), ord, dim, keepdim, dtype);
  }
  resize_out(out, result.sizes());
  return out.copy_(result);
}

// var and std (and var_mean, std_mean) of float tensors in two passes on the device: the mean,
// then the sum of squared differences over max(0, N - correction), in float32 (the CPU's
// Welford accumulates alike; the two agree to float32's rounding). Others on the CPU, recorded.
struct Moments {
  at::Tensor var, mean;  // float32; the variance before it is rounded to the input's dtype
};
std::optional<Moments> moments(const at::Tensor &self, at::OptionalIntArrayRef dim,
                               const c10::optional<at::Scalar> &correction, bool keepdim) {
  if (!is_float_type(self.scalar_type())) return std::nullopt;
  std::vector<int64_t> dims;
  if (dim && !dim->empty()) dims.assign(dim->begin(), dim->end());
  if (dims.empty())
    for (int64_t d = 0; d < self.dim(); ++d) dims.push_back(d);
  int64_t n = 1;
  for (int64_t &d : dims) {
    d = c10::maybe_wrap_dim(d, self.dim());
    n *= self.dim() == 0 ? 1 : self.size(d);
  }
  const double c = correction ? correction->toDouble() : 1.0;
  const double divisor = std::max(0.0, static_cast<double>(n) - c);
  const at::Tensor x = self.to(at::kFloat);
  const at::Tensor mean = self.dim() == 0 ? x : x.mean(dims, /*keepdim=*/true);
  const at::Tensor centred = x - mean;
  at::Tensor sq = self.dim() == 0 ? centred * centred : (centred * centred).sum(dims, keepdim);
  at::Tensor var = sq / divisor;
  at::Tensor m = keepdim || self.dim() == 0 ? mean : mean.squeeze(dims);
  return Moments{var, m.to(self.scalar_type())};
}

// The variance (or its root, `root`) on the device, or the CPU's.
at::Tensor spread_of(const at::Tensor &self, at::OptionalIntArrayRef dim,
                     const c10::optional<at::Scalar> &correction, bool keepdim, bool root) {
  if (const auto m = moments(self, dim, correction, keepdim))
    return (root ? at::sqrt(m->var) : m->var).to(self.scalar_type());
  const at::Tensor r = root ? at::std(self.cpu(), dim, correction, keepdim)
                            : at::var(self.cpu(), dim, correction, keepdim);
  record_cpu_run(root ? "aten::std.correction" : "aten::var.correction");
  return r.to(self.device());
}

at::Tensor &var_out(const at::Tensor &self, at::OptionalIntArrayRef dim,
                    const c10::optional<at::Scalar> &correction, bool keepdim, at::Tensor &out) {
  check_same_device("var", {self, out});
  const at::Tensor result = spread_of(self, dim, correction, keepdim, false);
  resize_out(out, result.sizes());
  return out.copy_(result);
}
at::Tensor var(const at::Tensor &self, at::OptionalIntArrayRef dim,
               const c10::optional<at::Scalar> &correction, bool keepdim) {
  check_same_device("var", {self});
  return spread_of(self, dim, correction, keepdim, false);
}
at::Tensor std_dev(const at::Tensor &self, at::OptionalIntArrayRef dim,
                   const c10::optional<at::Scalar> &correction, bool keepdim) {
  check_same_device("std", {self});
  return spread_of(self, dim, correction, keepdim, true);
}
// var_mean and std_mean: (the spread, the mean).
std::tuple<at::Tensor, at::Tensor> spread_and_mean(const at::Tensor &self,
                                                   at::OptionalIntArrayRef dim,
                                                   const c10::optional<at::Scalar> &correction,
                                                   bool keepdim, bool root) {
  check_same_device(root ? "std_mean" : "var_mean", {self});
  if (const auto m = moments(self, dim, correction, keepdim))
    return {(root ? at::sqrt(m->var) : m->var).to(self.scalar_type()), m->mean};
  const auto [v, mean] = root ? at::std_mean(self.cpu(), dim, correction, keepdim)
                              : at::var_mean(self.cpu(), dim, correction, keepdim);
  record_cpu_run(root ? "aten::std_mean.correction" : "aten::var_mean.correction");
  return {v.to(self.device()), mean.to(self.device())};
}
std::tuple<at::Tensor, at::Tensor> var_mean(const at::Tensor &self, at::OptionalIntArrayRef dim,
                                            const c10::optional<at::Scalar> &correction,
                                            bool keepdim) {
  return spread_and_mean(self, dim, correction, keepdim, false);
}
std::tuple<at::Tensor, at::Tensor> std_mean(const at::Tensor &self, at::OptionalIntArrayRef dim,
                                            const c10::optional<at::Scalar> &correction,
                                            bool keepdim) {
  return spread_and_mean(self, dim, correction, keepdim, true);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_vector_norm.out", TORCH_FN(vector_norm_out));
  m.impl("sum.IntList_out", TORCH_FN(sum_out));
  m.impl("mean.out", TORCH_FN(mean_out));
  m.impl("amax.out", TORCH_FN(amax_out));
  m.impl("amin.out", TORCH_FN(amin_out));
  m.impl("max", TORCH_FN(max_all));
  m.impl("argmax.out", TORCH_FN(argmax_out));
  m.impl("argmin.out", TORCH_FN(argmin_out));
  m.impl("max.dim_max", TORCH_FN(max_dim_out));
  m.impl("min.dim_min", TORCH_FN(min_dim_out));
  m.impl("min", TORCH_FN(min_all));
  m.impl("var.correction", TORCH_FN(var));
  m.impl("var.correction_out", TORCH_FN(var_out));
  m.impl("std.correction", TORCH_FN(std_dev));
  m.impl("var_mean.correction", TORCH_FN(var_mean));
  m.impl("std_mean.correction", TORCH_FN(std_mean));
}

}  // namespace torch_trn
