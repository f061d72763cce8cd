#include "exec/executor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <queue>

#include "exec/ops.hpp"
#include "exec/race_check.hpp"
#include "isa/scalar_args.hpp"
#include "isa/validate.hpp"

namespace trn::sim::exec {

using isa::Engine;
using isa::Opcode;

const char *run_status_name(RunStatus s) {
  switch (s) {
    case RunStatus::kOk: return "ok";
    case RunStatus::kFault: return "fault";
    case RunStatus::kDeadlock: return "deadlock";
  }
  return "invalid";
}

Executor::Executor(const CoreSpec &spec)
    : spec_(spec),
      memory_(spec.partitions, spec.sbuf_bytes_per_partition, spec.psum_bytes_per_partition) {}

namespace {

using OpFn = void (*)(const isa::Instruction &, ExecContext &);

OpFn op_function(Opcode op) {
  switch (op) {
    case Opcode::kDmaCopy: return op_dma_copy;
    case Opcode::kMatmul: return op_matmul;
    case Opcode::kTranspose: return op_transpose;
    case Opcode::kActivation: return op_activation;
    case Opcode::kTensorTensor: return op_tensor_tensor;
    case Opcode::kTensorScalar: return op_tensor_scalar;
    case Opcode::kTensorReduce: return op_tensor_reduce;
    case Opcode::kTensorCopy: return op_tensor_copy;
    case Opcode::kMemset: return op_memset;
    case Opcode::kIota: return op_iota;
    case Opcode::kAffineSelect: return op_affine_select;
    case Opcode::kNop:
    case Opcode::kSemWait:
    case Opcode::kSemSignal:
    case Opcode::kBarrier: break;
  }
  return nullptr;
}

// Events, processed in (time, kind, sequence) order: semaphore updates land before engines that
// become ready at the same instant look at them, and the sequence number keeps ties stable.
struct Event {
  uint64_t time;
  uint8_t kind;  // 0 = semaphore update, 1 = engine ready
  uint64_t seq;
  uint16_t sem;
  isa::SemOp op;
  uint32_t value;
  uint8_t engine;
  uint32_t clock;  // race check: the clock the update carries

  bool operator>(const Event &o) const {
    if (time != o.time) return time > o.time;
    if (kind != o.kind) return kind > o.kind;
    return seq > o.seq;
  }
};

enum class Block : uint8_t { kNone, kSemaphore, kBarrier };

struct EngineState {
  const std::vector<isa::Instruction> *stream = nullptr;
  size_t pc = 0;
  bool done = false;
  Block blocked = Block::kNone;
  uint64_t free_at = 0;  // when the engine finished its previous instruction
  uint64_t barriers_passed = 0;
};

// The launch value of each argument, as raw bits (0 for tensor arguments).
std::vector<uint64_t> scalar_values(std::span<const HbmBinding> args) {
  std::vector<uint64_t> values(args.size());
  for (size_t i = 0; i < args.size(); ++i) values[i] = args[i].scalar;
  return values;
}

std::vector<std::string> names_of(const isa::Program &program) {
  std::vector<std::string> names;
  for (const auto &a : program.args) names.push_back(a.name);
  return names;
}

class Simulation {
 public:
  Simulation(const isa::Program &program, std::span<const HbmBinding> args, Executor &executor,
             const RunOptions &options)
      : program_(program),
        spec_(executor.spec()),
        arg_names_(names_of(program)),
        ctx_(executor.memory(), args, program.constants, arg_names_),
        options_(options),
        sems_(spec_.semaphores, 0),
        // Scalar arguments are substituted into the immediates once per launch; streams that
        // read none run as they are.
        bound_(isa::bind_scalar_streams(program, scalar_values(args))) {
    if (options.race_check) race_ = std::make_unique<RaceChecker>(program, args, spec_.semaphores);
  }

  RunResult run() {
    for (uint32_t e = 0; e < isa::kEngineCount; ++e) {
      engines_[e].stream = bound_[e].empty() ? &program_.streams[e] : &bound_[e];
      engines_[e].done = program_.streams[e].empty();
      if (!engines_[e].done)
        push_ready(e, 0);
      else if (race_)
        race_->finish(e);
    }
    while (!events_.empty() && result_.report.status == RunStatus::kOk) {
      const Event ev = events_.top();
      events_.pop();
      now_ = ev.time;
      if (ev.kind == 0)
        apply_update(ev);
      else
        try_issue(ev.engine);
    }
    if (result_.report.status == RunStatus::kOk) check_deadlock();
    result_.counters.total_ps = std::max(result_.counters.total_ps, last_completion_);
    if (race_) {
      result_.counters.race_accesses = race_->stats().accesses;
      result_.counters.race_records_peak = race_->stats().peak_records;
      result_.counters.race_records_kept = race_->stats().peak_kept;
    }
    return std::move(result_);
  }

 private:
  void push_ready(uint32_t engine, uint64_t time) {
    events_.push(
        Event{time, 1, seq_++, 0, isa::SemOp::kNone, 0, static_cast<uint8_t>(engine), kNoClock});
  }

