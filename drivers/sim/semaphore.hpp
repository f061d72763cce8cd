// Timeline semaphores. A local one lives in this process; a shareable one in a cell of the
// device's state file, which every process holding it maps. Each process keeps one SemCore per
// semaphore (its failure reason and watchers); every hold (create, import) is its own
// trn_hal_sem_t, and the process lets go of the shared cell with its last hold.
//
// The hot path is lock-free: the value is one atomic load; a signal that finds nobody asleep and
// no watcher takes no lock and makes no system call.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "drivers/hal.h"
#include "sim/state_layout.hpp"
#include "sim/wait_primitives.hpp"

namespace trn::sim {

class DeviceRuntime;
class SimQueue;

class SemCore {
 public:
  // A local semaphore at `initial`.
  SemCore(DeviceRuntime &device, uint64_t initial, uint64_t spin_ns);
  // A shared semaphore's cell (record, id) in the state file.
  SemCore(DeviceRuntime &device, SharedSemCell *cell, uint32_t record, uint64_t id,
          uint64_t spin_ns);
  ~SemCore();  // watchers read end-of-file; a shared cell is let go
  SemCore(const SemCore &) = delete;
  SemCore &operator=(const SemCore &) = delete;

  bool shared() const { return local_ == nullptr; }
  DeviceRuntime &device() const { return device_; }
  uint64_t value() const { return cell_->value.load(std::memory_order_acquire); }
  // Whether the value is at least `value`. A value this process saw before answers without the
  // cell (values only grow): a peer's semaphore that a queue waits on long after it was reached
  // (a staging slot freed chunks ago) is then not taken from the peer's cache every time.
  bool reached(uint64_t value) const;
  uint64_t device_ns() const { return cell_->device_ns.load(std::memory_order_acquire); }
  // The simulated time at which the semaphore reached `value` (at most device_ns()): the
  // earliest kept signal at or above it, else device_ns(). A caller that takes the later of it
  // and its own clock `not_before` gets device_ns() when that is no later than its clock: the
  // signals' ring (lines of their own, which the signallers then keep) is not read.
  uint64_t reached_ns(uint64_t value, uint64_t not_before = 0) const;
  bool failed() const { return cell_->failed.load(std::memory_order_acquire) != 0; }
  std::string failure_reason() const;
  void query(trn_hal_sem_state_t *state) const;

  // Raises the value to at least `value`, reached at simulated time `device_ns`.
  void signal(uint64_t value, uint64_t device_ns, bool clear_failure);
  // The same, refused when `value` is below the current value: false, with that value in
  // *current and nothing changed (one look at the value, where a read and then a signal move its
  // line between the cores twice).
  bool raise(uint64_t value, uint64_t device_ns, bool clear_failure, uint64_t *current);
  void fail(const std::string &reason);
  // TRN_SUCCESS, TRN_TIMEOUT, or TRN_ERROR_CANCELLED (failed, or `interrupt` became nonzero: a
  // queue worker re-checks it at least every 10 ms while asleep).
  // `style`: how it spins before it sleeps (SpinStyle); `history`: the waiting thread's, if it
  // keeps one (YieldHistory).
  trn_result_t wait(uint64_t value, uint64_t timeout_ns, const std::atomic<uint32_t> *interrupt,
                    SpinStyle style = SpinStyle::standard, YieldHistory *history = nullptr);
  // A host wait: first runs the feeding queue's commands on the calling thread (SimQueue::assist)
  // while that is quick, then waits as above.
  trn_result_t host_wait(uint64_t target, uint64_t timeout_ns);
  // The queue of this process whose buffers signal this semaphore (a runtime's timeline): a host
  // thread waiting here may run its commands itself. set_feeder is false (try again later)
  // while a waiter runs the current feeder's commands; clear_feeder, before the queue goes,
  // waits until no waiter uses it.
  bool set_feeder(SimQueue *queue);
  void clear_feeder(SimQueue *queue);
  // A watch belongs to the hold that asked for it (`owner`): close_watches ends a hold's.
  trn_result_t watch(uint64_t value, const void *owner, int *fd, std::string *why);
  void close_watches(const void *owner);
  // Completes the watches whose value was reached (or all, when failed); drops abandoned ones.
  // Returns whether watches remain.
  bool notify_watchers();
  bool watched() const { return watcher_count_.load(std::memory_order_seq_cst) != 0; }

 private:
  // Keeps a signal's value and time in the cell's ring (see SharedSemCell::times).
  void record_time(uint64_t value, uint64_t device_ns);
  struct Watcher {
    int fd;  // our end of the socket pair
    uint64_t value;
    const void *owner;
  };
  // Wakes the sleepers when the value reached the lowest target among them, or `any`.
  void wake_sleepers(bool any);
  // Registers a sleeper's target in wake_at (the lowest wins).
  void lower_wake_at(uint64_t value);
  void reap_abandoned_locked();
  DeviceRuntime &device_;
  // A local semaphore's cell, alone in its cache lines: two semaphores signalled back and forth
  // by two threads would otherwise share a line, and every signal would take it from the waiter.
  struct alignas(64) LocalCell {
    SharedSemCell cell{};
  };
  std::unique_ptr<LocalCell> local_;
  SharedSemCell *cell_;
  const uint32_t record_ = 0;
  const uint64_t id_ = 0;
  const uint64_t spin_ns_;
  std::atomic<uint32_t> watcher_count_{0};   // watchers_.size(), read without the lock
  std::atomic<SimQueue *> feeder_{nullptr};  // changed under feeder_mu_

  // What the waiters write, in a line of its own: beside the fields above, every value a waiter
  // saw took the line from the signalling thread, whose next signal then missed the cache on
  // reading where the cell is (about half of a spinning semaphore round trip).
  //
  // The highest value seen reached, and a simulated time no earlier than the signal that reached
  // it (written before the value, so whoever reads the value finds at least its time). Only this
  // process's threads touch them.
  alignas(64) mutable std::atomic<uint64_t> seen_value_{0};
  mutable std::atomic<uint64_t> seen_ns_{0};
  // Held by a waiter for as long as it runs the feeder's commands (one at a time: the others
  // wait as usual), and by whoever changes the feeder; read without it only to skip the lock.
  std::mutex feeder_mu_;

  // Failures and watches: rare.
  alignas(64) mutable std::mutex mu_;  // guards reason_ and watchers_
  std::string reason_;
  std::vector<Watcher> watchers_;
};

// Shared semaphores may be signalled by other processes, which cannot write this process's
// descriptors: a thread polls the watched ones every millisecond while there are any.
class SemPoller {
 public:
  SemPoller() = default;
  ~SemPoller();
  SemPoller(const SemPoller &) = delete;
  SemPoller &operator=(const SemPoller &) = delete;
  void add(const std::shared_ptr<SemCore> &sem);

 private:
  void loop();
  std::mutex mu_;  // guards everything below
  std::condition_variable wake_;
  std::vector<std::weak_ptr<SemCore>> sems_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace trn::sim

// One hold on a semaphore.
struct trn_hal_sem {
  std::shared_ptr<trn::sim::SemCore> core;
};
