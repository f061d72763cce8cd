// A semaphore's file descriptor in an io_uring event loop: a POLLIN poll completes when the value
// is reached (signalled in this process, or by another process through an exported semaphore)
// or when the semaphore fails, and not before. Lives in the stress tier because it links
// liburing.
#include <liburing.h>
#include <poll.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>

#include "support/api_helpers.hpp"
#include "support/result_printing.hpp"
#include "support/sim_env.hpp"
#include "trn/trn.h"

namespace {

using trn::test::first_device;

using trn::test::SimEnv;

constexpr uint64_t kSecond = 1'000'000'000;

trn_sem_t make_sem(trn_device_t device, uint32_t flags) {
  trn_sem_desc_t desc = TRN_SEM_DESC_INIT;
  desc.flags = flags;
  trn_sem_t sem = nullptr;
  INFO(trn_last_error());
  REQUIRE(trn_sem_create(device, &desc, &sem) == TRN_SUCCESS);
  return sem;
}

// An io_uring with one POLLIN poll armed on a descriptor.
class PollRing {
 public:
  // False (with a warning) when the kernel offers no io_uring (seccomp, old kernel).
  bool init() {
    const int r = io_uring_queue_init(8, &ring_, 0);
    if (r == -ENOSYS || r == -EPERM) {
      WARN("io_uring is not available here (" << std::strerror(-r) << "): test not run");
      return false;
    }
    REQUIRE(r == 0);
    ready_ = true;
    return true;
  }
  ~PollRing() {
    if (ready_) io_uring_queue_exit(&ring_);
  }

  void arm(int fd) {
    io_uring_sqe *sqe = io_uring_get_sqe(&ring_);
    REQUIRE(sqe != nullptr);
    io_uring_prep_poll_add(sqe, fd, POLLIN);
    io_uring_sqe_set_data64(sqe, 0x7e57);
    REQUIRE(io_uring_submit(&ring_) == 1);
  }

  // Whether no completion is there now (peek) nor within `ms`.
  bool quiet_for(int ms) {
    io_uring_cqe *cqe = nullptr;
    if (io_uring_peek_cqe(&ring_, &cqe) != -EAGAIN) return false;
    __kernel_timespec ts{0, ms * 1'000'000LL};
    return io_uring_wait_cqe_timeout(&ring_, &cqe, &ts) == -ETIME;
  }

  // Waits up to 30 s (another process may signal, on a loaded machine) for the poll's
  // completion and checks it reports POLLIN.
  void expect_completion() {
    io_uring_cqe *cqe = nullptr;
    __kernel_timespec ts{30, 0};
    const int r = io_uring_wait_cqe_timeout(&ring_, &cqe, &ts);
    REQUIRE(r == 0);
    REQUIRE(cqe != nullptr);
    CHECK(io_uring_cqe_get_data64(cqe) == 0x7e57);
    CHECK(cqe->res > 0);
    CHECK((cqe->res & POLLIN) != 0);
    io_uring_cqe_seen(&ring_, cqe);
  }

 private:
  io_uring ring_{};
  bool ready_ = false;
};

}  // namespace

TEST_CASE("an io_uring poll on a semaphore's descriptor completes at the value",
          "[stress][fd][io_uring]") {
  SimEnv env;
  PollRing ring;
  if (!ring.init()) return;
  const trn_device_t device = first_device();
  const uint32_t flags = GENERATE(0u, TRN_SEM_FLAG_EXPORTABLE);
  INFO((flags ? "exportable" : "process-local"));
  trn_sem_t sem = make_sem(device, flags);
  int fd = -1;
  REQUIRE(trn_sem_get_fd(sem, 2, &fd) == TRN_SUCCESS);
  ring.arm(fd);
  CHECK(ring.quiet_for(20));
  REQUIRE(trn_sem_signal(sem, 1) == TRN_SUCCESS);
  CHECK(ring.quiet_for(20));  // 1 is not 2
  REQUIRE(trn_sem_signal(sem, 2) == TRN_SUCCESS);
  ring.expect_completion();
  close(fd);

  // Already reached: completes at once.
  REQUIRE(trn_sem_get_fd(sem, 1, &fd) == TRN_SUCCESS);
  ring.arm(fd);
  ring.expect_completion();
  close(fd);
  REQUIRE(trn_sem_destroy(sem) == TRN_SUCCESS);
}

