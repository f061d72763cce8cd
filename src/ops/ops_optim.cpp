// The fused optimizer steps: torch.optim.SGD (momentum, dampening, Nesterov, weight decay) and
// Adam / AdamW (amsgrad, maximize), one expression kernel per parameter that reads the gradient
// and state once and writes the parameter and state in place. The hyperparameters are launch
// arguments: a learning-rate schedule or a new step count reuses the same kernel.
#include <fmt/format.h>

#include <cmath>

#include "ops/expression_op.hpp"
#include "ops/host_path.hpp"
#include "ops/op_support.hpp"

namespace trn::ops {

namespace {

using isa::ActFunc;
using isa::AluOp;

// The tensors of a step, by name: the parameter, then the gradient, then the state, all of the
// parameter's shape (and contiguous for the device). The parameter and the state are updated in
// place: none may share memory with another, nor with the gradient.
using NamedTensors = std::vector<std::pair<const char *, const Tensor *>>;

std::vector<const Tensor *> tensors_of(const NamedTensors &named) {
  std::vector<const Tensor *> out;
  for (const auto &entry : named) out.push_back(entry.second);
  return out;
}

std::optional<std::string> optimizer_reason(const NamedTensors &named, const char *op) {
  const std::vector<const Tensor *> tensors = tensors_of(named);
  std::vector<const Tensor *> updated;
  for (const auto &[name, t] : named) {
    if (t != named[1].second) updated.push_back(t);
    if (t->present()) check_shape(*t, named.front().second->shape, name, op);
  }
  check_same_device(tensors, op);
  check_overlap(updated, {named[1].second}, op, false);
  if (auto r = host_reason(tensors, false)) return r;
  for (const Tensor *t : tensors)
    if (t->present() && !dtype_is_float(t->dtype))
      return fmt::format("{} is not a float tensor", t->describe());
  return std::nullopt;
}

ElementwisePlan flat_plan(const Tensor &param, size_t inputs) {
  std::vector<const Tensor *> same(inputs, &param);
  return *plan_elementwise(param.shape, same);
}

}  // namespace

}  // namespace trn::ops

using namespace trn;
using namespace trn::ops;

