#include "runtime/queue.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>

#include <algorithm>
#include <cstring>
#include <shared_mutex>

#include "common/log.hpp"
#include "isa/opcodes.hpp"
#include "runtime/error.hpp"
#include "runtime/kernel.hpp"
#include "runtime/memory.hpp"
#include "runtime/session.hpp"

namespace trn::rt {

namespace {

// DMA costs from reference/trainium.md §1.5: each transfer pays the semaphore-to-start latency
// (~1.3 us) and descriptor generation (~0.6 us); engines then move data in parallel at their
// per-engine rate.
constexpr uint64_t kDmaFixedNs = 1900;
// Copies from this size up are split across host threads, as the engines split them: below it
// starting the threads costs more than they save.
constexpr uint64_t kParallelCopyBytes = 64ull << 20;

void futex_wait_word(std::atomic<uint32_t> *word, uint32_t expected, uint64_t timeout_ns) {
  struct timespec ts {};
  ts.tv_sec = static_cast<time_t>(timeout_ns / 1000000000u);
  ts.tv_nsec = static_cast<long>(timeout_ns % 1000000000u);
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAIT_PRIVATE, expected, &ts, nullptr,
          0);
}

void futex_wake_word(std::atomic<uint32_t> *word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr,
          0);
}

// memcpy/memset split across up to 4 host threads for large transfers.
template <typename Part>
void parallel_parts(uint64_t bytes, Part part) {
  const unsigned threads = std::min(4u, std::max(1u, std::thread::hardware_concurrency()));
  if (bytes < kParallelCopyBytes || threads == 1) {
    part(0, bytes);
    return;
  }
  const uint64_t step = (bytes / threads + 4095) & ~uint64_t{4095};
  std::vector<std::thread> helpers;
  for (unsigned i = 1; i < threads && i * step < bytes; ++i)
    helpers.emplace_back([&, i] { part(i * step, std::min(bytes, (i + 1) * step) - i * step); });
  part(0, std::min(bytes, step));
  for (auto &helper : helpers) helper.join();
}

}  // namespace

const char *command_name(Command::Kind kind) {
  switch (kind) {
    case Command::Kind::copy: return "copy";
    case Command::Kind::memset: return "memset";
    case Command::Kind::barrier: return "barrier";
    case Command::Kind::launch: return "launch";
  }
  return "unknown";
}

Queue::Queue(Device &device, Core &core, trn_queue_kind_t kind, uint32_t capacity,
             uint32_t dma_engines)
    : device_(device),
      core_(core),
      kind_(kind),
      capacity_(capacity),
      dma_engines_(dma_engines),
      timeline_(std::make_shared<Sem>(device, 0, true)),
      fault_(TRN_QUEUE_FAULT_INIT) {
  worker_ = std::thread([this] { run(); });
}

Queue::~Queue() {
  shutdown();
}

trn_result_t Queue::submit(Command command, uint64_t *sequence) {
  {
    std::lock_guard lock(mu_);
    if (submitted_ - retired_.load(std::memory_order_acquire) >= capacity_)
      return fail(TRN_ERROR_QUEUE_FULL,
                  "the queue has " + std::to_string(capacity_) +
                      " commands in flight (its capacity): wait for some to complete "
                      "(trn_sem_wait on the queue's semaphore, or trn_queue_finish), then submit "
                      "again");
    if (stop_.load(std::memory_order_acquire))
      return fail(TRN_ERROR_INVALID_HANDLE, "the queue is being destroyed");
    if (trn_result_t r = take_uses(command); r != TRN_SUCCESS) return r;
    command.sequence = ++submitted_;
    if (sequence) *sequence = command.sequence;
    pending_.push_back(std::move(command));
  }
  doorbell_.fetch_add(1, std::memory_order_release);
  if (worker_asleep_.load(std::memory_order_acquire)) futex_wake_word(&doorbell_);
  return TRN_SUCCESS;
}

namespace {

// What to do about memory freed before a command that uses it ran.
constexpr const char *kKeepAllocationsAlive =
    " (keep allocations alive until the commands that use them complete, or free them after "
    "waiting for the queue)";

}  // namespace

namespace {

// Every semaphore of a command's sync, waits first.
template <typename Each>
void for_each_sem(const Command &command, Each each) {
  for (auto &ref : command.waits) each(*ref.sem);
  for (auto &ref : command.signals) each(*ref.sem);
}

}  // namespace

