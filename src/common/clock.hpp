// The monotonic clock every deadline in the library is measured on.
#pragma once

#include <time.h>

#include <cstdint>

namespace trn::common {

inline uint64_t monotonic_ns() {
  struct timespec now {};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec);
}

// now + timeout, saturating (UINT64_MAX waits forever), from a clock read the caller has.
inline uint64_t deadline_after(uint64_t timeout_ns, uint64_t now) {
  return timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
}
inline uint64_t deadline_after(uint64_t timeout_ns) {
  return deadline_after(timeout_ns, monotonic_ns());
}

}  // namespace trn::common
