#include "runtime/queue_work.hpp"

#include <algorithm>
#include <cstdio>

#include "runtime/error.hpp"
#include "runtime/kernel.hpp"
#include "runtime/memory.hpp"
#include "runtime/program.hpp"

namespace trn::rt {

namespace {

// What to do about memory freed before a command that uses it ran.
constexpr const char *kKeepAllocationsAlive =
    " (keep allocations alive until the commands that use them complete, or free them after "
    "waiting for the queue)";

// Every semaphore of a command's sync, waits first.
template <typename Each>
void for_each_sem(const Command &command, Each each) {
  for (auto &ref : command.waits) each(*ref.sem);
  for (auto &ref : command.signals) each(*ref.sem);
}

// Commands that use one allocation: whether it is the source (read from) or the destination.
bool uses_source(Command::Kind kind) {
  return kind == Command::Kind::read || kind == Command::Kind::write_file;
}

}  // namespace

trn_result_t take_sem_uses(const Command &command) {
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

void end_sem_uses(const Command &command) {
  for_each_sem(command, [](Sem &sem) { sem.end_use(); });
}

trn_result_t Queue::Work::take_memory(std::string *why) {
  // Enters each operand's use gate; one closed (freed meanwhile) fails the command. Entering
  // never blocks, so operands need no order (a free waits only for the users inside).
  auto enter = [&](Mem *m) {
    if (!m || !m->use.enter()) return false;
    entered.push_back(m);
    return true;
  };
  auto freed = [&](const char *operand, const char *what) {
    *why = std::string("the ") + operand + " memory was freed before the " + what + " ran" +
           kKeepAllocationsAlive;
  };
  switch (command.kind) {
    case Command::Kind::copy:
      if (!enter(command.source.get()))
        freed("source", "copy");
      else if (!enter(command.destination.get()))
        freed("destination", "copy");
      break;
    case Command::Kind::reduce:
      if (!enter(command.destination.get()))
        freed("destination", "reduce");
      else if (!enter(command.source.get()))
        freed("operand a", "reduce");
      else if (!enter(command.second.get()))
        freed("operand b", "reduce");
      break;
    case Command::Kind::memset:
    case Command::Kind::write:
    case Command::Kind::read:
    case Command::Kind::read_file:
    case Command::Kind::write_file: {
      const bool source = uses_source(command.kind);
      if (!enter((source ? command.source : command.destination).get()))
        freed(source ? "source" : "destination", command_name(command.kind));
      break;
    }
    case Command::Kind::launch:
      listed.reserve(command.args.size());
      for (const auto &mem : command.args) listed.push_back(mem.lock());
      for (size_t i = 0; i < listed.size() && why->empty(); ++i)
        if (command.kernel->args[i].kind != TRN_ARG_KIND_SCALAR && !enter(listed[i].get()))
          *why = std::string("the memory bound to argument '") + command.kernel->args[i].name +
                 "' was freed before the kernel ran" + kKeepAllocationsAlive;
      break;
    case Command::Kind::execute:
      listed.reserve(command.run->mems.size());
      for (const auto &mem : command.run->mems) listed.push_back(mem.lock());
      for (size_t i = 0; i < listed.size() && why->empty(); ++i)
        if (!enter(listed[i].get()))
          *why = "the memory bound to " + command.run->describe_mem(i) +
                 " was freed before the program ran" + kKeepAllocationsAlive;
      break;
    default: break;
  }
  // A host-side use after free, not a device fault.
  return why->empty() ? TRN_SUCCESS : TRN_ERROR_INVALID_HANDLE;
}

trn_result_t Queue::Work::before(void *user, trn_result_t status, trn_hal_error_t *err) {
  if (status != TRN_SUCCESS) return status;  // cancelled: `after` lets go
  auto &work = *static_cast<Work *>(user);
  std::string why;
  const trn_result_t r = work.take_memory(&why);
  if (r != TRN_SUCCESS && err) std::snprintf(err->message, sizeof err->message, "%s", why.c_str());
  return r;
}

trn_result_t Queue::Work::after(void *user, trn_result_t status, trn_hal_error_t *) {
  std::unique_ptr<Work> work(static_cast<Work *>(user));
  for (Mem *m : work->entered) m->use.leave();
  work->entered.clear();
  work->listed.clear();
  const Command &command = work->command;
  // The driver marks a launch that ran (fault or not) by setting its status.
  if (command.profile && work->result && work->result->status != kLaunchNotRun) {
    work->trace.resize(std::min<uint64_t>(work->result->trace_count, work->trace.size()));
    command.profile->record(*command.kernel, *work->result, std::move(work->trace));
  }
  if (status != TRN_SUCCESS) work->queue->note_failure(*work, status);
  end_sem_uses(command);
  return TRN_SUCCESS;
}

namespace {

thread_local const Queue *t_host_call_queue = nullptr;  // see Queue::running_host_call

}  // namespace

const Queue *Queue::running_host_call() {
  return t_host_call_queue;
}

trn_result_t Queue::Work::call_host_fn(void *user, trn_result_t status, trn_hal_error_t *) {
  auto &work = *static_cast<Work *>(user);
  const Queue *outer = t_host_call_queue;
  t_host_call_queue = work.queue;
  work.command.host_fn(work.command.host_user, status);
  t_host_call_queue = outer;
  return TRN_SUCCESS;
}

trn_result_t Queue::Work::release_freed(void *user, trn_result_t, trn_hal_error_t *) {
  // Freed whether the queue got here or not: its handle is gone, nobody else can.
  release_memory(*static_cast<Work *>(user)->command.freed);
  return TRN_SUCCESS;
}

}  // namespace trn::rt