trn_result_t Queue::take_uses(const Command &command) {
  size_t taken = 0;
  bool destroyed = false;
  for_each_sem(command, [&](Sem &sem) {
    if (!destroyed && sem.try_use())
      ++taken;
    else
      destroyed = true;
  });
  if (!destroyed) return TRN_SUCCESS;
  for_each_sem(command, [&](Sem &sem) {
    if (taken > 0) {
      sem.end_use();
      --taken;
    }
  });
  return fail(TRN_ERROR_INVALID_HANDLE,
              "a semaphore of the command's sync was destroyed while the command was submitted");
}

void Queue::end_uses(const Command &command) {
  for_each_sem(command, [](Sem &sem) { sem.end_use(); });
}

bool Queue::next(Command *command) {
  std::lock_guard lock(mu_);
  if (pending_.empty()) return false;
  *command = std::move(pending_.front());
  pending_.pop_front();
  return true;
}

void Queue::run() {
  for (;;) {
    Command command;
    if (next(&command)) {
      if (stop_.load(std::memory_order_acquire))
        cancel(command, "the queue was destroyed before the command ran");
      else if (in_error_.load(std::memory_order_acquire))
        cancel(command, "an earlier command of the queue failed");
      else
        execute(command);
      continue;
    }
    if (stop_.load(std::memory_order_acquire)) return;
    // Idle: spin for the budget (a submission is then picked up in well under a microsecond),
    // then sleep until the doorbell rings, in bounded slices.
    const uint32_t seen = doorbell_.load(std::memory_order_acquire);
    const uint64_t spin_until = monotonic_ns() + spin_budget_ns();
    bool rang = false;
    for (uint32_t i = 0; !rang; ++i) {
      rang = doorbell_.load(std::memory_order_acquire) != seen;
      if ((i & 63) == 0 && monotonic_ns() >= spin_until) break;
      __builtin_ia32_pause();
    }
    if (rang) continue;
    worker_asleep_.store(1, std::memory_order_release);
    {
      std::lock_guard lock(mu_);
      rang = !pending_.empty() || stop_.load(std::memory_order_acquire);
    }
    if (!rang && doorbell_.load(std::memory_order_acquire) == seen)
      futex_wait_word(&doorbell_, seen, 100'000'000);
    worker_asleep_.store(0, std::memory_order_release);
  }
}

void Queue::execute(Command &command) {
  const uint64_t start = monotonic_ns();
  for (auto &wait : command.waits) {
    const trn_result_t r = wait.sem->wait(wait.value, UINT64_MAX, &stop_);
    if (r == TRN_SUCCESS) continue;
    if (stop_.load(std::memory_order_acquire)) {
      cancel(command, "the queue was destroyed while the command waited on a semaphore");
      return;
    }
    record_fault(command, TRN_ERROR_CANCELLED,
                 "a semaphore it waited on failed: " + wait.sem->failure_reason());
    return;
  }
  std::string why;
  trn_result_t result = TRN_SUCCESS;
  trn_hal_core_activity_t activity{};
  switch (command.kind) {
    case Command::Kind::copy: result = copy(command, &why); break;
    case Command::Kind::memset: result = memset(command, &why); break;
    case Command::Kind::barrier: break;
    case Command::Kind::launch: result = launch(command, &why, &activity); break;
  }
  if (result != TRN_SUCCESS) {
    record_fault(command, result, why);
    return;
  }
  if (command.kind == Command::Kind::copy || command.kind == Command::Kind::memset) {
    activity.dma_bytes = command.size;
    activity.dma_busy_ns = simulated_dma_ns(command.size);
  }
  activity.commands_completed = 1;
  activity.busy_host_ns = monotonic_ns() - start;
  const trn_hal_ops_t &ops = device_.driver->ops;
  ops.core_account(device_.driver->instance, device_.driver_index,
                   core_.index * device_.properties.logical_core_config, &activity);
  retire(command);
}

