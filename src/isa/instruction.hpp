// One instruction of a NeuronCore engine stream, and the access patterns that address its tiles.
// Plain data: the kernel container serialises these field by field (little endian).
#pragma once

#include <array>
#include <cstdint>

#include "isa/dtype.hpp"
#include "isa/opcodes.hpp"

namespace trn::isa {

enum class MemSpace : uint8_t {
  kNone = 0,  // operand unused (or, for iota/affine_select, a pattern without memory)
  kSbuf = 1,
  kPsum = 2,
  kHbm = 3,  // kernel argument `arg` (or the constants block, arg == kConstantsArg)
};

constexpr uint16_t kConstantsArg = 0xFFFF;
constexpr uint32_t kMaxFreeDims = 4;
constexpr uint32_t kPartitions = 128;

struct Dim {
  int32_t stride = 0;  // in elements (may be negative)
  uint32_t count = 0;
};

// A tile: partitions x up to 4 free dims, iterated row-major (last dim fastest).
// SBUF/PSUM: partitions [partition_start, partition_start + partition_count), each addressed at
// byte `offset` within the partition. HBM: `partition_count` rows `partition_stride` elements
// apart, starting `offset` bytes into argument `arg`; the row is the outermost dim of a DMA.
struct AccessPattern {
  MemSpace space = MemSpace::kNone;
  DType dtype = DType::kInvalid;
  uint16_t arg = 0;
  uint32_t partition_start = 0;
  uint32_t partition_count = 0;
  int64_t partition_stride = 0;  // HBM only, elements
  uint64_t offset = 0;           // bytes
  uint32_t num_dims = 0;
  std::array<Dim, kMaxFreeDims> dims{};

  bool used() const { return space != MemSpace::kNone; }
  uint64_t free_elements() const;  // product of dims counts (1 when num_dims == 0)
  uint64_t elements() const { return uint64_t{partition_count} * free_elements(); }
};

struct SemWait {
  SemCmp cmp = SemCmp::kNone;  // kNone: no wait
  uint16_t sem = 0;
  uint32_t value = 0;
};

struct SemUpdate {
  SemOp op = SemOp::kNone;  // kNone: no update
  uint16_t sem = 0;
  uint32_t value = 0;
};

// Instruction flags (bit set in Instruction::flags).
enum : uint32_t {
  kFlagMatmulStart = 1u << 0,   // nc_matmul: overwrite PSUM instead of accumulating
  kFlagReverse0 = 1u << 1,      // tensor_scalar: operand0 op data instead of data op operand0
  kFlagReverse1 = 1u << 2,      // tensor_scalar: same for the second op
  kFlagNegate = 1u << 3,        // tensor_reduce: negate the result
  kFlagAccumulate = 1u << 4,    // activation: add-reduce the output along the free dims into dst2
  kFlagScaleTile = 1u << 5,     // activation: scale from src2 ([P,1]) instead of imm[0]
  kFlagBiasTile = 1u << 6,      // activation: bias from src1 ([P,1]) instead of imm[1]
  kFlagOperand0Tile = 1u << 7,  // tensor_scalar: operand0 from src1 ([P,1]) instead of imm[0]
  kFlagOperand1Tile = 1u << 8,  // tensor_scalar: operand1 from src2 ([P,1]) instead of imm[1]
};
constexpr uint32_t kFlagsKnown = (1u << 9) - 1;

// Operand roles by opcode (docs/ISA.md has the full table):
//   dma_copy        dst <- src0 (with dtype cast), on DMA queue `queue`
//   nc_matmul       dst[M,N] (PSUM) (+)= src0[K,M]^T @ src1[K,N]
//   nc_transpose    dst[F,P] <- src0[P,F]
//   activation      dst = func(src0 * scale + bias); optional add-reduce into dst2 [P,1]
//   tensor_tensor   dst = src0 op0 src1
//   tensor_scalar   dst = (src0 op0 operand0) op1 operand1
//   tensor_reduce   dst = op0-reduce of src0 over its last `iimm[0]` free dims (0 = all)
//   tensor_copy     dst <- src0
//   memset          dst <- imm[0]
//   iota            dst = iimm[0] + p * iimm[1] + sum(step_d * i_d), steps/counts in src0.dims
//   affine_select   dst = cmp(value, 0) ? src1 : imm[0], value as for iota (pattern in src0)
// The four immediates of an instruction, as slots that may read a scalar kernel argument instead
// of the value in the instruction (docs/ISA.md, "Scalar arguments"): imm[0], imm[1], iimm[0],
// iimm[1]. Float slots take an f32 argument, integer slots an i32 one.
enum class ImmSlot : uint8_t { kImm0 = 0, kImm1 = 1, kIimm0 = 2, kIimm1 = 3 };
constexpr uint32_t kImmSlotCount = 4;
constexpr uint16_t kNoScalarArg = 0xFFFF;  // the slot holds its own value

struct Instruction {
  Opcode opcode = Opcode::kNop;
  Engine engine = Engine::kSync;
  uint8_t func = 0;   // ActFunc (activation), AluOp op0 (tensor_*), AluOp cmp (affine_select)
  uint8_t func2 = 0;  // AluOp op1 (tensor_scalar)
  uint8_t queue = 0;  // dma_copy: DMA queue (engine) 0..15
  uint32_t flags = 0;
  AccessPattern dst, dst2, src0, src1, src2;
  std::array<float, 2> imm{};
  std::array<int32_t, 2> iimm{};
  SemWait wait;
  SemUpdate signal;
  // Per ImmSlot: the scalar argument whose launch value the slot reads, or kNoScalarArg. A slot
  // that reads an argument keeps its own value at 0.
  std::array<uint16_t, kImmSlotCount> scalar_arg = {kNoScalarArg, kNoScalarArg, kNoScalarArg,
                                                    kNoScalarArg};
};

}  // namespace trn::isa
