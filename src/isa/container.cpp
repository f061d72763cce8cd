// The kernel binary (format versions 1, 2 and 3; 2 only for kernels with scalar arguments, 3
// only for kernels whose instructions come from more than one source file). Every
// multi-byte value is little endian; every record is written and read field by field (never a
// struct copy); all padding and reserved fields are 0 and the reader rejects anything else.
//
// ELF64 header (64 bytes, at offset 0), section headers (64 bytes each, e_shoff, at the end).
//
// .trn.meta (48 bytes + name_len + 1, type PROGBITS, align 8)
//   0 magic u32 "TRNK"      4 version u32 (1; 2 with scalar arguments; 3 with several source
//                                                  files)                   8 arg_count u32
//  12 instruction count u32 per engine (tensor, vector, scalar, gpsimd, sync)
//  32 name_len u32         36 reserved u32            40 constants size u64
//  48 kernel name, name_len bytes, NUL
//
// .trn.args (PROGBITS, align 8): arg_count records of 8 + 8 * rank + pad8(name_len + 1) bytes
//   0 name_len u32   4 dtype u8   5 direction u8   6 rank u8
//   7 kind u8: 0 tensor, 1 scalar (version 2; reserved 0 in version 1); a scalar has rank 0,
//     direction in, dtype f32 or i32
//   8 shape u64 x rank, then the name, NUL, zero padding to a multiple of 8
//
// .trn.text.<engine> (PROGBITS, align 8, entsize 368): one record per instruction
//   0 opcode u8     1 engine u8     2 func u8      3 func2 u8     4 queue u8
//   5 wait.cmp u8   6 signal.op u8  7 reserved u8  8 flags u32
//   (wait.sem / wait.value are zero without wait.cmp, signal.sem / .value without signal.op)
//  12 wait.sem u16 14 signal.sem u16  16 wait.value u32  20 signal.value u32
//  24 imm[0] f32   28 imm[1] f32      32 iimm[0] i32     36 iimm[1] i32
//  40 scalar slots u16 x 4, for imm[0], imm[1], iimm[0], iimm[1]: 0, or 1 + the index of the
//     scalar argument the slot reads (then the slot's own value is 0). Version 2; zero in 1.
//  48 dst, 112 dst2, 176 src0, 240 src1, 304 src2: access patterns of 64 bytes:
//     0 space u8  1 dtype u8  2 arg u16 (0, an argument or 0xFFFF)  4 num_dims u32
//     8 partition_start u32
//    12 partition_count u32  16 partition_stride i64  24 offset u64
//    32 dims[4]: stride i32, count u32 (the dims past num_dims are zero)
//
// .trn.const (PROGBITS, align 8): the constants block, as is.
//
// .trn.debug (PROGBITS, align 8, optional)
//   0 file_len u32   4 line count u32 per engine (0 or that engine's instruction count)
//  24 source file name, file_len bytes, NUL, zero padding to a multiple of 4
//     then the lines, u32 each, engine by engine
//   version 3 only, then the other source files (files 1, 2, ...; file 0 is the one above):
//     file_count u32 (1..65535), then per file: name_len u32 (1..4096), the name, NUL, zero
//     padding to a multiple of 4; then one file id u32 (0..file_count) per line above, engine
//     by engine. Nothing follows.
//
// .shstrtab (STRTAB, align 1): "\0" then the section names, NUL-terminated.
#include "isa/container.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <bit>
#include <string_view>

#include "isa/byte_io.hpp"
#include "isa/elf_file.hpp"
#include "isa/scalar_args.hpp"