trn_result_t Queue::copy(Command &command, std::string *why) {
  auto destination = command.destination.lock();
  auto source = command.source.lock();
  // Two allocations are always held in address order, so copies in opposite directions and a
  // free waiting between them cannot deadlock.
  std::shared_lock<std::shared_mutex> hold_first, hold_second;
  Mem *first = std::min(destination.get(), source.get(), std::less<Mem *>());
  Mem *second = std::max(destination.get(), source.get(), std::less<Mem *>());
  if (first) hold_first = std::shared_lock(first->use);
  if (second && second != first) hold_second = std::shared_lock(second->use);
  if (!destination || !source || destination->freed || source->freed) {
    *why = std::string("the ") + (!source || source->freed ? "source" : "destination") +
           " memory was freed before the copy ran" + kKeepAllocationsAlive;
    return TRN_ERROR_INVALID_HANDLE;  // a host-side use after free, not a device fault
  }
  if (trn_result_t r = commit_range(*destination, command.destination_offset, command.size);
      r != TRN_SUCCESS) {
    *why = last_detail();
    return r;
  }
  char *to = destination->host + command.destination_offset;
  if (destination == source) {
    // One allocation: ranges may overlap, so move it whole, as memmove does.
    if (trn_result_t r = commit_range(*source, command.source_offset, command.size);
        r != TRN_SUCCESS) {
      *why = "reading the source: " + last_detail();
      return r;
    }
    std::memmove(to, source->host + command.source_offset, command.size);
    return TRN_SUCCESS;
  }
  std::atomic<trn_result_t> result{TRN_SUCCESS};
  parallel_parts(command.size, [&](uint64_t offset, uint64_t bytes) {
    if (trn_result_t r = read_range(*source, command.source_offset + offset, to + offset, bytes);
        r != TRN_SUCCESS)
      result.store(r);
  });
  if (result.load() != TRN_SUCCESS) *why = "reading the source: " + last_detail();
  return result.load();
}

trn_result_t Queue::memset(Command &command, std::string *why) {
  auto destination = command.destination.lock();
  std::shared_lock<std::shared_mutex> hold;
  if (destination) hold = std::shared_lock(destination->use);
  if (!destination || destination->freed) {
    *why = std::string("the destination memory was freed before the memset ran") +
           kKeepAllocationsAlive;
    return TRN_ERROR_INVALID_HANDLE;
  }
  if (trn_result_t r = commit_range(*destination, command.destination_offset, command.size);
      r != TRN_SUCCESS) {
    *why = last_detail();
    return r;
  }
  char *to = destination->host + command.destination_offset;
  parallel_parts(command.size, [&](uint64_t offset, uint64_t bytes) {
    std::memset(to + offset, command.value, bytes);
  });
  return TRN_SUCCESS;
}

