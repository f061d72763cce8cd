// Matrix products: mm, addmm (nn.Linear), bmm (attention), dot and addmv. A transposed operand —
// what `weight.t()` and `k.transpose(-2, -1)` give — is passed as its storage with the transpose
// flag, so the Tensor engine reads it as it lies instead of a copy making it contiguous first.
#include <torch/library.h>

#include "op_support.hpp"

namespace torch_trn {
namespace {

// Whether the last two dims are swapped relative to a contiguous layout.
bool is_transposed(const at::Tensor &t) {
  const int64_t r = t.dim();
  if (r < 2 || t.is_contiguous()) return false;
  return t.transpose(r - 2, r - 1).is_contiguous();
}

// The operand's view and whether it is passed transposed.
trn_ops_tensor_t operand(const at::Tensor &t, bool *transposed) {
  *transposed = is_transposed(t);
  return view_of(*transposed ? t.transpose(-2, -1) : t);
}

uint32_t flags_of(bool a_transposed, bool b_transposed) {
  return (a_transposed ? TRN_OPS_TRANSPOSE_A : 0u) | (b_transposed ? TRN_OPS_TRANSPOSE_B : 0u);
}

void matmul(const at::Tensor &a, const at::Tensor &b, const at::Tensor &out, const char *name) {
  check_same_device(name, {a, b, out});
  if (out.numel() == 0) return;
  OpScope scope(out);
  if (a.size(-1) == 0) {  // an empty reduction: zeros, as torch gives
    out.zero_();
    return;
  }
  bool ta = false, tb = false;
  const auto o = view_of(out), x = operand(a, &ta), y = operand(b, &tb);
  check_ops(trn_ops_matmul(scope.queue(), &o, &x, &y, flags_of(ta, tb), nullptr), name);
}

at::Tensor &mm_out(const at::Tensor &self, const at::Tensor &mat2, at::Tensor &out) {
  resize_out(out, {self.size(0), mat2.size(1)});
  matmul(self, mat2, out, "mm");
  return out;
}

at::Tensor &bmm_out(const at::Tensor &self, const at::Tensor &mat2, at::Tensor &out) {
  resize_out(out, {self.size(0), self.size(1), mat2.size(2)});
  matmul(self, mat2, out, "bmm");
  return out;
}

at::Tensor &addmm_out(const at::Tensor &self, const at::Tensor &mat1, const at::Tensor &mat2,
                      const at::Scalar &beta, const at::Scalar &alpha, at::Tensor &out) {
  check_same_device("addmm", {self, mat1, mat2, out});
  resize_out(out, {mat1.size(0), mat2.size(1)});
  if (out.numel() == 0) return out;
  OpScope scope(out);
  if (mat1.size(1) == 0) {  // alpha * (empty product) = 0: beta * bias alone
    const at::Tensor bias = self.expand(out.sizes());
    if (scalar_of(beta) == 0.0)
      out.zero_();
    else
      out.copy_(bias * beta);
    return out;
  }
  bool ta = false, tb = false;
  // The bias as torch broadcasts it: [N] and [M, N] are taken as they are, [1, N] as [N] where
  // M > 1 (with M = 1 it is [M, N] itself: it may be the output, in place, as addmm_ makes it).
  const at::Tensor bias =
      self.dim() == 2 && self.size(0) == 1 && out.size(0) != 1 ? self.squeeze(0) : self;
  const auto o = view_of(out), c = view_of(bias), x = operand(mat1, &ta), y = operand(mat2, &tb);
  check_ops(trn_ops_addmm(scope.queue(), &o, &c, &x, &y, scalar_of(beta), scalar_of(alpha),
                          flags_of(ta, tb), nullptr),
            "addmm");
  return out;
}

// dot and addmv as matrix products of the vectors' [1, n] and [n, 1] views (fp32 accumulation,
// as the CPU's float kernels accumulate).
at::Tensor dot(const at::Tensor &self, const at::Tensor &other) {
  check_same_device("dot", {self, other});
  TORCH_CHECK(self.dim() == 1 && other.dim() == 1, "1D tensors expected, but got ", self.dim(),
              "D and ", other.dim(), "D tensors");
  TORCH_CHECK(self.size(0) == other.size(0), "inconsistent tensor size, expected tensor [",
              self.size(0), "] and src [", other.size(0),
              "] to have the same number of elements, but got ", self.size(0), " and ",
              other.size(0), " elements respectively");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(),
              "dot : expected both vectors to have same dtype, but found ", self.scalar_type(),
              " and ", other.scalar_type());
  if (self.numel() == 0) return at::zeros({}, self.options());
  return at::mm(self.view({1, -1}), other.view({-1, 1})).view(at::IntArrayRef{});
}

at::Tensor &addmv_out(const at::Tensor &self, const at::Tensor &mat, const at::Tensor &vec,
                      const at::Scalar &beta, const at::Scalar &alpha, at::Tensor &out) {
  check_same_device("addmv", {self, mat, vec, out});
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1 && mat.size(1) == vec.size(0),
              "vector + matrix @ vector expected, got ", self.sizes(), ", ", mat.sizes(), ", ",
              vec.sizes());
  const at::Tensor addmm =
      at::addmm(self.dim() == 1 ? self.view({-1, 1}) : self.expand({mat.size(0)}).view({-1, 1}),
                mat, vec.view({-1, 1}), beta, alpha);
  resize_out(out, {mat.size(0)});
  return out.copy_(addmm.view({mat.size(0)}));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm.out", TORCH_FN(mm_out));
  m.impl("bmm.out", TORCH_FN(bmm_out));
  m.impl("addmm.out", TORCH_FN(addmm_out));
  m.impl("dot", TORCH_FN(dot));
  m.impl("addmv.out", TORCH_FN(addmv_out));
}

}  // namespace torch_trn
