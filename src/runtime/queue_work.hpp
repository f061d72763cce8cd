// What a submitted command holds until it retires, and the two host calls its command buffer
// makes: one just before the operation (takes the memory it uses, or fails the command if that
// memory was freed meanwhile) and one after it (lets everything go, records the profile).
#pragma once

#include <boost/container/small_vector.hpp>
#include <memory>
#include <vector>

#include "drivers/hal.h"
#include "runtime/queue.hpp"

namespace trn::rt {

struct Queue::Work {
  static constexpr uint32_t kLaunchNotRun = UINT32_MAX;  // result.status until the driver sets it
  Queue *queue = nullptr;
  uint64_t sequence = 0;
  Command command;
  // A launch's or an execution's memory, locked by the call before.
  std::vector<std::shared_ptr<Mem>> listed;
  // The allocations whose use gate the call before entered (room for a reduction's operands
  // without allocating); the call after leaves them.
  boost::container::small_vector<Mem *, 3> entered;
  // A launch's, filled by the driver; only launches have one (it is over a kilobyte, and every
  // other command would clear it for nothing).
  std::unique_ptr<trn_hal_run_result_t> result;
  std::vector<trn_hal_trace_record_t> trace;

  // HOST_CALL functions (user = the Work).
  static trn_result_t before(void *user, trn_result_t status, trn_hal_error_t *err);
  static trn_result_t after(void *user, trn_result_t status, trn_hal_error_t *err);
  // The operation of a host_call (the caller's function) and of a free (the release).
  static trn_result_t call_host_fn(void *user, trn_result_t status, trn_hal_error_t *err);
  static trn_result_t release_freed(void *user, trn_result_t status, trn_hal_error_t *err);
  static trn_hal_run_result_t not_run() {
    trn_hal_run_result_t r{};
    r.status = kLaunchNotRun;
    return r;
  }

 private:
  trn_result_t take_memory(std::string *why);
};

// Takes a use of every semaphore of the command's sync, all or none (a destroyed one fails the
// submission with TRN_ERROR_INVALID_HANDLE); the call after ends them.
trn_result_t take_sem_uses(const Command &command);
void end_sem_uses(const Command &command);

}  // namespace trn::rt
