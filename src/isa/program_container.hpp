// The program binary: kernels, constant tensors, named external tensors, internal buffers and a
// schedule, in one ELF64 file that extends the kernel container (container.hpp), and its
// validating reader. docs/programs.md describes it for users.
//
//   e_type     kElfTypeTrnProgram (0xFE50, in ET_LOOS..ET_HIOS); e_machine kElfMachineTrn
//   no program headers; section headers at the end; e_shstrndx -> .shstrtab (the last)
// Sections, in file order (each 8-byte aligned, padding zeroed):
//   .trn.program   magic "TRNP", format version, counts, the program's name
//   .trn.tensors   one record per tensor: role, dtype, shape, bytes, name, where its data is
//   .trn.steps     the schedule: one record per launch, copy or memset, with its dependencies
//   .trn.kernels   each kernel's complete kernel container, 8-byte aligned, one after another
//   .trn.data      the constant tensors' bytes, each at an 8-byte aligned offset
//   .shstrtab      section names
// program_container.cpp has the byte layout of every record.
//
// The reader checks everything that does not need a device: structure (every offset, size,
// count, string and enum, without overflow), each kernel's container (read_kernel), and the
// schedule against the kernels and tensors (argument counts, kinds, sizes, what may be
// written). The ISA rules of each kernel depend on the device and are the loader's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "isa/program.hpp"

namespace trn::isa {

constexpr uint16_t kElfTypeTrnProgram = 0xFE50;  // ET_LOOS + 0x50 ('P')
constexpr uint32_t kProgramMagic = 0x50524E54;   // "TRNP" as little-endian bytes
// Version 1 holds constants inline; version 2 adds constants read from a safetensors file when
// the program is loaded. The writer uses the lowest version that holds the program.
constexpr uint32_t kProgramFormatVersion = 1;
constexpr uint32_t kProgramFormatVersionFiles = 2;

// Limits the reader enforces.
constexpr uint32_t kMaxProgramNameLength = 63;  // fits trn_program_properties_t.name
constexpr uint32_t kMaxTensorNameLength = 63;   // fits trn_program_tensor_t.name
constexpr uint32_t kMaxProgramKernels = 0xFFFF;
constexpr uint32_t kMaxProgramTensors = 0xFFFF;
constexpr uint32_t kMaxProgramSteps = 1u << 20;
constexpr uint32_t kMaxStepDependencies = 0xFFFF;
constexpr uint32_t kMaxProgramCores = 64;  // a step's core is an index below this
constexpr uint32_t kMaxSourcePathLength = 4096;
constexpr uint32_t kMaxSourceTensorLength = 4096;

// What a tensor is to the program. External tensors are bound by name at each execution.
enum class TensorRole : uint8_t {
  kInput = 1,     // external, only read
  kOutput = 2,    // external, written (and may be read after)
  kInOut = 3,     // external, read and written
  kConstant = 4,  // the program's data, on the device from load to destroy; only read
  kInternal = 5,  // scratch of one execution, from the program's pool
};
const char *tensor_role_name(TensorRole role);  // "input", ..., "internal"
// Whether `c` may stand in a tensor's name: [A-Za-z0-9_.:/-].
bool is_tensor_name_char(char c);
inline bool is_external(TensorRole r) {
  return r == TensorRole::kInput || r == TensorRole::kOutput || r == TensorRole::kInOut;
}

struct ProgramTensor {
  std::string name;  // unique in the program, [A-Za-z0-9_.:/-]+
  TensorRole role = TensorRole::kInput;
  DType dtype = DType::kU8;
  std::vector<uint64_t> shape;  // rank 1..kMaxArgRank; bytes = product x dtype size
  std::vector<std::byte> data;  // inline constants: exactly bytes(); others: empty
  // A constant whose bytes are tensor `source_tensor` of the safetensors file `source_file`
  // (relative paths are the program file's directory's), read when the program is loaded; its
  // dtype and shape must be the file's. Both empty for inline constants and other roles.
  std::string source_file, source_tensor;
  bool from_file() const { return !source_file.empty(); }
  uint64_t bytes() const;
  bool operator==(const ProgramTensor &) const = default;
};

// "input tensor 'x'", for messages.
std::string describe_tensor(const ProgramTensor &t);

// A range of a tensor from `offset`.
struct TensorRef {
  uint32_t tensor = 0;
  uint64_t offset = 0;
  bool operator==(const TensorRef &) const = default;
};

enum class StepKind : uint8_t { kLaunch = 1, kCopy = 2, kMemset = 3 };
const char *step_kind_name(StepKind kind);  // "launch", "copy", "memset"

// One kernel argument of a launch: a tensor range, or a scalar's 4 bytes (f32 or i32 bits).
struct StepArg {
  bool scalar = false;
  TensorRef ref;
  uint32_t scalar_bits = 0;
  bool operator==(const StepArg &) const = default;
};

struct ProgramStep {
  StepKind kind = StepKind::kLaunch;
  // The logical core (relative to the executing queue's) the step is for. Executions run every
  // step on the executing queue, in schedule order; a compiler records its intent here.
  uint32_t core = 0;
  std::vector<uint32_t> deps;  // earlier steps this one must follow, ascending, no repeats
  // launch
  uint32_t kernel = 0;
  std::vector<StepArg> args;  // one per kernel argument
  // copy (dst <- src), memset (dst)
  TensorRef dst, src;
  uint64_t bytes = 0;
  uint8_t value = 0;
  bool operator==(const ProgramStep &) const = default;
};

struct ProgramImage {
  std::string name;
  std::vector<std::vector<std::byte>> kernels;  // each a kernel container (write_kernel)
  std::vector<ProgramTensor> tensors;
  std::vector<ProgramStep> steps;
  // Field by field, including the fields a step's kind does not use: read_program leaves those
  // at their defaults, so an image it produced compares equal to its own round trip.
  bool operator==(const ProgramImage &) const = default;
};

// Serialises `p`, deterministically. The image must be one read_program accepts (the writer
// does not check; tests do).
std::vector<std::byte> write_program(const ProgramImage &p);

// Decodes and checks a program image. nullopt on success; otherwise why it is not a well-formed
// program ("step 3 (launch of kernel 'gelu'): argument 'y' writes constant tensor 'w1'"). Never
// reads outside `data`. `kernels` receives each kernel's decoded program when not null.
std::optional<std::string> read_program(std::span<const std::byte> data, ProgramImage &out,
                                        std::vector<Program> *kernels = nullptr);

// Whether `data` starts as a program (an ELF header of type kElfTypeTrnProgram), for tools that
// take kernels and programs alike.
bool looks_like_program(std::span<const std::byte> data);

}  // namespace trn::isa