namespace trn::isa {

namespace {

using bytes::Cursor;
using bytes::Error;
using bytes::fits;
using bytes::Out;
using bytes::pad_to;
using bytes::read_cstring;
using bytes::read_padding;

constexpr uint64_t kShstrtabMaxSize = 4096;

// The sections of a kernel, in file order (their section header index is 1 + the position,
// except that .shstrtab follows .trn.debug only when that is present).
enum SectionId : uint32_t {
  kMeta = 0,
  kArgs = 1,
  kTextFirst = 2,  // kTextFirst + engine
  kConst = kTextFirst + kEngineCount,
  kDebug,
  kShstrtab,
  kSectionIdCount,
};

constexpr std::array<const char *, kSectionIdCount> kSectionNames = {
    ".trn.meta",        ".trn.args",        ".trn.text.tensor", ".trn.text.vector",
    ".trn.text.scalar", ".trn.text.gpsimd", ".trn.text.sync",   ".trn.const",
    ".trn.debug",       ".shstrtab"};

constexpr uint64_t section_align(uint32_t id) {
  return id == kShstrtab ? 1 : 8;
}
constexpr uint64_t section_entsize(uint32_t id) {
  return id >= kTextFirst && id < kTextFirst + kEngineCount ? kInstructionRecordSize : 0;
}
constexpr uint32_t section_type(uint32_t id) {
  return id == kShstrtab ? kShtStrtab : kShtProgbits;
}

// ---------------------------------------------------------------------------------------------
// Writing

void write_ap(Out &o, const AccessPattern &ap) {
  o.u8(static_cast<uint8_t>(ap.space));
  o.u8(static_cast<uint8_t>(ap.dtype));
  o.u16(ap.arg);
  o.u32(ap.num_dims);
  o.u32(ap.partition_start);
  o.u32(ap.partition_count);
  o.i64(ap.partition_stride);
  o.u64(ap.offset);
  for (const Dim &d : ap.dims) {
    o.i32(d.stride);
    o.u32(d.count);
  }
}

void write_instruction(Out &o, const Instruction &in) {
  o.u8(static_cast<uint8_t>(in.opcode));
  o.u8(static_cast<uint8_t>(in.engine));
  o.u8(in.func);
  o.u8(in.func2);
  o.u8(in.queue);
  o.u8(static_cast<uint8_t>(in.wait.cmp));
  o.u8(static_cast<uint8_t>(in.signal.op));
  o.u8(0);
  o.u32(in.flags);
  o.u16(in.wait.sem);
  o.u16(in.signal.sem);
  o.u32(in.wait.value);
  o.u32(in.signal.value);
  o.f32(in.imm[0]);
  o.f32(in.imm[1]);
  o.i32(in.iimm[0]);
  o.i32(in.iimm[1]);
  for (uint16_t arg : in.scalar_arg)
    o.u16(arg == kNoScalarArg ? 0 : static_cast<uint16_t>(arg + 1));
  for (const AccessPattern *ap : {&in.dst, &in.dst2, &in.src0, &in.src1, &in.src2})
    write_ap(o, *ap);
}

bool has_debug(const Program &p) {
  if (!p.source_file.empty() || !p.source_files.empty()) return true;
  for (const auto &l : p.source_lines)
    if (!l.empty()) return true;
  return false;
}

}  // namespace

std::vector<std::byte> write_kernel(const Program &p) {
  std::array<Out, kSectionIdCount> sec;
  const bool debug = has_debug(p);

  Out &m = sec[kMeta];
  m.u32(kKernelMagic);
  const bool files = !p.source_files.empty();
  m.u32(files                 ? kKernelFormatVersionFiles
        : uses_scalar_args(p) ? kKernelFormatVersionScalars
                              : kKernelFormatVersion);
  m.u32(static_cast<uint32_t>(p.args.size()));
  for (const auto &s : p.streams) m.u32(static_cast<uint32_t>(s.size()));
  m.u32(static_cast<uint32_t>(p.name.size()));
  m.u32(0);
  m.u64(p.constants.size());
  m.str(p.name);
  m.u8(0);

  Out &a = sec[kArgs];
  for (const Argument &arg : p.args) {
    a.u32(static_cast<uint32_t>(arg.name.size()));
    a.u8(static_cast<uint8_t>(arg.dtype));
    a.u8(static_cast<uint8_t>(arg.direction));
    a.u8(static_cast<uint8_t>(arg.shape.size()));
    a.u8(static_cast<uint8_t>(arg.kind));
    for (uint64_t s : arg.shape) a.u64(s);
    a.str(arg.name);
    a.u8(0);
    a.pad(8);
  }

  for (uint32_t e = 0; e < kEngineCount; ++e)
    for (const Instruction &in : p.streams[e]) write_instruction(sec[kTextFirst + e], in);

  sec[kConst].bytes(p.constants);

  if (debug) {
    Out &d = sec[kDebug];
    d.u32(static_cast<uint32_t>(p.source_file.size()));
    for (uint32_t e = 0; e < kEngineCount; ++e)
      d.u32(p.source_lines[e].empty() ? 0 : static_cast<uint32_t>(p.streams[e].size()));
    d.str(p.source_file);
    d.u8(0);
    d.pad(4);
    for (uint32_t e = 0; e < kEngineCount; ++e) {
      const auto &lines = p.source_lines[e];
      if (lines.empty()) continue;
      for (size_t i = 0; i < p.streams[e].size(); ++i) d.u32(i < lines.size() ? lines[i] : 0);
    }
    if (files) {
      d.u32(static_cast<uint32_t>(p.source_files.size()));
      for (const std::string &f : p.source_files) {
        d.u32(static_cast<uint32_t>(f.size()));
        d.str(f);
        d.u8(0);
        d.pad(4);
      }
      for (uint32_t e = 0; e < kEngineCount; ++e) {
        if (p.source_lines[e].empty()) continue;
        for (size_t i = 0; i < p.streams[e].size(); ++i)
          d.u32(p.source_file_id(static_cast<Engine>(e), i));
      }
    }
  }

  // The sections present, in file order (.shstrtab is write_elf's).
  std::vector<ElfSectionOut> out;
  for (uint32_t id = 0; id < kShstrtab; ++id)
    if (id != kDebug || debug)
      out.push_back({kSectionNames[id], section_entsize(id), std::move(sec[id].data())});
  return write_elf(kElfTypeTrnKernel, out);
}

// ---------------------------------------------------------------------------------------------
// Reading

namespace {

struct SectionHeader {
  uint32_t name = 0;
  uint32_t type = 0;
  uint64_t flags = 0;
  uint64_t addr = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t link = 0;
  uint32_t info = 0;
  uint64_t addralign = 0;
  uint64_t entsize = 0;
};

SectionHeader read_section_header(Cursor &c) {
  SectionHeader s;
  s.name = c.u32();
  s.type = c.u32();
  s.flags = c.u64();
  s.addr = c.u64();
  s.offset = c.u64();
  s.size = c.u64();
  s.link = c.u32();
  s.info = c.u32();
  s.addralign = c.u64();
  s.entsize = c.u64();
  return s;
}

Error read_ap(Cursor &c, AccessPattern &ap, const char *role, size_t arg_count) {
  const uint8_t space = c.u8(), dtype = c.u8();
  if (space > static_cast<uint8_t>(MemSpace::kHbm))
    return fmt::format("{}: unknown memory space {}", role, space);
  if (dtype >= kDTypeCount) return fmt::format("{}: unknown dtype {}", role, dtype);
  ap.space = static_cast<MemSpace>(space);
  ap.dtype = static_cast<DType>(dtype);
  ap.arg = c.u16();
  // An argument index names an argument or the constants block (in any space: the
  // disassembly prints it, and the assembler resolves it).
  if (ap.arg != kConstantsArg && ap.arg != 0 && ap.arg >= arg_count)
    return fmt::format("{} names argument {}, but the kernel has {}", role, ap.arg, arg_count);
  ap.num_dims = c.u32();
  if (ap.num_dims > kMaxFreeDims)
    return fmt::format("{}: {} free dims; at most {}", role, ap.num_dims, kMaxFreeDims);
  ap.partition_start = c.u32();
  ap.partition_count = c.u32();
  ap.partition_stride = c.i64();
  ap.offset = c.u64();
  for (Dim &d : ap.dims) {
    d.stride = c.i32();
    d.count = c.u32();
  }
  // Dims past num_dims are reserved: no instruction reads them and the assembly cannot say them.
  for (uint32_t d = ap.num_dims; d < kMaxFreeDims; ++d)
    if (ap.dims[d].stride != 0 || ap.dims[d].count != 0)
      return fmt::format("{}: dim {} is past its {} free dims but not zero (stride {}, count {})",
                         role, d, ap.num_dims, ap.dims[d].stride, ap.dims[d].count);
  return std::nullopt;
}

Error read_instruction(Cursor &c, Engine stream, std::span<const Argument> args, uint32_t version,
                       Instruction &in) {
  const size_t arg_count = args.size();
  const uint8_t opcode = c.u8(), engine = c.u8();
  if (opcode >= kOpcodeCount) return fmt::format("unknown opcode {}", opcode);
  if (engine >= kEngineCount) return fmt::format("unknown engine {}", engine);
  if (engine != static_cast<uint8_t>(stream))
    return fmt::format("engine is {} but the instruction is in the {} stream",
                       engine_name(static_cast<Engine>(engine)), engine_name(stream));
  in.opcode = static_cast<Opcode>(opcode);
  in.engine = static_cast<Engine>(engine);
  in.func = c.u8();
  in.func2 = c.u8();
  in.queue = c.u8();
  const uint8_t cmp = c.u8(), op = c.u8();
  if (cmp > static_cast<uint8_t>(SemCmp::kEq))
    return fmt::format("unknown semaphore wait comparison {}", cmp);
  if (op > static_cast<uint8_t>(SemOp::kSet))
    return fmt::format("unknown semaphore update operation {}", op);
  in.wait.cmp = static_cast<SemCmp>(cmp);
  in.signal.op = static_cast<SemOp>(op);
  if (c.u8() != 0) return std::string("reserved byte 7 is not zero");
  in.flags = c.u32();
  in.wait.sem = c.u16();
  in.signal.sem = c.u16();
  in.wait.value = c.u32();
  in.signal.value = c.u32();
  in.imm[0] = c.f32();
  in.imm[1] = c.f32();
  in.iimm[0] = c.i32();
  in.iimm[1] = c.i32();
  std::array<uint16_t, kImmSlotCount> slots{};
  for (uint16_t &v : slots) v = c.u16();
  if (version < kKernelFormatVersionScalars) {
    if (slots != std::array<uint16_t, kImmSlotCount>{})
      return std::string("reserved bytes 40..47 are not zero");
  } else {
    for (uint32_t s = 0; s < kImmSlotCount; ++s)
      in.scalar_arg[s] = slots[s] == 0 ? kNoScalarArg : static_cast<uint16_t>(slots[s] - 1);
    if (auto e = check_scalar_refs(in, args)) return e;
  }
  // A semaphore and value without a wait (update) are not part of the instruction: zero.
  if (in.wait.cmp == SemCmp::kNone && (in.wait.sem != 0 || in.wait.value != 0))
    return fmt::format("wait semaphore {} and value {} are set without a wait comparison",
                       in.wait.sem, in.wait.value);
  if (in.signal.op == SemOp::kNone && (in.signal.sem != 0 || in.signal.value != 0))
    return fmt::format("update semaphore {} and value {} are set without an update operation",
                       in.signal.sem, in.signal.value);
  const std::array<std::pair<AccessPattern *, const char *>, 5> aps = {{{&in.dst, "dst"},
                                                                        {&in.dst2, "dst2"},
                                                                        {&in.src0, "src0"},
                                                                        {&in.src1, "src1"},
                                                                        {&in.src2, "src2"}}};
  for (const auto &[ap, role] : aps)
    if (auto e = read_ap(c, *ap, role, arg_count)) return e;
  return std::nullopt;
}

class KernelReader {
 public:
  KernelReader(std::span<const std::byte> data, Program &out) : data_(data), p_(out) {}

