#include "sim/sim_queue.hpp"

#include <algorithm>
#include <cstring>

#include "sim/dma_engine.hpp"
#include "sim/semaphore.hpp"
#include "sim/wait_primitives.hpp"

namespace trn::sim {

namespace {

// An idle worker sleeps in slices this long (a missed doorbell costs at most one).
constexpr uint64_t kIdleSliceNs = 100'000'000;
constexpr size_t kKeptBuffers = 64;

bool ranges_overflow(uint64_t address, uint64_t bytes) {
  return bytes > UINT64_MAX - address;
}

}  // namespace

SimQueue::SimQueue(trn_hal_instance_t &instance, DeviceRuntime &device, const QueueShape &shape)
    : instance_(instance), device_(device), shape_(shape), clock_ns_(device.time_ns()) {
  worker_ = std::thread([this] { run(); });
}

SimQueue::~SimQueue() {
  stop();
}

trn_result_t SimQueue::check_command(const trn_hal_command_t &c, std::string *why) {
  MemorySpan span;
  switch (c.kind) {
    case TRN_HAL_COMMAND_COPY:
      if (ranges_overflow(c.u.copy.destination, c.u.copy.bytes) ||
          ranges_overflow(c.u.copy.source, c.u.copy.bytes)) {
        *why = "a copy of " + std::to_string(c.u.copy.bytes) +
               " bytes runs past the end of the "
               "address space";
        return TRN_ERROR_INVALID_ARGUMENT;
      }
      if (trn_result_t r = resolve(instance_, c.u.copy.destination, c.u.copy.bytes, &span, why);
          r != TRN_SUCCESS) {
        *why = "copy destination: " + *why;
        return r;
      }
      if (trn_result_t r = resolve(instance_, c.u.copy.source, c.u.copy.bytes, &span, why);
          r != TRN_SUCCESS) {
        *why = "copy source: " + *why;
        return r;
      }
      return TRN_SUCCESS;
    case TRN_HAL_COMMAND_MEMSET:
      if (c.u.memset.value > 255) {
        *why = "a memset value must be a byte (0-255), not " + std::to_string(c.u.memset.value);
        return TRN_ERROR_INVALID_ARGUMENT;
      }
      if (ranges_overflow(c.u.memset.destination, c.u.memset.bytes)) {
        *why = "a memset of " + std::to_string(c.u.memset.bytes) +
               " bytes runs past the end of the address space";
        return TRN_ERROR_INVALID_ARGUMENT;
      }
      if (trn_result_t r = resolve(instance_, c.u.memset.destination, c.u.memset.bytes, &span, why);
          r != TRN_SUCCESS) {
        *why = "memset destination: " + *why;
        return r;
      }
      return TRN_SUCCESS;
    case TRN_HAL_COMMAND_LAUNCH:
      if (shape_.kind != TRN_HAL_QUEUE_COMPUTE) {
        *why = "a copy queue cannot launch kernels: submit launches to a compute queue";
        return TRN_ERROR_INVALID_ARGUMENT;
      }
      return check_launch(instance_, device_, c.u.launch.kernel, c.u.launch.args,
                          c.u.launch.arg_count, why);
    case TRN_HAL_COMMAND_SEM_WAIT:
    case TRN_HAL_COMMAND_SEM_SIGNAL:
      if (c.u.sem.sem == nullptr) {
        *why = std::string("a semaphore ") +
               (c.kind == TRN_HAL_COMMAND_SEM_WAIT ? "wait" : "signal") + " names no semaphore";
        return TRN_ERROR_INVALID_ARGUMENT;
      }
      return TRN_SUCCESS;
    case TRN_HAL_COMMAND_TIMESTAMP:
      if (trn_result_t r = resolve(instance_, c.u.timestamp.destination,
                                   sizeof(trn_hal_timestamp_t), &span, why);
          r != TRN_SUCCESS) {
        *why = "timestamp destination: " + *why;
        return r;
      }
      return TRN_SUCCESS;
    case TRN_HAL_COMMAND_HOST_CALL:
      if (c.u.host_call.fn == nullptr) {
        *why = "a host call names no function";
        return TRN_ERROR_INVALID_ARGUMENT;
      }
      return TRN_SUCCESS;
    default:
      *why = "unknown command kind " + std::to_string(c.kind) +
             " (hal.h lists TRN_HAL_COMMAND_COPY to TRN_HAL_COMMAND_HOST_CALL)";
      return TRN_ERROR_INVALID_ARGUMENT;
  }
}

trn_result_t SimQueue::check(const trn_hal_submission_t &submission, std::string *why) {
  if (submission.command_count != 0 && submission.commands == nullptr) {
    *why = "the buffer has " + std::to_string(submission.command_count) +
           " commands but no command array (NULL)";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  for (uint32_t i = 0; i < submission.command_count; ++i)
    if (trn_result_t r = check_command(submission.commands[i], why); r != TRN_SUCCESS) {
      *why = "command " + std::to_string(i) + " of buffer #" + std::to_string(submission.tag) +
             ": " + *why;
      return r;
    }
  return TRN_SUCCESS;
}

trn_result_t SimQueue::submit(const trn_hal_submission_t &submission, std::string *why) {
  if (trn_result_t r = check(submission, why); r != TRN_SUCCESS) return r;
  {
    std::lock_guard lock(mu_);
    if (stop_.load(std::memory_order_acquire)) {
      *why = "the queue is being destroyed";
      return TRN_ERROR_INVALID_HANDLE;
    }
    if (submitted_ - retired_.load(std::memory_order_acquire) >= shape_.capacity) {
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
    if (auto buffer = next()) {
      if (stop_.load(std::memory_order_acquire)) {
        cancel(*buffer, "the queue was destroyed before the command ran");
      } else if (in_error_.load(std::memory_order_acquire)) {
        cancel(*buffer, "an earlier buffer of the queue failed");
      } else {
        trn_hal_core_activity_t activity{};
        const uint64_t start = monotonic_ns();
        execute(*buffer, &activity);
        activity.busy_host_ns = monotonic_ns() - start;
        device_.account(shape_.first_core, activity);
      }
      retire(std::move(buffer));
      continue;
    }
    if (stop_.load(std::memory_order_acquire)) {
      std::lock_guard lock(mu_);
      if (pending_.empty()) return;  // submissions are refused once stopping
      continue;
    }
    idle();
  }
}

void SimQueue::idle() {
  // Spin for the budget (a submission is then picked up in well under a microsecond), then
  // sleep until the doorbell rings, in bounded slices.
  const uint32_t seen = doorbell_.load(std::memory_order_acquire);
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

void SimQueue::tick(uint64_t ns) {
  clock_ns_ += ns;
  device_.advance_time(clock_ns_);
}

trn_result_t SimQueue::execute_command(const trn_hal_command_t &c,
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
      activity->commands_completed += 1;
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
      if (failure->launch.result == TRN_SUCCESS) activity->commands_completed += 1;
      return failure->launch.result;
    }
    case TRN_HAL_COMMAND_SEM_WAIT: {
      SemCore &sem = *c.u.sem.sem->core;
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
      c.u.sem.sem->core->signal(c.u.sem.value, clock_ns_, false);
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

void SimQueue::execute(Buffer &buffer, trn_hal_core_activity_t *activity) {
  for (size_t i = 0; i < buffer.commands.size(); ++i) {
    Failure failure;
    const trn_result_t r = execute_command(buffer.commands[i], activity, &failure);
    if (r == TRN_SUCCESS) continue;
    failure.result = r;
    activity->commands_failed += 1;
    record_fault(buffer, static_cast<uint32_t>(i), failure);
    abandon(buffer, i + 1, r,
            "buffer #" + std::to_string(buffer.tag) + " failed: " + failure.reason);
    return;
  }
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
      c.u.sem.sem->core->fail(text);
    } else if (c.kind == TRN_HAL_COMMAND_HOST_CALL) {
      trn_hal_error_t err{};
      (void)c.u.host_call.fn(c.u.host_call.user, status, &err);  // its return is ignored
    }
  }
}

void SimQueue::cancel(Buffer &buffer, const std::string &reason) {
  abandon(buffer, 0, TRN_ERROR_CANCELLED,
          "buffer #" + std::to_string(buffer.tag) + " was cancelled: " + reason);
  std::lock_guard lock(mu_);
  if (fault_.result != TRN_SUCCESS) ++fault_.cancelled;
}

void SimQueue::retire(std::unique_ptr<Buffer> buffer) {
  std::lock_guard lock(mu_);
  retired_.fetch_add(1, std::memory_order_acq_rel);
  if (free_.size() < kKeptBuffers) free_.push_back(std::move(buffer));
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
