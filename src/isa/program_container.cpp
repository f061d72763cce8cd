// The program binary (format version 1). Every multi-byte value is little endian; every record
// is written and read field by field; all padding and reserved fields are 0 and the reader
// rejects anything else. The ELF wrapping is elf_file's.
//
// .trn.program (32 bytes + name_len + 1, zero padding to 8)
//   0 magic u32 "TRNP"   4 version u32 (1; 2 with constants from safetensors files)   8
//   kernel_count u32   12 tensor_count u32
//  16 step_count u32    20 name_len u32 (0..63)   24 reserved u64
//  32 the program's name, name_len bytes, NUL
//
// .trn.kernels: kernel_count records: 0 size u64, then a kernel container of `size` bytes,
//   zero padding to 8
//
// .trn.tensors: tensor_count records of 16 + 8 * rank + pad8(name_len + 1) bytes
//   0 name_len u32 (1..63)   4 role u8 (1 input, 2 output, 3 inout, 4 constant, 5 internal)
//   5 dtype u8   6 rank u8 (1..8)
//   7 source u8: 0 inline, 1 a safetensors file (version 2, constants only; 0 in version 1)
//   8 data offset u64: an inline constant's bytes in .trn.data (0 otherwise)
//  16 shape u64 x rank, then the name, NUL, zero padding to a multiple of 8
//     source 1, then: file_len u32 (1..4096), tensor_len u32 (1..4096), the file's path, NUL,
//     the tensor's name in the file, NUL, zero padding to a multiple of 8
//
// .trn.data: each constant's bytes, in tensor order, each starting 8-byte aligned (zero padding
//   between and after); nothing else
//
// .trn.steps: step_count records
//   0 kind u8 (1 launch, 2 copy, 3 memset)   1 value u8 (memset; else 0)   2 reserved u16
//   4 core u32 (< 64)   8 dep_count u32   12 arg_count u32 (launch; else 0)
//  16 kernel u32 (launch; else 0)   20 reserved u32
//  24 launch: arg_count records of 16 bytes: 0 kind u32 (1 tensor, 2 scalar)
//             4 tensor u32 (tensor) or the value's bits (scalar)   8 offset u64 (scalar: 0)
//     copy:   0 dst tensor u32   4 src tensor u32   8 dst offset u64   16 src offset u64
//             24 bytes u64 (32 bytes)
//     memset: 0 dst tensor u32   4 reserved u32   8 dst offset u64   16 bytes u64 (24 bytes)
//   then the dependencies, u32 each (earlier steps, ascending), zero padding to 8
#include "isa/program_container.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <set>

#include "isa/byte_io.hpp"
#include "isa/container.hpp"
#include "isa/elf_file.hpp"

namespace trn::isa {

namespace {

using bytes::Cursor;
using bytes::Error;
using bytes::Out;
using bytes::pad_to;
using bytes::read_cstring;
using bytes::read_padding;

constexpr size_t kProgramHeaderSize = 32;
constexpr size_t kTensorHeaderSize = 16;
constexpr size_t kStepHeaderSize = 24;
constexpr size_t kLaunchArgSize = 16;
constexpr size_t kCopyRecordSize = 32;
constexpr size_t kMemsetRecordSize = 24;
constexpr uint32_t kArgTensor = 1, kArgScalar = 2;
constexpr uint8_t kSourceInline = 0, kSourceFile = 1;
constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 40;

constexpr std::array<std::string_view, 5> kSections = {".trn.program", ".trn.tensors", ".trn.steps",
                                                       ".trn.kernels", ".trn.data"};
enum Section { kMeta, kTensors, kSteps, kKernels, kData };

}  // namespace

const char *tensor_role_name(TensorRole role) {
  switch (role) {
    case TensorRole::kInput: return "input";
    case TensorRole::kOutput: return "output";
    case TensorRole::kInOut: return "inout";
    case TensorRole::kConstant: return "constant";
    case TensorRole::kInternal: return "internal";
  }
  return "unknown";
}

bool is_tensor_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == ':' || c == '/' || c == '-';
}

std::string describe_tensor(const ProgramTensor &t) {
  return std::string(tensor_role_name(t.role)) + " tensor '" + t.name + "'";
}

