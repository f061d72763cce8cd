#include "isa/elf_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "isa/byte_io.hpp"
#include "isa/container.hpp"

namespace trn::isa {

namespace {

using bytes::Cursor;
using bytes::Error;
using bytes::fits;
using bytes::Out;
using bytes::pad_to;

constexpr uint32_t kMaxSections = 64;

}  // namespace

std::vector<std::byte> write_elf(uint16_t type, std::span<const ElfSectionOut> sections) {
  Out names;
  names.u8(0);
  std::vector<uint32_t> name_off;
  for (const ElfSectionOut &s : sections) {
    name_off.push_back(static_cast<uint32_t>(names.size()));
    names.str(s.name);
    names.u8(0);
  }
  const auto shstrtab_name = static_cast<uint32_t>(names.size());
  names.str(".shstrtab");
  names.u8(0);

  Out f;
  f.data().resize(kElfHeaderSize, std::byte{0});
  std::vector<uint64_t> offset;
  for (const ElfSectionOut &s : sections) {
    f.pad(8);
    offset.push_back(f.size());
    f.bytes(s.data);
  }
  f.pad(8);
  const uint64_t shstrtab_offset = f.size();
  f.bytes(names.data());
  f.pad(8);
  const uint64_t shoff = f.size();
  const auto shnum = static_cast<uint16_t>(sections.size() + 2);

  auto header = [&](uint32_t name, uint32_t sh_type, uint64_t off, uint64_t size, uint64_t align,
                    uint64_t entsize) {
    f.u32(name);
    f.u32(sh_type);
    f.u64(0);  // sh_flags
    f.u64(0);  // sh_addr
    f.u64(off);
    f.u64(size);
    f.u32(0);  // sh_link
    f.u32(0);  // sh_info
    f.u64(align);
    f.u64(entsize);
  };
  for (size_t i = 0; i < kSectionHeaderSize; ++i) f.u8(0);  // the null section
  for (size_t i = 0; i < sections.size(); ++i)
    header(name_off[i], kShtProgbits, offset[i], sections[i].data.size(), 8, sections[i].entsize);
  header(shstrtab_name, kShtStrtab, shstrtab_offset, names.size(), 1, 0);

  Out h;
  h.u8(0x7F);
  h.str("ELF");
  h.u8(2);  // ELFCLASS64
  h.u8(1);  // ELFDATA2LSB
  h.u8(1);  // EV_CURRENT
  h.u8(0);  // ELFOSABI_NONE
  h.u8(0);  // ABI version
  for (int i = 0; i < 7; ++i) h.u8(0);
  h.u16(type);
  h.u16(kElfMachineTrn);
  h.u32(1);  // e_version
  h.u64(0);  // e_entry
  h.u64(0);  // e_phoff
  h.u64(shoff);
  h.u32(0);  // e_flags
  h.u16(static_cast<uint16_t>(kElfHeaderSize));
  h.u16(0);  // e_phentsize
  h.u16(0);  // e_phnum
  h.u16(static_cast<uint16_t>(kSectionHeaderSize));
  h.u16(shnum);
  h.u16(static_cast<uint16_t>(shnum - 1));  // .shstrtab is the last section
  std::copy(h.data().begin(), h.data().end(), f.data().begin());
  return std::move(f.data());
}

bool is_elf_of_type(std::span<const std::byte> data, uint16_t type) {
  if (data.size() < kElfHeaderSize) return false;
  Cursor c(data.first(kElfHeaderSize));
  if (c.u32() != 0x464C457F || c.u8() != 2 || c.u8() != 1) return false;
  c.take(10);
  return c.u16() == type;
}

std::optional<std::string> read_elf(std::span<const std::byte> data, uint16_t type,
                                    std::string_view what, std::vector<ElfSectionIn> &out) {
  out.clear();
  if (data.size() < kElfHeaderSize)
    return fmt::format("file is {} bytes; an ELF64 header alone is {} bytes", data.size(),
                       kElfHeaderSize);
  Cursor c(data.first(kElfHeaderSize));
  const std::array<uint8_t, 4> magic = {c.u8(), c.u8(), c.u8(), c.u8()};
  if (magic != std::array<uint8_t, 4>{0x7F, 'E', 'L', 'F'})
    return fmt::format("not an ELF file: magic {:02x} {:02x} {:02x} {:02x} (expected 7f 45 4c 46)",
                       magic[0], magic[1], magic[2], magic[3]);
  if (c.u8() != 2 || c.u8() != 1 || c.u8() != 1 || c.u8() != 0 || c.u8() != 0)
    return fmt::format(
        "ELF identification is not {}'s: ELFCLASS64, little endian, version 1, OS ABI 0, ABI "
        "version 0",
        what);
  for (int i = 9; i < 16; ++i)
    if (c.u8() != 0) return fmt::format("ELF identification padding byte {} is not zero", i);
  if (const uint16_t t = c.u16(); t != type)
    return fmt::format("ELF type 0x{:x} is not {} (expected 0x{:x}{})", t, what, type,
                       t == kElfTypeTrnKernel ? ": this is a kernel, load it as one" : "");
  if (const uint16_t machine = c.u16(); machine != kElfMachineTrn)
    return fmt::format("ELF machine 0x{:x} is not trn (expected 0x{:x})", machine, kElfMachineTrn);
  if (const uint32_t v = c.u32(); v != 1) return fmt::format("ELF version {}; expected 1", v);
  const uint64_t entry = c.u64(), phoff = c.u64(), shoff = c.u64();
  if (entry != 0 || phoff != 0)
    return fmt::format("{} has no entry point and no program headers (0 and 0), not {} and {}",
                       what, entry, phoff);
  const uint32_t flags = c.u32();
  const uint16_t ehsize = c.u16(), phentsize = c.u16(), phnum = c.u16(), shentsize = c.u16();
  const uint16_t shnum = c.u16(), shstrndx = c.u16();
  if (flags != 0 || ehsize != kElfHeaderSize || phentsize != 0 || phnum != 0 ||
      shentsize != kSectionHeaderSize)
    return fmt::format(
        "ELF header fields flags {}, ehsize {}, phentsize {}, phnum {}, shentsize {}; {} has 0, "
        "64, 0, 0, 64",
        flags, ehsize, phentsize, phnum, shentsize, what);
  if (shnum < 2 || shnum > kMaxSections)
    return fmt::format("{} sections; {} has 2 to {}", shnum, what, kMaxSections);
  if (shstrndx != shnum - 1)
    return fmt::format("section name table index {}; it is the last section ({})", shstrndx,
                       shnum - 1);
  const uint64_t table = uint64_t{shnum} * kSectionHeaderSize;
  if (shoff % 8 != 0 || !fits(shoff, table, data.size()) || shoff + table != data.size())
    return fmt::format(
        "section header table at offset {} ({} bytes) does not end the {}-byte file on an 8-byte "
        "boundary",
        shoff, table, data.size());

  struct Header {
    uint32_t name, type;
    uint64_t flags, addr, offset, size;
    uint32_t link, info;
    uint64_t align, entsize;
  };
  std::vector<Header> headers;
  Cursor t(data.subspan(static_cast<size_t>(shoff), static_cast<size_t>(table)));
  for (uint32_t i = 0; i < shnum; ++i) {
    Header h{};
    h.name = t.u32();
    h.type = t.u32();
    h.flags = t.u64();
    h.addr = t.u64();
    h.offset = t.u64();
    h.size = t.u64();
    h.link = t.u32();
    h.info = t.u32();
    h.align = t.u64();
    h.entsize = t.u64();
    headers.push_back(h);
  }
  const Header &null = headers[0];
  if (null.name || null.type || null.flags || null.addr || null.offset || null.size || null.link ||
      null.info || null.align || null.entsize)
    return std::string("section header 0 (the null section) is not all zero");

  // Every section where write_elf puts it: one after another from the ELF header, 8-aligned.
  uint64_t expected = kElfHeaderSize;
  for (uint32_t i = 1; i < shnum; ++i) {
    const Header &h = headers[i];
    const bool strtab = i == shstrndx;
    if (h.type != (strtab ? kShtStrtab : kShtProgbits) || h.flags || h.addr || h.link || h.info ||
        h.align != (strtab ? 1u : 8u) || (strtab && h.entsize))
      return fmt::format(
          "section {}: type {}, flags {}, addr {}, link {}, info {}, align {}; expected {}, 0, 0, "
          "0, 0, {}",
          i, h.type, h.flags, h.addr, h.link, h.info, h.align,
          strtab ? "3 (SHT_STRTAB)" : "1 (SHT_PROGBITS)", strtab ? 1 : 8);
    expected = pad_to(expected, 8);
    if (h.offset != expected)
      return fmt::format("section {} starts at offset {}; the layout puts it at {}", i, h.offset,
                         expected);
    if (!fits(h.offset, h.size, shoff))
      return fmt::format("section {}: offset {} + size {} runs into the section header table at {}",
                         i, h.offset, h.size, shoff);
    expected = h.offset + h.size;
  }
  if (pad_to(expected, 8) != shoff)
    return fmt::format("{} bytes between the last section and the section header table",
                       shoff - expected);
  for (uint64_t p = kElfHeaderSize, i = 1; i <= shnum; ++i) {  // padding between sections
    const uint64_t end = i < shnum ? headers[i].offset : shoff;
    for (; p < end; ++p)
      if (data[static_cast<size_t>(p)] != std::byte{0})
        return fmt::format("padding byte at offset {} is not zero", p);
    if (i < shnum) p = headers[i].offset + headers[i].size;
  }

  const Header &st = headers[shstrndx];
  auto names = data.subspan(static_cast<size_t>(st.offset), static_cast<size_t>(st.size));
  if (names.empty() || names[0] != std::byte{0} || names.back() != std::byte{0})
    return std::string("section name table does not start and end with NUL");
  auto name_at = [&](uint32_t off, std::string *name) -> bool {
    if (off >= names.size()) return false;
    name->clear();
    for (size_t k = off; names[k] != std::byte{0}; ++k)
      name->push_back(static_cast<char>(std::to_integer<uint8_t>(names[k])));
    return true;
  };
  std::string name;
  Out expected_names;  // the table as write_elf writes it: nothing else may hide in it
  expected_names.u8(0);
  for (uint32_t i = 1; i < shnum; ++i) {
    if (!name_at(headers[i].name, &name))
      return fmt::format("section {}: name offset {} is outside the name table ({} bytes)", i,
                         headers[i].name, names.size());
    if (i == shstrndx) {
      if (name != ".shstrtab")
        return fmt::format("the last section is named '{}', not .shstrtab", name);
      continue;
    }
    expected_names.str(name);
    expected_names.u8(0);
    out.push_back({name, headers[i].entsize,
                   data.subspan(static_cast<size_t>(headers[i].offset),
                                static_cast<size_t>(headers[i].size))});
  }
  expected_names.str(".shstrtab");
  expected_names.u8(0);
  const auto &want = expected_names.data();
  if (want.size() != names.size() || !std::equal(want.begin(), want.end(), names.begin()))
    return std::string(
        "section name table is not the sections' names in order, each once, .shstrtab last");
  return std::nullopt;
}

}  // namespace trn::isa
