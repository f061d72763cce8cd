#include "kbuild/kernel_builder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "isa/cost_model.hpp"
#include "isa/dtype.hpp"
#include "isa/validate.hpp"
#include "kbuild/onchip_allocator.hpp"
#include "kbuild/queue_timeline.hpp"
#include "kbuild/sync_planner.hpp"

namespace trn::kbuild {

using detail::Access;
using detail::Agent;
using detail::Event;
using isa::Instruction;
using isa::MemSpace;
using isa::Opcode;

namespace {

constexpr uint64_t kDmaPartBytes = 64 * 1024;  // larger transfers split across queues
// The schedule estimate is the simulator's own cost model (isa/cost_model.hpp).
constexpr uint64_t kDmaIssueCycles = isa::CostConstants::kDmaIssueCycles;

struct Location {
  const char *file = nullptr;
  uint32_t line = 0;
};

// "kernel.cpp": the file of a call site without its directories (messages stay readable and do
// not depend on where the tree was built).
const char *base_name(const char *path) {
  const char *slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

// What the builder keeps per emitted instruction until finish() assigns semaphores.
struct Meta {
  Event self;  // the agent event that signals when it completes (ordinal 0: none, a nop)
  Event wait;  // the event it waits for (ordinal 0: none)
  Location where;
};

// The memory an instruction touches. Reads of input arguments are left out: nothing in the
// kernel writes an input (store() refuses to), so they never conflict, and leaving them out keeps
// the planner's records few.
std::vector<Access> accesses_of(const Instruction &inst, const isa::Program &program) {
  std::vector<Access> out;
  for (const isa::AccessPattern *ap : {&inst.dst, &inst.dst2})
    if (ap->used()) out.push_back(detail::access_of(*ap, true));
  for (const isa::AccessPattern *ap : {&inst.src0, &inst.src1, &inst.src2}) {
    if (!ap->used()) continue;
    if (ap->space == MemSpace::kHbm && ap->arg < program.args.size() &&
        program.args[ap->arg].direction == isa::ArgDirection::kIn)
      continue;
    out.push_back(detail::access_of(*ap, false));
  }
  return out;
}

// Why an operand cannot be used, or "" when it can.
std::string unusable(const char *role, const Tile &t) {
  if (t.valid()) return {};
  if (t.bad_view())
    return fmt::format(
        "{} is a view that does not fit its tile (a slice past its end, a "
        "broadcast of a tile that is not [P, 1], or a reshape of a strided view)",
        role);
  return fmt::format("{} is not a tile (its allocation failed, or it was never made)", role);
}

std::string unusable(const char *role, const HbmView &v) {
  if (v.valid()) return {};
  if (v.bad_view())
    return fmt::format("{} is a view that does not fit its tensor (rows or columns past the end)",
                       role);
  return fmt::format("{} is not a view of a kernel argument", role);
}

// The first reason any of the named operands cannot be used, or "".
template <typename... Operands>
std::string first_unusable(const Operands &...operands) {
  std::string why;
  auto check = [&](const auto &named) {
    if (why.empty()) why = unusable(named.first, named.second);
  };
  (check(operands), ...);
  return why;
}

Instruction make(Opcode op, const isa::AccessPattern &dst, const isa::AccessPattern &src0 = {},
                 const isa::AccessPattern &src1 = {}) {
  Instruction inst;
  inst.opcode = op;
  inst.dst = dst;
  inst.src0 = src0;
  inst.src1 = src1;
  return inst;
}

}  // namespace

struct KernelBuilder::State {
  State(std::string name, const BuildTarget &t)
      : target(t),
        placement(std::make_shared<detail::Placement>(
            t.sbuf_bytes(), t.core.psum_bytes_per_partition,
            t.core.psum_banks ? t.core.psum_bytes_per_partition / t.core.psum_banks : 0)) {
    program.name = std::move(name);
  }

  BuildTarget target;
  std::shared_ptr<detail::Placement> placement;
  detail::SyncPlanner planner;
  isa::Program program;
  std::array<std::vector<Meta>, isa::kEngineCount> meta;
  std::array<double, isa::kEngineCount> engine_free{};  // estimated, seconds
  std::array<detail::QueueTimeline, detail::kDmaQueues> queues;
  uint32_t next_queue = 0;  // ties between equally free queues go round
  uint64_t transfers_since_forget = 0;
  uint64_t waits = 0, dma_transfers = 0, sbuf_peak = 0;
  std::array<uint64_t, isa::kEngineCount> engine_cycles{};  // estimated busy cycles
  std::array<uint64_t, detail::kDmaQueues> dma_busy_ps{};   // estimated busy time per queue

