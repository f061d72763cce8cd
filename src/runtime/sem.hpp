// Timeline semaphores as the runtime keeps them: a handle's object around the driver's semaphore
// (which owns the value, the waits and the descriptors), plus the count of queue commands that
// use it, so that destroying one in use is refused rather than left to crash a queue.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "common/clock.hpp"
#include "drivers/hal.h"
#include "trn/trn.h"

namespace trn::rt {

struct Device;

class Sem {
 public:
  enum class Role { user, queue_timeline };
  // A new semaphore of the device at `initial`; `shareable` ones can be exported.
  static trn_result_t create(Device &device, uint64_t initial, bool shareable, Role role,
                             std::shared_ptr<Sem> *out);
  // This process's hold on a shareable semaphore another process (or this one) exported.
  static trn_result_t import(Device &device, uint32_t record, uint64_t id,
                             std::shared_ptr<Sem> *out, std::string *why);
  ~Sem();  // lets go of the driver's hold (the last reference: see ObjectTable::remove)
  Sem(const Sem &) = delete;
  Sem &operator=(const Sem &) = delete;

  uint64_t value() const;
  bool failed() const;
  // The value (into *value, if not null) and whether it failed, in one look.
  bool query_value(uint64_t *value) const;
  std::string failure_reason() const;
  // Raises the value to at least `value` (never lowers it); `clear_failure` clears the failed
  // mark.
  void signal(uint64_t value, bool clear_failure);
  // The same, refused (TRN_ERROR_INVALID_ARGUMENT, with the current value in *current, nothing
  // changed) when `value` is below the current value.
  trn_result_t raise(uint64_t value, bool clear_failure, uint64_t *current);
  // Marks it failed: waiters for values not reached get TRN_ERROR_CANCELLED with `reason`.
  void mark_failed(const std::string &reason);
  // SUCCESS, TIMEOUT or CANCELLED (failed).
  trn_result_t wait(uint64_t value, uint64_t timeout_ns);
  // A descriptor the caller owns that becomes readable at `value` or on failure.
  trn_result_t watch(uint64_t value, int *fd);
  // Ends every watch now (destroy, queue destroy, shutdown): another thread's lookup cache may
  // keep the object itself, and the driver's hold with it, a little longer.
  void close_watchers();

  Device &device() const { return device_; }
  trn_hal_sem_t *hal() const { return hal_; }
  bool shared() const { return shared_; }
  bool queue_timeline() const { return role_ == Role::queue_timeline; }
  uint32_t record() const { return record_; }
  uint64_t id() const { return id_; }
  // Queue commands that reference it (waits or signals not yet done) each hold a use, taken at
  // submission. False once the semaphore is destroyed: no command can take it up after that.
  bool try_use();
  void end_use();
  // Ends its use by queue commands for good: TRN_SUCCESS, TRN_ERROR_HANDLE_IN_USE while commands
  // hold uses (nothing changes), TRN_ERROR_INVALID_HANDLE if it was destroyed already. The check
  // and the end are one atomic step, so a racing submission either holds a use first or fails.
  trn_result_t destroy();

  Sem(Device &device, trn_hal_sem_t *hal, bool shared, Role role, uint32_t record, uint64_t id);

 private:
  // The driver's view of the semaphore (value, time, failure and its reason).
  void read_state(trn_hal_sem_state_t *state) const;

  Device &device_;
  trn_hal_sem_t *const hal_;
  const bool shared_;
  const Role role_;
  const uint32_t record_;
  const uint64_t id_;
  // Uses held by queue commands, and kDestroyed once destroyed.
  static constexpr uint32_t kDestroyed = 1u << 31;
  std::atomic<uint32_t> uses_{0};
};

using common::monotonic_ns;

}  // namespace trn::rt
