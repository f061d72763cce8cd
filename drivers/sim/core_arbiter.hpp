// A core's engines, taken by one launch at a time. Queues on the same core (a process may make
// several compute queues on a core it owns) take turns for them: when several wait, the highest
// priority goes first, in order of arrival within a priority, as a hardware queue scheduler
// would. Also the core's simulated time: a launch starts no earlier than the previous one ended.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>

#include "drivers/hal.h"

namespace trn::sim {

class CoreArbiter {
 public:
  static constexpr uint32_t kPriorities = TRN_HAL_QUEUE_PRIORITY_HIGH + 1;

  // Waits for the engines; false if `stop` was set while waiting (nothing is held then).
  // `*clock_ns` (the caller's simulated time) moves on to when the engines became free.
  bool acquire(uint32_t priority, const std::atomic<uint32_t> &stop, uint64_t *clock_ns);
  // Gives the engines back at simulated time `clock_ns`.
  void release(uint64_t clock_ns);

 private:
  bool is_next(uint32_t priority, uint64_t ticket) const;  // under mu_

  std::mutex mu_;
  std::condition_variable free_;
  bool busy_ = false;
  uint64_t next_ticket_ = 0;
  std::deque<uint64_t> waiting_[kPriorities];  // tickets in arrival order
  uint64_t free_at_ns_ = 0;
};

}  // namespace trn::sim
