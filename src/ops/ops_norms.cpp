// Layer norm and RMS norm over the last dims, with their backward ops, on the device when the
// tensors are contiguous, the weights of x's dtype and the statistics f32 (what the kernels
// read and write); on the host otherwise.
#include <fmt/format.h>

#include "kbuild/kernels/norms.hpp"
#include "ops/host_path.hpp"
#include "ops/kernel_op.hpp"
#include "ops/kernels/norm_grad.hpp"
#include "ops/kernels/norm_stats.hpp"
#include "ops/op_support.hpp"

namespace trn::ops {

namespace {

struct NormShapes {
  Shape normalized;  // x.shape[-n:]
  Shape stats;       // x.shape[:-n] + [1] * n
  uint64_t rows = 0, cols = 0;
};

NormShapes norm_shapes(const Tensor &x, uint32_t n, const char *op) {
  if (n == 0 || n > x.rank())
    invalid(fmt::format("{}: normalized_ndim is {}; it must be in [1, {}] for x {}", op, n,
                        x.rank(), x.describe()));
  NormShapes s;
  s.normalized.assign(x.shape.end() - n, x.shape.end());
  s.stats.assign(x.shape.begin(), x.shape.end() - n);
  s.stats.insert(s.stats.end(), n, 1);
  s.cols = static_cast<uint64_t>(numel(s.normalized));
  s.rows = s.cols ? static_cast<uint64_t>(x.numel()) / s.cols : 0;
  return s;
}

void check_optional(const Tensor &t, const Shape &shape, const char *name, const char *op) {
  if (t.present()) check_shape(t, shape, name, op);
}

// Launches a norm kernel: the builder's (layer norm with weight and bias, or none; RMS norm with
// a weight or none) when no statistics are asked for, the op library's, which also writes them,
// when they are (layer norm: mean and rstd both, f32). Or says why it cannot.
std::optional<std::string> norm_on_device(trn_queue_t queue, const trn_sync_t *sync, bool layer,
                                          const Tensor &o, const Tensor &x, const Tensor &w,
                                          const Tensor &b, const Tensor &mean, const Tensor &rstd,
                                          const NormShapes &s, double eps) {
  if (auto r = host_reason({&x, &o, &w, &b, &mean, &rstd}, false)) return r;
  if (!dtype_is_float(x.dtype) || !dtype_is_float(o.dtype)) return "integer tensors";
  if (layer && w.present() != b.present()) return "a weight without a bias (or the reverse)";
  if ((w.present() && w.dtype != x.dtype) || (b.present() && b.dtype != x.dtype))
    return "weights of another dtype than x";
  const bool stats = mean.present() || rstd.present();
  if (stats && ((layer && !(mean.present() && rstd.present())) ||
                (mean.present() && mean.dtype != TRN_DTYPE_F32) ||
                (rstd.present() && rstd.dtype != TRN_DTYPE_F32)))
    return "statistics the kernel does not write (it writes f32 mean and rstd together)";
  std::vector<trn_kernel_binding_t> args = {bind(x)};
  if (w.present()) args.push_back(bind(w));
  if (b.present()) args.push_back(bind(b));
  args.push_back(bind(o));
  const float e = static_cast<float>(eps);
  const std::string signature =
      fmt::format("{}{} [{}, {}] {}>{} eps {:a} affine {}", layer ? "layernorm" : "rmsnorm",
                  stats ? "_stats" : "", s.rows, s.cols, dtype_name(x.dtype), dtype_name(o.dtype),
                  e, w.present() ? 1 : 0);
  BuildFn build;
  if (stats) {
    if (mean.present()) args.push_back(bind(mean));
    args.push_back(bind(rstd));
    kernels::NormStatsConfig c;
    c.kind = layer ? kernels::NormKind::kLayer : kernels::NormKind::kRms;
    c.rows = s.rows;
    c.cols = s.cols;
    c.dtype = static_cast<isa::DType>(x.dtype);
    c.out_dtype = static_cast<isa::DType>(o.dtype);
    c.eps = e;
    c.affine = w.present();
    build = [c](const kbuild::BuildTarget &t) mutable {
      c.target = t;
      return kernels::build_norm_forward(c);
    };
  } else {
    kbuild::NormConfig c;
    c.rows = s.rows;
    c.cols = s.cols;
    c.dtype = static_cast<isa::DType>(x.dtype);
    c.out_dtype = static_cast<isa::DType>(o.dtype);
    c.eps = e;
    c.affine = w.present();
    build = [c, layer](const kbuild::BuildTarget &t) mutable {
      c.target = t;
      return layer ? kbuild::build_layernorm(c) : kbuild::build_rmsnorm(c);
    };
  }
  return try_device([&] {
    launch_kernels(queue, sync, o.device_index, {{signature, build, args}});
  });
}

// The backward kernel (grad_x always; with a weight, grad_weight and, for layer norm,
// grad_bias, all f32), or why it cannot run.
std::optional<std::string> norm_backward_on_device(trn_queue_t queue, const trn_sync_t *sync,
                                                   bool layer, const Tensor &gx, const Tensor &gw,
                                                   const Tensor &gb, const Tensor &g,
                                                   const Tensor &x, const Tensor &mean,
                                                   const Tensor &rstd, const Tensor &w,
                                                   const NormShapes &s) {
  if (auto r = host_reason({&gx, &gw, &gb, &g, &x, &mean, &rstd, &w}, false)) return r;
  if (!gx.present()) return "no grad_x asked for (the kernel always writes it)";
  if (!dtype_is_float(x.dtype) || !dtype_is_float(gx.dtype) || g.dtype != x.dtype)
    return "grad_out and x of different or integer dtypes";
  if ((mean.present() && mean.dtype != TRN_DTYPE_F32) || rstd.dtype != TRN_DTYPE_F32)
    return "statistics that are not f32";
  if (w.present()) {
    if (w.dtype != x.dtype) return "a weight of another dtype than x";
    if (!gw.present() || gw.dtype != TRN_DTYPE_F32 ||
        (layer && (!gb.present() || gb.dtype != TRN_DTYPE_F32)))
      return "weight gradients the kernel does not write (it writes f32 grad_weight and "
             "grad_bias together)";
  } else if (gw.present() || gb.present()) {
    return "a bias gradient without a weight";
  }
  kernels::NormGradConfig c;
  c.kind = layer ? kernels::NormKind::kLayer : kernels::NormKind::kRms;
  c.rows = s.rows;
  c.cols = s.cols;
  c.dtype = static_cast<isa::DType>(x.dtype);
  c.grad_dtype = static_cast<isa::DType>(gx.dtype);
  c.affine = w.present();
  std::vector<trn_kernel_binding_t> args = {bind(g), bind(x)};
  if (layer) args.push_back(bind(mean));
  args.push_back(bind(rstd));
  if (w.present()) args.push_back(bind(w));
  args.push_back(bind(gx));
  if (w.present()) {
    args.push_back(bind(gw));
    if (layer) args.push_back(bind(gb));
  }
  return try_device([&] {
    launch_kernels(
        queue, sync, gx.device_index,
        {{fmt::format("{}_backward [{}, {}] {}>{} affine {}", layer ? "layernorm" : "rmsnorm",
                      s.rows, s.cols, dtype_name(x.dtype), dtype_name(gx.dtype), c.affine ? 1 : 0),
          [c](const kbuild::BuildTarget &t) mutable {
            c.target = t;
            return kernels::build_norm_backward(c);
          },
          args}});
  });
}

}  // namespace

}  // namespace trn::ops

