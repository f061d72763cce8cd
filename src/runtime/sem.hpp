// Timeline semaphores: a 64-bit value that only grows, waited on by spinning for a bounded budget
// and then sleeping on a futex; pollable file descriptors for event loops; cells in
// process memory, or in the device state when other processes share them.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "drivers/hal.h"
#include "trn/trn.h"

namespace trn::rt {

struct Device;

class Sem : public std::enable_shared_from_this<Sem> {
 public:
  // A semaphore in this process's memory.
  Sem(Device &device, uint64_t initial_value, bool queue_timeline);
  // A semaphore whose cell the driver keeps in shared memory (record, id identify it).
  Sem(Device &device, trn_hal_sem_cell_t *cell, uint32_t record, uint64_t id);
  ~Sem();
  Sem(const Sem &) = delete;
  Sem &operator=(const Sem &) = delete;

  uint64_t value() const;
  bool failed() const;
  // Raises the value to at least `value` (never lowers it), clears the failed mark if `clear`,
  // and wakes waiters and file descriptors it satisfies.
  void signal(uint64_t value, bool clear_failure);
  // Marks it failed: waiters for values not reached stop waiting with TRN_ERROR_CANCELLED.
  void fail(const std::string &reason);
  std::string failure_reason() const;
  // SUCCESS, TIMEOUT or CANCELLED (failed). `interrupt`, when set, is checked on every wake-up.
  trn_result_t wait(uint64_t value, uint64_t timeout_ns, const std::atomic<bool> *interrupt);
  // Wakes every sleeper without changing anything (they re-check their conditions).
  void poke();
  // A descriptor the caller owns that becomes readable at `value` or on failure (8 bytes, as an
  // eventfd reads) and reads end-of-file once the semaphore is destroyed. Watches whose caller
  // closed its descriptor are dropped on the next watch.
  trn_result_t watch(uint64_t value, int *fd);
  // Ends every watch: callers' descriptors read end-of-file. On destroy and teardown, since
  // per-thread lookup caches may keep the object itself alive a little longer.
  void close_watchers();

  Device &device() const { return device_; }
  bool shared() const { return local_ == nullptr; }
  bool queue_timeline() const { return queue_timeline_; }
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

  // Fires the watchers whose value was reached (or all, when failed).
  void notify_watchers();
  bool has_watchers() const;

 private:
  Device &device_;
  std::unique_ptr<trn_hal_sem_cell_t> local_;
  trn_hal_sem_cell_t *cell_;
  const bool queue_timeline_ = false;
  const uint32_t record_ = 0;
  const uint64_t id_ = 0;
  mutable std::mutex mu_;  // guards watchers_ and reason_
  struct Watcher {
    int fd;
    uint64_t value;
  };
  std::vector<Watcher> watchers_;  // our ends of the callers' descriptors
  void reap_abandoned_locked();
  std::string reason_;
  // Uses held by queue commands, and kDestroyed once destroyed.
  static constexpr uint32_t kDestroyed = 1u << 31;
  std::atomic<uint32_t> uses_{0};
};

// Counts and releases this process's handles of a shared semaphore; the driver's hold goes with
// the last one.
void hold_sem(Sem &sem);
void release_sem(Sem &sem);

// Polls a shared semaphore's watchers from a background thread while it has any.
void watch_shared(std::shared_ptr<Sem> sem);

// The spin budget before a waiter sleeps (TRN_SPIN_NS, default 20 us: the cost of one wake-up of
// a sleeping thread on these machines is ~30 us, spinning costs ~0.1 us per check). Read when
// the runtime starts; a malformed value fails it with TRN_ERROR_INVALID_CONFIG.
trn_result_t load_spin_budget(std::string *why);
uint64_t spin_budget_ns();
uint64_t monotonic_ns();

}  // namespace trn::rt
