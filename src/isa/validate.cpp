// The ISA's static rules (docs/ISA.md, "Validation"). Memory extents that depend on the core
// (SBUF size) or on the launch (HBM argument sizes) are checked when the instruction executes.
#include "isa/validate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>

#include "isa/scalar_args.hpp"

namespace trn::isa {

namespace {

using Error = std::optional<std::string>;

// 128-bit: a 32-bit stride times a 32-bit count times the element size overflows 64 bits.
__extension__ typedef __int128 Wide;

constexpr uint32_t kPsumBankBytes = 2048;
constexpr uint32_t kMaxStationaryFree = 128;
constexpr uint32_t kMaxMovingFree = 512;
constexpr uint64_t kMaxSbufFreeElements = 65536;
constexpr uint64_t kMaxPsumFreeElements = 4096;

const char *space_name(MemSpace s) {
  switch (s) {
    case MemSpace::kNone: return "none";
    case MemSpace::kSbuf: return "SBUF";
    case MemSpace::kPsum: return "PSUM";
    case MemSpace::kHbm: return "HBM";
  }
  return "invalid";
}

bool in(MemSpace s, std::initializer_list<MemSpace> allowed) {
  for (MemSpace a : allowed)
    if (s == a) return true;
  return false;
}

bool in(DType t, std::initializer_list<DType> allowed) {
  for (DType a : allowed)
    if (t == a) return true;
  return false;
}

// Rules every used access pattern obeys.
Error check_ap(const AccessPattern &ap, const char *name, const Target &target,
               const Program *program, bool compute) {
  if (ap.space == MemSpace::kNone)
    return fmt::format("{} is missing: this instruction reads or writes it", name);
  if (!in(ap.space, {MemSpace::kSbuf, MemSpace::kPsum, MemSpace::kHbm}))
    return fmt::format("{} has an unknown memory space {}", name, static_cast<int>(ap.space));
  if (!dtype_is_valid(ap.dtype))
    return fmt::format("{} has an unknown dtype {}", name, static_cast<int>(ap.dtype));
  if (ap.num_dims > kMaxFreeDims)
    return fmt::format("{} has {} free dims; at most {} are allowed", name, ap.num_dims,
                       kMaxFreeDims);
  if (ap.partition_count == 0) return fmt::format("{} has 0 partitions", name);
  for (uint32_t d = 0; d < ap.num_dims; ++d) {
    if (ap.dims[d].count == 0) return fmt::format("{} dim {} has count 0", name, d);
    if (compute && ap.space != MemSpace::kHbm) {
      // Engine access patterns carry uint16 sizes and int16 strides [docs/hardware.md §1.3].
      if (ap.dims[d].count > 65535)
        return fmt::format("{} dim {} has {} elements; engines address at most 65535 per dim", name,
                           d, ap.dims[d].count);
      if (ap.dims[d].stride < -32768 || ap.dims[d].stride > 32767)
        return fmt::format("{} dim {} has stride {}; engine strides are 16-bit (-32768..32767)",
                           name, d, ap.dims[d].stride);
    }
  }
  if (ap.space == MemSpace::kHbm) {
    if (ap.arg == kConstantsArg) {
      if (program && program->constants.empty())
        return fmt::format("{} uses the constants block, but the kernel has none", name);
    } else if (program && ap.arg >= program->args.size()) {
      return fmt::format("{} names argument {}, but the kernel has {}", name, ap.arg,
                         program->args.size());
    } else if (program && program->args[ap.arg].is_scalar()) {
      return fmt::format(
          "{} names argument '{}', which is a scalar; a scalar is read as an "
          "immediate (e.g. scale={}), not addressed in HBM",
          name, program->args[ap.arg].name, program->args[ap.arg].name);
    }
    return std::nullopt;
  }
  if (ap.partition_count > target.partitions ||
      uint64_t{ap.partition_start} + ap.partition_count > target.partitions)
    return fmt::format("{} covers partitions {}..{}; the core has {}", name, ap.partition_start,
                       uint64_t{ap.partition_start} + ap.partition_count - 1, target.partitions);
  if (!compute) return std::nullopt;
  // Partition start alignment for engine access [docs/hardware.md §1.3].
  const uint32_t start = ap.partition_start, count = ap.partition_count;
  if ((count > 64 && start != 0) || (count > 32 && count <= 64 && start % 64 != 0) ||
      (count <= 32 && start % 32 != 0))
    return fmt::format(
        "{} starts at partition {} with {} partitions; engines need start 0 for more than 64 "
        "partitions, 0 or 64 for 33-64, and a multiple of 32 for up to 32",
        name, start, count);
  const uint64_t max_free =
      ap.space == MemSpace::kPsum ? kMaxPsumFreeElements : kMaxSbufFreeElements;
  if (ap.free_elements() > max_free)
    return fmt::format("{} has {} free elements per partition; {} allows at most {}", name,
                       ap.free_elements(), space_name(ap.space), max_free);
  return std::nullopt;
}

// The bytes [first, end) of each partition an on-chip pattern touches, against the partition's
// size on the target (the SBUF size differs by generation).
Error check_extent(const AccessPattern &ap, const char *name, const Target &target) {
  if (ap.space != MemSpace::kSbuf && ap.space != MemSpace::kPsum) return std::nullopt;
  const uint32_t size = dtype_size(ap.dtype);
  Wide lo = 0, hi = size;
  for (uint32_t d = 0; d < ap.num_dims && d < kMaxFreeDims; ++d) {
    if (ap.dims[d].count == 0) continue;
    const Wide span = Wide{ap.dims[d].stride} * (ap.dims[d].count - 1) * size;
    (span < 0 ? lo : hi) += span;
  }
  const bool sbuf = ap.space == MemSpace::kSbuf;
  const uint64_t limit = sbuf ? target.sbuf_bytes_per_partition : target.psum_bytes_per_partition;
  const Wide first = Wide{ap.offset} + lo, end = Wide{ap.offset} + hi;
  if (first >= 0 && end <= Wide{limit}) return std::nullopt;
  return fmt::format(
      "{} reaches bytes [{}, {}) of each {} partition, which has {} bytes on "
      "NeuronCore-v{}",
      name, first, end, space_name(ap.space), limit, target.core_version);
}

bool engine_allowed(Opcode op, Engine e, uint32_t core_version) {
  switch (op) {
    case Opcode::kNop:
    case Opcode::kSemWait:
    case Opcode::kSemSignal:
    case Opcode::kBarrier: return true;
    case Opcode::kDmaCopy:
      return e == Engine::kSync || e == Engine::kScalar || e == Engine::kGpSimd;
    case Opcode::kMatmul: return e == Engine::kTensor;
    case Opcode::kTranspose: return e == Engine::kTensor || e == Engine::kVector;
    case Opcode::kActivation:
      return e == Engine::kScalar || (e == Engine::kGpSimd && core_version >= 4);
    case Opcode::kTensorTensor: return e == Engine::kVector || e == Engine::kGpSimd;
    case Opcode::kTensorScalar:
      return e == Engine::kVector || e == Engine::kScalar || e == Engine::kGpSimd;
    case Opcode::kTensorReduce: return e == Engine::kVector;
    case Opcode::kTensorCopy:
      return e == Engine::kVector || e == Engine::kGpSimd ||
             (e == Engine::kScalar && core_version >= 3);
    case Opcode::kMemset: return e == Engine::kVector || e == Engine::kGpSimd;
    case Opcode::kIota:
    case Opcode::kAffineSelect: return e == Engine::kGpSimd;
  }
  return false;
}

const char *allowed_engines(Opcode op) {
  switch (op) {
    case Opcode::kDmaCopy: return "sync, scalar or gpsimd (the engines that trigger DMA)";
    case Opcode::kMatmul: return "tensor";
    case Opcode::kTranspose: return "tensor or vector";
    case Opcode::kActivation: return "scalar (gpsimd from NeuronCore-v4)";
    case Opcode::kTensorTensor: return "vector or gpsimd";
    case Opcode::kTensorScalar: return "vector, scalar or gpsimd";
    case Opcode::kTensorReduce: return "vector";
    case Opcode::kTensorCopy: return "vector, gpsimd, or scalar from NeuronCore-v3";
    case Opcode::kMemset: return "vector or gpsimd";
    case Opcode::kIota:
    case Opcode::kAffineSelect: return "gpsimd";
    default: return "any";
  }
}

// Which operands each opcode uses; every other operand must be unset.
struct Operands {
  bool dst, dst2, src0, src1, src2;
};

Operands operands_of(const Instruction &inst) {
  switch (inst.opcode) {
    case Opcode::kDmaCopy:
    case Opcode::kTranspose:
    case Opcode::kTensorCopy:
    case Opcode::kTensorReduce: return {true, false, true, false, false};
    case Opcode::kMatmul:
    case Opcode::kTensorTensor: return {true, false, true, true, false};
    case Opcode::kActivation:
      return {true, (inst.flags & kFlagAccumulate) != 0, true, (inst.flags & kFlagBiasTile) != 0,
              (inst.flags & kFlagScaleTile) != 0};
    case Opcode::kTensorScalar:
      return {true, false, true, (inst.flags & kFlagOperand0Tile) != 0,
              (inst.flags & kFlagOperand1Tile) != 0};
    case Opcode::kMemset: return {true, false, false, false, false};
    case Opcode::kIota:
      return {true, false, false, false, false};  // src0 is a pattern, checked separately
    case Opcode::kAffineSelect: return {true, false, false, true, false};
    default: return {false, false, false, false, false};
  }
}

bool same_shape(const AccessPattern &a, const AccessPattern &b) {
  return a.partition_count == b.partition_count && a.free_elements() == b.free_elements();
}

Error need_same_shape(const AccessPattern &a, const char *an, const AccessPattern &b,
                      const char *bn) {
  if (same_shape(a, b)) return std::nullopt;
  return fmt::format("{} is [{} partitions x {}] but {} is [{} x {}]; they must match", an,
                     a.partition_count, a.free_elements(), bn, b.partition_count,
                     b.free_elements());
}

Error need_column(const AccessPattern &col, const char *name, const AccessPattern &dst) {
  if (col.partition_count == dst.partition_count && col.free_elements() == 1) return std::nullopt;
  return fmt::format("{} must be a [{} partitions x 1] column, it is [{} x {}]", name,
                     dst.partition_count, col.partition_count, col.free_elements());
}

Error check_matmul(const Instruction &inst, const Target &target) {
  const auto &st = inst.src0, &mv = inst.src1, &d = inst.dst;
  const std::initializer_list<DType> kInputs = {DType::kBf16, DType::kF16, DType::kFp8E4m3,
                                                DType::kFp8E5m2, DType::kF32};
  if (!in(st.dtype, kInputs) || !in(mv.dtype, kInputs))
    return fmt::format("inputs are {} and {}; nc_matmul takes bf16, f16, fp8e4m3, fp8e5m2, f32",
                       dtype_name(st.dtype), dtype_name(mv.dtype));
  if ((st.dtype == DType::kF32) != (mv.dtype == DType::kF32))
    return fmt::format("inputs are {} and {}; if one is f32 both must be", dtype_name(st.dtype),
                       dtype_name(mv.dtype));
  if (!(d.dtype == DType::kF32 || (d.dtype == DType::kBf16 && target.core_version >= 4)))
    return fmt::format("dst is {}; PSUM accumulates in f32 (bf16 from NeuronCore-v4)",
                       dtype_name(d.dtype));
  if (st.partition_count != mv.partition_count || st.partition_start != mv.partition_start)
    return fmt::format(
        "stationary covers partitions {}+{} and moving {}+{}; the contraction dim K must be "
        "the same partitions for both",
        st.partition_start, st.partition_count, mv.partition_start, mv.partition_count);
  if (st.free_elements() > kMaxStationaryFree)
    return fmt::format("stationary has {} free elements (M); at most {}", st.free_elements(),
                       kMaxStationaryFree);
  if (mv.free_elements() > kMaxMovingFree)
    return fmt::format("moving has {} free elements (N); at most {}", mv.free_elements(),
                       kMaxMovingFree);
  if (d.partition_count != st.free_elements() || d.free_elements() != mv.free_elements())
    return fmt::format("dst is [{} x {}] but the product is [M={} x N={}]", d.partition_count,
                       d.free_elements(), st.free_elements(), mv.free_elements());
  // One accumulation group lives in one 2 KiB PSUM bank per partition [docs/hardware.md §1.3].
  Wide lo = 0, hi = dtype_size(d.dtype);
  for (uint32_t i = 0; i < d.num_dims && i < kMaxFreeDims; ++i) {
    if (d.dims[i].count == 0) continue;
    const Wide span = Wide{d.dims[i].stride} * (d.dims[i].count - 1) * dtype_size(d.dtype);
    (span < 0 ? lo : hi) += span;
  }
  const Wide first_w = Wide{d.offset} + lo, last_w = Wide{d.offset} + hi - 1;
  const Wide psum_end = Wide{target.psum_banks} * kPsumBankBytes;
  const int64_t first = first_w < 0 ? -1 : static_cast<int64_t>(std::min(first_w, psum_end));
  const int64_t last = static_cast<int64_t>(std::min(last_w, psum_end));
  if (first < 0 || first / kPsumBankBytes != last / kPsumBankBytes || last >= psum_end)
    return fmt::format(
        "dst spans PSUM bytes {}..{}; a matmul writes within one of the {} banks "
        "of {} bytes per partition",
        first, last, target.psum_banks, kPsumBankBytes);
  return std::nullopt;
}

Error check_transpose(const Instruction &inst) {
  const auto &s = inst.src0, &d = inst.dst;
  const uint64_t limit = inst.engine == Engine::kTensor ? 128 : 32;
  if (s.partition_count > limit || s.free_elements() > limit)
    return fmt::format("src0 is [{} x {}]; nc_transpose on {} takes at most [{} x {}]",
                       s.partition_count, s.free_elements(), engine_name(inst.engine), limit,
                       limit);
  if (d.partition_count != s.free_elements() || d.free_elements() != s.partition_count)
    return fmt::format("dst is [{} x {}]; the transpose of [{} x {}] is [{} x {}]",
                       d.partition_count, d.free_elements(), s.partition_count, s.free_elements(),
                       s.free_elements(), s.partition_count);
  if (d.dtype != s.dtype && d.dtype != DType::kF32)
    return fmt::format("dst is {} and src0 {}; a transpose keeps the dtype or widens to f32",
                       dtype_name(d.dtype), dtype_name(s.dtype));
  return std::nullopt;
}

Error check_pattern(const AccessPattern &p, const AccessPattern &dst) {
  if (p.space != MemSpace::kNone)
    return fmt::format("src0 must be a pattern (no memory), it is in {}", space_name(p.space));
  if (p.num_dims > kMaxFreeDims)
    return fmt::format("the pattern has {} dims; at most {}", p.num_dims, kMaxFreeDims);
  if (p.free_elements() != dst.free_elements())
    return fmt::format("the pattern has {} elements per partition but dst has {}",
                       p.free_elements(), dst.free_elements());
  return std::nullopt;
}

Error check_semantics(const Instruction &inst, const Target &target) {
  const auto func = inst.func, func2 = inst.func2;
  switch (inst.opcode) {
    case Opcode::kDmaCopy:
      if (inst.queue >= target.dma_queues)
        return fmt::format("DMA queue {} does not exist; the core has {}", inst.queue,
                           target.dma_queues);
      if (!in(inst.dst.space, {MemSpace::kSbuf, MemSpace::kHbm}) ||
          !in(inst.src0.space, {MemSpace::kSbuf, MemSpace::kHbm}))
        return fmt::format("dma_copy moves between SBUF and HBM; dst is {} and src0 {}",
                           space_name(inst.dst.space), space_name(inst.src0.space));
      if (inst.dst.elements() != inst.src0.elements())
        return fmt::format("dst has {} elements but src0 has {}", inst.dst.elements(),
                           inst.src0.elements());
      return std::nullopt;
    case Opcode::kMatmul: return check_matmul(inst, target);
    case Opcode::kTranspose: return check_transpose(inst);
    case Opcode::kActivation:
      if (func >= kActFuncCount) return fmt::format("unknown activation function {}", func);
      if (auto e = need_same_shape(inst.dst, "dst", inst.src0, "src0")) return e;
      if (inst.flags & kFlagBiasTile)
        if (auto e = need_column(inst.src1, "bias (src1)", inst.dst)) return e;
      if (inst.flags & kFlagScaleTile)
        if (auto e = need_column(inst.src2, "scale (src2)", inst.dst)) return e;
      if (inst.flags & kFlagAccumulate)
        if (auto e = need_column(inst.dst2, "reduce result (dst2)", inst.dst)) return e;
      return std::nullopt;
    case Opcode::kTensorTensor:
      if (func == static_cast<uint8_t>(AluOp::kBypass))
        return "op 0 is not a binary ALU operator (bypass: to copy src0, use tensor_copy)";
      if (func >= kAluOpCount) return fmt::format("op {} is not a binary ALU operator", func);
      if (inst.src0.space == MemSpace::kPsum && inst.src1.space == MemSpace::kPsum)
        return "src0 and src1 are both in PSUM; at most one input may be in PSUM";
      if (auto e = need_same_shape(inst.dst, "dst", inst.src0, "src0")) return e;
      return need_same_shape(inst.dst, "dst", inst.src1, "src1");
    case Opcode::kTensorScalar: {
      if (func >= kAluOpCount || func2 >= kAluOpCount)
        return fmt::format("unknown ALU operator {}/{}", func, func2);
      const auto op0 = static_cast<AluOp>(func), op1 = static_cast<AluOp>(func2);
      if (op0 == AluOp::kBypass) return "op0 is bypass; tensor_scalar needs a first operator";
      if (inst.engine != Engine::kVector && (alu_op_is_bitvec(op0) || alu_op_is_bitvec(op1)))
        return "bitvec operators run on the vector engine only";
      if (inst.engine == Engine::kScalar && target.core_version <= 3) {
        auto ok = [](AluOp o) {
          return o == AluOp::kAdd || o == AluOp::kMultiply || o == AluOp::kBypass;
        };
        if (!ok(op0) || !ok(op1))
          return fmt::format(
              "the scalar engine of NeuronCore-v{} supports only add and multiply "
              "in tensor_scalar, not {}/{}",
              target.core_version, alu_op_name(op0), alu_op_name(op1));
      }
      if (auto e = need_same_shape(inst.dst, "dst", inst.src0, "src0")) return e;
      if (inst.flags & kFlagOperand0Tile)
        if (auto e = need_column(inst.src1, "operand0 (src1)", inst.dst)) return e;
      if (inst.flags & kFlagOperand1Tile)
        if (auto e = need_column(inst.src2, "operand1 (src2)", inst.dst)) return e;
      return std::nullopt;
    }
    case Opcode::kTensorReduce: {
      if (func >= kAluOpCount || !alu_op_is_reduction(static_cast<AluOp>(func)))
        return fmt::format("{} is not a reduction operator",
                           func < kAluOpCount ? alu_op_name(static_cast<AluOp>(func)) : "?");
      const auto &s = inst.src0;
      if (inst.iimm[0] < 0 || static_cast<uint32_t>(inst.iimm[0]) > s.num_dims)
        return fmt::format("reduces {} axes but src0 has {} free dims", inst.iimm[0], s.num_dims);
      const uint32_t axes = inst.iimm[0] == 0 ? s.num_dims : static_cast<uint32_t>(inst.iimm[0]);
      uint64_t kept = 1;
      for (uint32_t d = 0; d + axes < s.num_dims; ++d) kept *= s.dims[d].count;
      if (inst.dst.partition_count != s.partition_count || inst.dst.free_elements() != kept)
        return fmt::format("dst is [{} x {}] but reducing {} axes of src0 leaves [{} x {}]",
                           inst.dst.partition_count, inst.dst.free_elements(), axes,
                           s.partition_count, kept);
      return std::nullopt;
    }
    case Opcode::kTensorCopy:
      if (inst.engine == Engine::kGpSimd &&
          (inst.dst.space != MemSpace::kSbuf || inst.src0.space != MemSpace::kSbuf))
        return "tensor_copy on gpsimd works in SBUF only";
      return need_same_shape(inst.dst, "dst", inst.src0, "src0");
    case Opcode::kMemset: return std::nullopt;
    case Opcode::kIota:
      if (inst.dst.space != MemSpace::kSbuf) return "iota writes SBUF only";
      return check_pattern(inst.src0, inst.dst);
    case Opcode::kAffineSelect: {
      if (func >= kAluOpCount || !(func >= static_cast<uint8_t>(AluOp::kEqual) &&
                                   func <= static_cast<uint8_t>(AluOp::kLessEqual)))
        return "affine_select compares with equal, not_equal, greater(_equal) or less(_equal)";
      if (inst.dst.space != MemSpace::kSbuf || inst.src1.space != MemSpace::kSbuf)
        return "affine_select works in SBUF only";
      if (auto e = check_pattern(inst.src0, inst.dst)) return e;
      return need_same_shape(inst.dst, "dst", inst.src1, "on_true (src1)");
    }
    case Opcode::kSemWait:
      if (inst.wait.cmp == SemCmp::kNone) return "sem_wait has no wait condition";
      return std::nullopt;
    case Opcode::kSemSignal:
      if (inst.signal.op == SemOp::kNone) return "sem_signal has no semaphore update";
      return std::nullopt;
    case Opcode::kNop:
    case Opcode::kBarrier: return std::nullopt;
  }
  return fmt::format("unknown opcode {}", static_cast<int>(inst.opcode));
}

}  // namespace

std::string instruction_label(Engine engine, size_t index, Opcode op) {
  return fmt::format("{}[{}] {}", engine_name(engine), index, opcode_name(op));
}

std::optional<std::string> check_instruction(const Instruction &inst, const Target &target,
                                             const Program *program) {
  if (static_cast<uint32_t>(inst.opcode) >= kOpcodeCount)
    return fmt::format("unknown opcode {}", static_cast<int>(inst.opcode));
  if (static_cast<uint32_t>(inst.engine) >= kEngineCount)
    return fmt::format("unknown engine {}", static_cast<int>(inst.engine));
  if (!engine_allowed(inst.opcode, inst.engine, target.core_version))
    return fmt::format("runs on {}, not {}", allowed_engines(inst.opcode),
                       engine_name(inst.engine));
  if (inst.flags & ~kFlagsKnown) return fmt::format("unknown flags 0x{:x}", inst.flags);
  if (inst.wait.cmp != SemCmp::kNone) {
    if (inst.wait.cmp != SemCmp::kGe && inst.wait.cmp != SemCmp::kEq)
      return fmt::format("unknown wait comparison {}", static_cast<int>(inst.wait.cmp));
    if (inst.wait.sem >= target.semaphores)
      return fmt::format("waits on semaphore {}; the core has {}", inst.wait.sem,
                         target.semaphores);
  }
  if (inst.signal.op != SemOp::kNone) {
    if (inst.signal.op != SemOp::kAdd && inst.signal.op != SemOp::kSet)
      return fmt::format("unknown semaphore operation {}", static_cast<int>(inst.signal.op));
    if (inst.signal.sem >= target.semaphores)
      return fmt::format("updates semaphore {}; the core has {}", inst.signal.sem,
                         target.semaphores);
  }

  const Operands use = operands_of(inst);
  const bool compute = inst.opcode != Opcode::kDmaCopy;
  const struct {
    const AccessPattern &ap;
    bool used;
    bool written;
    const char *name;
  } aps[] = {{inst.dst, use.dst, true, "dst"},
             {inst.dst2, use.dst2, true, "dst2"},
             {inst.src0, use.src0, false, "src0"},
             {inst.src1, use.src1, false, "src1"},
             {inst.src2, use.src2, false, "src2"}};
  for (const auto &a : aps) {
    const bool pattern_slot = &a.ap == &inst.src0 && (inst.opcode == Opcode::kIota ||
                                                      inst.opcode == Opcode::kAffineSelect);
    if (pattern_slot) continue;
    if (!a.used) {
      if (a.ap.used())
        return fmt::format("operand {} is set but {} does not use it", a.name,
                           opcode_name(inst.opcode));
      continue;
    }
    if (auto e = check_ap(a.ap, a.name, target, program, compute)) return e;
    if (a.ap.space == MemSpace::kHbm && inst.opcode != Opcode::kDmaCopy)
      return fmt::format("{} is in HBM; only dma_copy reaches HBM", a.name);
    if (a.ap.space == MemSpace::kPsum && inst.engine == Engine::kGpSimd)
      return fmt::format("{} is in PSUM; gpsimd cannot access PSUM", a.name);
    if (inst.engine == Engine::kTensor) {
      const MemSpace want = a.written ? MemSpace::kPsum : MemSpace::kSbuf;
      if (a.ap.space != want)
        return fmt::format("{} is in {}; the tensor engine reads SBUF and writes PSUM", a.name,
                           space_name(a.ap.space));
    }
    if (a.written && a.ap.space == MemSpace::kHbm) {
      if (a.ap.arg == kConstantsArg)
        return fmt::format("{} writes the read-only constants", a.name);
      if (program && a.ap.arg < program->args.size() &&
          program->args[a.ap.arg].direction == ArgDirection::kIn)
        return fmt::format("{} writes argument '{}', which is declared 'in' (make it out or inout)",
                           a.name, program->args[a.ap.arg].name);
    }
  }
  for (uint32_t slot = 0; slot < kImmSlotCount; ++slot)
    if (inst.scalar_arg[slot] != kNoScalarArg && !slot_accepts_scalar(inst, ImmSlot(slot)))
      return fmt::format(
          "{} reads a scalar argument, but {} does not read {} as an immediate "
          "here (docs/ISA.md lists the slots that can)",
          imm_slot_name(ImmSlot(slot)), opcode_name(inst.opcode), imm_slot_name(ImmSlot(slot)));
  if (program)
    if (auto e = check_scalar_refs(inst, program->args)) return e;
  if (auto e = check_semantics(inst, target)) return e;
  // Last, so that the opcode's own rules (a matmul's PSUM bank) give the more precise message.
  for (const auto &a : aps)
    if (a.used)
      if (auto e = check_extent(a.ap, a.name, target)) return e;
  return std::nullopt;
}

namespace {

// "vector[3] tensor_tensor (softmax.cpp:57)": the label and, when the program has one, where
// the instruction came from.
std::string located_label(const Program &program, Engine engine, size_t index, Opcode op) {
  std::string label = instruction_label(engine, index, op);
  if (const std::string where = source_location_text(program, engine, index); !where.empty())
    label += fmt::format(" ({})", where);
  return label;
}

std::optional<std::string> check_source_files(const Program &program) {
  for (size_t f = 0; f < program.source_files.size(); ++f)
    if (program.source_files[f].empty())
      return fmt::format("source file {} has an empty name", f + 1);
  for (uint32_t e = 0; e < kEngineCount; ++e) {
    const auto &ids = program.source_file_ids[e];
    if (ids.empty()) continue;
    if (ids.size() != program.streams[e].size())
      return fmt::format("{} has {} instructions but {} source file ids", engine_name(Engine(e)),
                         program.streams[e].size(), ids.size());
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] > program.source_files.size())
        return fmt::format("{}[{}] names source file {}, but the program has files 0..{}",
                           engine_name(Engine(e)), i, ids[i], program.source_files.size());
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> validate_program(const Program &program, const Target &target) {
  if (auto err = check_source_files(program)) return err;
  for (uint32_t e = 0; e < kEngineCount; ++e) {
    const auto &stream = program.streams[e];
    const auto &lines = program.source_lines[e];
    if (!lines.empty() && lines.size() != stream.size())
      return fmt::format("{} has {} instructions but {} source lines", engine_name(Engine(e)),
                         stream.size(), lines.size());
    for (size_t i = 0; i < stream.size(); ++i) {
      if (static_cast<uint32_t>(stream[i].engine) != e)
        return fmt::format("{}: is in the {} stream but says it runs on {}",
                           located_label(program, Engine(e), i, stream[i].opcode),
                           engine_name(Engine(e)), engine_name(stream[i].engine));
      if (auto err = check_instruction(stream[i], target, &program))
        return located_label(program, Engine(e), i, stream[i].opcode) + ": " + *err;
    }
  }
  for (const auto &a : program.args) {
    if (!dtype_is_valid(a.dtype)) return fmt::format("argument '{}' has an unknown dtype", a.name);
    if (a.direction != ArgDirection::kIn && a.direction != ArgDirection::kOut &&
        a.direction != ArgDirection::kInOut)
      return fmt::format("argument '{}' has an unknown direction", a.name);
    if (auto e = check_scalar_arg(a)) return e;
  }
  return std::nullopt;
}

}  // namespace trn::isa