const char *step_kind_name(StepKind kind) {
  switch (kind) {
    case StepKind::kLaunch: return "launch";
    case StepKind::kCopy: return "copy";
    case StepKind::kMemset: return "memset";
  }
  return "unknown";
}

uint64_t ProgramTensor::bytes() const {
  uint64_t n = dtype_size(dtype);
  for (uint64_t s : shape) n *= s;
  return n;
}

std::vector<std::byte> write_program(const ProgramImage &p) {
  std::array<Out, kSections.size()> sec;
  Out &m = sec[kMeta];
  m.u32(kProgramMagic);
  const bool files = std::any_of(p.tensors.begin(), p.tensors.end(),
                                 [](const ProgramTensor &t) { return t.from_file(); });
  m.u32(files ? kProgramFormatVersionFiles : kProgramFormatVersion);
  m.u32(static_cast<uint32_t>(p.kernels.size()));
  m.u32(static_cast<uint32_t>(p.tensors.size()));
  m.u32(static_cast<uint32_t>(p.steps.size()));
  m.u32(static_cast<uint32_t>(p.name.size()));
  m.u64(0);
  m.str(p.name);
  m.u8(0);
  m.pad(8);

  for (const auto &k : p.kernels) {
    sec[kKernels].u64(k.size());
    sec[kKernels].bytes(k);
    sec[kKernels].pad(8);
  }

  for (const ProgramTensor &t : p.tensors) {
    Out &o = sec[kTensors];
    o.u32(static_cast<uint32_t>(t.name.size()));
    o.u8(static_cast<uint8_t>(t.role));
    o.u8(static_cast<uint8_t>(t.dtype));
    o.u8(static_cast<uint8_t>(t.shape.size()));
    o.u8(t.from_file() ? kSourceFile : kSourceInline);
    const bool inline_data = t.role == TensorRole::kConstant && !t.from_file();
    o.u64(inline_data ? sec[kData].size() : 0);
    for (uint64_t s : t.shape) o.u64(s);
    o.str(t.name);
    o.u8(0);
    o.pad(8);
    if (t.from_file()) {
      o.u32(static_cast<uint32_t>(t.source_file.size()));
      o.u32(static_cast<uint32_t>(t.source_tensor.size()));
      o.str(t.source_file);
      o.u8(0);
      o.str(t.source_tensor);
      o.u8(0);
      o.pad(8);
    }
    if (inline_data) {
      sec[kData].bytes(t.data);
      sec[kData].pad(8);
    }
  }

  for (const ProgramStep &s : p.steps) {
    Out &o = sec[kSteps];
    const bool launch = s.kind == StepKind::kLaunch;
    o.u8(static_cast<uint8_t>(s.kind));
    o.u8(s.kind == StepKind::kMemset ? s.value : 0);
    o.u16(0);
    o.u32(s.core);
    o.u32(static_cast<uint32_t>(s.deps.size()));
    o.u32(launch ? static_cast<uint32_t>(s.args.size()) : 0);
    o.u32(launch ? s.kernel : 0);
    o.u32(0);
    switch (s.kind) {
      case StepKind::kLaunch:
        for (const StepArg &a : s.args) {
          o.u32(a.scalar ? kArgScalar : kArgTensor);
          o.u32(a.scalar ? a.scalar_bits : a.ref.tensor);
          o.u64(a.scalar ? 0 : a.ref.offset);
        }
        break;
      case StepKind::kCopy:
        o.u32(s.dst.tensor);
        o.u32(s.src.tensor);
        o.u64(s.dst.offset);
        o.u64(s.src.offset);
        o.u64(s.bytes);
        break;
      case StepKind::kMemset:
        o.u32(s.dst.tensor);
        o.u32(0);
        o.u64(s.dst.offset);
        o.u64(s.bytes);
        break;
    }
    for (uint32_t d : s.deps) o.u32(d);
    o.pad(8);
  }

  std::vector<ElfSectionOut> out;
  for (size_t i = 0; i < kSections.size(); ++i)
    out.push_back({kSections[i], 0, std::move(sec[i].data())});
  return write_elf(kElfTypeTrnProgram, out);
}

