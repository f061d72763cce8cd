// Batch norm, forward and backward, composed of device ops (means, sums, rsqrt, elementwise
// arithmetic) in float32, for float32, bfloat16 and float16 inputs: nn.BatchNorm*d trains on the
// device. The running statistics are updated in place on the device, as the CPU kernel updates
// its own (native_batch_norm's schema does not mark them as written, so the generic fallback
// would leave them). Other dtypes (float64) run on the CPU, recorded.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

#include "fallback.hpp"

namespace torch_trn {
namespace {

bool on_device(const at::Tensor &input) {
  const auto t = input.scalar_type();
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf;
}

// The dims a channel's statistics are taken over (all but dim 1), and the shape that broadcasts
// a [C] tensor against the input ([1, C, 1, ...]).
struct Layout {
  std::vector<int64_t> reduce;
  std::vector<int64_t> channel;
  int64_t count = 1;  // elements per channel
};
Layout layout_of(const at::Tensor &input) {
  TORCH_CHECK(input.dim() >= 2, "batch_norm: the input needs a channel dim (dim 1), got ",
              input.sizes());
  Layout l;
  l.channel.assign(static_cast<size_t>(input.dim()), 1);
  l.channel[1] = input.size(1);
  for (int64_t d = 0; d < input.dim(); ++d)
    if (d != 1) {
      l.reduce.push_back(d);
      l.count *= input.size(d);
    }
  return l;
}

at::Tensor f32(const at::Tensor &t) {
  return t.scalar_type() == at::kFloat ? t : t.to(at::kFloat);
}
bool given(const c10::optional<at::Tensor> &t) {
  return t.has_value() && t->defined();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_on_cpu(
    const at::Tensor &input, const c10::optional<at::Tensor> &weight,
    const c10::optional<at::Tensor> &bias, const c10::optional<at::Tensor> &running_mean,
    const c10::optional<at::Tensor> &running_var, bool training, double momentum, double eps) {
  record_cpu_run("aten::native_batch_norm");
  auto cpu = [](const c10::optional<at::Tensor> &t) {
    return given(t) ? c10::optional<at::Tensor>(t->cpu()) : c10::nullopt;
  };
  const c10::optional<at::Tensor> mean = cpu(running_mean), var = cpu(running_var);
  auto [out, save_mean, save_invstd] = at::native_batch_norm(input.cpu(), cpu(weight), cpu(bias),
                                                             mean, var, training, momentum, eps);
  if (training) {
    if (mean) running_mean->copy_(*mean);
    if (var) running_var->copy_(*var);
  }
  const at::Device d = input.device();
  return {out.to(d), save_mean.to(d), save_invstd.to(d)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(
    const at::Tensor &input, const c10::optional<at::Tensor> &weight,
    const c10::optional<at::Tensor> &bias, const c10::optional<at::Tensor> &running_mean,
    const c10::optional<at::Tensor> &running_var, bool training, double momentum, double eps) {
  if (!on_device(input) || input.numel() == 0)
    return batch_norm_on_cpu(input, weight, bias, running_mean, running_var, training, momentum,
                             eps);
  const Layout l = layout_of(input);
  const at::Tensor x = f32(input);
  at::Tensor mean, invstd, save_mean, save_invstd;
  if (training || !given(running_mean) || !given(running_var)) {
    mean = at::mean(x, l.reduce);
    const at::Tensor centered = x - mean.view(l.channel);
    const at::Tensor var = at::mean(centered * centered, l.reduce);  // biased, as normalized
    invstd = at::rsqrt(var + eps);
    save_mean = mean;
    save_invstd = invstd;
    if (training && given(running_mean))
      running_mean->copy_(*running_mean * (1.0 - momentum) + mean * momentum);
    if (training && given(running_var)) {
      // The running variance is the unbiased one, as PyTorch keeps it.
      const double unbias =
          l.count > 1 ? static_cast<double>(l.count) / static_cast<double>(l.count - 1) : 1.0;
      running_var->copy_(*running_var * (1.0 - momentum) + var * (momentum * unbias));
    }
  } else {
    mean = f32(*running_mean);
    invstd = at::rsqrt(f32(*running_var) + eps);
    save_mean = at::empty({0}, x.options());
    save_invstd = at::empty({0}, x.options());
  }
  at::Tensor out = (x - mean.view(l.channel)) * invstd.view(l.channel);
  if (given(weight)) out = out * f32(*weight).view(l.channel);
  if (given(bias)) out = out + f32(*bias).view(l.channel);
  return {out.to(input.scalar_type()), save_mean, save_invstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_backward(
    const at::Tensor &grad_out, const at::Tensor &input, const c10::optional<at::Tensor> &weight,
    const c10::optional<at::Tensor> &running_mean, const c10::optional<at::Tensor> &running_var,
    const c10::optional<at::Tensor> &save_mean, const c10::optional<at::Tensor> &save_invstd,
    bool train, double eps, std::array<bool, 3> output_mask) {
  if (!on_device(input) || input.numel() == 0) {
    record_cpu_run("aten::native_batch_norm_backward");
    auto cpu = [](const c10::optional<at::Tensor> &t) {
      return given(t) ? c10::optional<at::Tensor>(t->cpu()) : c10::nullopt;
    };
    auto [gx, gw, gb] = at::native_batch_norm_backward(
        grad_out.cpu(), input.cpu(), cpu(weight), cpu(running_mean), cpu(running_var),
        cpu(save_mean), cpu(save_invstd), train, eps, output_mask);
    auto back = [&](const at::Tensor &t) { return t.defined() ? t.to(input.device()) : t; };
    return {back(gx), back(gw), back(gb)};
  }
  const Layout l = layout_of(input);
  const at::Tensor x = f32(input), gy = f32(grad_out);
  at::Tensor mean, invstd;
  if (train) {
    TORCH_CHECK(given(save_mean) && given(save_invstd),
                "batch_norm backward in training mode needs the forward's saved statistics");
    mean = f32(*save_mean);
    invstd = f32(*save_invstd);
  } else {
    TORCH_CHECK(given(running_mean) && given(running_var),
                "batch_norm backward in evaluation mode needs the running statistics");
    mean = f32(*running_mean);
    invstd = at::rsqrt(f32(*running_var) + eps);
  }
  const at::Tensor xhat = (x - mean.view(l.channel)) * invstd.view(l.channel);
  const at::Tensor grad_bias = at::sum(gy, l.reduce);
  const at::Tensor grad_weight = at::sum(gy * xhat, l.reduce);
  at::Tensor grad_input;
  if (output_mask[0]) {
    const at::Tensor scale =
        given(weight) ? invstd * f32(*weight) : invstd;  // per channel: w / sigma
    if (train) {
      const double n = static_cast<double>(l.count);
      grad_input =
          (gy - (grad_bias / n).view(l.channel) - xhat * (grad_weight / n).view(l.channel)) *
          scale.view(l.channel);
    } else {
      grad_input = gy * scale.view(l.channel);
    }
    grad_input = grad_input.to(input.scalar_type());
  }
  const auto param_type = given(weight) ? weight->scalar_type() : input.scalar_type();
  return {grad_input, output_mask[1] ? grad_weight.to(param_type) : at::Tensor(),
          output_mask[2] ? grad_bias.to(param_type) : at::Tensor()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", TORCH_FN(native_batch_norm));
  m.impl("native_batch_norm_backward", TORCH_FN(native_batch_norm_backward));
}

}  // namespace torch_trn
