// A lock for critical sections of a few dozen instructions that two running threads take in
// turn (a queue's submitter and its worker): a contended std::mutex puts the loser to sleep,
// and the wake-up costs more than the whole submission. Spins, then yields, so a holder that
// was preempted gets the core back.
#pragma once

#include <atomic>
#include <thread>

#include "sim/wait_primitives.hpp"

namespace trn::sim {

class SpinLock {
 public:
  void lock() noexcept {
    for (uint32_t spins = 0;; ++spins) {
      if (!held_.load(std::memory_order_relaxed) &&
          !held_.exchange(true, std::memory_order_acquire))
        return;
      if (spins < 1024)
        cpu_relax();
      else
        std::this_thread::yield();
    }
  }
  bool try_lock() noexcept {
    return !held_.load(std::memory_order_relaxed) &&
           !held_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

}  // namespace trn::sim
