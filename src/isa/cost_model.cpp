#include "isa/cost_model.hpp"

#include <algorithm>
#include <array>
#include <cstddef>

#include "isa/dtype.hpp"

namespace trn::isa {

using C = CostConstants;
__extension__ typedef unsigned __int128 U128;  // cycles x 10^12 overflows 64 bits

uint64_t cycles_to_ps(uint64_t cycles, uint64_t hz) {
  return static_cast<uint64_t>((U128{cycles} * 1'000'000'000'000u + hz / 2) / hz);
}

namespace {

// The geometry of an operand, in bytes, as the engines see it: what the formulas depend on.
struct Shape {
  MemSpace space = MemSpace::kNone;
  DType dtype = DType::kInvalid;
  uint32_t elem_size = 0;
  uint32_t partitions = 0;
  ptrdiff_t partition_pitch = 0;  // HBM: bytes between rows; on chip partitions never adjoin
  uint32_t num_dims = 0;
  std::array<uint32_t, kMaxFreeDims> counts{};
  std::array<ptrdiff_t, kMaxFreeDims> strides{};
  uint64_t free_elements = 1;

  // True when the free elements of a partition are contiguous (row-major, no gaps).
  bool contiguous() const {
    ptrdiff_t expect = elem_size;
    for (uint32_t d = num_dims; d-- > 0;) {
      if (counts[d] > 1 && strides[d] != expect) return false;
      expect *= counts[d];
    }
    return true;
  }
  // True when partition p + 1 starts right where partition p's `bytes` end: only HBM rows can
  // (SBUF and PSUM partitions are separate memories).
  bool rows_adjoin(ptrdiff_t bytes) const {
    return partitions == 1 || (space == MemSpace::kHbm && partition_pitch == bytes);
  }
};

Shape shape_of(const AccessPattern &ap) {
  Shape t;
  if (!ap.used()) return t;
  t.space = ap.space;
  t.dtype = ap.dtype;
  t.elem_size = dtype_size(ap.dtype);
  t.partitions = ap.partition_count;
  t.num_dims = std::min(ap.num_dims, kMaxFreeDims);
  for (uint32_t d = 0; d < t.num_dims; ++d) {
    t.counts[d] = ap.dims[d].count;
    t.strides[d] = ptrdiff_t{ap.dims[d].stride} * t.elem_size;
    t.free_elements *= ap.dims[d].count;
  }
  if (ap.space == MemSpace::kHbm)
    t.partition_pitch = static_cast<ptrdiff_t>(ap.partition_stride * t.elem_size);
  return t;
}

bool is_16bit_float(DType t) {
  return t == DType::kBf16 || t == DType::kF16;
}

// Innermost stride over 16 bytes halves the SBUF/PSUM interface bandwidth [§1.3, A1].
bool strided(const Shape &t) {
  if (t.space != MemSpace::kSbuf && t.space != MemSpace::kPsum) return false;
  if (t.num_dims == 0) return false;
  const ptrdiff_t s = t.strides[t.num_dims - 1];
  return t.counts[t.num_dims - 1] > 1 && (s > 16 || s < -16);
}

uint64_t max_ii(uint64_t n) {
  return std::max(C::kMinII, n);
}

// NeuronCore-v3+ Vector performance modes [§3.2, A2]: 4x for tensor_copy/tensor_scalar with
// 16-bit floats in and out of SBUF with a contiguous innermost dim, 2x when non-contiguous or
// one side in PSUM; 2x for tensor_tensor with both inputs in SBUF and all tensors 16-bit floats.
// NeuronCore-v4 gives the Scalar engine the 2x mode for tensor_scalar/tensor_copy [A3].
uint64_t perf_mode_divisor(const Instruction &inst, const CoreSpec &spec, const Shape &dst,
                           const Shape &src0, const Shape &src1) {
  if (spec.core_version < 3) return 1;
  const bool copy_like = inst.opcode == Opcode::kTensorCopy || inst.opcode == Opcode::kTensorScalar;
  if (inst.engine == Engine::kVector && copy_like && is_16bit_float(dst.dtype) &&
      is_16bit_float(src0.dtype)) {
    const bool both_sbuf = dst.space == MemSpace::kSbuf && src0.space == MemSpace::kSbuf;
    const bool contiguous = dst.contiguous() && src0.contiguous();
    return both_sbuf && contiguous ? 4 : 2;
  }
  if (inst.engine == Engine::kVector && inst.opcode == Opcode::kTensorTensor &&
      src0.space == MemSpace::kSbuf && src1.space == MemSpace::kSbuf && is_16bit_float(dst.dtype) &&
      is_16bit_float(src0.dtype) && is_16bit_float(src1.dtype))
    return 2;
  if (spec.core_version >= 4 && inst.engine == Engine::kScalar && copy_like &&
      is_16bit_float(dst.dtype) && is_16bit_float(src0.dtype))
    return 2;
  return 1;
}

uint64_t tensor_tensor_cycles(const Instruction &inst, const Shape &dst, const Shape &src0,
                              const Shape &src1) {
  const uint64_t n = dst.free_elements;
  // One input in PSUM and one in SBUF, or both in SBUF as all-bf16 unit-stride add/sub/mul:
  // one pass; otherwise two [§3.2, ISA26].
  const bool split = (src0.space == MemSpace::kPsum) != (src1.space == MemSpace::kPsum);
  const auto op = static_cast<AluOp>(inst.func);
  const bool simple_op = op == AluOp::kAdd || op == AluOp::kSubtract || op == AluOp::kMultiply;
  const bool bf16_fast = src0.space == MemSpace::kSbuf && src1.space == MemSpace::kSbuf &&
                         dst.dtype == DType::kBf16 && src0.dtype == DType::kBf16 &&
                         src1.dtype == DType::kBf16 && simple_op && src0.contiguous() &&
                         src1.contiguous() && dst.contiguous();
  return split || bf16_fast ? n : 2 * n;
}

}  // namespace

InstructionCost instruction_cost(const Instruction &inst, const CoreSpec &spec) {
  const Shape dst = shape_of(inst.dst), src0 = shape_of(inst.src0), src1 = shape_of(inst.src1);
  InstructionCost c;
  switch (inst.opcode) {
    case Opcode::kNop:
    case Opcode::kSemWait:
    case Opcode::kSemSignal:
    case Opcode::kBarrier: c.cycles = C::kSequencerCycles; return c;
    case Opcode::kDmaCopy: c.cycles = C::kDmaIssueCycles; return c;
    case Opcode::kMatmul: {
      // Back-to-back cost max(min(64, N_stationary), N_moving) cycles, x4 for fp32 [§3.1, ISA26].
      const uint64_t k = src0.partitions, m = src0.free_elements, n = src1.free_elements;
      c.cycles = std::max(std::min(C::kMatmulInit, m), n);
      if (src0.dtype == DType::kF32) c.cycles *= C::kFp32MatmulFactor;
      c.flops = 2 * k * m * n;
      return c;
    }
    case Opcode::kTranspose:
      if (inst.engine == Engine::kTensor) {
        // max(P, min(64, F)) cycles [§3.1, ISA26].
        c.cycles =
            std::max<uint64_t>(src0.partitions, std::min(C::kMatmulInit, src0.free_elements));
        return c;
      }
      c.cycles = max_ii(dst.free_elements);
      return c;
    default: break;
  }

  uint64_t n = dst.free_elements;
  switch (inst.opcode) {
    case Opcode::kActivation:
      n = max_ii(n) + ((inst.flags & kFlagAccumulate) ? C::kAccumulateExtra : 0);
      break;
    case Opcode::kTensorTensor: n = tensor_tensor_cycles(inst, dst, src0, src1); break;
    case Opcode::kTensorReduce: {
      // N/2 for bf16 in/out add or max, else N, over the input elements [§3.2, ISA26].
      const auto op = static_cast<AluOp>(inst.func);
      const bool half = src0.dtype == DType::kBf16 && dst.dtype == DType::kBf16 &&
                        (op == AluOp::kAdd || op == AluOp::kMax);
      n = half ? src0.free_elements / 2 : src0.free_elements;
      break;
    }
    case Opcode::kMemset:
      // N/2 for zero into bf16/fp16 [§3.2, ISA26].
      if (inst.imm[0] == 0.0f && is_16bit_float(dst.dtype)) n /= 2;
      break;
    case Opcode::kIota:
    case Opcode::kAffineSelect:
      c.cycles = C::kGpSimdStart + n;  // 150 + N GpSimd cycles [§3.2, ISA26]
      return c;
    default:  // tensor_scalar, tensor_copy: max(MIN_II, N)
      break;
  }
  n = (n + perf_mode_divisor(inst, spec, dst, src0, src1) - 1) /
      perf_mode_divisor(inst, spec, dst, src0, src1);
  if (strided(dst) || strided(src0) || strided(src1)) n += n / 2;
  c.cycles = max_ii(n);
  return c;
}

namespace {

// Contiguous runs of a tile: its innermost dims merge while they are dense, and whole
// partitions/rows merge only when the rows themselves are back to back.
uint64_t runs(const Shape &t) {
  uint64_t run = t.elem_size;  // bytes of the longest contiguous prefix
  uint64_t count = t.free_elements * t.partitions;
  ptrdiff_t expect = t.elem_size;
  uint32_t d = t.num_dims;
  while (d > 0) {
    --d;
    if (t.counts[d] > 1 && t.strides[d] != expect) break;
    run *= t.counts[d];
    expect *= t.counts[d];
    if (d == 0 && t.rows_adjoin(expect)) run *= t.partitions;
  }
  if (t.num_dims == 0 && t.rows_adjoin(expect)) run *= t.partitions;
  const uint64_t elements_per_run = run / t.elem_size;
  return elements_per_run ? (count + elements_per_run - 1) / elements_per_run : count;
}

}  // namespace

DmaCost dma_cost(const Instruction &inst, const CoreSpec &spec) {
  const Shape dst = shape_of(inst.dst), src = shape_of(inst.src0);
  DmaCost c;
  const uint64_t elements = uint64_t{src.partitions} * src.free_elements;
  c.bytes = elements * std::max(src.elem_size, dst.elem_size);
  c.descriptors = std::max(runs(src), runs(dst));
  const U128 work = U128{c.bytes} + U128{c.descriptors} * C::kDmaDescriptorBytes;
  c.ps = static_cast<uint64_t>((work * 1'000'000'000'000u + spec.dma_engine_bytes_per_s / 2) /
                               spec.dma_engine_bytes_per_s);
  return c;
}

}  // namespace trn::isa
