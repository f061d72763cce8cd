// What every wait of the simulated device is made of: the monotonic clock, futex sleeps in
// bounded slices, and a spin hint.
#pragma once

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>

#include "common/clock.hpp"

namespace trn::sim {

using common::deadline_after;
using common::monotonic_ns;

// Futex words of other processes (semaphore cells in the state file) need the shared futex;
// words private to this process the cheaper private one.
enum class FutexScope { process_private, shared };

// Sleeps while `*word == expected`, at most `timeout_ns`; returns early on a wake or a signal.
inline void futex_wait(std::atomic<uint32_t> *word, uint32_t expected, uint64_t timeout_ns,
                       FutexScope scope) {
  struct timespec ts {};
  ts.tv_sec = static_cast<time_t>(timeout_ns / 1000000000u);
  ts.tv_nsec = static_cast<long>(timeout_ns % 1000000000u);
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(word),
          scope == FutexScope::shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE, expected, &ts, nullptr, 0);
}

inline void futex_wake(std::atomic<uint32_t> *word, int count, FutexScope scope) {
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(word),
          scope == FutexScope::shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, count, nullptr, nullptr,
          0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// What a thread's last yield found: nobody else to run on its core (the yield came back at once)
// or another thread that ran. A thread that waits again and again (a queue's helper, waiting for
// a collective's peers) keeps one, so that each wait starts the way the last one ended.
struct YieldHistory {
  bool idle = false;
};

// Asks for the line holding `p` in a state this core may write: the load that comes first then
// takes it once, where a plain load would fetch it shared and the write that follows would have
// to take it from its waiters a second time.
inline void prefetch_for_write(const void *p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char *>(p)));
#else
  __builtin_prefetch(p, 1);
#endif
}

// A waiter's spin phase, `budget_ns` from `start_ns`. The first microseconds are pause-spins: a
// signaller running on another core answers within them. After that each check yields the CPU:
// with more busy threads than cores (two ranks' hosts and queues on two cores) a waiter that
// keeps its core delays the very thread it waits for, until the scheduler preempts it. A yield
// that comes back at once found nobody else to run on this core: the next kPauseNs are
// pause-spins again, for a yield is a system call (over a microsecond on a small virtual
// machine) that would otherwise stand between the signal and the waiter seeing it. With a
// `history`, a wait whose previous one ended on such a yield starts with those pause-spins.
class SpinPhase {
 public:
  static constexpr uint64_t kPauseNs = 4'000;
  // A yield shorter than this ran no other thread (a switch away and back costs more).
  static constexpr uint64_t kIdleYieldNs = 5'000;
  SpinPhase(uint64_t start_ns, uint64_t budget_ns, uint64_t pause_ns = kPauseNs,
            YieldHistory *history = nullptr)
      : pause_until_(start_ns + std::min(budget_ns, history && history->idle
                                                        ? std::max(pause_ns, kPauseNs)
                                                        : pause_ns)),
        until_(budget_ns > UINT64_MAX - start_ns ? UINT64_MAX : start_ns + budget_ns),
        history_(history) {}
  // Waits a little; false once the budget is spent (then sleep).
  bool next() {
    // The first call looks at the clock: a zero budget spins not at all.
    if ((checks_++ & 63) == 0 || yielding_) {
      const uint64_t now = monotonic_ns();
      if (now >= until_) {
        yielding_ = true;  // every later call looks again, and stays ended
        return false;
      }
      if (yielding_) {
        const bool idle = now - yielded_at_ < kIdleYieldNs;
        if (idle) pause_until_ = now + kPauseNs;
        if (history_) history_->idle = idle;
      }
      yielding_ = now >= pause_until_;
      yielded_at_ = now;
    }
    if (yielding_)
      sched_yield();
    else
      cpu_relax();
    return true;
  }

 private:
  uint64_t pause_until_, until_;
  YieldHistory *history_;
  uint64_t yielded_at_ = 0;  // the clock before the last yield
  uint32_t checks_ = 0;
  bool yielding_ = false;
};

// How a wait spins before it sleeps, from the spin budget (TRN_SPIN_NS).
enum class SpinStyle {
  // A worker's or a host thread's wait: pause-spins first (its signaller most likely runs on
  // another core), then yields, for the budget.
  standard,
  // A host thread running its queue's commands (SimQueue::assist), waiting inside them for a
  // signal from other threads or processes (a collective's peers): it yields from the first
  // check, so that its spinning keeps no core from the signaller, and for kYieldingBudgets
  // budgets. Sleeping would cost the signaller a wake-up system call and this thread a
  // scheduler round trip (about 30 us each on a small virtual machine): with more ranks than
  // cores a peer often takes longer than one budget to come round, and each sleep then added
  // that much to the operation (an 8-byte all-reduce over four processes on two cores: about a
  // third of its time).
  yielding,
};
constexpr uint64_t kYieldingBudgets = 10;

struct SpinPlan {
  uint64_t budget_ns;
  uint64_t pause_ns;
};

inline SpinPlan spin_plan(SpinStyle style, uint64_t budget_ns) {
  if (style == SpinStyle::standard) return {budget_ns, SpinPhase::kPauseNs};
  const uint64_t longer =
      budget_ns > UINT64_MAX / kYieldingBudgets ? UINT64_MAX : budget_ns * kYieldingBudgets;
  return {longer, 0};
}

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex words are 32 bits");

}  // namespace trn::sim