bool looks_like_program(std::span<const std::byte> data) {
  return is_elf_of_type(data, kElfTypeTrnProgram);
}

namespace {

class ProgramReader {
 public:
  ProgramReader(ProgramImage &out, std::vector<Program> &kernels) : p_(out), kernels_(kernels) {}

  Error read(std::span<const std::byte> data) {
    std::vector<ElfSectionIn> sections;
    if (auto e = read_elf(data, kElfTypeTrnProgram, "a trn program", sections)) return e;
    if (sections.size() != kSections.size())
      return fmt::format("{} sections besides .shstrtab; a program has {} ({})", sections.size(),
                         kSections.size(), fmt::join(kSections, ", "));
    for (size_t i = 0; i < kSections.size(); ++i) {
      if (sections[i].name != kSections[i])
        return fmt::format("section {} is '{}'; expected {}", i + 1, sections[i].name,
                           kSections[i]);
      if (sections[i].entsize != 0)
        return fmt::format("section {}: entry size {}; expected 0", kSections[i],
                           sections[i].entsize);
      sec_[i] = sections[i].data;
    }
    p_ = ProgramImage{};
    kernels_.clear();
    if (auto e = read_meta()) return e;
    if (auto e = read_kernels()) return e;
    if (auto e = read_tensors()) return e;
    return read_steps();
  }

 private:
  static Error in(Section s, Error e) {
    if (e) return fmt::format("section {}: {}", kSections[s], *e);
    return e;
  }
  // The section's bytes must all have been read.
  static Error finished(Section s, const Cursor &c) {
    if (c.remaining() == 0) return std::nullopt;
    return fmt::format("section {}: {} bytes after the last record", kSections[s], c.remaining());
  }

  Error read_meta() {
    Cursor c(sec_[kMeta]);
    if (!c.has(kProgramHeaderSize))
      return in(kMeta, fmt::format("{} bytes; the header alone is {}", sec_[kMeta].size(),
                                   kProgramHeaderSize));
    if (const uint32_t magic = c.u32(); magic != kProgramMagic)
      return in(kMeta, fmt::format("magic 0x{:08x} is not \"TRNP\"", magic));
    version_ = c.u32();
    if (version_ != kProgramFormatVersion && version_ != kProgramFormatVersionFiles)
      return in(kMeta,
                fmt::format("format version {}; this trn reads versions {} and {} (a later trn "
                            "wrote it?)",
                            version_, kProgramFormatVersion, kProgramFormatVersionFiles));
    kernel_count_ = c.u32();
    tensor_count_ = c.u32();
    step_count_ = c.u32();
    const uint32_t name_len = c.u32();
    if (c.u64() != 0) return in(kMeta, "reserved field is not zero");
    if (kernel_count_ > kMaxProgramKernels || tensor_count_ > kMaxProgramTensors ||
        step_count_ > kMaxProgramSteps)
      return in(kMeta, fmt::format("{} kernels, {} tensors, {} steps; at most {}, {} and {}",
                                   kernel_count_, tensor_count_, step_count_, kMaxProgramKernels,
                                   kMaxProgramTensors, kMaxProgramSteps));
    if (auto e = read_cstring(c, name_len, kMaxProgramNameLength, "program name", p_.name))
      return in(kMeta, e);
    if (auto e = read_padding(c, 8, "program name")) return in(kMeta, e);
    return finished(kMeta, c);
  }

  Error read_kernels() {
    Cursor c(sec_[kKernels]);
    for (uint32_t i = 0; i < kernel_count_; ++i) {
      const std::string what = fmt::format("kernel {}", i);
      if (!c.has(8)) return in(kKernels, what + ": its size runs past the end");
      const uint64_t size = c.u64();
      if (!c.has(size))
        return in(kKernels, fmt::format("{}: {} bytes run past the end ({} left)", what, size,
                                        c.remaining()));
      auto image = c.take(size);
      Program k;
      if (auto e = read_kernel(image, k)) return in(kKernels, what + ": " + *e);
      if (auto e = read_padding(c, 8, what)) return in(kKernels, e);
      p_.kernels.emplace_back(image.begin(), image.end());
      kernels_.push_back(std::move(k));
    }
    return finished(kKernels, c);
  }

