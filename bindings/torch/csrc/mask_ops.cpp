// Masks and tests composed of device ops: tril and triu (a causal attention mask), isneginf and
// isposinf, isnan, sign, all and any, the logical ops (and the bitwise ones of bools),
// masked_fill. scaled_dot_product_attention's math path,
// and code that checks its tensors, use them on every call; each is a compare, a select or a max on
// the device instead of a copy to the CPU and back.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <limits>
#include <vector>

#include "fallback.hpp"
#include "op_support.hpp"

namespace torch_trn {
namespace {

// Keeps x where `keep(column - row)` of its last two dims holds, zeros elsewhere: the indices
// are float32 aranges on the device (exact below 2^24).
template <typename Keep>
at::Tensor &triangle(const at::Tensor &self, int64_t diagonal, at::Tensor &out, Keep keep) {
  TORCH_CHECK(self.dim() >= 2, "tril/triu: the input needs two dims, got ", self.sizes());
  resize_out(out, self.sizes());
  if (self.numel() == 0) return out;
  const auto index = self.options().dtype(at::kFloat);
  const at::Tensor rows = at::arange(self.size(-2), index).unsqueeze(1);
  const at::Tensor cols = at::arange(self.size(-1), index).unsqueeze(0);
  const at::Tensor mask = keep(cols - rows, static_cast<double>(diagonal));
  return out.copy_(at::where(mask, self, at::zeros({}, self.options())));
}
at::Tensor &tril_out(const at::Tensor &self, int64_t diagonal, at::Tensor &out) {
  return triangle(self, diagonal, out,
                  [](const at::Tensor &offset, double k) { return offset <= k; });
}
at::Tensor &triu_out(const at::Tensor &self, int64_t diagonal, at::Tensor &out) {
  return triangle(self, diagonal, out,
                  [](const at::Tensor &offset, double k) { return offset >= k; });
}

at::Tensor &is_infinite_out(const at::Tensor &self, double infinity, at::Tensor &out) {
  resize_out(out, self.sizes());
  if (!at::isFloatingType(self.scalar_type())) return out.fill_(false);
  return out.copy_(at::eq(self, infinity));
}
at::Tensor &isneginf_out(const at::Tensor &self, at::Tensor &out) {
  return is_infinite_out(self, -std::numeric_limits<double>::infinity(), out);
}
at::Tensor &isposinf_out(const at::Tensor &self, at::Tensor &out) {
  return is_infinite_out(self, std::numeric_limits<double>::infinity(), out);
}

// all: no element is zero (the largest of "is zero" is 0); any: some element is not zero.
at::Tensor &truth_reduce(const at::Tensor &self, at::OptionalIntArrayRef dims, bool keepdim,
                         bool all, at::Tensor &out) {
  const at::Tensor hit = (all ? at::eq(self, 0) : at::ne(self, 0)).to(at::kFloat);
  std::vector<int64_t> over;
  if (dims.has_value()) over.assign(dims->begin(), dims->end());
  at::Tensor found = self.numel() == 0 ? at::zeros(at::IntArrayRef{}, hit.options())
                                       : at::amax(hit, over, keepdim);
  if (self.numel() == 0 && (keepdim || !over.empty())) {
    // An empty input: all() is true, any() false, in the reduced shape.
    return out.copy_(at::empty(out.sizes(), out.options()).fill_(all));
  }
  const at::Tensor result = all ? at::eq(found, 0) : at::ne(found, 0);
  resize_out(out, result.sizes());
  return out.copy_(result);
}
at::Tensor &all_all_out(const at::Tensor &self, at::Tensor &out) {
  return truth_reduce(self, c10::nullopt, false, true, out);
}
at::Tensor &any_all_out(const at::Tensor &self, at::Tensor &out) {
  return truth_reduce(self, c10::nullopt, false, false, out);
}
at::Tensor &all_dim_out(const at::Tensor &self, int64_t dim, bool keepdim, at::Tensor &out) {
  return truth_reduce(self, at::IntArrayRef{dim}, keepdim, true, out);
}
at::Tensor &any_dim_out(const at::Tensor &self, int64_t dim, bool keepdim, at::Tensor &out) {
  return truth_reduce(self, at::IntArrayRef{dim}, keepdim, false, out);
}

// The logical ops: each operand's truth (not zero; NaN is true) as a bool on the device, then a
// compare or a select of those, converted to out's dtype as PyTorch's are.
at::Tensor truth_of(const at::Tensor &x) {
  return x.scalar_type() == at::kBool ? x : at::ne(x, 0);
}
at::Tensor &logical_out(const at::Tensor &result, at::Tensor &out) {
  resize_out(out, result.sizes());
  return out.copy_(result);
}
at::Tensor &logical_not_out(const at::Tensor &self, at::Tensor &out) {
  return logical_out(at::eq(self, 0), out);
}
at::Tensor &logical_and_out(const at::Tensor &self, const at::Tensor &other, at::Tensor &out) {
  return logical_out(at::where(truth_of(self), truth_of(other), false), out);
}
at::Tensor &logical_or_out(const at::Tensor &self, const at::Tensor &other, at::Tensor &out) {
  return logical_out(at::where(truth_of(self), true, truth_of(other)), out);
}
at::Tensor &logical_xor_out(const at::Tensor &self, const at::Tensor &other, at::Tensor &out) {
  return logical_out(at::ne(truth_of(self), truth_of(other)), out);
}

// isnan: x != x; integer tensors hold no NaN.
at::Tensor isnan(const at::Tensor &self) {
  if (!at::isFloatingType(self.scalar_type()))
    return at::zeros(self.sizes(), self.options().dtype(at::kBool));
  return at::ne(self, self);
}

// sign (and sgn, its name for real tensors): (x > 0) - (x < 0), so that NaN and both zeros give 0
// as on the CPU.
at::Tensor &sign_like(const char *name, at::Tensor (*cpu)(const at::Tensor &),
                      const at::Tensor &self, at::Tensor &out) {
  if (!is_float_type(self.scalar_type()) || out.scalar_type() != self.scalar_type()) {
    const at::Tensor result = cpu(self.cpu());
    record_cpu_run(name);
    return logical_out(result.to(self.device()), out);
  }
  const auto type = self.scalar_type();
  return logical_out(at::gt(self, 0).to(type) - at::lt(self, 0).to(type), out);
}
at::Tensor &sign_out(const at::Tensor &self, at::Tensor &out) {
  return sign_like(
      "aten::sign.out", [](const at::Tensor &x) { return at::sign(x); }, self, out);
}
at::Tensor &sgn_out(const at::Tensor &self, at::Tensor &out) {
  return sign_like(
      "aten::sgn.out", [](const at::Tensor &x) { return at::sgn(x); }, self, out);
}

// The bitwise ops of bool tensors are the logical ops; of integer tensors they run on the CPU
// (recorded): the engines' bitvec operators are not reachable through libtrn_ops yet.
template <typename Logical, typename Cpu>
at::Tensor &bitwise_out(const char *name, const at::Tensor &self, const at::Tensor &other,
                        at::Tensor &out, Logical logical, Cpu cpu) {
  if (self.scalar_type() == at::kBool && other.scalar_type() == at::kBool &&
      out.scalar_type() == at::kBool)
    return logical(self, other, out);
  const at::Tensor result = cpu(self.cpu(), other.is_cpu() ? other : other.cpu());
  record_cpu_run(name);
  return logical_out(result.to(self.device()), out);
}
at::Tensor &bitwise_and_out(const at::Tensor &self, const at::Tensor &other, at::Tensor &out) {
  return bitwise_out(
      "aten::bitwise_and.Tensor_out", self, other, out, logical_and_out,
      [](const at::Tensor &a, const at::Tensor &b) { return at::bitwise_and(a, b); });
}
at::Tensor &bitwise_or_out(const at::Tensor &self, const at::Tensor &other, at::Tensor &out) {
  return bitwise_out("aten::bitwise_or.Tensor_out", self, other, out, logical_or_out,
                     [](const at::Tensor &a, const at::Tensor &b) { return at::bitwise_or(a, b); });
}
at::Tensor &bitwise_xor_out(const at::Tensor &self, const at::Tensor &other, at::Tensor &out) {
  return bitwise_out(
      "aten::bitwise_xor.Tensor_out", self, other, out, logical_xor_out,
      [](const at::Tensor &a, const at::Tensor &b) { return at::bitwise_xor(a, b); });
}
at::Tensor &bitwise_not_out(const at::Tensor &self, at::Tensor &out) {
  if (self.scalar_type() == at::kBool && out.scalar_type() == at::kBool)
    return logical_not_out(self, out);
  const at::Tensor result = at::bitwise_not(self.cpu());
  record_cpu_run("aten::bitwise_not.out");
  return logical_out(result.to(self.device()), out);
}

// masked_fill_: where(mask, value, self) into self, an exact select of the value's bits. The
// mask broadcasts to self (not self to the mask), as PyTorch requires.
at::Tensor &masked_fill_with(at::Tensor &self, const at::Tensor &mask, const at::Tensor &value) {
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(at::infer_size(self.sizes(), mask.sizes()) == self.sizes(),
              "masked_fill_: a mask of shape ", mask.sizes(), " does not broadcast to self's ",
              self.sizes(), " (the mask may broadcast, self may not)");
  if (self.numel() == 0) return self;
  return self.copy_(at::where(mask, value.to(self.scalar_type()), self));
}
at::Tensor &masked_fill_scalar_(at::Tensor &self, const at::Tensor &mask, const at::Scalar &value) {
  return masked_fill_with(self, mask, at::scalar_tensor(value, self.options().device(at::kCPU)));
}
at::Tensor &masked_fill_tensor_(at::Tensor &self, const at::Tensor &mask, const at::Tensor &value) {
  TORCH_CHECK(value.dim() == 0,
              "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  return masked_fill_with(self, mask, value);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("tril.out", TORCH_FN(tril_out));
  m.impl("triu.out", TORCH_FN(triu_out));
  m.impl("isneginf.out", TORCH_FN(isneginf_out));
  m.impl("isposinf.out", TORCH_FN(isposinf_out));
  m.impl("all.all_out", TORCH_FN(all_all_out));
  m.impl("any.all_out", TORCH_FN(any_all_out));
  m.impl("all.out", TORCH_FN(all_dim_out));
  m.impl("any.out", TORCH_FN(any_dim_out));
  m.impl("logical_not.out", TORCH_FN(logical_not_out));
  m.impl("logical_and.out", TORCH_FN(logical_and_out));
  m.impl("logical_or.out", TORCH_FN(logical_or_out));
  m.impl("logical_xor.out", TORCH_FN(logical_xor_out));
  m.impl("isnan", TORCH_FN(isnan));
  m.impl("sign.out", TORCH_FN(sign_out));
  m.impl("sgn.out", TORCH_FN(sgn_out));
  m.impl("bitwise_and.Tensor_out", TORCH_FN(bitwise_and_out));
  m.impl("bitwise_or.Tensor_out", TORCH_FN(bitwise_or_out));
  m.impl("bitwise_xor.Tensor_out", TORCH_FN(bitwise_xor_out));
  m.impl("bitwise_not.out", TORCH_FN(bitwise_not_out));
  m.impl("masked_fill_.Scalar", TORCH_FN(masked_fill_scalar_));
  m.impl("masked_fill_.Tensor", TORCH_FN(masked_fill_tensor_));
}

}  // namespace torch_trn
