// softmax / log_softmax and layer / RMS norm, forward and backward.
#include <cmath>
#include <limits>
#include <string>

#include "ops/host/internal.hpp"
#include "ops/host/reference.hpp"

namespace trn::ops::host {

using namespace detail;

namespace {

ReduceLayout dim_layout(const std::string &op, const Shape &shape, int64_t dim) {
  return reduce_layout(shape, dims_mask(op, shape, {dim}));
}

Shape trailing_shape(const Shape &shape, int64_t n) {
  return Shape(shape.end() - n, shape.end());
}

void check_affine(const std::string &op, const char *name, const Array *a, const Shape &expected) {
  if (a == nullptr) return;
  check_array(op, name, *a);
  if (a->shape != expected) {
    fail(op, std::string(name) + " is " + shape_str(a->shape) + " but the normalized shape is " +
                 shape_str(expected));
  }
}

// weight/bias entry k of a group (they cover exactly the normalized dims, so k indexes them).
double weight_at(const Array *w, int64_t k) {
  return w ? w->data[k] : 1.0;
}

}  // namespace

Array softmax(const Array &x, int64_t dim, bool log) {
  const char *op = log ? "log_softmax" : "softmax";
  check_array(op, "x", x);
  const ReduceLayout layout = dim_layout(op, x.shape, dim);
  Array out = Array::zeros(x.shape);
  for (int64_t g = 0; g < layout.groups(); ++g) {
    const double *in = x.data.data() + layout.base[g];
    double *o = out.data.data() + layout.base[g];
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t off : layout.inner) m = std::isnan(in[off]) || in[off] > m ? in[off] : m;
    // An all -inf row keeps m = -inf; shifting by 0 then gives torch's NaN row.
    const double shift = m == -std::numeric_limits<double>::infinity() ? 0.0 : m;
    double sum = 0;
    for (int64_t off : layout.inner) sum += std::exp(in[off] - shift);
    for (int64_t off : layout.inner) {
      o[off] = log ? in[off] - shift - std::log(sum) : std::exp(in[off] - shift) / sum;
    }
  }
  return out;
}

Array softmax_backward(const Array &grad_out, const Array &out, int64_t dim, bool log) {
  const char *op = log ? "log_softmax_backward" : "softmax_backward";
  check_array(op, "grad_out", grad_out);
  check_array(op, "out", out);
  check_same_shape(op, "grad_out", grad_out.shape, "out", out.shape);
  const ReduceLayout layout = dim_layout(op, out.shape, dim);
  Array gx = Array::zeros(out.shape);
  for (int64_t g = 0; g < layout.groups(); ++g) {
    const double *go = grad_out.data.data() + layout.base[g];
    const double *y = out.data.data() + layout.base[g];
    double *gi = gx.data.data() + layout.base[g];
    double s = 0;
    for (int64_t off : layout.inner) s += log ? go[off] : go[off] * y[off];
    for (int64_t off : layout.inner) {
      gi[off] = log ? go[off] - std::exp(y[off]) * s : y[off] * (go[off] - s);
    }
  }
  return gx;
}

NormResult layer_norm(const Array &x, int64_t normalized_ndim, const Array *weight,
                      const Array *bias, double eps) {
  const std::string op = "layer_norm";
  check_array(op, "x", x);
  const ReduceLayout layout = trailing_layout(op, x.shape, normalized_ndim);
  const Shape norm_shape = trailing_shape(x.shape, normalized_ndim);
  check_affine(op, "weight", weight, norm_shape);
  check_affine(op, "bias", bias, norm_shape);
  NormResult r{Array::zeros(x.shape), Array::zeros(layout.kept_shape),
               Array::zeros(layout.kept_shape)};
  const double n = static_cast<double>(layout.group_size());
  for (int64_t g = 0; g < layout.groups(); ++g) {
    const double *in = x.data.data() + layout.base[g];
    double mean = 0, var = 0;
    for (int64_t off : layout.inner) mean += in[off];
    mean /= n;
    for (int64_t off : layout.inner) var += (in[off] - mean) * (in[off] - mean);
    const double rstd = 1.0 / std::sqrt(var / n + eps);  // biased variance, as torch
    for (int64_t k = 0; k < layout.group_size(); ++k) {
      const int64_t off = layout.inner[k];
      r.out.data[layout.base[g] + off] =
          (in[off] - mean) * rstd * weight_at(weight, k) + (bias ? bias->data[k] : 0.0);
    }
    r.mean.data[g] = mean;
    r.rstd.data[g] = rstd;
  }
  return r;
}