  Error read() {
    if (auto e = read_elf_header()) return e;
    if (auto e = read_section_table()) return e;
    if (auto e = read_meta_version()) return e;
    if (pending_) return pending_;
    if (auto e = check_section_headers()) return e;
    if (auto e = check_layout()) return e;
    p_ = Program{};
    if (auto e = read_meta()) return e;
    if (auto e = read_args()) return e;
    for (uint32_t e = 0; e < kEngineCount; ++e)
      if (auto err = read_stream(static_cast<Engine>(e))) return err;
    if (auto e = read_const()) return e;
    if (auto e = read_debug()) return e;
    if (version_ == kKernelFormatVersionFiles && index_[kDebug] == 0)
      return fmt::format(
          "kernel format version {} without section .trn.debug; version {} is only for kernels "
          "that name several source files there",
          version_, kKernelFormatVersionFiles);
    if (version_ == kKernelFormatVersionScalars && !uses_scalar_args(p_))
      return fmt::format(
          "kernel format version {} without scalar arguments; such a kernel is stored as version "
          "{}",
          version_, kKernelFormatVersion);
    return check_canonical();
  }

 private:
  std::span<const std::byte> section(uint32_t id) const {
    const SectionHeader &s = headers_[index_[id]];
    return data_.subspan(static_cast<size_t>(s.offset), static_cast<size_t>(s.size));
  }
  static std::string sec_error(uint32_t id, std::string_view what) {
    return fmt::format("section {}: {}", kSectionNames[id], what);
  }

