// Time of each instruction: engine cycles from the published formulas (docs/hardware.md §3) at
// the engine's clock (§1.2), and DMA transfer time from the per-engine DMA rate (§1.5).
// docs/ISA.md ("Cost model") lists every formula with its source. The one model: the simulated
// device charges it and the kernel builder schedules by it, so a kernel's estimate and its
// simulated time cannot drift apart.
#pragma once

#include <cstdint>

#include "isa/instruction.hpp"
#include "isa/target.hpp"

namespace trn::isa {

// Generation-independent constants of the model, each with its source (docs/hardware.md).
struct CostConstants {
  static constexpr uint64_t kMinII = 64;                // MIN_II, engine cycles [§3.2, ISA26]
  static constexpr uint64_t kMatmulInit = 64;           // MM_INIT_LATENCY [§3.1, A1]
  static constexpr uint64_t kFp32MatmulFactor = 4;      // fp32 matmul is 4x bf16 [§3.1]
  static constexpr uint64_t kGpSimdStart = 150;         // iota/affine_select start [§3.2]
  static constexpr uint64_t kAccumulateExtra = kMinII;  // activation_reduce: + MIN_II [§3.2]
  static constexpr uint64_t kDmaIssueCycles = kMinII;   // a dma_copy on its issuing sequencer
  static constexpr uint64_t kSequencerCycles = 1;       // nop, sem_wait/signal, barrier
  // Per-descriptor DMA overhead, in bytes at the engine's rate: 2 KiB runs reach 94% of peak,
  // 256 B runs 67% (the bandwidth curve of §1.5 [DBW]; model-defined constant).
  static constexpr uint64_t kDmaDescriptorBytes = 128;
};

struct InstructionCost {
  uint64_t cycles = 0;  // on the instruction's engine
  uint64_t flops = 0;   // Tensor engine multiply-adds x 2
};

// Cost of a compute or sequencer instruction on its engine (for dma_copy: the issue cost only).
// Only the operands' shapes matter (dtype, memory, counts and strides), never their data, so the
// builder can ask before the kernel exists.
InstructionCost instruction_cost(const Instruction &inst, const CoreSpec &spec);

struct DmaCost {
  uint64_t bytes = 0;        // bytes moved (the wider side of a casting copy)
  uint64_t descriptors = 0;  // contiguous runs
  uint64_t ps = 0;           // transfer time on one DMA engine, picoseconds
};
// Transfer of a dma_copy (dst <- src0) on one DMA engine.
DmaCost dma_cost(const Instruction &inst, const CoreSpec &spec);

// Picoseconds of `cycles` at `hz`, rounded to nearest.
uint64_t cycles_to_ps(uint64_t cycles, uint64_t hz);

}  // namespace trn::isa
