// Open-file-description locks (F_OFD_SETLK): byte-range locks owned by an open file, released by
// the kernel when the last descriptor of that open file closes, including when the process is
// killed. They are how the simulated device knows, without trusting pids, who is alive.
#pragma once

#include <cstdint>

namespace trn::sim {

enum class LockKind : short { shared, exclusive };

// 0 when taken, EAGAIN when another open file holds a conflicting lock, else an errno.
int ofd_try_lock(int fd, int64_t offset, LockKind kind);
int ofd_unlock(int fd, int64_t offset);
// Whether an open file other than `fd`'s holds a lock that conflicts with `kind` (a lock held
// through `fd` itself never counts). 0 or an errno.
int ofd_is_held(int fd, int64_t offset, LockKind kind, bool *held);
// Retries ofd_try_lock until it succeeds or `timeout_ns` passes (then ETIMEDOUT).
int ofd_lock_with_deadline(int fd, int64_t offset, LockKind kind, uint64_t timeout_ns);

}  // namespace trn::sim
