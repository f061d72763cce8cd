#include "ops/tensor.hpp"

#include <fmt/format.h>

#include "ops/error.hpp"

namespace trn::ops {

uint32_t dtype_size(trn_dtype_t dtype) {
  return trn_dtype_size(dtype);
}

const char *dtype_name(trn_dtype_t dtype) {
  return trn_dtype_name(dtype);
}

bool dtype_is_float(trn_dtype_t dtype) {
  switch (dtype) {
    case TRN_DTYPE_F32:
    case TRN_DTYPE_BF16:
    case TRN_DTYPE_F16:
    case TRN_DTYPE_FP8_E4M3:
    case TRN_DTYPE_FP8_E5M2: return true;
    default: return dtype == TRN_DTYPE_F64;
  }
}

bool dtype_on_device(trn_dtype_t dtype) {
  return dtype != TRN_DTYPE_F64 && dtype != TRN_DTYPE_I64 && trn_dtype_size(dtype) != 0;
}

Tensor expanded_to(const Tensor &x, const Shape &shape) {
  Tensor t = x;
  const size_t lead = shape.size() - x.shape.size();
  t.shape = shape;
  t.strides.assign(shape.size(), 0);
  for (size_t d = lead; d < shape.size(); ++d)
    if (x.shape[d - lead] == shape[d]) t.strides[d] = x.strides[d - lead];
  return t;
}

int64_t numel(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_text(const Shape &shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

int64_t Tensor::numel() const {
  return ops::numel(shape);
}

bool Tensor::contiguous() const {
  int64_t expected = 1;
  for (int64_t d = rank() - 1; d >= 0; --d) {
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

Shape Tensor::data_shape() const {
  Shape s = shape;
  for (size_t d = 0; d < s.size(); ++d)
    if (strides[d] == 0) s[d] = 1;
  return s;
}

bool Tensor::contiguous_but_broadcast() const {
  int64_t expected = 1;
  for (int64_t d = rank() - 1; d >= 0; --d) {
    if (strides[d] == 0 || shape[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

std::string Tensor::describe() const {
  return fmt::format("{}{}{}", dtype_name(dtype), shape_text(shape),
                     contiguous() ? "" : " strided");
}

Tensor tensor_arg(const trn_ops_tensor_t *t, const char *name, bool optional) {
  Tensor out;
  if (!t) {
    if (optional) return out;
    fail(TRN_ERROR_NULL_POINTER, fmt::format("{} is NULL; pass a tensor", name));
  }
  if (!t->mem) fail(TRN_ERROR_INVALID_HANDLE, fmt::format("{} has no memory (mem is NULL)", name));
  if (t->rank > TRN_OPS_MAX_DIMS)
    invalid(fmt::format("{} has rank {}; at most {} dims are supported", name, t->rank,
                        TRN_OPS_MAX_DIMS));
  if (!dtype_size(t->dtype))
    fail(TRN_ERROR_INVALID_ENUM, fmt::format("{} has dtype {}, which is none of trn's dtypes", name,
                                             static_cast<int>(t->dtype)));
  out.mem = t->mem;
  out.offset = t->offset;
  out.dtype = t->dtype;
  out.shape.assign(t->shape, t->shape + t->rank);
  out.strides.assign(t->strides, t->strides + t->rank);
  trn_mem_info_t info = TRN_MEM_INFO_INIT;
  const trn_result_t r = trn_mem_get_info(t->mem, &info);
  if (r != TRN_SUCCESS)
    fail(r, fmt::format("{}'s memory is not a live allocation ({}); allocate it with "
                        "trn_mem_alloc and keep it until the op completes",
                        name, trn_result_name(r)));
  if (info.kind == TRN_POOL_KIND_HOST)
    invalid(
        fmt::format("{}'s memory is host memory (a TRN_POOL_KIND_HOST pool or registered host "
                    "memory), which the ops' kernels do not read: copy it into an allocation "
                    "of a device pool first",
                    name));
  out.device_index = info.device_index;
  // The last byte the view reads: every dim at its largest index.
  uint64_t last = 0;
  bool empty = false;
  for (uint32_t d = 0; d < t->rank; ++d) {
    if (t->shape[d] < 0)
      invalid(
          fmt::format("{} has shape {}; dims must not be negative", name, shape_text(out.shape)));
    if (t->strides[d] < 0)
      invalid(fmt::format("{} has a negative stride ({} in dim {}); make it contiguous first", name,
                          t->strides[d], d));
    if (t->shape[d] == 0) empty = true;
    const uint64_t extent = static_cast<uint64_t>(t->shape[d] ? t->shape[d] - 1 : 0);
    const uint64_t stride = static_cast<uint64_t>(t->strides[d]);
    if (stride && extent > (uint64_t{1} << 62) / stride)
      invalid(fmt::format("{}'s strides reach too far", name));
    last += extent * stride;
    if (last > (uint64_t{1} << 62)) invalid(fmt::format("{}'s strides reach too far", name));
  }
  const uint64_t size = dtype_size(t->dtype);
  if (!empty && (last + 1 > (UINT64_MAX - t->offset) / size))
    invalid(fmt::format("{}'s strides reach too far", name));
  if (t->offset % size)
    invalid(fmt::format("{}'s offset {} is not a multiple of its element size ({} bytes)", name,
                        t->offset, size));
  out.span_begin = t->offset;
  out.span_end = empty ? t->offset : t->offset + (last + 1) * size;
  if (out.span_end > info.size || out.span_end < t->offset)
    invalid(
        fmt::format("{} {} at offset {} reaches byte {}, past the end of its {}-byte "
                    "allocation",
                    name, out.describe(), t->offset, out.span_end, info.size));
  return out;
}

Shape broadcast_shapes(const Shape &a, const Shape &b, const char *op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      invalid(
          fmt::format("{}: shapes {} and {} do not broadcast (dim {}: {} vs {}; each pair "
                      "must be equal or 1)",
                      op, shape_text(a), shape_text(b), i, da, db));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t normalize_dim(int64_t dim, int64_t rank, const char *op) {
  const int64_t r = rank == 0 ? 1 : rank;  // a scalar has dim 0 (and -1), as in PyTorch
  if (dim < -r || dim >= r)
    invalid(fmt::format("{}: dim {} is out of range for a tensor of rank {} (expected [{}, {}])",
                        op, dim, rank, -r, r - 1));
  return dim < 0 ? dim + r : dim;
}

void check_same_device(const std::vector<const Tensor *> &tensors, const char *op) {
  const Tensor *first = nullptr;
  for (const Tensor *t : tensors) {
    if (!t->present()) continue;
    if (!first) first = t;
    if (t->device_index != first->device_index)
      invalid(
          fmt::format("{}: {} is on device {} and {} on device {}; every tensor of an op "
                      "must be on the queue's device",
                      op, first->describe(), first->device_index, t->describe(), t->device_index));
  }
}

namespace {

bool same_view(const Tensor &a, const Tensor &b) {
  return a.mem == b.mem && a.offset == b.offset && a.dtype == b.dtype && a.shape == b.shape &&
         a.strides == b.strides;
}

// Its elements fill its span: no gaps, nothing read twice.
bool dense(const Tensor &t) {
  return t.span_end - t.span_begin == static_cast<uint64_t>(t.numel()) * t.element_size();
}

// Whether two views of one allocation share a byte: certain when their spans are disjoint, or
// when both are dense; views with gaps (a column of a matrix and its neighbour) may interleave
// without sharing one, and are let through, as PyTorch lets them.
bool partly_overlap(const Tensor &a, const Tensor &b) {
  if (a.mem != b.mem || a.numel() == 0 || b.numel() == 0) return false;
  if (a.span_end <= b.span_begin || b.span_end <= a.span_begin) return false;
  return dense(a) && dense(b);
}

}  // namespace

void check_overlap(const std::vector<const Tensor *> &outputs,
                   const std::vector<const Tensor *> &inputs, const char *op, bool in_place_ok) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor &o = *outputs[i];
    if (!o.present()) continue;
    for (size_t d = 0; d < o.shape.size(); ++d)
      if (o.strides[d] == 0 && o.shape[d] > 1)
        invalid(
            fmt::format("{}: output {} broadcasts dim {} (stride 0): an output's elements "
                        "must be distinct",
                        op, o.describe(), d));
    for (size_t j = i + 1; j < outputs.size(); ++j)
      if (outputs[j]->present() && (same_view(o, *outputs[j]) || partly_overlap(o, *outputs[j])))
        invalid(fmt::format("{}: outputs {} and {} overlap: give each output its own memory", op,
                            o.describe(), outputs[j]->describe()));
    for (const Tensor *in : inputs) {
      if (!in->present()) continue;
      if (same_view(o, *in)) {
        if (in_place_ok) continue;
        invalid(fmt::format("{}: the output {} is also an input: {} does not run in place", op,
                            o.describe(), op));
      }
      if (partly_overlap(o, *in))
        invalid(
            fmt::format("{}: the output {} partly overlaps the input {}: an output may "
                        "only be exactly an input{}",
                        op, o.describe(), in->describe(),
                        in_place_ok ? " (in place)" : ", and not for this op"));
    }
  }
}

void check_shape(const Tensor &t, const Shape &expected, const char *name, const char *op) {
  if (t.shape != expected)
    invalid(
        fmt::format("{}: {} is {}; it must be {}", op, name, t.describe(), shape_text(expected)));
}

}  // namespace trn::ops
