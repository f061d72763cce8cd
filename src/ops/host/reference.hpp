// Float64 host implementation of the tensor ops: the CPU fallback of the eager op library and the
// reference that device results are compared against. Semantics follow PyTorch eager (shapes,
// broadcasting, reductions, index conventions, torch.optim update formulas).
#pragma once

#include <cstdint>
#include <vector>

namespace trn::ops::host {

using Shape = std::vector<int64_t>;

// Dense row-major float64 array; rank 0 = a scalar with one element.
struct Array {
  Shape shape;
  std::vector<double> data;
  static Array zeros(Shape shape);
  static Array full(Shape shape, double value);
  int64_t numel() const;
};

// All functions throw std::invalid_argument with a message that says what was wrong.
// dims may be negative (counted from the end, as in PyTorch).

enum class Unary {
  kNeg,
  kAbs,
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kTanh,
  kSigmoid,
  kRelu,
  kGeluErf,
  kGeluTanh,
  kSilu,
  kReciprocal,
  kSquare,
  kSin,
  kCos
};
Array unary(Unary op, const Array &x);
// grad_in = grad_out * d op(x)/dx; relu's and abs's derivative at 0 is 0 as in PyTorch.
Array unary_backward(Unary op, const Array &grad_out, const Array &x);

enum class Binary {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMaximum,
  kMinimum,
  kPow,
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe
};
Shape broadcast_shapes(const Shape &a, const Shape &b);  // numpy rules; throws naming both shapes
// Broadcasting; comparisons give 1.0/0.0; maximum/minimum propagate NaN as torch.
Array binary(Binary op, const Array &a, const Array &b);
Array where(const Array &cond, const Array &a, const Array &b);  // cond != 0 ? a : b, all broadcast
// Reads x with a broadcast to `shape` (expand).
Array broadcast_to(const Array &x, const Shape &shape);
// Sums grad over the dims broadcasting added, so that it has `shape` (the backward of a broadcast).
Array reduce_to_shape(const Array &grad, const Shape &shape);

// 2D: a [M,K] (or [K,M] when trans_a), b [K,N] (or [N,K] when trans_b) -> [M,N].
// 3D (bmm): a [B,M,K], b [B,K,N] with the same transposes per batch -> [B,M,N]. Mixed ranks throw.
Array matmul(const Array &a, const Array &b, bool trans_a, bool trans_b);
// beta * bias + alpha * (op(a) @ op(b)) for 2D a and b; bias broadcasts to [M,N]. As torch.addmm,
// beta == 0 ignores bias entirely (its NaN/inf do not propagate).
Array addmm(const Array &bias, const Array &a, const Array &b, double alpha, double beta,
            bool trans_a, bool trans_b);

enum class Reduce { kSum, kMean, kMax, kMin, kArgmax, kArgmin };
// dims empty = all dims. Argmax/argmin take exactly one dim or none (none = over the flattened
// array: rank 0, or all ones with keepdim as torch); the index (as double) of the first extreme,
// NaN counting as the extreme as in torch. max/min propagate NaN. keepdim as in torch.
Array reduce(Reduce op, const Array &x, const std::vector<int64_t> &dims, bool keepdim);

Array softmax(const Array &x, int64_t dim, bool log);  // log = log_softmax; numerically stable
// out = the forward's output.
Array softmax_backward(const Array &grad_out, const Array &out, int64_t dim, bool log);

// normalized_ndim: the last n dims are normalized (torch's normalized_shape = x.shape[-n:]).
// mean and rstd have shape x.shape[:-n] + [1]*n (as torch's native_layer_norm returns them).
struct NormResult {
  Array out, mean, rstd;
};
NormResult layer_norm(const Array &x, int64_t normalized_ndim, const Array *weight,
                      const Array *bias, double eps);
// grad_weight/grad_bias empty (shape {}, no data) when weight/bias absent.
struct NormGrads {
  Array grad_x, grad_weight, grad_bias;
};
NormGrads layer_norm_backward(const Array &grad_out, const Array &x, const Array &mean,
                              const Array &rstd, int64_t normalized_ndim, const Array *weight,
                              bool has_bias);
// torch.nn.functional.rms_norm: out = x * rsqrt(mean(x^2) + eps) * weight; mean in the result is
// empty; rstd as above.
NormResult rms_norm(const Array &x, int64_t normalized_ndim, const Array *weight, double eps);
NormGrads rms_norm_backward(const Array &grad_out, const Array &x, const Array &rstd,
                            int64_t normalized_ndim, const Array *weight);

enum class Reduction { kNone, kMean, kSum };
// log_probs [N,C] (or [C] with a scalar target); target holds integral class indices (as double).
// Weighted mean divides by the sum of weights of non-ignored targets, as torch; total_weight is
// that sum (rank 0, for every reduction). A target out of [0, C) that is not ignore_index throws.
struct NllResult {
  Array out, total_weight;
};
NllResult nll_loss(const Array &log_probs, const Array &target, const Array *weight,
                   Reduction reduction, int64_t ignore_index);
Array nll_loss_backward(const Array &grad_out, const Array &log_probs, const Array &target,
                        const Array *weight, Reduction reduction, int64_t ignore_index,
                        const Array &total_weight);

// weight [V,D], indices any shape (integral) -> indices.shape + [D]; index out of range throws.
Array embedding(const Array &weight, const Array &indices);
// -> [num_weights, D]; rows of padding_idx get no gradient (padding_idx < 0: none).
Array embedding_backward(const Array &grad_out, const Array &indices, int64_t num_weights,
                         int64_t padding_idx);

struct Conv2dParams {
  int64_t stride[2] = {1, 1}, padding[2] = {0, 0}, dilation[2] = {1, 1}, groups = 1;
};
// x [N,C,H,W], w [O, C/groups, kh, kw], bias [O] or null -> [N,O,Ho,Wo].
Array conv2d(const Array &x, const Array &w, const Array *bias, const Conv2dParams &p);
struct Conv2dGrads {
  Array grad_x, grad_w, grad_bias;  // grad_bias empty when !has_bias
};
Conv2dGrads conv2d_backward(const Array &grad_out, const Array &x, const Array &w, bool has_bias,
                            const Conv2dParams &p);

struct Pool2dParams {
  int64_t kernel[2] = {2, 2}, stride[2] = {0, 0} /* 0: = kernel */, padding[2] = {0, 0},
          dilation[2] = {1, 1};
  bool ceil_mode = false;
};
// x [N,C,H,W] or [C,H,W]; indices (as double) are flat indices into each input plane's H*W, as
// torch's max_pool2d_with_indices; padding must be <= kernel/2 as torch requires.
struct PoolResult {
  Array out, indices;
};
PoolResult max_pool2d(const Array &x, const Pool2dParams &p);
Array max_pool2d_backward(const Array &grad_out, const Shape &x_shape, const Array &indices);

// torch.optim.SGD for one parameter, in place. momentum_buf may be null when momentum == 0; on the
// first step (first_step) the buffer is set to the gradient (as torch does), afterwards
// buf = momentum*buf + (1-dampening)*g.
struct SgdParams {
  double lr = 0.01, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false;
};
void sgd_step(Array &param, const Array &grad, Array *momentum_buf, bool first_step,
              const SgdParams &p);
// torch.optim.Adam (decoupled = false: weight decay added to the gradient) and AdamW (decoupled =
// true: param *= 1 - lr*wd), in place. step is the 1-based step count after incrementing.
// max_exp_avg_sq required when amsgrad.
struct AdamParams {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled = false, amsgrad = false, maximize = false;
};
void adam_step(Array &param, const Array &grad, Array &exp_avg, Array &exp_avg_sq,
               Array *max_exp_avg_sq, int64_t step, const AdamParams &p);

}  // namespace trn::ops::host
