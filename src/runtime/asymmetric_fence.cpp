#include "runtime/asymmetric_fence.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

namespace trn::rt {

namespace {

bool register_membarrier() noexcept {
#if defined(__SANITIZE_THREAD__)
  return false;  // full fences, which ThreadSanitizer can follow
#else
  const long supported = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (supported < 0 || !(supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return false;
  return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
#endif
}

#if defined(__SANITIZE_THREAD__)
std::atomic<uint64_t> g_fence_word{0};
#endif

}  // namespace

namespace detail {

// Before any API call can run: a static initialiser of the library. A call made earlier (from
// another library's initialiser) reads false and fences fully, which is safe either way.
bool g_membarrier_registered = register_membarrier();

void full_fence() noexcept {
#if defined(__SANITIZE_THREAD__)
  g_fence_word.fetch_add(0, std::memory_order_acq_rel);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

}  // namespace detail

void heavy_fence() noexcept {
  if (!detail::g_membarrier_registered) {
    detail::full_fence();
    return;
  }
  // membarrier fences the calling thread too, before and after the others. Registration survives
  // fork (and exec loads the library anew), so only a kernel out of memory refuses the expedited
  // command; the global one gives the same guarantee without allocating, in milliseconds.
  if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
    (void)syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0);
}

}  // namespace trn::rt
