// Tensors as the ops see them: a trn_ops_tensor_t checked against its allocation (every element
// inside it, strides not negative, a dtype this library knows), with the shape logic the ops
// share: numpy broadcasting, the dims a broadcast view reads (stride 0), row-major contiguity.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trn/trn_ops.h"

namespace trn::ops {

using Shape = std::vector<int64_t>;

uint32_t dtype_size(trn_dtype_t dtype);  // every dtype, f64 and i64 included; 0 for none
const char *dtype_name(trn_dtype_t dtype);
bool dtype_is_float(trn_dtype_t dtype);
bool dtype_on_device(trn_dtype_t dtype);  // one the device's kernels take

struct Tensor {
  trn_mem_t mem = nullptr;
  uint64_t offset = 0;
  trn_dtype_t dtype = TRN_DTYPE_F32;
  Shape shape, strides;  // strides in elements
  uint32_t device_index = 0;
  uint64_t span_begin = 0, span_end = 0;  // the bytes of `mem` the view touches

  bool present() const { return mem != nullptr; }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const;
  uint32_t element_size() const { return dtype_size(dtype); }
  bool contiguous() const;
  // Contiguous once the dims it broadcasts (stride 0) are read as size 1.
  bool contiguous_but_broadcast() const;
  // The shape it holds data for: broadcast dims (stride 0) as 1.
  Shape data_shape() const;
  // "f32[4, 8]", with " strided" for a non-contiguous view.
  std::string describe() const;
};

// Checks `t` (NULL gives an absent Tensor when `optional`, else an error naming `name`).
Tensor tensor_arg(const trn_ops_tensor_t *t, const char *name, bool optional = false);

// `x` read with `shape` (which it broadcasts to): its strides, 0 where it broadcasts (a dim it
// lacks or has as 1).
Tensor expanded_to(const Tensor &x, const Shape &shape);

int64_t numel(const Shape &shape);
std::string shape_text(const Shape &shape);  // "[4, 8]"
// numpy broadcasting of two shapes, or an error naming both.
Shape broadcast_shapes(const Shape &a, const Shape &b, const char *op);
// A dim in [0, rank) from one that may count from the end, or an error.
int64_t normalize_dim(int64_t dim, int64_t rank, const char *op);

// Every tensor on one device, and outputs of the expected shape: errors name the argument.
void check_same_device(const std::vector<const Tensor *> &tensors, const char *op);
void check_shape(const Tensor &t, const Shape &expected, const char *name, const char *op);
// Outputs distinct from each other (and with no broadcast dim), and from the inputs unless an
// output is exactly an input and the op runs in place (`in_place_ok`): errors name both views.
void check_overlap(const std::vector<const Tensor *> &outputs,
                   const std::vector<const Tensor *> &inputs, const char *op, bool in_place_ok);

}  // namespace trn::ops
