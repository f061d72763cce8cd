// conv2d and max_pool2d, forward and backward, as direct loops.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "ops/host/internal.hpp"
#include "ops/host/reference.hpp"

namespace trn::ops::host {

using namespace detail;

namespace {

void check_positive(const std::string &op, const char *name, const int64_t (&v)[2]) {
  if (v[0] < 1 || v[1] < 1) {
    fail(op, std::string(name) + " (" + std::to_string(v[0]) + ", " + std::to_string(v[1]) +
                 ") must be positive");
  }
}

void check_padding(const std::string &op, const int64_t (&v)[2]) {
  if (v[0] < 0 || v[1] < 0) {
    fail(op, "padding (" + std::to_string(v[0]) + ", " + std::to_string(v[1]) +
                 ") must not be negative");
  }
}

// Everything the conv loops need, checked once for forward and backward.
struct ConvGeometry {
  int64_t n, c, h, w, o, cg, og, kh, kw, ho, wo;
  Conv2dParams p;
};

ConvGeometry conv_geometry(const std::string &op, const Array &x, const Array &w,
                           const Conv2dParams &p) {
  check_array(op, "x", x);
  check_array(op, "w", w);
  if (x.shape.size() != 4) fail(op, "x is " + shape_str(x.shape) + "; it must be [N, C, H, W]");
  if (w.shape.size() != 4) {
    fail(op, "w is " + shape_str(w.shape) + "; it must be [O, C/groups, kh, kw]");
  }
  check_positive(op, "stride", p.stride);
  check_positive(op, "dilation", p.dilation);
  check_padding(op, p.padding);
  if (p.groups < 1) fail(op, "groups " + std::to_string(p.groups) + " must be positive");
  ConvGeometry g{x.shape[0], x.shape[1], x.shape[2], x.shape[3], w.shape[0], 0,
                 0,          w.shape[2], w.shape[3], 0,          0,          p};
  if (g.c % p.groups != 0 || g.o % p.groups != 0) {
    fail(op, "x has " + std::to_string(g.c) + " channels and w " + std::to_string(g.o) +
                 " output channels; both must be divisible by groups (" + std::to_string(p.groups) +
                 ")");
  }
  g.cg = g.c / p.groups;
  g.og = g.o / p.groups;
  if (w.shape[1] != g.cg) {
    fail(op, "x is " + shape_str(x.shape) + " and w is " + shape_str(w.shape) + "; with groups " +
                 std::to_string(p.groups) + " w's dim 1 must be " + std::to_string(g.cg));
  }
  const int64_t span_h = p.dilation[0] * (g.kh - 1) + 1, span_w = p.dilation[1] * (g.kw - 1) + 1;
  const int64_t padded_h = g.h + 2 * p.padding[0], padded_w = g.w + 2 * p.padding[1];
  if (g.kh < 1 || g.kw < 1 || padded_h < span_h || padded_w < span_w) {
    fail(op, "the kernel " + shape_str({g.kh, g.kw}) + " (dilated " + shape_str({span_h, span_w}) +
                 ") does not fit the padded input " + shape_str({padded_h, padded_w}));
  }
  g.ho = (padded_h - span_h) / p.stride[0] + 1;
  g.wo = (padded_w - span_w) / p.stride[1] + 1;
  return g;
}

// Calls f(x_offset, w_offset, out_offset) for every multiply of the convolution; the forward and
// both gradients are the same walk with a different accumulation.
template <class F>
void for_each_tap(const ConvGeometry &g, F &&f) {
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t o = 0; o < g.o; ++o) {
      const int64_t first_c = (o / g.og) * g.cg;
      for (int64_t oh = 0; oh < g.ho; ++oh) {
        for (int64_t ow = 0; ow < g.wo; ++ow) {
          const int64_t out_off = ((n * g.o + o) * g.ho + oh) * g.wo + ow;
          for (int64_t c = 0; c < g.cg; ++c) {
            const int64_t x_plane = (n * g.c + first_c + c) * g.h;
            const int64_t w_plane = (o * g.cg + c) * g.kh;
            for (int64_t i = 0; i < g.kh; ++i) {
              const int64_t ih = oh * g.p.stride[0] - g.p.padding[0] + i * g.p.dilation[0];
              if (ih < 0 || ih >= g.h) continue;
              for (int64_t j = 0; j < g.kw; ++j) {
                const int64_t iw = ow * g.p.stride[1] - g.p.padding[1] + j * g.p.dilation[1];
                if (iw < 0 || iw >= g.w) continue;
                f((x_plane + ih) * g.w + iw, (w_plane + i) * g.kw + j, out_off);
              }
            }
          }
        }
      }
    }
  }
}

