// Losses, embeddings, convolution and pooling with their backward ops. conv2d and its backward
// run the device's kernels (ops/conv_op.hpp) where they can; the rest run on the host reference
// for now (docs/ops.md says which ops have device kernels). Shapes are checked here, when the op
// is issued, so that a wrong call fails at once rather than in the queue.
#include <fmt/format.h>

#include "ops/conv_op.hpp"
#include "ops/host_path.hpp"
#include "ops/op_support.hpp"

namespace trn::ops {

namespace {

void check_integer(const Tensor &t, const char *name, const char *op) {
  if (dtype_is_float(t.dtype))
    invalid(fmt::format("{}: {} is {}; it must hold integers (class or row indices)", op, name,
                        t.describe()));
}

std::string reason_for(const std::vector<const Tensor *> &tensors, const char *op) {
  if (auto r = host_reason(tensors, false)) return *r;
  return fmt::format("no device kernel for {} yet", op);
}

// nll_loss: log_probs [N, C] or [C]; target [N] or []; the output by reduction.
struct NllShapes {
  Shape out;
  int64_t classes = 0;
};

NllShapes nll_shapes(const Tensor &lp, const Tensor &target, const Tensor &weight,
                     trn_ops_reduction_t reduction, const char *op) {
  if (reduction != TRN_OPS_REDUCTION_NONE && reduction != TRN_OPS_REDUCTION_MEAN &&
      reduction != TRN_OPS_REDUCTION_SUM)
    fail(TRN_ERROR_INVALID_ENUM, fmt::format("{}: reduction {} is none of NONE, MEAN, SUM", op,
                                             static_cast<int>(reduction)));
  if (lp.rank() != 1 && lp.rank() != 2)
    invalid(fmt::format("{}: log_probs is {}; it must be [N, C] or [C]", op, lp.describe()));
  NllShapes s;
  s.classes = lp.shape.back();
  const Shape target_shape = lp.rank() == 2 ? Shape{lp.shape[0]} : Shape{};
  check_shape(target, target_shape, "target", op);
  check_integer(target, "target", op);
  if (weight.present()) check_shape(weight, {s.classes}, "weight", op);
  s.out = reduction == TRN_OPS_REDUCTION_NONE ? target_shape : Shape{};
  return s;
}

struct ConvParams {
  host::Conv2dParams p;
};

ConvParams conv_params(const trn_ops_conv2d_params_t *params, const char *op) {
  ConvParams c;
  if (!params) return c;
  for (int i = 0; i < 2; ++i) {
    c.p.stride[i] = params->stride[i] ? params->stride[i] : 1;
    c.p.padding[i] = params->padding[i];
    c.p.dilation[i] = params->dilation[i] ? params->dilation[i] : 1;
    if (c.p.stride[i] < 0 || c.p.padding[i] < 0 || c.p.dilation[i] < 0)
      invalid(fmt::format("{}: stride, padding and dilation must not be negative", op));
  }
  c.p.groups = params->groups ? params->groups : 1;
  if (c.p.groups < 0) invalid(fmt::format("{}: groups is {}", op, c.p.groups));
  return c;
}

Shape conv_out_shape(const Tensor &x, const Tensor &w, const host::Conv2dParams &p,
                     const char *op) {
  if (x.rank() != 4) invalid(fmt::format("{}: x is {}; it must be [N, C, H, W]", op, x.describe()));
  if (w.rank() != 4)
    invalid(fmt::format("{}: weight is {}; it must be [O, C / groups, kh, kw]", op, w.describe()));
  if (x.shape[1] % p.groups || w.shape[0] % p.groups || w.shape[1] * p.groups != x.shape[1])
    invalid(
        fmt::format("{}: x {} and weight {} do not fit groups = {} (weight's dim 1 must be "
                    "C / groups)",
                    op, x.describe(), w.describe(), p.groups));
  Shape out = {x.shape[0], w.shape[0], 0, 0};
  for (int i = 0; i < 2; ++i) {
    const int64_t span = p.dilation[i] * (w.shape[2 + i] - 1) + 1;
    const int64_t room = x.shape[2 + i] + 2 * p.padding[i] - span;
    if (room < 0)
      invalid(fmt::format("{}: the kernel {} (dilated to {}) is larger than the padded input {}",
                          op, shape_text(w.shape), span, shape_text(x.shape)));
    out[2 + i] = room / p.stride[i] + 1;
  }
  return out;
}

host::Pool2dParams pool_params(const trn_ops_pool2d_params_t *params, const char *op) {
  if (!params) fail(TRN_ERROR_NULL_POINTER, fmt::format("{}: params is NULL", op));
  host::Pool2dParams p;
  for (int i = 0; i < 2; ++i) {
    p.kernel[i] = params->kernel[i];
    p.stride[i] = params->stride[i] ? params->stride[i] : params->kernel[i];
    p.padding[i] = params->padding[i];
    p.dilation[i] = params->dilation[i] ? params->dilation[i] : 1;
    if (p.kernel[i] <= 0 || p.stride[i] <= 0 || p.padding[i] < 0 || p.dilation[i] <= 0)
      invalid(fmt::format("{}: kernel and stride must be positive, padding not negative", op));
    if (p.padding[i] * 2 > p.kernel[i])
      invalid(
          fmt::format("{}: padding {} is over half the kernel {}", op, p.padding[i], p.kernel[i]));
  }
  p.ceil_mode = params->ceil_mode != 0;
  return p;
}

Shape pool_out_shape(const Tensor &x, const host::Pool2dParams &p, const char *op) {
  if (x.rank() != 3 && x.rank() != 4)
    invalid(fmt::format("{}: x is {}; it must be [N, C, H, W] or [C, H, W]", op, x.describe()));
  Shape out = x.shape;
  for (int i = 0; i < 2; ++i) {
    const int64_t in = x.shape[x.rank() - 2 + i];
    const int64_t span = p.dilation[i] * (p.kernel[i] - 1) + 1;
    const int64_t room = in + 2 * p.padding[i] - span;
    if (room < 0)
      invalid(fmt::format("{}: the window ({}) is larger than the padded input {}", op, span,
                          shape_text(x.shape)));
    int64_t o = (room + (p.ceil_mode ? p.stride[i] - 1 : 0)) / p.stride[i] + 1;
    // PyTorch's rule: in ceil mode the last window must start inside the input or left padding.
    if (p.ceil_mode && (o - 1) * p.stride[i] >= in + p.padding[i]) --o;
    out[x.rank() - 2 + i] = o;
  }
  return out;
}

}  // namespace

}  // namespace trn::ops

