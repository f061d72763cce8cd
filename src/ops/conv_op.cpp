#include "ops/conv_op.hpp"

#include <fmt/format.h>

#include "ops/kernel_op.hpp"
#include "ops/kernels/conv2d.hpp"
#include "ops/op_support.hpp"

namespace trn::ops {

namespace {

bool conv_input_dtype(trn_dtype_t t) {
  return t == TRN_DTYPE_F32 || t == TRN_DTYPE_BF16 || t == TRN_DTYPE_F16;
}

// Why the kernels cannot take these parameters or tensors, if they cannot.
std::optional<std::string> unsupported(const host::Conv2dParams &p,
                                       const std::vector<const Tensor *> &inputs,
                                       const std::vector<const Tensor *> &outputs) {
  if (p.groups != 1)
    return fmt::format("groups = {} (the conv2d kernels take groups = 1)", p.groups);
  std::vector<const Tensor *> all = inputs;
  all.insert(all.end(), outputs.begin(), outputs.end());
  if (auto r = host_reason(all, false)) return r;
  for (const Tensor *t : all)
    if (t->numel() == 0) return fmt::format("an empty tensor {}", t->describe());
  for (const Tensor *t : inputs)
    if (t->dtype != inputs.front()->dtype || !conv_input_dtype(t->dtype))
      return fmt::format(
          "inputs {} and {}: the conv2d kernels take inputs of one dtype, f32, bf16 or f16",
          inputs.front()->describe(), t->describe());
  for (const Tensor *t : outputs)
    if (!dtype_is_float(t->dtype)) return fmt::format("an integer result {}", t->describe());
  return std::nullopt;
}

// The kernels' shape from x [N, C, H, W] and w [O, C, kh, kw] (checked by the op).
kernels::Conv2dShape kernel_shape(const Shape &x, const Shape &w, const host::Conv2dParams &p) {
  kernels::Conv2dShape s;
  s.batch = static_cast<uint64_t>(x[0]);
  s.channels = static_cast<uint64_t>(x[1]);
  s.height = static_cast<uint64_t>(x[2]);
  s.width = static_cast<uint64_t>(x[3]);
  s.out_channels = static_cast<uint64_t>(w[0]);
  s.kernel_h = static_cast<uint32_t>(w[2]);
  s.kernel_w = static_cast<uint32_t>(w[3]);
  for (int i = 0; i < 2; ++i) {
    s.stride[i] = static_cast<uint32_t>(p.stride[i]);
    s.padding[i] = static_cast<uint32_t>(p.padding[i]);
    s.dilation[i] = static_cast<uint32_t>(p.dilation[i]);
  }
  return s;
}

// Every shape and parameter the kernels are built for (the dtypes are added by the caller).
std::string shape_signature(const kernels::Conv2dShape &s) {
  return fmt::format("x[{},{},{},{}] w[{},{},{},{}] s{},{} p{},{} d{},{}", s.batch, s.channels,
                     s.height, s.width, s.out_channels, s.channels, s.kernel_h, s.kernel_w,
                     s.stride[0], s.stride[1], s.padding[0], s.padding[1], s.dilation[0],
                     s.dilation[1]);
}

const char *dtype_or_none(const Tensor &t) {
  return t.present() ? dtype_name(t.dtype) : "-";
}

}  // namespace

std::optional<std::string> conv2d_on_device(trn_queue_t queue, const trn_sync_t *sync,
                                            const host::Conv2dParams &p, const Tensor &out,
                                            const Tensor &x, const Tensor &w, const Tensor &bias) {
  if (auto r = unsupported(p, {&x, &w}, {&out})) return r;
  if (bias.present()) {
    if (auto r = host_reason({&bias}, false)) return r;
    if (!dtype_is_float(bias.dtype)) return fmt::format("an integer bias {}", bias.describe());
  }
  kernels::Conv2dConfig c;
  c.shape = kernel_shape(x.shape, w.shape, p);
  c.in_dtype = static_cast<isa::DType>(x.dtype);
  c.out_dtype = static_cast<isa::DType>(out.dtype);
  c.bias = bias.present();
  if (c.bias) c.bias_dtype = static_cast<isa::DType>(bias.dtype);
  std::vector<trn_kernel_binding_t> args = {bind(x), bind(w)};
  if (c.bias) args.push_back(bind(bias));
  args.push_back(bind(out));
  const std::string signature =
      fmt::format("conv2d {} {}>{} bias {}", shape_signature(c.shape), dtype_name(x.dtype),
                  dtype_name(out.dtype), dtype_or_none(bias));
  return try_device([&] {
    launch_kernels(queue, sync, out.device_index,
                   {{signature,
                     [c](const kbuild::BuildTarget &t) mutable {
                       c.target = t;
                       return kernels::build_conv2d(c);
                     },
                     args}});
  });
}

std::optional<std::string> conv2d_backward_on_device(trn_queue_t queue, const trn_sync_t *sync,
                                                     const host::Conv2dParams &p,
                                                     const Tensor &grad_x, const Tensor &grad_w,
                                                     const Tensor &grad_bias,
                                                     const Tensor &grad_out, const Tensor &x,
                                                     const Tensor &w) {
  std::vector<const Tensor *> inputs = {&grad_out}, outputs;
  // x is read only for grad_w and w only for grad_x: the other need not be a device dtype.
  if (grad_w.present()) inputs.push_back(&x);
  if (grad_x.present()) inputs.push_back(&w);
  for (const Tensor *t : {&grad_x, &grad_w, &grad_bias})
    if (t->present()) outputs.push_back(t);
  if (auto r = unsupported(p, inputs, outputs)) return r;
  kernels::Conv2dBackwardConfig c;
  c.shape = kernel_shape(x.shape, w.shape, p);
  c.in_dtype = static_cast<isa::DType>(grad_out.dtype);
  c.grad_x = grad_x.present(), c.grad_w = grad_w.present(), c.grad_bias = grad_bias.present();
  if (c.grad_x) c.grad_x_dtype = static_cast<isa::DType>(grad_x.dtype);
  if (c.grad_w) c.grad_w_dtype = static_cast<isa::DType>(grad_w.dtype);
  if (c.grad_bias) c.grad_bias_dtype = static_cast<isa::DType>(grad_bias.dtype);
  std::vector<trn_kernel_binding_t> args = {bind(grad_out)};
  if (c.grad_w) args.push_back(bind(x));
  if (c.grad_x) args.push_back(bind(w));
  for (const Tensor *t : outputs) args.push_back(bind(*t));
  const std::string signature =
      fmt::format("conv2d_backward {} {} > dx {} dw {} db {}", shape_signature(c.shape),
                  dtype_name(grad_out.dtype), dtype_or_none(grad_x), dtype_or_none(grad_w),
                  dtype_or_none(grad_bias));
  return try_device([&] {
    launch_kernels(queue, sync, grad_out.device_index,
                   {{signature,
                     [c](const kbuild::BuildTarget &t) mutable {
                       c.target = t;
                       return kernels::build_conv2d_backward(c);
                     },
                     args}});
  });
}

}  // namespace trn::ops
