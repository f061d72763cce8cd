#include "tensor_view.hpp"

#include <c10/util/Exception.h>

#include "check.hpp"
#include "devices.hpp"

namespace torch_trn {

std::optional<trn_dtype_t> to_trn_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float: return TRN_DTYPE_F32;
    case c10::ScalarType::BFloat16: return TRN_DTYPE_BF16;
    case c10::ScalarType::Half: return TRN_DTYPE_F16;
    case c10::ScalarType::Int: return TRN_DTYPE_I32;
    case c10::ScalarType::Short: return TRN_DTYPE_I16;
    case c10::ScalarType::Char: return TRN_DTYPE_I8;
    case c10::ScalarType::Byte: return TRN_DTYPE_U8;
    case c10::ScalarType::Bool: return TRN_DTYPE_U8;  // 0 or 1 in one byte, as torch stores it
    case c10::ScalarType::Double: return TRN_DTYPE_F64;
    case c10::ScalarType::Long: return TRN_DTYPE_I64;
    default: return std::nullopt;
  }
}

bool is_trn_dtype(c10::ScalarType type) {
  return to_trn_dtype(type).has_value();
}

trn_ops_tensor_t location_of(const at::Tensor &t) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
              "expected a trn tensor, got one on ", t.device().str());
  const auto dtype = to_trn_dtype(t.scalar_type());
  TORCH_CHECK(dtype, "trn tensors cannot hold ", t.scalar_type());
  trn_ops_tensor_t v{};
  v.dtype = *dtype;
  if (t.numel() == 0 || t.storage().data() == nullptr) return v;
  const Device &dev = device_at(t.device());
  const auto address = reinterpret_cast<uintptr_t>(t.data_ptr());
  check(trn_mem_lookup(dev.trn_device(), address, &v.mem, &v.offset), "trn_mem_lookup");
  return v;
}

trn_ops_tensor_t view_of(const at::Tensor &t) {
  TORCH_CHECK(t.dim() <= TRN_OPS_MAX_DIMS, "trn ops take at most ", TRN_OPS_MAX_DIMS,
              " dims, got a tensor of ", t.dim(),
              " (elementwise ops and copies take more where their dims merge to 8; reshape it, "
              "or run this op on the CPU)");
  trn_ops_tensor_t v = location_of(t);
  v.rank = static_cast<uint32_t>(t.dim());
  for (int64_t i = 0; i < t.dim(); ++i) {
    v.shape[i] = t.size(i);
    v.strides[i] = t.stride(i);
  }
  return v;
}

std::vector<trn_ops_tensor_t> merged_views(const std::vector<at::Tensor> &tensors) {
  const at::IntArrayRef shape = tensors.front().sizes();
  for (const at::Tensor &t : tensors)
    TORCH_CHECK(t.sizes() == shape, "merged_views: tensors of sizes ", t.sizes(), " and ", shape);
  // From the last dim to the first: a dim joins the one after it when every tensor steps over
  // that one whole (stride = its size x its stride); dims of size 1 go.
  std::vector<int64_t> sizes;  // innermost first
  std::vector<std::vector<int64_t>> strides(tensors.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] == 1) continue;
    bool joins = !sizes.empty();
    for (size_t i = 0; i < tensors.size() && joins; ++i)
      joins = tensors[i].stride(d) == strides[i].back() * sizes.back();
    if (joins) {
      sizes.back() *= shape[d];
      continue;
    }
    sizes.push_back(shape[d]);
    for (size_t i = 0; i < tensors.size(); ++i) strides[i].push_back(tensors[i].stride(d));
  }
  TORCH_CHECK(sizes.size() <= TRN_OPS_MAX_DIMS, "trn ops take at most ", TRN_OPS_MAX_DIMS,
              " dims, and the ", shape.size(), " of sizes ", shape, " merge only to ", sizes.size(),
              " (make the tensors contiguous, or run this op on the CPU)");
  std::vector<trn_ops_tensor_t> out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    trn_ops_tensor_t v = location_of(tensors[i]);
    v.rank = static_cast<uint32_t>(sizes.size());
    for (size_t k = 0; k < sizes.size(); ++k) {
      v.shape[sizes.size() - 1 - k] = sizes[k];
      v.strides[sizes.size() - 1 - k] = strides[i][k];
    }
    out.push_back(v);
  }
  return out;
}

trn_queue_t queue_of(const at::Tensor &t) {
  return current_queue(device_at(t.device()).index());
}

bool is_cpu_scalar(const at::Tensor &t) {
  return t.device().is_cpu() && t.numel() == 1;
}

}  // namespace torch_trn
