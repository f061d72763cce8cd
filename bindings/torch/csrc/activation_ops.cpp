// Activations PyTorch has no composite of, composed of device ops as PyTorch's CPU kernels
// compute them: elu (and selu, celu, which call it), softplus, log_sigmoid and tanh's backward.
// Float dtypes on the device; others on the CPU, recorded.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <tuple>

#include "fallback.hpp"
#include "op_support.hpp"

namespace torch_trn {
namespace {

// Writes `result` into `out` (sized to it).
at::Tensor &written(const at::Tensor &result, at::Tensor &out) {
  resize_out(out, result.sizes());
  return out.copy_(result);
}

bool on_device(const at::Tensor &t) {
  return is_float_type(t.scalar_type());
}

// elu: x * scale where x > 0, (exp(x * input_scale) - 1) * alpha * scale elsewhere.
at::Tensor &elu_out(const at::Tensor &self, const at::Scalar &alpha, const at::Scalar &scale,
                    const at::Scalar &input_scale, at::Tensor &out) {
  check_same_device("elu", {self, out});
  if (!on_device(self)) {
    const at::Tensor result = at::elu(self.cpu(), alpha, scale, input_scale);
    record_cpu_run("aten::elu.out");
    return written(result.to(self.device()), out);
  }
  const double neg = scalar_of(alpha) * scalar_of(scale), pos = scalar_of(scale);
  const at::Tensor negative = (at::exp(self * scalar_of(input_scale)) - 1.0) * neg;
  return written(at::where(self > 0, self * pos, negative), out);
}

at::Tensor &elu_backward_out(const at::Tensor &grad, const at::Scalar &alpha,
                             const at::Scalar &scale, const at::Scalar &input_scale, bool is_result,
                             const at::Tensor &self_or_result, at::Tensor &grad_input) {
  check_same_device("elu_backward", {grad, self_or_result, grad_input});
  if (!on_device(grad)) {
    const at::Tensor result =
        at::elu_backward(grad.cpu(), alpha, scale, input_scale, is_result, self_or_result.cpu());
    record_cpu_run("aten::elu_backward.grad_input");
    return written(result.to(grad.device()), grad_input);
  }
  const double neg = scalar_of(alpha) * scalar_of(scale), pos = scalar_of(scale);
  const double in_scale = scalar_of(input_scale);
  const at::Tensor &x = self_or_result;
  const at::Tensor negative =
      is_result ? grad * in_scale * (x + neg) : grad * (in_scale * neg) * at::exp(x * in_scale);
  return written(at::where(x > 0, grad * pos, negative), grad_input);
}

// softplus: x where x * beta > threshold, log(1 + exp(x * beta)) / beta elsewhere.
at::Tensor &softplus_out(const at::Tensor &self, const at::Scalar &beta,
                         const at::Scalar &threshold, at::Tensor &out) {
  check_same_device("softplus", {self, out});
  if (!on_device(self)) {
    const at::Tensor result = at::softplus(self.cpu(), beta, threshold);
    record_cpu_run("aten::softplus.out");
    return written(result.to(self.device()), out);
  }
  const double b = scalar_of(beta);
  const at::Tensor scaled = self * b;
  return written(at::where(scaled > scalar_of(threshold), self, at::log(at::exp(scaled) + 1.0) / b),
                 out);
}

at::Tensor &softplus_backward_out(const at::Tensor &grad, const at::Tensor &self,
                                  const at::Scalar &beta, const at::Scalar &threshold,
                                  at::Tensor &grad_input) {
  check_same_device("softplus_backward", {grad, self, grad_input});
  if (!on_device(self)) {
    const at::Tensor result = at::softplus_backward(grad.cpu(), self.cpu(), beta, threshold);
    record_cpu_run("aten::softplus_backward.grad_input");
    return written(result.to(self.device()), grad_input);
  }
  const at::Tensor scaled = self * scalar_of(beta);
  const at::Tensor z = at::exp(scaled);
  return written(at::where(scaled > scalar_of(threshold), grad, grad * z / (z + 1.0)), grad_input);
}

// log_sigmoid: min(x, 0) - log(1 + exp(-|x|)); the buffer its backward takes is exp(-|x|).
std::tuple<at::Tensor, at::Tensor> log_sigmoid_forward(const at::Tensor &self) {
  check_same_device("log_sigmoid_forward", {self});
  if (!on_device(self)) {
    const auto [out, buffer] = at::log_sigmoid_forward(self.cpu());
    record_cpu_run("aten::log_sigmoid_forward");
    return {out.to(self.device()), buffer.to(self.device())};
  }
  const at::Tensor buffer = at::exp(-at::abs(self));
  return {at::clamp_max(self, 0.0) - at::log(buffer + 1.0), buffer};
}

at::Tensor log_sigmoid_backward(const at::Tensor &grad, const at::Tensor &self,
                                const at::Tensor &buffer) {
  check_same_device("log_sigmoid_backward", {grad, self, buffer});
  if (!on_device(self)) {
    const at::Tensor result = at::log_sigmoid_backward(grad.cpu(), self.cpu(), buffer.cpu());
    record_cpu_run("aten::log_sigmoid_backward");
    return result.to(self.device());
  }
  // d/dx: 1 - z / (1 + z) below 0, z / (1 + z) from 0, with z = exp(-|x|).
  const at::Tensor share = buffer / (buffer + 1.0);
  return grad * at::where(self < 0, 1.0 - share, share);
}

at::Tensor &tanh_backward_out(const at::Tensor &grad, const at::Tensor &output,
                              at::Tensor &grad_input) {
  check_same_device("tanh_backward", {grad, output, grad_input});
  if (!on_device(output)) {
    const at::Tensor result = at::tanh_backward(grad.cpu(), output.cpu());
    record_cpu_run("aten::tanh_backward.grad_input");
    return written(result.to(output.device()), grad_input);
  }
  return written(grad * (1.0 - output * output), grad_input);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("elu.out", TORCH_FN(elu_out));
  m.impl("elu_backward.grad_input", TORCH_FN(elu_backward_out));
  m.impl("softplus.out", TORCH_FN(softplus_out));
  m.impl("softplus_backward.grad_input", TORCH_FN(softplus_backward_out));
  m.impl("log_sigmoid_forward", TORCH_FN(log_sigmoid_forward));
  m.impl("log_sigmoid_backward", TORCH_FN(log_sigmoid_backward));
  m.impl("tanh_backward.grad_input", TORCH_FN(tanh_backward_out));
}

}  // namespace torch_trn
