// Time for the tools' loops: a monotonic clock, and sleeps that end early when asked to stop
// (a signal handler sets the flag), so a tool quits promptly whatever its period.
#pragma once

#include <atomic>
#include <cstdint>

namespace trn::tools {

uint64_t monotonic_ns();
// Sleeps until `deadline_ns` (monotonic) or until `stop` is set, checking it every 50 ms.
void sleep_until(uint64_t deadline_ns, const std::atomic<bool> &stop);
void sleep_ms(uint32_t ms, const std::atomic<bool> &stop);

}  // namespace trn::tools
