// The values a kernel is written in: HBM tensors (kernel arguments) and on-chip tiles (SBUF or
// PSUM buffers placed by the builder), with views that slice, broadcast and reshape them without
// moving data. A tile keeps its buffer alive; when the last view of a buffer goes away, the
// builder may place another tile there (and orders the reuse after every access to the old one).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "isa/instruction.hpp"

namespace trn::kbuild {

using isa::DType;

enum class Memory : uint8_t { kSbuf, kPsum };
const char *memory_name(Memory m);  // "SBUF", "PSUM"

namespace detail {
struct Buffer;  // an allocation in an on-chip memory (kernel_builder.cpp)
}

// A view of an on-chip buffer: partitions [p, p + n) and up to four free dims (element strides),
// iterated row-major. Default-constructed tiles are invalid (a failed allocation returns one; the
// builder has recorded why).
class Tile {
 public:
  Tile() = default;

  bool valid() const { return buffer_ != nullptr; }
  // True for the result of a view that did not fit its tile (a slice past the end, a reshape
  // of a strided view, ...), as opposed to a tile never made.
  bool bad_view() const { return bad_view_; }
  DType dtype() const { return ap_.dtype; }
  Memory memory() const;
  uint32_t partitions() const { return ap_.partition_count; }
  // The free dims' element counts, outermost first.
  std::vector<uint32_t> free_shape() const;
  uint64_t free_size() const { return ap_.free_elements(); }
  const std::string &name() const;
  // "sbuf.bf16[128, 512] 'x'", for messages.
  std::string describe() const;

  // Partitions [start, start + count) of this view.
  Tile partition_slice(uint32_t start, uint32_t count) const;
  // Elements [start, start + count) of free dim `dim`.
  Tile slice(uint32_t dim, uint32_t start, uint32_t count) const;
  // Elements [start, start + count) of the innermost free dim.
  Tile cols(uint32_t start, uint32_t count) const;
  // A [P, 1] view seen as [P, count]: every column reads the same element (stride 0).
  Tile broadcast(uint32_t count) const;
  // The same elements with other free dims (the view must be contiguous in each partition).
  Tile reshape(std::vector<uint32_t> free_shape) const;
  // The same bytes read as another dtype of the same size: bitwise operators on float values
  // (an exact select is (a ^ b) & mask ^ b on their bit patterns).
  Tile bitcast(DType dtype) const;

  // The access pattern that addresses this view.
  const isa::AccessPattern &pattern() const { return ap_; }

 private:
  friend class KernelBuilder;
  friend class TileRing;
  static Tile failed_view();
  std::shared_ptr<detail::Buffer> buffer_;
  isa::AccessPattern ap_;
  bool bad_view_ = false;
};

// N buffers of one shape, handed out in turn: a loop that takes `next()` each iteration gets a
// fresh buffer while the previous N - 1 may still be loading, computing or storing.
class TileRing {
 public:
  TileRing() = default;
  explicit TileRing(std::vector<Tile> buffers) : buffers_(std::move(buffers)) {}
  bool valid() const { return !buffers_.empty() && buffers_.front().valid(); }
  size_t size() const { return buffers_.size(); }
  Tile next() {
    if (buffers_.empty()) return {};
    return buffers_[turn_++ % buffers_.size()];
  }
  Tile operator[](size_t i) const {
    return buffers_.empty() ? Tile{} : buffers_[i % buffers_.size()];
  }

 private:
  std::vector<Tile> buffers_;
  size_t turn_ = 0;
};

// A rectangle of a kernel argument seen as a row-major matrix [rows, cols] (the argument's
// leading dims flattened into rows, its last dim as cols).
class HbmView {
 public:
  HbmView() = default;
  bool valid() const { return dtype_ != DType::kInvalid; }
  // True for a view that did not fit its tensor (rows or columns past the end).
  bool bad_view() const { return bad_view_; }
  DType dtype() const { return dtype_; }
  uint64_t rows() const { return rows_; }
  uint64_t cols() const { return cols_; }
  uint16_t arg() const { return arg_; }

  HbmView row_slice(uint64_t start, uint64_t count) const;
  HbmView col_slice(uint64_t start, uint64_t count) const;
  HbmView tile(uint64_t row, uint64_t rows, uint64_t col, uint64_t cols) const {
    return row_slice(row, rows).col_slice(col, cols);
  }
  // A one-row view read `count` times (row stride 0): broadcasting along partitions.
  HbmView broadcast_rows(uint64_t count) const;
  // "x[0:128, 512:1024]", for messages.
  std::string describe() const;

  // The DMA pattern: `rows` rows of `cols` contiguous elements.
  isa::AccessPattern pattern() const;

 private:
  friend class KernelBuilder;
  friend class HbmTensor;
  static HbmView failed_view();
  std::string name_;
  bool bad_view_ = false;
  uint16_t arg_ = 0;
  DType dtype_ = DType::kInvalid;
  uint64_t ld_ = 0;         // elements between rows of the argument
  int64_t row_stride_ = 0;  // elements between rows of this view (0: broadcast)
  uint64_t row0_ = 0, col0_ = 0, rows_ = 0, cols_ = 0;
};

// A tensor argument of the kernel, in HBM.
class HbmTensor {
 public:
  HbmTensor() = default;
  bool valid() const { return view_.valid(); }
  uint16_t arg() const { return view_.arg_; }
  DType dtype() const { return view_.dtype_; }
  const std::vector<uint64_t> &shape() const { return shape_; }
  HbmView view() const { return view_; }
  HbmView row_slice(uint64_t start, uint64_t count) const { return view_.row_slice(start, count); }
  HbmView tile(uint64_t row, uint64_t rows, uint64_t col, uint64_t cols) const {
    return view_.tile(row, rows, col, cols);
  }
  uint64_t rows() const { return view_.rows_; }
  uint64_t cols() const { return view_.cols_; }
  // The same elements seen as another row-major matrix (rows * cols must be its size).
  HbmView as_matrix(uint64_t rows, uint64_t cols) const;

 private:
  friend class KernelBuilder;
  HbmTensor(std::string name, uint16_t arg, DType dtype, std::vector<uint64_t> shape);
  std::vector<uint64_t> shape_;
  HbmView view_;
};

// A scalar kernel argument (f32 or i32), passed at launch; usable wherever an operand may be an
// immediate.
struct ScalarArg {
  uint16_t arg = isa::kNoScalarArg;
  DType dtype = DType::kF32;
  bool valid() const { return arg != isa::kNoScalarArg; }
};

}  // namespace trn::kbuild
