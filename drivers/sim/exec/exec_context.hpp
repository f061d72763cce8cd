// What an op implementation sees while one instruction executes: the core's memories, the
// kernel's HBM bindings, and reusable scratch. Resolution checks bounds and throws ExecFault.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "exec/core_memory.hpp"
#include "exec/tile.hpp"
#include "isa/instruction.hpp"

namespace trn::sim::exec {

// One kernel argument bound at launch: a tensor argument's device memory (mapped into this
// process), or a scalar argument's value (data null, bytes 0).
struct HbmBinding {
  std::byte *data = nullptr;
  uint64_t bytes = 0;
  uint64_t scalar = 0;  // scalar arguments: the value's bits (f32 or i32 in the low 32 bits)
};

class ExecContext {
 public:
  // `arg_names` (optional, one per argument) make fault messages name the argument.
  ExecContext(CoreMemory &memory, std::span<const HbmBinding> args,
              std::span<const std::byte> constants, std::span<const std::string> arg_names = {});

  CoreMemory &memory() { return memory_; }
  // Resolve an access pattern; throws ExecFault naming `what` ("src0") when any element of it
  // falls outside its memory (SBUF/PSUM partition range or size, HBM argument size).
  Tile resolve(const isa::AccessPattern &ap, const char *what) const;

  // Scratch rows of fp32, grown on demand and reused across instructions (never shrunk).
  float *scratch(unsigned slot, size_t floats);

 private:
  CoreMemory &memory_;
  std::span<const HbmBinding> args_;
  std::span<const std::byte> constants_;
  std::span<const std::string> arg_names_;
  std::vector<float> scratch_[4];
};

}  // namespace trn::sim::exec
