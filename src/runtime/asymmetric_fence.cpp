#include "runtime/asymmetric_fence.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace trn::rt {

namespace {

bool register_membarrier() noexcept {
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer cannot see the fences membarrier runs on other threads: full fences there.
  return false;
#else
  const long supported = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (supported < 0 || !(supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return false;
  return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
#endif
}

}  // namespace

namespace detail {
// Before any API call can run: a static initialiser of the library.
bool g_membarrier_registered = register_membarrier();
}  // namespace detail

void heavy_fence() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (detail::g_membarrier_registered &&
      syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
    return;
  // Never registered, or refused now (it cannot be after registering): the call side then runs
  // full fences only if it never saw the registration, so failing here would be a bug; a full
  // fence is all that is left to do.
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace trn::rt