  Error read_elf_header() {
    if (data_.size() < kElfHeaderSize)
      return fmt::format("file is {} bytes; an ELF64 header alone is {} bytes", data_.size(),
                         kElfHeaderSize);
    Cursor c(data_.first(kElfHeaderSize));
    const std::array<uint8_t, 4> magic = {c.u8(), c.u8(), c.u8(), c.u8()};
    if (magic != std::array<uint8_t, 4>{0x7F, 'E', 'L', 'F'})
      return fmt::format(
          "not an ELF file: magic {:02x} {:02x} {:02x} {:02x} (expected 7f 45 4c 46)", magic[0],
          magic[1], magic[2], magic[3]);
    if (const uint8_t cls = c.u8(); cls != 2)
      return fmt::format("ELF class {} ({}); a trn kernel is ELFCLASS64 (2)", cls,
                         cls == 1 ? "ELFCLASS32" : "invalid");
    if (const uint8_t enc = c.u8(); enc != 1)
      return fmt::format("ELF data encoding {} ({}); a trn kernel is little endian (ELFDATA2LSB)",
                         enc, enc == 2 ? "big endian" : "invalid");
    if (const uint8_t v = c.u8(); v != 1)
      return fmt::format("ELF identification version {}; expected 1 (EV_CURRENT)", v);
    if (const uint8_t abi = c.u8(); abi != 0)
      return fmt::format("ELF OS ABI {}; a trn kernel uses 0 (ELFOSABI_NONE)", abi);
    if (const uint8_t abiv = c.u8(); abiv != 0)
      return fmt::format("ELF ABI version {}; expected 0", abiv);
    for (int i = 9; i < 16; ++i)
      if (c.u8() != 0) return fmt::format("ELF identification padding byte {} is not zero", i);
    if (const uint16_t type = c.u16(); type != kElfTypeTrnKernel)
      return fmt::format("ELF type 0x{:x} is not a trn kernel (expected 0x{:x})", type,
                         kElfTypeTrnKernel);
    if (const uint16_t machine = c.u16(); machine != kElfMachineTrn)
      return fmt::format("ELF machine 0x{:x} is not trn (expected 0x{:x})", machine,
                         kElfMachineTrn);
    if (const uint32_t v = c.u32(); v != 1) return fmt::format("ELF version {}; expected 1", v);
    if (const uint64_t entry = c.u64(); entry != 0)
      return fmt::format("ELF entry point 0x{:x}; a trn kernel has none (0)", entry);
    if (const uint64_t phoff = c.u64(); phoff != 0)
      return fmt::format("program header offset {}; a trn kernel has no program headers", phoff);
    shoff_ = c.u64();
    if (const uint32_t flags = c.u32(); flags != 0)
      return fmt::format("ELF flags 0x{:x}; expected 0", flags);
    if (const uint16_t ehsize = c.u16(); ehsize != kElfHeaderSize)
      return fmt::format("ELF header size {}; expected {}", ehsize, kElfHeaderSize);
    const uint16_t phentsize = c.u16(), phnum = c.u16();
    if (phentsize != 0 || phnum != 0)
      return fmt::format(
          "{} program headers of {} bytes; a trn kernel has no program headers (0 and 0)", phnum,
          phentsize);
    if (const uint16_t shentsize = c.u16(); shentsize != kSectionHeaderSize)
      return fmt::format("section header size {}; expected {}", shentsize, kSectionHeaderSize);
    shnum_ = c.u16();
    shstrndx_ = c.u16();
    // The null section, the required ones and .trn.debug.
    if (shnum_ < kSectionIdCount || shnum_ > kSectionIdCount + 1)
      return fmt::format("{} sections; a kernel has {} or {} (with .trn.debug)", shnum_,
                         kSectionIdCount, kSectionIdCount + 1);
    if (shstrndx_ == 0 || shstrndx_ >= shnum_)
      return fmt::format("section name table index {} is out of range (1..{})", shstrndx_,
                         shnum_ - 1);
    const uint64_t table = uint64_t{shnum_} * kSectionHeaderSize;
    if (shoff_ < kElfHeaderSize)
      return fmt::format("section header table offset {} is inside the ELF header", shoff_);
    if (shoff_ % 8 != 0)
      return fmt::format("section header table offset {} is not 8-byte aligned", shoff_);
    if (!fits(shoff_, table, data_.size()))
      return fmt::format(
          "section header table: offset {} + size {} is past the end of the {}-byte file", shoff_,
          table, data_.size());
    if (c.overrun()) return std::string("internal error: ELF header overrun");
    return std::nullopt;
  }

