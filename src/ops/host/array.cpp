// Array construction, shape checks, broadcasting and the reduction layout every reducing op uses.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "ops/host/internal.hpp"
#include "ops/host/reference.hpp"

namespace trn::ops::host {
namespace detail {

void fail(const std::string &op, const std::string &what) {
  throw std::invalid_argument(op + ": " + what);
}

std::string shape_str(const Shape &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t numel_of(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Shape strides_of(const Shape &shape) {
  Shape strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

int64_t normalize_dim(const std::string &op, int64_t dim, int64_t rank) {
  const int64_t r = rank == 0 ? 1 : rank;
  if (dim < -r || dim >= r) {
    fail(op, "dim " + std::to_string(dim) + " is out of range for rank " + std::to_string(rank) +
                 " (expected [" + std::to_string(-r) + ", " + std::to_string(r - 1) + "])");
  }
  return dim < 0 ? dim + r : dim;
}

void check_array(const std::string &op, const char *name, const Array &a) {
  for (int64_t d : a.shape) {
    if (d < 0) fail(op, std::string(name) + " has a negative dim: " + shape_str(a.shape));
  }
  if (static_cast<int64_t>(a.data.size()) != numel_of(a.shape)) {
    fail(op, std::string(name) + " is " + shape_str(a.shape) + " (" +
                 std::to_string(numel_of(a.shape)) + " elements) but holds " +
                 std::to_string(a.data.size()) + " values");
  }
}

void check_same_shape(const std::string &op, const char *a_name, const Shape &a, const char *b_name,
                      const Shape &b) {
  if (a != b) {
    fail(op, std::string(a_name) + " is " + shape_str(a) + " but " + b_name + " is " +
                 shape_str(b) + "; they must match");
  }
}

int64_t as_index(const std::string &op, const char *name, double v) {
  if (!std::isfinite(v) || v != std::floor(v) || std::fabs(v) > 9.0e15) {
    fail(op, std::string(name) + " holds " + std::to_string(v) + ", which is not an integer");
  }
  return static_cast<int64_t>(v);
}

std::vector<int64_t> broadcast_strides(const Shape &in, const Shape &out) {
  const Shape in_strides = strides_of(in);
  std::vector<int64_t> strides(out.size(), 0);
  const size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] != 1) strides[lead + d] = in_strides[d];
  }
  return strides;
}

bool broadcasts_to(const Shape &from, const Shape &to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d) {
    if (from[d] != 1 && from[d] != to[lead + d]) return false;
  }
  return true;
}

int64_t dot(const std::vector<int64_t> &idx, const std::vector<int64_t> &strides) {
  int64_t off = 0;
  for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * strides[d];
  return off;
}

std::vector<bool> dims_mask(const std::string &op, const Shape &shape,
                            const std::vector<int64_t> &dims) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<bool> mask(shape.size(), dims.empty());
  std::vector<bool> seen(rank == 0 ? 1 : rank, false);
  for (int64_t dim : dims) {
    const int64_t d = normalize_dim(op, dim, rank);
    if (seen[d]) fail(op, "dim " + std::to_string(d) + " appears more than once in dims");
    seen[d] = true;
    if (rank > 0) mask[d] = true;
  }
  return mask;
}

namespace {

// Offsets of every index tuple of `sub` (a shape of 1s where a dim is not iterated).
std::vector<int64_t> offsets(const Shape &sub, const Shape &strides) {
  std::vector<int64_t> out(numel_of(sub));
  for_each_index(
      sub, [&](const std::vector<int64_t> &idx, int64_t flat) { out[flat] = dot(idx, strides); });
  return out;
}

}  // namespace

ReduceLayout reduce_layout(const Shape &shape, const std::vector<bool> &reduced) {
  ReduceLayout layout;
  const Shape strides = strides_of(shape);
  Shape inner_shape(shape.size(), 1);
  layout.kept_shape = shape;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (reduced[d]) {
      layout.kept_shape[d] = 1;
      inner_shape[d] = shape[d];
    } else {
      layout.squeezed_shape.push_back(shape[d]);
    }
  }
  layout.base = offsets(layout.kept_shape, strides);
  layout.inner = offsets(inner_shape, strides);
  return layout;
}

ReduceLayout trailing_layout(const std::string &op, const Shape &shape, int64_t n) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (n < 1 || n > rank) {
    fail(op, "normalized_ndim " + std::to_string(n) + " must be in [1, " + std::to_string(rank) +
                 "] for x of shape " + shape_str(shape));
  }
  std::vector<bool> mask(shape.size(), false);
  for (int64_t d = rank - n; d < rank; ++d) mask[d] = true;
  return reduce_layout(shape, mask);
}

}  // namespace detail

using namespace detail;

Array Array::zeros(Shape shape) {
  return full(std::move(shape), 0.0);
}

Array Array::full(Shape shape, double value) {
  for (int64_t d : shape) {
    if (d < 0) fail("Array::full", "shape " + shape_str(shape) + " has a negative dim");
  }
  Array a;
  a.data.assign(numel_of(shape), value);
  a.shape = std::move(shape);
  return a;
}

int64_t Array::numel() const {
  return numel_of(shape);
}

Shape broadcast_shapes(const Shape &a, const Shape &b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      fail("broadcast_shapes", "shapes " + shape_str(a) + " and " + shape_str(b) +
                                   " do not broadcast (dim " + std::to_string(i) + ": " +
                                   std::to_string(da) + " vs " + std::to_string(db) + ")");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Array broadcast_to(const Array &x, const Shape &shape) {
  check_array("broadcast_to", "x", x);
  if (!broadcasts_to(x.shape, shape)) {
    fail("broadcast_to",
         "x of shape " + shape_str(x.shape) + " cannot broadcast to " + shape_str(shape));
  }
  Array out = Array::zeros(shape);
  const std::vector<int64_t> strides = broadcast_strides(x.shape, shape);
  for_each_index(shape, [&](const std::vector<int64_t> &idx, int64_t flat) {
    out.data[flat] = x.data[dot(idx, strides)];
  });
  return out;
}

Array reduce_to_shape(const Array &grad, const Shape &shape) {
  check_array("reduce_to_shape", "grad", grad);
  if (!broadcasts_to(shape, grad.shape)) {
    fail("reduce_to_shape", "shape " + shape_str(shape) + " does not broadcast to grad's shape " +
                                shape_str(grad.shape));
  }
  const size_t lead = grad.shape.size() - shape.size();
  std::vector<bool> mask(grad.shape.size(), true);
  for (size_t d = 0; d < shape.size(); ++d) mask[lead + d] = shape[d] == 1;
  const ReduceLayout layout = reduce_layout(grad.shape, mask);
  Array out = Array::zeros(shape);
  for (int64_t g = 0; g < layout.groups(); ++g) {
    double s = 0;
    for (int64_t off : layout.inner) s += grad.data[layout.base[g] + off];
    out.data[g] = s;
  }
  return out;
}

}  // namespace trn::ops::host
