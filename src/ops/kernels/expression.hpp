// Fused elementwise kernels: a small expression over [rows, cols] inputs, computed tile by tile
// in fp32 with the values kept in SBUF, written to one or more outputs. One generator serves the
// unary and binary ops, their scalar variants and backward ops, fill, arange, casts and the fused
// optimizer steps: each is a few steps of this form. Inputs broadcast as the binary kernel's do:
// [1, cols] along the partitions (loaded once per column chunk), [rows, 1] along the free axis
// (a per-partition operand), [1, 1] both.
//
// Arguments, in order: every input (inout when an output writes it back), every other output
// (an int64 one as i32 [rows, 2 * cols]), then the scalars (f32, launch-time values, so one binary
// serves every learning rate or alpha).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "isa/opcodes.hpp"
#include "kbuild/build_target.hpp"
#include "kbuild/kernels/tiling.hpp"

namespace trn::ops::kernels {

enum class Layout : uint8_t { kFull, kRow, kCol, kScalar };  // [R,C], [1,C], [R,1], [1,1]

struct ExprInput {
  isa::DType dtype = isa::DType::kF32;
  Layout layout = Layout::kFull;
};

// Values are numbered: the inputs first, then one per step in order.
struct ExprStep {
  enum class Kind : uint8_t {
    kActivation,  // func(a)
    kAlu,         // a op b
    kAluScalar,   // a op s (or s op a when reverse); s a constant or a scalar argument
    kScalar,      // s, spread over the tile (fill)
    kIndex,       // the element's row-major index in the [rows, cols] matrix (arange)
    kSelect,      // a != 0 ? b : c, exactly (NaN and infinities included): a select on bits
  };
  Kind kind = Kind::kAlu;
  isa::ActFunc func = isa::ActFunc::kIdentity;
  isa::AluOp op = isa::AluOp::kAdd;
  uint16_t a = 0, b = 0, c = 0;
  int16_t scalar = -1;  // the scalar argument, or -1 for `constant`
  float constant = 0.0f;
  bool reverse = false;
};

struct ExprOutput {
  uint16_t value = 0;
  isa::DType dtype = isa::DType::kF32;
  int16_t input = -1;  // >= 0: written back into that input (in place), no argument of its own
  // An int64 output, which the ISA has no dtype for: stored as (low, high) int32 words, the value
  // converted to int32 and its sign extended. Exact for an integer value fp32 holds exactly (the
  // ops that set it check that on the host). `dtype` is then kI32 and the argument's columns
  // twice the output's.
  bool int64 = false;
};

struct ExprConfig {
  std::string name;  // the kernel's name stem: "add", "adam", ...
  uint64_t rows = 0, cols = 0;
  std::vector<ExprInput> inputs;
  std::vector<ExprStep> steps;
  std::vector<ExprOutput> outputs;
  uint32_t scalars = 0;
  uint64_t index_base = 0;  // what kIndex adds: the piece's first element in a larger tensor
  kbuild::BuildTarget target{};
};

// Everything the kernel depends on (not the target), as text for cache keys.
std::string expression_signature(const ExprConfig &config);
kbuild::Built build_expression(const ExprConfig &config);

}  // namespace trn::ops::kernels
