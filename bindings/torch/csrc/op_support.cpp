#include "op_support.hpp"

#include <ATen/native/Resize.h>

#include <algorithm>

namespace torch_trn {

void resize_out(const at::Tensor &out, at::IntArrayRef sizes) {
  at::native::resize_output(out, sizes);
}

void prepare_out(const at::Tensor &out, const std::vector<at::Tensor> &operands,
                 c10::optional<at::ScalarType> result_type) {
  at::DimVector shape;
  for (const at::Tensor &t : operands) shape = at::infer_size_dimvector(shape, t.sizes());
  resize_out(out, shape);
  TORCH_CHECK(!result_type || at::canCast(*result_type, out.scalar_type()), "result type ",
              *result_type, " can't be cast to the desired output type ", out.scalar_type());
}

void check_same_device(const char *op, std::initializer_list<at::Tensor> tensors) {
  const at::Tensor *first = nullptr;
  for (const at::Tensor &t : tensors) {
    if (!t.defined() || t.device().is_cpu()) continue;
    if (!first) {
      first = &t;
      continue;
    }
    TORCH_CHECK(t.device() == first->device(),
                "Expected all tensors to be on the same device, but found at least two devices, ",
                first->device(), " and ", t.device(), "! (when checking arguments for ", op, ")");
  }
}

bool exact_as_double(const at::Scalar &s) {
  if (!s.isIntegral(/*includeBool=*/false)) return true;
  const int64_t v = s.toLong();
  return v >= -(int64_t{1} << 53) && v <= (int64_t{1} << 53);
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

std::vector<trn_ops_tensor_t> elementwise_views(const at::Tensor &out,
                                                std::initializer_list<at::Tensor> inputs) {
  bool wide = out.dim() > TRN_OPS_MAX_DIMS;
  for (const at::Tensor &t : inputs) wide = wide || t.dim() > TRN_OPS_MAX_DIMS;
  if (!wide) {
    std::vector<trn_ops_tensor_t> views{view_of(out)};
    for (const at::Tensor &t : inputs) views.push_back(view_of(t));
    return views;
  }
  std::vector<at::Tensor> all{out};
  for (const at::Tensor &t : inputs) all.push_back(t.expand(out.sizes()));
  return merged_views(all);
}

void t_copy(trn_queue_t q, const at::Tensor &out, const at::Tensor &x) {
  const auto v = elementwise_views(out, {x});
  check_ops(trn_ops_copy(q, &v[0], &v[1], nullptr), "copy");
}

void t_unary(trn_queue_t q, trn_ops_unary_op_t op, const at::Tensor &out, const at::Tensor &x) {
  const auto v = elementwise_views(out, {x});
  check_ops(trn_ops_unary(q, op, &v[0], &v[1], nullptr), "unary");
}

void t_binary(trn_queue_t q, trn_ops_binary_op_t op, const at::Tensor &out, const at::Tensor &a,
              const at::Tensor &b) {
  const auto v = elementwise_views(out, {a, b});
  check_ops(trn_ops_binary(q, op, &v[0], &v[1], &v[2], nullptr), "binary");
}

void t_binary_scalar(trn_queue_t q, trn_ops_binary_op_t op, const at::Tensor &out,
                     const at::Tensor &a, double s) {
  const auto v = elementwise_views(out, {a});
  check_ops(trn_ops_binary_scalar(q, op, &v[0], &v[1], s, 0, nullptr), "binary_scalar");
}

void t_where(trn_queue_t q, const at::Tensor &out, const at::Tensor &cond, const at::Tensor &a,
             const at::Tensor &b) {
  const auto v = elementwise_views(out, {cond, a, b});
  const trn_ops_tensor_t o = v[0], vc = v[1], va = v[2], vb = v[3];
  check_ops(trn_ops_where(q, &o, &vc, &va, &vb, nullptr), "where");
}

void t_reduce_all(trn_queue_t q, trn_ops_reduce_op_t op, const at::Tensor &out,
                  const at::Tensor &x) {
  const auto o = view_of(out), v = view_of(x);
  check_ops(trn_ops_reduce(q, op, &o, &v, nullptr, 0, 0, nullptr), "reduce");
}

at::Tensor empty_on(const at::Tensor &like, at::IntArrayRef sizes, c10::ScalarType type) {
  return at::empty(sizes, like.options().dtype(type));
}

std::array<int64_t, 2> pair_of(at::IntArrayRef v, const char *name, int64_t if_empty) {
  if (v.empty()) return {if_empty, if_empty};
  TORCH_CHECK(v.size() == 1 || v.size() == 2, "trn ops: ", name, " must be one or two ints, got ",
              v.size());
  return {v[0], v.size() == 2 ? v[1] : v[0]};
}

}  // namespace torch_trn
