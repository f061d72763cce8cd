// Conformance: timeline semaphores — create, signal, wait (polling, timing out, woken by another
// thread while spinning and while parked), query, pollable file descriptors (epoll), export and
// import across processes, the rules for a queue's own semaphore and for semaphores queued
// commands still use, and every function's refusal of bad input.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "support/api_helpers.hpp"
#include "support/fault_injection.hpp"
#include "support/result_printing.hpp"
#include "support/sim_env.hpp"
#include "trn/trn.h"

namespace {

using trn::test::core_at;
using trn::test::devices;
using trn::test::error_contains;
using trn::test::first_device;
using trn::test::last_error;

using trn::test::SimEnv;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kSecond = 1'000'000'000;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

trn_sem_t make_sem(trn_device_t device, uint64_t initial = 0, uint32_t flags = 0) {
  trn_sem_desc_t desc = TRN_SEM_DESC_INIT;
  desc.initial_value = initial;
  desc.flags = flags;
  trn_sem_t sem = nullptr;
  INFO(last_error());
  REQUIRE(trn_sem_create(device, &desc, &sem) == TRN_SUCCESS);
  REQUIRE(sem != nullptr);
  return sem;
}

uint64_t value_of(trn_sem_t sem) {
  uint64_t value = 0xdeadbeef;
  INFO(last_error());
  REQUIRE(trn_sem_query(sem, &value) == TRN_SUCCESS);
  return value;
}

trn_queue_t make_queue(trn_core_t core) {
  trn_queue_desc_t desc = TRN_QUEUE_DESC_INIT;
  desc.core = core;
  trn_queue_t queue = nullptr;
  INFO(last_error());
  REQUIRE(trn_queue_create(&desc, &queue) == TRN_SUCCESS);
  return queue;
}

// Whether `fd` is readable within `timeout_ms`, asked through a fresh epoll instance.
int epoll_readable(int fd, int timeout_ms) {
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  REQUIRE(ep >= 0);
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = fd;
  REQUIRE(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &event) == 0);
  epoll_event out{};
  const int n = epoll_wait(ep, &out, 1, timeout_ms);
  close(ep);
  if (n == 1) {
    CHECK(out.data.fd == fd);
    CHECK((out.events & EPOLLIN) != 0);
  }
  return n;
}

// Runs `body` in a forked child that exits with its result (never returns there). Child code
// uses no Catch assertions: it reports through its exit status.
pid_t fork_child(const std::function<int()> &body) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 120;
    try {
      code = body();
    } catch (...) {
      code = 121;
    }
    _exit(code);
  }
  return pid;
}