TEST_CASE("an io_uring poll completes when another process signals an exported semaphore",
          "[stress][fd][io_uring][ipc]") {
  SimEnv env;
  PollRing ring;
  if (!ring.init()) return;
  const trn_device_t device = first_device();
  trn_sem_t sem = make_sem(device, TRN_SEM_FLAG_EXPORTABLE);
  trn_ipc_handle_t handle;
  REQUIRE(trn_sem_export(sem, &handle) == TRN_SUCCESS);

  // The child imports it, waits for 1 (the parent's go), then signals 2.
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    uint32_t count = 1;
    trn_device_t d = nullptr;
    if (trn_device_get(&count, &d) != TRN_SUCCESS) _exit(10);
    trn_sem_t imported = nullptr;
    if (trn_sem_import(d, &handle, &imported) != TRN_SUCCESS) _exit(11);
    if (trn_sem_wait(imported, 1, 10 * kSecond) != TRN_SUCCESS) _exit(12);
    if (trn_sem_signal(imported, 2) != TRN_SUCCESS) _exit(13);
    _exit(0);
  }
  int fd = -1;
  REQUIRE(trn_sem_get_fd(sem, 2, &fd) == TRN_SUCCESS);
  ring.arm(fd);
  CHECK(ring.quiet_for(20));
  REQUIRE(trn_sem_signal(sem, 1) == TRN_SUCCESS);  // not 2: only the child's signal completes it
  ring.expect_completion();
  uint64_t value = 0;
  CHECK(trn_sem_query(sem, &value) == TRN_SUCCESS);
  CHECK(value == 2);
  close(fd);

  int status = -1;
  for (int i = 0; i < 1000 && waitpid(child, &status, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (waitpid(child, &status, WNOHANG) == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    FAIL("the child did not exit");
  }
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  REQUIRE(trn_sem_destroy(sem) == TRN_SUCCESS);
}

TEST_CASE("an io_uring poll completes when the semaphore fails", "[stress][fd][io_uring]") {
  SimEnv env;
  PollRing ring;
  if (!ring.init()) return;
  const trn_device_t device = first_device();
  trn_core_t core = nullptr;
  uint32_t count = 1;
  REQUIRE(trn_core_get(device, &count, &core) == TRN_SUCCESS);
  trn_queue_desc_t desc = TRN_QUEUE_DESC_INIT;
  desc.core = core;
  trn_queue_t queue = nullptr;
  REQUIRE(trn_queue_create(&desc, &queue) == TRN_SUCCESS);
  trn_sem_t gate = make_sem(device, 0);
  trn_sem_t done = make_sem(device, 0);
  const trn_sem_point_t wait_point{gate, 1};
  const trn_sem_point_t signal_point{done, 1};
  const trn_sync_t sync{&wait_point, 1, &signal_point, 1};
  REQUIRE(trn_queue_barrier(queue, &sync, nullptr) == TRN_SUCCESS);
  int fd = -1;
  REQUIRE(trn_sem_get_fd(done, 1, &fd) == TRN_SUCCESS);
  ring.arm(fd);
  CHECK(ring.quiet_for(20));
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);  // cancels the barrier: `done` fails
  ring.expect_completion();
  CHECK(trn_sem_wait(done, 1, 0) == TRN_ERROR_CANCELLED);
  close(fd);
  REQUIRE(trn_sem_destroy(gate) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(done) == TRN_SUCCESS);
}