using namespace trn;
using namespace trn::ops;

extern "C" {

TRN_OPS_API trn_result_t trn_ops_nll_loss(trn_queue_t queue, const trn_ops_tensor_t *out,
                                          const trn_ops_tensor_t *total_weight,
                                          const trn_ops_tensor_t *log_probs,
                                          const trn_ops_tensor_t *target,
                                          const trn_ops_tensor_t *weight,
                                          trn_ops_reduction_t reduction, int64_t ignore_index,
                                          const trn_sync_t *sync) {
  return run_op("trn_ops_nll_loss", queue, [&] {
    const char *op = "nll_loss";
    const Tensor o = tensor_arg(out, "out"), tw = tensor_arg(total_weight, "total_weight", true),
                 lp = tensor_arg(log_probs, "log_probs"), t = tensor_arg(target, "target"),
                 w = tensor_arg(weight, "weight", true);
    const NllShapes s = nll_shapes(lp, t, w, reduction, op);
    check_shape(o, s.out, "out", op);
    if (tw.present()) check_shape(tw, {}, "total_weight", op);
    check_same_device({&o, &tw, &lp, &t, &w}, op);
    check_overlap({&o, &tw}, {&lp, &t, &w}, op, false);
    const bool want_tw = tw.present();
    run_on_host(queue, sync, op, signature_of({&lp, &t, &w}, {&o, &tw}),
                reason_for({&o, &tw, &lp, &t, &w}, op), {lp, t, w}, {o, tw}, [=](const Arrays &a) {
                  host::NllResult r =
                      host::nll_loss(a[0], a[1], optional_input(a, 2),
                                     static_cast<host::Reduction>(reduction), ignore_index);
                  return want_tw ? Arrays{r.out, r.total_weight} : Arrays{r.out};
                });
  });
}

TRN_OPS_API trn_result_t trn_ops_nll_loss_backward(
    trn_queue_t queue, const trn_ops_tensor_t *grad_log_probs, const trn_ops_tensor_t *grad_out,
    const trn_ops_tensor_t *log_probs, const trn_ops_tensor_t *target,
    const trn_ops_tensor_t *weight, trn_ops_reduction_t reduction, int64_t ignore_index,
    const trn_ops_tensor_t *total_weight, const trn_sync_t *sync) {
  return run_op("trn_ops_nll_loss_backward", queue, [&] {
    const char *op = "nll_loss_backward";
    const Tensor gl = tensor_arg(grad_log_probs, "grad_log_probs"),
                 g = tensor_arg(grad_out, "grad_out"), lp = tensor_arg(log_probs, "log_probs"),
                 t = tensor_arg(target, "target"), w = tensor_arg(weight, "weight", true),
                 tw = tensor_arg(total_weight, "total_weight");
    const NllShapes s = nll_shapes(lp, t, w, reduction, op);
    check_shape(gl, lp.shape, "grad_log_probs", op);
    check_shape(g, s.out, "grad_out", op);
    check_shape(tw, {}, "total_weight", op);
    check_same_device({&gl, &g, &lp, &t, &w, &tw}, op);
    check_overlap({&gl}, {&g, &lp, &t, &w, &tw}, op, false);
    run_on_host(queue, sync, op, signature_of({&g, &lp, &t, &w, &tw}, {&gl}),
                reason_for({&gl, &g, &lp, &t, &w, &tw}, op), {g, lp, t, w, tw}, {gl},
                [=](const Arrays &a) {
                  return Arrays{host::nll_loss_backward(a[0], a[1], a[2], optional_input(a, 3),
                                                        static_cast<host::Reduction>(reduction),
                                                        ignore_index, a[4])};
                });
  });
}

TRN_OPS_API trn_result_t trn_ops_embedding(trn_queue_t queue, const trn_ops_tensor_t *out,
                                           const trn_ops_tensor_t *weight,
                                           const trn_ops_tensor_t *indices,
                                           const trn_sync_t *sync) {
  return run_op("trn_ops_embedding", queue, [&] {
    const char *op = "embedding";
    const Tensor o = tensor_arg(out, "out"), w = tensor_arg(weight, "weight"),
                 idx = tensor_arg(indices, "indices");
    if (w.rank() != 2)
      invalid(fmt::format("embedding: weight is {}; it must be [V, D]", w.describe()));
    check_integer(idx, "indices", op);
    Shape shape = idx.shape;
    shape.push_back(w.shape[1]);
    check_shape(o, shape, "out", op);
    check_same_device({&o, &w, &idx}, op);
    check_overlap({&o}, {&w, &idx}, op, false);
    run_on_host(queue, sync, op, signature_of({&w, &idx}, {&o}), reason_for({&o, &w, &idx}, op),
                {w, idx}, {o}, [](const Arrays &a) { return Arrays{host::embedding(a[0], a[1])}; });
  });
}

TRN_OPS_API trn_result_t trn_ops_embedding_backward(trn_queue_t queue,
                                                    const trn_ops_tensor_t *grad_weight,
                                                    const trn_ops_tensor_t *grad_out,
                                                    const trn_ops_tensor_t *indices,
                                                    int64_t padding_idx, const trn_sync_t *sync) {
  return run_op("trn_ops_embedding_backward", queue, [&] {
    const char *op = "embedding_backward";
    const Tensor gw = tensor_arg(grad_weight, "grad_weight"), g = tensor_arg(grad_out, "grad_out"),
                 idx = tensor_arg(indices, "indices");
    if (gw.rank() != 2)
      invalid(
          fmt::format("embedding_backward: grad_weight is {}; it must be [V, D]", gw.describe()));
    check_integer(idx, "indices", op);
    Shape shape = idx.shape;
    shape.push_back(gw.shape[1]);
    check_shape(g, shape, "grad_out", op);
    check_same_device({&gw, &g, &idx}, op);
    check_overlap({&gw}, {&g, &idx}, op, false);
    const int64_t rows = gw.shape[0];
    run_on_host(queue, sync, op, signature_of({&g, &idx}, {&gw}), reason_for({&gw, &g, &idx}, op),
                {g, idx}, {gw}, [=](const Arrays &a) {
                  return Arrays{host::embedding_backward(a[0], a[1], rows, padding_idx)};
                });
  });
}

TRN_OPS_API trn_result_t trn_ops_conv2d(trn_queue_t queue, const trn_ops_tensor_t *out,
                                        const trn_ops_tensor_t *x, const trn_ops_tensor_t *weight,
                                        const trn_ops_tensor_t *bias,
                                        const trn_ops_conv2d_params_t *params,
                                        const trn_sync_t *sync) {
  return run_op("trn_ops_conv2d", queue, [&] {
    const char *op = "conv2d";
    const Tensor o = tensor_arg(out, "out"), in = tensor_arg(x, "x"),
                 w = tensor_arg(weight, "weight"), b = tensor_arg(bias, "bias", true);
    const ConvParams c = conv_params(params, op);
    check_shape(o, conv_out_shape(in, w, c.p, op), "out", op);
    if (b.present()) check_shape(b, {w.shape[0]}, "bias", op);
    check_same_device({&o, &in, &w, &b}, op);
    check_overlap({&o}, {&in, &w, &b}, op, false);
    const host::Conv2dParams p = c.p;
    const std::optional<std::string> reason = conv2d_on_device(queue, sync, p, o, in, w, b);
    if (!reason) return;
    run_on_host(
        queue, sync, op, signature_of({&in, &w, &b}, {&o}), *reason, {in, w, b}, {o},
        [p](const Arrays &a) { return Arrays{host::conv2d(a[0], a[1], optional_input(a, 2), p)}; });
  });
}

TRN_OPS_API trn_result_t trn_ops_conv2d_backward(
    trn_queue_t queue, const trn_ops_tensor_t *grad_x, const trn_ops_tensor_t *grad_weight,
    const trn_ops_tensor_t *grad_bias, const trn_ops_tensor_t *grad_out, const trn_ops_tensor_t *x,
    const trn_ops_tensor_t *weight, const trn_ops_conv2d_params_t *params, const trn_sync_t *sync) {
  return run_op("trn_ops_conv2d_backward", queue, [&] {
    const char *op = "conv2d_backward";
    const Tensor gx = tensor_arg(grad_x, "grad_x", true),
                 gw = tensor_arg(grad_weight, "grad_weight", true),
                 gb = tensor_arg(grad_bias, "grad_bias", true),
                 g = tensor_arg(grad_out, "grad_out"), in = tensor_arg(x, "x"),
                 w = tensor_arg(weight, "weight");
    const ConvParams c = conv_params(params, op);
    check_shape(g, conv_out_shape(in, w, c.p, op), "grad_out", op);
    if (gx.present()) check_shape(gx, in.shape, "grad_x", op);
    if (gw.present()) check_shape(gw, w.shape, "grad_weight", op);
    if (gb.present()) check_shape(gb, {w.shape[0]}, "grad_bias", op);
    check_same_device({&g, &gx, &gw, &gb, &in, &w}, op);
    check_overlap({&gx, &gw, &gb}, {&g, &in, &w}, op, false);
    if (!gx.present() && !gw.present() && !gb.present()) return queue_empty_op(queue, sync);
    const host::Conv2dParams p = c.p;
    const std::optional<std::string> reason =
        conv2d_backward_on_device(queue, sync, p, gx, gw, gb, g, in, w);
    if (!reason) return;
    const bool want_x = gx.present(), want_w = gw.present(), want_b = gb.present();
    run_on_host(queue, sync, op, signature_of({&g, &in, &w}, {&gx, &gw, &gb}), *reason, {g, in, w},
                {gx, gw, gb}, [=](const Arrays &a) {
                  host::Conv2dGrads r = host::conv2d_backward(a[0], a[1], a[2], want_b, p);
                  Arrays outs;
                  if (want_x) outs.push_back(r.grad_x);
                  if (want_w) outs.push_back(r.grad_w);
                  if (want_b) outs.push_back(r.grad_bias);
                  return outs;
                });
  });
}

TRN_OPS_API trn_result_t trn_ops_max_pool2d(trn_queue_t queue, const trn_ops_tensor_t *out,
                                            const trn_ops_tensor_t *indices,
                                            const trn_ops_tensor_t *x,
                                            const trn_ops_pool2d_params_t *params,
                                            const trn_sync_t *sync) {
  return run_op("trn_ops_max_pool2d", queue, [&] {
    const char *op = "max_pool2d";
    const Tensor o = tensor_arg(out, "out"), idx = tensor_arg(indices, "indices", true),
                 in = tensor_arg(x, "x");
    const host::Pool2dParams p = pool_params(params, op);
    const Shape shape = pool_out_shape(in, p, op);
    check_shape(o, shape, "out", op);
    if (idx.present()) {
      check_shape(idx, shape, "indices", op);
      check_integer(idx, "indices", op);
    }
    check_same_device({&o, &idx, &in}, op);
    check_overlap({&o, &idx}, {&in}, op, false);
    const bool want_idx = idx.present();
    run_on_host(queue, sync, op, signature_of({&in}, {&o, &idx}), reason_for({&o, &idx, &in}, op),
                {in}, {o, idx}, [=](const Arrays &a) {
                  host::PoolResult r = host::max_pool2d(a[0], p);
                  return want_idx ? Arrays{r.out, r.indices} : Arrays{r.out};
                });
  });
}

TRN_OPS_API trn_result_t trn_ops_max_pool2d_backward(trn_queue_t queue,
                                                     const trn_ops_tensor_t *grad_x,
                                                     const trn_ops_tensor_t *grad_out,
                                                     const trn_ops_tensor_t *indices,
                                                     const trn_sync_t *sync) {
  return run_op("trn_ops_max_pool2d_backward", queue, [&] {
    const char *op = "max_pool2d_backward";
    const Tensor gx = tensor_arg(grad_x, "grad_x"), g = tensor_arg(grad_out, "grad_out"),
                 idx = tensor_arg(indices, "indices");
    if (gx.rank() != 3 && gx.rank() != 4)
      invalid(
          fmt::format("{}: grad_x is {}; it must be [N, C, H, W] or [C, H, W]", op, gx.describe()));
    if (g.rank() != gx.rank() || !std::equal(g.shape.begin(), g.shape.end() - 2, gx.shape.begin()))
      invalid(fmt::format("{}: grad_out {} does not match grad_x {} in its leading dims", op,
                          g.describe(), gx.describe()));
    check_shape(idx, g.shape, "indices", op);
    check_integer(idx, "indices", op);
    check_same_device({&gx, &g, &idx}, op);
    check_overlap({&gx}, {&g, &idx}, op, false);
    const Shape x_shape = gx.shape;
    run_on_host(queue, sync, op, signature_of({&g, &idx}, {&gx}), reason_for({&gx, &g, &idx}, op),
                {g, idx}, {gx}, [x_shape](const Arrays &a) {
                  return Arrays{host::max_pool2d_backward(a[0], x_shape, a[1])};
                });
  });
}

}  // extern "C"