// The child's exit status, or -1 if it did not exit within `timeout_ms` (it is then killed).
int wait_child(pid_t pid, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int status = 0;
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (done < 0) return -2;
    if (Clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Sets an environment variable SimEnv does not know about for one test, unset afterwards.
class ScopedEnv {
 public:
  ScopedEnv(SimEnv &env, const char *name, const char *value) : env_(env), name_(name) {
    env_.set(name, value);
  }
  ~ScopedEnv() { env_.set(name_, nullptr); }
  ScopedEnv(const ScopedEnv &) = delete;
  ScopedEnv &operator=(const ScopedEnv &) = delete;

 private:
  SimEnv &env_;
  const char *name_;
};

template <typename Handle>
Handle handle_from(uintptr_t value) {
  return reinterpret_cast<Handle>(value);
}

template <typename To, typename From>
To recast(From handle) {
  return reinterpret_cast<To>(handle);
}

struct Call {
  const char *name;
  std::function<trn_result_t()> run;
};

// Every function that takes a semaphore handle, with otherwise valid arguments.
std::vector<Call> sem_calls(trn_sem_t sem) {
  return {
      {"trn_sem_signal", [=] { return trn_sem_signal(sem, 1); }},
      {"trn_sem_wait", [=] { return trn_sem_wait(sem, 1, 0); }},
      {"trn_sem_query",
       [=] {
         uint64_t value = 0;
         return trn_sem_query(sem, &value);
       }},
      {"trn_sem_get_fd",
       [=] {
         int fd = -1;
         const trn_result_t r = trn_sem_get_fd(sem, 1, &fd);
         if (fd >= 0) close(fd);
         return r;
       }},
      {"trn_sem_export",
       [=] {
         trn_ipc_handle_t handle;
         return trn_sem_export(sem, &handle);
       }},
      {"trn_sem_destroy", [=] { return trn_sem_destroy(sem); }},
  };
}

void expect_all(const std::vector<Call> &calls, trn_result_t expected, const std::string &detail) {
  for (const Call &call : calls) {
    INFO(call.name);
    const trn_result_t r = call.run();
    CHECK(r == expected);
    INFO("trn_last_error: " << last_error());
    // "function: what was wrong", the function named once.
    const std::string prefix = std::string(call.name) + ": ";
    CHECK(last_error().rfind(prefix, 0) == 0);
    CHECK(last_error().find(prefix, prefix.size()) == std::string::npos);
    CHECK(error_contains(detail));
  }
}

}  // namespace

TEST_CASE("a semaphore is created, signalled, waited on and queried", "[semaphores]") {
  SimEnv env;
  const trn_device_t device = first_device();

  trn_sem_t sem = make_sem(device, 5);
  CHECK(value_of(sem) == 5);
  CHECK(trn_sem_wait(sem, 5, 0) == TRN_SUCCESS);
  CHECK(trn_sem_wait(sem, 0, 0) == TRN_SUCCESS);
  CHECK(trn_sem_wait(sem, 6, 0) == TRN_TIMEOUT);

  REQUIRE(trn_sem_signal(sem, 7) == TRN_SUCCESS);
  CHECK(value_of(sem) == 7);
  CHECK(trn_sem_wait(sem, 6, 0) == TRN_SUCCESS);
  CHECK(trn_sem_wait(sem, 7, 0) == TRN_SUCCESS);
  CHECK(trn_sem_wait(sem, 8, 0) == TRN_TIMEOUT);
  // The same value again is allowed (nothing changes); a value below it is not.
  CHECK(trn_sem_signal(sem, 7) == TRN_SUCCESS);
  CHECK(trn_sem_signal(sem, 6) == TRN_ERROR_INVALID_ARGUMENT);
  INFO(last_error());
  CHECK(error_contains("trn_sem_signal: "));
  CHECK(error_contains("value 6 is below the current value 7"));
  CHECK(value_of(sem) == 7);
  CHECK(trn_sem_signal(sem, 0) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(value_of(sem) == 7);
  // The whole 64-bit range.
  REQUIRE(trn_sem_signal(sem, UINT64_MAX) == TRN_SUCCESS);
  CHECK(value_of(sem) == UINT64_MAX);
  CHECK(trn_sem_wait(sem, UINT64_MAX, 0) == TRN_SUCCESS);
  CHECK(trn_sem_wait(sem, UINT64_MAX, UINT64_MAX) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(sem) == TRN_SUCCESS);

  // The default descriptor starts at 0; exportable ones honour their initial value too.
  trn_sem_desc_t desc = TRN_SEM_DESC_INIT;
  trn_sem_t zero = nullptr;
  REQUIRE(trn_sem_create(device, &desc, &zero) == TRN_SUCCESS);
  CHECK(value_of(zero) == 0);
  CHECK(trn_sem_wait(zero, 1, 0) == TRN_TIMEOUT);
  trn_sem_t shared = make_sem(device, 42, TRN_SEM_FLAG_EXPORTABLE);
  CHECK(value_of(shared) == 42);
  CHECK(trn_sem_wait(shared, 43, 0) == TRN_TIMEOUT);
  REQUIRE(trn_sem_signal(shared, 43) == TRN_SUCCESS);
  CHECK(trn_sem_wait(shared, 43, 0) == TRN_SUCCESS);
  CHECK(trn_sem_signal(shared, 40) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(value_of(shared) == 43);
  REQUIRE(trn_sem_destroy(zero) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(shared) == TRN_SUCCESS);
}

TEST_CASE("a submission that runs out of host memory leaves its semaphores free to destroy",
          "[semaphores][negative]") {
  // Each allocation of a copy's submission fails in turn: the call says out of host memory or
  // succeeds, and either way the semaphores of its sync are destroyed once the queue is idle
  // (a use kept by a failed submission would make them HANDLE_IN_USE forever).
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = trn::test::make_pool(device);
  trn_queue_t queue = trn::test::make_queue(core_at(device, 0));
  trn_mem_t a = trn::test::alloc(pool, 4096), b = trn::test::alloc(pool, 4096);
  bool succeeded = false;
  for (uint64_t allowed = 0; allowed < 200 && !succeeded; ++allowed) {
    INFO("allocations allowed: " << allowed);
    trn_sem_t wait_on = make_sem(device, 1), signal_on = make_sem(device, 0);
    const trn_sem_point_t wait{wait_on, 1}, signal{signal_on, 1};
    const trn_sync_t sync{&wait, 1, &signal, 1};
    trn_result_t r = TRN_SUCCESS;
    {
      trn::test::AllocationFailure failure(allowed);
      r = trn_queue_copy(queue, b, 0, a, 0, 4096, &sync, nullptr);
    }
    INFO(last_error());
    CHECK((r == TRN_SUCCESS || r == TRN_ERROR_OUT_OF_HOST_MEMORY));
    succeeded = r == TRN_SUCCESS;
    REQUIRE(trn_queue_finish(queue, 10'000'000'000ull) == TRN_SUCCESS);
    CHECK(trn_sem_destroy(wait_on) == TRN_SUCCESS);
    CHECK(trn_sem_destroy(signal_on) == TRN_SUCCESS);
  }
  CHECK(succeeded);
  // Memory that stays short: even the failure's description cannot be made, and the call still
  // returns its result (no exception leaves the library).
  trn_sem_t sem = make_sem(device, 1);
  const trn_sem_point_t wait{sem, 1};
  const trn_sync_t sync{&wait, 1, nullptr, 0};
  trn_result_t r = TRN_SUCCESS;
  {
    trn::test::AllocationFailure failure(0, 1'000'000);
    r = trn_queue_copy(queue, b, 0, a, 0, 4096, &sync, nullptr);
  }
  CHECK(r == TRN_ERROR_OUT_OF_HOST_MEMORY);
  REQUIRE(trn_queue_finish(queue, 10'000'000'000ull) == TRN_SUCCESS);
  CHECK(trn_sem_destroy(sem) == TRN_SUCCESS);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(a) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(b) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("a wait with a deadline returns TRN_TIMEOUT after it", "[semaphores]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_sem_t sem = make_sem(device, 1);
  trn_sem_t shared = make_sem(device, 1, TRN_SEM_FLAG_EXPORTABLE);
  for (trn_sem_t s : {sem, shared}) {
    for (uint64_t timeout : {uint64_t{1}, uint64_t{30'000}, 20 * kMs}) {
      INFO("timeout " << timeout << " ns");
      const auto start = Clock::now();
      CHECK(trn_sem_wait(s, 2, timeout) == TRN_TIMEOUT);
      const double elapsed = seconds_since(start);
      CHECK(elapsed >= static_cast<double>(timeout) / 1e9);
      CHECK(elapsed < 5.0);
      // The deadline's message says where the value stood, not an earlier call's failure.
      CHECK(std::string(trn_last_error()).find("was at 1, short of 2") != std::string::npos);
    }
    // A poll is the caller's loop: it leaves the last message as it was.
    CHECK(trn_sem_signal(nullptr, 1) == TRN_ERROR_INVALID_HANDLE);
    const std::string before = trn_last_error();
    CHECK(trn_sem_wait(s, 2, 0) == TRN_TIMEOUT);
    CHECK(trn_last_error() == before);
    CHECK(value_of(s) == 1);
  }
  REQUIRE(trn_sem_destroy(sem) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(shared) == TRN_SUCCESS);
}

namespace {

// Waiters on other threads woken by signals. `park`: the signals come long after the spin
// budget, so the waiters sleep on the futex first.
void check_wake_ups(bool park) {
  const uint32_t flags = GENERATE(0u, TRN_SEM_FLAG_EXPORTABLE);
  INFO((park ? "parked" : "spinning") << (flags ? ", exportable" : ""));
  const trn_device_t device = first_device();
  trn_sem_t sem = make_sem(device, 0, flags);

  // One waiter per value 1..4; each must finish only once its value was signalled.
  constexpr int kWaiters = 4;
  std::atomic<uint64_t> signalled{0};
  std::atomic<int> started{0};
  std::vector<trn_result_t> results(kWaiters, TRN_ERROR_INTERNAL);
  std::vector<uint64_t> seen_signalled(kWaiters, 0);
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&, i] {
      started.fetch_add(1);
      results[i] = trn_sem_wait(sem, uint64_t(i) + 1, 10 * kSecond);
      seen_signalled[i] = signalled.load();
    });
  }
  while (started.load() < kWaiters) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(park ? 50 : 1));
  for (uint64_t v = 1; v <= kWaiters; ++v) {
    signalled.store(v);
    REQUIRE(trn_sem_signal(sem, v) == TRN_SUCCESS);
    if (park) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto &t : waiters) t.join();
  for (int i = 0; i < kWaiters; ++i) {
    INFO("waiter for " << i + 1);
    CHECK(results[i] == TRN_SUCCESS);
    CHECK(seen_signalled[i] >= uint64_t(i) + 1);
  }

  // Ping-pong between two threads: every round is a wake-up in each direction.
  trn_sem_t ping = make_sem(device, 0, flags);
  trn_sem_t pong = make_sem(device, 0, flags);
  const uint64_t rounds = park ? 50 : 500;
  trn_result_t peer_result = TRN_SUCCESS;
  std::thread peer([&] {
    for (uint64_t r = 1; r <= rounds && peer_result == TRN_SUCCESS; ++r) {
      peer_result = trn_sem_wait(ping, r, 10 * kSecond);
      if (peer_result == TRN_SUCCESS) peer_result = trn_sem_signal(pong, r);
    }
  });
  trn_result_t own_result = TRN_SUCCESS;
  for (uint64_t r = 1; r <= rounds && own_result == TRN_SUCCESS; ++r) {
    own_result = trn_sem_signal(ping, r);
    if (own_result == TRN_SUCCESS) own_result = trn_sem_wait(pong, r, 10 * kSecond);
  }
  peer.join();
  CHECK(own_result == TRN_SUCCESS);
  CHECK(peer_result == TRN_SUCCESS);
  CHECK(value_of(ping) == rounds);
  CHECK(value_of(pong) == rounds);
  REQUIRE(trn_sem_destroy(ping) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(pong) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(sem) == TRN_SUCCESS);
}

}  // namespace

TEST_CASE("a thread spinning in trn_sem_wait is woken by a signal from another thread",
          "[semaphores][threads]") {
  SimEnv env;
  check_wake_ups(false);
}

TEST_CASE("a thread parked in trn_sem_wait (TRN_SPIN_NS=0) is woken by another thread",
          "[semaphores][threads]") {
  SimEnv env;
  // Read on the first wait of the process: under ctest each test case is a process of its own,
  // so waiters here sleep on the futex at once.
  ScopedEnv spin(env, "TRN_SPIN_NS", "0");
  check_wake_ups(true);
}

TEST_CASE("a semaphore's file descriptor becomes readable at its value (epoll)",
          "[semaphores][fd]") {
  SimEnv env;
  const trn_device_t device = first_device();
  const uint32_t flags = GENERATE(0u, TRN_SEM_FLAG_EXPORTABLE);
  INFO((flags ? "exportable" : "process-local"));
  trn_sem_t sem = make_sem(device, 0, flags);

  int fd = -1;
  REQUIRE(trn_sem_get_fd(sem, 2, &fd) == TRN_SUCCESS);
  REQUIRE(fd >= 0);
  CHECK(epoll_readable(fd, 0) == 0);
  REQUIRE(trn_sem_signal(sem, 1) == TRN_SUCCESS);
  CHECK(epoll_readable(fd, 20) == 0);  // 1 is not 2
  REQUIRE(trn_sem_signal(sem, 2) == TRN_SUCCESS);
  CHECK(epoll_readable(fd, 5000) == 1);
  uint64_t count = 0;
  CHECK(read(fd, &count, sizeof count) == static_cast<ssize_t>(sizeof count));
  CHECK(count >= 1);
  close(fd);

  // A value already reached: readable at once. Several descriptors for one value all fire.
  int reached = -1;
  REQUIRE(trn_sem_get_fd(sem, 1, &reached) == TRN_SUCCESS);
  CHECK(epoll_readable(reached, 0) == 1);
  close(reached);
  int a = -1, b = -1;
  REQUIRE(trn_sem_get_fd(sem, 5, &a) == TRN_SUCCESS);
  REQUIRE(trn_sem_get_fd(sem, 5, &b) == TRN_SUCCESS);
  CHECK(a != b);
  CHECK(epoll_readable(a, 0) == 0);
  CHECK(epoll_readable(b, 0) == 0);
  REQUIRE(trn_sem_signal(sem, 9) == TRN_SUCCESS);  // past the value counts
  CHECK(epoll_readable(a, 5000) == 1);
  CHECK(epoll_readable(b, 5000) == 1);
  close(a);
  close(b);
  // poll(2) sees the same.
  int p = -1;
  REQUIRE(trn_sem_get_fd(sem, 10, &p) == TRN_SUCCESS);
  pollfd pfd{p, POLLIN, 0};
  CHECK(poll(&pfd, 1, 0) == 0);
  REQUIRE(trn_sem_signal(sem, 10) == TRN_SUCCESS);
  CHECK(poll(&pfd, 1, 5000) == 1);
  CHECK((pfd.revents & POLLIN) != 0);
  close(p);
  REQUIRE(trn_sem_destroy(sem) == TRN_SUCCESS);
}

TEST_CASE("an exported semaphore is waited on and signalled by another process",
          "[semaphores][ipc]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_sem_t sem = make_sem(device, 0, TRN_SEM_FLAG_EXPORTABLE);
  trn_ipc_handle_t handle;
  std::memset(&handle, 0, sizeof handle);
  REQUIRE(trn_sem_export(sem, &handle) == TRN_SUCCESS);

  // The child: import on its device 0, wait for 1, signal 2. Exit codes say which step failed.
  const pid_t child = fork_child([&handle] {
    uint32_t count = 1;
    trn_device_t child_device = nullptr;
    if (trn_device_get(&count, &child_device) != TRN_SUCCESS || count != 1) return 10;
    trn_sem_t imported = nullptr;
    if (trn_sem_import(child_device, &handle, &imported) != TRN_SUCCESS) return 11;
    if (trn_sem_wait(imported, 1, 10 * kSecond) != TRN_SUCCESS) return 12;
    if (trn_sem_signal(imported, 2) != TRN_SUCCESS) return 13;
    if (trn_sem_destroy(imported) != TRN_SUCCESS) return 14;
    return 0;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(value_of(sem) == 0);  // the child only waits
  REQUIRE(trn_sem_signal(sem, 1) == TRN_SUCCESS);
  const auto start = Clock::now();
  const trn_result_t waited = trn_sem_wait(sem, 2, 10 * kSecond);
  INFO(last_error());
  CHECK(waited == TRN_SUCCESS);
  CHECK(seconds_since(start) < 10.0);
  CHECK(wait_child(child, 10000) == 0);
  CHECK(value_of(sem) == 2);
  // The child's exit does not take the semaphore from the exporter.
  REQUIRE(trn_sem_signal(sem, 3) == TRN_SUCCESS);
  CHECK(value_of(sem) == 3);
  REQUIRE(trn_sem_destroy(sem) == TRN_SUCCESS);
}

TEST_CASE("an exported semaphore imported in its own process lives until both let go",
          "[semaphores][ipc]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_sem_t sem = make_sem(device, 5, TRN_SEM_FLAG_EXPORTABLE);
  trn_ipc_handle_t handle;
  REQUIRE(trn_sem_export(sem, &handle) == TRN_SUCCESS);
  trn_sem_t imported = nullptr;
  REQUIRE(trn_sem_import(device, &handle, &imported) == TRN_SUCCESS);
  CHECK(imported != sem);
  CHECK(value_of(imported) == 5);
  REQUIRE(trn_sem_signal(imported, 6) == TRN_SUCCESS);
  CHECK(value_of(sem) == 6);
  REQUIRE(trn_sem_signal(sem, 7) == TRN_SUCCESS);
  CHECK(trn_sem_wait(imported, 7, kSecond) == TRN_SUCCESS);

  // The exporter lets go: the import still holds the semaphore, whatever is created next.
  REQUIRE(trn_sem_destroy(sem) == TRN_SUCCESS);
  trn_sem_t other = make_sem(device, 100, TRN_SEM_FLAG_EXPORTABLE);
  CHECK(value_of(other) == 100);
  CHECK(value_of(imported) == 7);
  REQUIRE(trn_sem_signal(imported, 8) == TRN_SUCCESS);
  CHECK(value_of(imported) == 8);
  CHECK(value_of(other) == 100);
  // It can still be imported while the import holds it.
  trn_sem_t again = nullptr;
  INFO(last_error());
  CHECK(trn_sem_import(device, &handle, &again) == TRN_SUCCESS);
  if (again) {
    CHECK(value_of(again) == 8);
    REQUIRE(trn_sem_destroy(again) == TRN_SUCCESS);
  }
  REQUIRE(trn_sem_destroy(imported) == TRN_SUCCESS);
  // Now nobody holds it: the handle is refused.
  trn_sem_t gone = nullptr;
  CHECK(trn_sem_import(device, &handle, &gone) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("trn_sem_import: "));
  CHECK(error_contains("gone"));
  CHECK(gone == nullptr);
  REQUIRE(trn_sem_destroy(other) == TRN_SUCCESS);
}

TEST_CASE("export and import refuse what is not a shareable semaphore",
          "[semaphores][ipc][negative]") {
  SimEnv env;
  env.set("TRN_SIM_DEVICES", "2");
  const auto list = devices();
  REQUIRE(list.size() == 2);
  const trn_device_t device = list[0];

  trn_sem_t local = make_sem(device, 1);
  trn_ipc_handle_t handle;
  std::memset(&handle, 0x5c, sizeof handle);
  CHECK(trn_sem_export(local, &handle) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("trn_sem_export: "));
  CHECK(error_contains("TRN_SEM_FLAG_EXPORTABLE"));

  trn_sem_t imported = nullptr;
  SECTION("garbage bytes") {
    for (uint8_t fill : {uint8_t{0}, uint8_t{0xff}, uint8_t{0x5c}}) {
      trn_ipc_handle_t garbage;
      std::memset(&garbage, fill, sizeof garbage);
      INFO("fill " << int(fill));
      CHECK(trn_sem_import(device, &garbage, &imported) == TRN_ERROR_INVALID_ARGUMENT);
      CHECK(error_contains("trn_sem_import: "));
      CHECK(error_contains("not a trn semaphore handle"));
      CHECK(imported == nullptr);
    }
  }
  trn_sem_t shared = make_sem(device, 3, TRN_SEM_FLAG_EXPORTABLE);
  trn_ipc_handle_t good;
  REQUIRE(trn_sem_export(shared, &good) == TRN_SUCCESS);
  SECTION("a handle of another device") {
    CHECK(trn_sem_import(list[1], &good, &imported) == TRN_ERROR_INVALID_ARGUMENT);
    CHECK(error_contains("device 0"));
    CHECK(imported == nullptr);
  }
  SECTION("a memory handle is not a semaphore handle") {
    trn_pool_desc_t pool_desc = TRN_POOL_DESC_INIT;
    trn_pool_t pool = nullptr;
    REQUIRE(trn_pool_create(device, &pool_desc, &pool) == TRN_SUCCESS);
    trn_mem_t mem = nullptr;
    REQUIRE(trn_mem_alloc(pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, TRN_MEM_FLAG_EXPORTABLE, &mem) ==
            TRN_SUCCESS);
    trn_ipc_handle_t mem_handle;
    REQUIRE(trn_mem_export(mem, &mem_handle) == TRN_SUCCESS);
    CHECK(trn_sem_import(device, &mem_handle, &imported) == TRN_ERROR_INVALID_ARGUMENT);
    CHECK(imported == nullptr);
    REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
    REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  }
  SECTION("a damaged handle") {
    trn_ipc_handle_t damaged = good;
    for (size_t i = 8; i < sizeof damaged.bytes; ++i) damaged.bytes[i] ^= 0xa5;
    CHECK(trn_sem_import(device, &damaged, &imported) == TRN_ERROR_INVALID_ARGUMENT);
    CHECK(imported == nullptr);
  }
  SECTION("NULL pointers and bad device handles") {
    CHECK(trn_sem_import(device, nullptr, &imported) == TRN_ERROR_NULL_POINTER);
    CHECK(error_contains("trn_sem_import: "));
    CHECK(trn_sem_import(device, &good, nullptr) == TRN_ERROR_NULL_POINTER);
    CHECK(trn_sem_export(shared, nullptr) == TRN_ERROR_NULL_POINTER);
    CHECK(error_contains("trn_sem_export: "));
    CHECK(trn_sem_import(nullptr, &good, &imported) == TRN_ERROR_INVALID_HANDLE);
    CHECK(trn_sem_import(recast<trn_device_t>(shared), &good, &imported) ==
          TRN_ERROR_INVALID_HANDLE);
    CHECK(error_contains("expected a device handle but got a semaphore handle"));
    CHECK(imported == nullptr);
  }
  // The good handle still imports.
  REQUIRE(trn_sem_import(device, &good, &imported) == TRN_SUCCESS);
  CHECK(value_of(imported) == 3);
  REQUIRE(trn_sem_destroy(imported) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(shared) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(local) == TRN_SUCCESS);
}

TEST_CASE("a queue's own semaphore is signalled and destroyed only by its queue",
          "[semaphores][queues]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_queue_t queue = make_queue(core_at(device, 0));
  trn_sem_t timeline = nullptr;
  REQUIRE(trn_queue_get_semaphore(queue, &timeline) == TRN_SUCCESS);
  REQUIRE(timeline != nullptr);
  CHECK(value_of(timeline) == 0);

  CHECK(trn_sem_signal(timeline, 1) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("trn_sem_signal: "));
  CHECK(error_contains("queue's semaphore"));
  CHECK(trn_sem_destroy(timeline) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("trn_sem_destroy: "));
  CHECK(error_contains("trn_queue_destroy"));
  trn_ipc_handle_t handle;
  CHECK(trn_sem_export(timeline, &handle) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(value_of(timeline) == 0);

  // It is waited on, queried and polled like any other.
  uint64_t sequence = 0;
  REQUIRE(trn_queue_barrier(queue, nullptr, &sequence) == TRN_SUCCESS);
  CHECK(sequence == 1);
  CHECK(trn_sem_wait(timeline, 1, 10 * kSecond) == TRN_SUCCESS);
  CHECK(value_of(timeline) == 1);
  int fd = -1;
  REQUIRE(trn_sem_get_fd(timeline, 1, &fd) == TRN_SUCCESS);
  CHECK(epoll_readable(fd, 0) == 1);
  close(fd);

  // It goes with the queue.
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  CHECK(trn_sem_wait(timeline, 1, 0) == TRN_ERROR_INVALID_HANDLE);
  CHECK(error_contains("stale"));
  uint64_t value = 0;
  CHECK(trn_sem_query(timeline, &value) == TRN_ERROR_INVALID_HANDLE);
}

TEST_CASE("a semaphore a queued command still uses cannot be destroyed", "[semaphores][queues]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_queue_t queue = make_queue(core_at(device, 0));
  trn_sem_t gate = make_sem(device);
  trn_sem_t done = make_sem(device);

  const trn_sem_point_t wait_point{gate, 1};
  const trn_sem_point_t signal_point{done, 1};
  trn_sync_t sync{&wait_point, 1, &signal_point, 1};
  REQUIRE(trn_queue_barrier(queue, &sync, nullptr) == TRN_SUCCESS);

  CHECK(trn_sem_destroy(gate) == TRN_ERROR_HANDLE_IN_USE);
  CHECK(error_contains("trn_sem_destroy: "));
  CHECK(error_contains("queued commands"));
  CHECK(trn_sem_destroy(done) == TRN_ERROR_HANDLE_IN_USE);
  // Both still work.
  CHECK(value_of(done) == 0);
  REQUIRE(trn_sem_signal(gate, 1) == TRN_SUCCESS);
  REQUIRE(trn_queue_finish(queue, 10 * kSecond) == TRN_SUCCESS);
  CHECK(trn_sem_wait(done, 1, 0) == TRN_SUCCESS);
  CHECK(trn_sem_destroy(gate) == TRN_SUCCESS);
  CHECK(trn_sem_destroy(done) == TRN_SUCCESS);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
}

TEST_CASE("trn_sem_create refuses bad descriptors and pointers", "[semaphores][negative]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_sem_t sem = nullptr;
  trn_sem_desc_t desc = TRN_SEM_DESC_INIT;

  CHECK(trn_sem_create(device, nullptr, &sem) == TRN_ERROR_NULL_POINTER);
  CHECK(error_contains("trn_sem_create: "));
  CHECK(error_contains("desc"));
  CHECK(trn_sem_create(device, &desc, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(error_contains("trn_sem_create: "));

  trn_sem_desc_t bad_tag = TRN_SEM_DESC_INIT;
  bad_tag.header.type = TRN_STRUCT_QUEUE_DESC;
  CHECK(trn_sem_create(device, &bad_tag, &sem) == TRN_ERROR_INVALID_STRUCT);
  CHECK(error_contains("TRN_SEM_DESC_INIT"));
  trn_sem_desc_t zero_size = TRN_SEM_DESC_INIT;
  zero_size.header.size = 0;
  CHECK(trn_sem_create(device, &zero_size, &sem) == TRN_ERROR_INVALID_STRUCT);
  trn_sem_desc_t uninitialised;
  std::memset(&uninitialised, 0, sizeof uninitialised);
  CHECK(trn_sem_create(device, &uninitialised, &sem) == TRN_ERROR_INVALID_STRUCT);

  for (uint32_t flags : {0x2u, 0x80000000u, 0x3u, 0xffffffffu}) {
    INFO("flags " << flags);
    trn_sem_desc_t bad_flags = TRN_SEM_DESC_INIT;
    bad_flags.flags = flags;
    CHECK(trn_sem_create(device, &bad_flags, &sem) == TRN_ERROR_INVALID_ARGUMENT);
    CHECK(error_contains("flags"));
  }

  CHECK(trn_sem_create(nullptr, &desc, &sem) == TRN_ERROR_INVALID_HANDLE);
  CHECK(error_contains("device handle is NULL"));
  CHECK(trn_sem_create(recast<trn_device_t>(core_at(device, 0)), &desc, &sem) ==
        TRN_ERROR_INVALID_HANDLE);
  CHECK(error_contains("expected a device handle but got a core handle"));
  CHECK(trn_sem_create(handle_from<trn_device_t>(0x1234), &desc, &sem) == TRN_ERROR_INVALID_HANDLE);
  CHECK(sem == nullptr);

  // A descriptor from an older, smaller header (just the header and the initial value) works.
  trn_sem_desc_t older = TRN_SEM_DESC_INIT;
  older.header.size = static_cast<uint32_t>(offsetof(trn_sem_desc_t, flags));
  older.initial_value = 9;
  older.flags = 0xdead;  // beyond its size: not read
  REQUIRE(trn_sem_create(device, &older, &sem) == TRN_SUCCESS);
  CHECK(value_of(sem) == 9);
  REQUIRE(trn_sem_destroy(sem) == TRN_SUCCESS);
}

TEST_CASE("semaphore functions refuse NULL pointers", "[semaphores][negative][null]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_sem_t sem = make_sem(device, 1);
  CHECK(trn_sem_query(sem, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(error_contains("trn_sem_query: value is NULL"));
  CHECK(trn_sem_get_fd(sem, 1, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(error_contains("trn_sem_get_fd: fd is NULL"));
  trn_sem_t shared = make_sem(device, 1, TRN_SEM_FLAG_EXPORTABLE);
  CHECK(trn_sem_export(shared, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(error_contains("trn_sem_export: "));
  CHECK(value_of(sem) == 1);
  REQUIRE(trn_sem_destroy(sem) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(shared) == TRN_SUCCESS);
}

TEST_CASE("semaphore functions refuse NULL, stale, wrong-kind and garbage handles",
          "[semaphores][negative][handle]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_sem_t sem = make_sem(device, 3);

  SECTION("NULL") {
    auto calls = sem_calls(nullptr);
    calls.pop_back();  // trn_sem_destroy(NULL) is allowed
    expect_all(calls, TRN_ERROR_INVALID_HANDLE, "semaphore handle is NULL");
    CHECK(trn_sem_destroy(nullptr) == TRN_SUCCESS);  // destroying nothing is allowed
  }
  SECTION("stale: destroyed semaphores") {
    trn_sem_t gone = make_sem(device, 0);
    trn_sem_t gone_shared = make_sem(device, 0, TRN_SEM_FLAG_EXPORTABLE);
    REQUIRE(trn_sem_destroy(gone) == TRN_SUCCESS);
    REQUIRE(trn_sem_destroy(gone_shared) == TRN_SUCCESS);
    expect_all(sem_calls(gone), TRN_ERROR_INVALID_HANDLE, "stale");
    expect_all(sem_calls(gone_shared), TRN_ERROR_INVALID_HANDLE, "stale");
    // A new semaphore in the same slot does not revive the old handle.
    trn_sem_t fresh = make_sem(device, 0);
    CHECK(fresh != gone);
    expect_all(sem_calls(gone), TRN_ERROR_INVALID_HANDLE, "stale");
    CHECK(value_of(fresh) == 0);  // untouched by the stale signals
    REQUIRE(trn_sem_destroy(fresh) == TRN_SUCCESS);
  }
  SECTION("stale: after trn_runtime_shutdown") {
    trn_sem_t old = make_sem(device, 0);
    REQUIRE(trn_runtime_shutdown() == TRN_SUCCESS);
    expect_all(sem_calls(old), TRN_ERROR_INVALID_HANDLE, "stale");
    expect_all(sem_calls(sem), TRN_ERROR_INVALID_HANDLE, "stale");
    sem = make_sem(first_device(), 3);
  }
  SECTION("wrong kind") {
    trn_queue_t queue = make_queue(core_at(device, 1));
    trn_pool_desc_t pool_desc = TRN_POOL_DESC_INIT;
    trn_pool_t pool = nullptr;
    REQUIRE(trn_pool_create(device, &pool_desc, &pool) == TRN_SUCCESS);
    trn_mem_t mem = nullptr;
    REQUIRE(trn_mem_alloc(pool, 512, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem) == TRN_SUCCESS);
    expect_all(sem_calls(recast<trn_sem_t>(device)), TRN_ERROR_INVALID_HANDLE,
               "expected a semaphore handle but got a device handle");
    expect_all(sem_calls(recast<trn_sem_t>(core_at(device, 0))), TRN_ERROR_INVALID_HANDLE,
               "expected a semaphore handle but got a core handle");
    expect_all(sem_calls(recast<trn_sem_t>(pool)), TRN_ERROR_INVALID_HANDLE,
               "expected a semaphore handle but got a pool handle");
    expect_all(sem_calls(recast<trn_sem_t>(mem)), TRN_ERROR_INVALID_HANDLE,
               "expected a semaphore handle but got a memory handle");
    expect_all(sem_calls(recast<trn_sem_t>(queue)), TRN_ERROR_INVALID_HANDLE,
               "expected a semaphore handle but got a queue handle");
    // The objects are unharmed.
    REQUIRE(trn_queue_finish(queue, 10 * kSecond) == TRN_SUCCESS);
    REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
    REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
    REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  }
  SECTION("garbage") {
    const uintptr_t value = reinterpret_cast<uintptr_t>(sem);
    const std::vector<uintptr_t> garbage = {
        0x1,
        0x1234,
        static_cast<uintptr_t>(-1),
        static_cast<uintptr_t>(0xdeadbeefcafef00dull),
        reinterpret_cast<uintptr_t>(&env),
        value + 1,                       // a slot that does not exist
        value + 0xffffff,                // the largest slot
        value ^ (uintptr_t{1} << 40),    // another generation
        value ^ (uintptr_t{0x80} << 24)  // an unknown kind
    };
    for (uintptr_t g : garbage) {
      INFO("handle value " << std::hex << g);
      expect_all(sem_calls(handle_from<trn_sem_t>(g)), TRN_ERROR_INVALID_HANDLE, "handle");
    }
  }
  // The real semaphore is unharmed.
  CHECK(value_of(sem) == 3);
  REQUIRE(trn_sem_destroy(sem) == TRN_SUCCESS);
  CHECK(trn_sem_destroy(sem) == TRN_ERROR_INVALID_HANDLE);  // twice
  CHECK(error_contains("stale"));
}

namespace {

size_t open_descriptors() {
  size_t count = 0;
  for ([[maybe_unused]] const auto &entry : std::filesystem::directory_iterator("/proc/self/fd"))
    ++count;
  return count;
}

// 1 when the descriptor reads the fired count, 0 at end-of-file, -1 when nothing is there yet.
int read_watch(int fd) {
  uint64_t count = 0;
  const ssize_t n = read(fd, &count, sizeof count);
  if (n == static_cast<ssize_t>(sizeof count)) return count == 1 ? 1 : -2;
  return n == 0 ? 0 : -1;
}

}  // namespace

TEST_CASE("semaphore descriptors live only as long as their watch", "[semaphores][fd]") {
  SimEnv env;
  const uint32_t flags = GENERATE(0u, TRN_SEM_FLAG_EXPORTABLE);
  INFO((flags ? "exportable" : "process-local"));
  constexpr int kCalls = 3000;

  // Thousands of watches of values never reached, each closed by its caller: nothing piles up
  // (before, every call kept a duplicate until the value came).
  trn_sem_t sem = make_sem(first_device(), 0, flags);
  const size_t before = open_descriptors();
  for (int i = 0; i < kCalls; ++i) {
    int fd = -1;
    REQUIRE(trn_sem_get_fd(sem, 1000 + static_cast<uint64_t>(i), &fd) == TRN_SUCCESS);
    close(fd);
  }
  CHECK(open_descriptors() <= before + 1);  // the last watch's end until the next call

  // Descriptors the caller still holds when the semaphore is destroyed read end-of-file, and
  // the runtime's ends are gone.
  std::vector<int> held(64);
  for (int &fd : held) REQUIRE(trn_sem_get_fd(sem, 1u << 30, &fd) == TRN_SUCCESS);
  CHECK(open_descriptors() <= before + 1 + 2 * held.size());
  REQUIRE(trn_sem_destroy(sem) == TRN_SUCCESS);
  for (int fd : held) {
    CHECK(epoll_readable(fd, 1000) == 1);
    CHECK(read_watch(fd) == 0);
    close(fd);
  }
  CHECK(open_descriptors() <= before);
}

TEST_CASE("a watched value that is reached reads like an eventfd, then the watch is gone",
          "[semaphores][fd]") {
  SimEnv env;
  trn_sem_t sem = make_sem(first_device());
  const size_t before = open_descriptors();
  // A launch-loop shape: watch the next value, reach it, read, close.
  for (uint64_t value = 1; value <= 2000; ++value) {
    int fd = -1;
    REQUIRE(trn_sem_get_fd(sem, value, &fd) == TRN_SUCCESS);
    REQUIRE(trn_sem_signal(sem, value) == TRN_SUCCESS);
    REQUIRE(read_watch(fd) == 1);
    close(fd);
  }
  CHECK(open_descriptors() == before);
  REQUIRE(trn_sem_destroy(sem) == TRN_SUCCESS);
}

TEST_CASE("shutdown and queue destroy end every watch", "[semaphores][fd]") {
  SimEnv env;
  trn_runtime_shutdown();
  const size_t idle = open_descriptors();  // no runtime, no driver
  const trn_device_t device = first_device();
  trn_sem_t sem = make_sem(device, 0, TRN_SEM_FLAG_EXPORTABLE);
  trn_sem_t local = make_sem(device);
  trn_queue_desc_t desc = TRN_QUEUE_DESC_INIT;
  desc.core = core_at(device, 0);
  desc.kind = TRN_QUEUE_KIND_COPY;
  trn_queue_t queue = nullptr;
  REQUIRE(trn_queue_create(&desc, &queue) == TRN_SUCCESS);
  trn_sem_t timeline = nullptr;
  REQUIRE(trn_queue_get_semaphore(queue, &timeline) == TRN_SUCCESS);

  int on_queue = -1;
  REQUIRE(trn_sem_get_fd(timeline, 100, &on_queue) == TRN_SUCCESS);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  CHECK(epoll_readable(on_queue, 1000) == 1);
  CHECK(read_watch(on_queue) == 0);
  close(on_queue);

  std::vector<int> held;
  for (int i = 0; i < 500; ++i) {
    int a = -1, b = -1;
    REQUIRE(trn_sem_get_fd(sem, 10 + static_cast<uint64_t>(i), &a) == TRN_SUCCESS);
    REQUIRE(trn_sem_get_fd(local, 10 + static_cast<uint64_t>(i), &b) == TRN_SUCCESS);
    held.push_back(a);
    held.push_back(b);
  }
  trn_runtime_shutdown();
  for (int fd : held) {
    CHECK(read_watch(fd) == 0);
    close(fd);
  }
  // The shared-cell poller may still be finishing its last round.
  for (int i = 0; i < 200 && open_descriptors() > idle; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(open_descriptors() == idle);
}

TEST_CASE("trn_sem_fail fails host waits and queue waits with its reason until a signal",
          "[semaphores][queues]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_sem_t sem = nullptr;
  trn_sem_desc_t desc = TRN_SEM_DESC_INIT;
  REQUIRE(trn_sem_create(device, &desc, &sem) == TRN_SUCCESS);
  trn_queue_t queue = make_queue(core_at(device, 0));
  const trn_sem_point_t wait{sem, 1};
  const trn_sync_t sync{&wait, 1, nullptr, 0};
  uint64_t sequence = 0;
  REQUIRE(trn_queue_barrier(queue, &sync, &sequence) == TRN_SUCCESS);

  REQUIRE(trn_sem_fail(sem, "the peer that signals it died") == TRN_SUCCESS);
  CHECK(trn_sem_wait(sem, 1, 10 * kSecond) == TRN_ERROR_CANCELLED);
  CHECK(error_contains("the peer that signals it died"));
  CHECK(trn_queue_finish(queue, 10 * kSecond) == TRN_ERROR_CANCELLED);
  trn_queue_fault_t fault = TRN_QUEUE_FAULT_INIT;
  REQUIRE(trn_queue_get_fault(queue, &fault) == TRN_SUCCESS);
  CHECK(fault.sequence == sequence);
  CHECK(std::string(fault.reason).find("the peer that signals it died") != std::string::npos);

  // A signal clears the mark; a NULL reason gets a default one.
  REQUIRE(trn_sem_signal(sem, 1) == TRN_SUCCESS);
  CHECK(trn_sem_wait(sem, 1, 0) == TRN_SUCCESS);
  REQUIRE(trn_sem_fail(sem, nullptr) == TRN_SUCCESS);
  CHECK(trn_sem_wait(sem, 2, 0) == TRN_ERROR_CANCELLED);
  CHECK(error_contains("trn_sem_fail"));

  // Refused: a queue's own semaphore, and handles that are not semaphores.
  REQUIRE(trn_queue_reset(queue) == TRN_SUCCESS);
  trn_sem_t timeline = nullptr;
  REQUIRE(trn_queue_get_semaphore(queue, &timeline) == TRN_SUCCESS);
  CHECK(trn_sem_fail(timeline, "no") == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("queue's semaphore"));
  CHECK(trn_sem_fail(nullptr, "no") == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_sem_fail(reinterpret_cast<trn_sem_t>(queue), "no") == TRN_ERROR_INVALID_HANDLE);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(sem) == TRN_SUCCESS);
  CHECK(trn_sem_fail(sem, "no") == TRN_ERROR_INVALID_HANDLE);
}
