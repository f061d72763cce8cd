// Average pooling composed of device ops: the windows are a view of the (zero-padded) input,
// unfolded twice, summed and divided; the backward adds each kernel offset's share of the
// gradient into a strided view of the padded input's gradient (kh x kw strided adds). Adaptive
// pooling whose output divides the input is the same pooling. ceil_mode where it adds a partial
// window, adaptive sizes that do not divide, and non-float dtypes run on the CPU, recorded.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <array>
#include <optional>

#include "fallback.hpp"
#include "op_support.hpp"

namespace torch_trn {
namespace {

struct Pool {
  std::array<int64_t, 2> kernel, stride, padding, out;
  std::optional<int64_t> divisor;  // divisor_override
  bool count_include_pad = true;
};

int64_t pooled_size(int64_t in, int64_t k, int64_t s, int64_t p, bool ceil_mode) {
  const int64_t span = in + 2 * p - k;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;  // the last window must start inside
  return out;
}

// The pooling the device computes, or nothing for the cases the CPU's kernel takes (which also
// raises PyTorch's messages for arguments that are wrong).
std::optional<Pool> device_pool(const at::Tensor &self, at::IntArrayRef kernel_size,
                                at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                                bool count_include_pad, std::optional<int64_t> divisor) {
  if (!is_float_type(self.scalar_type()) || (self.dim() != 3 && self.dim() != 4) ||
      self.numel() == 0 || kernel_size.empty() || kernel_size.size() > 2 || stride.size() > 2 ||
      padding.size() > 2 || (divisor && *divisor == 0))
    return std::nullopt;
  Pool p;
  p.kernel = pair_of(kernel_size, "kernel_size", 0);
  p.stride = stride.empty() ? p.kernel : pair_of(stride, "stride", 0);
  p.padding = pair_of(padding, "padding", 0);
  p.divisor = divisor;
  p.count_include_pad = count_include_pad;
  for (int d = 0; d < 2; ++d) {
    const int64_t in = self.size(self.dim() - 2 + d);
    const int64_t k = p.kernel[d], s = p.stride[d], pad = p.padding[d];
    if (k <= 0 || s <= 0 || pad < 0 || pad > k / 2 || in + 2 * pad < k) return std::nullopt;
    p.out[d] = pooled_size(in, k, s, pad, false);
    if (ceil_mode && pooled_size(in, k, s, pad, true) != p.out[d]) return std::nullopt;
  }
  return p;
}

at::Tensor padded(const at::Tensor &x, const Pool &p) {
  if (p.padding[0] == 0 && p.padding[1] == 0) return x;
  return at::constant_pad_nd(x, {p.padding[1], p.padding[1], p.padding[0], p.padding[0]}, 0.0);
}

// The sum of each window of x (padded), [..., OH, OW].
at::Tensor window_sums(const at::Tensor &x, const Pool &p) {
  const int64_t r = x.dim();
  const at::Tensor windows =
      padded(x, p).unfold(r - 2, p.kernel[0], p.stride[0]).unfold(r - 1, p.kernel[1], p.stride[1]);
  return windows.sum({-2, -1});
}

// What each window's sum is divided by: the override, the kernel's area, or (padding left out)
// how many input elements the window covers.
at::Tensor divisors(const at::Tensor &self, const Pool &p) {
  if (p.divisor) return at::full({}, static_cast<double>(*p.divisor), self.options());
  const bool padded_windows = p.padding[0] > 0 || p.padding[1] > 0;
  if (p.count_include_pad || !padded_windows)
    return at::full({}, static_cast<double>(p.kernel[0] * p.kernel[1]), self.options());
  const int64_t h = self.size(-2), w = self.size(-1);
  return window_sums(at::ones({h, w}, self.options().dtype(at::kFloat)), p).to(self.scalar_type());
}

at::Tensor &avg_pool2d_out(const at::Tensor &self, at::IntArrayRef kernel_size,
                           at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                           bool count_include_pad, std::optional<int64_t> divisor_override,
                           at::Tensor &out) {
  check_same_device("avg_pool2d", {self, out});
  const auto pool = device_pool(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                divisor_override);
  if (!pool) {
    const at::Tensor result = at::avg_pool2d(self.cpu(), kernel_size, stride, padding, ceil_mode,
                                             count_include_pad, divisor_override);
    record_cpu_run("aten::avg_pool2d.out");
    resize_out(out, result.sizes());
    return out.copy_(result);
  }
  OpScope scope(self);
  const at::Tensor result = window_sums(self, *pool) / divisors(self, *pool);
  resize_out(out, result.sizes());
  return out.copy_(result);
}

at::Tensor &avg_pool2d_backward_out(const at::Tensor &grad_output, const at::Tensor &self,
                                    at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                    at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                                    std::optional<int64_t> divisor_override,
                                    at::Tensor &grad_input) {
  check_same_device("avg_pool2d_backward", {grad_output, self, grad_input});
  const auto pool = device_pool(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                divisor_override);
  if (!pool || grad_output.sizes().back() != pool->out[1]) {
    const at::Tensor result =
        at::avg_pool2d_backward(grad_output.cpu(), self.cpu(), kernel_size, stride, padding,
                                ceil_mode, count_include_pad, divisor_override);
    record_cpu_run("aten::avg_pool2d_backward.grad_input");
    resize_out(grad_input, result.sizes());
    return grad_input.copy_(result);
  }
  OpScope scope(self);
  const Pool &p = *pool;
  const int64_t r = self.dim();
  const at::Tensor share = grad_output / divisors(self, p);
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  sizes[r - 2] += 2 * p.padding[0];
  sizes[r - 1] += 2 * p.padding[1];
  at::Tensor whole = at::zeros(sizes, share.options());
  for (int64_t i = 0; i < p.kernel[0]; ++i) {
    for (int64_t j = 0; j < p.kernel[1]; ++j) {
      // The input elements at offset (i, j) of every window: a strided view.
      const at::Tensor at_offset =
          whole.slice(r - 2, i, i + p.stride[0] * (p.out[0] - 1) + 1, p.stride[0])
              .slice(r - 1, j, j + p.stride[1] * (p.out[1] - 1) + 1, p.stride[1]);
      at_offset.copy_(at_offset.contiguous() + share);
    }
  }
  const at::Tensor result = whole.slice(r - 2, p.padding[0], p.padding[0] + self.size(r - 2))
                                .slice(r - 1, p.padding[1], p.padding[1] + self.size(r - 1));
  resize_out(grad_input, self.sizes());
  return grad_input.copy_(result);
}

// Adaptive pooling to an output that divides the input: windows of input / output, that stride.
std::optional<std::array<int64_t, 2>> adaptive_kernel(const at::Tensor &self, at::IntArrayRef out) {
  if (out.size() != 2 || self.dim() < 3) return std::nullopt;
  std::array<int64_t, 2> k{};
  for (int d = 0; d < 2; ++d) {
    const int64_t in = self.size(self.dim() - 2 + d);
    if (out[d] <= 0 || in % out[d] != 0) return std::nullopt;
    k[d] = in / out[d];
  }
  return k;
}

at::Tensor adaptive_avg_pool2d(const at::Tensor &self, c10::SymIntArrayRef output_size) {
  check_same_device("adaptive_avg_pool2d", {self});
  const auto size = C10_AS_INTARRAYREF_SLOW(output_size);
  const auto k = adaptive_kernel(self, size);
  if (!k || !is_float_type(self.scalar_type())) {
    const at::Tensor result = at::_adaptive_avg_pool2d(self.cpu(), size);
    record_cpu_run("aten::_adaptive_avg_pool2d");
    return result.to(self.device());
  }
  at::Tensor out = at::empty({0}, self.options());
  return avg_pool2d_out(self, *k, *k, {0, 0}, false, true, std::nullopt, out);
}

at::Tensor adaptive_avg_pool2d_backward(const at::Tensor &grad_output, const at::Tensor &self) {
  check_same_device("adaptive_avg_pool2d_backward", {grad_output, self});
  const auto k = adaptive_kernel(self, grad_output.sizes().slice(grad_output.dim() - 2));
  if (!k || !is_float_type(self.scalar_type())) {
    const at::Tensor result = at::_adaptive_avg_pool2d_backward(grad_output.cpu(), self.cpu());
    record_cpu_run("aten::_adaptive_avg_pool2d_backward");
    return result.to(self.device());
  }
  at::Tensor grad_input = at::empty({0}, self.options());
  return avg_pool2d_backward_out(grad_output, self, *k, *k, {0, 0}, false, true, std::nullopt,
                                 grad_input);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("avg_pool2d.out", TORCH_FN(avg_pool2d_out));
  m.impl("avg_pool2d_backward.grad_input", TORCH_FN(avg_pool2d_backward_out));
  m.impl("_adaptive_avg_pool2d", TORCH_FN(adaptive_avg_pool2d));
  m.impl("_adaptive_avg_pool2d_backward", TORCH_FN(adaptive_avg_pool2d_backward));
}

}  // namespace torch_trn