extern "C" {

TRN_OPS_API trn_result_t trn_ops_sgd_step(trn_queue_t queue, const trn_ops_tensor_t *param,
                                          const trn_ops_tensor_t *grad,
                                          const trn_ops_tensor_t *momentum_buf, int first_step,
                                          const trn_ops_sgd_params_t *params,
                                          const trn_sync_t *sync) {
  return run_op("trn_ops_sgd_step", queue, [&] {
    if (!params) fail(TRN_ERROR_NULL_POINTER, "params is NULL");
    const trn_ops_sgd_params_t hp = *params;
    const Tensor p = tensor_arg(param, "param"), g = tensor_arg(grad, "grad");
    const Tensor buf = tensor_arg(momentum_buf, "momentum_buf", hp.momentum == 0.0);
    if (hp.nesterov && (hp.momentum <= 0.0 || hp.dampening != 0.0))
      invalid("sgd_step: Nesterov momentum needs a momentum and zero dampening");
    if (hp.lr < 0.0) invalid(fmt::format("sgd_step: lr is {}; it must not be negative", hp.lr));
    const bool momentum = hp.momentum != 0.0;
    NamedTensors named = {{"param", &p}, {"grad", &g}};
    if (momentum) named.push_back({"momentum_buf", &buf});
    const std::vector<const Tensor *> tensors = tensors_of(named);
    std::optional<std::string> reason = optimizer_reason(named, "sgd_step");
    if (p.numel() == 0) return queue_empty_op(queue, sync);
    if (!reason)
      reason = try_device([&] {
        // Values: 0 param, 1 grad, 2 buf; scalars: lr, weight decay, momentum, 1 - dampening.
        ExpressionOp e;
        e.name =
            fmt::format("sgd{}{}{}{}", momentum ? "_momentum" : "", hp.nesterov ? "_nesterov" : "",
                        hp.weight_decay != 0.0 ? "_wd" : "", hp.maximize ? "_max" : "");
        e.inputs = tensors;
        e.scalars = {static_cast<float>(hp.lr), static_cast<float>(hp.weight_decay),
                     static_cast<float>(hp.momentum), static_cast<float>(1.0 - hp.dampening)};
        uint16_t d = hp.maximize ? e.alu_constant(AluOp::kMultiply, 1, -1.0f) : uint16_t{1};
        if (hp.weight_decay != 0.0) d = e.alu(AluOp::kAdd, d, e.alu_scalar(AluOp::kMultiply, 0, 1));
        if (momentum) {
          uint16_t b = d;
          if (!first_step)
            b = e.alu(AluOp::kAdd, e.alu_scalar(AluOp::kMultiply, 2, 2),
                      e.alu_scalar(AluOp::kMultiply, d, 3));
          e.outputs.push_back({&buf, b, 2});
          d = hp.nesterov ? e.alu(AluOp::kAdd, d, e.alu_scalar(AluOp::kMultiply, b, 2)) : b;
        }
        const uint16_t updated = e.alu(AluOp::kSubtract, 0, e.alu_scalar(AluOp::kMultiply, d, 0));
        e.outputs.insert(e.outputs.begin(), {&p, updated, 0});
        if (first_step && momentum) e.name += "_first";
        launch_expression(queue, sync, e, flat_plan(p, e.inputs.size()));
      });
    if (reason) {
      host::SgdParams h;
      h.lr = hp.lr;
      h.momentum = hp.momentum;
      h.dampening = hp.dampening;
      h.weight_decay = hp.weight_decay;
      h.nesterov = hp.nesterov;
      h.maximize = hp.maximize;
      std::vector<Tensor> in = {p, g}, out = {p};
      if (momentum) {
        in.push_back(buf);
        out.push_back(buf);
      }
      const bool first = first_step != 0;
      run_on_host(queue, sync, "sgd_step", signature_of(tensors, {&p}), *reason, in, out,
                  [h, momentum, first](const Arrays &a) {
                    host::Array updated = a[0];
                    host::Array state = momentum ? a[2] : host::Array{};
                    host::sgd_step(updated, a[1], momentum ? &state : nullptr, first, h);
                    return momentum ? Arrays{updated, state} : Arrays{updated};
                  });
    }
  });
}

TRN_OPS_API trn_result_t trn_ops_adam_step(trn_queue_t queue, const trn_ops_tensor_t *param,
                                           const trn_ops_tensor_t *grad,
                                           const trn_ops_tensor_t *exp_avg,
                                           const trn_ops_tensor_t *exp_avg_sq,
                                           const trn_ops_tensor_t *max_exp_avg_sq, int64_t step,
                                           const trn_ops_adam_params_t *params,
                                           const trn_sync_t *sync) {
  return run_op("trn_ops_adam_step", queue, [&] {
    if (!params) fail(TRN_ERROR_NULL_POINTER, "params is NULL");
    const trn_ops_adam_params_t hp = *params;
    const Tensor p = tensor_arg(param, "param"), g = tensor_arg(grad, "grad"),
                 m = tensor_arg(exp_avg, "exp_avg"), v = tensor_arg(exp_avg_sq, "exp_avg_sq"),
                 vmax = tensor_arg(max_exp_avg_sq, "max_exp_avg_sq", !hp.amsgrad);
    if (step < 1) invalid(fmt::format("adam_step: step is {}; steps count from 1", step));
    if (hp.beta1 < 0.0 || hp.beta1 >= 1.0 || hp.beta2 < 0.0 || hp.beta2 >= 1.0)
      invalid(fmt::format("adam_step: betas ({}, {}) must be in [0, 1)", hp.beta1, hp.beta2));
    if (hp.lr < 0.0 || hp.eps < 0.0)
      invalid(
          fmt::format("adam_step: lr is {} and eps {}; neither may be negative", hp.lr, hp.eps));
    NamedTensors named = {{"param", &p}, {"grad", &g}, {"exp_avg", &m}, {"exp_avg_sq", &v}};
    if (hp.amsgrad) named.push_back({"max_exp_avg_sq", &vmax});
    const std::vector<const Tensor *> tensors = tensors_of(named);
    std::optional<std::string> reason = optimizer_reason(named, "adam_step");
    if (p.numel() == 0) return queue_empty_op(queue, sync);
    const bool decoupled = hp.decoupled_weight_decay != 0, wd = hp.weight_decay != 0.0;
    if (!reason)
      reason = try_device([&] {
        // torch.optim.Adam: step_size = lr / (1 - beta1^t); denom = sqrt(v) / sqrt(1 - beta2^t) +
        // eps.
        const double bc1 = 1.0 - std::pow(hp.beta1, static_cast<double>(step));
        const double bc2 = 1.0 - std::pow(hp.beta2, static_cast<double>(step));
        ExpressionOp e;
        e.name = fmt::format("adam{}{}{}",
                             decoupled && wd ? "w"
                             : wd            ? "_l2"
                                             : "",
                             hp.amsgrad ? "_amsgrad" : "", hp.maximize ? "_max" : "");
        e.inputs = tensors;
        // Scalars: 0 decay (1 - lr wd for AdamW, wd for L2), 1 beta1, 2 1-beta1, 3 beta2,
        // 4 1-beta2, 5 1/sqrt(bc2), 6 eps, 7 step size.
        e.scalars = {
            static_cast<float>(decoupled ? 1.0 - hp.lr * hp.weight_decay : hp.weight_decay),
            static_cast<float>(hp.beta1),
            static_cast<float>(1.0 - hp.beta1),
            static_cast<float>(hp.beta2),
            static_cast<float>(1.0 - hp.beta2),
            static_cast<float>(1.0 / std::sqrt(bc2)),
            static_cast<float>(hp.eps),
            static_cast<float>(hp.lr / bc1)};
        uint16_t d = hp.maximize ? e.alu_constant(AluOp::kMultiply, 1, -1.0f) : uint16_t{1};
        uint16_t p0 = 0;
        if (wd && decoupled) p0 = e.alu_scalar(AluOp::kMultiply, 0, 0);
        if (wd && !decoupled) d = e.alu(AluOp::kAdd, d, e.alu_scalar(AluOp::kMultiply, 0, 0));
        const uint16_t m1 = e.alu(AluOp::kAdd, e.alu_scalar(AluOp::kMultiply, 2, 1),
                                  e.alu_scalar(AluOp::kMultiply, d, 2));
        const uint16_t v1 = e.alu(AluOp::kAdd, e.alu_scalar(AluOp::kMultiply, 3, 3),
                                  e.alu_scalar(AluOp::kMultiply, e.alu(AluOp::kMultiply, d, d), 4));
        uint16_t second = v1;
        if (hp.amsgrad) second = e.alu(AluOp::kMax, 4, v1);
        const uint16_t denom = e.alu_scalar(
            AluOp::kAdd, e.alu_scalar(AluOp::kMultiply, e.act(ActFunc::kSqrt, second), 5), 6);
        const uint16_t update = e.alu_scalar(AluOp::kMultiply, e.alu(AluOp::kDivide, m1, denom), 7);
        e.outputs = {{&p, e.alu(AluOp::kSubtract, p0, update), 0}, {&m, m1, 2}, {&v, v1, 3}};
        if (hp.amsgrad) e.outputs.push_back({&vmax, second, 4});
        launch_expression(queue, sync, e, flat_plan(p, e.inputs.size()));
      });
    if (reason) {
      host::AdamParams h;
      h.lr = hp.lr;
      h.beta1 = hp.beta1;
      h.beta2 = hp.beta2;
      h.eps = hp.eps;
      h.weight_decay = hp.weight_decay;
      h.decoupled = decoupled;
      h.amsgrad = hp.amsgrad;
      h.maximize = hp.maximize;
      std::vector<Tensor> in = {p, g, m, v}, out = {p, m, v};
      if (hp.amsgrad) {
        in.push_back(vmax);
        out.push_back(vmax);
      }
      run_on_host(
          queue, sync, "adam_step", signature_of(tensors, {&p}), *reason, in, out,
          [h, step](const Arrays &a) {
            host::Array updated = a[0], avg = a[2], avg_sq = a[3];
            host::Array max_sq = a.size() > 4 ? a[4] : host::Array{};
            host::adam_step(updated, a[1], avg, avg_sq, h.amsgrad ? &max_sq : nullptr, step, h);
            return h.amsgrad ? Arrays{updated, avg, avg_sq, max_sq} : Arrays{updated, avg, avg_sq};
          });
    }
  });
}

}  // extern "C"