Shape conv_out_shape(const ConvGeometry &g) {
  return {g.n, g.o, g.ho, g.wo};
}

}  // namespace

Array conv2d(const Array &x, const Array &w, const Array *bias, const Conv2dParams &p) {
  const ConvGeometry g = conv_geometry("conv2d", x, w, p);
  if (bias) {
    check_array("conv2d", "bias", *bias);
    if (bias->shape != Shape{g.o}) {
      fail("conv2d",
           "bias is " + shape_str(bias->shape) + "; it must be [" + std::to_string(g.o) + "]");
    }
  }
  Array out = Array::zeros(conv_out_shape(g));
  const int64_t plane = g.ho * g.wo;
  for (int64_t i = 0; bias && i < out.numel(); ++i) out.data[i] = bias->data[(i / plane) % g.o];
  for_each_tap(
      g, [&](int64_t xi, int64_t wi, int64_t oi) { out.data[oi] += x.data[xi] * w.data[wi]; });
  return out;
}

Conv2dGrads conv2d_backward(const Array &grad_out, const Array &x, const Array &w, bool has_bias,
                            const Conv2dParams &p) {
  const std::string op = "conv2d_backward";
  const ConvGeometry g = conv_geometry(op, x, w, p);
  check_array(op, "grad_out", grad_out);
  check_same_shape(op, "grad_out", grad_out.shape, "the conv output", conv_out_shape(g));
  Conv2dGrads r{Array::zeros(x.shape), Array::zeros(w.shape),
                has_bias ? Array::zeros({g.o}) : Array{}};
  for_each_tap(g, [&](int64_t xi, int64_t wi, int64_t oi) {
    r.grad_x.data[xi] += grad_out.data[oi] * w.data[wi];
    r.grad_w.data[wi] += grad_out.data[oi] * x.data[xi];
  });
  const int64_t plane = g.ho * g.wo;
  for (int64_t i = 0; has_bias && i < grad_out.numel(); ++i) {
    r.grad_bias.data[(i / plane) % g.o] += grad_out.data[i];
  }
  return r;
}

namespace {

// torch's pooling_output_shape: floor division, and in ceil mode the last window must start
// inside the input or the left padding.
int64_t pool_out_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil,
                      bool ceil_mode) {
  const int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

void check_pool_input(const std::string &op, const Shape &shape) {
  if (shape.size() != 3 && shape.size() != 4) {
    fail(op, "x is " + shape_str(shape) + "; it must be [N, C, H, W] or [C, H, W]");
  }
}

}  // namespace

