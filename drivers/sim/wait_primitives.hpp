// What every wait of the simulated device is made of: the monotonic clock, futex sleeps in
// bounded slices, and a spin hint.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex words are 32 bits");

}  // namespace trn::sim