  double seconds(uint64_t cycles, Engine e) const {
    return double(cycles) / double(target.clock_hz(e));
  }
  // Engine cycles of a compute instruction, as the simulator charges them.
  uint64_t cycles(const Instruction &inst) const {
    return isa::instruction_cost(inst, target.core).cycles;
  }

  // Appends `inst` to its engine's stream, after the waits it needs. `dma_queue` < 0: a compute
  // instruction, else the transfer's queue. Returns the estimated end.
  double emit(Instruction inst, int dma_queue, const std::vector<Access> &accesses,
              const Location &where) {
    const Engine e = inst.engine;
    const auto ei = static_cast<uint32_t>(e);
    const Agent agent = dma_queue < 0 ? detail::engine_agent(e)
                                      : detail::dma_agent(e, static_cast<uint32_t>(dma_queue));
    const std::vector<Event> deps = planner.plan(agent, e, accesses);
    double start = engine_free[ei];
    for (const Event &d : deps) start = std::max(start, planner.end_estimate(d));
    for (size_t i = 0; i + 1 < deps.size(); ++i) {
      Instruction nop;
      nop.opcode = Opcode::kSemWait;
      nop.engine = e;
      program.stream(e).push_back(nop);
      meta[ei].push_back({{}, deps[i], where});
      planner.waited(e, deps[i]);
      engine_cycles[ei] += isa::CostConstants::kSequencerCycles;
      start += seconds(isa::CostConstants::kSequencerCycles, e);
    }
    if (!deps.empty()) planner.waited(e, deps.back());
    waits += deps.size();

    double end;
    if (dma_queue < 0) {
      const uint64_t c = cycles(inst);
      engine_cycles[ei] += c;
      end = start + seconds(c, e);
      engine_free[ei] = end;
    } else {
      const double issued = start + seconds(kDmaIssueCycles, e);
      engine_free[ei] = issued;
      engine_cycles[ei] += kDmaIssueCycles;
      dma_busy_ps[dma_queue] += isa::dma_cost(inst, target.core).ps;
      const double duration = transfer_seconds(inst);
      const double begin = queues[dma_queue].start_time(issued, duration);
      end = begin + duration;
      queues[dma_queue].reserve(begin, end);
      if (++transfers_since_forget == 256) forget_past();
      ++dma_transfers;
    }
    const Event self = planner.record(agent, e, accesses, end);
    program.stream(e).push_back(inst);
    meta[ei].push_back({self, deps.empty() ? Event{} : deps.back(), where});
    return end;
  }

  // Per agent, the ordinals of its instructions that something waits for, sorted and unique.
  std::vector<std::vector<uint32_t>> waited_ordinals() const {
    std::vector<std::vector<uint32_t>> waited(detail::kAgentCount);
    for (const auto &stream : meta)
      for (const Meta &m : stream)
        if (m.wait.ordinal) waited[m.wait.agent].push_back(m.wait.ordinal);
    for (auto &w : waited) {
      std::sort(w.begin(), w.end());
      w.erase(std::unique(w.begin(), w.end()), w.end());
    }
    return waited;
  }

  // Time of a transfer on one DMA engine, as the simulator charges it.
  double transfer_seconds(const Instruction &inst) const {
    return double(isa::dma_cost(inst, target.core).ps) * 1e-12;
  }

  // The queue on which `inst`, issued by its engine once `ready`, would start first.
  uint32_t earliest_queue(const Instruction &inst, double ready) {
    const auto ei = static_cast<uint32_t>(inst.engine);
    const double issued = std::max(engine_free[ei], ready) + seconds(kDmaIssueCycles, inst.engine);
    const double duration = transfer_seconds(inst);
    const uint32_t count = queue_count();
    uint32_t best = next_queue % count;
    double best_start = queues[best].start_time(issued, duration);
    for (uint32_t i = 1; i < count; ++i) {
      const uint32_t q = (next_queue + i) % count;
      const double start = queues[q].start_time(issued, duration);
      if (start < best_start) {
        best = q;
        best_start = start;
      }
    }
    next_queue = best + 1;
    return best;
  }

  // The DMA queues of the target (the builder's agents cover at most isa::kMaxDmaQueues).
  uint32_t queue_count() const {
    return std::clamp<uint32_t>(target.core.dma_queues, 1, detail::kDmaQueues);
  }

