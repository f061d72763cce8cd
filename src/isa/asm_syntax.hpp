// What the assembler and the disassembler agree on: the instruction fields a line can set (each
// at most once) and the spelling of every instruction flag.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

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

// Words that start a clause after an instruction's operands (`scale=...`, `wait ...`).
constexpr std::array<const char *, 18> kClauseWords = {
    "wait", "signal", "scale", "bias", "accumulate", "axes",  "dst",  "dst2",  "src0",
    "src1", "src2",   "imm0",  "imm1", "iimm0",      "iimm1", "func", "func2", "flags"};

// Words that cannot name a tile, a semaphore or (written bare in an operand) a scalar argument:
// they would be ambiguous there. pN (partitions), sN (semaphores) and qN (queues) included.
inline bool is_reserved(std::string_view w) {
  static constexpr std::array<const char *, 12> kWords = {"sbuf",  "psum", "hbm",      "pattern",
                                                          "none",  "inf",  "infinity", "nan",
                                                          "const", "rows", "engine",   "queue"};
  for (const char *k : kWords)
    if (w == k) return true;
  for (const char *k : kClauseWords)
    if (w == k) return true;
  for (const FlagName &f : kFlagNames)
    if (w == f.name) return true;
  if (!w.empty() && (w[0] == 'p' || w[0] == 's' || w[0] == 'q')) {
    bool digits = true;
    for (size_t i = 1; i < w.size(); ++i) digits = digits && w[i] >= '0' && w[i] <= '9';
    if (digits) return true;
  }
  return false;
}

}  // namespace trn::isa::syntax