trn_result_t Queue::launch(Command &command, std::string *why, trn_hal_core_activity_t *activity) {
  const Kernel &kernel = *command.kernel;
  // Hold every argument's memory (in address order, as copies do) while the kernel runs.
  std::vector<std::shared_ptr<Mem>> mems;
  for (auto &weak : command.args) mems.push_back(weak.lock());
  std::vector<Mem *> order;
  for (auto &m : mems)
    if (m) order.push_back(m.get());
  std::sort(order.begin(), order.end(), std::less<Mem *>());
  order.erase(std::unique(order.begin(), order.end()), order.end());
  std::vector<std::shared_lock<std::shared_mutex>> holds;
  for (Mem *m : order) holds.emplace_back(m->use);
  std::vector<trn_hal_binding_t> bindings(mems.size());
  for (size_t i = 0; i < mems.size(); ++i) {
    if (!mems[i] || mems[i]->freed) {
      *why = "the memory bound to argument '" + kernel.program.args[i].name +
             "' was freed before the kernel ran" + kKeepAllocationsAlive;
      return TRN_ERROR_INVALID_HANDLE;
    }
    bindings[i] = {mems[i]->address + command.arg_offsets[i],
                   mems[i]->size - command.arg_offsets[i]};
    // What the kernel may write is committed (and marked written) like any other write, so a
    // full device store is an error here and the host reads back what the kernel wrote.
    if (kernel.program.args[i].direction != isa::ArgDirection::kIn)
      if (trn_result_t r = commit_range(*mems[i], command.arg_offsets[i], bindings[i].bytes);
          r != TRN_SUCCESS) {
        *why = "argument '" + kernel.program.args[i].name + "': " + last_detail();
        return r;
      }
  }
  trn_hal_run_result_t result{};
  std::vector<trn_hal_trace_record_t> trace;
  if (command.profile && command.profile->wants_trace()) {
    // One record per instruction, plus one per DMA transfer.
    trace.resize(2 * kernel.program.instruction_count() + 16);
    result.trace = trace.data();
    result.trace_capacity = trace.size();
  }
  const uint64_t start = monotonic_ns();
  const trn_hal_ops_t &ops = device_.driver->ops;
  trn_hal_error_t err{};
  const uint32_t physical_core = core_.index * device_.properties.logical_core_config;
  if (trn_result_t r =
          ops.kernel_run(device_.driver->instance, device_.driver_index, physical_core, kernel.hal,
                         bindings.data(), static_cast<uint32_t>(bindings.size()), &result, &err);
      r != TRN_SUCCESS) {
    *why = err.message;
    return r;
  }
  const uint64_t host_ns = monotonic_ns() - start;
  trace.resize(std::min<uint64_t>(result.trace_count, trace.size()));
  if (command.profile) command.profile->record(kernel.program, result, std::move(trace), host_ns);

  activity->kernel_ns = result.total_ps / 1000;
  for (uint32_t e = 0; e < TRN_ENGINE_COUNT; ++e) {
    activity->engine_instructions[e] = result.engine_instructions[e];
    activity->engine_busy_ns[e] = result.engine_busy_ps[e] / 1000;
  }
  activity->tensor_flops = result.flops;
  activity->dma_bytes = result.dma_bytes;
  uint64_t dma_ps = 0;
  for (uint64_t q : result.dma_busy_ps) dma_ps += q;
  activity->dma_busy_ns = dma_ps / 1000;
  if (result.status == TRN_HAL_RUN_OK) {
    activity->kernels_completed = 1;
    return TRN_SUCCESS;
  }
  // The kernel's own counters still count; the fault record says where it stopped.
  activity->kernels_faulted = 1;
  ops.core_account(device_.driver->instance, device_.driver_index, physical_core, activity);
  command.fault_engine = isa::engine_name(static_cast<isa::Engine>(result.engine));
  command.fault_opcode = result.opcode;
  command.fault_instruction = result.index;
  command.fault_line = result.source_line;
  const bool deadlock = result.status == TRN_HAL_RUN_DEADLOCK;
  std::string where = "stopped";
  if (!deadlock) {
    where = "faulted at " + command.fault_engine + "[" + std::to_string(result.index) + "] " +
            result.opcode;
    if (result.source_line) where += " (line " + std::to_string(result.source_line) + ")";
  }
  *why = "kernel '" + kernel.program.name + "' " + where + ": " + result.message;
  return deadlock ? TRN_ERROR_KERNEL_DEADLOCK : TRN_ERROR_KERNEL_FAULT;
}

uint64_t Queue::simulated_dma_ns(uint64_t bytes) const {
  const uint64_t per_engine = device_.properties.dma_engine_bytes_per_s
                                  ? device_.properties.dma_engine_bytes_per_s
                                  : 23'000'000'000ull;
  const double rate = static_cast<double>(per_engine) * dma_engines_ / 1e9;  // bytes per ns
  return kDmaFixedNs + static_cast<uint64_t>(static_cast<double>(bytes) / rate);
}

void Queue::retire(Command &command) {
  for (auto &signal : command.signals) signal.sem->signal(signal.value, false);
  end_uses(command);
  retired_.store(command.sequence, std::memory_order_release);
  timeline_->signal(command.sequence, false);
}

void Queue::cancel(Command &command, const std::string &reason) {
  const std::string text = std::string(command_name(command.kind)) + " #" +
                           std::to_string(command.sequence) + " was cancelled: " + reason;
  for (auto &signal : command.signals) signal.sem->fail(text);
  end_uses(command);
  {
    std::lock_guard lock(mu_);
    if (fault_.result != TRN_SUCCESS) ++fault_.cancelled;
  }
  retired_.store(command.sequence, std::memory_order_release);
  timeline_->fail(text);
}