  Error read_tensors() {
    Cursor c(sec_[kTensors]);
    std::set<std::string, std::less<>> names;
    uint64_t data_end = 0;  // where the next inline constant's bytes start
    uint32_t file_constants = 0;
    for (uint32_t i = 0; i < tensor_count_; ++i) {
      const std::string what = fmt::format("tensor {}", i);
      if (!c.has(kTensorHeaderSize)) return in(kTensors, what + ": record runs past the end");
      ProgramTensor t;
      const uint32_t name_len = c.u32();
      const uint8_t role = c.u8(), dtype = c.u8(), rank = c.u8(), source = c.u8();
      const uint64_t data_offset = c.u64();
      if (role < 1 || role > 5)
        return in(kTensors,
                  fmt::format("{}: role {} is not 1 (input) .. 5 (internal)", what, role));
      t.role = static_cast<TensorRole>(role);
      t.dtype = static_cast<DType>(dtype);
      if (!dtype_is_valid(t.dtype))
        return in(kTensors, fmt::format("{}: dtype {} is not a trn dtype", what, dtype));
      if (rank < 1 || rank > kMaxArgRank)
        return in(kTensors, fmt::format("{}: rank {}; a tensor has 1 to {} dimensions", what, rank,
                                        kMaxArgRank));
      if (source != kSourceInline &&
          (source != kSourceFile || version_ < kProgramFormatVersionFiles))
        return in(kTensors,
                  version_ < kProgramFormatVersionFiles
                      ? what + ": reserved byte is not zero"
                      : fmt::format("{}: source {} is not 0 (inline) or 1 (a safetensors file)",
                                    what, source));
      if (!c.has(uint64_t{rank} * 8)) return in(kTensors, what + ": shape runs past the end");
      uint64_t bytes = dtype_size(t.dtype);
      for (uint32_t d = 0; d < rank; ++d) {
        const uint64_t s = c.u64();
        if (s == 0 || s > kMaxTensorBytes || bytes > kMaxTensorBytes / s)
          return in(kTensors, fmt::format("{}: dimension {} is {}; tensors are 1 byte to 1 TiB "
                                          "with no empty dimension",
                                          what, d, s));
        bytes *= s;
        t.shape.push_back(s);
      }
      if (auto e = read_cstring(c, name_len, kMaxTensorNameLength, what + " name", t.name))
        return in(kTensors, e);
      if (t.name.empty()) return in(kTensors, what + " has no name");
      if (!std::all_of(t.name.begin(), t.name.end(), is_tensor_name_char))
        return in(kTensors, fmt::format("{} name '{}' has a character outside [A-Za-z0-9_.:/-]",
                                        what, t.name));
      if (!names.insert(t.name).second)
        return in(kTensors, fmt::format("{}: a tensor named '{}' comes before it", what, t.name));
      if (auto e = read_padding(c, 8, what)) return in(kTensors, e);
      if (source == kSourceFile) {
        if (auto e = read_source(c, t, what)) return in(kTensors, e);
        if (data_offset != 0)
          return in(kTensors, fmt::format("{} ('{}'): data offset {}; its data is in a file", what,
                                          t.name, data_offset));
        ++file_constants;
      } else if (t.role == TensorRole::kConstant) {
        if (data_offset != data_end)
          return in(kTensors,
                    fmt::format("{} ('{}'): its data is at offset {} of .trn.data; the next "
                                "constant's is at {}",
                                what, t.name, data_offset, data_end));
        if (bytes > sec_[kData].size() - data_end)
          return in(kTensors, fmt::format("{} ('{}'): its {} bytes run past the end of .trn.data",
                                          what, t.name, bytes));
        auto d = sec_[kData].subspan(static_cast<size_t>(data_end), static_cast<size_t>(bytes));
        t.data.assign(d.begin(), d.end());
        data_end = pad_to(data_end + bytes, 8);
        if (data_end > sec_[kData].size())
          return fmt::format("section .trn.data: padding after tensor '{}' runs past the end",
                             t.name);
        for (uint64_t b = data_offset + bytes; b < data_end; ++b)
          if (sec_[kData][static_cast<size_t>(b)] != std::byte{0})
            return fmt::format("section .trn.data: padding byte {} is not zero", b);
      } else if (data_offset != 0) {
        return in(kTensors, fmt::format("{} ('{}', {}): data offset {}; only constants have data",
                                        what, t.name, tensor_role_name(t.role), data_offset));
      }
      p_.tensors.push_back(std::move(t));
    }
    if (data_end != sec_[kData].size())
      return fmt::format("section .trn.data: {} bytes after the last constant",
                         sec_[kData].size() - data_end);
    if (version_ == kProgramFormatVersionFiles && file_constants == 0)
      return in(kMeta, fmt::format("format version {} without constants from files; such a "
                                   "program is stored as version {}",
                                   version_, kProgramFormatVersion));
    return finished(kTensors, c);
  }