PoolResult max_pool2d(const Array &x, const Pool2dParams &p) {
  const std::string op = "max_pool2d";
  check_array(op, "x", x);
  check_pool_input(op, x.shape);
  check_positive(op, "kernel", p.kernel);
  check_positive(op, "dilation", p.dilation);
  check_padding(op, p.padding);
  const int64_t stride[2] = {p.stride[0] == 0 ? p.kernel[0] : p.stride[0],
                             p.stride[1] == 0 ? p.kernel[1] : p.stride[1]};
  check_positive(op, "stride", stride);
  if (p.padding[0] > p.kernel[0] / 2 || p.padding[1] > p.kernel[1] / 2) {
    fail(op, "padding (" + std::to_string(p.padding[0]) + ", " + std::to_string(p.padding[1]) +
                 ") must be at most half the kernel (" + std::to_string(p.kernel[0]) + ", " +
                 std::to_string(p.kernel[1]) + ")");
  }
  const size_t rank = x.shape.size();
  const int64_t h = x.shape[rank - 2], w = x.shape[rank - 1];
  const int64_t ho =
      pool_out_size(h, p.kernel[0], p.padding[0], stride[0], p.dilation[0], p.ceil_mode);
  const int64_t wo =
      pool_out_size(w, p.kernel[1], p.padding[1], stride[1], p.dilation[1], p.ceil_mode);
  if (ho < 1 || wo < 1) {
    fail(op, "x is " + shape_str(x.shape) + " and the output would be " + shape_str({ho, wo}) +
                 "; the input is too small for the kernel");
  }
  Shape out_shape = x.shape;
  out_shape[rank - 2] = ho;
  out_shape[rank - 1] = wo;
  PoolResult r{Array::zeros(out_shape), Array::zeros(out_shape)};
  const int64_t planes = x.numel() / std::max<int64_t>(h * w, 1);
  for (int64_t pl = 0; pl < planes; ++pl) {
    const double *in = x.data.data() + pl * h * w;
    for (int64_t oh = 0; oh < ho; ++oh) {
      for (int64_t ow = 0; ow < wo; ++ow) {
        // The window walk and the NaN rule (last NaN wins) follow torch's CPU kernel.
        int64_t ih0 = oh * stride[0] - p.padding[0], iw0 = ow * stride[1] - p.padding[1];
        const int64_t ih1 = std::min(ih0 + (p.kernel[0] - 1) * p.dilation[0] + 1, h);
        const int64_t iw1 = std::min(iw0 + (p.kernel[1] - 1) * p.dilation[1] + 1, w);
        while (ih0 < 0) ih0 += p.dilation[0];
        while (iw0 < 0) iw0 += p.dilation[1];
        int64_t best = ih0 * w + iw0;
        double best_v = -std::numeric_limits<double>::infinity();
        for (int64_t ih = ih0; ih < ih1; ih += p.dilation[0]) {
          for (int64_t iw = iw0; iw < iw1; iw += p.dilation[1]) {
            const double v = in[ih * w + iw];
            if (v > best_v || std::isnan(v)) {
              best_v = v;
              best = ih * w + iw;
            }
          }
        }
        const int64_t o = (pl * ho + oh) * wo + ow;
        r.out.data[o] = best_v;
        r.indices.data[o] = static_cast<double>(best);
      }
    }
  }
  return r;
}

Array max_pool2d_backward(const Array &grad_out, const Shape &x_shape, const Array &indices) {
  const std::string op = "max_pool2d_backward";
  check_array(op, "grad_out", grad_out);
  check_array(op, "indices", indices);
  check_pool_input(op, x_shape);
  check_same_shape(op, "grad_out", grad_out.shape, "indices", indices.shape);
  const size_t rank = x_shape.size();
  if (grad_out.shape.size() != rank ||
      !std::equal(x_shape.begin(), x_shape.end() - 2, grad_out.shape.begin())) {
    fail(op, "grad_out is " + shape_str(grad_out.shape) + " and x is " + shape_str(x_shape) +
                 "; they must agree in every dim but the last two");
  }
  Array grad = Array::zeros(x_shape);
  const int64_t plane_in = x_shape[rank - 2] * x_shape[rank - 1];
  const int64_t plane_out = grad_out.shape[rank - 2] * grad_out.shape[rank - 1];
  for (int64_t i = 0; i < grad_out.numel(); ++i) {
    const int64_t idx = as_index(op, "indices", indices.data[i]);
    if (idx < 0 || idx >= plane_in) {
      fail(op, "index " + std::to_string(idx) + " is outside the input plane of " +
                   std::to_string(plane_in) + " elements");
    }
    grad.data[(i / plane_out) * plane_in + idx] += grad_out.data[i];
  }
  return grad;
}

}  // namespace trn::ops::host
