#include "ops/kernels/strided_copy.hpp"

#include <fmt/format.h>

#include <limits>

#include "isa/builder.hpp"
#include "isa/validate.hpp"

namespace trn::ops::kernels {

namespace {

// Transfers the copy is split into (one DMA queue each), so that a large copy uses several
// queues as the builder's own large loads do; rows of the outer dim are the unit.
constexpr uint64_t kMaxParts = 16;
constexpr uint64_t kBytesPerPart = 1 << 20;

}  // namespace

std::vector<std::pair<uint64_t, int64_t>> merge_dims(
    std::vector<std::pair<uint64_t, int64_t>> dims) {
  std::vector<std::pair<uint64_t, int64_t>> out;
  for (const auto &d : dims) {
    if (d.first == 1) continue;
    // The previous (outer) dim folds into this one when it steps by this one's whole extent.
    if (!out.empty() && out.back().second == d.second * static_cast<int64_t>(d.first)) {
      out.back() = {out.back().first * d.first, d.second};
      continue;
    }
    out.push_back(d);
  }
  if (out.empty()) out.push_back({1, 1});
  return out;
}

namespace {

// A dim of the copy: its size, and its step in x and in y (elements).
struct CopyDim {
  uint64_t size;
  int64_t x, y;
};

// The copy's dims with both views' steps, merged where both views merge (and size-1 dims
// dropped); y's steps are the contiguous ones when it has none of its own.
std::vector<CopyDim> copy_dims(const StridedCopyConfig &c) {
  std::vector<int64_t> y = c.out_strides;
  if (y.empty()) {
    y.assign(c.dims.size(), 1);
    for (size_t d = c.dims.size(); d-- > 1;)
      y[d - 1] = y[d] * static_cast<int64_t>(c.dims[d].first);
  }
  std::vector<CopyDim> out;
  for (size_t d = 0; d < c.dims.size(); ++d) {
    const CopyDim dim{c.dims[d].first, c.dims[d].second, y[d]};
    if (dim.size == 1) continue;
    const auto extent = static_cast<int64_t>(dim.size);
    if (!out.empty() && out.back().x == dim.x * extent && out.back().y == dim.y * extent) {
      out.back() = {out.back().size * dim.size, dim.x, dim.y};
      continue;
    }
    out.push_back(dim);
  }
  if (out.empty()) out.push_back({1, 1, 1});
  return out;
}

}  // namespace

kbuild::Built build_strided_copy(const StridedCopyConfig &c) {
  if (!c.out_strides.empty() && c.out_strides.size() != c.dims.size())
    return "strided copy: y's strides do not match x's dims";
  const std::vector<CopyDim> dims = copy_dims(c);
  if (dims.size() > 1 + isa::kMaxFreeDims)
    return fmt::format(
        "strided copy: the view has {} dims after merging; a DMA pattern has at "
        "most {}",
        dims.size(), 1 + isa::kMaxFreeDims);
  uint64_t numel = 1;
  for (const auto &d : dims) {
    numel *= d.size;
    if (d.x > std::numeric_limits<int32_t>::max() || d.y > std::numeric_limits<int32_t>::max() ||
        d.size > std::numeric_limits<uint32_t>::max())
      return "strided copy: a stride or size beyond the ISA's 32-bit fields";
    if (d.y == 0 && d.size > 1) return "strided copy: y writes one element twice (a stride of 0)";
  }
  const uint64_t rows = dims[0].size;
  const uint64_t bytes = numel * isa::dtype_size(c.out_dtype);
  const uint64_t parts = std::clamp<uint64_t>(bytes / kBytesPerPart, 1, std::min(kMaxParts, rows));
  isa::ProgramBuilder b(fmt::format("strided_copy_{}_{}", isa::dtype_name(c.dtype), numel));
  const uint16_t x = b.arg("x", c.dtype, {c.span}, isa::ArgDirection::kIn);
  const uint16_t y = b.arg("y", c.out_dtype, {c.out_strides.empty() ? numel : c.out_span},
                           isa::ArgDirection::kOut);
  // One view's pattern over rows [r0, r1) of the outer dim: `step` picks its steps.
  auto pattern = [&](uint16_t arg, isa::DType dtype, uint64_t r0, uint64_t r1,
                     int64_t CopyDim::*step) {
    isa::AccessPattern p =
        isa::hbm(arg, dtype, r0 * static_cast<uint64_t>(dims[0].*step) * isa::dtype_size(dtype),
                 dims[0].*step, static_cast<uint32_t>(r1 - r0), {});
    p.num_dims = static_cast<uint32_t>(dims.size() - 1);
    for (size_t d = 1; d < dims.size(); ++d)
      p.dims[d - 1] = {static_cast<int32_t>(dims[d].*step), static_cast<uint32_t>(dims[d].size)};
    if (dims.size() == 1) {  // one dim: rows of one element
      p.num_dims = 1;
      p.dims[0] = {1, 1};
    }
    return p;
  };
  for (uint64_t p = 0; p < parts; ++p) {
    const uint64_t r0 = rows * p / parts, r1 = rows * (p + 1) / parts;
    b.dma_copy(isa::Engine::kSync, static_cast<uint8_t>(p),
               pattern(y, c.out_dtype, r0, r1, &CopyDim::y),
               pattern(x, c.dtype, r0, r1, &CopyDim::x))
        .at();
  }
  isa::Program program = b.finish();
  if (auto err = isa::validate_program(program, c.target.core)) return "strided copy: " + *err;
  return program;
}

}  // namespace trn::ops::kernels
