// The ELF64 wrapping shared by trn's binaries (kernels, programs): a little-endian ELF64 file
// with no program headers, its sections one after another from offset 64 (each 8-byte aligned,
// padding zeroed), the section header table after them and .shstrtab the last section.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace trn::isa {

// The ELF64 figures every trn binary uses.
constexpr size_t kElfHeaderSize = 64;
constexpr size_t kSectionHeaderSize = 64;
constexpr uint32_t kShtProgbits = 1;  // SHT_PROGBITS
constexpr uint32_t kShtStrtab = 3;    // SHT_STRTAB

struct ElfSectionOut {
  std::string_view name;  // ".trn.meta"
  uint64_t entsize = 0;
  std::vector<std::byte> data;
};

// The file: the ELF header (e_type `type`, e_machine kElfMachineTrn), `sections` in order,
// then .shstrtab and the section headers.
std::vector<std::byte> write_elf(uint16_t type, std::span<const ElfSectionOut> sections);

struct ElfSectionIn {
  std::string name;
  uint64_t entsize = 0;
  std::span<const std::byte> data;
};

// Reads a file write_elf wrote, checking every header field and that the layout is exactly
// write_elf's (so nothing hides between or after sections). `what` names the kind of file in
// messages ("a trn program"). On success `out` has the sections before .shstrtab, in order.
std::optional<std::string> read_elf(std::span<const std::byte> data, uint16_t type,
                                    std::string_view what, std::vector<ElfSectionIn> &out);

// Whether `data` starts with an ELF64 little-endian header of e_type `type`.
bool is_elf_of_type(std::span<const std::byte> data, uint16_t type);

}  // namespace trn::isa
