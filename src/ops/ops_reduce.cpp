// Reductions (sum, mean, max, min, argmax, argmin over dims) and softmax / log_softmax with their
// backward. On the device: reductions over trailing or leading dims of a contiguous tensor (the
// builder's row and column reductions), softmax over the last dim; the rest on the host.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>

#include "kbuild/kernels/reduce.hpp"
#include "kbuild/kernels/softmax.hpp"
#include "ops/config.hpp"
#include "ops/error.hpp"
#include "ops/expression_op.hpp"
#include "ops/host/integer.hpp"
#include "ops/host_path.hpp"
#include "ops/kernel_op.hpp"
#include "ops/kernels/arg_extreme.hpp"
#include "ops/kernels/log_softmax.hpp"
#include "ops/kernels/softmax_grad.hpp"
#include "ops/op_support.hpp"
#include "ops/staging.hpp"

namespace trn::ops {

namespace {

// The ops trn_ops_reduce computes, as the host reference numbers them; none for PROD, which
// has neither a device kernel nor a host form, and for values outside the enum.
std::optional<host::Reduce> host_reduce(trn_reduce_op_t op) {
  switch (op) {
    case TRN_REDUCE_SUM: return host::Reduce::kSum;
    case TRN_REDUCE_AVG: return host::Reduce::kMean;
    case TRN_REDUCE_MAX: return host::Reduce::kMax;
    case TRN_REDUCE_MIN: return host::Reduce::kMin;
    case TRN_REDUCE_ARGMAX: return host::Reduce::kArgmax;
    case TRN_REDUCE_ARGMIN: return host::Reduce::kArgmin;
    default: return std::nullopt;
  }
}

// The op's name in messages and fallback records: PyTorch's, so AVG is "mean" (torch.mean) as
// it was before the ops shared trn_reduce_op_t.
const char *op_name(trn_reduce_op_t op) {
  return op == TRN_REDUCE_AVG ? "mean" : trn_reduce_op_name(op);
}

isa::DType device_dtype(trn_dtype_t t) {
  return static_cast<isa::DType>(t);
}

// The reduced dims, in order, without repeats; every dim when none are given.
std::vector<int64_t> reduced_dims(const Tensor &x, const int64_t *dims, uint32_t count,
                                  bool single) {
  if (count && !dims) fail(TRN_ERROR_NULL_POINTER, "dims is NULL with a dim_count above 0");
  if (single && count > 1)
    invalid(fmt::format("argmax and argmin take one dim or none, not {}", count));
  std::set<int64_t> set;
  for (uint32_t i = 0; i < count; ++i) {
    const int64_t d = normalize_dim(dims[i], x.rank(), "reduce");
    if (!set.insert(d).second) invalid(fmt::format("reduce: dim {} is given twice", dims[i]));
  }
  if (!count)
    for (int64_t d = 0; d < x.rank(); ++d) set.insert(d);
  return {set.begin(), set.end()};
}

Shape reduced_shape(const Tensor &x, const std::vector<int64_t> &dims, bool keepdim) {
  Shape out;
  for (int64_t d = 0; d < x.rank(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced)
      out.push_back(x.shape[d]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

// argmax or argmin on the device (kernels/arg_extreme.hpp): a float x, reduced along its last dim
// or over every dim (one row), into int64 or int32 indices. nullopt when queued, else why not.
std::optional<std::string> arg_extreme_on_device(trn_queue_t queue, Staging &staging,
                                                 trn_reduce_op_t op, const Tensor &o,
                                                 const Tensor &x, const std::vector<int64_t> &dims,
                                                 bool every_dim) {
  if (config().host_only) return "TRN_OPS_HOST_ONLY is set";
  if (!dtype_on_device(x.dtype) || !dtype_is_float(x.dtype))
    return fmt::format("{} is not a float tensor of the device's", x.describe());
  if (o.dtype != TRN_DTYPE_I64 && o.dtype != TRN_DTYPE_I32)
    return fmt::format("indices into {} (the device writes i64 or i32)", o.describe());
  if (!o.contiguous()) return fmt::format("the output {} is not contiguous", o.describe());
  const bool last = x.rank() == 0 || (dims.size() == 1 && dims[0] == x.rank() - 1);
  if (!every_dim && !last)
    return "a dim other than the last (the device kernel reduces the last dim: pass a view with "
           "this dim moved last)";
  const uint64_t n = static_cast<uint64_t>(x.numel());
  kernels::ArgExtremeConfig c;
  c.cols = every_dim || x.rank() == 0 ? n : static_cast<uint64_t>(x.shape.back());
  c.rows = n / c.cols;
  if (c.cols > (uint64_t{1} << 24)) return "over 2^24 elements along the dim: fp32 indices round";
  c.dtype = device_dtype(x.dtype);
  c.largest = op == TRN_REDUCE_ARGMAX;
  c.int64 = o.dtype == TRN_DTYPE_I64;
  const Tensor xc = staging.contiguous(x);
  return try_device([&] {
    launch_kernels(queue, staging.op_sync(), o.device_index,
                   {{kernels::arg_extreme_signature(c),
                     [c](const kbuild::BuildTarget &t) mutable {
                       c.target = t;
                       return kernels::build_arg_extreme(c);
                     },
                     {bind(xc), bind(o)}}});
  });
}

}  // namespace

}  // namespace trn::ops

using namespace trn;
using namespace trn::ops;

extern "C" {

TRN_OPS_API const char *trn_ops_reduce_op_name(trn_ops_reduce_op_t op) {
  return trn_reduce_op_name(op);
}

TRN_OPS_API trn_result_t trn_ops_reduce(trn_queue_t queue, trn_ops_reduce_op_t op,
                                        const trn_ops_tensor_t *out, const trn_ops_tensor_t *x,
                                        const int64_t *dims, uint32_t dim_count, int keepdim,
                                        const trn_sync_t *sync) {
  return run_op("trn_ops_reduce", queue, [&] {
    const std::optional<host::Reduce> host_op = host_reduce(op);
    if (!host_op)
      fail(TRN_ERROR_INVALID_ENUM,
           fmt::format("op {} ({}) is not one trn_ops_reduce computes: use TRN_REDUCE_SUM, _AVG, "
                       "_MAX, _MIN, _ARGMAX or _ARGMIN",
                       static_cast<int>(op), trn_reduce_op_name(op)));
    const Tensor o = tensor_arg(out, "out");
    Tensor in = tensor_arg(x, "x");
    const char *name = op_name(op);
    const bool index_op = op == TRN_OPS_ARGMAX || op == TRN_OPS_ARGMIN;
    const std::vector<int64_t> reduced = reduced_dims(in, dims, dim_count, index_op);
    check_shape(o, reduced_shape(in, reduced, keepdim != 0), "out", name);
    if (index_op && dtype_is_float(o.dtype))
      invalid(
          fmt::format("{}: out {} holds indices: give it an integer dtype (i64, as PyTorch's "
                      "argmax returns, or i32)",
                      name, o.describe()));
    check_same_device({&o, &in}, name);
    check_overlap({&o}, {&in}, name, false);
    // As PyTorch: a max of nothing is refused, but an empty x whose reduced dims are not empty
    // reduces to an empty output.
    if (in.numel() == 0 && op != TRN_OPS_SUM && op != TRN_OPS_MEAN)
      for (int64_t d : reduced)
        if (in.shape[d] == 0)
          invalid(
              fmt::format("{}: x {} is empty along dim {}, which it reduces: a {} of no "
                          "elements is undefined (sum and mean of none are 0 and NaN); reduce "
                          "over other dims, or test for empty input first",
                          name, in.describe(), d, name));
    if (o.numel() == 0) return queue_empty_op(queue, sync);

    // The device reduces a contiguous [rows, cols] along one axis: trailing dims (axis 1) or
    // leading dims (axis 0).
    Staging staging(queue, sync);
    const Tensor in_view = in;
    std::optional<std::string> reason;
    if (index_op) {
      reason = arg_extreme_on_device(queue, staging, op, o, in_view, reduced, dim_count == 0);
      if (!reason) return;
    }
    if (!host_reason({&o}, false) && !index_op) in = staging.contiguous(in_view);
    const trn_sync_t *op_sync = staging.op_sync();
    if (!reason) reason = host_reason({&in, &o}, false);
    uint32_t axis = 1;
    uint64_t rows = 1, cols = 1;
    if (!reason && (!dtype_is_float(in.dtype) || !dtype_is_float(o.dtype)))
      reason = "integer reductions must be exact; the device computes in fp32";
    if (!reason && in.numel() == 0) reason = "an empty reduction";
    if (!reason && op == TRN_OPS_MEAN && o.dtype != TRN_DTYPE_F32)
      reason = "a mean into a narrow dtype (the sum could overflow it before it is scaled)";
    if (!reason) {
      const int64_t n = in.rank(), k = std::min<int64_t>(static_cast<int64_t>(reduced.size()), n);
      const bool suffix = k == 0 || (reduced.front() == n - k && reduced.back() == n - 1);
      const bool prefix = k > 0 && reduced.front() == 0 && reduced.back() == k - 1;
      if (suffix) {
        for (int64_t d = 0; d < n - k; ++d) rows *= in.shape[d];
        cols = static_cast<uint64_t>(in.numel()) / rows;
      } else if (prefix) {
        axis = 0;
        for (int64_t d = 0; d < k; ++d) rows *= in.shape[d];
        cols = static_cast<uint64_t>(in.numel()) / rows;
      } else {
        reason = "a reduction over dims that are neither leading nor trailing";
      }
    }
    if (!reason)
      reason = try_device([&] {
        kbuild::ReduceConfig c;
        c.rows = rows;
        c.cols = cols;
        c.axis = axis;
        c.dtype = device_dtype(in.dtype);
        c.out_dtype = device_dtype(o.dtype);
        c.op = op == TRN_OPS_MAX   ? isa::AluOp::kMax
               : op == TRN_OPS_MIN ? isa::AluOp::kMin
                                   : isa::AluOp::kAdd;
        std::vector<KernelLaunch> launches;
        launches.push_back(
            {fmt::format("reduce {} axis{} [{}, {}] {}>{}", isa::alu_op_name(c.op), axis, rows,
                         cols, dtype_name(in.dtype), dtype_name(o.dtype)),
             [c](const kbuild::BuildTarget &t) mutable {
               c.target = t;
               return kbuild::build_reduce(c);
             },
             {bind(in), bind(o)}});
        Commands commands(queue, op_sync);
        add_kernels(commands, o.device_index, launches);
        if (op == TRN_OPS_MEAN) {
          // The sum, scaled in place by 1 / n (a launch argument: one kernel for every n).
          ExpressionOp scale;
          scale.name = "mean_scale";
          scale.inputs = {&o};
          scale.scalars = {static_cast<float>(1.0 / static_cast<double>(axis ? cols : rows))};
          scale.outputs = {{&o, scale.alu_scalar(isa::AluOp::kMultiply, 0, 0), 0}};
          add_expression(commands, scale, *plan_elementwise(o.shape, {&o}));
        }
        commands.submit();
      });
    if (reason && host::has_integer_form(*host_op) && all_integer({in}, o))
      return run_integer_reduce(queue, op_sync, name, signature_of({&in}, {&o}), *reason, in, o,
                                *host_op, dim_count == 0 ? std::vector<int64_t>{} : reduced);
    if (reason) {
      const std::vector<int64_t> d = reduced;
      const bool all = dim_count == 0, keep = keepdim != 0;
      run_on_host(queue, op_sync, name, signature_of({&in}, {&o}), *reason, {in}, {o},
                  [h = *host_op, d, all, keep](const Arrays &a) {
                    return Arrays{host::reduce(h, a[0], all ? std::vector<int64_t>{} : d, keep)};
                  });
      return;
    }
  });
}

TRN_OPS_API trn_result_t trn_ops_softmax(trn_queue_t queue, const trn_ops_tensor_t *out,
                                         const trn_ops_tensor_t *x, int64_t dim, int log,
                                         const trn_sync_t *sync) {
  return run_op("trn_ops_softmax", queue, [&] {
    const Tensor o = tensor_arg(out, "out");
    Tensor in = tensor_arg(x, "x");
    const char *name = log ? "log_softmax" : "softmax";
    check_shape(o, in.shape, "out", name);
    const int64_t d = normalize_dim(dim, in.rank(), name);
    check_same_device({&o, &in}, name);
    check_overlap({&o}, {&in}, name, true);  // each row is read whole before it is written
    if (o.numel() == 0) return queue_empty_op(queue, sync);
    Staging staging(queue, sync);
    const Tensor in_view = in;
    if (!host_reason({&o}, false)) in = staging.contiguous(in_view);
    const trn_sync_t *op_sync = staging.op_sync();
    std::optional<std::string> reason = host_reason({&in, &o}, false);
    if (!reason && in.rank() > 0 && d != in.rank() - 1)
      reason = "softmax over a dim other than the last";
    if (!reason && (!dtype_is_float(in.dtype) || !dtype_is_float(o.dtype)))
      reason = "softmax of integers";
    const uint64_t cols = in.rank() ? static_cast<uint64_t>(in.shape[d]) : 1;
    if (!reason)
      reason = try_device([&] {
        kbuild::SoftmaxConfig c;
        c.rows = static_cast<uint64_t>(in.numel()) / cols;
        c.cols = cols;
        c.dtype = device_dtype(in.dtype);
        c.out_dtype = device_dtype(o.dtype);
        launch_kernels(queue, op_sync, o.device_index,
                       {{fmt::format("{} [{}, {}] {}>{}", name, c.rows, cols, dtype_name(in.dtype),
                                     dtype_name(o.dtype)),
                         [c, log](const kbuild::BuildTarget &t) mutable {
                           c.target = t;
                           return log ? kernels::build_log_softmax(c.rows, c.cols, c.dtype,
                                                                   c.out_dtype, t)
                                      : kbuild::build_softmax(c);
                         },
                         {bind(in), bind(o)}}});
      });
    if (reason) {
      const bool l = log != 0;
      run_on_host(queue, op_sync, name, signature_of({&in}, {&o}), *reason, {in}, {o},
                  [d, l](const Arrays &a) { return Arrays{host::softmax(a[0], d, l)}; });
      return;
    }
  });
}

TRN_OPS_API trn_result_t trn_ops_softmax_backward(trn_queue_t queue, const trn_ops_tensor_t *grad_x,
                                                  const trn_ops_tensor_t *grad_out,
                                                  const trn_ops_tensor_t *out, int64_t dim, int log,
                                                  const trn_sync_t *sync) {
  return run_op("trn_ops_softmax_backward", queue, [&] {
    const Tensor gx = tensor_arg(grad_x, "grad_x"), g = tensor_arg(grad_out, "grad_out"),
                 y = tensor_arg(out, "out");
    const char *name = log ? "log_softmax_backward" : "softmax_backward";
    check_shape(g, gx.shape, "grad_out", name);
    check_shape(y, gx.shape, "out", name);
    const int64_t d = normalize_dim(dim, gx.rank(), name);
    check_same_device({&gx, &g, &y}, name);
    check_overlap({&gx}, {&g, &y}, name, true);
    if (gx.numel() == 0) return queue_empty_op(queue, sync);
    std::optional<std::string> reason = host_reason({&g, &y, &gx}, false);
    if (!reason && gx.rank() > 0 && d != gx.rank() - 1)
      reason = "softmax over a dim other than the last";
    if (!reason && (g.dtype != y.dtype || !dtype_is_float(g.dtype) || !dtype_is_float(gx.dtype)))
      reason = "grad_out and out of different or integer dtypes";
    const bool l = log != 0;
    if (!reason)
      reason = try_device([&] {
        const uint64_t cols = gx.rank() ? static_cast<uint64_t>(gx.shape[d]) : 1;
        const uint64_t rows = static_cast<uint64_t>(gx.numel()) / cols;
        const isa::DType dt = device_dtype(g.dtype), gdt = device_dtype(gx.dtype);
        launch_kernels(queue, sync, gx.device_index,
                       {{fmt::format("{} [{}, {}] {}>{}", name, rows, cols, dtype_name(g.dtype),
                                     dtype_name(gx.dtype)),
                         [rows, cols, l, dt, gdt](const kbuild::BuildTarget &t) {
                           return kernels::build_softmax_backward(rows, cols, l, dt, gdt, t);
                         },
                         {bind(g), bind(y), bind(gx)}}});
      });
    if (!reason) return;
    run_on_host(
        queue, sync, name, signature_of({&g, &y}, {&gx}), *reason, {g, y}, {gx},
        [d, l](const Arrays &a) { return Arrays{host::softmax_backward(a[0], a[1], d, l)}; });
  });
}

}  // extern "C"