  Error read_section_table() {
    Cursor c(data_.subspan(static_cast<size_t>(shoff_), size_t{shnum_} * kSectionHeaderSize));
    headers_.clear();
    for (uint32_t i = 0; i < shnum_; ++i) headers_.push_back(read_section_header(c));
    if (c.overrun()) return std::string("internal error: section header table overrun");
    const SectionHeader &null = headers_[0];
    if (null.name != 0 || null.type != 0 || null.flags != 0 || null.addr != 0 || null.offset != 0 ||
        null.size != 0 || null.link != 0 || null.info != 0 || null.addralign != 0 ||
        null.entsize != 0)
      return std::string("section header 0 (the null section) is not all zero");

    // The name table first: every other name is in it.
    const SectionHeader &st = headers_[shstrndx_];
    if (st.type != kShtStrtab)
      return fmt::format("section name table (section {}) has type {}; expected {} (SHT_STRTAB)",
                         shstrndx_, st.type, kShtStrtab);
    if (!fits(st.offset, st.size, data_.size()))
      return fmt::format(
          "section name table (section {}): offset {} + size {} is past the end of the {}-byte "
          "file",
          shstrndx_, st.offset, st.size, data_.size());
    if (st.size == 0 || st.size > kShstrtabMaxSize)
      return fmt::format("section name table is {} bytes; expected 1..{}", st.size,
                         kShstrtabMaxSize);
    const auto names = data_.subspan(static_cast<size_t>(st.offset), static_cast<size_t>(st.size));
    if (names.front() != std::byte{0})
      return std::string("section name table does not start with a NUL byte");
    if (names.back() != std::byte{0})
      return std::string("section name table is not NUL-terminated");

    index_.fill(0);
    pending_.reset();
    for (uint32_t i = 1; i < shnum_; ++i) {
      const SectionHeader &s = headers_[i];
      if (s.name >= names.size())
        return fmt::format("section {}: name index {} is out of range (name table is {} bytes)", i,
                           s.name, names.size());
      std::string name;
      for (size_t k = s.name; names[k] != std::byte{0}; ++k)  // ends at the final NUL
        name.push_back(static_cast<char>(std::to_integer<uint8_t>(names[k])));
      const auto it = std::find_if(kSectionNames.begin(), kSectionNames.end(),
                                   [&](const char *n) { return name == n; });
      // Unknown and duplicate sections are reported after the format version check.
      if (it == kSectionNames.end()) {
        if (!pending_) pending_ = fmt::format("section {}: unknown section '{}'", i, name);
        continue;
      }
      const auto id = static_cast<uint32_t>(it - kSectionNames.begin());
      if (index_[id] != 0) {
        if (!pending_)
          pending_ = fmt::format("duplicate section {} (sections {} and {})", name, index_[id], i);
        continue;
      }
      index_[id] = i;
      if (!fits(s.offset, s.size, data_.size()))
        return fmt::format("section {}: offset {} + size {} is past the end of the {}-byte file",
                           name, s.offset, s.size, data_.size());
    }
    if (index_[kShstrtab] != shstrndx_ && !pending_)
      return fmt::format("section name table (section {}) is not named .shstrtab", shstrndx_);
    return std::nullopt;
  }

  // The format version comes before the other checks: a kernel of another version gets that
  // reason, not whichever of its differences is found first.
  Error read_meta_version() {
    if (index_[kMeta] == 0) return std::string("missing section .trn.meta");
    Cursor c(section(kMeta));
    if (!c.has(8))
      return sec_error(kMeta,
                       fmt::format("{} bytes; too small for its magic and version", c.remaining()));
    if (const uint32_t magic = c.u32(); magic != kKernelMagic)
      return sec_error(kMeta, fmt::format("bad magic 0x{:08x} (expected 0x{:08x}, \"TRNK\")", magic,
                                          kKernelMagic));
    version_ = c.u32();
    if (version_ < kKernelFormatVersion || version_ > kKernelFormatVersionFiles)
      return fmt::format(
          "kernel format version {}; this trn reads versions {}, {} and {} (rebuild the kernel "
          "with this trn-as)",
          version_, kKernelFormatVersion, kKernelFormatVersionScalars, kKernelFormatVersionFiles);
    return std::nullopt;
  }