  // Where a constant's bytes come from: a safetensors file and the tensor in it.
  static Error read_source(Cursor &c, ProgramTensor &t, const std::string &what) {
    if (t.role != TensorRole::kConstant)
      return fmt::format("{} ('{}', {}) names a file; only constants come from files", what, t.name,
                         tensor_role_name(t.role));
    if (!c.has(8)) return what + ": its source runs past the end";
    const uint32_t file_len = c.u32(), tensor_len = c.u32();
    if (file_len == 0 || tensor_len == 0)
      return fmt::format("{} ('{}'): an empty file path or tensor name", what, t.name);
    if (auto e =
            read_cstring(c, file_len, kMaxSourcePathLength, what + " source file", t.source_file))
      return e;
    if (auto e = read_cstring(c, tensor_len, kMaxSourceTensorLength, what + " source tensor",
                              t.source_tensor))
      return e;
    return read_padding(c, 8, what + " source");
  }

  // A tensor range a step names: the tensor exists, the range lies inside it, and a written one
  // is not the caller's input or the program's constants.
  Error check_range(const std::string &what, const TensorRef &ref, uint64_t bytes, bool written) {
    if (ref.tensor >= p_.tensors.size())
      return fmt::format("{} names tensor {}; the program has {}", what, ref.tensor,
                         p_.tensors.size());
    const ProgramTensor &t = p_.tensors[ref.tensor];
    const uint64_t size = t.bytes();
    if (ref.offset > size || bytes > size - ref.offset)
      return fmt::format("{}: bytes {}..{} of tensor '{}' are outside its {} bytes", what,
                         ref.offset, ref.offset + bytes, t.name, size);
    if (written && (t.role == TensorRole::kInput || t.role == TensorRole::kConstant))
      return fmt::format("{} writes {} tensor '{}', which the program only reads", what,
                         tensor_role_name(t.role), t.name);
    return std::nullopt;
  }

  Error read_launch(Cursor &c, ProgramStep &s, uint32_t arg_count, const std::string &what) {
    if (s.kernel >= kernels_.size())
      return fmt::format("{} launches kernel {}; the program has {}", what, s.kernel,
                         kernels_.size());
    const Program &k = kernels_[s.kernel];
    const std::string label = fmt::format("{} (launch of kernel '{}')", what, k.name);
    if (arg_count != k.args.size())
      return fmt::format("{}: {} arguments; the kernel takes {}", label, arg_count, k.args.size());
    if (!c.has(uint64_t{arg_count} * kLaunchArgSize))
      return fmt::format("{}: arguments run past the end", label);
    for (uint32_t a = 0; a < arg_count; ++a) {
      const Argument &arg = k.args[a];
      const std::string arg_what = fmt::format("{}: argument '{}'", label, arg.name);
      const uint32_t kind = c.u32(), value = c.u32();
      const uint64_t offset = c.u64();
      StepArg sa;
      if (kind != kArgTensor && kind != kArgScalar)
        return fmt::format("{}: binding kind {} is not 1 (tensor) or 2 (scalar)", arg_what, kind);
      sa.scalar = kind == kArgScalar;
      if (sa.scalar != arg.is_scalar())
        return fmt::format("{} is a {} argument but bound as a {}", arg_what,
                           arg.is_scalar() ? "scalar" : "tensor", sa.scalar ? "scalar" : "tensor");
      if (sa.scalar) {
        if (offset != 0) return fmt::format("{}: a scalar's offset field must be 0", arg_what);
        sa.scalar_bits = value;
      } else {
        sa.ref = {value, offset};
        if (auto e = check_range(arg_what, sa.ref, arg.bytes(), arg.direction != ArgDirection::kIn))
          return e;
      }
      s.args.push_back(sa);
    }
    return std::nullopt;
  }

