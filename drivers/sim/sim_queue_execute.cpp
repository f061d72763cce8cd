// Executing a queue's buffers, by whoever holds the ring (sim_queue_runner.cpp): commands,
// their simulated time, faults, cancellation and retirement.
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <new>

#include "isa/dtype.hpp"
#include "sim/dma_engine.hpp"
#include "sim/file_io.hpp"
#include "sim/semaphore.hpp"
#include "sim/sim_instance.hpp"
#include "sim/sim_queue.hpp"
#include "sim/topology.hpp"
#include "sim/wait_primitives.hpp"

namespace trn::sim {

// A quarter of the time nothing, a quarter a yield of the core, and half the time a pause of up
// to `max_ns`, so that the threads of the other queues, processes and host threads overtake this
// one at random points.
void jitter(uint64_t max_ns) {
  // One shared sequence (splitmix64), not a generator per thread: thread-local storage of a
  // library loaded with dlopen is dynamic, which ThreadSanitizer misreads when threads reuse it.
  static std::atomic<uint64_t> sequence{monotonic_ns()};
  uint64_t z = sequence.fetch_add(0x9e3779b97f4a7c15ull, std::memory_order_relaxed);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  const uint64_t draw = z ^ (z >> 31);
  switch (draw % 4) {
    case 0: return;
    case 1: sched_yield(); return;
    default: {
      const uint64_t ns = (draw >> 2) % (max_ns + 1);
      const timespec pause{static_cast<time_t>(ns / 1'000'000'000),
                           static_cast<long>(ns % 1'000'000'000)};
      nanosleep(&pause, nullptr);
    }
  }
}

bool SimQueue::process(Slot &buffer, const Errand *errand, RunClock &clock) {
  if (!cursor_.active) {
    if (stop_.load(std::memory_order_acquire) != 0) {
      cancel(buffer, "the queue was destroyed before the command ran");
      return true;
    }
    if (in_error_.load(std::memory_order_acquire)) {
      // With the first failure's reason: whoever waits on this command's signals learns the
      // cause, not only that something failed before.
      std::string first;
      {
        std::lock_guard lock(fault_mu_);
        first = fault_.reason;
      }
      cancel(buffer,
             "an earlier command of the queue failed" + (first.empty() ? "" : " (" + first + ")"));
      return true;
    }
    // The signals that end a buffer (its completion) come after it retires, as a ring's slot is
    // free once the engine is past it: a host that saw a buffer's completion can submit into
    // its slot, never a spurious QUEUE_FULL. A buffer of signals only (a barrier) has no work
    // to time: its completion is not delayed by two clock reads (a round trip's worth of a fast
    // hand-off).
    if (instance_.config.jitter_ns != 0) jitter(instance_.config.jitter_ns);
    cursor_.end = trailing_signals(buffer);
    cursor_.index = 0;
    cursor_.activity = trn_hal_core_activity_t{};
    cursor_.start_ns = cursor_.end > 0 ? clock.now() : 0;
    cursor_.active = true;
  }
  const Ran ran = execute(buffer, errand);
  if (ran == Ran::paused) return false;
  cursor_.active = false;
  trn_hal_core_activity_t &activity = cursor_.activity;
  // A buffer is one command of the submitter's (a barrier too): it completed or failed.
  (ran == Ran::completed ? activity.commands_completed : activity.commands_failed) = 1;
  if (cursor_.end > 0) activity.busy_host_ns = clock.read() - cursor_.start_ns;
  device_.account(shape_.first_core, activity);
  if (ran == Ran::failed) return true;
  // The slot is the next submitter's once retired: take the signals (and the holds) out first.
  tail_signals_.clear();
  const trn_hal_command_t *commands = buffer.commands();
  SemCore *const *sems = buffer.sems();
  for (size_t i = cursor_.end; i < buffer.count; ++i)
    tail_signals_.push_back({sems[i], commands[i].u.sem.value});
  if (!buffer.refs.empty()) tail_refs_.swap(buffer.refs);
  retire(buffer);
  for (const TailSignal &t : tail_signals_) t.sem->signal(t.value, clock_ns_, false);
  // Not before: a waiter that saw a signal's value may let go of its hold while the signal is
  // still returning.
  tail_refs_.clear();
  return true;
}

std::string SimQueue::name_of(const Slot &buffer) {
  return std::string(buffer.label ? buffer.label : "buffer") + " #" + std::to_string(buffer.tag);
}

std::string SimQueue::where() const {
  const uint32_t last = shape_.first_core + shape_.core_count - 1;
  return " (a queue of device " + std::to_string(device_.index()) + ", physical core" +
         (last == shape_.first_core
              ? " " + std::to_string(last)
              : "s " + std::to_string(shape_.first_core) + "-" + std::to_string(last)) +
         ")";
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
                                       const Errand *errand, trn_hal_core_activity_t *activity,
                                       Failure *failure) {
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
      trn_result_t r =
          resolve_operand(instance_, failure->destination, failure->bytes,
                          (flags & TRN_HAL_COPY_HOST_DESTINATION) != 0, &to, &why, &run_memo_);
      if (r == TRN_SUCCESS && copy)
        r = resolve_operand(instance_, failure->source, failure->bytes,
                            (flags & TRN_HAL_COPY_HOST_SOURCE) != 0, &from, &why, &run_memo_);
      if (r == TRN_SUCCESS)
        r = copy ? dma_copy(instance_.dma, to, from, &why)
                 : dma_fill(instance_.dma, to, static_cast<uint8_t>(c.u.memset.value), &why);
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
      // Given back however the launch ends: one that throws (out of host memory making the
      // core's executor) must not keep the engines from every later launch on the core.
      struct Release {
        CoreArbiter &engines;
        const uint64_t &clock_ns;
        ~Release() { engines.release(clock_ns); }
      } release{engines, clock_ns_};
      failure->launch =
          run_launch(instance_, device_, shape_.first_core, *c.u.launch.kernel, c.u.launch.args,
                     c.u.launch.arg_count, c.u.launch.result, activity);
      tick(failure->launch.kernel_ns);
      if (failure->launch.result == TRN_ERROR_KERNEL_FAULT ||
          failure->launch.result == TRN_ERROR_KERNEL_DEADLOCK)
        failure->kernel = c.u.launch.kernel;
      why = failure->launch.why;
      return failure->launch.result;
    }
    case TRN_HAL_COMMAND_SEM_WAIT: {
      SemCore &sem = *sem_core;
      const trn_result_t r = wait_command(sem, c.u.sem.value, errand);
      if (r == TRN_TIMEOUT) return r;  // paused before the wait
      if (r == TRN_SUCCESS) {
        // Causal time: the command after the wait starts no earlier than the signal that reached
        // the value (not a later one: a peer may be chunks ahead).
        clock_ns_ = std::max(clock_ns_, sem.reached_ns(c.u.sem.value, clock_ns_));
        device_.advance_time(clock_ns_);
        return r;
      }
      why = stop_.load(std::memory_order_acquire) != 0
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
      if (r == TRN_SUCCESS) r = dma_write(instance_.dma, to, &stamp, &why);
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
      trn_result_t r = resolve(instance_, op.destination, failure->bytes, &to, &why, &run_memo_);
      if (r == TRN_SUCCESS) r = resolve(instance_, op.a, failure->bytes, &a, &why, &run_memo_);
      if (r == TRN_SUCCESS) r = resolve(instance_, op.b, failure->bytes, &b, &why, &run_memo_);
      if (r == TRN_SUCCESS)
        r = dma_reduce(instance_.dma, to, a, b, dtype, static_cast<trn_reduce_op_t>(op.op), &why);
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

SimQueue::Ran SimQueue::execute(Slot &buffer, const Errand *errand) {
  const trn_hal_command_t *commands = buffer.commands();
  SemCore *const *sems = buffer.sems();
  // One record for the buffer's commands (most complete, and it is over a hundred bytes to set
  // up): each command starts it afresh where a failure would read it.
  Failure failure;
  for (; cursor_.index < cursor_.end; ++cursor_.index) {
    const size_t i = cursor_.index;
    failure.destination = failure.source = failure.bytes = 0;
    failure.kernel = nullptr;
    failure.reason.clear();
    trn_result_t r = TRN_SUCCESS;
    try {
      r = execute_command(commands[i], sems[i], errand, &cursor_.activity, &failure);
    } catch (const std::bad_alloc &) {
      // Nothing thrown may end the worker: the command fails instead.
      r = TRN_ERROR_OUT_OF_HOST_MEMORY;
      failure.reason = "out of host memory while executing the command";
    } catch (const std::exception &e) {
      r = TRN_ERROR_DRIVER;
      failure.reason = std::string("the driver failed executing the command: ") + e.what();
    }
    if (r == TRN_SUCCESS) continue;
    if (r == TRN_TIMEOUT) return Ran::paused;
    failure.result = r;
    record_fault(buffer, static_cast<uint32_t>(i), failure);
    abandon(buffer, i + 1, r, name_of(buffer) + " failed: " + failure.reason + where());
    return Ran::failed;
  }
  return Ran::completed;
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
  abandon(buffer, 0, TRN_ERROR_CANCELLED, name_of(buffer) + " was cancelled: " + reason + where());
  std::lock_guard lock(fault_mu_);
  if (fault_.result != TRN_SUCCESS) ++fault_.cancelled;
}

void SimQueue::retire(Slot &buffer) {
  buffer.refs.clear();  // after a swap into tail_refs_, empty already
  const uint64_t position = tail_.load(std::memory_order_relaxed);
  tail_.store(position + 1, std::memory_order_relaxed);
  // Frees the slot (submitters count free slots by it; the slot itself is not written, so its
  // line is not taken back from the submitter that fills it next): the last touch of the buffer.
  retired_.store(position + 1, std::memory_order_release);
}

}  // namespace trn::sim