using namespace trn;
using namespace trn::ops;

extern "C" {

TRN_OPS_API trn_result_t trn_ops_layer_norm(trn_queue_t queue, const trn_ops_tensor_t *out,
                                            const trn_ops_tensor_t *mean,
                                            const trn_ops_tensor_t *rstd, const trn_ops_tensor_t *x,
                                            const trn_ops_tensor_t *weight,
                                            const trn_ops_tensor_t *bias, uint32_t normalized_ndim,
                                            double eps, const trn_sync_t *sync) {
  return run_op("trn_ops_layer_norm", queue, [&] {
    const Tensor o = tensor_arg(out, "out"), m = tensor_arg(mean, "mean", true),
                 r = tensor_arg(rstd, "rstd", true), in = tensor_arg(x, "x"),
                 w = tensor_arg(weight, "weight", true), b = tensor_arg(bias, "bias", true);
    const NormShapes s = norm_shapes(in, normalized_ndim, "layer_norm");
    check_shape(o, in.shape, "out", "layer_norm");
    check_optional(m, s.stats, "mean", "layer_norm");
    check_optional(r, s.stats, "rstd", "layer_norm");
    check_optional(w, s.normalized, "weight", "layer_norm");
    check_optional(b, s.normalized, "bias", "layer_norm");
    check_same_device({&o, &m, &r, &in, &w, &b}, "layer_norm");
    check_overlap({&o, &m, &r}, {&in, &w, &b}, "layer_norm", false);
    if (eps < 0) invalid(fmt::format("layer_norm: eps is {}; it must not be negative", eps));
    if (in.numel() == 0) return queue_empty_op(queue, sync);
    auto reason = norm_on_device(queue, sync, true, o, in, w, b, m, r, s, eps);
    if (!reason) return;
    const int64_t n = normalized_ndim;
    const bool want_mean = m.present(), want_rstd = r.present();
    run_on_host(queue, sync, "layer_norm", signature_of({&in, &w, &b}, {&o, &m, &r}), *reason,
                {in, w, b}, {o, m, r}, [n, eps, want_mean, want_rstd](const Arrays &a) {
                  host::NormResult res =
                      host::layer_norm(a[0], n, optional_input(a, 1), optional_input(a, 2), eps);
                  Arrays outs = {res.out};
                  if (want_mean) outs.push_back(res.mean);
                  if (want_rstd) outs.push_back(res.rstd);
                  return outs;
                });
  });
}

TRN_OPS_API trn_result_t trn_ops_layer_norm_backward(
    trn_queue_t queue, const trn_ops_tensor_t *grad_x, const trn_ops_tensor_t *grad_weight,
    const trn_ops_tensor_t *grad_bias, const trn_ops_tensor_t *grad_out, const trn_ops_tensor_t *x,
    const trn_ops_tensor_t *mean, const trn_ops_tensor_t *rstd, const trn_ops_tensor_t *weight,
    uint32_t normalized_ndim, const trn_sync_t *sync) {
  return run_op("trn_ops_layer_norm_backward", queue, [&] {
    const Tensor gx = tensor_arg(grad_x, "grad_x", true),
                 gw = tensor_arg(grad_weight, "grad_weight", true),
                 gb = tensor_arg(grad_bias, "grad_bias", true),
                 g = tensor_arg(grad_out, "grad_out"), in = tensor_arg(x, "x"),
                 m = tensor_arg(mean, "mean"), r = tensor_arg(rstd, "rstd"),
                 w = tensor_arg(weight, "weight", true);
    const char *op = "layer_norm_backward";
    const NormShapes s = norm_shapes(in, normalized_ndim, op);
    check_shape(g, in.shape, "grad_out", op);
    check_optional(gx, in.shape, "grad_x", op);
    check_optional(gw, s.normalized, "grad_weight", op);
    check_optional(gb, s.normalized, "grad_bias", op);
    check_shape(m, s.stats, "mean", op);
    check_shape(r, s.stats, "rstd", op);
    check_optional(w, s.normalized, "weight", op);
    if (gw.present() && !w.present())
      invalid("layer_norm_backward: grad_weight needs the weight the forward used");
    check_same_device({&g, &gx, &gw, &gb, &in, &m, &r, &w}, op);
    check_overlap({&gx, &gw, &gb}, {&g, &in, &m, &r, &w}, op, false);
    if (!gx.present() && !gw.present() && !gb.present()) return queue_empty_op(queue, sync);
    std::optional<std::string> reason =
        norm_backward_on_device(queue, sync, true, gx, gw, gb, g, in, m, r, w, s);
    if (!reason) return;
    const int64_t n = normalized_ndim;
    const bool want_x = gx.present(), want_w = gw.present(), want_b = gb.present();
    run_on_host(queue, sync, op, signature_of({&g, &in, &m, &r, &w}, {&gx, &gw, &gb}), *reason,
                {g, in, m, r, w}, {gx, gw, gb}, [=](const Arrays &a) {
                  host::NormGrads res = host::layer_norm_backward(a[0], a[1], a[2], a[3], n,
                                                                  optional_input(a, 4), want_b);
                  Arrays outs;
                  if (want_x) outs.push_back(res.grad_x);
                  if (want_w) outs.push_back(res.grad_weight);
                  if (want_b) outs.push_back(res.grad_bias);
                  return outs;
                });
  });
}

TRN_OPS_API trn_result_t trn_ops_rms_norm(trn_queue_t queue, const trn_ops_tensor_t *out,
                                          const trn_ops_tensor_t *rstd, const trn_ops_tensor_t *x,
                                          const trn_ops_tensor_t *weight, uint32_t normalized_ndim,
                                          double eps, const trn_sync_t *sync) {
  return run_op("trn_ops_rms_norm", queue, [&] {
    const Tensor o = tensor_arg(out, "out"), r = tensor_arg(rstd, "rstd", true),
                 in = tensor_arg(x, "x"), w = tensor_arg(weight, "weight", true);
    const NormShapes s = norm_shapes(in, normalized_ndim, "rms_norm");
    check_shape(o, in.shape, "out", "rms_norm");
    check_optional(r, s.stats, "rstd", "rms_norm");
    check_optional(w, s.normalized, "weight", "rms_norm");
    check_same_device({&o, &r, &in, &w}, "rms_norm");
    check_overlap({&o, &r}, {&in, &w}, "rms_norm", false);
    if (eps < 0) invalid(fmt::format("rms_norm: eps is {}; it must not be negative", eps));
    if (in.numel() == 0) return queue_empty_op(queue, sync);
    const Tensor none;
    auto reason = norm_on_device(queue, sync, false, o, in, w, none, none, r, s, eps);
    if (!reason) return;
    const int64_t n = normalized_ndim;
    const bool want_rstd = r.present();
    run_on_host(queue, sync, "rms_norm", signature_of({&in, &w}, {&o, &r}), *reason, {in, w},
                {o, r}, [n, eps, want_rstd](const Arrays &a) {
                  host::NormResult res = host::rms_norm(a[0], n, optional_input(a, 1), eps);
                  Arrays outs = {res.out};
                  if (want_rstd) outs.push_back(res.rstd);
                  return outs;
                });
  });
}

TRN_OPS_API trn_result_t trn_ops_rms_norm_backward(
    trn_queue_t queue, const trn_ops_tensor_t *grad_x, const trn_ops_tensor_t *grad_weight,
    const trn_ops_tensor_t *grad_out, const trn_ops_tensor_t *x, const trn_ops_tensor_t *rstd,
    const trn_ops_tensor_t *weight, uint32_t normalized_ndim, const trn_sync_t *sync) {
  return run_op("trn_ops_rms_norm_backward", queue, [&] {
    const Tensor gx = tensor_arg(grad_x, "grad_x", true),
                 gw = tensor_arg(grad_weight, "grad_weight", true),
                 g = tensor_arg(grad_out, "grad_out"), in = tensor_arg(x, "x"),
                 r = tensor_arg(rstd, "rstd"), w = tensor_arg(weight, "weight", true);
    const char *op = "rms_norm_backward";
    const NormShapes s = norm_shapes(in, normalized_ndim, op);
    check_shape(g, in.shape, "grad_out", op);
    check_optional(gx, in.shape, "grad_x", op);
    check_optional(gw, s.normalized, "grad_weight", op);
    check_shape(r, s.stats, "rstd", op);
    check_optional(w, s.normalized, "weight", op);
    if (gw.present() && !w.present())
      invalid("rms_norm_backward: grad_weight needs the weight the forward used");
    check_same_device({&g, &gx, &gw, &in, &r, &w}, op);
    check_overlap({&gx, &gw}, {&g, &in, &r, &w}, op, false);
    if (!gx.present() && !gw.present()) return queue_empty_op(queue, sync);
    const Tensor none;
    std::optional<std::string> reason =
        norm_backward_on_device(queue, sync, false, gx, gw, none, g, in, none, r, w, s);
    if (!reason) return;
    const int64_t n = normalized_ndim;
    const bool want_x = gx.present(), want_w = gw.present();
    run_on_host(queue, sync, op, signature_of({&g, &in, &r, &w}, {&gx, &gw}), *reason,
                {g, in, r, w}, {gx, gw}, [=](const Arrays &a) {
                  host::NormGrads res =
                      host::rms_norm_backward(a[0], a[1], a[2], n, optional_input(a, 3));
                  Arrays outs;
                  if (want_x) outs.push_back(res.grad_x);
                  if (want_w) outs.push_back(res.grad_weight);
                  return outs;
                });
  });
}

}  // extern "C"
