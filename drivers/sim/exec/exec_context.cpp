#include "exec/exec_context.hpp"

#include <fmt/format.h>

#include "isa/dtype.hpp"

namespace trn::sim::exec {

namespace {

__extension__ typedef __int128 Wide;  // byte extents of 4 dims x 2^32 counts overflow int64

const char *space_name(isa::MemSpace s) {
  switch (s) {
    case isa::MemSpace::kSbuf: return "SBUF";
    case isa::MemSpace::kPsum: return "PSUM";
    case isa::MemSpace::kHbm: return "HBM";
    case isa::MemSpace::kNone: break;
  }
  return "no memory";
}

}  // namespace

ExecContext::ExecContext(CoreMemory &memory, std::span<const HbmBinding> args,
                         std::span<const std::byte> constants,
                         std::span<const std::string> arg_names)
    : memory_(memory), args_(args), constants_(constants), arg_names_(arg_names) {}

Tile ExecContext::resolve(const isa::AccessPattern &ap, const char *what) const {
  Tile t;
  t.space = ap.space;
  t.dtype = ap.dtype;
  t.elem_size = isa::dtype_size(ap.dtype);
  t.partitions = ap.partition_count;
  t.num_dims = std::min(ap.num_dims, isa::kMaxFreeDims);
  if (t.elem_size == 0) throw ExecFault(fmt::format("{} has no valid dtype", what));
  // Byte extent of one partition's free elements relative to `offset`: [lo, hi).
  Wide lo = 0, hi = t.elem_size;
  for (uint32_t d = 0; d < t.num_dims; ++d) {
    t.counts[d] = ap.dims[d].count;
    t.strides[d] = ptrdiff_t{ap.dims[d].stride} * t.elem_size;
    t.free_elements *= ap.dims[d].count;
    if (ap.dims[d].count == 0) continue;
    const Wide span = Wide{t.strides[d]} * (ap.dims[d].count - 1);
    (span < 0 ? lo : hi) += span;
  }
  if (t.partitions == 0 || t.free_elements == 0) return t;  // touches nothing

  if (ap.space == isa::MemSpace::kSbuf || ap.space == isa::MemSpace::kPsum) {
    const bool sbuf = ap.space == isa::MemSpace::kSbuf;
    const uint32_t bytes = sbuf ? memory_.sbuf_bytes() : memory_.psum_bytes();
    if (uint64_t{ap.partition_start} + ap.partition_count > memory_.partitions())
      throw ExecFault(fmt::format("{} partitions {}..{} are outside the {} {} partitions", what,
                                  ap.partition_start,
                                  uint64_t{ap.partition_start} + ap.partition_count - 1,
                                  memory_.partitions(), space_name(ap.space)));
    const Wide first = Wide{ap.offset} + lo, end = Wide{ap.offset} + hi;
    if (first < 0 || end > bytes)
      throw ExecFault(
          fmt::format("{} reaches bytes [{}, {}) of each {} partition, which has {} bytes", what,
                      first, end, space_name(ap.space), bytes));
    t.partition_pitch = sbuf ? memory_.sbuf_pitch() : memory_.psum_pitch();
    t.base = sbuf ? memory_.sbuf(ap.partition_start, ap.offset)
                  : memory_.psum(ap.partition_start, ap.offset);
    return t;
  }
  if (ap.space != isa::MemSpace::kHbm) throw ExecFault(fmt::format("{} has no memory", what));

  std::byte *data = nullptr;
  uint64_t bytes = 0;
  std::string name;
  if (ap.arg == isa::kConstantsArg) {
    // Read-only by validation (no instruction writes the constants block).
    data = const_cast<std::byte *>(constants_.data());
    bytes = constants_.size();
    name = "the constants block";
  } else if (ap.arg < args_.size()) {
    data = args_[ap.arg].data;
    bytes = args_[ap.arg].bytes;
    name = ap.arg < arg_names_.size()
               ? fmt::format("argument {} ('{}')", ap.arg, arg_names_[ap.arg])
               : fmt::format("argument {}", ap.arg);
  } else {
    throw ExecFault(
        fmt::format("{} names argument {} but the launch bound {}", what, ap.arg, args_.size()));
  }
  t.partition_pitch = static_cast<ptrdiff_t>(ap.partition_stride * t.elem_size);
  const Wide rows = Wide{t.partition_pitch} * (ap.partition_count - 1);
  (rows < 0 ? lo : hi) += rows;
  const Wide first = Wide{ap.offset} + lo, end = Wide{ap.offset} + hi;
  if (first < 0 || end > Wide{bytes} || data == nullptr)
    throw ExecFault(fmt::format("{} reaches bytes [{}, {}) of {}, which has {} bytes", what, first,
                                end, name, bytes));
  t.base = data + ap.offset;
  return t;
}

float *ExecContext::scratch(unsigned slot, size_t floats) {
  auto &v = scratch_[slot % 4];
  if (v.size() < floats) v.resize(floats);
  return v.data();
}

}  // namespace trn::sim::exec
