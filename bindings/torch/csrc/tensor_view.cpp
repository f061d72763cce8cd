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

trn_ops_tensor_t view_of(const at::Tensor &t) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
              "expected a trn (privateuseone) tensor, got one on ", t.device().str());
  const auto dtype = to_trn_dtype(t.scalar_type());
  TORCH_CHECK(dtype, "trn tensors cannot hold ", t.scalar_type());
  TORCH_CHECK(t.dim() <= TRN_OPS_MAX_DIMS, "trn ops take at most ", TRN_OPS_MAX_DIMS,
              " dims, got a tensor of ", t.dim());
  trn_ops_tensor_t v{};
  v.dtype = *dtype;
  v.rank = static_cast<uint32_t>(t.dim());
  for (int64_t i = 0; i < t.dim(); ++i) {
    v.shape[i] = t.size(i);
    v.strides[i] = t.stride(i);
  }
  if (t.numel() == 0 || t.storage().data() == nullptr) return v;
  const Device &dev = device_at(t.device());
  const auto address = reinterpret_cast<uintptr_t>(t.data_ptr());
  check(trn_mem_lookup(dev.trn_device(), address, &v.mem, &v.offset), "trn_mem_lookup");
  return v;
}

trn_queue_t queue_of(const at::Tensor &t) {
  return current_queue(device_at(t.device()).index());
}

bool is_cpu_scalar(const at::Tensor &t) {
  return t.device().is_cpu() && t.numel() == 1;
}

}  // namespace torch_trn
