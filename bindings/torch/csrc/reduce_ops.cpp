// Reductions: sum and mean over dims (bias gradients, losses, the attention block's mean), as
// the .out overloads torch's structured kernels call with the output already shaped.
#include <torch/library.h>

#include <vector>

#include "op_support.hpp"

namespace torch_trn {
namespace {

void reduce(trn_ops_reduce_op_t op, const at::Tensor &self, at::OptionalIntArrayRef dim,
            bool keepdim, const at::Tensor &out, const char *name) {
  if (out.numel() == 0) return;
  OpScope scope(out);
  if (self.numel() == 0) {  // an empty sum is 0; an empty mean NaN, as torch gives
    out.fill_(op == TRN_OPS_SUM ? 0.0 : std::numeric_limits<double>::quiet_NaN());
    return;
  }
  std::vector<int64_t> dims;
  if (dim && !dim->empty()) {
    for (int64_t d : *dim) dims.push_back(c10::maybe_wrap_dim(d, self.dim()));
  } else {
    for (int64_t d = 0; d < self.dim(); ++d) dims.push_back(d);
  }
  const auto o = view_of(out), x = view_of(self);
  check_ops(trn_ops_reduce(scope.queue(), op, &o, &x, dims.data(),
                           static_cast<uint32_t>(dims.size()), keepdim ? 1 : 0, nullptr),
            name);
}

at::Tensor &sum_out(const at::Tensor &self, at::OptionalIntArrayRef dim, bool keepdim,
                    c10::optional<at::ScalarType> dtype, at::Tensor &out) {
  (void)dtype;  // the structured meta function already gave `out` its dtype
  reduce(TRN_OPS_SUM, self, dim, keepdim, out, "sum");
  return out;
}

at::Tensor &mean_out(const at::Tensor &self, at::OptionalIntArrayRef dim, bool keepdim,
                     c10::optional<at::ScalarType> dtype, at::Tensor &out) {
  (void)dtype;
  reduce(TRN_OPS_MEAN, self, dim, keepdim, out, "mean");
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sum.IntList_out", TORCH_FN(sum_out));
  m.impl("mean.out", TORCH_FN(mean_out));
}

}  // namespace torch_trn