  void push_update(const isa::SemUpdate &u, uint64_t time, uint32_t clock) {
    if (u.op == isa::SemOp::kNone) return;
    events_.push(Event{time, 0, seq_++, u.sem, u.op, u.value, 0, clock});
  }

  bool wait_holds(const isa::SemWait &w) const {
    if (w.cmp == isa::SemCmp::kNone) return true;
    const uint32_t v = sems_[w.sem];
    return w.cmp == isa::SemCmp::kGe ? v >= w.value : v == w.value;
  }

  void apply_update(const Event &ev) {
    uint32_t &v = sems_[ev.sem];
    v = ev.op == isa::SemOp::kAdd ? v + ev.value : ev.value;
    if (race_) race_->update({ev.op, ev.sem, ev.value}, ev.clock);
    for (uint32_t e = 0; e < isa::kEngineCount; ++e) {
      EngineState &s = engines_[e];
      if (s.blocked != Block::kSemaphore) continue;
      if (wait_holds((*s.stream)[s.pc].wait)) {
        s.blocked = Block::kNone;
        push_ready(e, now_);
      }
    }
  }

  void fault(uint32_t engine, const isa::Instruction &inst, std::string message) {
    auto &r = result_.report;
    r.status = RunStatus::kFault;
    r.engine = static_cast<Engine>(engine);
    r.index = static_cast<uint32_t>(engines_[engine].pc);
    r.opcode = inst.opcode;
    r.message = std::move(message);
    r.at_ps = now_;
  }

  void try_issue(uint32_t e) {
    EngineState &s = engines_[e];
    if (s.done || s.blocked != Block::kNone) return;
    const isa::Instruction &inst = (*s.stream)[s.pc];
    if (inst.wait.cmp != isa::SemCmp::kNone && inst.wait.sem >= sems_.size())
      return fault(e, inst, fmt::format("semaphore {} does not exist", inst.wait.sem));
    if (!wait_holds(inst.wait)) {
      s.blocked = Block::kSemaphore;
      return;
    }
    if (race_) race_->wait(e, inst.wait);
    if (inst.opcode == Opcode::kBarrier) return arrive_at_barrier(e);
    execute(e, inst);
  }

  // All engines meet at their n-th barrier; they leave together once every DMA issued before it
  // has completed.
  void arrive_at_barrier(uint32_t e) {
    engines_[e].blocked = Block::kBarrier;
    for (const EngineState &s : engines_)
      if (s.done || s.blocked != Block::kBarrier) return;  // done ones: deadlock check reports
    uint64_t release = now_;
    for (uint64_t q : dma_free_) release = std::max(release, q);
    if (race_) race_->barrier();
    for (uint32_t i = 0; i < isa::kEngineCount; ++i) {
      EngineState &s = engines_[i];
      s.blocked = Block::kNone;
      const isa::Instruction &inst = (*s.stream)[s.pc];
      account(i, inst, release, isa::cycles_to_ps(1, spec_.clock_hz(Engine(i))), 0);
    }
  }

  // Bookkeeping common to every issued instruction: counters, trace, the semaphore update at
  // completion, and the engine's next instruction.
  void account(uint32_t e, const isa::Instruction &inst, uint64_t start, uint64_t cost_ps,
               uint64_t flops, bool update = true) {
    EngineState &s = engines_[e];
    EngineCounters &c = result_.counters.engines[e];
    const uint64_t end = start + cost_ps;
    c.instructions++;
    c.busy_ps += cost_ps;
    c.wait_ps += start - std::min(start, s.free_at);  // free, but the wait did not hold
    result_.counters.flops += flops;
    if (options_.trace)
      result_.trace.push_back({static_cast<uint8_t>(e), inst.opcode, static_cast<uint8_t>(e),
                               static_cast<uint32_t>(s.pc), start, end,
                               start - std::min(start, s.free_at), 0, flops});
    if (update) push_update(inst.signal, end, race_ ? race_->release(e, inst) : kNoClock);
    last_completion_ = std::max(last_completion_, end);
    s.free_at = end;
    if (++s.pc == s.stream->size()) {
      s.done = true;
      if (race_) race_->finish(e);
      // A finished engine may leave the others waiting at a barrier: re-check on the next one.
    } else {
      push_ready(e, end);
    }
  }