namespace {

// Shared by both norms: with xhat = (x - center) * rstd and gy = grad_out * weight,
// grad_x = rstd * (gy - a*mean(gy) - xhat*mean(gy*xhat)) where a = 1 for layer norm (the mean
// depends on x) and 0 for RMS norm. grad_weight sums grad_out * xhat over the groups.
NormGrads norm_backward(const std::string &op, const Array &grad_out, const Array &x,
                        const Array *mean, const Array &rstd, int64_t normalized_ndim,
                        const Array *weight, bool has_bias) {
  check_array(op, "grad_out", grad_out);
  check_array(op, "x", x);
  check_same_shape(op, "grad_out", grad_out.shape, "x", x.shape);
  const ReduceLayout layout = trailing_layout(op, x.shape, normalized_ndim);
  const Shape norm_shape = trailing_shape(x.shape, normalized_ndim);
  check_affine(op, "weight", weight, norm_shape);
  check_array(op, "rstd", rstd);
  check_same_shape(op, "rstd", rstd.shape, "the expected statistics shape", layout.kept_shape);
  if (mean) {
    check_array(op, "mean", *mean);
    check_same_shape(op, "mean", mean->shape, "the expected statistics shape", layout.kept_shape);
  }
  NormGrads r{Array::zeros(x.shape), weight ? Array::zeros(norm_shape) : Array{},
              has_bias ? Array::zeros(norm_shape) : Array{}};
  const double n = static_cast<double>(layout.group_size());
  for (int64_t g = 0; g < layout.groups(); ++g) {
    const double *in = x.data.data() + layout.base[g];
    const double *go = grad_out.data.data() + layout.base[g];
    const double center = mean ? mean->data[g] : 0.0, rs = rstd.data[g];
    double sum_gy = 0, sum_gy_xhat = 0;
    for (int64_t k = 0; k < layout.group_size(); ++k) {
      const int64_t off = layout.inner[k];
      const double xhat = (in[off] - center) * rs, gy = go[off] * weight_at(weight, k);
      sum_gy += gy;
      sum_gy_xhat += gy * xhat;
      if (weight) r.grad_weight.data[k] += go[off] * xhat;
      if (has_bias) r.grad_bias.data[k] += go[off];
    }
    const double mean_gy = mean ? sum_gy / n : 0.0, mean_gy_xhat = sum_gy_xhat / n;
    for (int64_t k = 0; k < layout.group_size(); ++k) {
      const int64_t off = layout.inner[k];
      const double xhat = (in[off] - center) * rs, gy = go[off] * weight_at(weight, k);
      r.grad_x.data[layout.base[g] + off] = rs * (gy - mean_gy - xhat * mean_gy_xhat);
    }
  }
  return r;
}

}  // namespace

NormGrads layer_norm_backward(const Array &grad_out, const Array &x, const Array &mean,
                              const Array &rstd, int64_t normalized_ndim, const Array *weight,
                              bool has_bias) {
  return norm_backward("layer_norm_backward", grad_out, x, &mean, rstd, normalized_ndim, weight,
                       has_bias);
}

NormResult rms_norm(const Array &x, int64_t normalized_ndim, const Array *weight, double eps) {
  const std::string op = "rms_norm";
  check_array(op, "x", x);
  const ReduceLayout layout = trailing_layout(op, x.shape, normalized_ndim);
  check_affine(op, "weight", weight, trailing_shape(x.shape, normalized_ndim));
  NormResult r{Array::zeros(x.shape), Array{}, Array::zeros(layout.kept_shape)};
  const double n = static_cast<double>(layout.group_size());
  for (int64_t g = 0; g < layout.groups(); ++g) {
    const double *in = x.data.data() + layout.base[g];
    double ms = 0;
    for (int64_t off : layout.inner) ms += in[off] * in[off];
    const double rstd = 1.0 / std::sqrt(ms / n + eps);
    for (int64_t k = 0; k < layout.group_size(); ++k) {
      const int64_t off = layout.inner[k];
      r.out.data[layout.base[g] + off] = in[off] * rstd * weight_at(weight, k);
    }
    r.rstd.data[g] = rstd;
  }
  return r;
}

NormGrads rms_norm_backward(const Array &grad_out, const Array &x, const Array &rstd,
                            int64_t normalized_ndim, const Array *weight) {
  return norm_backward("rms_norm_backward", grad_out, x, nullptr, rstd, normalized_ndim, weight,
                       false);
}

}  // namespace trn::ops::host
