// torch.autocast("trn", dtype=torch.bfloat16 or torch.float16): the AutocastPrivateUse1 kernels,
// with the op lists and cast policies PyTorch's own autocast uses for CUDA (ATen/autocast_mode.h):
// matmuls and convolutions in the lower precision, reductions, norms and losses that need range
// in float32, mixed-dtype ops promoted. Every other op passes through untouched.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace torch_trn {
// The op lists' signatures name ATen's types unqualified, as ATen's own autocast file sees them.
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define TRN_AUTOCAST_LOW_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define TRN_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define TRN_AUTOCAST_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define TRN_AUTOCAST_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
#define TRN_AUTOCAST_FP32_APPEND_DTYPE(REDISPATCH_FUNC, REGISTER_NAME, REGISTER_SIGNATURE, \
                                       REDISPATCH_SIGNATURE, POLICY)                       \
  KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(                                     \
      REDISPATCH_FUNC, REGISTER_NAME, REGISTER_SIGNATURE, REDISPATCH_SIGNATURE, POLICY)
  AT_FORALL_LOWER_PRECISION_FP(TRN_AUTOCAST_LOW_PRECISION_FP)
  AT_FORALL_FP32(TRN_AUTOCAST_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(TRN_AUTOCAST_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(TRN_AUTOCAST_FP32_APPEND_DTYPE)
  AT_FORALL_PROMOTE(TRN_AUTOCAST_PROMOTE)
#undef TRN_AUTOCAST_LOW_PRECISION_FP
#undef TRN_AUTOCAST_FP32
#undef TRN_AUTOCAST_FP32_SET_OPT_DTYPE
#undef TRN_AUTOCAST_PROMOTE
#undef TRN_AUTOCAST_FP32_APPEND_DTYPE
}

}  // namespace torch_trn
