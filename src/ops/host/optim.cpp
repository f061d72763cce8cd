// torch.optim.SGD and Adam/AdamW single-parameter steps, following torch's single-tensor code.
#include <cmath>
#include <string>

#include "ops/host/internal.hpp"
#include "ops/host/reference.hpp"

namespace trn::ops::host {

using namespace detail;

namespace {

void check_state(const std::string &op, const Array &param, const char *name, const Array &a) {
  check_array(op, name, a);
  check_same_shape(op, name, a.shape, "param", param.shape);
}

// torch.lerp's formula (exp_avg.lerp_(grad, 1 - beta1)), which rounds differently from
// beta1 * m + (1 - beta1) * g.
double torch_lerp(double start, double end, double weight) {
  return weight < 0.5 ? start + weight * (end - start) : end - (end - start) * (1.0 - weight);
}

}  // namespace

void sgd_step(Array &param, const Array &grad, Array *momentum_buf, bool first_step,
              const SgdParams &p) {
  const std::string op = "sgd_step";
  check_array(op, "param", param);
  check_state(op, param, "grad", grad);
  if (p.nesterov && (p.momentum <= 0 || p.dampening != 0)) {
    fail(op, "nesterov needs momentum > 0 and dampening == 0 (got momentum " +
                 std::to_string(p.momentum) + ", dampening " + std::to_string(p.dampening) + ")");
  }
  if (p.momentum != 0) {
    if (momentum_buf == nullptr) fail(op, "momentum is nonzero but momentum_buf is null");
    if (first_step) {
      *momentum_buf = Array::zeros(param.shape);
    } else {
      check_state(op, param, "momentum_buf", *momentum_buf);
    }
  }
  for (size_t i = 0; i < param.data.size(); ++i) {
    double g = p.maximize ? -grad.data[i] : grad.data[i];
    if (p.weight_decay != 0) g += p.weight_decay * param.data[i];
    if (p.momentum != 0) {
      double &buf = momentum_buf->data[i];
      buf = first_step ? g : p.momentum * buf + (1.0 - p.dampening) * g;
      g = p.nesterov ? g + p.momentum * buf : buf;
    }
    param.data[i] -= p.lr * g;
  }
}

void adam_step(Array &param, const Array &grad, Array &exp_avg, Array &exp_avg_sq,
               Array *max_exp_avg_sq, int64_t step, const AdamParams &p) {
  const std::string op = p.decoupled ? "adamw_step" : "adam_step";
  check_array(op, "param", param);
  check_state(op, param, "grad", grad);
  check_state(op, param, "exp_avg", exp_avg);
  check_state(op, param, "exp_avg_sq", exp_avg_sq);
  if (p.amsgrad) {
    if (max_exp_avg_sq == nullptr) fail(op, "amsgrad needs max_exp_avg_sq, which is null");
    check_state(op, param, "max_exp_avg_sq", *max_exp_avg_sq);
  }
  if (step < 1) fail(op, "step " + std::to_string(step) + " must be at least 1");
  const double bias_correction1 = 1.0 - std::pow(p.beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(p.beta2, static_cast<double>(step));
  const double step_size = p.lr / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);
  for (size_t i = 0; i < param.data.size(); ++i) {
    double g = p.maximize ? -grad.data[i] : grad.data[i];
    double &x = param.data[i];
    if (p.weight_decay != 0) {
      if (p.decoupled) {
        x *= 1.0 - p.lr * p.weight_decay;
      } else {
        g += p.weight_decay * x;
      }
    }
    double &m = exp_avg.data[i];
    double &v = exp_avg_sq.data[i];
    m = torch_lerp(m, g, 1.0 - p.beta1);
    v = v * p.beta2 + (1.0 - p.beta2) * g * g;
    double second = v;
    if (p.amsgrad) {
      double &vmax = max_exp_avg_sq->data[i];
      vmax = std::isnan(v) || v > vmax ? v : vmax;  // torch.maximum keeps NaN
      second = vmax;
    }
    const double denom = std::sqrt(second) / bias_correction2_sqrt + p.eps;
    x += (-step_size * m) / denom;  // addcdiv_ rounding: (value * m) / denom
  }
}

}  // namespace trn::ops::host
