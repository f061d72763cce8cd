#include "kbuild/tile.hpp"

#include <fmt/format.h>

#include "isa/dtype.hpp"
#include "kbuild/onchip_allocator.hpp"

namespace trn::kbuild {

const char *memory_name(Memory m) {
  return m == Memory::kSbuf ? "SBUF" : "PSUM";
}

Memory Tile::memory() const {
  return ap_.space == isa::MemSpace::kPsum ? Memory::kPsum : Memory::kSbuf;
}

std::vector<uint32_t> Tile::free_shape() const {
  std::vector<uint32_t> shape;
  for (uint32_t d = 0; d < ap_.num_dims; ++d) shape.push_back(ap_.dims[d].count);
  return shape;
}

const std::string &Tile::name() const {
  static const std::string none;
  return buffer_ ? buffer_->name : none;
}

std::string Tile::describe() const {
  if (!valid()) return "an invalid tile";
  std::string shape = std::to_string(partitions());
  for (uint32_t n : free_shape()) shape += ", " + std::to_string(n);
  std::string s = fmt::format("{}.{}[{}]", memory() == Memory::kSbuf ? "sbuf" : "psum",
                              isa::dtype_name(dtype()), shape);
  if (!name().empty()) s += " '" + name() + "'";
  return s;
}

// Views that do not fit give an invalid tile marked as a bad view; the operation that gets one
// reports it (with its own call site).
Tile Tile::failed_view() {
  Tile t;
  t.bad_view_ = true;
  return t;
}

HbmView HbmView::failed_view() {
  HbmView v;
  v.bad_view_ = true;
  return v;
}

namespace {
// [start, start + count) inside [0, size), without overflow.
bool fits(uint64_t start, uint64_t count, uint64_t size) {
  return count != 0 && start <= size && count <= size - start;
}
}  // namespace

Tile Tile::partition_slice(uint32_t start, uint32_t count) const {
  Tile t = *this;
  if (!valid() || !fits(start, count, ap_.partition_count)) return failed_view();
  t.ap_.partition_start += start;
  t.ap_.partition_count = count;
  return t;
}

Tile Tile::slice(uint32_t dim, uint32_t start, uint32_t count) const {
  Tile t = *this;
  if (!valid() || dim >= ap_.num_dims || !fits(start, count, ap_.dims[dim].count))
    return failed_view();
  const isa::Dim d = ap_.dims[dim];
  const int64_t shift = int64_t{d.stride} * start * int64_t(isa::dtype_size(ap_.dtype));
  t.ap_.offset = static_cast<uint64_t>(static_cast<int64_t>(ap_.offset) + shift);
  t.ap_.dims[dim].count = count;
  return t;
}

Tile Tile::cols(uint32_t start, uint32_t count) const {
  if (!valid() || ap_.num_dims == 0) return failed_view();
  return slice(ap_.num_dims - 1, start, count);
}

Tile Tile::broadcast(uint32_t count) const {
  if (!valid() || free_size() != 1 || count == 0) return failed_view();
  Tile t = *this;
  t.ap_.num_dims = 1;
  t.ap_.dims = {};
  t.ap_.dims[0] = {0, count};
  return t;
}

Tile Tile::reshape(std::vector<uint32_t> shape) const {
  if (!valid() || shape.empty() || shape.size() > isa::kMaxFreeDims) return failed_view();
  uint64_t n = 1;
  for (uint32_t c : shape) n *= c;  // at most 4 dims of 32 bits: compared below, not used
  if (n != free_size()) return failed_view();
  // Contiguous: strides are those of a dense row-major array.
  int64_t expect = 1;
  for (uint32_t d = ap_.num_dims; d-- > 0;) {
    if (ap_.dims[d].count > 1 && ap_.dims[d].stride != expect) return failed_view();
    expect *= ap_.dims[d].count;
  }
  Tile t = *this;
  t.ap_.num_dims = static_cast<uint32_t>(shape.size());
  t.ap_.dims = {};
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    t.ap_.dims[d] = {static_cast<int32_t>(stride), shape[d]};
    stride *= shape[d];
  }
  return t;
}

Tile Tile::bitcast(DType dtype) const {
  if (!valid() || isa::dtype_size(dtype) != isa::dtype_size(ap_.dtype)) return failed_view();
  Tile t = *this;
  t.ap_.dtype = dtype;
  return t;
}

HbmTensor::HbmTensor(std::string name, uint16_t arg, DType dtype, std::vector<uint64_t> shape)
    : shape_(std::move(shape)) {
  uint64_t rows = 1;
  for (size_t i = 0; i + 1 < shape_.size(); ++i) rows *= shape_[i];
  view_.name_ = std::move(name);
  view_.arg_ = arg;
  view_.dtype_ = dtype;
  view_.cols_ = shape_.empty() ? 1 : shape_.back();
  view_.rows_ = rows;
  view_.ld_ = view_.cols_;
  view_.row_stride_ = static_cast<int64_t>(view_.ld_);
}

HbmView HbmTensor::as_matrix(uint64_t rows, uint64_t cols) const {
  if (!valid() || rows == 0 || cols == 0 || cols > UINT64_MAX / rows ||
      rows * cols != view_.rows_ * view_.cols_)
    return HbmView::failed_view();
  HbmView v = view_;
  v.rows_ = rows;
  v.cols_ = cols;
  v.ld_ = cols;
  v.row_stride_ = static_cast<int64_t>(cols);
  return v;
}

HbmView HbmView::row_slice(uint64_t start, uint64_t count) const {
  if (!valid() || !fits(start, count, rows_)) return failed_view();
  HbmView v = *this;
  v.row0_ = row0_ + (row_stride_ ? start : 0);
  v.rows_ = count;
  return v;
}

HbmView HbmView::col_slice(uint64_t start, uint64_t count) const {
  if (!valid() || !fits(start, count, cols_)) return failed_view();
  HbmView v = *this;
  v.col0_ = col0_ + start;
  v.cols_ = count;
  return v;
}

HbmView HbmView::broadcast_rows(uint64_t count) const {
  if (!valid() || rows_ != 1 || count == 0 || count > UINT32_MAX) return failed_view();
  HbmView v = *this;
  v.row_stride_ = 0;
  v.rows_ = count;
  return v;
}

std::string HbmView::describe() const {
  if (!valid()) return "an invalid HBM view";
  if (row_stride_ == 0)
    return fmt::format("{}[{}, {}:{}] x{} rows", name_, row0_, col0_, col0_ + cols_, rows_);
  return fmt::format("{}[{}:{}, {}:{}]", name_, row0_, row0_ + rows_, col0_, col0_ + cols_);
}

isa::AccessPattern HbmView::pattern() const {
  isa::AccessPattern ap;
  ap.space = isa::MemSpace::kHbm;
  ap.dtype = dtype_;
  ap.arg = arg_;
  ap.offset = (row0_ * ld_ + col0_) * isa::dtype_size(dtype_);
  ap.partition_stride = row_stride_;
  ap.partition_count = static_cast<uint32_t>(rows_);
  ap.num_dims = 1;
  ap.dims[0] = {1, static_cast<uint32_t>(cols_)};
  return ap;
}

}  // namespace trn::kbuild
