#include "tool_common/clock.hpp"

#include <time.h>

#include <algorithm>

namespace trn::tools {

uint64_t monotonic_ns() {
  struct timespec now {};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec);
}

void sleep_until(uint64_t deadline_ns, const std::atomic<bool> &stop) {
  constexpr uint64_t kSliceNs = 50'000'000;
  for (uint64_t now = monotonic_ns(); now < deadline_ns && !stop.load(); now = monotonic_ns()) {
    const uint64_t pause_ns = std::min(kSliceNs, deadline_ns - now);
    struct timespec pause {
      0, static_cast<long>(pause_ns)
    };
    nanosleep(&pause, nullptr);
  }
}

void sleep_ms(uint32_t ms, const std::atomic<bool> &stop) {
  sleep_until(monotonic_ns() + static_cast<uint64_t>(ms) * 1000000u, stop);
}

}  // namespace trn::tools