  Error check_section_headers() {
    for (uint32_t id = 0; id < kSectionIdCount; ++id) {
      if (index_[id] == 0) {
        if (id == kDebug) continue;
        return fmt::format("missing section {}", kSectionNames[id]);
      }
      const SectionHeader &s = headers_[index_[id]];
      if (s.type != section_type(id))
        return sec_error(id, fmt::format("type {}; expected {}", s.type, section_type(id)));
      if (s.flags != 0) return sec_error(id, fmt::format("flags 0x{:x}; expected 0", s.flags));
      if (s.addr != 0) return sec_error(id, fmt::format("address 0x{:x}; expected 0", s.addr));
      if (s.link != 0 || s.info != 0)
        return sec_error(id, fmt::format("link {} / info {}; expected 0", s.link, s.info));
      if (s.addralign != section_align(id))
        return sec_error(id,
                         fmt::format("alignment {}; expected {}", s.addralign, section_align(id)));
      if (s.offset % section_align(id) != 0)
        return sec_error(
            id, fmt::format("offset {} is not {}-byte aligned", s.offset, section_align(id)));
      if (s.entsize != section_entsize(id))
        return sec_error(id,
                         fmt::format("entry size {}; expected {}", s.entsize, section_entsize(id)));
    }
    return std::nullopt;
  }

  // No two of the ELF header, the sections and the section header table share a byte, and
  // nothing follows the last of them.
  // Every field has been checked; what is left is where things are: the sections in order,
  // each at the next 8-byte boundary, zero padding, empty sections where the writer puts them.
  // A kernel is exactly what write_kernel makes of its program, so trn-objdump | trn-as
  // reproduces every file the reader accepts.
  Error check_canonical() const {
    const std::vector<std::byte> canonical = write_kernel(p_);
    size_t at = 0;
    while (at < data_.size() && at < canonical.size() && data_[at] == canonical[at]) ++at;
    if (at == data_.size() && at == canonical.size()) return std::nullopt;
    std::string where = "padding between sections";
    if (at >= shoff_ && at < shoff_ + uint64_t{shnum_} * kSectionHeaderSize) {
      where = fmt::format("the header of section {}", (at - shoff_) / kSectionHeaderSize);
    } else {
      for (uint32_t id = 0; id < kSectionIdCount; ++id) {
        const SectionHeader &h = headers_[index_[id]];
        if (index_[id] != 0 && at >= h.offset && at - h.offset < h.size)
          where = fmt::format("section {}", kSectionNames[id]);
      }
    }
    return fmt::format(
        "byte {} ({}) is not where the kernel format puts it: sections follow one another in "
        "order, each at the next 8-byte boundary after the previous one, with zero padding "
        "(an empty section at that offset too)",
        at, where);
  }

  Error check_layout() {
    struct Region {
      uint64_t begin, end;
      std::string name;
      bool section;
    };
    std::vector<Region> regions;
    regions.push_back({0, kElfHeaderSize, "the ELF header", false});
    regions.push_back({shoff_, shoff_ + uint64_t{shnum_} * kSectionHeaderSize,
                       "the section header table", false});
    for (uint32_t i = 1; i < shnum_; ++i) {
      const SectionHeader &s = headers_[i];
      if (s.size == 0) continue;
      for (uint32_t id = 0; id < kSectionIdCount; ++id)
        if (index_[id] == i)
          regions.push_back({s.offset, s.offset + s.size, kSectionNames[id], true});
    }
    std::stable_sort(regions.begin(), regions.end(),
                     [](const Region &a, const Region &b) { return a.begin < b.begin; });
    size_t last = 0;  // the region reaching furthest so far
    for (size_t i = 1; i < regions.size(); ++i) {
      const Region &a = regions[last], &b = regions[i];
      if (b.begin < a.end) {
        if (a.section && b.section)
          return fmt::format("sections {} and {} overlap (bytes {}..{} and {}..{})", a.name, b.name,
                             a.begin, a.end, b.begin, b.end);
        return fmt::format("{}{} overlaps {}{} (bytes {}..{} and {}..{})",
                           a.section ? "section " : "", a.name, b.section ? "section " : "", b.name,
                           a.begin, a.end, b.begin, b.end);
      }
      if (b.end > a.end) last = i;
    }
    const uint64_t end = regions[last].end;
    if (end != data_.size())
      return fmt::format("{} bytes of trailing data after {} (which ends at offset {})",
                         data_.size() - end, regions[last].name, end);
    return std::nullopt;
  }

