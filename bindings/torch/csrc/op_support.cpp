#include "op_support.hpp"

#include <ATen/native/Resize.h>

#include <algorithm>

namespace torch_trn {

void resize_out(const at::Tensor &out, at::IntArrayRef sizes) {
  at::native::resize_output(out, sizes);
}

double scalar_of(const at::Scalar &s) {
  if (s.isBoolean()) return s.toBool() ? 1.0 : 0.0;
  TORCH_CHECK(!s.isComplex(), "trn ops take no complex scalars");
  return s.toDouble();
}

double cpu_scalar_of(const at::Tensor &t) {
  TORCH_CHECK(is_cpu_scalar(t), "a CPU tensor of ", t.numel(),
              " elements passed to a trn op: move it to the device first");
  return scalar_of(t.item());
}

OutputOrder in_output_order(const at::Tensor &out, std::vector<at::Tensor> inputs) {
  if (out.is_contiguous() || !out.is_non_overlapping_and_dense()) return {out, std::move(inputs)};
  std::vector<int64_t> perm(static_cast<size_t>(out.dim()));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  std::stable_sort(perm.begin(), perm.end(),
                   [&](int64_t a, int64_t b) { return out.stride(a) > out.stride(b); });
  at::Tensor permuted = out.permute(perm);
  if (!permuted.is_contiguous()) return {out, std::move(inputs)};
  for (at::Tensor &t : inputs)
    if (!t.device().is_cpu()) t = t.expand(out.sizes()).permute(perm);
  return {permuted, std::move(inputs)};
}

at::Tensor empty_on(const at::Tensor &like, at::IntArrayRef sizes, c10::ScalarType type) {
  return at::empty(sizes, like.options().dtype(type));
}

}  // namespace torch_trn