  Error read_steps() {
    Cursor c(sec_[kSteps]);
    for (uint32_t i = 0; i < step_count_; ++i) {
      const std::string what = fmt::format("step {}", i);
      if (!c.has(kStepHeaderSize)) return in(kSteps, what + ": record runs past the end");
      ProgramStep s;
      const uint8_t kind = c.u8(), value = c.u8();
      const uint16_t reserved16 = c.u16();
      s.core = c.u32();
      const uint32_t dep_count = c.u32(), arg_count = c.u32();
      s.kernel = c.u32();
      const uint32_t reserved32 = c.u32();
      if (kind < 1 || kind > 3)
        return in(kSteps,
                  fmt::format("{}: kind {} is not 1 (launch), 2 (copy) or 3 (memset)", what, kind));
      s.kind = static_cast<StepKind>(kind);
      if (reserved16 != 0 || reserved32 != 0)
        return in(kSteps, what + ": reserved field is not zero");
      if (s.core >= kMaxProgramCores)
        return in(kSteps,
                  fmt::format("{}: core {}; at most {}", what, s.core, kMaxProgramCores - 1));
      if (s.kind != StepKind::kLaunch && (arg_count != 0 || s.kernel != 0))
        return in(kSteps, fmt::format("{} ({}): argument count and kernel must be 0", what,
                                      step_kind_name(s.kind)));
      if (s.kind != StepKind::kMemset && value != 0)
        return in(kSteps, fmt::format("{} ({}): value must be 0", what, step_kind_name(s.kind)));
      s.value = value;
      if (s.kind == StepKind::kLaunch) {
        if (auto e = read_launch(c, s, arg_count, what)) return in(kSteps, e);
      } else {
        const bool copy = s.kind == StepKind::kCopy;
        if (!c.has(copy ? kCopyRecordSize : kMemsetRecordSize))
          return in(kSteps, what + ": record runs past the end");
        s.dst.tensor = c.u32();
        const uint32_t second = c.u32();
        s.dst.offset = c.u64();
        if (copy) {
          s.src = {second, c.u64()};
        } else if (second != 0) {
          return in(kSteps, what + " (memset): reserved field is not zero");
        }
        s.bytes = c.u64();
        const std::string label = fmt::format("{} ({})", what, step_kind_name(s.kind));
        if (s.bytes == 0) return in(kSteps, label + " moves 0 bytes");
        if (auto e = check_range(label + " destination", s.dst, s.bytes, true))
          return in(kSteps, e);
        if (copy)
          if (auto e = check_range(label + " source", s.src, s.bytes, false)) return in(kSteps, e);
      }
      if (dep_count > kMaxStepDependencies || !c.has(uint64_t{dep_count} * 4))
        return in(kSteps, fmt::format("{}: {} dependencies run past the end", what, dep_count));
      for (uint32_t d = 0; d < dep_count; ++d) {
        const uint32_t dep = c.u32();
        if (dep >= i || (!s.deps.empty() && dep <= s.deps.back()))
          return in(kSteps, fmt::format("{}: dependency {} is not an earlier step in ascending "
                                        "order",
                                        what, dep));
        s.deps.push_back(dep);
      }
      if (auto e = read_padding(c, 8, what)) return in(kSteps, e);
      p_.steps.push_back(std::move(s));
    }
    return finished(kSteps, c);
  }

  ProgramImage &p_;
  std::vector<Program> &kernels_;
  std::array<std::span<const std::byte>, kSections.size()> sec_;
  uint32_t kernel_count_ = 0, tensor_count_ = 0, step_count_ = 0;
  uint32_t version_ = 0;
};

}  // namespace

std::optional<std::string> read_program(std::span<const std::byte> data, ProgramImage &out,
                                        std::vector<Program> *kernels) {
  std::vector<Program> local;
  ProgramReader reader(out, kernels ? *kernels : local);
  return reader.read(data);
}

}  // namespace trn::isa
