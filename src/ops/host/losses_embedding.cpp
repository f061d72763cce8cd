// nll_loss and embedding, forward and backward.
#include <algorithm>
#include <string>

#include "ops/host/internal.hpp"
#include "ops/host/reference.hpp"

namespace trn::ops::host {

using namespace detail;

namespace {

// The validated view of an nll_loss call: one row of C log-probabilities per target.
struct NllLayout {
  int64_t rows, classes;
  std::vector<int64_t> target;  // ignore_index where ignored
  Shape none_shape;             // the output shape with Reduction::kNone
};

NllLayout nll_layout(const std::string &op, const Array &log_probs, const Array &target,
                     const Array *weight, int64_t ignore_index) {
  check_array(op, "log_probs", log_probs);
  check_array(op, "target", target);
  const size_t rank = log_probs.shape.size();
  if (rank != 1 && rank != 2) {
    fail(op, "log_probs is " + shape_str(log_probs.shape) + "; it must be [N, C] or [C]");
  }
  NllLayout l;
  l.rows = rank == 2 ? log_probs.shape[0] : 1;
  l.classes = log_probs.shape[rank - 1];
  l.none_shape = rank == 2 ? Shape{l.rows} : Shape{};
  if (target.shape != l.none_shape) {
    fail(op, "log_probs is " + shape_str(log_probs.shape) + " so target must be " +
                 shape_str(l.none_shape) + ", but it is " + shape_str(target.shape));
  }
  if (weight) {
    check_array(op, "weight", *weight);
    if (weight->shape != Shape{l.classes}) {
      fail(op, "weight is " + shape_str(weight->shape) + " but there are " +
                   std::to_string(l.classes) + " classes; it must be [" +
                   std::to_string(l.classes) + "]");
    }
  }
  for (int64_t i = 0; i < l.rows; ++i) {
    const int64_t t = as_index(op, "target", target.data[i]);
    if (t != ignore_index && (t < 0 || t >= l.classes)) {
      fail(op, "target " + std::to_string(t) + " at position " + std::to_string(i) +
                   " is out of range [0, " + std::to_string(l.classes) + ")");
    }
    l.target.push_back(t);
  }
  return l;
}

}  // namespace

NllResult nll_loss(const Array &log_probs, const Array &target, const Array *weight,
                   Reduction reduction, int64_t ignore_index) {
  const NllLayout l = nll_layout("nll_loss", log_probs, target, weight, ignore_index);
  Array losses = Array::zeros(l.none_shape);
  double total_weight = 0, total_loss = 0;
  for (int64_t i = 0; i < l.rows; ++i) {
    const int64_t t = l.target[i];
    if (t == ignore_index) continue;
    const double w = weight ? weight->data[t] : 1.0;
    losses.data[i] = -w * log_probs.data[i * l.classes + t];
    total_weight += w;
    total_loss += losses.data[i];
  }
  NllResult r{Array::full({}, 0.0), Array::full({}, total_weight)};
  switch (reduction) {
    case Reduction::kNone: r.out = std::move(losses); break;
    // All targets ignored gives 0 / 0 = NaN, as torch.
    case Reduction::kMean: r.out.data[0] = total_loss / total_weight; break;
    case Reduction::kSum: r.out.data[0] = total_loss; break;
  }
  return r;
}

Array nll_loss_backward(const Array &grad_out, const Array &log_probs, const Array &target,
                        const Array *weight, Reduction reduction, int64_t ignore_index,
                        const Array &total_weight) {
  const std::string op = "nll_loss_backward";
  const NllLayout l = nll_layout(op, log_probs, target, weight, ignore_index);
  check_array(op, "grad_out", grad_out);
  check_array(op, "total_weight", total_weight);
  const Shape expected = reduction == Reduction::kNone ? l.none_shape : Shape{};
  check_same_shape(op, "grad_out", grad_out.shape, "the loss", expected);
  check_same_shape(op, "total_weight", total_weight.shape, "a scalar", Shape{});
  Array grad = Array::zeros(log_probs.shape);
  for (int64_t i = 0; i < l.rows; ++i) {
    const int64_t t = l.target[i];
    if (t == ignore_index) continue;
    const double w = weight ? weight->data[t] : 1.0;
    double g = reduction == Reduction::kNone ? grad_out.data[i] : grad_out.data[0];
    if (reduction == Reduction::kMean) g /= total_weight.data[0];
    grad.data[i * l.classes + t] = -w * g;
  }
  return grad;
}

namespace {

std::vector<int64_t> embedding_rows(const std::string &op, const Array &indices, int64_t rows) {
  check_array(op, "indices", indices);
  std::vector<int64_t> out;
  out.reserve(indices.data.size());
  for (double v : indices.data) {
    const int64_t i = as_index(op, "indices", v);
    if (i < 0 || i >= rows) {
      fail(op, "index " + std::to_string(i) + " is out of range [0, " + std::to_string(rows) + ")");
    }
    out.push_back(i);
  }
  return out;
}

}  // namespace

Array embedding(const Array &weight, const Array &indices) {
  const std::string op = "embedding";
  check_array(op, "weight", weight);
  if (weight.shape.size() != 2) {
    fail(op, "weight is " + shape_str(weight.shape) + "; it must be 2D [V, D]");
  }
  const int64_t dim = weight.shape[1];
  const std::vector<int64_t> rows = embedding_rows(op, indices, weight.shape[0]);
  Shape shape = indices.shape;
  shape.push_back(dim);
  Array out = Array::zeros(shape);
  for (size_t i = 0; i < rows.size(); ++i) {
    for (int64_t d = 0; d < dim; ++d) out.data[i * dim + d] = weight.data[rows[i] * dim + d];
  }
  return out;
}

Array embedding_backward(const Array &grad_out, const Array &indices, int64_t num_weights,
                         int64_t padding_idx) {
  const std::string op = "embedding_backward";
  check_array(op, "grad_out", grad_out);
  if (num_weights < 0) fail(op, "num_weights " + std::to_string(num_weights) + " is negative");
  const std::vector<int64_t> rows = embedding_rows(op, indices, num_weights);
  if (grad_out.shape.size() != indices.shape.size() + 1 ||
      !std::equal(indices.shape.begin(), indices.shape.end(), grad_out.shape.begin())) {
    fail(op, "grad_out is " + shape_str(grad_out.shape) + " but indices are " +
                 shape_str(indices.shape) + "; grad_out must be indices' shape + [D]");
  }
  const int64_t dim = grad_out.shape.back();
  Array grad = Array::zeros({num_weights, dim});
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] == padding_idx) continue;
    for (int64_t d = 0; d < dim; ++d) grad.data[rows[i] * dim + d] += grad_out.data[i * dim + d];
  }
  return grad;
}

}  // namespace trn::ops::host
