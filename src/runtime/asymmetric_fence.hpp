// A fence split between a side that runs all the time and a side that runs rarely. Every API
// call announces itself to a possible concurrent trn_runtime_shutdown (Dekker's pattern: each
// side writes its flag, fences, reads the other's); a full fence or a locked instruction on the
// call side would cost every call ~10 ns. With membarrier(2), the call side orders its accesses
// for the compiler only, and the shutdown side makes every running thread of the process execute
// a full fence instead (a descheduled thread has fenced in its context switch).
#pragma once

#include <atomic>

namespace trn::rt {

namespace detail {
// Whether membarrier's private expedited command was registered; set once before main (or when
// libtrn is loaded) and only read after.
extern bool g_membarrier_registered;
// Without membarrier: a full fence on both sides. ThreadSanitizer neither sees membarrier nor
// supports stand-alone fences, so there both sides read-modify-write one word instead (two such
// operations on one word are ordered, the later one acquiring what the earlier released).
void full_fence() noexcept;
}  // namespace detail

// The cheap side: a compiler barrier where the expensive side can fence for it.
inline void light_fence() noexcept {
  if (__builtin_expect(detail::g_membarrier_registered, 1))
    std::atomic_signal_fence(std::memory_order_seq_cst);
  else
    detail::full_fence();
}

// The expensive side: orders this thread's accesses before it against every other thread's
// accesses after their light_fence() (a system call of a few microseconds).
void heavy_fence() noexcept;

}  // namespace trn::rt
