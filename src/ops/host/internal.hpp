// Shape, index and error helpers shared by the host reference ops (not part of the interface).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/host/reference.hpp"

namespace trn::ops::host::detail {

// Throws std::invalid_argument("<op>: <what>").
[[noreturn]] void fail(const std::string &op, const std::string &what);
std::string shape_str(const Shape &shape);  // "[3, 4]"
int64_t numel_of(const Shape &shape);
Shape strides_of(const Shape &shape);  // row-major, in elements
// Maps a possibly negative dim into [0, rank); a scalar accepts 0 and -1 like torch.
int64_t normalize_dim(const std::string &op, int64_t dim, int64_t rank);
// Checks that `a` has data matching its shape and names it in the message otherwise.
void check_array(const std::string &op, const char *name, const Array &a);
void check_same_shape(const std::string &op, const char *a_name, const Shape &a, const char *b_name,
                      const Shape &b);
// Reads an integral value stored as double (class indices, embedding indices).
int64_t as_index(const std::string &op, const char *name, double v);

// Calls f(idx, flat) for every index tuple of `shape` in row-major order (one call for rank 0).
template <class F>
void for_each_index(const Shape &shape, F &&f) {
  const int64_t n = numel_of(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    f(static_cast<const std::vector<int64_t> &>(idx), flat);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

// Strides (in `in`'s elements) aligned with `out`'s dims, 0 where `in` is broadcast, so that an
// index of `out` dotted with them is the offset into `in`. `in` must broadcast to `out`.
std::vector<int64_t> broadcast_strides(const Shape &in, const Shape &out);
int64_t dot(const std::vector<int64_t> &idx, const std::vector<int64_t> &strides);
// `from` broadcasts to `to` without `to` growing.
bool broadcasts_to(const Shape &from, const Shape &to);

// A reduction split: element (g, k) of x is x[base[g] + inner[k]], g over the kept positions in
// row-major order of kept_shape, k over the reduced positions in row-major order (so for a single
// reduced dim k is the index along it, and with every dim reduced k is the flat index).
struct ReduceLayout {
  Shape kept_shape;      // x's shape with reduced dims set to 1 (the keepdim shape)
  Shape squeezed_shape;  // kept_shape without the reduced dims
  std::vector<int64_t> base, inner;
  int64_t groups() const { return static_cast<int64_t>(base.size()); }
  int64_t group_size() const { return static_cast<int64_t>(inner.size()); }
};
// dims empty = every dim; duplicates or out-of-range dims throw.
std::vector<bool> dims_mask(const std::string &op, const Shape &shape,
                            const std::vector<int64_t> &dims);
ReduceLayout reduce_layout(const Shape &shape, const std::vector<bool> &reduced);
// Reduces the last n dims (layer and RMS norm); n must be in [1, rank].
ReduceLayout trailing_layout(const std::string &op, const Shape &shape, int64_t n);

}  // namespace trn::ops::host::detail
