#include "sim/semaphore.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "common/thread_name.hpp"
#include "sim/sim_instance.hpp"
#include "sim/sim_queue.hpp"
#include "sim/wait_primitives.hpp"

namespace trn::sim {

namespace {

// A shared cell may be signalled by a process that dies between raising the value and waking
// us: sleep in slices so that costs at most one.
constexpr uint64_t kSharedSliceNs = 100'000'000;
// An interruptible wait (a queue worker) re-checks its flag this often.
constexpr uint64_t kInterruptSliceNs = 10'000'000;

}  // namespace

SemCore::SemCore(DeviceRuntime &device, uint64_t initial, uint64_t spin_ns)
    : device_(device),
      local_(std::make_unique<LocalCell>()),
      cell_(&local_->cell),
      spin_ns_(spin_ns) {
  cell_->value.store(initial, std::memory_order_relaxed);
  cell_->device_ns.store(device.time_ns(), std::memory_order_relaxed);
  cell_->wake_at.store(kNoWakeAt, std::memory_order_relaxed);
}

SemCore::SemCore(DeviceRuntime &device, SharedSemCell *cell, uint32_t record, uint64_t id,
                 uint64_t spin_ns)
    : device_(device), cell_(cell), record_(record), id_(id), spin_ns_(spin_ns) {}

SemCore::~SemCore() {
  {
    std::lock_guard lock(mu_);
    for (const Watcher &w : watchers_) close(w.fd);  // the caller's end reads end-of-file
    watchers_.clear();
  }
  if (shared()) {
    std::string why;
    if (device_.let_go_shared_sem(record_, id_, &why) != TRN_SUCCESS)
      std::fprintf(stderr, "trn sim driver: letting go of a shared semaphore: %s\n", why.c_str());
  }
}

std::string SemCore::failure_reason() const {
  std::lock_guard lock(mu_);
  if (!reason_.empty()) return reason_;
  return shared() ? "another process failed it (the queue that was to signal it failed)"
                  : "the queue that was to signal it failed";
}

void SemCore::query(trn_hal_sem_state_t *state) const {
  state->value = value();
  state->device_ns = device_ns();
  state->failed = failed() ? 1u : 0u;
  state->reserved = 0;
  state->reason[0] = '\0';  // a query of a healthy semaphore takes no lock and formats nothing
  if (state->failed)
    std::snprintf(state->reason, sizeof state->reason, "%s", failure_reason().c_str());
}

void SemCore::wake_sleepers(bool any) {
  // Sequentially consistent with a sleeper's increment of `sleepers`, its registration in
  // `wake_at` and its re-check of the value: either it sees our change, or we see it and wake it.
  if (cell_->sleepers.load(std::memory_order_seq_cst) == 0) return;
  // A queue's timeline is signalled once per buffer while its host waits for a later one: a
  // value below every sleeper's target wakes nobody (each wake is a system call here and a
  // context switch there).
  if (!any &&
      cell_->value.load(std::memory_order_seq_cst) < cell_->wake_at.load(std::memory_order_seq_cst))
    return;
  // Everyone wakes and re-registers; the bump below makes a registration this reset drops
  // (made before the sleeper's futex_wait) fail that wait.
  cell_->wake_at.store(kNoWakeAt, std::memory_order_seq_cst);
  cell_->wake.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(&cell_->wake, INT32_MAX, shared() ? FutexScope::shared : FutexScope::process_private);
}

void SemCore::lower_wake_at(uint64_t value) {
  const uint32_t target = static_cast<uint32_t>(std::min<uint64_t>(value, kNoWakeAt - 1));
  uint32_t at = cell_->wake_at.load(std::memory_order_seq_cst);
  while (target < at &&
         !cell_->wake_at.compare_exchange_weak(at, target, std::memory_order_seq_cst)) {
  }
}

void SemCore::record_time(uint64_t value, uint64_t device_ns) {
  // A seqlock whose sequence word is the value itself (no fences: the ordering comes from the
  // operations, as in seqlock.hpp, which ThreadSanitizer also understands). Two signallers take
  // the same entry only after kSignalTimes others in between (then a time may pair with the
  // other's value: a simulated time off, never a value).
  SignalTime &t =
      cell_->times[cell_->times_next.fetch_add(1, std::memory_order_relaxed) % kSignalTimes];
  // Release: the emptied entry is seen before the new time (a reader that read the new time
  // re-reads the value as empty or new, never as the old one it paired with the old time).
  t.value.store(0, std::memory_order_relaxed);
  t.device_ns.store(device_ns, std::memory_order_release);
  t.value.store(value, std::memory_order_release);
}

bool SemCore::reached(uint64_t value) const {
  if (seen_value_.load(std::memory_order_acquire) >= value) return true;
  const uint64_t now = cell_->value.load(std::memory_order_seq_cst);
  if (now < value) return false;
  const uint64_t ns = device_ns();  // no earlier than the signal that made `now`
  uint64_t kept = seen_ns_.load(std::memory_order_relaxed);
  while (kept < ns && !seen_ns_.compare_exchange_weak(kept, ns, std::memory_order_relaxed)) {
  }
  // Another thread may store a lower value after this one: the time stays the highest seen, so
  // any value here pairs with a time no earlier than its signal; only the shortcut is lost.
  if (seen_value_.load(std::memory_order_relaxed) < now)
    seen_value_.store(now, std::memory_order_release);
  return true;
}

uint64_t SemCore::reached_ns(uint64_t value, uint64_t not_before) const {
  // A value seen before, with a time no later than the caller's clock: the signal that reached
  // it was no later either, and the caller keeps its clock (the cell's line is not read).
  if (seen_value_.load(std::memory_order_acquire) >= value) {
    const uint64_t seen_ns = seen_ns_.load(std::memory_order_relaxed);
    if (seen_ns <= not_before) return seen_ns;
  }
  const uint64_t latest = device_ns();
  if (latest <= not_before) return latest;
  uint64_t earliest = UINT64_MAX;
  for (const SignalTime &t : cell_->times) {
    const uint64_t v = t.value.load(std::memory_order_acquire);
    // Acquire: the value's re-check below cannot move above it.
    const uint64_t ns = t.device_ns.load(std::memory_order_acquire);
    if (v != 0 && v >= value && t.value.load(std::memory_order_relaxed) == v)
      earliest = std::min(earliest, ns);
  }
  // No signal kept reached it (the initial value did, or more than kSignalTimes came since):
  // the latest time, as late as it can be.
  return std::min(earliest, latest);
}

void SemCore::signal(uint64_t value, uint64_t device_ns, bool clear_failure) {
  raise(value, device_ns, clear_failure, nullptr);
}

bool SemCore::raise(uint64_t value, uint64_t device_ns, bool clear_failure, uint64_t *current) {
  prefetch_for_write(&cell_->value);
  uint64_t seen = cell_->value.load(std::memory_order_relaxed);
  if (current != nullptr && seen > value) {
    *current = seen;
    return false;
  }
  bool raised = false;
  // Kept before the value rises: a waiter that sees the value finds its time.
  if (seen < value) record_time(value, device_ns);
  while (seen < value) {
    // The time first, so whoever sees the value sees at least its time.
    uint64_t ns = cell_->device_ns.load(std::memory_order_relaxed);
    while (ns < device_ns &&
           !cell_->device_ns.compare_exchange_weak(ns, device_ns, std::memory_order_relaxed)) {
    }
    if (cell_->value.compare_exchange_weak(seen, value, std::memory_order_seq_cst,
                                           std::memory_order_relaxed)) {
      raised = true;
      break;
    }
  }
  // Not raised: the value was there already, or another signaller went past it meanwhile (its
  // signal is the later one, so this one is not refused).
  if (clear_failure && failed()) {
    std::lock_guard lock(mu_);
    reason_.clear();
    cell_->failed.store(0, std::memory_order_seq_cst);
  }
  if (!raised && !clear_failure) return true;
  wake_sleepers(!raised);  // a cleared failure concerns every sleeper
  if (watcher_count_.load(std::memory_order_seq_cst) != 0) notify_watchers();
  return true;
}

void SemCore::fail(const std::string &reason) {
  {
    std::lock_guard lock(mu_);
    reason_ = reason;
  }
  cell_->failed.store(1, std::memory_order_seq_cst);
  wake_sleepers(true);
  if (watcher_count_.load(std::memory_order_seq_cst) != 0) notify_watchers();
}

namespace {
constexpr uint32_t kSpinsBeforeClock = 32;
}  // namespace

trn_result_t SemCore::wait(uint64_t value, uint64_t timeout_ns,
                           const std::atomic<uint32_t> *interrupt, SpinStyle style,
                           YieldHistory *history) {
  auto reached = [&] { return this->reached(value); };
  auto stopped = [&] {
    return failed() || (interrupt && interrupt->load(std::memory_order_acquire) != 0);
  };
  if (reached()) return TRN_SUCCESS;
  if (stopped()) return TRN_ERROR_CANCELLED;
  if (timeout_ns == 0) return TRN_TIMEOUT;
  // A signal from a running thread usually comes within a few checks: spin those before the
  // first clock read, which costs as much as the hand-off itself (a deadline is late by at most
  // these checks, well under a microsecond or two).
  const SpinPlan plan = spin_plan(style, spin_ns_);
  for (uint32_t i = 0; plan.pause_ns > 0 && i < kSpinsBeforeClock; ++i) {
    cpu_relax();
    if (reached()) return TRN_SUCCESS;
    if (stopped()) return TRN_ERROR_CANCELLED;
  }
  const uint64_t start = monotonic_ns();
  const uint64_t deadline = deadline_after(timeout_ns, start);
  // Spin: a signal from another running thread is seen within ~0.1 us.
  for (SpinPhase spin(start, std::min(plan.budget_ns, deadline - start), plan.pause_ns, history);
       ;) {
    if (reached()) return TRN_SUCCESS;
    if (stopped()) return TRN_ERROR_CANCELLED;
    if (!spin.next()) break;
  }
  const FutexScope scope = shared() ? FutexScope::shared : FutexScope::process_private;
  // Sleep: announce ourselves, then re-check, so a signal in between is never missed.
  for (;;) {
    const uint32_t seen = cell_->wake.load(std::memory_order_seq_cst);
    lower_wake_at(value);
    cell_->sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint64_t now = monotonic_ns();
    if (!reached() && !stopped() && now < deadline) {
      uint64_t slice = deadline - now;
      if (shared()) slice = std::min(slice, kSharedSliceNs);
      if (interrupt) slice = std::min(slice, kInterruptSliceNs);
      futex_wait(&cell_->wake, seen, slice, scope);
    }
    cell_->sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (reached()) return TRN_SUCCESS;
    if (stopped()) return TRN_ERROR_CANCELLED;
    if (monotonic_ns() >= deadline) return TRN_TIMEOUT;
  }
}

trn_result_t SemCore::host_wait(uint64_t target, uint64_t timeout_ns) {
  // No queue feeds it (a semaphore the host signals): a plain wait, with nothing added to it.
  if (value() >= target || timeout_ns == 0 || failed() ||
      feeder_.load(std::memory_order_relaxed) == nullptr)
    return wait(target, timeout_ns, nullptr);
  const uint64_t start = monotonic_ns();
  const uint64_t deadline = deadline_after(timeout_ns, start);
  {
    std::unique_lock lock(feeder_mu_, std::try_to_lock);
    SimQueue *feeder = feeder_.load(std::memory_order_relaxed);
    if (lock.owns_lock() && feeder != nullptr && feeder->assist(*this, target, start, deadline))
      return TRN_SUCCESS;
  }
  const uint64_t now = monotonic_ns();
  return wait(target, deadline > now ? deadline - now : 0, nullptr);
}

bool SemCore::set_feeder(SimQueue *queue) {
  std::unique_lock lock(feeder_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  feeder_.store(queue, std::memory_order_relaxed);
  return true;
}

void SemCore::clear_feeder(SimQueue *queue) {
  std::lock_guard lock(feeder_mu_);
  if (feeder_.load(std::memory_order_relaxed) == queue)
    feeder_.store(nullptr, std::memory_order_relaxed);
}

void SemCore::close_watches(const void *owner) {
  std::lock_guard lock(mu_);
  std::erase_if(watchers_, [&](const Watcher &w) {
    if (w.owner != owner) return false;
    close(w.fd);  // the caller's end reads end-of-file
    return true;
  });
  watcher_count_.store(static_cast<uint32_t>(watchers_.size()), std::memory_order_seq_cst);
}

trn_result_t SemCore::watch(uint64_t value, const void *owner, int *fd, std::string *why) {
  // A connected socket pair, not an eventfd: the caller's end is the descriptor it owns, and
  // when the caller closes it our end hangs up, so a watch whose caller lost interest is found
  // and closed. A socket also lets us send without SIGPIPE if the caller closed its end.
  int ends[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, ends) != 0) {
    const int error = errno;
    *why = std::string("cannot create the semaphore's descriptor: ") + std::strerror(error) +
           "; close descriptors no longer needed";
    return error == EMFILE || error == ENFILE ? TRN_ERROR_OUT_OF_HOST_MEMORY : TRN_ERROR_DRIVER;
  }
  shutdown(ends[0], SHUT_WR);  // the caller's end only reads
  {
    std::lock_guard lock(mu_);
    reap_abandoned_locked();
    try {
      watchers_.push_back({ends[1], value, owner});
    } catch (...) {
      close(ends[0]);
      close(ends[1]);
      throw;
    }
    watcher_count_.store(static_cast<uint32_t>(watchers_.size()), std::memory_order_seq_cst);
  }
  *fd = ends[0];
  notify_watchers();  // it may be reached already
  return TRN_SUCCESS;
}

void SemCore::reap_abandoned_locked() {
  if (watchers_.empty()) return;
  std::vector<pollfd> polled(watchers_.size());
  for (size_t i = 0; i < watchers_.size(); ++i) polled[i] = {watchers_[i].fd, 0, 0};
  if (poll(polled.data(), polled.size(), 0) <= 0) return;
  size_t i = 0;
  std::erase_if(watchers_, [&](const Watcher &w) {
    const bool hung_up = (polled[i++].revents & (POLLHUP | POLLERR)) != 0;
    if (hung_up) close(w.fd);
    return hung_up;
  });
}

bool SemCore::notify_watchers() {
  std::lock_guard lock(mu_);
  if (watchers_.empty()) return false;
  const uint64_t now = value();
  const bool is_failed = failed();
  std::erase_if(watchers_, [&](const Watcher &w) {
    if (now < w.value && !is_failed) return false;
    const uint64_t one = 1;  // what an eventfd read would give
    (void)!send(w.fd, &one, sizeof one, MSG_NOSIGNAL | MSG_DONTWAIT);
    close(w.fd);
    return true;
  });
  reap_abandoned_locked();
  watcher_count_.store(static_cast<uint32_t>(watchers_.size()), std::memory_order_seq_cst);
  return !watchers_.empty();
}

SemPoller::~SemPoller() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SemPoller::add(const std::shared_ptr<SemCore> &sem) {
  std::lock_guard lock(mu_);
  sems_.push_back(sem);
  if (!thread_.joinable()) {
    thread_ = std::thread([this] { loop(); });
    common::name_thread(thread_, "trn-sem-poll");
  }
  wake_.notify_all();
}

void SemPoller::loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (sems_.empty()) {
      wake_.wait_for(lock, std::chrono::seconds(1));
      continue;
    }
    std::vector<std::shared_ptr<SemCore>> watched;
    for (auto &weak : sems_)
      if (auto sem = weak.lock()) watched.push_back(std::move(sem));
    lock.unlock();
    std::vector<SemCore *> done;
    for (auto &sem : watched)
      if (!sem->notify_watchers()) done.push_back(sem.get());
    lock.lock();
    std::erase_if(sems_, [&](const std::weak_ptr<SemCore> &weak) {
      auto sem = weak.lock();
      return !sem ||
             (!sem->watched() && std::find(done.begin(), done.end(), sem.get()) != done.end());
    });
    lock.unlock();
    watched.clear();  // a last hold may go here: never under mu_
    lock.lock();
    wake_.wait_for(lock, std::chrono::milliseconds(1));
  }
}

}  // namespace trn::sim