  Error read_meta() {
    Cursor c(section(kMeta));
    if (!c.has(kMetaHeaderSize))
      return sec_error(
          kMeta, fmt::format("{} bytes; the header alone is {}", c.remaining(), kMetaHeaderSize));
    c.u32();  // magic and version: checked already
    c.u32();
    arg_count_ = c.u32();
    for (uint32_t &n : stream_count_) n = c.u32();
    const uint32_t name_len = c.u32();
    if (const uint32_t reserved = c.u32(); reserved != 0)
      return sec_error(kMeta, fmt::format("reserved field is 0x{:x}; expected 0", reserved));
    const_size_ = c.u64();
    if (arg_count_ > kMaxArgs)
      return sec_error(kMeta, fmt::format("{} arguments; at most {}", arg_count_, kMaxArgs));
    for (uint32_t e = 0; e < kEngineCount; ++e)
      if (stream_count_[e] > kMaxStreamInstructions)
        return sec_error(
            kMeta, fmt::format("{} instructions in the {} stream; at most {}", stream_count_[e],
                               engine_name(static_cast<Engine>(e)), kMaxStreamInstructions));
    if (auto e = read_cstring(c, name_len, kMaxKernelNameLength, "kernel name", p_.name))
      return sec_error(kMeta, *e);
    if (c.remaining() != 0)
      return sec_error(kMeta, fmt::format("{} bytes after the kernel name", c.remaining()));
    return std::nullopt;
  }

  Error read_args() {
    Cursor c(section(kArgs));
    // Each record takes at least 16 bytes: bound the count by the section before allocating.
    if (uint64_t{arg_count_} * 16 > c.remaining())
      return sec_error(kArgs,
                       fmt::format("{} bytes cannot hold {} arguments", c.remaining(), arg_count_));
    p_.args.resize(arg_count_);
    for (uint32_t i = 0; i < arg_count_; ++i) {
      const std::string what = fmt::format("argument {}", i);
      Argument &a = p_.args[i];
      const size_t at = c.pos();
      if (!c.has(kArgHeaderSize))
        return sec_error(kArgs, fmt::format("{} at offset {}: truncated record", what, at));
      const uint32_t name_len = c.u32();
      const uint8_t dtype = c.u8(), dir = c.u8(), rank = c.u8(), kind = c.u8();
      if (dtype == 0 || dtype >= kDTypeCount)
        return sec_error(kArgs, fmt::format("{}: unknown dtype {}", what, dtype));
      if (dir < static_cast<uint8_t>(ArgDirection::kIn) ||
          dir > static_cast<uint8_t>(ArgDirection::kInOut))
        return sec_error(kArgs, fmt::format("{}: unknown direction {}", what, dir));
      if (rank > kMaxArgRank)
        return sec_error(kArgs, fmt::format("{}: rank {}; at most {}", what, rank, kMaxArgRank));
      if (version_ < kKernelFormatVersionScalars && kind != 0)
        return sec_error(kArgs, fmt::format("{}: reserved byte is {}; expected 0 (scalar "
                                            "arguments need kernel format version {})",
                                            what, kind, kKernelFormatVersionScalars));
      if (kind > static_cast<uint8_t>(ArgKind::kScalar))
        return sec_error(kArgs,
                         fmt::format("{}: unknown kind {} (0 tensor, 1 scalar)", what, kind));
      a.dtype = static_cast<DType>(dtype);
      a.direction = static_cast<ArgDirection>(dir);
      a.kind = static_cast<ArgKind>(kind);
      if (!c.has(uint64_t{rank} * 8))
        return sec_error(kArgs, fmt::format("{}: shape runs past the end of the section", what));
      a.shape.resize(rank);
      __extension__ typedef unsigned __int128 u128;
      u128 bytes = dtype_size(a.dtype);
      for (uint64_t &s : a.shape) {
        s = c.u64();
        bytes *= s;
        if (bytes > UINT64_MAX) bytes = u128{UINT64_MAX} + 1;  // saturate: stays > UINT64_MAX
      }
      if (bytes > UINT64_MAX)
        return sec_error(kArgs, fmt::format("{}: shape [{}] is more than 2^64 bytes", what,
                                            fmt::join(a.shape, ", ")));
      if (auto e =
              read_cstring(c, name_len, kMaxArgNameLength, fmt::format("{}: name", what), a.name))
        return sec_error(kArgs, *e);
      if (auto e = read_padding(c, 8, what)) return sec_error(kArgs, *e);
      if (auto e = check_scalar_arg(a)) return sec_error(kArgs, fmt::format("{}: {}", what, *e));
    }
    if (c.remaining() != 0)
      return sec_error(
          kArgs, fmt::format("{} bytes after the last of {} arguments", c.remaining(), arg_count_));
    return c.overrun() ? Error("internal error: .trn.args overrun") : std::nullopt;
  }

  Error read_stream(Engine engine) {
    const uint32_t id = kTextFirst + static_cast<uint32_t>(engine);
    const auto bytes = section(id);
    if (bytes.size() % kInstructionRecordSize != 0)
      return sec_error(id,
                       fmt::format("size {} is not a multiple of the {}-byte instruction record",
                                   bytes.size(), kInstructionRecordSize));
    const uint64_t n = bytes.size() / kInstructionRecordSize;
    const uint32_t e = static_cast<uint32_t>(engine);
    if (n != stream_count_[e])
      return sec_error(
          id, fmt::format("holds {} instructions but .trn.meta says {}", n, stream_count_[e]));
    auto &stream = p_.streams[e];
    stream.resize(static_cast<size_t>(n));
    for (size_t i = 0; i < n; ++i) {
      Cursor c(bytes.subspan(i * kInstructionRecordSize, kInstructionRecordSize));
      if (auto err = read_instruction(c, engine, p_.args, version_, stream[i]))
        return fmt::format("instruction {}[{}]: {}", engine_name(engine), i, *err);
      if (c.overrun() || c.remaining() != 0)
        return fmt::format("internal error: instruction {}[{}] record overrun", engine_name(engine),
                           i);
    }
    return std::nullopt;
  }

