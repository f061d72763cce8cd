#include "isa/builder.hpp"

#include <utility>

#include "isa/scalar_args.hpp"

namespace trn::isa {

namespace {

AccessPattern make(MemSpace space, DType t, std::initializer_list<Dim> dims) {
  AccessPattern ap;
  ap.space = space;
  ap.dtype = t;
  for (const Dim &d : dims) {
    if (ap.num_dims == kMaxFreeDims) break;  // the validator reports patterns with too many dims
    ap.dims[ap.num_dims++] = d;
  }
  return ap;
}

AccessPattern on_chip(MemSpace space, DType t, uint32_t partition_start, uint32_t partitions,
                      uint64_t offset, std::initializer_list<Dim> dims) {
  AccessPattern ap = make(space, t, dims);
  ap.partition_start = partition_start;
  ap.partition_count = partitions;
  ap.offset = offset;
  return ap;
}

}  // namespace

AccessPattern sbuf(DType t, uint32_t partition_start, uint32_t partitions, uint64_t offset,
                   std::initializer_list<Dim> dims) {
  return on_chip(MemSpace::kSbuf, t, partition_start, partitions, offset, dims);
}

AccessPattern psum(DType t, uint32_t partition_start, uint32_t partitions, uint64_t offset,
                   std::initializer_list<Dim> dims) {
  return on_chip(MemSpace::kPsum, t, partition_start, partitions, offset, dims);
}

AccessPattern hbm(uint16_t arg, DType t, uint64_t offset, int64_t row_stride, uint32_t rows,
                  std::initializer_list<Dim> dims) {
  AccessPattern ap = make(MemSpace::kHbm, t, dims);
  ap.arg = arg;
  ap.offset = offset;
  ap.partition_stride = row_stride;
  ap.partition_count = rows;
  return ap;
}

AccessPattern pattern(std::initializer_list<Dim> dims) {
  return make(MemSpace::kNone, DType::kInvalid, dims);
}

AccessPattern sbuf_tile(DType t, uint32_t partition_start, uint32_t partitions, uint64_t offset,
                        uint32_t free) {
  return sbuf(t, partition_start, partitions, offset, {{1, free}});
}

AccessPattern psum_tile(DType t, uint32_t partition_start, uint32_t partitions, uint64_t offset,
                        uint32_t free) {
  return psum(t, partition_start, partitions, offset, {{1, free}});
}

AccessPattern hbm_tile(uint16_t arg, DType t, uint64_t ld, uint64_t row, uint32_t rows,
                       uint64_t col, uint32_t cols) {
  return hbm(arg, t, (row * ld + col) * dtype_size(t), static_cast<int64_t>(ld), rows, {{1, cols}});
}

Instruction &InstrRef::get() {
  return program_->stream(engine_)[index_];
}

InstrRef &InstrRef::wait_ge(uint16_t sem, uint32_t value) {
  get().wait = {SemCmp::kGe, sem, value};
  return *this;
}

InstrRef &InstrRef::wait_eq(uint16_t sem, uint32_t value) {
  get().wait = {SemCmp::kEq, sem, value};
  return *this;
}

InstrRef &InstrRef::signal_add(uint16_t sem, uint32_t value) {
  get().signal = {SemOp::kAdd, sem, value};
  return *this;
}

InstrRef &InstrRef::signal_set(uint16_t sem, uint32_t value) {
  get().signal = {SemOp::kSet, sem, value};
  return *this;
}

InstrRef &InstrRef::line(uint32_t source_line) {
  auto &lines = program_->source_lines[static_cast<uint32_t>(engine_)];
  lines.resize(program_->stream(engine_).size(), 0);
  lines[index_] = source_line;
  return *this;
}

InstrRef &InstrRef::at(std::string_view file, uint32_t line_number) {
  const uint32_t id = program_->intern_source_file(file);
  auto &ids = program_->source_file_ids[static_cast<uint32_t>(engine_)];
  if (id != 0 || !ids.empty()) {
    ids.resize(program_->stream(engine_).size(), 0);
    ids[index_] = id;
  }
  return line(line_number);
}

#if defined(__cpp_lib_source_location)
InstrRef &InstrRef::at(const std::source_location &loc) {
  return at(loc.file_name(), loc.line());
}
#endif

InstrRef &InstrRef::read_scalar(ImmSlot slot, uint16_t arg) {
  read_scalar_arg(get(), slot, arg);
  return *this;
}

ProgramBuilder::ProgramBuilder(std::string name) {
  program_.name = std::move(name);
}

uint16_t ProgramBuilder::arg(std::string name, DType dtype, std::vector<uint64_t> shape,
                             ArgDirection dir) {
  program_.args.push_back({std::move(name), dtype, std::move(shape), dir});
  return static_cast<uint16_t>(program_.args.size() - 1);
}

uint16_t ProgramBuilder::scalar_arg(std::string name, DType dtype) {
  program_.args.push_back({std::move(name), dtype, {}, ArgDirection::kIn, ArgKind::kScalar});
  return static_cast<uint16_t>(program_.args.size() - 1);
}

InstrRef ProgramBuilder::add(const Instruction &inst) {
  auto &stream = program_.stream(inst.engine);
  stream.push_back(inst);
  auto &lines = program_.source_lines[static_cast<uint32_t>(inst.engine)];
  if (!lines.empty()) lines.resize(stream.size(), 0);
  auto &ids = program_.source_file_ids[static_cast<uint32_t>(inst.engine)];
  if (!ids.empty()) ids.resize(stream.size(), 0);
  return InstrRef(program_, inst.engine, stream.size() - 1);
}

namespace {

Instruction with(Opcode op, Engine engine, const AccessPattern &dst, const AccessPattern &src0 = {},
                 const AccessPattern &src1 = {}) {
  Instruction inst;
  inst.opcode = op;
  inst.engine = engine;
  inst.dst = dst;
  inst.src0 = src0;
  inst.src1 = src1;
  return inst;
}

}  // namespace

InstrRef ProgramBuilder::dma_copy(Engine issuer, uint8_t queue, const AccessPattern &dst,
                                  const AccessPattern &src) {
  Instruction inst = with(Opcode::kDmaCopy, issuer, dst, src);
  inst.queue = queue;
  return add(inst);
}

InstrRef ProgramBuilder::matmul(const AccessPattern &dst, const AccessPattern &stationary,
                                const AccessPattern &moving, bool start) {
  Instruction inst = with(Opcode::kMatmul, Engine::kTensor, dst, stationary, moving);
  if (start) inst.flags |= kFlagMatmulStart;
  return add(inst);
}

InstrRef ProgramBuilder::transpose(Engine engine, const AccessPattern &dst,
                                   const AccessPattern &src) {
  return add(with(Opcode::kTranspose, engine, dst, src));
}

InstrRef ProgramBuilder::activation(const AccessPattern &dst, const AccessPattern &src,
                                    ActFunc func, float scale, float bias) {
  Instruction inst = with(Opcode::kActivation, Engine::kScalar, dst, src);
  inst.func = static_cast<uint8_t>(func);
  inst.imm = {scale, bias};
  return add(inst);
}

InstrRef ProgramBuilder::tensor_tensor(Engine engine, const AccessPattern &dst,
                                       const AccessPattern &a, const AccessPattern &b, AluOp op) {
  Instruction inst = with(Opcode::kTensorTensor, engine, dst, a, b);
  inst.func = static_cast<uint8_t>(op);
  return add(inst);
}

InstrRef ProgramBuilder::tensor_scalar(Engine engine, const AccessPattern &dst,
                                       const AccessPattern &src, AluOp op0, float operand0,
                                       AluOp op1, float operand1) {
  Instruction inst = with(Opcode::kTensorScalar, engine, dst, src);
  inst.func = static_cast<uint8_t>(op0);
  inst.func2 = static_cast<uint8_t>(op1);
  inst.imm = {operand0, operand1};
  return add(inst);
}

InstrRef ProgramBuilder::tensor_reduce(const AccessPattern &dst, const AccessPattern &src, AluOp op,
                                       uint32_t axes, bool negate) {
  Instruction inst = with(Opcode::kTensorReduce, Engine::kVector, dst, src);
  inst.func = static_cast<uint8_t>(op);
  inst.iimm[0] = static_cast<int32_t>(axes);
  if (negate) inst.flags |= kFlagNegate;
  return add(inst);
}

InstrRef ProgramBuilder::tensor_copy(Engine engine, const AccessPattern &dst,
                                     const AccessPattern &src) {
  return add(with(Opcode::kTensorCopy, engine, dst, src));
}

InstrRef ProgramBuilder::memset(Engine engine, const AccessPattern &dst, float value) {
  Instruction inst = with(Opcode::kMemset, engine, dst);
  inst.imm[0] = value;
  return add(inst);
}

InstrRef ProgramBuilder::iota(const AccessPattern &dst, const AccessPattern &pattern_ap,
                              int32_t offset, int32_t channel_multiplier) {
  Instruction inst = with(Opcode::kIota, Engine::kGpSimd, dst, pattern_ap);
  inst.iimm = {offset, channel_multiplier};
  return add(inst);
}

InstrRef ProgramBuilder::affine_select(const AccessPattern &dst, const AccessPattern &pattern_ap,
                                       int32_t offset, int32_t channel_multiplier, AluOp cmp,
                                       const AccessPattern &on_true, float on_false) {
  Instruction inst = with(Opcode::kAffineSelect, Engine::kGpSimd, dst, pattern_ap, on_true);
  inst.func = static_cast<uint8_t>(cmp);
  inst.iimm = {offset, channel_multiplier};
  inst.imm[0] = on_false;
  return add(inst);
}

InstrRef ProgramBuilder::sem_wait(Engine engine, uint16_t sem, uint32_t value) {
  Instruction inst = with(Opcode::kSemWait, engine, {});
  inst.wait = {SemCmp::kGe, sem, value};
  return add(inst);
}

InstrRef ProgramBuilder::sem_signal(Engine engine, uint16_t sem, uint32_t value) {
  Instruction inst = with(Opcode::kSemSignal, engine, {});
  inst.signal = {SemOp::kAdd, sem, value};
  return add(inst);
}

void ProgramBuilder::barrier() {
  for (uint32_t e = 0; e < kEngineCount; ++e)
    add(with(Opcode::kBarrier, static_cast<Engine>(e), {}));
}

}  // namespace trn::isa
