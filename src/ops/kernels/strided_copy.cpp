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

kbuild::Built build_strided_copy(const StridedCopyConfig &c) {
  const std::vector<std::pair<uint64_t, int64_t>> dims = merge_dims(c.dims);
  if (dims.size() > 1 + isa::kMaxFreeDims)
    return fmt::format(
        "strided copy: the view has {} dims after merging; a DMA pattern has at "
        "most {}",
        dims.size(), 1 + isa::kMaxFreeDims);
  uint64_t numel = 1;
  for (const auto &d : dims) {
    numel *= d.first;
    if (d.second > std::numeric_limits<int32_t>::max() ||
        d.first > std::numeric_limits<uint32_t>::max())
      return "strided copy: a stride or size beyond the ISA's 32-bit fields";
  }
  const uint64_t rows = dims[0].first, inner = numel / rows;
  const uint64_t bytes = numel * isa::dtype_size(c.out_dtype);
  const uint64_t parts = std::clamp<uint64_t>(bytes / kBytesPerPart, 1, std::min(kMaxParts, rows));
  isa::ProgramBuilder b(fmt::format("strided_copy_{}_{}", isa::dtype_name(c.dtype), numel));
  const uint16_t x = b.arg("x", c.dtype, {c.span}, isa::ArgDirection::kIn);
  const uint16_t y = b.arg("y", c.out_dtype, {numel}, isa::ArgDirection::kOut);
  for (uint64_t p = 0; p < parts; ++p) {
    const uint64_t r0 = rows * p / parts, r1 = rows * (p + 1) / parts;
    isa::AccessPattern src = isa::hbm(x, c.dtype, r0 * dims[0].second * isa::dtype_size(c.dtype),
                                      dims[0].second, static_cast<uint32_t>(r1 - r0), {});
    src.num_dims = static_cast<uint32_t>(dims.size() - 1);
    for (size_t d = 1; d < dims.size(); ++d)
      src.dims[d - 1] = {static_cast<int32_t>(dims[d].second),
                         static_cast<uint32_t>(dims[d].first)};
    if (dims.size() == 1) {  // one dim: rows of one element
      src.num_dims = 1;
      src.dims[0] = {1, 1};
    }
    const isa::AccessPattern dst = isa::hbm(
        y, c.out_dtype, r0 * inner * isa::dtype_size(c.out_dtype), static_cast<int64_t>(inner),
        static_cast<uint32_t>(r1 - r0), {{1, static_cast<uint32_t>(inner)}});
    b.dma_copy(isa::Engine::kSync, static_cast<uint8_t>(p), dst, src).at();
  }
  isa::Program program = b.finish();
  if (auto err = isa::validate_program(program, c.target.core)) return "strided copy: " + *err;
  return program;
}

}  // namespace trn::ops::kernels
