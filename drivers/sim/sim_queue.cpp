#include "sim/sim_queue.hpp"

#include <time.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "common/thread_name.hpp"
#include "isa/dtype.hpp"
#include "sim/command_check.hpp"
#include "sim/dma_engine.hpp"
#include "sim/file_io.hpp"
#include "sim/semaphore.hpp"
#include "sim/sim_instance.hpp"
#include "sim/topology.hpp"
#include "sim/wait_primitives.hpp"

namespace trn::sim {

namespace {

// An idle worker sleeps in slices this long (a missed doorbell costs at most one).
constexpr uint64_t kIdleSliceNs = 100'000'000;
// Trailing signals a buffer can have before their list allocates.
constexpr size_t kKeptSignals = 16;

}  // namespace

SimQueue::SimQueue(trn_hal_instance_t &instance, DeviceRuntime &device, const QueueShape &shape)
    : instance_(instance),
      device_(device),
      shape_(shape),
      capacity_(shape.capacity),
      chunks_(new std::atomic<Slot *>[(shape.capacity + kChunkSlots - 1) / kChunkSlots]),
      clock_ns_(device.time_ns()) {
  const uint64_t chunks = (capacity_ + kChunkSlots - 1) / kChunkSlots;
  for (uint64_t i = 0; i < chunks; ++i) chunks_[i].store(nullptr, std::memory_order_relaxed);
  tail_signals_.reserve(kKeptSignals);  // a steady state never allocates
  tail_refs_.reserve(kKeptSignals);
  worker_ = std::thread([this] { run(); });
  // "trn-q0.3": device 0, first physical core 3.
  common::name_thread(
      worker_, "trn-q" + std::to_string(device.index()) + "." + std::to_string(shape.first_core));
}

SimQueue::~SimQueue() {
  stop();
  const uint64_t chunks = (capacity_ + kChunkSlots - 1) / kChunkSlots;
  for (uint64_t i = 0; i < chunks; ++i) delete[] chunks_[i].load(std::memory_order_relaxed);
}

SimQueue::Slot *SimQueue::slot_for_producer(uint64_t position) {
  const uint64_t index = position % capacity_;
  std::atomic<Slot *> &chunk = chunks_[index / kChunkSlots];
  Slot *base = chunk.load(std::memory_order_relaxed);  // made only under producer_mu_
  if (base == nullptr) {
    // A chunk is made when its first slot is first reached: on the ring's first lap, where a
    // slot's position is its index.
    const uint64_t first = index / kChunkSlots * kChunkSlots;
    const uint64_t count = std::min<uint64_t>(kChunkSlots, capacity_ - first);
    base = new Slot[count];
    for (uint64_t i = 0; i < count; ++i) base[i].seq.store(first + i, std::memory_order_relaxed);
    chunk.store(base, std::memory_order_release);
  }
  return base + index % kChunkSlots;
}

SimQueue::Slot *SimQueue::published(uint64_t position, std::memory_order order) {
  const uint64_t index = position % capacity_;
  Slot *base = chunks_[index / kChunkSlots].load(order);
  if (base == nullptr) return nullptr;
  Slot *slot = base + index % kChunkSlots;
  return slot->seq.load(order) == position + 1 ? slot : nullptr;
}

bool SimQueue::pin(const std::shared_ptr<SemCore> &core) {
  for (std::shared_ptr<SemCore> &pinned : pins_) {
    if (pinned.get() == core.get()) return true;
    if (pinned == nullptr && !core->shared()) {
      pinned = core;  // the one reference count this semaphore's commands move here
      return true;
    }
  }
  return false;
}

trn_result_t SimQueue::submit(const trn_hal_submission_t &submission, std::string *why) {
  if (trn_result_t r = check_submission(instance_, device_, shape_.kind, submission, why);
      r != TRN_SUCCESS)
    return r;
  {
    std::lock_guard lock(producer_mu_);
    if (stop_.load(std::memory_order_acquire)) {
      *why = "the queue is being destroyed";
      return TRN_ERROR_INVALID_HANDLE;
    }
    const uint64_t position = head_;
    Slot &slot = *slot_for_producer(position);
    if (slot.seq.load(std::memory_order_acquire) != position) {
      *why = "the queue has " + std::to_string(shape_.capacity) +
             " buffers in flight (its capacity): wait for some to retire, then submit again";
      return TRN_ERROR_QUEUE_FULL;
    }
    // The slot is ours until published: fill it in place (its storage is kept lap to lap).
    const uint32_t count = submission.command_count;
    slot.refs.clear();  // a fill that failed half-way may have left some
    if (count > kInlineCommands) {
      slot.more.assign(submission.commands, submission.commands + count);
      slot.more_sems.resize(count);
    }
    slot.count = count;
    trn_hal_command_t *commands = slot.commands();
    if (count <= kInlineCommands && count > 0)
      std::memcpy(commands, submission.commands, count * sizeof(trn_hal_command_t));
    // Each semaphore command's object, held by the queue (pinned) or by the buffer: a waiter
    // that saw a signal's value may let go of its hold while the signal is still returning.
    SemCore **sems = slot.sems();
    for (uint32_t i = 0; i < count; ++i) {
      const trn_hal_command_t &c = commands[i];
      const bool sem = c.kind == TRN_HAL_COMMAND_SEM_WAIT || c.kind == TRN_HAL_COMMAND_SEM_SIGNAL;
      SemCore *core = sem ? c.u.sem.sem->core.get() : nullptr;
      // Written only when it changes: a line the worker reads stays in its cache lap to lap.
      if (sems[i] != core) sems[i] = core;
      if (sem && !pin(c.u.sem.sem->core)) slot.refs.push_back(c.u.sem.sem->core);
    }
    size_t arg_total = 0;
    for (uint32_t i = 0; i < count; ++i)
      if (commands[i].kind == TRN_HAL_COMMAND_LAUNCH) arg_total += commands[i].u.launch.arg_count;
    slot.args.clear();
    if (arg_total > 0) {
      slot.args.reserve(arg_total);  // no reallocation below: the pointers stay valid
      for (uint32_t i = 0; i < count; ++i) {
        trn_hal_command_t &c = commands[i];
        if (c.kind != TRN_HAL_COMMAND_LAUNCH) continue;
        const size_t at = slot.args.size();
        slot.args.insert(slot.args.end(), c.u.launch.args, c.u.launch.args + c.u.launch.arg_count);
        c.u.launch.args = slot.args.data() + at;
      }
    }
    slot.label = submission.label;
    slot.tag = submission.tag;
    // Sequentially consistent with the worker's going to sleep: either it sees the buffer, or
    // we see it asleep and ring.
    slot.seq.store(position + 1, std::memory_order_seq_cst);
    head_ = position + 1;
  }
  if (asleep_.load(std::memory_order_seq_cst)) {
    doorbell_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(&doorbell_, 1, FutexScope::process_private);
  }
  return TRN_SUCCESS;
}

void SimQueue::status(trn_hal_queue_status_t *out) {
  std::lock_guard lock(producer_mu_);
  out->submitted = head_;
  out->retired = retired_.load(std::memory_order_acquire);
  std::lock_guard faults(fault_mu_);
  out->fault = fault_;
}

trn_result_t SimQueue::reset(std::string *why) {
  std::lock_guard lock(producer_mu_);
  if (!in_error_.load(std::memory_order_acquire)) return TRN_SUCCESS;
  const uint64_t retired = retired_.load(std::memory_order_acquire);
  if (retired < head_) {
    *why = std::to_string(head_ - retired) +
           " buffers after the fault have not retired yet (cancelled buffers drain in "
           "microseconds): wait until queue_status reports them retired, then reset again";
    return TRN_ERROR_HANDLE_IN_USE;
  }
  {
    std::lock_guard faults(fault_mu_);
    fault_ = trn_hal_queue_fault_t{};
  }
  in_error_.store(false, std::memory_order_release);
  return TRN_SUCCESS;
}

void SimQueue::run() {
  for (;;) {
    Slot *slot = published(tail_, std::memory_order_acquire);
    if (slot == nullptr) slot = idle();
    if (slot == nullptr) return;  // stopping, and nothing is left
    const uint64_t position = tail_;
    try {
      process(*slot);
    } catch (const std::exception &) {
      // Out of memory building a reason: the buffer retires all the same, the worker lives.
    }
    if (tail_ == position) retire(*slot);
    tail_refs_.clear();  // empty unless something was thrown
  }
}

SimQueue::Slot *SimQueue::idle() {
  // Spin for the budget (a submission is then picked up in well under a microsecond), then
  // sleep until the doorbell rings, in bounded slices. Submissions are refused once stopping,
  // so a look after seeing the stop finds whatever is left.
  for (SpinPhase spin(monotonic_ns(), instance_.config.spin_ns);;) {
    if (Slot *slot = published(tail_, std::memory_order_acquire)) return slot;
    if (stop_.load(std::memory_order_acquire)) return published(tail_, std::memory_order_acquire);
    if (!spin.next()) break;
  }
  for (;;) {
    asleep_.store(1, std::memory_order_seq_cst);
    const uint32_t seen = doorbell_.load(std::memory_order_seq_cst);
    Slot *slot = published(tail_, std::memory_order_seq_cst);
    if (slot == nullptr && !stop_.load(std::memory_order_seq_cst))
      futex_wait(&doorbell_, seen, kIdleSliceNs, FutexScope::process_private);
    asleep_.store(0, std::memory_order_relaxed);
    if (slot == nullptr) slot = published(tail_, std::memory_order_acquire);
    if (slot != nullptr) return slot;
    if (stop_.load(std::memory_order_acquire)) return published(tail_, std::memory_order_acquire);
  }
}

void SimQueue::process(Slot &buffer) {
  if (stop_.load(std::memory_order_acquire)) {
    cancel(buffer, "the queue was destroyed before the command ran");
    return;
  }
  if (in_error_.load(std::memory_order_acquire)) {
    // With the first failure's reason: whoever waits on this command's signals learns the cause,
    // not only that something failed before.
    std::string first;
    {
      std::lock_guard lock(fault_mu_);
      first = fault_.reason;
    }
    cancel(buffer,
           "an earlier command of the queue failed" + (first.empty() ? "" : " (" + first + ")"));
    return;
  }
  trn_hal_core_activity_t activity{};
  // The signals that end a buffer (its completion) come after it retires, as a ring's slot is
  // free once the engine is past it: a host that saw a buffer's completion can submit into its
  // slot, never a spurious QUEUE_FULL.
  const size_t tail = trailing_signals(buffer);
  // A buffer of signals only (a barrier) has no work to time: its completion is not delayed by
  // two clock reads (a round trip's worth of a fast hand-off).
  const bool has_work = tail > 0;
  const uint64_t start = has_work ? monotonic_ns() : 0;
  const bool reached_tail = execute(buffer, tail, &activity);
  // A buffer is one command of the submitter's (a barrier too): it completed or failed.
  (reached_tail ? activity.commands_completed : activity.commands_failed) = 1;
  if (has_work) activity.busy_host_ns = monotonic_ns() - start;
  device_.account(shape_.first_core, activity);
  if (!reached_tail) return;
  // The slot is the next submitter's once retired: take the signals (and the holds) out first.
  tail_signals_.clear();
  const trn_hal_command_t *commands = buffer.commands();
  SemCore *const *sems = buffer.sems();
  for (size_t i = tail; i < buffer.count; ++i)
    tail_signals_.push_back({sems[i], commands[i].u.sem.value});
  if (!buffer.refs.empty()) tail_refs_.swap(buffer.refs);
  retire(buffer);
  for (const TailSignal &s : tail_signals_) s.sem->signal(s.value, clock_ns_, false);
  // Not before: a waiter that saw a signal's value may let go of its hold while the signal is
  // still returning.
  tail_refs_.clear();
}

std::string SimQueue::name_of(const Slot &buffer) {
  return std::string(buffer.label ? buffer.label : "buffer") + " #" + std::to_string(buffer.tag);
}

void SimQueue::tick(uint64_t ns) {
  clock_ns_ += ns;
  device_.advance_time(clock_ns_);
}

void SimQueue::charge_dma(uint64_t bytes, trn_hal_core_activity_t *activity) {
  const uint64_t ns = simulated_dma_ns(bytes, shape_.dma_engine_bytes_per_s, shape_.dma_engines);
  activity->dma_bytes += bytes;
  activity->dma_busy_ns += ns;
  tick(ns);
}

void SimQueue::charge_reduce(uint64_t bytes, trn_hal_core_activity_t *activity) {
  // The engines move one operand's bytes at their share of the DMA rate for reductions.
  const uint64_t rate = shape_.dma_engine_bytes_per_s * shape_.dma_reduce_rate_percent / 100;
  const uint64_t ns = simulated_dma_ns(bytes, rate, shape_.dma_engines);
  activity->dma_bytes += bytes;
  activity->dma_busy_ns += ns;
  tick(ns);
}

void SimQueue::charge_link(uint64_t bytes, uint32_t hops, trn_hal_core_activity_t *activity) {
  const uint64_t ns = simulated_link_ns(bytes, shape_.dma_engine_bytes_per_s, shape_.dma_engines,
                                        shape_.link_bytes_per_s, hops);
  activity->dma_bytes += bytes;
  activity->dma_busy_ns += ns;
  tick(ns);
}

trn_result_t SimQueue::execute_command(const trn_hal_command_t &c, SemCore *sem_core,
                                       trn_hal_core_activity_t *activity, Failure *failure) {
  std::string &why = failure->reason;
  switch (c.kind) {
    case TRN_HAL_COMMAND_COPY:
    case TRN_HAL_COMMAND_MEMSET: {
      const bool copy = c.kind == TRN_HAL_COMMAND_COPY;
      failure->destination = copy ? c.u.copy.destination : c.u.memset.destination;
      failure->source = copy ? c.u.copy.source : 0;
      failure->bytes = copy ? c.u.copy.bytes : c.u.memset.bytes;
      const uint32_t flags = copy ? c.u.copy.flags : 0;
      MemorySpan to, from;
      trn_result_t r = resolve_operand(instance_, failure->destination, failure->bytes,
                                       (flags & TRN_HAL_COPY_HOST_DESTINATION) != 0, &to, &why);
      if (r == TRN_SUCCESS && copy)
        r = resolve_operand(instance_, failure->source, failure->bytes,
                            (flags & TRN_HAL_COPY_HOST_SOURCE) != 0, &from, &why);
      if (r == TRN_SUCCESS)
        r = copy ? dma_copy(to, from, &why)
                 : dma_fill(to, static_cast<uint8_t>(c.u.memset.value), &why);
      if (r != TRN_SUCCESS) return r;
      if (copy && to.hbm && from.hbm && to.hbm != from.hbm)
        charge_link(failure->bytes,
                    torus_hops(to.hbm->index(), from.hbm->index(),
                               static_cast<uint32_t>(instance_.devices.size())),
                    activity);
      else
        charge_dma(failure->bytes, activity);
      return TRN_SUCCESS;
    }
    case TRN_HAL_COMMAND_LAUNCH: {
      CoreArbiter &engines = device_.arbiter(shape_.first_core);
      if (!engines.acquire(priority_.load(std::memory_order_relaxed), stop_, &clock_ns_)) {
        why = "the queue was destroyed while the launch waited for the core's engines";
        return TRN_ERROR_CANCELLED;
      }
      failure->launch =
          run_launch(instance_, device_, shape_.first_core, *c.u.launch.kernel, c.u.launch.args,
                     c.u.launch.arg_count, c.u.launch.result, activity);
      tick(failure->launch.kernel_ns);
      engines.release(clock_ns_);
      if (failure->launch.result == TRN_ERROR_KERNEL_FAULT ||
          failure->launch.result == TRN_ERROR_KERNEL_DEADLOCK)
        failure->kernel = c.u.launch.kernel;
      why = failure->launch.why;
      return failure->launch.result;
    }
    case TRN_HAL_COMMAND_SEM_WAIT: {
      SemCore &sem = *sem_core;
      const trn_result_t r = sem.wait(c.u.sem.value, UINT64_MAX, &stop_);
      if (r == TRN_SUCCESS) {
        // Causal time: the command after the wait starts no earlier than the signal.
        clock_ns_ = std::max(clock_ns_, sem.device_ns());
        device_.advance_time(clock_ns_);
        return r;
      }
      why = stop_.load(std::memory_order_acquire)
                ? "the queue was destroyed while the command waited on a semaphore"
                : "a semaphore it waited on failed: " + sem.failure_reason();
      return TRN_ERROR_CANCELLED;
    }
    case TRN_HAL_COMMAND_SEM_SIGNAL: {
      sem_core->signal(c.u.sem.value, clock_ns_, false);
      return TRN_SUCCESS;
    }
    case TRN_HAL_COMMAND_TIMESTAMP: {
      failure->destination = timestamp_address(c);
      failure->bytes = sizeof(trn_hal_timestamp_t);
      MemorySpan to;
      trn_result_t r = resolve_operand(instance_, failure->destination, failure->bytes,
                                       c.u.timestamp.host != nullptr, &to, &why);
      const trn_hal_timestamp_t stamp{clock_ns_, monotonic_ns()};
      if (r == TRN_SUCCESS) r = dma_write(to, &stamp, &why);
      return r;
    }
    case TRN_HAL_COMMAND_HOST_CALL: {
      trn_hal_error_t err{};
      const trn_result_t r = c.u.host_call.fn(c.u.host_call.user, TRN_SUCCESS, &err);
      if (r != TRN_SUCCESS)
        why = err.message[0] ? err.message : "the host call failed without saying why";
      return r;
    }
    case TRN_HAL_COMMAND_FILE_READ:
    case TRN_HAL_COMMAND_FILE_WRITE: {
      const bool read = c.kind == TRN_HAL_COMMAND_FILE_READ;
      failure->destination = read ? c.u.file.device_address : c.u.file.file_offset;
      failure->source = read ? c.u.file.file_offset : c.u.file.device_address;
      failure->bytes = c.u.file.bytes;
      MemorySpan memory;
      trn_result_t r = resolve(instance_, c.u.file.device_address, c.u.file.bytes, &memory, &why);
      if (r == TRN_SUCCESS)
        r = file_transfer(read ? FileDirection::read : FileDirection::write, memory, c.u.file.fd,
                          c.u.file.file_offset, &why);
      if (r != TRN_SUCCESS) return r;
      // The storage side has no figure of its own: the transfer costs what the DMA engines take.
      charge_dma(failure->bytes, activity);
      return TRN_SUCCESS;
    }
    case TRN_HAL_COMMAND_REDUCE: {
      const auto &op = c.u.reduce;
      const auto dtype = static_cast<trn_dtype_t>(op.dtype);
      failure->destination = op.destination;
      failure->source = op.a;
      failure->bytes = uint64_t{op.count} * isa::dtype_size(static_cast<isa::DType>(dtype));
      MemorySpan to, a, b;
      trn_result_t r = resolve(instance_, op.destination, failure->bytes, &to, &why);
      if (r == TRN_SUCCESS) r = resolve(instance_, op.a, failure->bytes, &a, &why);
      if (r == TRN_SUCCESS) r = resolve(instance_, op.b, failure->bytes, &b, &why);
      if (r == TRN_SUCCESS)
        r = dma_reduce(to, a, b, dtype, static_cast<trn_reduce_op_t>(op.op), &why);
      if (r != TRN_SUCCESS) return r;
      charge_reduce(failure->bytes, activity);
      return TRN_SUCCESS;
    }
    default: why = "unknown command kind"; return TRN_ERROR_INVALID_ARGUMENT;
  }
}

size_t SimQueue::trailing_signals(const Slot &buffer) {
  const trn_hal_command_t *commands = buffer.commands();
  size_t tail = buffer.count;
  while (tail > 0 && commands[tail - 1].kind == TRN_HAL_COMMAND_SEM_SIGNAL) --tail;
  return tail;
}

bool SimQueue::execute(Slot &buffer, size_t end, trn_hal_core_activity_t *activity) {
  const trn_hal_command_t *commands = buffer.commands();
  SemCore *const *sems = buffer.sems();
  for (size_t i = 0; i < end; ++i) {
    Failure failure;
    trn_result_t r = TRN_SUCCESS;
    try {
      r = execute_command(commands[i], sems[i], activity, &failure);
    } catch (const std::bad_alloc &) {
      // Nothing thrown may end the worker: the command fails instead.
      r = TRN_ERROR_OUT_OF_HOST_MEMORY;
      failure.reason = "out of host memory while executing the command";
    } catch (const std::exception &e) {
      r = TRN_ERROR_DRIVER;
      failure.reason = std::string("the driver failed executing the command: ") + e.what();
    }
    if (r == TRN_SUCCESS) continue;
    failure.result = r;
    record_fault(buffer, static_cast<uint32_t>(i), failure);
    abandon(buffer, i + 1, r, name_of(buffer) + " failed: " + failure.reason);
    return false;
  }
  return true;
}

void SimQueue::record_fault(const Slot &buffer, uint32_t index, const Failure &failure) {
  std::lock_guard lock(fault_mu_);
  fault_ = trn_hal_queue_fault_t{};
  fault_.result = failure.result;
  fault_.label = buffer.label;
  fault_.tag = buffer.tag;
  fault_.command_index = index;
  fault_.command_kind = buffer.commands()[index].kind;
  std::snprintf(fault_.reason, sizeof fault_.reason, "%s", failure.reason.c_str());
  fault_.destination_address = failure.destination;
  fault_.source_address = failure.source;
  fault_.bytes = failure.bytes;
  if (failure.kernel) {
    fault_.kernel = const_cast<trn_hal_kernel_t *>(failure.kernel);
    fault_.engine = failure.launch.engine;
    fault_.instruction = failure.launch.instruction;
    fault_.source_line = failure.launch.source_line;
    std::snprintf(fault_.opcode, sizeof fault_.opcode, "%s", failure.launch.opcode);
  }
  in_error_.store(true, std::memory_order_release);
}

void SimQueue::abandon(Slot &buffer, size_t from, trn_result_t status, const std::string &text) {
  const trn_hal_command_t *commands = buffer.commands();
  SemCore *const *sems = buffer.sems();
  for (size_t i = from; i < buffer.count; ++i) {
    const trn_hal_command_t &c = commands[i];
    if (c.kind == TRN_HAL_COMMAND_SEM_SIGNAL) {
      sems[i]->fail(text);
    } else if (c.kind == TRN_HAL_COMMAND_HOST_CALL) {
      trn_hal_error_t err{};
      (void)c.u.host_call.fn(c.u.host_call.user, status, &err);  // its return is ignored
    }
  }
}

void SimQueue::cancel(Slot &buffer, const std::string &reason) {
  abandon(buffer, 0, TRN_ERROR_CANCELLED, name_of(buffer) + " was cancelled: " + reason);
  std::lock_guard lock(fault_mu_);
  if (fault_.result != TRN_SUCCESS) ++fault_.cancelled;
}

void SimQueue::retire(Slot &buffer) {
  // Counted before the slot is free: a submitter that finds it free reads it retired.
  buffer.refs.clear();  // after a swap into tail_refs_, empty already
  const uint64_t position = tail_++;
  retired_.store(position + 1, std::memory_order_release);
  buffer.seq.store(position + capacity_, std::memory_order_release);
}

trn_result_t SimQueue::set_priority(uint32_t priority, std::string *why) {
  if (priority > TRN_HAL_QUEUE_PRIORITY_HIGH) {
    *why = "queue priority " + std::to_string(priority) +
           " is not TRN_HAL_QUEUE_PRIORITY_LOW, _NORMAL or _HIGH";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  priority_.store(priority, std::memory_order_relaxed);
  return TRN_SUCCESS;
}

void SimQueue::stop() {
  std::lock_guard guard(stop_mu_);
  if (!worker_.joinable()) return;
  {
    std::lock_guard lock(producer_mu_);
    stop_.store(true, std::memory_order_seq_cst);
  }
  doorbell_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(&doorbell_, 1, FutexScope::process_private);
  worker_.join();
}

}  // namespace trn::sim
