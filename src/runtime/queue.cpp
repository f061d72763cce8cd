#include "runtime/queue.hpp"

#include <time.h>

#include <cstdio>
#include <cstring>
#include <utility>

#include "common/log.hpp"
#include "isa/opcodes.hpp"
#include "runtime/capture.hpp"
#include "runtime/driver_error.hpp"
#include "runtime/error.hpp"
#include "runtime/kernel.hpp"
#include "runtime/memory.hpp"
#include "runtime/program.hpp"
#include "runtime/queue_work.hpp"
#include "runtime/session.hpp"

namespace trn::rt {

// Commands go to the driver in arrays: the command's layout is part of the driver interface, and
// a new command must fit the union as it is (drivers of every 2.x minor read these arrays).
static_assert(sizeof(trn_hal_command_t) == 40, "trn_hal_command_t changed size");

namespace {

const trn_hal_ops_t &ops(const Device &device) {
  return device.driver->ops;
}

// Most command buffers are a few commands: built on the stack.
constexpr uint32_t kInlineCommands = 12;

trn_hal_command_t sem_command(uint32_t kind, const SemRef &ref) {
  trn_hal_command_t c{};
  c.kind = kind;
  c.u.sem.sem = ref.sem->hal();
  c.u.sem.value = ref.value;
  return c;
}

// `flags`: TRN_HAL_HOST_CALL_BRIEF for the runtime's own bookkeeping (a waiter may run it).
trn_hal_command_t host_call(trn_hal_host_fn fn, void *user, uint32_t flags) {
  trn_hal_command_t c{};
  c.kind = TRN_HAL_COMMAND_HOST_CALL;
  c.u.host_call.fn = fn;
  c.u.host_call.user = user;
  c.u.host_call.flags = flags;
  return c;
}

// The driver command of a command's one operation (every kind but execute). A launch's trace
// buffer and result live in its Work.
trn_hal_command_t operation_of(const Command &c, Queue::Work &work) {
  trn_hal_command_t op{};
  switch (c.kind) {
    case Command::Kind::copy:
      op.kind = TRN_HAL_COMMAND_COPY;
      op.u.copy.destination = c.destination_address;
      op.u.copy.source = c.source_address;
      op.u.copy.bytes = c.size;
      break;
    case Command::Kind::memset:
      op.kind = TRN_HAL_COMMAND_MEMSET;
      op.u.memset.destination = c.destination_address;
      op.u.memset.bytes = c.size;
      op.u.memset.value = c.value;
      break;
    case Command::Kind::launch: {
      work.result = std::make_unique<trn_hal_run_result_t>(Queue::Work::not_run());
      if (c.profile && c.profile->wants_trace()) {
        // One record per instruction, plus one per DMA transfer.
        work.trace.resize(2 * c.kernel->instruction_count + 16);
        work.result->trace = work.trace.data();
        work.result->trace_capacity = work.trace.size();
      }
      op.kind = TRN_HAL_COMMAND_LAUNCH;
      op.u.launch.kernel = c.kernel->hal;
      op.u.launch.args = c.bindings.data();
      op.u.launch.arg_count = static_cast<uint32_t>(c.bindings.size());
      op.u.launch.result = work.result.get();
      break;
    }
    case Command::Kind::write:
      op.kind = TRN_HAL_COMMAND_COPY;
      op.u.copy.destination = c.destination_address;
      op.u.copy.source = reinterpret_cast<uintptr_t>(c.host);
      op.u.copy.bytes = c.size;
      op.u.copy.flags = TRN_HAL_COPY_HOST_SOURCE;
      break;
    case Command::Kind::read:
      op.kind = TRN_HAL_COMMAND_COPY;
      op.u.copy.destination = reinterpret_cast<uintptr_t>(c.host);
      op.u.copy.source = c.source_address;
      op.u.copy.bytes = c.size;
      op.u.copy.flags = TRN_HAL_COPY_HOST_DESTINATION;
      break;
    case Command::Kind::read_file:
    case Command::Kind::write_file: {
      const bool read = c.kind == Command::Kind::read_file;
      op.kind = read ? TRN_HAL_COMMAND_FILE_READ : TRN_HAL_COMMAND_FILE_WRITE;
      op.u.file.fd = c.fd;
      op.u.file.file_offset = c.file_offset;
      op.u.file.device_address = read ? c.destination_address : c.source_address;
      op.u.file.bytes = c.size;
      break;
    }
    case Command::Kind::reduce:
      op.kind = TRN_HAL_COMMAND_REDUCE;
      op.u.reduce.destination = c.destination_address;
      op.u.reduce.a = c.source_address;
      op.u.reduce.b = c.second_address;
      op.u.reduce.count = static_cast<uint32_t>(c.size / trn_dtype_size(c.dtype));
      op.u.reduce.dtype = static_cast<uint16_t>(c.dtype);
      op.u.reduce.op = static_cast<uint16_t>(c.reduce_op);
      break;
    case Command::Kind::timestamp:
      op.kind = TRN_HAL_COMMAND_TIMESTAMP;
      op.u.timestamp.host = c.host;
      break;
    case Command::Kind::host_call: op = host_call(&Queue::Work::call_host_fn, &work, 0); break;
    case Command::Kind::free: op = host_call(&Queue::Work::release_freed, &work, 0); break;
    case Command::Kind::execute:  // many operations: ProgramRun::write_commands
    case Command::Kind::barrier: break;
  }
  return op;
}

}  // namespace

const char *command_name(Command::Kind kind) {
  switch (kind) {
    case Command::Kind::copy: return "copy";
    case Command::Kind::memset: return "memset";
    case Command::Kind::barrier: return "barrier";
    case Command::Kind::launch: return "launch";
    case Command::Kind::write: return "write";
    case Command::Kind::read: return "read";
    case Command::Kind::timestamp: return "timestamp";
    case Command::Kind::host_call: return "host call";
    case Command::Kind::free: return "free";
    case Command::Kind::read_file: return "read file";
    case Command::Kind::write_file: return "write file";
    case Command::Kind::execute: return "execute";
    case Command::Kind::reduce: return "reduce";
  }
  return "unknown";
}

bool uses_memory(Command::Kind kind) {
  switch (kind) {
    case Command::Kind::copy:
    case Command::Kind::memset:
    case Command::Kind::launch:
    case Command::Kind::write:
    case Command::Kind::read:
    case Command::Kind::read_file:
    case Command::Kind::write_file:
    case Command::Kind::execute:
    case Command::Kind::reduce: return true;
    default: return false;
  }
}

trn_result_t Queue::create(Device &device, Core &core, trn_queue_kind_t kind, uint32_t capacity,
                           uint32_t dma_engines, uint32_t priority, std::shared_ptr<Queue> *out) {
  std::shared_ptr<Sem> timeline;
  if (trn_result_t r = Sem::create(device, 0, false, Sem::Role::queue_timeline, &timeline);
      r != TRN_SUCCESS)
    return r;
  trn_hal_queue_t *hal = nullptr;
  DriverError err;
  if (trn_result_t r = ops(device).queue_create(
          device.driver->instance, device.driver_index, core.layout.first_physical_core,
          core.layout.physical_core_count,
          kind == TRN_QUEUE_KIND_COMPUTE ? TRN_HAL_QUEUE_COMPUTE : TRN_HAL_QUEUE_COPY, capacity,
          dma_engines, &hal, &err);
      r != TRN_SUCCESS)
    return fail(r, err.message);
  auto queue = std::make_shared<Queue>(device, core, kind, capacity, std::move(timeline), hal);
  if (priority != 0 && priority != TRN_QUEUE_PRIORITY_NORMAL)
    if (trn_result_t r = queue->set_priority(priority); r != TRN_SUCCESS)
      return r;  // ~Queue stops it
  *out = std::move(queue);
  return TRN_SUCCESS;
}

namespace {

// A fault inside an execution: which kernel (the driver reports its object) and which step of
// which program, appended to the reason.
void describe_program_fault(const Queue::FaultOperands &operands, const trn_hal_queue_fault_t &f,
                            trn_queue_fault_t *out) {
  std::string where = " (";
  if (auto program = operands.program.lock()) {
    if (f.kernel)
      std::snprintf(out->kernel, sizeof out->kernel, "%s",
                    kernel_name_of(*program, f.kernel).c_str());
    const auto &steps = program->image.steps;
    const uint32_t step = f.command_index - operands.first_step_command;
    if (f.command_index >= operands.first_step_command && step < steps.size())
      where +=
          "step " + std::to_string(step) + ", a " + isa::step_kind_name(steps[step].kind) + ", ";
  }
  where += "in program '" + operands.program_name + "')";
  const size_t used = std::strlen(out->reason);
  std::snprintf(out->reason + used, sizeof out->reason - used, "%s", where.c_str());
}

}  // namespace

Queue::Queue(Device &device, Core &core, trn_queue_kind_t kind, uint32_t capacity,
             std::shared_ptr<Sem> timeline, trn_hal_queue_t *hal)
    : device_(device),
      core_(core),
      kind_(kind),
      capacity_(capacity),
      timeline_(std::move(timeline)),
      hal_(hal) {}

Queue::~Queue() {
  shutdown();
}

Queue::SemUses::~SemUses() {
  if (held) end_sem_uses(work ? work->command : command);
}

trn_result_t Queue::submit(Command &&command, uint64_t *sequence) {
  if (trn_result_t r = take_sem_uses(command); r != TRN_SUCCESS) return r;
  // Commands with memory, kernels or semaphores keep them until they retire; a barrier without
  // sync references nothing and costs no allocation.
  std::unique_ptr<Work> work;
  // The semaphores' uses go back on every way out but a submission (then the call after the
  // command returns them), a std::bad_alloc included: one kept would make the semaphore
  // impossible to destroy. Declared after `work`, which it reads when it ends.
  SemUses uses{work, command};
  const bool has_operation = command.kind != Command::Kind::barrier;
  if (has_operation || !command.waits.empty() || !command.signals.empty()) {
    work = std::make_unique<Work>();
    work->queue = this;
    work->command = std::move(command);
  }
  const Command &c = work ? work->command : command;

  const bool holds_memory = uses_memory(c.kind);
  // A program's execution is one command of many operations: its steps.
  const uint32_t operations =
      c.kind == Command::Kind::execute ? c.run->command_count() : (has_operation ? 1 : 0);
  const uint32_t count = static_cast<uint32_t>(c.waits.size() + c.signals.size()) + operations +
                         (holds_memory ? 1 : 0) + 2;
  trn_hal_command_t inline_commands[kInlineCommands];
  std::vector<trn_hal_command_t> heap_commands;
  trn_hal_command_t *commands = inline_commands;
  if (count > kInlineCommands) {
    heap_commands.resize(count);
    commands = heap_commands.data();
  }
  uint32_t n = 0;
  for (const SemRef &wait : c.waits) commands[n++] = sem_command(TRN_HAL_COMMAND_SEM_WAIT, wait);
  if (has_operation) {
    if (holds_memory) commands[n++] = host_call(&Work::before, work.get(), TRN_HAL_HOST_CALL_BRIEF);
    if (c.kind == Command::Kind::execute) {
      c.run->write_commands(commands + n);
      n += operations;
    } else {
      // The call before checks that the memory was not freed by the time the operation runs.
      commands[n++] = operation_of(c, *work);
    }
  }
  for (const SemRef &signal : c.signals)
    commands[n++] = sem_command(TRN_HAL_COMMAND_SEM_SIGNAL, signal);
  if (work) commands[n++] = host_call(&Work::after, work.get(), TRN_HAL_HOST_CALL_BRIEF);
  const size_t timeline_slot = n++;

  std::lock_guard lock(mu_);
  if (stopped_.load(std::memory_order_acquire))
    return fail(TRN_ERROR_INVALID_HANDLE, "the queue is being destroyed");
  const uint64_t next = submitted_ + 1;
  commands[timeline_slot] = sem_command(TRN_HAL_COMMAND_SEM_SIGNAL, {timeline_, next});
  if (work) work->sequence = next;
  if (trn_result_t r = submit_locked(commands, n, c.kind, next); r != TRN_SUCCESS) return r;
  uses.keep();     // the call after ends them
  work.release();  // and frees it
  submitted_ = next;
  if (sequence) *sequence = next;
  return TRN_SUCCESS;
}

trn_result_t Queue::submit_locked(const trn_hal_command_t *commands, uint32_t count,
                                  Command::Kind kind, uint64_t sequence) {
  trn_hal_submission_t submission{};
  submission.commands = commands;
  submission.command_count = count;
  submission.label = command_name(kind);
  submission.tag = sequence;
  DriverError err;
  const trn_result_t r = ops(device_).queue_submit(hal_, &submission, &err);
  if (r == TRN_ERROR_QUEUE_FULL)
    return fail(r, "the queue has " + std::to_string(capacity_) +
                       " commands in flight (its capacity): wait for some to complete "
                       "(trn_sem_wait on the queue's semaphore, or trn_queue_finish), then submit "
                       "again");
  if (r != TRN_SUCCESS) return fail(r, std::string(ops(device_).name) + " driver: " + err.message);
  return TRN_SUCCESS;
}

void Queue::note_failure(const Work &work, trn_result_t status) {
  // Cancellations by the queue's destruction are no fault of the commands.
  if (stopped_.load(std::memory_order_acquire)) return;
  const Command &c = work.command;
  {
    std::lock_guard lock(fault_mu_);
    if (operands_.sequence != 0) return;  // cancelled after the one that failed
    operands_.sequence = work.sequence;
    operands_.destination_address = c.destination_address;
    operands_.source_address = c.source_address;
    operands_.size = c.size;
    if (c.kernel) operands_.kernel = c.kernel->name();
    if (c.run) {
      operands_.program = c.run->program;
      operands_.program_name = c.run->program->image.name;
      operands_.first_step_command = static_cast<uint32_t>(c.waits.size()) + 1;
    }
  }
  common::logger("runtime")->info(
      "queue on core {} of device {}: {} #{} failed with {} (trn_queue_get_fault has the record)",
      core_.index, device_.index, command_name(c.kind), work.sequence, trn_result_name(status));
}

void Queue::status(trn_hal_queue_status_t *out) const {
  std::shared_lock lock(hal_mu_);
  *out = trn_hal_queue_status_t{};
  if (hal_) ops(device_).queue_status(hal_, out);
}

trn_result_t Queue::faulted_error(const trn_hal_queue_fault_t &fault) const {
  return fail(fault.result == TRN_SUCCESS ? TRN_ERROR_CANCELLED : fault.result,
              std::string("the queue is in an error state: ") +
                  (fault.label ? fault.label : "command") + " #" + std::to_string(fault.tag) +
                  " failed: " + fault.reason +
                  " (trn_queue_get_fault has the record; trn_queue_reset recovers)");
}

trn_result_t Queue::finish(uint64_t timeout_ns) {
  uint64_t target;
  {
    std::lock_guard lock(mu_);
    target = submitted_;
  }
  const uint64_t deadline = common::deadline_after(timeout_ns);
  auto state = std::make_unique<trn_hal_queue_status_t>();
  status(state.get());
  // After a fault the driver cancels what follows in microseconds: let it, so that the fault
  // record is complete and reset can follow.
  auto drained = [&] {
    while (state->retired < target && monotonic_ns() < deadline) {
      struct timespec pause {
        0, 20'000
      };
      nanosleep(&pause, nullptr);
      status(state.get());
    }
    return faulted_error(state->fault);
  };
  if (state->fault.result != TRN_SUCCESS) return drained();
  const trn_result_t r = timeline_->wait(target, timeout_ns);
  if (r == TRN_SUCCESS) return r;
  status(state.get());
  if (r == TRN_ERROR_CANCELLED || state->fault.result != TRN_SUCCESS) return drained();
  return fail(TRN_TIMEOUT, "the queue completed " + std::to_string(timeline_->value()) + " of " +
                               std::to_string(target) +
                               " commands before the deadline; the next one may be waiting on "
                               "a semaphore nobody signals");
}

trn_result_t Queue::reset() {
  // The status is read under the submission lock: a reset that read the fault before another
  // thread's reset and submission would otherwise complete that submission, never run.
  std::lock_guard lock(mu_);
  auto state = std::make_unique<trn_hal_queue_status_t>();
  status(state.get());
  if (state->fault.result == TRN_SUCCESS) return TRN_SUCCESS;
  DriverError err;
  trn_result_t r = TRN_ERROR_INVALID_HANDLE;
  {
    std::shared_lock hal_lock(hal_mu_);
    if (hal_) r = ops(device_).queue_reset(hal_, &err);
  }
  if (r == TRN_ERROR_HANDLE_IN_USE)
    return fail(r,
                "cancelled commands are still draining: call trn_queue_finish, then reset again");
  if (r != TRN_SUCCESS) return fail(r, err.message[0] ? err.message : "the queue was destroyed");
  {
    std::lock_guard fault_lock(fault_mu_);
    operands_ = FaultOperands{};
  }
  timeline_->signal(submitted_, true);
  return TRN_SUCCESS;
}

void Queue::fault(trn_queue_fault_t *out) {
  auto state = std::make_unique<trn_hal_queue_status_t>();
  status(state.get());
  const trn_hal_queue_fault_t &f = state->fault;
  if (f.result == TRN_SUCCESS) return;
  out->result = f.result;
  out->sequence = f.tag;
  std::snprintf(out->command, sizeof out->command, "%s", f.label ? f.label : "");
  std::snprintf(out->reason, sizeof out->reason, "%s", f.reason);
  out->cancelled = f.cancelled;
  out->destination_address = f.destination_address;
  out->source_address = f.source_address;
  out->size = f.bytes;
  {
    // The runtime knows the operands of every command, also of one that failed before its
    // operation ran (memory freed meanwhile).
    std::lock_guard lock(fault_mu_);
    if (operands_.sequence == f.tag && !operands_.program_name.empty()) {
      // An execution: the driver's record has the failed step's operands.
      describe_program_fault(operands_, f, out);
    } else if (operands_.sequence == f.tag) {
      out->destination_address = operands_.destination_address;
      out->source_address = operands_.source_address;
      out->size = operands_.size;
      std::snprintf(out->kernel, sizeof out->kernel, "%s", operands_.kernel.c_str());
    }
  }
  if (f.kernel) {
    std::snprintf(out->engine, sizeof out->engine, "%s",
                  isa::engine_name(static_cast<isa::Engine>(f.engine)));
    std::snprintf(out->opcode, sizeof out->opcode, "%s", f.opcode);
    out->instruction = f.instruction;
    out->source_line = f.source_line;
  }
}

trn_result_t Queue::begin_capture() {
  std::lock_guard lock(capture_mu_);
  if (capture_)
    return fail(TRN_ERROR_INVALID_ARGUMENT,
                "the queue is capturing already: end that capture (trn_queue_end_capture) first");
  capture_ = std::make_unique<Capture>();
  capturing_.store(true, std::memory_order_release);
  return TRN_SUCCESS;
}

trn_result_t Queue::record(const Command &command) {
  std::lock_guard lock(capture_mu_);
  if (!capture_)  // ended between the caller's check and now: the command was not run either
    return fail(TRN_ERROR_INVALID_ARGUMENT,
                "the queue's capture ended while this command was issued: issue it again");
  return capture_->record(command);
}

trn_result_t Queue::end_capture(std::shared_ptr<Program> *out) {
  std::unique_ptr<Capture> capture;
  {
    std::lock_guard lock(capture_mu_);
    if (!capture_)
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  "the queue is not capturing: call trn_queue_begin_capture first");
    capture = std::move(capture_);
    capturing_.store(false, std::memory_order_release);
  }
  return capture->finish(*core_.device, out);
}

