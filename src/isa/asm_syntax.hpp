// What the assembler and the disassembler agree on: the instruction fields a line can set (each
// at most once) and the spelling of every instruction flag.
#pragma once

#include <array>
#include <cstdint>

#include "isa/instruction.hpp"

namespace trn::isa::syntax {

enum Field : uint32_t {
  kFDst = 1u << 0,
  kFDst2 = 1u << 1,
  kFSrc0 = 1u << 2,
  kFSrc1 = 1u << 3,
  kFSrc2 = 1u << 4,
  kFImm0 = 1u << 5,
  kFImm1 = 1u << 6,
  kFIimm0 = 1u << 7,
  kFIimm1 = 1u << 8,
  kFFunc = 1u << 9,
  kFFunc2 = 1u << 10,
  kFQueue = 1u << 11,
  kFWait = 1u << 12,
  kFSignal = 1u << 13,
  kFEngine = 1u << 14,
};

struct FlagName {
  const char *name;
  uint32_t bit;
};
constexpr std::array<FlagName, 9> kFlagNames = {{{"start", kFlagMatmulStart},
                                                 {"reverse0", kFlagReverse0},
                                                 {"reverse1", kFlagReverse1},
                                                 {"negate", kFlagNegate},
                                                 {"accumulate", kFlagAccumulate},
                                                 {"scale_tile", kFlagScaleTile},
                                                 {"bias_tile", kFlagBiasTile},
                                                 {"operand0_tile", kFlagOperand0Tile},
                                                 {"operand1_tile", kFlagOperand1Tile}}};

}  // namespace trn::isa::syntax
