#include "sim/sim_queue.hpp"

#include <time.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "sim/command_check.hpp"
#include "sim/dma_engine.hpp"
#include "sim/semaphore.hpp"
#include "sim/wait_primitives.hpp"

namespace trn::sim {

namespace {

// An idle worker sleeps in slices this long (a missed doorbell costs at most one).
constexpr uint64_t kIdleSliceNs = 100'000'000;
constexpr size_t kKeptBuffers = 64;

}  // namespace

SimQueue::SimQueue(trn_hal_instance_t &instance, DeviceRuntime &device, const QueueShape &shape)
    : instance_(instance), device_(device), shape_(shape), clock_ns_(device.time_ns()) {
  free_.reserve(kKeptBuffers);  // retiring never allocates
  worker_ = std::thread([this] { run(); });
}

SimQueue::~SimQueue() {
  stop();
}

trn_result_t SimQueue::submit(const trn_hal_submission_t &submission, std::string *why) {
  if (trn_result_t r = check_submission(instance_, device_, shape_.kind, submission, why);
      r != TRN_SUCCESS)
    return r;
  {
    std::lock_guard lock(mu_);
    if (stop_.load(std::memory_order_acquire)) {
      *why = "the queue is being destroyed";
      return TRN_ERROR_INVALID_HANDLE;
    }
    const uint64_t retired = retired_.load(std::memory_order_acquire);
    if (submitted_ - retired >= shape_.capacity) {
      *why = "the queue has " + std::to_string(shape_.capacity) +
             " buffers in flight (its capacity): wait for some to retire, then submit again";
      return TRN_ERROR_QUEUE_FULL;
    }
    std::unique_ptr<Buffer> buffer;
    if (!free_.empty()) {
      buffer = std::move(free_.back());
      free_.pop_back();
    } else {
      buffer = std::make_unique<Buffer>();
    }
    buffer->label = submission.label;
    buffer->tag = submission.tag;
    buffer->commands.assign(submission.commands, submission.commands + submission.command_count);
    size_t arg_total = 0;
    for (const auto &c : buffer->commands)
      if (c.kind == TRN_HAL_COMMAND_LAUNCH) arg_total += c.u.launch.arg_count;
    buffer->args.clear();
    buffer->args.reserve(arg_total);  // no reallocation below: the pointers stay valid
    for (auto &c : buffer->commands) {
      if (c.kind != TRN_HAL_COMMAND_LAUNCH) continue;
      const size_t at = buffer->args.size();
      buffer->args.insert(buffer->args.end(), c.u.launch.args,
                          c.u.launch.args + c.u.launch.arg_count);
      c.u.launch.args = buffer->args.data() + at;
    }
    // The buffer holds its semaphores: a waiter that saw a signal's value may destroy its hold
    // while the signal is still returning.
    buffer->sems.resize(buffer->commands.size());
    for (size_t i = 0; i < buffer->commands.size(); ++i) {
      const trn_hal_command_t &c = buffer->commands[i];
      if (c.kind == TRN_HAL_COMMAND_SEM_WAIT || c.kind == TRN_HAL_COMMAND_SEM_SIGNAL)
        buffer->sems[i] = c.u.sem.sem->core;
    }
    pending_.push_back(std::move(buffer));
    ++submitted_;
  }
  doorbell_.fetch_add(1, std::memory_order_seq_cst);
  if (worker_asleep_.load(std::memory_order_seq_cst))
    futex_wake(&doorbell_, 1, FutexScope::process_private);
  return TRN_SUCCESS;
}

void SimQueue::status(trn_hal_queue_status_t *out) {
  std::lock_guard lock(mu_);
  out->submitted = submitted_;
  out->retired = retired_.load(std::memory_order_acquire);
  out->fault = fault_;
}

trn_result_t SimQueue::reset(std::string *why) {
  std::lock_guard lock(mu_);
  if (!in_error_.load(std::memory_order_acquire)) return TRN_SUCCESS;
  const uint64_t retired = retired_.load(std::memory_order_acquire);
  if (retired < submitted_) {
    *why = std::to_string(submitted_ - retired) +
           " buffers after the fault have not retired yet (cancelled buffers drain in "
           "microseconds): wait until queue_status reports them retired, then reset again";
    return TRN_ERROR_HANDLE_IN_USE;
  }
  fault_ = trn_hal_queue_fault_t{};
  in_error_.store(false, std::memory_order_release);
  return TRN_SUCCESS;
}

std::unique_ptr<SimQueue::Buffer> SimQueue::next() {
  std::lock_guard lock(mu_);
  if (pending_.empty()) return nullptr;
  auto buffer = std::move(pending_.front());
  pending_.pop_front();
  return buffer;
}

void SimQueue::run() {
  for (;;) {
    // Read before looking for work: a submission after the look rings a doorbell we then see.
    const uint32_t seen = doorbell_.load(std::memory_order_seq_cst);
    if (auto buffer = next()) {
      try {
        process(*buffer);
      } catch (const std::exception &) {
        // Out of memory building a reason: the buffer retires all the same, the worker lives.
      }
      retire(std::move(buffer));
      continue;
    }
    if (stop_.load(std::memory_order_acquire)) {
      std::lock_guard lock(mu_);
      if (pending_.empty()) return;  // submissions are refused once stopping
      continue;
    }
    idle(seen);
  }
}

void SimQueue::process(Buffer &buffer) {
  if (stop_.load(std::memory_order_acquire)) {
    cancel(buffer, "the queue was destroyed before the command ran");
  } else if (in_error_.load(std::memory_order_acquire)) {
    cancel(buffer, "an earlier command of the queue failed");
  } else {
    trn_hal_core_activity_t activity{};
    const uint64_t start = monotonic_ns();
    // The signals that end a buffer (its completion) come after it retires, as a ring's slot is
    // free once the engine is past it: a host that saw a buffer's completion can submit into its
    // slot, never a spurious QUEUE_FULL.
    const size_t tail = trailing_signals(buffer);
    const bool reached_tail = execute(buffer, tail, &activity);
    // A buffer is one command of the submitter's (a barrier too): it completed or failed.
    (reached_tail ? activity.commands_completed : activity.commands_failed) = 1;
    activity.busy_host_ns = monotonic_ns() - start;
    device_.account(shape_.first_core, activity);
    if (!reached_tail) return;
    count_retired(buffer);
    for (size_t i = tail; i < buffer.commands.size(); ++i)
      buffer.sems[i]->signal(buffer.commands[i].u.sem.value, clock_ns_, false);
  }
}

void SimQueue::idle(uint32_t seen) {
  // Spin for the budget (a submission is then picked up in well under a microsecond), then
  // sleep until the doorbell rings, in bounded slices.
  const uint64_t spin_until = deadline_after(instance_.config.spin_ns);
  for (uint32_t i = 0;; ++i) {
    if (doorbell_.load(std::memory_order_acquire) != seen) return;
    if ((i & 63) == 0 && monotonic_ns() >= spin_until) break;
    cpu_relax();
  }
  worker_asleep_.store(1, std::memory_order_seq_cst);
  if (doorbell_.load(std::memory_order_seq_cst) == seen)
    futex_wait(&doorbell_, seen, kIdleSliceNs, FutexScope::process_private);
  worker_asleep_.store(0, std::memory_order_release);
}

std::string SimQueue::name_of(const Buffer &buffer) {
  return std::string(buffer.label ? buffer.label : "buffer") + " #" + std::to_string(buffer.tag);
}

void SimQueue::tick(uint64_t ns) {
  clock_ns_ += ns;
  device_.advance_time(clock_ns_);
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
      MemorySpan to, from;
      trn_result_t r = resolve(instance_, failure->destination, failure->bytes, &to, &why);
      if (r == TRN_SUCCESS && copy)
        r = resolve(instance_, failure->source, failure->bytes, &from, &why);
      if (r == TRN_SUCCESS)
        r = copy ? dma_copy(to, from, &why)
                 : dma_fill(to, static_cast<uint8_t>(c.u.memset.value), &why);
      if (r != TRN_SUCCESS) return r;
      const uint64_t ns =
          simulated_dma_ns(failure->bytes, shape_.dma_engine_bytes_per_s, shape_.dma_engines);
      activity->dma_bytes += failure->bytes;
      activity->dma_busy_ns += ns;
      tick(ns);
      return TRN_SUCCESS;
    }
    case TRN_HAL_COMMAND_LAUNCH: {
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
    case TRN_HAL_COMMAND_SEM_SIGNAL:
      sem_core->signal(c.u.sem.value, clock_ns_, false);
      return TRN_SUCCESS;
    case TRN_HAL_COMMAND_TIMESTAMP: {
      failure->destination = c.u.timestamp.destination;
      failure->bytes = sizeof(trn_hal_timestamp_t);
      MemorySpan to;
      trn_result_t r = resolve(instance_, failure->destination, failure->bytes, &to, &why);
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
    default: why = "unknown command kind"; return TRN_ERROR_INVALID_ARGUMENT;
  }
}

size_t SimQueue::trailing_signals(const Buffer &buffer) {
  size_t tail = buffer.commands.size();
  while (tail > 0 && buffer.commands[tail - 1].kind == TRN_HAL_COMMAND_SEM_SIGNAL) --tail;
  return tail;
}

bool SimQueue::execute(Buffer &buffer, size_t end, trn_hal_core_activity_t *activity) {
  for (size_t i = 0; i < end; ++i) {
    Failure failure;
    trn_result_t r = TRN_SUCCESS;
    try {
      r = execute_command(buffer.commands[i], buffer.sems[i].get(), activity, &failure);
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

void SimQueue::record_fault(const Buffer &buffer, uint32_t index, const Failure &failure) {
  std::lock_guard lock(mu_);
  fault_ = trn_hal_queue_fault_t{};
  fault_.result = failure.result;
  fault_.label = buffer.label;
  fault_.tag = buffer.tag;
  fault_.command_index = index;
  fault_.command_kind = buffer.commands[index].kind;
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

void SimQueue::abandon(Buffer &buffer, size_t from, trn_result_t status, const std::string &text) {
  for (size_t i = from; i < buffer.commands.size(); ++i) {
    const trn_hal_command_t &c = buffer.commands[i];
    if (c.kind == TRN_HAL_COMMAND_SEM_SIGNAL) {
      buffer.sems[i]->fail(text);
    } else if (c.kind == TRN_HAL_COMMAND_HOST_CALL) {
      trn_hal_error_t err{};
      (void)c.u.host_call.fn(c.u.host_call.user, status, &err);  // its return is ignored
    }
  }
}

void SimQueue::cancel(Buffer &buffer, const std::string &reason) {
  abandon(buffer, 0, TRN_ERROR_CANCELLED, name_of(buffer) + " was cancelled: " + reason);
  std::lock_guard lock(mu_);
  if (fault_.result != TRN_SUCCESS) ++fault_.cancelled;
}

void SimQueue::retire(std::unique_ptr<Buffer> buffer) {
  // Not under the lock: letting go of a last hold releases a shared semaphore's cell.
  for (auto &sem : buffer->sems) sem.reset();
  std::lock_guard lock(mu_);
  if (!buffer->counted) retired_.fetch_add(1, std::memory_order_acq_rel);
  buffer->counted = false;
  if (free_.size() < kKeptBuffers) free_.push_back(std::move(buffer));
}

void SimQueue::count_retired(Buffer &buffer) {
  std::lock_guard lock(mu_);
  retired_.fetch_add(1, std::memory_order_acq_rel);
  buffer.counted = true;
}

void SimQueue::stop() {
  std::lock_guard guard(stop_mu_);
  if (!worker_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stop_.store(true, std::memory_order_release);
  }
  doorbell_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(&doorbell_, 1, FutexScope::process_private);
  worker_.join();
}

}  // namespace trn::sim