  void execute(uint32_t e, const isa::Instruction &inst) {
    try {
      if (OpFn fn = op_function(inst.opcode)) fn(inst, ctx_);
    } catch (const ExecFault &f) {
      return fault(e, inst, f.what());
    }
    if (race_)
      if (auto race = race_->execute(e, static_cast<uint32_t>(engines_[e].pc), inst, ctx_))
        return fault(e, inst, std::move(*race));
    const Engine engine = static_cast<Engine>(e);
    const isa::InstructionCost cost = isa::instruction_cost(inst, spec_);
    result_.counters.engines[e].cycles += cost.cycles;
    const uint64_t issue_ps = isa::cycles_to_ps(cost.cycles, spec_.clock_hz(engine));
    if (inst.opcode != Opcode::kDmaCopy) return account(e, inst, now_, issue_ps, cost.flops);

    // The DMA queue starts the transfer once the issue is done and its previous one finished;
    // the semaphore update lands when the transfer completes.
    const isa::DmaCost dma = isa::dma_cost(inst, spec_);
    const uint32_t q = inst.queue % kDmaQueues;
    const uint64_t start = std::max(now_ + issue_ps, dma_free_[q]);
    const uint64_t end = start + dma.ps;
    dma_free_[q] = end;
    result_.counters.dma_busy_ps[q] += dma.ps;
    result_.counters.dma_bytes += dma.bytes;
    result_.counters.dma_transfers++;
    last_completion_ = std::max(last_completion_, end);
    push_update(inst.signal, end, race_ ? race_->release(e, inst) : kNoClock);
    if (options_.trace)
      result_.trace.push_back({static_cast<uint8_t>(isa::kEngineCount + q), inst.opcode,
                               static_cast<uint8_t>(e), static_cast<uint32_t>(engines_[e].pc),
                               start, end, 0, dma.bytes, 0});
    account(e, inst, now_, issue_ps, 0, /*update=*/false);
  }

  void check_deadlock() {
    std::string lines;
    bool first = true;
    for (uint32_t e = 0; e < isa::kEngineCount; ++e) {
      const EngineState &s = engines_[e];
      if (s.done) continue;
      const isa::Instruction &inst = (*s.stream)[s.pc];
      const std::string label = isa::instruction_label(static_cast<Engine>(e), s.pc, inst.opcode);
      if (s.blocked == Block::kSemaphore) {
        lines += fmt::format("{}{} waits for semaphore {} {} {} (it is {})",
                             lines.empty() ? "" : "; ", label, inst.wait.sem,
                             inst.wait.cmp == isa::SemCmp::kGe ? ">=" : "==", inst.wait.value,
                             sems_[inst.wait.sem]);
      } else {
        std::string missing;
        for (uint32_t o = 0; o < isa::kEngineCount; ++o)
          if (engines_[o].done)
            missing += fmt::format("{}{}", missing.empty() ? "" : ", ",
                                   isa::engine_name(static_cast<Engine>(o)));
        lines += fmt::format("{}{} waits at the barrier for {} (finished without reaching it)",
                             lines.empty() ? "" : "; ", label, missing);
      }
      if (first) {
        auto &r = result_.report;
        r.engine = static_cast<Engine>(e);
        r.index = static_cast<uint32_t>(s.pc);
        r.opcode = inst.opcode;
        first = false;
      }
    }
    if (first) return;  // everyone finished
    result_.report.status = RunStatus::kDeadlock;
    result_.report.message = "deadlock: " + lines;
    result_.report.at_ps = last_completion_;
  }

  const isa::Program &program_;
  const CoreSpec &spec_;
  std::vector<std::string> arg_names_;
  ExecContext ctx_;
  const RunOptions &options_;
  std::vector<uint32_t> sems_;
  std::array<std::vector<isa::Instruction>, isa::kEngineCount> bound_;  // see the constructor
  std::array<EngineState, isa::kEngineCount> engines_{};
  std::array<uint64_t, kDmaQueues> dma_free_{};
  std::unique_ptr<RaceChecker> race_;  // null when options.race_check is off
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  uint64_t seq_ = 0;
  uint64_t now_ = 0;
  uint64_t last_completion_ = 0;
  RunResult result_;
};

}  // namespace

namespace {

// The highest byte of each on-chip memory that a written operand can reach (bounded by the
// partition size: anything past it faults instead of writing).
void note_writes(const isa::Program &program, CoreMemory &memory) {
  for (const auto &stream : program.streams)
    for (const isa::Instruction &inst : stream)
      for (const isa::AccessPattern *ap : {&inst.dst, &inst.dst2}) {
        if (ap->space != isa::MemSpace::kSbuf && ap->space != isa::MemSpace::kPsum) continue;
        uint64_t end = ap->offset + isa::dtype_size(ap->dtype);
        for (uint32_t d = 0; d < ap->num_dims && d < isa::kMaxFreeDims; ++d)
          if (ap->dims[d].stride > 0 && ap->dims[d].count > 0)
            end +=
                uint64_t(ap->dims[d].stride) * (ap->dims[d].count - 1) * isa::dtype_size(ap->dtype);
        if (ap->space == isa::MemSpace::kSbuf)
          memory.note_sbuf_use(end);
        else
          memory.note_psum_use(end);
      }
}

}  // namespace

RunResult Executor::run(const isa::Program &program, std::span<const HbmBinding> args,
                        const RunOptions &options, bool clear_memory) {
  if (clear_memory) memory_.clear();
  note_writes(program, memory_);
  return Simulation(program, args, *this, options).run();
}

}  // namespace trn::sim::exec
