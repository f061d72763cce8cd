#include "sim/ofd_lock.hpp"

#include <fcntl.h>
#include <time.h>

#include <cerrno>

#include "sim/wait_primitives.hpp"

namespace trn::sim {

namespace {

struct flock make_flock(int64_t offset, short type) {
  struct flock lock {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = offset;
  lock.l_len = 1;
  lock.l_pid = 0;  // required for OFD locks
  return lock;
}

short to_type(LockKind kind) {
  return kind == LockKind::shared ? F_RDLCK : F_WRLCK;
}

}  // namespace

int ofd_try_lock(int fd, int64_t offset, LockKind kind) {
  struct flock lock = make_flock(offset, to_type(kind));
  if (fcntl(fd, F_OFD_SETLK, &lock) == 0) return 0;
  return (errno == EACCES || errno == EAGAIN) ? EAGAIN : errno;
}

int ofd_unlock(int fd, int64_t offset) {
  struct flock lock = make_flock(offset, F_UNLCK);
  return fcntl(fd, F_OFD_SETLK, &lock) == 0 ? 0 : errno;
}

int ofd_is_held(int fd, int64_t offset, LockKind kind, bool *held) {
  struct flock lock = make_flock(offset, to_type(kind));
  if (fcntl(fd, F_OFD_GETLK, &lock) != 0) return errno;
  *held = lock.l_type != F_UNLCK;
  return 0;
}

int ofd_lock_with_deadline(int fd, int64_t offset, LockKind kind, uint64_t timeout_ns) {
  const uint64_t deadline = monotonic_ns() + timeout_ns;
  uint64_t pause_ns = 50'000;
  for (;;) {
    const int rc = ofd_try_lock(fd, offset, kind);
    if (rc != EAGAIN) return rc;
    if (monotonic_ns() >= deadline) return ETIMEDOUT;
    // Holders keep these locks for microseconds; back off to 1 ms so a stopped holder costs
    // little CPU while we wait for the deadline.
    struct timespec pause {
      0, static_cast<long>(pause_ns)
    };
    nanosleep(&pause, nullptr);
    pause_ns = pause_ns * 2 > 1'000'000 ? 1'000'000 : pause_ns * 2;
  }
}

}  // namespace trn::sim