  Error read_const() {
    const auto bytes = section(kConst);
    if (bytes.size() != const_size_)
      return sec_error(kConst,
                       fmt::format("{} bytes but .trn.meta says {}", bytes.size(), const_size_));
    p_.constants.assign(bytes.begin(), bytes.end());
    return std::nullopt;
  }

  Error read_debug() {
    if (index_[kDebug] == 0) return std::nullopt;
    Cursor c(section(kDebug));
    if (!c.has(kDebugHeaderSize))
      return sec_error(
          kDebug, fmt::format("{} bytes; the header alone is {}", c.remaining(), kDebugHeaderSize));
    const uint32_t file_len = c.u32();
    std::array<uint32_t, kEngineCount> lines{};
    for (uint32_t e = 0; e < kEngineCount; ++e) {
      lines[e] = c.u32();
      if (lines[e] != 0 && lines[e] != stream_count_[e])
        return sec_error(
            kDebug, fmt::format("{} source lines for the {} stream of {} instructions "
                                "(expected 0 or one per instruction)",
                                lines[e], engine_name(static_cast<Engine>(e)), stream_count_[e]));
    }
    if (auto e =
            read_cstring(c, file_len, kMaxSourceFileLength, "source file name", p_.source_file))
      return sec_error(kDebug, *e);
    if (auto e = read_padding(c, 4, "source file name")) return sec_error(kDebug, *e);
    uint64_t total = 0;
    for (uint32_t n : lines) total += n;
    const bool files = version_ >= kKernelFormatVersionFiles;
    if (files ? c.remaining() < total * 4 : c.remaining() != total * 4)
      return sec_error(
          kDebug, fmt::format("{} bytes of line numbers; expected {} ({} lines){}", c.remaining(),
                              total * 4, total, files ? " and then the source file table" : ""));
    for (uint32_t e = 0; e < kEngineCount; ++e) {
      p_.source_lines[e].resize(lines[e]);
      for (uint32_t &l : p_.source_lines[e]) l = c.u32();
    }
    if (files)
      if (auto e = read_source_files(c, lines, total)) return sec_error(kDebug, *e);
    return c.overrun() ? Error("internal error: .trn.debug overrun") : std::nullopt;
  }

  // Version 3: the source files past the first and the file of every line.
  Error read_source_files(Cursor &c, const std::array<uint32_t, kEngineCount> &lines,
                          uint64_t total) {
    if (!c.has(4))
      return fmt::format(
          "{} bytes after the line numbers; expected the source file count (format "
          "version {})",
          c.remaining(), kKernelFormatVersionFiles);
    const uint32_t count = c.u32();
    if (count == 0)
      return fmt::format(
          "the source file table is empty; a kernel with one source file is stored as version {} "
          "or {}",
          kKernelFormatVersion, kKernelFormatVersionScalars);
    if (count > kMaxSourceFiles)
      return fmt::format("{} source files; at most {}", count, kMaxSourceFiles);
    // Each file takes at least 8 bytes: bound the count by the section before allocating.
    if (uint64_t{count} * 8 > c.remaining())
      return fmt::format("{} bytes cannot hold {} source files", c.remaining(), count);
    p_.source_files.resize(count);
    for (uint32_t i = 0; i < count; ++i) {
      const std::string what = fmt::format("source file {}", i + 1);
      if (!c.has(4)) return fmt::format("{} at offset {}: truncated record", what, c.pos());
      const uint32_t len = c.u32();
      if (len == 0) return fmt::format("{}: the name is empty", what);
      if (auto e = read_cstring(c, len, kMaxSourceFileLength, what + " name", p_.source_files[i]))
        return e;
      if (auto e = read_padding(c, 4, what)) return e;
    }
    if (c.remaining() != total * 4)
      return fmt::format("{} bytes of source file ids; expected {} (one per line, {} lines)",
                         c.remaining(), total * 4, total);
    for (uint32_t e = 0; e < kEngineCount; ++e) {
      auto &ids = p_.source_file_ids[e];
      ids.resize(lines[e]);
      for (size_t i = 0; i < ids.size(); ++i) {
        ids[i] = c.u32();
        if (ids[i] > count)
          return fmt::format("source file id {} of {}[{}] is out of range (files 0..{})", ids[i],
                             engine_name(static_cast<Engine>(e)), i, count);
      }
    }
    return std::nullopt;
  }

  std::span<const std::byte> data_;
  Program &p_;
  uint64_t shoff_ = 0;
  uint16_t shnum_ = 0, shstrndx_ = 0;
  std::vector<SectionHeader> headers_;
  std::array<uint32_t, kSectionIdCount> index_{};  // section header index by id (0: absent)
  uint32_t version_ = 0;
  uint32_t arg_count_ = 0;
  std::array<uint32_t, kEngineCount> stream_count_{};
  uint64_t const_size_ = 0;
  Error pending_;  // a section table error reported after the version check
};

}  // namespace

std::optional<std::string> read_kernel(std::span<const std::byte> data, Program &out) {
  return KernelReader(data, out).read();
}

}  // namespace trn::isa