trn_result_t Queue::set_priority(uint32_t priority) {
  const uint32_t hal_priority = priority == TRN_QUEUE_PRIORITY_LOW ? TRN_HAL_QUEUE_PRIORITY_LOW
                                : priority == TRN_QUEUE_PRIORITY_HIGH
                                    ? TRN_HAL_QUEUE_PRIORITY_HIGH
                                    : TRN_HAL_QUEUE_PRIORITY_NORMAL;
  std::shared_lock lock(hal_mu_);
  if (!hal_) return fail(TRN_ERROR_INVALID_HANDLE, "the queue was destroyed");
  DriverError err;
  if (trn_result_t r = ops(device_).queue_set_priority(hal_, hal_priority, &err); r != TRN_SUCCESS)
    return fail(r, std::string(ops(device_).name) + " driver: " + err.message);
  return TRN_SUCCESS;
}

void Queue::shutdown() {
  std::lock_guard guard(shutdown_mu_);
  {
    std::lock_guard lock(mu_);  // no submission is half-way through
    stopped_.store(true, std::memory_order_release);
  }
  trn_hal_queue_t *hal = nullptr;
  {
    std::unique_lock lock(hal_mu_);  // after every call that reads the driver queue's status
    hal = std::exchange(hal_, nullptr);
  }
  // Not under the lock: destroying waits for the command running, which may be a host function
  // whose calls wait for another queue's host function reading this queue's status.
  if (hal) ops(device_).queue_destroy(device_.driver->instance, hal);
}

}  // namespace trn::rt
