// The kernel binary: a versioned container holding one isa::Program, and its validating reader.
//
// The container is a little-endian ELF64 file (readelf -S works on it):
//   e_ident    ELFCLASS64, ELFDATA2LSB, EV_CURRENT, ELFOSABI_NONE, ABI version 0
//   e_type     kElfTypeTrnKernel (0xFE54, in the OS-specific range ET_LOOS..ET_HIOS)
//   e_machine  kElfMachineTrn (0x7472, "tr": not an assigned EM_* value; trn's own)
//   no program headers; section headers at the end of the file; e_shstrndx -> .shstrtab
// Sections, in file order (each 8-byte aligned, padding zeroed):
//   .trn.meta          magic "TRNK", format version, counts, kernel name
//   .trn.args          the argument table (variable-length records)
//   .trn.text.tensor   one instruction stream per engine: fixed-size records of
//   .trn.text.vector   kInstructionRecordSize bytes (sh_entsize), every field of
//   .trn.text.scalar   isa::Instruction written field by field, little endian
//   .trn.text.gpsimd
//   .trn.text.sync
//   .trn.const         the constants block, raw bytes
//   .trn.debug         optional: source file name and one line per instruction per engine
//   .shstrtab          section names
// container.cpp has the byte layout of every record.
//
// The reader checks structure only: every header field, offset, size, count, string and enum
// value, before use and without overflow. The ISA rules (validate_program) depend on the target
// device and are the caller's to check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "isa/program.hpp"

namespace trn::isa {

constexpr uint16_t kElfTypeTrnKernel = 0xFE54;  // ET_LOOS + 0x54 ('T')
constexpr uint16_t kElfMachineTrn = 0x7472;     // "tr"
constexpr uint32_t kKernelMagic = 0x4B4E5254;   // "TRNK" as little-endian bytes
// Format version 1 holds kernels without scalar arguments; version 2 adds them (an argument's
// kind byte and each instruction's scalar slots, container.cpp). The writer stores a kernel in
// the lowest version that holds it, so kernels without scalars stay readable by older trn.
// Version 3 adds a table of further source files and a file per instruction to .trn.debug
// (kernels built from several source files); it holds scalar arguments as version 2 does.
constexpr uint32_t kKernelFormatVersion = 1;
constexpr uint32_t kKernelFormatVersionScalars = 2;
constexpr uint32_t kKernelFormatVersionFiles = 3;

// Record sizes of format versions 1, 2 and 3 (the same).
constexpr size_t kMetaHeaderSize = 48;           // .trn.meta, before the kernel name
constexpr size_t kArgHeaderSize = 8;             // .trn.args, before shape and name
constexpr size_t kAccessPatternRecordSize = 64;  // inside an instruction record
constexpr size_t kInstructionRecordSize = 48 + 5 * kAccessPatternRecordSize;  // 368
constexpr size_t kDebugHeaderSize = 24;  // .trn.debug, before the file name

// Limits the reader enforces.
constexpr uint32_t kMaxKernelNameLength = 256;
constexpr uint32_t kMaxArgNameLength = 256;
constexpr uint32_t kMaxSourceFileLength = 4096;
constexpr uint32_t kMaxSourceFiles = 0xFFFF;  // besides source file 0
constexpr uint32_t kMaxArgRank = 8;
constexpr uint32_t kMaxArgs = 0xFFFF;  // argument indices are uint16, 0xFFFF is the constants
constexpr uint32_t kMaxStreamInstructions = 1u << 24;

// Serialises `p`. Deterministic: the same program gives the same bytes. Source lines of an
// engine are written only when non-empty, padded with 0 or cut to one per instruction; so are
// the file ids of those lines (only when the program names more than one source file).
std::vector<std::byte> write_kernel(const Program &p);

// Decodes a kernel binary into `out`. nullopt on success; otherwise why the bytes are not a
// well-formed kernel ("section .trn.text.tensor: offset 4096 + size 512 is past the end of the
// 2048-byte file"). Never reads outside `data`, whatever it holds. Trailing bytes after the last
// section / the section header table are rejected. `out` is unspecified on failure.
std::optional<std::string> read_kernel(std::span<const std::byte> data, Program &out);

}  // namespace trn::isa