void Queue::record_fault(const Command &command, trn_result_t result, const std::string &reason) {
  const std::string text = std::string(command_name(command.kind)) + " #" +
                           std::to_string(command.sequence) + " failed: " + reason;
  {
    std::lock_guard lock(mu_);
    fault_ = TRN_QUEUE_FAULT_INIT;
    fault_.result = result;
    fault_.sequence = command.sequence;
    std::snprintf(fault_.command, sizeof fault_.command, "%s", command_name(command.kind));
    std::snprintf(fault_.reason, sizeof fault_.reason, "%s", reason.c_str());
    fault_.destination_address = command.destination_address;
    fault_.source_address = command.source_address;
    fault_.size = command.size;
    if (command.kernel) {
      std::snprintf(fault_.kernel, sizeof fault_.kernel, "%s",
                    command.kernel->program.name.c_str());
      std::snprintf(fault_.engine, sizeof fault_.engine, "%s", command.fault_engine.c_str());
      std::snprintf(fault_.opcode, sizeof fault_.opcode, "%s", command.fault_opcode.c_str());
      fault_.instruction = command.fault_instruction;
      fault_.source_line = command.fault_line;
    }
  }
  in_error_.store(true, std::memory_order_release);
  for (auto &signal : command.signals) signal.sem->fail(text);
  end_uses(command);
  trn_hal_core_activity_t activity{};
  activity.commands_failed = 1;
  device_.driver->ops.core_account(device_.driver->instance, device_.driver_index,
                                   core_.index * device_.properties.logical_core_config, &activity);
  common::logger("runtime")->info("queue on core {} of device {}: {}", core_.index, device_.index,
                                  text);
  retired_.store(command.sequence, std::memory_order_release);
  timeline_->fail(text);
}

trn_result_t Queue::finish(uint64_t timeout_ns) {
  uint64_t target;
  {
    std::lock_guard lock(mu_);
    target = submitted_;
  }
  auto faulted = [&] {
    std::lock_guard lock(mu_);
    return fail(fault_.result == TRN_SUCCESS ? TRN_ERROR_CANCELLED : fault_.result,
                std::string("the queue is in an error state: ") + fault_.command + " #" +
                    std::to_string(fault_.sequence) + " failed: " + fault_.reason +
                    " (trn_queue_get_fault has the record; trn_queue_reset recovers)");
  };
  const uint64_t start = monotonic_ns();
  const uint64_t deadline = timeout_ns > UINT64_MAX - start ? UINT64_MAX : start + timeout_ns;
  // After a fault the worker cancels what follows in microseconds: let it finish, so the fault
  // record is complete and reset can follow.
  auto drained = [&] {
    while (retired_.load(std::memory_order_acquire) < target && monotonic_ns() < deadline) {
      struct timespec pause {
        0, 20'000
      };
      nanosleep(&pause, nullptr);
    }
    return faulted();
  };
  if (in_error_.load(std::memory_order_acquire)) return drained();
  const trn_result_t r = timeline_->wait(target, timeout_ns, nullptr);
  if (r == TRN_SUCCESS) return r;
  if (r == TRN_ERROR_CANCELLED || in_error_.load(std::memory_order_acquire)) return drained();
  return fail(TRN_TIMEOUT, "the queue completed " + std::to_string(timeline_->value()) + " of " +
                               std::to_string(target) +
                               " commands before the deadline; the next one may be waiting on "
                               "a semaphore nobody signals");
}

trn_result_t Queue::reset() {
  if (!in_error_.load(std::memory_order_acquire)) return TRN_SUCCESS;
  std::lock_guard lock(mu_);
  if (retired_.load(std::memory_order_acquire) < submitted_)
    return fail(TRN_ERROR_HANDLE_IN_USE,
                "cancelled commands are still draining: call trn_queue_finish, then reset again");
  fault_ = TRN_QUEUE_FAULT_INIT;
  in_error_.store(false, std::memory_order_release);
  timeline_->signal(submitted_, true);
  return TRN_SUCCESS;
}

void Queue::fault(trn_queue_fault_t *out) {
  std::lock_guard lock(mu_);
  *out = fault_;
}

void Queue::shutdown() {
  std::lock_guard guard(shutdown_mu_);
  if (!worker_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  doorbell_.fetch_add(1, std::memory_order_release);
  futex_wake_word(&doorbell_);
  worker_.join();
  Command command;
  while (next(&command)) cancel(command, "the queue was destroyed before the command ran");
}

}  // namespace trn::rt