  // No engine issues anything before the earliest one is free.
  void forget_past() {
    transfers_since_forget = 0;
    const double t = *std::min_element(engine_free.begin(), engine_free.end());
    for (auto &q : queues) q.forget_before(t);
  }
};

KernelBuilder::KernelBuilder(std::string name, const BuildTarget &target)
    : s_(std::make_unique<State>(std::move(name), target)) {}

KernelBuilder::~KernelBuilder() = default;

bool KernelBuilder::fail(const Where &where, std::string message) {
  if (!error_)
    error_ = fmt::format("{}:{}: {}", base_name(where.file_name()), where.line(), message);
  return false;
}

HbmTensor KernelBuilder::argument(std::string name, DType dtype, std::vector<uint64_t> shape,
                                  isa::ArgDirection dir, const Where &where) {
  if (error_) return {};
  if (!isa::dtype_size(dtype))
    return fail(where, fmt::format("argument '{}': invalid dtype", name)), HbmTensor{};
  if (shape.empty())
    return fail(where, fmt::format("argument '{}' has no shape", name)), HbmTensor{};
  uint64_t bytes = isa::dtype_size(dtype);
  for (uint64_t d : shape) {
    if (d == 0)
      return fail(where, fmt::format("argument '{}' has an empty dim", name)), HbmTensor{};
    if (bytes > UINT64_MAX / d)
      return fail(where, fmt::format("argument '{}' has more bytes than 64 bits count", name)),
             HbmTensor{};
    bytes *= d;
  }
  if (s_->program.args.size() >= isa::kConstantsArg)
    return fail(where, "too many arguments"), HbmTensor{};
  const auto index = static_cast<uint16_t>(s_->program.args.size());
  s_->program.args.push_back({name, dtype, shape, dir, isa::ArgKind::kTensor});
  return HbmTensor(std::move(name), index, dtype, std::move(shape));
}

HbmTensor KernelBuilder::input(std::string name, DType dtype, std::vector<uint64_t> shape,
                               Where where) {
  return argument(std::move(name), dtype, std::move(shape), isa::ArgDirection::kIn, where);
}
HbmTensor KernelBuilder::output(std::string name, DType dtype, std::vector<uint64_t> shape,
                                Where where) {
  return argument(std::move(name), dtype, std::move(shape), isa::ArgDirection::kOut, where);
}
HbmTensor KernelBuilder::inout(std::string name, DType dtype, std::vector<uint64_t> shape,
                               Where where) {
  return argument(std::move(name), dtype, std::move(shape), isa::ArgDirection::kInOut, where);
}

ScalarArg KernelBuilder::scalar(std::string name, DType dtype, Where where) {
  if (error_) return {};
  if (dtype != DType::kF32 && dtype != DType::kI32)
    return fail(where, fmt::format("scalar '{}' must be f32 or i32", name)), ScalarArg{};
  if (s_->program.args.size() >= isa::kConstantsArg)
    return fail(where, "too many arguments"), ScalarArg{};
  const auto index = static_cast<uint16_t>(s_->program.args.size());
  s_->program.args.push_back(
      {std::move(name), dtype, {}, isa::ArgDirection::kIn, isa::ArgKind::kScalar});
  return {index, dtype};
}

Tile KernelBuilder::allocate(Memory memory, DType dtype, uint32_t partitions,
                             std::vector<uint32_t> free, std::string name, const Where &where) {
  if (error_) return {};
  const std::string what =
      fmt::format("{} tile{}", memory_name(memory), name.empty() ? "" : " '" + name + "'");
  const uint32_t es = isa::dtype_size(dtype);
  if (!es) return fail(where, what + ": invalid dtype"), Tile{};
  if (partitions == 0 || partitions > s_->target.core.partitions)
    return fail(where, fmt::format("{}: {} partitions; a core has 1 to {}", what, partitions,
                                   s_->target.core.partitions)),
           Tile{};
  if (free.empty() || free.size() > isa::kMaxFreeDims)
    return fail(where, fmt::format("{}: {} free dims; 1 to {} are allowed", what, free.size(),
                                   isa::kMaxFreeDims)),
           Tile{};
  uint64_t elements = 1;
  for (uint32_t n : free) {
    if (n == 0) return fail(where, what + " has an empty free dim"), Tile{};
    if (elements > (uint64_t{1} << 40) / n)  // far beyond any partition: no overflow below
      return fail(where, what + " is larger than any on-chip memory"), Tile{};
    elements *= n;
  }
  const uint64_t bytes = elements * es;
  auto &alloc = s_->placement->of(memory);
  const auto offset = alloc.allocate(bytes);
  if (!offset)
    return fail(where, fmt::format("{} of {} bytes per partition does not fit: {} of {} bytes "
                                   "are free, the largest free block has {}",
                                   what, bytes, alloc.free_bytes(), alloc.capacity(),
                                   alloc.largest_free_block())),
           Tile{};
  if (memory == Memory::kSbuf)
    s_->sbuf_peak = std::max(s_->sbuf_peak, alloc.capacity() - alloc.free_bytes());
  Tile t;
  t.buffer_ = std::make_shared<detail::Buffer>(s_->placement, memory, *offset, alloc.rounded(bytes),
                                               std::move(name));
  t.ap_.space = memory == Memory::kSbuf ? MemSpace::kSbuf : MemSpace::kPsum;
  t.ap_.dtype = dtype;
  t.ap_.partition_start = 0;
  t.ap_.partition_count = partitions;
  t.ap_.offset = *offset;
  t.ap_.num_dims = static_cast<uint32_t>(free.size());
  int64_t stride = 1;
  for (size_t d = free.size(); d-- > 0;) {
    t.ap_.dims[d] = {static_cast<int32_t>(std::min<int64_t>(stride, INT32_MAX)), free[d]};
    stride *= free[d];
  }
  return t;
}

Tile KernelBuilder::sbuf(DType dtype, uint32_t partitions, std::vector<uint32_t> free,
                         std::string name, Where where) {
  return allocate(Memory::kSbuf, dtype, partitions, std::move(free), std::move(name), where);
}

Tile KernelBuilder::psum(DType dtype, uint32_t partitions, std::vector<uint32_t> free,
                         std::string name, Where where) {
  return allocate(Memory::kPsum, dtype, partitions, std::move(free), std::move(name), where);
}

TileRing KernelBuilder::ring(Memory memory, DType dtype, uint32_t partitions,
                             std::vector<uint32_t> free, uint32_t buffers, std::string name,
                             Where where) {
  if (error_) return {};
  if (buffers == 0) return fail(where, "a ring needs at least one buffer"), TileRing{};
  std::vector<Tile> tiles;
  for (uint32_t i = 0; i < buffers; ++i) {
    tiles.push_back(allocate(memory, dtype, partitions, free,
                             name.empty() ? name : fmt::format("{}[{}]", name, i), where));
    if (!tiles.back().valid()) return {};
  }
  return TileRing(std::move(tiles));
}

// One operation, split into DMA transfers of at most kDmaPartBytes by partitions (rows), each on
// the least busy queue of the issuing engine.
void KernelBuilder::dma(const isa::AccessPattern &dst, const isa::AccessPattern &src, bool load,
                        Opts opts, const Where &where, const std::string &what) {
  const Engine issuer = opts.engine.value_or(load ? Engine::kSync : Engine::kGpSimd);
  if (opts.queue && *opts.queue >= s_->queue_count())
    return void(fail(where, fmt::format("{}: DMA queue {}; the core has queues 0 to {}", what,
                                        *opts.queue, s_->queue_count() - 1)));
  const uint32_t rows = load ? dst.partition_count : src.partition_count;
  const uint64_t bytes =
      src.elements() * std::max(isa::dtype_size(src.dtype), isa::dtype_size(dst.dtype));
  uint32_t parts = opts.queue ? 1 : opts.dma_parts;
  if (!parts)
    parts = static_cast<uint32_t>(
        std::clamp<uint64_t>((bytes + kDmaPartBytes - 1) / kDmaPartBytes, 1, detail::kDmaQueues));
  parts = std::min(parts, rows);
  const uint32_t per = (rows + parts - 1) / parts;
  for (uint32_t r = 0; r < rows; r += per) {
    const uint32_t n = std::min(per, rows - r);
    isa::AccessPattern d = dst, s = src;
    for (isa::AccessPattern *ap : {&d, &s}) {
      if (ap->space == MemSpace::kHbm) {
        ap->offset += static_cast<uint64_t>(ap->partition_stride * r) * isa::dtype_size(ap->dtype);
      } else {
        ap->partition_start += r;
      }
      ap->partition_count = n;
    }
    Instruction inst = make(Opcode::kDmaCopy, d, s);
    inst.engine = issuer;
    const std::vector<Access> accesses = accesses_of(inst, s_->program);
    const uint32_t q =
        opts.queue ? *opts.queue
                   : s_->earliest_queue(
                         inst, s_->planner.ready_time(detail::dma_agent(issuer, 0), accesses));
    inst.queue = static_cast<uint8_t>(q);
    if (auto err = isa::check_instruction(inst, s_->target.core, &s_->program)) {
      fail(where, fmt::format("{}: {}", what, *err));
      return;
    }
    s_->emit(inst, static_cast<int>(q), accesses, {where.file_name(), where.line()});
  }
}

void KernelBuilder::load(const Tile &dst, const HbmView &src, Opts opts, Where where) {
  if (error_) return;
  if (const std::string why = first_unusable(std::pair{"dst", dst}, std::pair{"src", src});
      !why.empty())
    return void(fail(where, "load: " + why));
  if (dst.memory() != Memory::kSbuf)
    return void(
        fail(where, fmt::format("load: {} is in PSUM; DMA loads go to SBUF", dst.describe())));
  if (dst.partitions() != src.rows() || dst.free_size() != src.cols())
    return void(fail(where, fmt::format("load: {} is [{}, {}] but {} is [{}, {}]", dst.describe(),
                                        dst.partitions(), dst.free_size(), src.describe(),
                                        src.rows(), src.cols())));
  dma(dst.pattern(), src.pattern(), true, opts, where,
      fmt::format("load {} <- {}", dst.describe(), src.describe()));
}

void KernelBuilder::store(const HbmView &dst, const Tile &src, Opts opts, Where where) {
  if (error_) return;
  if (const std::string why = first_unusable(std::pair{"dst", dst}, std::pair{"src", src});
      !why.empty())
    return void(fail(where, "store: " + why));
  if (s_->program.args[dst.arg()].direction == isa::ArgDirection::kIn)
    return void(fail(where, fmt::format("store: {} is an input of the kernel; declare it with "
                                        "output() or inout() to write it",
                                        dst.describe())));
  if (dst.rows() != src.partitions() || dst.cols() != src.free_size())
    return void(fail(
        where, fmt::format("store: {} is [{}, {}] but {} is [{}, {}]", dst.describe(), dst.rows(),
                           dst.cols(), src.describe(), src.partitions(), src.free_size())));
  dma(dst.pattern(), src.pattern(), false, opts, where,
      fmt::format("store {} <- {}", dst.describe(), src.describe()));
}

// A compute instruction on the first of `engines` (or the hinted one) that can run it and is
// estimated to finish first.
void KernelBuilder::compute(Instruction inst, std::vector<Engine> engines, Opts opts,
                            const Where &where) {
  if (opts.engine) engines = {*opts.engine};
  std::optional<std::string> first_error;
  int best = -1;
  double best_end = 0;
  const std::vector<Access> accesses = accesses_of(inst, s_->program);
  for (size_t i = 0; i < engines.size(); ++i) {
    inst.engine = engines[i];
    if (auto err = isa::check_instruction(inst, s_->target.core, &s_->program)) {
      if (!first_error)
        first_error = fmt::format("{} on {}: {}", isa::opcode_name(inst.opcode),
                                  isa::engine_name(engines[i]), *err);
      continue;
    }
    const auto ei = static_cast<uint32_t>(engines[i]);
    const double start = std::max(
        s_->engine_free[ei], s_->planner.ready_time(detail::engine_agent(engines[i]), accesses));
    const double end = start + s_->seconds(s_->cycles(inst), engines[i]);
    if (best < 0 || end < best_end) {
      best = static_cast<int>(i);
      best_end = end;
    }
  }
  if (best < 0) return void(fail(where, *first_error));
  inst.engine = engines[static_cast<size_t>(best)];
  s_->emit(inst, -1, accesses, {where.file_name(), where.line()});
}

namespace {

// Fills one immediate slot of `inst` from an operand: a constant, a [P,1] tile (through `tile_ap`
// and `tile_flag`) or a scalar argument. Returns what is wrong with it, if anything.
std::optional<std::string> set_operand(Instruction &inst, const Operand &op, isa::ImmSlot slot,
                                       isa::AccessPattern &tile_ap, uint32_t tile_flag,
                                       uint32_t partitions) {
  const auto i = static_cast<uint32_t>(slot);
  if (const float *v = std::get_if<float>(&op)) {
    inst.imm[i] = *v;
  } else if (const Tile *t = std::get_if<Tile>(&op)) {
    if (!t->valid()) return "an operand tile is invalid";
    if (t->free_size() != 1 || t->partitions() != partitions)
      return fmt::format("an operand tile must be [{}, 1]; {} is not", partitions, t->describe());
    tile_ap = t->pattern();
    inst.flags |= tile_flag;
  } else {
    const ScalarArg &s = std::get<ScalarArg>(op);
    if (!s.valid()) return "an operand scalar argument is invalid";
    if (s.dtype != DType::kF32) return "float operands take f32 scalar arguments";
    inst.scalar_arg[i] = s.arg;
  }
  return std::nullopt;
}

}  // namespace

// Checks common to compute operations: usable operands, matching element counts.
#define TRN_KB_REQUIRE(cond, ...) \
  if (!(cond)) return void(fail(where, fmt::format(__VA_ARGS__)))
#define TRN_KB_OPERANDS(op, ...)                                         \
  if (const std::string why = first_unusable(__VA_ARGS__); !why.empty()) \
  return void(fail(where, std::string(op) + ": " + why))

void KernelBuilder::matmul(const Tile &dst, const Tile &stationary, const Tile &moving,
                           bool accumulate, Opts opts, Where where) {
  if (error_) return;
  TRN_KB_OPERANDS("matmul", std::pair{"dst", dst}, std::pair{"stationary", stationary},
                  std::pair{"moving", moving});
  TRN_KB_REQUIRE(stationary.partitions() == moving.partitions(),
                 "matmul: stationary {} and moving {} must have the same partitions (K)",
                 stationary.describe(), moving.describe());
  TRN_KB_REQUIRE(
      dst.partitions() == stationary.free_size() && dst.free_size() == moving.free_size(),
      "matmul: {} must be [M, N] = [{}, {}] for stationary {} and moving {}", dst.describe(),
      stationary.free_size(), moving.free_size(), stationary.describe(), moving.describe());
  Instruction inst = make(Opcode::kMatmul, dst.pattern(), stationary.pattern(), moving.pattern());
  if (!accumulate) inst.flags |= isa::kFlagMatmulStart;
  compute(inst, {Engine::kTensor}, opts, where);
}

void KernelBuilder::transpose(const Tile &dst, const Tile &src, Opts opts, Where where) {
  if (error_) return;
  TRN_KB_OPERANDS("transpose", std::pair{"dst", dst}, std::pair{"src", src});
  TRN_KB_REQUIRE(dst.partitions() == src.free_size() && dst.free_size() == src.partitions(),
                 "transpose: {} must be [{}, {}] to hold {} transposed", dst.describe(),
                 src.free_size(), src.partitions(), src.describe());
  // The tensor engine transposes up to 128x128 through PSUM; the vector engine 32x32 blocks.
  std::vector<Engine> engines;
  if (dst.memory() == Memory::kPsum) engines.push_back(Engine::kTensor);
  engines.push_back(Engine::kVector);
  compute(make(Opcode::kTranspose, dst.pattern(), src.pattern()), engines, opts, where);
}

void KernelBuilder::activation(const Tile &dst, const Tile &src, ActFunc func, Operand scale,
                               Operand bias, const Tile &reduce_into, Opts opts, Where where) {
  if (error_) return;
  TRN_KB_OPERANDS("activation", std::pair{"dst", dst}, std::pair{"src", src});
  TRN_KB_REQUIRE(!reduce_into.bad_view(), "activation: {}",
                 unusable("the sum's tile (reduce_into)", reduce_into));
  TRN_KB_REQUIRE(dst.partitions() == src.partitions() && dst.free_size() == src.free_size(),
                 "activation: {} and {} differ in shape", dst.describe(), src.describe());
  Instruction inst = make(Opcode::kActivation, dst.pattern(), src.pattern());
  inst.func = static_cast<uint8_t>(func);
  if (auto e = set_operand(inst, scale, isa::ImmSlot::kImm0, inst.src2, isa::kFlagScaleTile,
                           dst.partitions()))
    return void(fail(where, "activation scale: " + *e));
  if (auto e = set_operand(inst, bias, isa::ImmSlot::kImm1, inst.src1, isa::kFlagBiasTile,
                           dst.partitions()))
    return void(fail(where, "activation bias: " + *e));
  if (reduce_into.valid()) {
    TRN_KB_REQUIRE(reduce_into.partitions() == dst.partitions() && reduce_into.free_size() == 1,
                   "activation: the sum goes into a [{}, 1] tile, not {}", dst.partitions(),
                   reduce_into.describe());
    inst.dst2 = reduce_into.pattern();
    inst.flags |= isa::kFlagAccumulate;
  }
  compute(inst, {Engine::kScalar, Engine::kGpSimd}, opts, where);
}

void KernelBuilder::tensor_tensor(const Tile &dst, const Tile &a, const Tile &b, AluOp op,
                                  Opts opts, Where where) {
  if (error_) return;
  TRN_KB_OPERANDS("tensor_tensor", std::pair{"dst", dst}, std::pair{"a", a}, std::pair{"b", b});
  TRN_KB_REQUIRE(dst.partitions() == a.partitions() && dst.partitions() == b.partitions() &&
                     dst.free_size() == a.free_size() && dst.free_size() == b.free_size(),
                 "tensor_tensor: {}, {} and {} differ in shape", dst.describe(), a.describe(),
                 b.describe());
  Instruction inst = make(Opcode::kTensorTensor, dst.pattern(), a.pattern(), b.pattern());
  inst.func = static_cast<uint8_t>(op);
  compute(inst, {Engine::kVector, Engine::kGpSimd}, opts, where);
}

void KernelBuilder::tensor_scalar(const Tile &dst, const Tile &src, AluOp op0, Operand operand0,
                                  AluOp op1, Operand operand1, bool reverse0, bool reverse1,
                                  Opts opts, Where where) {
  if (error_) return;
  TRN_KB_OPERANDS("tensor_scalar", std::pair{"dst", dst}, std::pair{"src", src});
  TRN_KB_REQUIRE(dst.partitions() == src.partitions() && dst.free_size() == src.free_size(),
                 "tensor_scalar: {} and {} differ in shape", dst.describe(), src.describe());
  Instruction inst = make(Opcode::kTensorScalar, dst.pattern(), src.pattern());
  inst.func = static_cast<uint8_t>(op0);
  inst.func2 = static_cast<uint8_t>(op1);
  if (reverse0) inst.flags |= isa::kFlagReverse0;
  if (reverse1) inst.flags |= isa::kFlagReverse1;
  if (auto e = set_operand(inst, operand0, isa::ImmSlot::kImm0, inst.src1, isa::kFlagOperand0Tile,
                           dst.partitions()))
    return void(fail(where, "tensor_scalar operand0: " + *e));
  if (auto e = set_operand(inst, operand1, isa::ImmSlot::kImm1, inst.src2, isa::kFlagOperand1Tile,
                           dst.partitions()))
    return void(fail(where, "tensor_scalar operand1: " + *e));
  compute(inst, {Engine::kVector, Engine::kGpSimd, Engine::kScalar}, opts, where);
}

void KernelBuilder::reduce(const Tile &dst, const Tile &src, AluOp op, uint32_t axes, bool negate,
                           Opts opts, Where where) {
  if (error_) return;
  TRN_KB_OPERANDS("reduce", std::pair{"dst", dst}, std::pair{"src", src});
  Instruction inst = make(Opcode::kTensorReduce, dst.pattern(), src.pattern());
  inst.func = static_cast<uint8_t>(op);
  inst.iimm[0] = static_cast<int32_t>(axes);
  if (negate) inst.flags |= isa::kFlagNegate;
  compute(inst, {Engine::kVector}, opts, where);
}

void KernelBuilder::copy(const Tile &dst, const Tile &src, Opts opts, Where where) {
  if (error_) return;
  TRN_KB_OPERANDS("copy", std::pair{"dst", dst}, std::pair{"src", src});
  TRN_KB_REQUIRE(dst.partitions() == src.partitions() && dst.free_size() == src.free_size(),
                 "copy: {} and {} differ in shape", dst.describe(), src.describe());
  compute(make(Opcode::kTensorCopy, dst.pattern(), src.pattern()),
          {Engine::kVector, Engine::kGpSimd, Engine::kScalar}, opts, where);
}

void KernelBuilder::memset(const Tile &dst, float value, Opts opts, Where where) {
  if (error_) return;
  TRN_KB_OPERANDS("memset", std::pair{"dst", dst});
  Instruction inst = make(Opcode::kMemset, dst.pattern());
  inst.imm[0] = value;
  compute(inst, {Engine::kVector, Engine::kGpSimd}, opts, where);
}

namespace {
isa::AccessPattern steps_pattern(const std::vector<isa::Dim> &steps) {
  isa::AccessPattern ap;
  ap.num_dims = static_cast<uint32_t>(std::min<size_t>(steps.size(), isa::kMaxFreeDims));
  for (uint32_t d = 0; d < ap.num_dims; ++d) ap.dims[d] = steps[d];
  return ap;
}
}  // namespace

void KernelBuilder::iota(const Tile &dst, std::vector<isa::Dim> steps, int32_t offset,
                         int32_t channel_multiplier, Opts opts, Where where) {
  if (error_) return;
  TRN_KB_OPERANDS("iota", std::pair{"dst", dst});
  TRN_KB_REQUIRE(steps.size() <= isa::kMaxFreeDims, "iota: at most {} steps", isa::kMaxFreeDims);
  Instruction inst = make(Opcode::kIota, dst.pattern(), steps_pattern(steps));
  inst.iimm = {offset, channel_multiplier};
  compute(inst, {Engine::kGpSimd}, opts, where);
}

void KernelBuilder::select(const Tile &dst, std::vector<isa::Dim> steps, int32_t offset,
                           int32_t channel_multiplier, AluOp cmp, const Tile &on_true,
                           float on_false, Opts opts, Where where) {
  if (error_) return;
  TRN_KB_OPERANDS("select", std::pair{"dst", dst}, std::pair{"on_true", on_true});
  TRN_KB_REQUIRE(steps.size() <= isa::kMaxFreeDims, "select: at most {} steps", isa::kMaxFreeDims);
  Instruction inst =
      make(Opcode::kAffineSelect, dst.pattern(), steps_pattern(steps), on_true.pattern());
  inst.func = static_cast<uint8_t>(cmp);
  inst.iimm = {offset, channel_multiplier};
  inst.imm[0] = on_false;
  compute(inst, {Engine::kGpSimd}, opts, where);
}

#undef TRN_KB_REQUIRE
#undef TRN_KB_OPERANDS

KernelBuilder::Stats KernelBuilder::stats() const {
  Stats st;
  st.waits = s_->waits;
  st.dma_transfers = s_->dma_transfers;
  st.sbuf_peak_bytes = s_->sbuf_peak;
  st.engine_cycles = s_->engine_cycles;
  st.dma_busy_ps = s_->dma_busy_ps;
  for (const auto &w : s_->waited_ordinals()) st.semaphores += !w.empty();
  return st;
}

std::variant<isa::Program, std::string> KernelBuilder::finish() {
  if (error_) return *error_;
  isa::Program &p = s_->program;
  // Semaphores: one per agent that anything waits on. Only the instructions waited on signal,
  // so a wait for the k-th of them is a wait for the count to reach k (they complete in order).
  const std::vector<std::vector<uint32_t>> waited = s_->waited_ordinals();
  std::vector<int> sem(detail::kAgentCount, -1);
  int next = 0;
  for (Agent a = 0; a < detail::kAgentCount; ++a)
    if (!waited[a].empty()) sem[a] = next++;
  if (static_cast<uint32_t>(next) > s_->target.core.semaphores)
    return fmt::format("kernel '{}' needs {} semaphores; the core has {}", p.name, next,
                       s_->target.core.semaphores);
  auto rank = [&](Event e) {
    const auto &w = waited[e.agent];
    return static_cast<uint32_t>(std::lower_bound(w.begin(), w.end(), e.ordinal) - w.begin()) + 1;
  };
  for (uint32_t e = 0; e < isa::kEngineCount; ++e) {
    auto &stream = p.streams[e];
    for (size_t i = 0; i < stream.size(); ++i) {
      const Meta &m = s_->meta[e][i];
      if (m.self.ordinal && std::binary_search(waited[m.self.agent].begin(),
                                               waited[m.self.agent].end(), m.self.ordinal))
        stream[i].signal = {isa::SemOp::kAdd, static_cast<uint16_t>(sem[m.self.agent]), 1};
      if (m.wait.ordinal)
        stream[i].wait = {isa::SemCmp::kGe, static_cast<uint16_t>(sem[m.wait.agent]), rank(m.wait)};
    }
  }
  // Source locations: every instruction names the call that built it (file and line; a kernel
  // written across several files names each).
  bool several_files = false;
  for (uint32_t e = 0; e < isa::kEngineCount; ++e) {
    p.source_lines[e].clear();
    p.source_file_ids[e].clear();
    for (const Meta &m : s_->meta[e]) {
      const uint32_t id = p.intern_source_file(m.where.file ? base_name(m.where.file) : "");
      several_files = several_files || id != 0;
      p.source_lines[e].push_back(m.where.line);
      p.source_file_ids[e].push_back(id);
    }
  }
  if (!several_files)
    for (auto &ids : p.source_file_ids) ids.clear();  // all file 0: the compact form
  if (auto err = isa::validate_program(p, s_->target.core))
    return fmt::format("kernel '{}': {}", p.name, *err);
  isa::Program out = std::move(p);
  s_->program = {};
  error_ = "finish() was called already";
  return out;
}

}  // namespace trn::kbuild
