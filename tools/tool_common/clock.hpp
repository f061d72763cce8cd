// Time for the tools' loops: a monotonic clock, and sleeps that end early when asked to stop
// (a signal handler sets the flag), so a tool quits promptly whatever its period.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace trn::tools {

uint64_t monotonic_ns();
// Sleeps until `deadline_ns` (monotonic) or until `stop` is set, checking it every 50 ms.
void sleep_until(uint64_t deadline_ns, const std::atomic<bool> &stop);
void sleep_ms(uint32_t ms, const std::atomic<bool> &stop);

// now + `ns` on the steady clock; never for UINT64_MAX (no limit) and anything past what the
// clock can hold (a plain sum would wrap into the past).
inline std::chrono::steady_clock::time_point steady_deadline(uint64_t ns) {
  const auto now = std::chrono::steady_clock::now();
  const auto room = std::chrono::steady_clock::time_point::max() - now;
  if (ns >=
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(room).count()))
    return std::chrono::steady_clock::time_point::max();
  return now + std::chrono::nanoseconds(ns);
}

}  // namespace trn::tools
