// Neural-network kernels: convolution, max pooling, layer norm, softmax and log_softmax, the NLL
// and MSE losses, forward and backward. Where libtrn_ops has a device kernel the op calls it;
// nll_loss (whose libtrn_ops form runs on the host for int64 targets) and mse_loss are composed
// from device elementwise ops and reductions in the common cases.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/embedding_native.h>
#include <torch/library.h>

#include <array>
#include <limits>
#include <tuple>
#include <vector>

#include "fallback.hpp"
#include "gather.hpp"
#include "op_support.hpp"

namespace torch_trn {
namespace {

// An optional tensor's CPU copy (for the ops that run on the CPU in some cases).
c10::optional<at::Tensor> on_cpu(const c10::optional<at::Tensor> &t) {
  return t && t->defined() ? c10::optional<at::Tensor>(t->cpu()) : c10::nullopt;
}

// A CPU copy of an optional trn tensor (undefined stays undefined).
at::Tensor to_cpu(const at::Tensor &t) {
  return t.defined() ? t.cpu() : t;
}

at::Tensor to_device(const at::Tensor &t, const at::Device &d) {
  return t.defined() ? t.to(d) : t;
}

// ---------------------------------------------------------------------------------------------
// Convolution. 2-D, not transposed: on the device (groups > 1 is computed by libtrn_ops' host
// reference, which it records). Transposed and non-2-D convolutions have no trn kernel: they
// run on the CPU here, recorded as fallbacks.

bool conv_on_trn(const at::Tensor &input, bool transposed) {
  return !transposed && input.dim() == 4;
}

trn_ops_conv2d_params_t conv_params(at::IntArrayRef stride, at::IntArrayRef padding,
                                    at::IntArrayRef dilation, int64_t groups) {
  trn_ops_conv2d_params_t p{};
  const auto s = pair_of(stride, "stride", 1), pd = pair_of(padding, "padding", 0),
             d = pair_of(dilation, "dilation", 1);
  p.stride[0] = s[0];
  p.stride[1] = s[1];
  p.padding[0] = pd[0];
  p.padding[1] = pd[1];
  p.dilation[0] = d[0];
  p.dilation[1] = d[1];
  p.groups = groups;
  return p;
}

at::Tensor convolution(const at::Tensor &input, const at::Tensor &weight,
                       const c10::optional<at::Tensor> &bias_opt, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                       at::IntArrayRef output_padding, int64_t groups) {
  const at::Tensor bias = bias_opt.value_or(at::Tensor());
  check_same_device("convolution", {input, weight, bias});
  if (!conv_on_trn(input, transposed)) {
    record_cpu_run("aten::convolution_overrideable");
    return at::convolution(input.cpu(), weight.cpu(), to_cpu(bias), stride, padding, dilation,
                           transposed, output_padding, groups)
        .to(input.device());
  }
  TORCH_CHECK(weight.dim() == 4, "conv2d: weight must be 4-D, got ", weight.dim(), " dims");
  OpScope scope(input);
  const auto p = conv_params(stride, padding, dilation, groups);
  const int64_t oh =
      (input.size(2) + 2 * p.padding[0] - p.dilation[0] * (weight.size(2) - 1) - 1) / p.stride[0] +
      1;
  const int64_t ow =
      (input.size(3) + 2 * p.padding[1] - p.dilation[1] * (weight.size(3) - 1) - 1) / p.stride[1] +
      1;
  TORCH_CHECK(oh > 0 && ow > 0, "conv2d: the output would be empty (", oh, "x", ow,
              "): the input is smaller than the kernel");
  at::Tensor out = empty_on(input, {input.size(0), weight.size(0), oh, ow}, input.scalar_type());
  if (out.numel() == 0) return out;
  // The conv2d kernels read contiguous operands of one dtype; strided views would send it to
  // the host.
  const at::Tensor x = input.contiguous();
  const at::Tensor w = weight.to(input.scalar_type()).contiguous();
  const at::Tensor b = bias.defined() ? bias.to(input.scalar_type()).contiguous() : bias;
  const auto vo = view_of(out), vx = view_of(x), vw = view_of(w);
  const OptionalView vb(b);
  check_ops(trn_ops_conv2d(scope.queue(), &vo, &vx, &vw, vb.get(), &p, nullptr), "conv2d");
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor &grad_output, const at::Tensor &input, const at::Tensor &weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
    at::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  check_same_device("convolution_backward", {grad_output, input, weight});
  if (!conv_on_trn(input, transposed)) {
    record_cpu_run("aten::convolution_backward_overrideable");
    const std::vector<int64_t> bias_sizes{weight.size(transposed ? 1 : 0) *
                                          (transposed ? groups : 1)};
    auto [gx, gw, gb] = at::convolution_backward(
        grad_output.cpu(), input.cpu(), weight.cpu(), at::IntArrayRef(bias_sizes), stride, padding,
        dilation, transposed, output_padding, groups, output_mask);
    return {to_device(gx, input.device()), to_device(gw, input.device()),
            to_device(gb, input.device())};
  }
  at::Tensor grad_x, grad_w, grad_b;
  if (!output_mask[0] && !output_mask[1] && !output_mask[2]) return {grad_x, grad_w, grad_b};
  OpScope scope(input);
  const auto p = conv_params(stride, padding, dilation, groups);
  const auto type = input.scalar_type();
  if (output_mask[0]) grad_x = empty_on(input, input.sizes(), type);
  if (output_mask[1]) grad_w = empty_on(input, weight.sizes(), weight.scalar_type());
  if (output_mask[2]) grad_b = empty_on(input, {weight.size(0)}, weight.scalar_type());
  if (grad_output.numel() == 0 || input.numel() == 0) {
    for (auto *g : {&grad_x, &grad_w, &grad_b})
      if (g->defined()) g->zero_();
    return {grad_x, grad_w, grad_b};
  }
  const at::Tensor go = grad_output.to(type).contiguous();
  const at::Tensor x = input.contiguous();
  const at::Tensor w = weight.to(type).contiguous();
  const OptionalView vgx(grad_x), vgw(grad_w), vgb(grad_b);
  const auto vgo = view_of(go), vx = view_of(x), vw = view_of(w);
  check_ops(trn_ops_conv2d_backward(scope.queue(), vgx.get(), vgw.get(), vgb.get(), &vgo, &vx, &vw,
                                    &p, nullptr),
            "conv2d_backward");
  return {grad_x, grad_w, grad_b};
}

// ---------------------------------------------------------------------------------------------
// Max pooling. libtrn_ops' max_pool2d and its backward run on its host reference (recorded as
// trn_ops::max_pool2d): the common cases are composed from device ops instead (below); the rest
// go to libtrn_ops.

trn_ops_pool2d_params_t pool_params(at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                    at::IntArrayRef padding, at::IntArrayRef dilation,
                                    bool ceil_mode) {
  const auto k = pair_of(kernel_size, "kernel_size", 0);
  TORCH_CHECK(k[0] > 0 && k[1] > 0, "max_pool2d: kernel_size must be positive");
  // PyTorch's default stride (an empty list) is the kernel size.
  const auto s = pair_of(stride, "stride", 0);
  const auto pd = pair_of(padding, "padding", 0);
  const auto d = pair_of(dilation, "dilation", 1);
  trn_ops_pool2d_params_t p{};
  for (size_t i = 0; i < 2; ++i) {
    p.kernel[i] = k[i];
    p.stride[i] = s[i] > 0 ? s[i] : k[i];
    p.padding[i] = pd[i];
    p.dilation[i] = d[i];
    TORCH_CHECK(p.dilation[i] > 0, "max_pool2d: dilation must be positive");
    TORCH_CHECK(p.padding[i] >= 0 && p.padding[i] <= k[i] / 2,
                "max_pool2d: pad should be at most half of the kernel size, got padding ",
                p.padding[i], " for a kernel of ", k[i]);
  }
  p.ceil_mode = ceil_mode ? 1 : 0;
  return p;
}

// at::native's pooling_output_shape.
int64_t pooled_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation,
                    bool ceil_mode) {
  const int64_t numer = in + 2 * pad - dilation * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (numer >= 0 ? numer / stride : -((-numer + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// Without padding and with every window inside the input, the forward is composed on the device
// instead: a running maximum over the k x k strided views of the input (one per kernel tap), whose
// index is kept with a select. Indices are built in i16 (exact on the device; the device writes no
// i64) and stored as the low words of the int64 indices, the other words zeroed, so planes must
// have under 2^15 elements.
bool pool_on_device(const at::Tensor &self, const trn_ops_pool2d_params_t &p, int64_t oh,
                    int64_t ow) {
  const int64_t h = self.size(-2), w = self.size(-1);
  return is_float_type(self.scalar_type()) && h * w < 32768 && p.padding[0] == 0 &&
         p.padding[1] == 0 && (oh - 1) * p.stride[0] + p.dilation[0] * (p.kernel[0] - 1) < h &&
         (ow - 1) * p.stride[1] + p.dilation[1] * (p.kernel[1] - 1) < w;
}

// The int64 tensor `t` (contiguous) as i16 words: its low words, or all four per element.
trn_ops_tensor_t low_words_i16(const at::Tensor &t) {
  trn_ops_tensor_t v = view_of(t);
  v.dtype = TRN_DTYPE_I16;
  for (uint32_t d = 0; d < v.rank; ++d) v.strides[d] *= 4;
  return v;
}

trn_ops_tensor_t all_words_i16(const at::Tensor &t) {
  trn_ops_tensor_t v = low_words_i16(t);
  v.shape[v.rank] = 4;
  v.strides[v.rank] = 1;
  ++v.rank;
  return v;
}

// Each element's flat index in its input plane, [H * W] in i16.
at::Tensor plane_indices(trn_queue_t q, const at::Tensor &like, int64_t h, int64_t w) {
  at::Tensor plane = empty_on(like, {h * w}, at::kShort);
  const auto vp = view_of(plane);
  check_ops(trn_ops_arange(q, &vp, 0.0, 1.0, nullptr), "arange");
  return plane;
}

void max_pool2d_on_device(trn_queue_t q, const at::Tensor &x, const trn_ops_pool2d_params_t &p,
                          const at::Tensor &out, const at::Tensor &indices) {
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const int64_t oh = out.size(2), ow = out.size(3);
  const std::vector<int64_t> sizes{n, c, oh, ow};
  const std::vector<int64_t> strides{c * h * w, h * w, p.stride[0] * w, p.stride[1]};
  const std::vector<int64_t> plane_strides{0, 0, p.stride[0] * w, p.stride[1]};
  const at::Tensor plane = plane_indices(q, x, h, w);
  auto tap_offset = [&](int64_t i, int64_t j) { return i * p.dilation[0] * w + j * p.dilation[1]; };
  auto tap = [&](int64_t i, int64_t j) {
    return x.as_strided(sizes, strides, x.storage_offset() + tap_offset(i, j));
  };
  auto tap_index = [&](int64_t i, int64_t j) {
    return plane.as_strided(sizes, plane_strides, tap_offset(i, j));
  };
  at::Tensor index = empty_on(x, sizes, at::kShort);
  t_copy(q, out, tap(0, 0));
  t_copy(q, index, tap_index(0, 0));
  at::Tensor take = empty_on(x, sizes, at::kFloat), nan = empty_on(x, sizes, at::kFloat);
  for (int64_t i = 0; i < p.kernel[0]; ++i) {
    for (int64_t j = 0; j < p.kernel[1]; ++j) {
      if (i == 0 && j == 0) continue;
      const at::Tensor v = tap(i, j);
      // PyTorch's rule: a later value wins when greater, or NaN (so NaN propagates).
      t_binary(q, TRN_OPS_GT, take, v, out);
      t_binary(q, TRN_OPS_NE, nan, v, v);
      t_binary(q, TRN_OPS_ADD, take, take, nan);
      t_where(q, index, take, tap_index(i, j), index);
      t_where(q, out, take, v, out);
    }
  }
  // The device copies strided sources, not strided destinations: the four words of each index
  // are written by one select into the indices' contiguous i16 view, the index in word 0 and
  // zeros in the others.
  at::Tensor word0 = empty_on(x, {4}, at::kFloat), zero = empty_on(x, {}, at::kShort);
  const auto vw0 = view_of(word0), vz = view_of(zero);
  check_ops(trn_ops_arange(q, &vw0, 0.0, 1.0, nullptr), "arange");
  t_binary_scalar(q, TRN_OPS_EQ, word0, word0, 0.0);
  check_ops(trn_ops_fill(q, &vz, 0.0, nullptr), "fill");
  const trn_ops_tensor_t words = all_words_i16(indices);
  trn_ops_tensor_t cond = vw0, value = view_of(index), zeros = vz;
  for (trn_ops_tensor_t *v : {&cond, &value, &zeros}) {
    v->rank = words.rank;
    for (uint32_t d = 0; d < words.rank; ++d) v->shape[d] = words.shape[d];
  }
  for (uint32_t d = 0; d + 1 < words.rank; ++d) cond.strides[d] = 0;
  cond.strides[4] = 1;
  value.strides[4] = 0;
  for (uint32_t d = 0; d < words.rank; ++d) zeros.strides[d] = 0;
  check_ops(trn_ops_where(q, &words, &cond, &value, &zeros, nullptr), "where");
}

std::tuple<at::Tensor &, at::Tensor &> max_pool2d_with_indices_out(
    const at::Tensor &self, at::IntArrayRef kernel_size, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode, at::Tensor &out,
    at::Tensor &indices) {
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4, "max_pool2d: expected a 3-D or 4-D input, got ",
              self.dim(), " dims");
  const auto p = pool_params(kernel_size, stride, padding, dilation, ceil_mode);
  const int64_t h = self.size(-2), w = self.size(-1);
  const int64_t oh =
      pooled_size(h, p.kernel[0], p.padding[0], p.stride[0], p.dilation[0], ceil_mode);
  const int64_t ow =
      pooled_size(w, p.kernel[1], p.padding[1], p.stride[1], p.dilation[1], ceil_mode);
  TORCH_CHECK(oh > 0 && ow > 0, "max_pool2d: the output would be empty (", oh, "x", ow, ")");
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  sizes[sizes.size() - 2] = oh;
  sizes[sizes.size() - 1] = ow;
  resize_out(out, sizes);
  resize_out(indices, sizes);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "max_pool2d: out must be ",
              self.scalar_type(), ", got ", out.scalar_type());
  TORCH_CHECK(indices.scalar_type() == at::kLong, "max_pool2d: indices must be int64, got ",
              indices.scalar_type());
  if (out.numel() == 0) return {out, indices};
  OpScope scope(self);
  const at::Tensor x = self.contiguous();
  OutTarget o(out, scope.queue()), i(indices, scope.queue());
  if (pool_on_device(self, p, oh, ow)) {
    const bool batched = self.dim() == 4;
    max_pool2d_on_device(scope.queue(), batched ? x : x.unsqueeze(0), p,
                         batched ? o.get() : o.get().unsqueeze(0),
                         batched ? i.get() : i.get().unsqueeze(0));
  } else {
    const auto vo = view_of(o.get()), vi = view_of(i.get()), vx = view_of(x);
    check_ops(trn_ops_max_pool2d(scope.queue(), &vo, &vi, &vx, &p, nullptr), "max_pool2d");
  }
  o.finish();
  i.finish();
  return {out, indices};
}

// Windows that tile the input exactly (stride = kernel, no padding or dilation) give each input
// element to one window: its gradient is its window's when it holds the window's index, else 0,
// one select over the input viewed as [N, C, OH, kh, OW, kw].
bool pool_backward_on_device(const at::Tensor &self, const trn_ops_pool2d_params_t &p,
                             const at::Tensor &grad_output) {
  const int64_t h = self.size(-2), w = self.size(-1);
  return is_float_type(self.scalar_type()) && h * w < 32768 && p.padding[0] == 0 &&
         p.padding[1] == 0 && p.dilation[0] == 1 && p.dilation[1] == 1 &&
         p.stride[0] == p.kernel[0] && p.stride[1] == p.kernel[1] &&
         grad_output.size(-2) * p.kernel[0] == h && grad_output.size(-1) * p.kernel[1] == w;
}

void max_pool2d_backward_on_device(trn_queue_t q, const at::Tensor &grad_input,
                                   const at::Tensor &grad_output, const at::Tensor &indices,
                                   const trn_ops_pool2d_params_t &p) {
  const int64_t n = grad_input.size(0), c = grad_input.size(1), h = grad_input.size(2),
                w = grad_input.size(3);
  const int64_t oh = grad_output.size(2), ow = grad_output.size(3);
  const int64_t kh = p.kernel[0], kw = p.kernel[1];
  // The select runs in window-major order [N, C, OH, OW, kh, kw], where grad_out and the
  // indices broadcast over the trailing dims only (the device's elementwise kernels broadcast
  // rows or columns, not dims in the middle); one strided copy then puts it in input order.
  using Dims = std::array<int64_t, 6>;
  auto as6 = [](trn_ops_tensor_t v, const Dims &shape, const Dims &strides) {
    v.rank = 6;
    for (size_t d = 0; d < 6; ++d) {
      v.shape[d] = shape[d];
      v.strides[d] = strides[d];
    }
    return v;
  };
  const Dims windows{n, c, oh, ow, kh, kw};
  const Dims window_strides{c * h * w, h * w, ow * kh * kw, kh * kw, kw, 1};
  const at::Tensor plane = plane_indices(q, grad_input, h, w);
  at::Tensor zero = empty_on(grad_input, {}, grad_input.scalar_type());
  zero.zero_();
  at::Tensor hit = empty_on(grad_input, {n * c * h * w}, at::kByte);
  at::Tensor picked = empty_on(grad_input, {n * c * h * w}, grad_input.scalar_type());
  const trn_ops_tensor_t low = low_words_i16(indices);
  const auto vhit = as6(view_of(hit), windows, window_strides);
  const auto vpicked = as6(view_of(picked), windows, window_strides);
  const auto vidx =
      as6(low, windows, {low.strides[0], low.strides[1], low.strides[2], low.strides[3], 0, 0});
  const auto vplane = as6(view_of(plane), windows, {0, 0, kh * w, kw, w, 1});
  const auto vgo = as6(view_of(grad_output), windows, {c * oh * ow, oh * ow, ow, 1, 0, 0});
  const auto vzero = as6(view_of(zero), windows, {0, 0, 0, 0, 0, 0});
  check_ops(trn_ops_binary(q, TRN_OPS_EQ, &vhit, &vidx, &vplane, nullptr), "binary");
  check_ops(trn_ops_where(q, &vpicked, &vhit, &vgo, &vzero, nullptr), "where");
  const auto vgi =
      as6(view_of(grad_input), {n, c, oh, kh, ow, kw}, {c * h * w, h * w, kh * w, w, kw, 1});
  const auto vsrc = as6(view_of(picked), {n, c, oh, kh, ow, kw},
                        {c * h * w, h * w, ow * kh * kw, kw, kh * kw, 1});
  check_ops(trn_ops_copy(q, &vgi, &vsrc, nullptr), "copy");
}

at::Tensor &max_pool2d_with_indices_backward_out(
    const at::Tensor &grad_output, const at::Tensor &self, at::IntArrayRef kernel_size,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
    const at::Tensor &indices, at::Tensor &grad_input) {
  check_same_device("max_pool2d_with_indices_backward", {grad_output, self, indices, grad_input});
  const auto p = pool_params(kernel_size, stride, padding, dilation, ceil_mode);
  resize_out(grad_input, self.sizes());
  if (grad_input.numel() == 0) return grad_input;
  OpScope scope(self);
  OutTarget gi(grad_input, scope.queue());
  if (grad_output.numel() == 0) {
    gi.get().zero_();
    gi.finish();
    return grad_input;
  }
  const at::Tensor go = grad_output.to(self.scalar_type()).contiguous();
  const at::Tensor idx = indices.contiguous();
  if (pool_backward_on_device(self, p, go)) {
    const bool batched = self.dim() == 4;
    max_pool2d_backward_on_device(scope.queue(), batched ? gi.get() : gi.get().unsqueeze(0),
                                  batched ? go : go.unsqueeze(0), batched ? idx : idx.unsqueeze(0),
                                  p);
  } else {
    const auto vgi = view_of(gi.get()), vgo = view_of(go), vi = view_of(idx);
    check_ops(trn_ops_max_pool2d_backward(scope.queue(), &vgi, &vgo, &vi, nullptr),
              "max_pool2d_backward");
  }
  gi.finish();
  return grad_input;
}

// ---------------------------------------------------------------------------------------------
// Layer norm. libtrn_ops keeps the statistics in f32; PyTorch 1.13 returns them in the input's
// dtype, so they are converted on the way out and back to f32 for the backward.

struct NormShape {
  std::vector<int64_t> stat_sizes;
};

NormShape norm_shape(const at::Tensor &input, at::IntArrayRef normalized_shape) {
  const int64_t n = static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(n >= 1 && n <= input.dim(), "layer_norm: normalized_shape of ", n,
              " dims for an input of ", input.dim());
  const int64_t axis = input.dim() - n;
  TORCH_CHECK(input.sizes().slice(static_cast<size_t>(axis)) == normalized_shape,
              "layer_norm: normalized_shape ", normalized_shape,
              " does not match the input's trailing sizes ", input.sizes());
  NormShape s{{}};
  for (int64_t d = 0; d < input.dim(); ++d) s.stat_sizes.push_back(d < axis ? input.size(d) : 1);
  return s;
}

at::Tensor as_f32(const at::Tensor &t) {
  return t.scalar_type() == at::kFloat ? t.contiguous() : t.to(at::kFloat).contiguous();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(
    const at::Tensor &input, c10::SymIntArrayRef normalized_shape_sym,
    const c10::optional<at::Tensor> &weight_opt, const c10::optional<at::Tensor> &bias_opt,
    double eps) {
  check_same_device("native_layer_norm",
                    {input, weight_opt.value_or(at::Tensor()), bias_opt.value_or(at::Tensor())});
  const auto normalized_shape = C10_AS_INTARRAYREF_SLOW(normalized_shape_sym);
  if (eps < 0) {
    // The device kernel takes eps >= 0; PyTorch's CPU takes any (NaN where var + eps < 0).
    record_cpu_run("aten::native_layer_norm");
    auto [o, m, r] = at::native_layer_norm(input.cpu(), normalized_shape, on_cpu(weight_opt),
                                           on_cpu(bias_opt), eps);
    return {o.to(input.device()), m.to(input.device()), r.to(input.device())};
  }
  const NormShape shape = norm_shape(input, normalized_shape);
  const at::Tensor weight = weight_opt.value_or(at::Tensor());
  const at::Tensor bias = bias_opt.value_or(at::Tensor());
  const auto type = input.scalar_type();
  OpScope scope(input);
  at::Tensor out = empty_on(input, input.sizes(), type);
  at::Tensor mean = empty_on(input, shape.stat_sizes, at::kFloat);
  at::Tensor rstd = empty_on(input, shape.stat_sizes, at::kFloat);
  if (input.numel() == 0) return {out, mean.to(type), rstd.to(type)};
  const at::Tensor x = input.contiguous();
  // The device kernel takes weight and bias together or neither: a missing one is its identity.
  at::Tensor w = weight, b = bias;
  if (w.defined() != b.defined()) {
    if (!w.defined()) w = at::ones(normalized_shape, input.options());
    if (!b.defined()) b = at::zeros(normalized_shape, input.options());
  }
  if (w.defined()) w = w.contiguous();
  if (b.defined()) b = b.contiguous();
  const auto vo = view_of(out), vm = view_of(mean), vr = view_of(rstd), vx = view_of(x);
  const OptionalView vw(w), vb(b);
  check_ops(trn_ops_layer_norm(scope.queue(), &vo, &vm, &vr, &vx, vw.get(), vb.get(),
                               static_cast<uint32_t>(normalized_shape.size()), eps, nullptr),
            "layer_norm");
  if (type != at::kFloat) {
    mean = mean.to(type);
    rstd = rstd.to(type);
  }
  return {out, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm_backward(
    const at::Tensor &grad_out, const at::Tensor &input, c10::SymIntArrayRef normalized_shape_sym,
    const at::Tensor &mean, const at::Tensor &rstd, const c10::optional<at::Tensor> &weight_opt,
    const c10::optional<at::Tensor> &bias_opt, std::array<bool, 3> output_mask) {
  const auto normalized_shape = C10_AS_INTARRAYREF_SLOW(normalized_shape_sym);
  (void)norm_shape(input, normalized_shape);
  const at::Tensor weight = weight_opt.value_or(at::Tensor());
  const at::Tensor bias = bias_opt.value_or(at::Tensor());
  check_same_device("native_layer_norm_backward", {grad_out, input, mean, rstd, weight, bias});
  at::Tensor grad_x, grad_w, grad_b;
  if (!output_mask[0] && !output_mask[1] && !output_mask[2]) return {grad_x, grad_w, grad_b};
  OpScope scope(input);
  const auto type = input.scalar_type();
  const bool want_w = output_mask[1] && weight.defined();
  const bool want_b = output_mask[2] && bias.defined();
  if (input.numel() == 0) {
    if (output_mask[0]) grad_x = empty_on(input, input.sizes(), type);
    if (want_w) grad_w = at::zeros_like(weight);
    if (want_b) grad_b = at::zeros_like(bias);
    return {grad_x, grad_w, grad_b};
  }
  // The device kernel wants grad_x, and the weight's gradients together: what was not asked for
  // is computed into temporaries and dropped.
  at::Tensor gx = empty_on(input, input.sizes(), type);
  at::Tensor gw, gb;
  if (weight.defined()) {
    gw = empty_on(input, weight.sizes(), at::kFloat);
    gb = empty_on(input, weight.sizes(), at::kFloat);
  }
  const at::Tensor go = grad_out.to(type).contiguous();
  const at::Tensor x = input.contiguous();
  const at::Tensor m = as_f32(mean), r = as_f32(rstd);
  const at::Tensor w = weight.defined() ? weight.contiguous() : weight;
  const auto vgx = view_of(gx), vgo = view_of(go), vx = view_of(x), vm = view_of(m),
             vr = view_of(r);
  const OptionalView vgw(gw), vgb(gb), vw(w);
  check_ops(trn_ops_layer_norm_backward(scope.queue(), &vgx, vgw.get(), vgb.get(), &vgo, &vx, &vm,
                                        &vr, vw.get(),
                                        static_cast<uint32_t>(normalized_shape.size()), nullptr),
            "layer_norm_backward");
  if (output_mask[0]) grad_x = gx;
  if (want_w) grad_w = gw.scalar_type() == weight.scalar_type() ? gw : gw.to(weight.scalar_type());
  if (want_b) {
    if (gb.defined()) {
      grad_b = gb.scalar_type() == bias.scalar_type() ? gb : gb.to(bias.scalar_type());
    } else {
      // No weight: bias's gradient is grad_out summed over the leading dims.
      std::vector<int64_t> lead;
      for (int64_t d = 0; d < input.dim() - static_cast<int64_t>(normalized_shape.size()); ++d)
        lead.push_back(d);
      grad_b = lead.empty() ? go.to(bias.scalar_type()) : go.sum(lead).to(bias.scalar_type());
    }
  }
  return {grad_x, grad_w, grad_b};
}

// ---------------------------------------------------------------------------------------------
// softmax and log_softmax. The device kernels reduce over the last dim (libtrn_ops runs other
// dims on the host): another dim is moved last (a strided view the op stages itself), computed
// into a temporary, and moved back by a strided copy.

at::Tensor &softmax_common(const at::Tensor &self, int64_t dim, bool half_to_float, at::Tensor &out,
                           bool log) {
  TORCH_CHECK(!half_to_float, log ? "_log_softmax" : "_softmax",
              ": half_to_float is not supported on trn (convert the input to float32 first)");
  resize_out(out, self.sizes());
  if (out.numel() == 0) return out;
  OpScope scope(self);
  const at::Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
  const at::Tensor o = self.dim() == 0 ? out.view({1}) : out;
  const int64_t d = at::maybe_wrap_dim(dim, x.dim());
  const at::Tensor xl = x.movedim(d, -1);
  at::Tensor target =
      (d == x.dim() - 1 && o.is_contiguous()) ? o : empty_on(self, xl.sizes(), out.scalar_type());
  const auto vt = view_of(target), vx = view_of(xl);
  check_ops(trn_ops_softmax(scope.queue(), &vt, &vx, -1, log ? 1 : 0, nullptr),
            log ? "log_softmax" : "softmax");
  // Copied as a strided source into the contiguous output: the device's strided copies gather,
  // they do not scatter.
  if (!target.is_same(o)) t_copy(scope.queue(), o, target.movedim(-1, d));
  return out;
}

at::Tensor &softmax_backward_common(const at::Tensor &grad_output, const at::Tensor &output,
                                    int64_t dim, c10::ScalarType input_dtype,
                                    at::Tensor &grad_input, bool log) {
  check_same_device("_softmax_backward_data", {grad_output, output, grad_input});
  TORCH_CHECK(grad_output.scalar_type() == input_dtype, log ? "_log" : "",
              "_softmax_backward_data: half_to_float gradients are not supported on trn");
  resize_out(grad_input, output.sizes());
  if (grad_input.numel() == 0) return grad_input;
  OpScope scope(output);
  const at::Tensor go = output.dim() == 0 ? grad_output.reshape({1}) : grad_output;
  const at::Tensor y = output.dim() == 0 ? output.reshape({1}) : output;
  const at::Tensor gi = output.dim() == 0 ? grad_input.view({1}) : grad_input;
  const int64_t d = at::maybe_wrap_dim(dim, y.dim());
  const at::Tensor gol = go.movedim(d, -1).contiguous();
  const at::Tensor yl = y.movedim(d, -1).contiguous();
  at::Tensor target = (d == y.dim() - 1 && gi.is_contiguous())
                          ? gi
                          : empty_on(output, yl.sizes(), grad_input.scalar_type());
  const auto vt = view_of(target), vgo = view_of(gol), vy = view_of(yl);
  check_ops(trn_ops_softmax_backward(scope.queue(), &vt, &vgo, &vy, -1, log ? 1 : 0, nullptr),
            log ? "log_softmax_backward" : "softmax_backward");
  if (!target.is_same(gi)) t_copy(scope.queue(), gi, target.movedim(-1, d));
  return grad_input;
}

at::Tensor &softmax_out(const at::Tensor &self, int64_t dim, bool half_to_float, at::Tensor &out) {
  return softmax_common(self, dim, half_to_float, out, false);
}

at::Tensor &log_softmax_out(const at::Tensor &self, int64_t dim, bool half_to_float,
                            at::Tensor &out) {
  return softmax_common(self, dim, half_to_float, out, true);
}

at::Tensor &softmax_backward_out(const at::Tensor &grad_output, const at::Tensor &output,
                                 int64_t dim, c10::ScalarType input_dtype, at::Tensor &grad_input) {
  return softmax_backward_common(grad_output, output, dim, input_dtype, grad_input, false);
}

at::Tensor &log_softmax_backward_out(const at::Tensor &grad_output, const at::Tensor &output,
                                     int64_t dim, c10::ScalarType input_dtype, at::Tensor &out) {
  return softmax_backward_common(grad_output, output, dim, input_dtype, out, true);
}

// ---------------------------------------------------------------------------------------------
// nll_loss. libtrn_ops' nll_loss runs on the host for int64 targets. The common case of
// cross-entropy training (log-probabilities [N, C], no class weights, a mean or a sum) is
// composed from device ops instead: the targets as float32 positions (gather.hpp: exact for
// every int64) are compared with a [1, C] arange into a one-hot mask, whose ignored rows are
// zeroed; the loss is -sum(mask * logp) (divided by the count of
// targets kept, for a mean).

constexpr int64_t kReductionNone = 0, kReductionMean = 1, kReductionSum = 2;

trn_ops_reduction_t to_trn_reduction(int64_t reduction) {
  switch (reduction) {
    case kReductionNone: return TRN_OPS_REDUCTION_NONE;
    case kReductionMean: return TRN_OPS_REDUCTION_MEAN;
    case kReductionSum: return TRN_OPS_REDUCTION_SUM;
    default: TORCH_CHECK(false, "trn ops: unknown reduction ", reduction);
  }
}

bool nll_on_device(const at::Tensor &self, const at::Tensor &target, const at::Tensor &weight,
                   int64_t reduction, int64_t ignore_index) {
  return self.dim() == 2 && !weight.defined() && reduction != kReductionNone &&
         (self.scalar_type() == at::kFloat || self.scalar_type() == at::kBFloat16) &&
         target.scalar_type() == at::kLong && target.dim() == 1 && self.size(0) > 0 &&
         self.size(1) > 0 && self.size(1) < (int64_t{1} << 24) &&
         // the comparison is in f32: ignore_index must be exact there
         ignore_index > -(int64_t{1} << 24) && ignore_index < (int64_t{1} << 24);
}

// The one-hot mask [N, C] (f32) of the kept targets, and the row mask [N, 1] of kept rows.
struct NllMask {
  at::Tensor mask;
  at::Tensor rows;
};

// The 1-D int64 `indices` as an [N, 1] f32 column on the device, exact for the indices of any
// class or row (gather.hpp's positions: one of 2^32 or beyond is no class, never its low word's).
at::Tensor index_column(const at::Tensor &like, const at::Tensor &indices) {
  return index_positions(indices, like, 0, /*wrap=*/false).view({-1, 1});
}

// The one-hot [N, C] in `type` of an index column: row i has a 1 at column index[i].
at::Tensor one_hot(trn_queue_t q, const at::Tensor &column, int64_t c, c10::ScalarType type) {
  at::Tensor classes = empty_on(column, {c}, at::kFloat);
  const auto vc = view_of(classes);
  check_ops(trn_ops_arange(q, &vc, 0.0, 1.0, nullptr), "arange");
  at::Tensor mask = empty_on(column, {column.size(0), c}, type);
  t_binary(q, TRN_OPS_EQ, mask, column, classes.view({1, c}));
  return mask;
}

NllMask nll_mask(trn_queue_t q, const at::Tensor &self, const at::Tensor &target,
                 int64_t ignore_index) {
  const int64_t n = self.size(0), c = self.size(1);
  const at::Tensor tf = index_column(self, target);
  NllMask m{one_hot(q, tf, c, at::kFloat), empty_on(self, {n, 1}, at::kFloat)};
  t_binary_scalar(q, TRN_OPS_NE, m.rows, tf, static_cast<double>(ignore_index));
  t_binary(q, TRN_OPS_MUL, m.mask, m.mask, m.rows);
  return m;
}

std::tuple<at::Tensor &, at::Tensor &> nll_loss_forward_out(
    const at::Tensor &self, const at::Tensor &target, const c10::optional<at::Tensor> &weight_opt,
    int64_t reduction, int64_t ignore_index, at::Tensor &output, at::Tensor &total_weight) {
  const at::Tensor weight = weight_opt.value_or(at::Tensor());
  check_same_device("nll_loss_forward", {self, target, weight, output, total_weight});
  TORCH_CHECK(self.dim() == 1 || self.dim() == 2, "nll_loss: input must be 1-D or 2-D, got ",
              self.dim(), " dims");
  TORCH_CHECK(target.dim() <= 1, "nll_loss: target must be 0-D or 1-D, got ", target.dim());
  TORCH_CHECK(self.dim() == 1 ? target.numel() == 1 : target.size(0) == self.size(0),
              "nll_loss: expected a target of batch size ", self.dim() == 1 ? 1 : self.size(0),
              ", got ", target.sizes());
  const auto trn_reduction = to_trn_reduction(reduction);
  if (reduction == kReductionNone && self.dim() == 2)
    resize_out(output, {self.size(0)});
  else
    resize_out(output, {});
  resize_out(total_weight, {});
  OpScope scope(self);
  const trn_queue_t q = scope.queue();
  if (nll_on_device(self, target, weight, reduction, ignore_index)) {
    const NllMask m = nll_mask(q, self, target, ignore_index);
    // A select, not a product: a -inf (a masked class) or NaN outside the targets stays out.
    at::Tensor picked = empty_on(self, self.sizes(), at::kFloat);
    t_where(q, picked, m.mask, self, at::zeros({}, self.options().dtype(at::kFloat)));
    at::Tensor sum = empty_on(self, {}, at::kFloat);
    t_reduce_all(q, TRN_OPS_SUM, sum, picked);
    at::Tensor count = empty_on(self, {}, at::kFloat);
    t_reduce_all(q, TRN_OPS_SUM, count, m.rows);
    if (reduction == kReductionMean) t_binary(q, TRN_OPS_DIV, sum, sum, count);
    // A kept row whose target is no class (C or more, or negative but not ignore_index) has no 1
    // in its mask: the loss is NaN then, as libtrn_ops' host path gives for such a target, not a
    // value that looks right (the CPU raises, which would cost a read back every step here).
    at::Tensor hits = empty_on(self, {}, at::kFloat);
    t_reduce_all(q, TRN_OPS_SUM, hits, m.mask);
    at::Tensor missed = empty_on(self, {}, at::kBool);
    t_binary(q, TRN_OPS_NE, missed, hits, count);
    t_where(
        q, sum, missed,
        at::full({}, std::numeric_limits<double>::quiet_NaN(), self.options().dtype(at::kFloat)),
        sum);
    t_unary(q, TRN_OPS_NEG, output, sum);
    t_copy(q, total_weight, count);
    return {output, total_weight};
  }
  if (self.numel() == 0 || target.numel() == 0) {
    // PyTorch's empty batch: a mean is NaN (0 / 0), a sum 0.
    output.fill_(reduction == kReductionMean ? std::numeric_limits<double>::quiet_NaN() : 0.0);
    total_weight.zero_();
    return {output, total_weight};
  }
  const at::Tensor x = self.contiguous(), t = target.contiguous();
  const at::Tensor w = weight.defined() ? weight.to(self.scalar_type()).contiguous() : weight;
  OutTarget o(output, q), tw(total_weight, q);
  const auto vo = view_of(o.get()), vtw = view_of(tw.get()), vx = view_of(x), vt = view_of(t);
  const OptionalView vw(w);
  check_ops(
      trn_ops_nll_loss(q, &vo, &vtw, &vx, &vt, vw.get(), trn_reduction, ignore_index, nullptr),
      "nll_loss");
  o.finish();
  tw.finish();
  return {output, total_weight};
}

at::Tensor &nll_loss_backward_out(const at::Tensor &grad_output, const at::Tensor &self,
                                  const at::Tensor &target,
                                  const c10::optional<at::Tensor> &weight_opt, int64_t reduction,
                                  int64_t ignore_index, const at::Tensor &total_weight,
                                  at::Tensor &grad_input) {
  const at::Tensor weight = weight_opt.value_or(at::Tensor());
  check_same_device("nll_loss_backward",
                    {grad_output, self, target, weight, total_weight, grad_input});
  const auto trn_reduction = to_trn_reduction(reduction);
  resize_out(grad_input, self.sizes());
  if (grad_input.numel() == 0) return grad_input;
  OpScope scope(self);
  const trn_queue_t q = scope.queue();
  OutTarget gi(grad_input, q);
  if (nll_on_device(self, target, weight, reduction, ignore_index)) {
    const NllMask m = nll_mask(q, self, target, ignore_index);
    // -grad_output (/ total_weight), one value broadcast over the mask, in the input's dtype as
    // PyTorch's kernel rounds it.
    at::Tensor scale = empty_on(self, {}, self.scalar_type());
    if (reduction == kReductionMean)
      t_binary(q, TRN_OPS_DIV, scale, grad_output.reshape({}), total_weight.reshape({}));
    else
      t_copy(q, scale, grad_output.reshape({}));
    t_unary(q, TRN_OPS_NEG, scale, scale);
    // A select, not a product: a mean over no targets has an infinite scale, and PyTorch's
    // gradient is 0 there, not NaN.
    at::Tensor zero = empty_on(self, {}, self.scalar_type());
    zero.zero_();
    t_where(q, gi.get(), m.mask, scale.expand(self.sizes()), zero.expand(self.sizes()));
    gi.finish();
    return grad_input;
  }
  if (target.numel() == 0) {
    gi.get().zero_();
    gi.finish();
    return grad_input;
  }
  const at::Tensor go = grad_output.to(self.scalar_type()).contiguous();
  const at::Tensor x = self.contiguous(), t = target.contiguous();
  const at::Tensor w = weight.defined() ? weight.to(self.scalar_type()).contiguous() : weight;
  const at::Tensor tw = total_weight.to(self.scalar_type()).contiguous();
  const auto vgi = view_of(gi.get()), vgo = view_of(go), vx = view_of(x), vt = view_of(t),
             vtw = view_of(tw);
  const OptionalView vw(w);
  check_ops(trn_ops_nll_loss_backward(q, &vgi, &vgo, &vx, &vt, vw.get(), trn_reduction,
                                      ignore_index, &vtw, nullptr),
            "nll_loss_backward");
  gi.finish();
  return grad_input;
}

// ---------------------------------------------------------------------------------------------
// mse_loss, composed as PyTorch's CPU kernels compute it: the difference and its square rounded
// to the input's dtype, reductions accumulated in f32.

at::Tensor &mse_loss_out(const at::Tensor &self, const at::Tensor &target, int64_t reduction,
                         at::Tensor &out) {
  check_same_device("mse_loss", {self, target, out});
  (void)to_trn_reduction(reduction);
  const auto sizes = at::infer_size(self.sizes(), target.sizes());
  const auto type = self.scalar_type();
  TORCH_CHECK(is_float_type(type), "mse_loss on trn takes float inputs, got ", type);
  if (reduction == kReductionNone)
    resize_out(out, sizes);
  else
    resize_out(out, {});
  OpScope scope(self);
  const trn_queue_t q = scope.queue();
  int64_t numel = 1;
  for (const int64_t s : sizes) numel *= s;
  if (numel == 0) {
    if (out.numel() > 0)
      out.fill_(reduction == kReductionMean ? std::numeric_limits<double>::quiet_NaN() : 0.0);
    return out;
  }
  const at::Tensor x = self.expand(sizes), y = target.expand(sizes);
  if (reduction == kReductionNone) {
    OutTarget o(out, q);
    t_binary(q, TRN_OPS_SUB, o.get(), x, y);
    t_unary(q, TRN_OPS_SQUARE, o.get(), o.get());
    o.finish();
    return out;
  }
  at::Tensor sq = empty_on(self, sizes, type);
  t_binary(q, TRN_OPS_SUB, sq, x, y);
  t_unary(q, TRN_OPS_SQUARE, sq, sq);
  at::Tensor acc = empty_on(self, {}, at::kFloat);
  t_reduce_all(q, reduction == kReductionMean ? TRN_OPS_MEAN : TRN_OPS_SUM, acc, sq);
  t_copy(q, out, acc);
  return out;
}

at::Tensor &mse_loss_backward_out(const at::Tensor &grad_output, const at::Tensor &self,
                                  const at::Tensor &target, int64_t reduction,
                                  at::Tensor &grad_input) {
  check_same_device("mse_loss_backward", {grad_output, self, target, grad_input});
  (void)to_trn_reduction(reduction);
  const auto sizes = at::infer_size(self.sizes(), target.sizes());
  resize_out(grad_input, sizes);
  if (grad_input.numel() == 0) return grad_input;
  OpScope scope(self);
  const trn_queue_t q = scope.queue();
  const double norm =
      reduction == kReductionMean ? 2.0 / static_cast<double>(grad_input.numel()) : 2.0;
  OutTarget gi(grad_input, q);
  t_binary(q, TRN_OPS_SUB, gi.get(), self.expand(sizes), target.expand(sizes));
  t_binary_scalar(q, TRN_OPS_MUL, gi.get(), gi.get(), norm);
  t_binary(q, TRN_OPS_MUL, gi.get(), gi.get(), grad_output.expand(sizes));
  gi.finish();
  return grad_input;
}

at::Tensor mse_loss_backward(const at::Tensor &grad_output, const at::Tensor &self,
                             const at::Tensor &target, int64_t reduction) {
  at::Tensor grad_input = empty_on(self, {0}, self.scalar_type());
  mse_loss_backward_out(grad_output, self, target, reduction, grad_input);
  return grad_input;
}

// ---------------------------------------------------------------------------------------------
// embedding. libtrn_ops' embedding runs on the host for int64 indices. On the device it is a
// product with the indices' one-hot matrix [N, V] (0s and one 1 per row, exact in any float
// dtype): onehot @ weight picks each row exactly (one nonzero term, accumulated in fp32), and
// the weight's gradient onehotᵀ @ grad sums each index's rows. Other cases (scale_grad_by_freq,
// integer weights, a one-hot too large to be worth it) go the way torch's own kernels go.

constexpr int64_t kMaxOneHotElements = int64_t{1} << 26;  // 256 MiB of f32

bool embedding_on_device(const at::Tensor &weight, const at::Tensor &indices) {
  return weight.dim() == 2 && is_float_type(weight.scalar_type()) &&
         indices.scalar_type() == at::kLong && weight.size(0) > 0 &&
         weight.size(0) < (int64_t{1} << 24) && indices.numel() > 0 &&
         indices.numel() * weight.size(0) <= kMaxOneHotElements;
}

// The one-hot of the flattened indices in `type`, with rows of padding_idx zeroed.
at::Tensor embedding_one_hot(trn_queue_t q, const at::Tensor &indices, int64_t num_weights,
                             int64_t padding_idx, c10::ScalarType type) {
  const at::Tensor flat = indices.reshape({-1}).contiguous();
  const at::Tensor column = index_column(flat, flat);
  at::Tensor mask = one_hot(q, column, num_weights, type);
  if (padding_idx >= 0) {
    at::Tensor kept = empty_on(column, column.sizes(), type);
    t_binary_scalar(q, TRN_OPS_NE, kept, column, static_cast<double>(padding_idx));
    t_binary(q, TRN_OPS_MUL, mask, mask, kept);
  }
  return mask;
}

at::Tensor embedding(const at::Tensor &weight, const at::Tensor &indices, int64_t padding_idx,
                     bool scale_grad_by_freq, bool sparse) {
  check_same_device("embedding", {weight, indices});
  if (!embedding_on_device(weight, indices))
    return at::native::embedding_symint(weight, indices, padding_idx, scale_grad_by_freq, sparse);
  OpScope scope(weight);
  // The forward keeps the padding row's values (only its gradient is zero).
  const at::Tensor mask =
      embedding_one_hot(scope.queue(), indices, weight.size(0), -1, weight.scalar_type());
  at::Tensor out = empty_on(weight, {mask.size(0), weight.size(1)}, weight.scalar_type());
  const at::Tensor w = weight.contiguous();
  const auto vo = view_of(out), vm = view_of(mask), vw = view_of(w);
  check_ops(trn_ops_matmul(scope.queue(), &vo, &vm, &vw, 0, nullptr), "matmul");
  // An index that is no row (negative, or past the last) has no 1 in its mask row: its output
  // row is NaN, as libtrn_ops' host path gives, not zeros that look like a row (the CPU raises,
  // which would cost reading the indices back on every call here).
  at::Tensor hits = empty_on(mask, {mask.size(0), 1}, mask.scalar_type());
  const int64_t along = 1;
  const auto vh = view_of(hits);
  check_ops(trn_ops_reduce(scope.queue(), TRN_OPS_SUM, &vh, &vm, &along, 1, 1, nullptr), "sum");
  at::Tensor missed = empty_on(mask, hits.sizes(), at::kBool);
  t_binary_scalar(scope.queue(), TRN_OPS_EQ, missed, hits, 0.0);
  t_where(scope.queue(), out, missed,
          at::full({}, std::numeric_limits<double>::quiet_NaN(), out.options()), out);
  std::vector<int64_t> sizes(indices.sizes().begin(), indices.sizes().end());
  sizes.push_back(weight.size(1));
  return out.view(sizes);
}

at::Tensor embedding_dense_backward(const at::Tensor &grad_output, const at::Tensor &indices,
                                    c10::SymInt num_weights_sym, int64_t padding_idx,
                                    bool scale_grad_by_freq) {
  check_same_device("embedding_dense_backward", {grad_output, indices});
  const int64_t num_weights = num_weights_sym.expect_int();
  const int64_t dim = grad_output.size(-1);
  const bool fits = is_float_type(grad_output.scalar_type()) &&
                    indices.scalar_type() == at::kLong && indices.numel() > 0 && num_weights > 0 &&
                    num_weights < (int64_t{1} << 24) &&
                    indices.numel() * num_weights <= kMaxOneHotElements;
  if (scale_grad_by_freq || !fits) {
    record_cpu_run("aten::embedding_dense_backward");
    return at::embedding_dense_backward(grad_output.cpu(), indices.cpu(), num_weights, padding_idx,
                                        scale_grad_by_freq)
        .to(grad_output.device());
  }
  OpScope scope(grad_output);
  const auto type = grad_output.scalar_type();
  const at::Tensor mask = embedding_one_hot(scope.queue(), indices, num_weights, padding_idx, type);
  const at::Tensor go = grad_output.reshape({-1, dim}).contiguous();
  at::Tensor grad_weight = empty_on(grad_output, {num_weights, dim}, type);
  // mask is [N, V] as it lies: the product takes it transposed.
  const auto vg = view_of(grad_weight), vm = view_of(mask), vgo = view_of(go);
  check_ops(trn_ops_matmul(scope.queue(), &vg, &vm, &vgo, TRN_OPS_TRANSPOSE_A, nullptr), "matmul");
  return grad_weight;
}

// The schemas' SymInt arguments as the kernels above take them: every kernel of an op must have
// the C++ signature its schema gives (other backends' kernels, functorch's, are registered with
// it). The sizes are concrete here (no symbolic shapes reach an eager backend).
int64_t concrete(const c10::SymInt &value) {
  return value.guard_int(__FILE__, __LINE__);
}

at::Tensor embedding_sym(const at::Tensor &weight, const at::Tensor &indices,
                         c10::SymInt padding_idx, bool scale_grad_by_freq, bool sparse) {
  return torch_trn::embedding(weight, indices, concrete(padding_idx), scale_grad_by_freq, sparse);
}

at::Tensor embedding_dense_backward_sym(const at::Tensor &grad_output, const at::Tensor &indices,
                                        c10::SymInt num_weights, c10::SymInt padding_idx,
                                        bool scale_grad_by_freq) {
  return torch_trn::embedding_dense_backward(grad_output, indices, std::move(num_weights),
                                             concrete(padding_idx), scale_grad_by_freq);
}

at::Tensor convolution_sym(const at::Tensor &input, const at::Tensor &weight,
                           const c10::optional<at::Tensor> &bias, c10::SymIntArrayRef stride,
                           c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                           bool transposed, c10::SymIntArrayRef output_padding,
                           c10::SymInt groups) {
  return torch_trn::convolution(input, weight, bias, C10_AS_INTARRAYREF_SLOW(stride),
                                C10_AS_INTARRAYREF_SLOW(padding), C10_AS_INTARRAYREF_SLOW(dilation),
                                transposed, C10_AS_INTARRAYREF_SLOW(output_padding),
                                concrete(groups));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_sym(
    const at::Tensor &grad_output, const at::Tensor &input, const at::Tensor &weight,
    c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
    bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups,
    std::array<bool, 3> output_mask) {
  return torch_trn::convolution_backward(
      grad_output, input, weight, C10_AS_INTARRAYREF_SLOW(stride), C10_AS_INTARRAYREF_SLOW(padding),
      C10_AS_INTARRAYREF_SLOW(dilation), transposed, C10_AS_INTARRAYREF_SLOW(output_padding),
      concrete(groups), output_mask);
}

std::tuple<at::Tensor &, at::Tensor &> nll_loss_forward_out_sym(
    const at::Tensor &self, const at::Tensor &target, const c10::optional<at::Tensor> &weight,
    int64_t reduction, c10::SymInt ignore_index, at::Tensor &output, at::Tensor &total_weight) {
  return torch_trn::nll_loss_forward_out(self, target, weight, reduction, concrete(ignore_index),
                                         output, total_weight);
}

// nll_loss2d ([N, C, H, W] scores, [N, H, W] targets: a segmentation's cross_entropy) as the
// [N*H*W, C] nll_loss of the classes moved last, through the kernels above.
at::Tensor classes_last(const at::Tensor &self) {
  return self.movedim(1, -1).reshape({-1, self.size(1)});
}
std::tuple<at::Tensor, at::Tensor> nll_loss2d_forward(const at::Tensor &self,
                                                      const at::Tensor &target,
                                                      const c10::optional<at::Tensor> &weight,
                                                      int64_t reduction, c10::SymInt ignore_index) {
  check_same_device("nll_loss2d_forward", {self, target});
  TORCH_CHECK(self.dim() == 4 && target.dim() == 3 && self.size(0) == target.size(0) &&
                  self.size(2) == target.size(1) && self.size(3) == target.size(2),
              "nll_loss2d: expected input [N, C, H, W] and target [N, H, W], got ", self.sizes(),
              " and ", target.sizes());
  auto [out, total] = at::nll_loss_forward_symint(classes_last(self), target.reshape({-1}), weight,
                                                  reduction, std::move(ignore_index));
  if (reduction == kReductionNone) out = out.view(target.sizes());
  return {out, total};
}
at::Tensor nll_loss2d_backward(const at::Tensor &grad_output, const at::Tensor &self,
                               const at::Tensor &target, const c10::optional<at::Tensor> &weight,
                               int64_t reduction, c10::SymInt ignore_index,
                               const at::Tensor &total_weight) {
  check_same_device("nll_loss2d_backward", {grad_output, self, target});
  const at::Tensor grad = reduction == kReductionNone ? grad_output.reshape({-1}) : grad_output;
  const at::Tensor flat =
      at::nll_loss_backward_symint(grad, classes_last(self), target.reshape({-1}), weight,
                                   reduction, std::move(ignore_index), total_weight);
  return flat.view({self.size(0), self.size(2), self.size(3), self.size(1)}).movedim(-1, 1);
}

at::Tensor &nll_loss_backward_out_sym(const at::Tensor &grad_output, const at::Tensor &self,
                                      const at::Tensor &target,
                                      const c10::optional<at::Tensor> &weight, int64_t reduction,
                                      c10::SymInt ignore_index, const at::Tensor &total_weight,
                                      at::Tensor &grad_input) {
  return torch_trn::nll_loss_backward_out(grad_output, self, target, weight, reduction,
                                          concrete(ignore_index), total_weight, grad_input);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("embedding", TORCH_FN(embedding_sym));
  m.impl("embedding_dense_backward", TORCH_FN(embedding_dense_backward_sym));
  m.impl("convolution_overrideable", TORCH_FN(convolution_sym));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward_sym));
  m.impl("max_pool2d_with_indices.out", TORCH_FN(max_pool2d_with_indices_out));
  m.impl("max_pool2d_with_indices_backward.grad_input",
         TORCH_FN(max_pool2d_with_indices_backward_out));
  m.impl("native_layer_norm", TORCH_FN(native_layer_norm));
  m.impl("native_layer_norm_backward", TORCH_FN(native_layer_norm_backward));
  m.impl("_softmax.out", TORCH_FN(softmax_out));
  m.impl("_softmax_backward_data.out", TORCH_FN(softmax_backward_out));
  m.impl("_log_softmax.out", TORCH_FN(log_softmax_out));
  m.impl("_log_softmax_backward_data.out", TORCH_FN(log_softmax_backward_out));
  m.impl("nll_loss_forward.output", TORCH_FN(nll_loss_forward_out_sym));
  m.impl("nll_loss_backward.grad_input", TORCH_FN(nll_loss_backward_out_sym));
  m.impl("nll_loss2d_forward", TORCH_FN(nll_loss2d_forward));
  m.impl("nll_loss2d_backward", TORCH_FN(nll_loss2d_backward));
  m.impl("mse_loss.out", TORCH_FN(mse_loss_out));
  m.impl("mse_loss_backward.grad_input", TORCH_FN(mse_loss_backward_out));
  // mse_loss_backward has no composite form over its .out variant (only CPU and CUDA kernels).
  m.impl("mse_loss_backward", TORCH_FN(mse_loss_backward));
}

}  // namespace torch_trn
