// Semaphores: values that only grow, host waits with deadlines (and across threads), failure
// and its clearing, watch descriptors, shareable semaphores imported as separate holds, and the
// simulated time each value carries.
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <thread>
#include <utility>

#include "loader_support.hpp"

using namespace conformance;

namespace {

// Whether `fd` is readable within `timeout_ms`.
bool readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  const int n = poll(&p, 1, timeout_ms);
  return n == 1 && (p.revents & (POLLIN | POLLHUP));
}

}  // namespace

TEST_CASE("semaphores: created at the initial value", "[semaphores]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Sem zero(inst, 0, 0);
  Sem seven(inst, 0, 7);
  CHECK(zero.value() == 0);
  CHECK(seven.value() == 7);
  const auto s = seven.state();
  CHECK(s.value == 7);
  CHECK(s.failed == 0);
  CHECK(s.reason[0] == '\0');
  CHECK(ops().sem_wait(seven, 7, 0) == TRN_SUCCESS);
  CHECK(ops().sem_wait(seven, 3, 0) == TRN_SUCCESS);
  ops().sem_destroy(inst, nullptr);  // accepts NULL
}

TEST_CASE("semaphores: host signals raise and never lower", "[semaphores]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Sem s(inst, 0, 0);
  ops().sem_signal(s, 5, 0);
  CHECK(s.value() == 5);
  ops().sem_signal(s, 3, 0);
  CHECK(s.value() == 5);
  CHECK(s.state().value == 5);
  ops().sem_signal(s, 5, 0);
  CHECK(s.value() == 5);
  ops().sem_signal(s, 1000000, 0);
  CHECK(s.value() == 1000000);
}

TEST_CASE("semaphores: sem_raise raises, and refuses a lower value changing nothing",
          "[semaphores]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Sem s(inst, 0, 0);
  uint64_t current = 99;
  CHECK(ops().sem_raise(s, 5, 0, &current) == TRN_SUCCESS);
  CHECK(s.value() == 5);
  CHECK(ops().sem_raise(s, 5, 0, &current) == TRN_SUCCESS);  // equal: nothing to raise
  CHECK(s.value() == 5);
  current = 0;
  CHECK(ops().sem_raise(s, 3, 0, &current) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(current == 5);
  CHECK(s.value() == 5);
  // A refused raise leaves the failed mark too; an accepted one with clear_failure clears it.
  ops().sem_fail(s, "the producer died");
  CHECK(ops().sem_raise(s, 4, 1, &current) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(current == 5);
  CHECK(s.state().failed != 0);
  CHECK(ops().sem_raise(s, 6, 1, &current) == TRN_SUCCESS);
  const auto st = s.state();
  CHECK(st.failed == 0);
  CHECK(st.reason[0] == '\0');
  CHECK(st.value == 6);
  CHECK(ops().sem_raise(nullptr, 7, 0, &current) == TRN_ERROR_NULL_POINTER);
  CHECK(ops().sem_raise(s, 7, 0, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(s.value() == 6);
}

TEST_CASE("semaphores: waits time out at their deadline", "[semaphores]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Sem s(inst, 0, 1);
  CHECK(ops().sem_wait(s, 2, 0) == TRN_TIMEOUT);
  const uint64_t timeout = 20 * kMs;
  const uint64_t start = monotonic_ns();
  CHECK(ops().sem_wait(s, 2, timeout) == TRN_TIMEOUT);
  const uint64_t took = monotonic_ns() - start;
  INFO("a 20 ms wait took " << took / 1000 << " us");
  CHECK(took + kMs >= timeout);
  CHECK(took < 5 * kSecond);
  CHECK(s.value() == 1);
}

TEST_CASE("semaphores: a wait ends when another thread signals or raises", "[semaphores]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Sem s(inst, 0, 0);
  std::atomic<int> result{-1};
  // The table is looked up here: Catch2's assertions (inside ops()) are for the main thread.
  const trn_hal_ops_t &hal = ops();
  std::thread waiter([&] { result = hal.sem_wait(s, 3, kLong); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(result.load() == -1);
  ops().sem_signal(s, 2, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(result.load() == -1);
  SECTION("by sem_signal") {
    ops().sem_signal(s, 3, 0);
  }
  SECTION("by sem_raise") {
    uint64_t current = 0;
    CHECK(ops().sem_raise(s, 3, 0, &current) == TRN_SUCCESS);
  }
  waiter.join();
  CHECK(static_cast<trn_result_t>(result.load()) == TRN_SUCCESS);
}

TEST_CASE("semaphores: failing cancels waiters and clear_failure clears it", "[semaphores]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Sem s(inst, 0, 2);
  std::atomic<int> result{-1};
  // The table is looked up here: Catch2's assertions (inside ops()) are for the main thread.
  const trn_hal_ops_t &hal = ops();
  std::thread waiter([&] { result = hal.sem_wait(s, 5, kLong); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ops().sem_fail(s, "the producer died");
  waiter.join();
  CHECK(static_cast<trn_result_t>(result.load()) == TRN_ERROR_CANCELLED);
  auto st = s.state();
  CHECK(st.failed != 0);
  CHECK(std::string(st.reason).find("the producer died") != std::string::npos);
  CHECK(st.value == 2);
  // New waits for values not reached end at once; reached values still succeed.
  CHECK(ops().sem_wait(s, 5, kLong) == TRN_ERROR_CANCELLED);
  CHECK(ops().sem_wait(s, 2, 0) == TRN_SUCCESS);
  // A signal without clear_failure leaves it failed.
  ops().sem_signal(s, 3, 0);
  CHECK(s.state().failed != 0);
  ops().sem_signal(s, 4, 1);
  st = s.state();
  CHECK(st.failed == 0);
  CHECK(st.reason[0] == '\0');
  CHECK(st.value == 4);
  CHECK(ops().sem_wait(s, 5, 0) == TRN_TIMEOUT);
  ops().sem_signal(s, 5, 0);
  CHECK(ops().sem_wait(s, 5, kLong) == TRN_SUCCESS);
}

TEST_CASE("semaphores: a watch descriptor becomes readable at the value", "[semaphores]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Sem s(inst, 0, 0);
  Err err;
  int fd = -1;
  HAL_REQUIRE_OK(ops().sem_watch(s, 2, &fd, &err), err);
  REQUIRE(fd >= 0);
  CHECK_FALSE(readable(fd, 0));
  ops().sem_signal(s, 1, 0);
  CHECK_FALSE(readable(fd, 20));
  ops().sem_signal(s, 2, 0);
  CHECK(readable(fd, 5000));
  uint64_t word = 0;
  CHECK(read(fd, &word, sizeof word) == static_cast<ssize_t>(sizeof word));
  close(fd);

  // A value already reached: readable at once.
  int now = -1;
  HAL_REQUIRE_OK(ops().sem_watch(s, 1, &now, &err), err);
  CHECK(readable(now, 5000));
  close(now);
}

TEST_CASE("semaphores: a watch descriptor becomes readable on failure", "[semaphores]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Sem s(inst, 0, 0);
  Err err;
  int fd = -1;
  HAL_REQUIRE_OK(ops().sem_watch(s, 10, &fd, &err), err);
  REQUIRE(fd >= 0);
  CHECK_FALSE(readable(fd, 20));
  ops().sem_fail(s, "gone");
  CHECK(readable(fd, 5000));
  close(fd);
}

TEST_CASE("semaphores: a shareable semaphore imported is its own hold", "[semaphores]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Err err;
  trn_hal_sem_t *created = nullptr;
  uint32_t record = 0;
  uint64_t id = 0;
  HAL_REQUIRE_OK(ops().sem_create(inst, 0, 4, TRN_HAL_SEM_SHAREABLE, &created, &record, &id, &err),
                 err);
  REQUIRE(created != nullptr);
  trn_hal_sem_t *imported = nullptr;
  HAL_REQUIRE_OK(ops().sem_import(inst, 0, record, id, &imported, &err), err);
  REQUIRE(imported != nullptr);
  CHECK(imported != created);  // each hold its own object
  CHECK(ops().sem_value(imported) == 4);
  ops().sem_signal(created, 6, 0);
  CHECK(ops().sem_value(imported) == 6);
  ops().sem_signal(imported, 8, 0);
  CHECK(ops().sem_value(created) == 8);
  // Let go of the creating hold: the import still works.
  ops().sem_destroy(inst, created);
  CHECK(ops().sem_value(imported) == 8);
  ops().sem_signal(imported, 9, 0);
  CHECK(ops().sem_value(imported) == 9);
  CHECK(ops().sem_wait(imported, 9, kLong) == TRN_SUCCESS);
  ops().sem_destroy(inst, imported);

  // Unknown ids are refused.
  trn_hal_sem_t *none = nullptr;
  HAL_CHECK_FAILS(ops().sem_import(inst, 0, record, id + 99991, &none, &err), err);
  CHECK(none == nullptr);
}

TEST_CASE("semaphores: an import racing the last hold's destroy keeps the semaphore",
          "[semaphores][threads]") {
  // Either the destroy comes first (the semaphore is gone, the import is refused) or the import
  // does (it is a hold, and the semaphore stays this process's until the import lets go).
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const trn_hal_ops_t &hal = ops();  // here: Catch's checks in ops() are not for threads
  const uint64_t deadline = monotonic_ns() + 2 * kSecond;
  int rounds = 0, imports = 0;
  for (; rounds < 300 && monotonic_ns() < deadline; ++rounds) {
    Err err;
    trn_hal_sem_t *created = nullptr, *imported = nullptr;
    uint32_t record = 0;
    uint64_t id = 0;
    HAL_REQUIRE_OK(hal.sem_create(inst, 0, 1, TRN_HAL_SEM_SHAREABLE, &created, &record, &id, &err),
                   err);
    std::atomic<int> ready{0};
    std::thread destroyer([&] {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
      hal.sem_destroy(inst, created);
    });
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    Err import_err;
    const trn_result_t imported_result =
        hal.sem_import(inst, 0, record, id, &imported, &import_err);
    destroyer.join();
    if (imported_result != TRN_SUCCESS) continue;
    ++imports;
    // The imported semaphore is still this process's: a new one gets another record, and the
    // two never share a value.
    trn_hal_sem_t *other = nullptr;
    uint32_t other_record = 0;
    uint64_t other_id = 0;
    HAL_REQUIRE_OK(
        hal.sem_create(inst, 0, 0, TRN_HAL_SEM_SHAREABLE, &other, &other_record, &other_id, &err),
        err);
    INFO("round " << rounds);
    CHECK(other_record != record);
    hal.sem_signal(imported, 7, 0);
    CHECK(hal.sem_value(other) == 0);
    CHECK(hal.sem_value(imported) == 7);
    hal.sem_destroy(inst, other);
    hal.sem_destroy(inst, imported);
  }
  INFO(rounds << " rounds, " << imports << " imports first");
  CHECK(rounds > 0);
}

TEST_CASE("semaphores: device time is non-decreasing across signals", "[semaphores]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Sem s(inst, 0, 0);
  uint64_t last = s.state().device_ns;
  uint64_t last_device = ops().device_time_ns(inst, 0);
  for (uint64_t v = 1; v <= 20; ++v) {
    ops().sem_signal(s, v, 0);
    const auto st = s.state();
    INFO("value " << v);
    CHECK(st.value == v);
    CHECK(st.device_ns >= last);
    last = st.device_ns;
    const uint64_t t = ops().device_time_ns(inst, 0);
    CHECK(t >= last_device);
    CHECK(t >= st.device_ns);
    last_device = t;
  }
}

TEST_CASE("semaphores: watch descriptors read end-of-file after destroy", "[semaphores]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Err err;
  trn_hal_sem_t *sem = nullptr;
  uint32_t record = 0;
  uint64_t id = 0;
  HAL_REQUIRE_OK(ops().sem_create(inst, 0, 0, 0, &sem, &record, &id, &err), err);
  int fd = -1;
  HAL_REQUIRE_OK(ops().sem_watch(sem, 1, &fd, &err), err);
  REQUIRE(fd >= 0);
  ops().sem_destroy(inst, sem);
  CHECK(readable(fd, 5000));
  uint64_t word = 0;
  CHECK(read(fd, &word, sizeof word) == 0);
  close(fd);
}

namespace {

// Two more holds (imports) of a shareable semaphore in this process.
std::pair<trn_hal_sem_t *, trn_hal_sem_t *> import_twice(trn_hal_instance_t *inst, const Sem &s) {
  Err err;
  trn_hal_sem_t *a = nullptr, *b = nullptr;
  HAL_REQUIRE_OK(ops().sem_import(inst, 0, s.record(), s.id(), &a, &err), err);
  HAL_REQUIRE_OK(ops().sem_import(inst, 0, s.record(), s.id(), &b, &err), err);
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  REQUIRE(a != b);
  return {a, b};
}

int watch(trn_hal_sem_t *sem, uint64_t value) {
  Err err;
  int fd = -1;
  HAL_REQUIRE_OK(ops().sem_watch(sem, value, &fd, &err), err);
  REQUIRE(fd >= 0);
  return fd;
}

// Reads one word: 8 (readable, a value reached), 0 (end-of-file) or -1.
ssize_t read_word(int fd) {
  uint64_t word = 0;
  return read(fd, &word, sizeof word);
}

}  // namespace

TEST_CASE("semaphores: sem_close_watches ends this hold's watches, not another hold's",
          "[semaphores]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Sem s(inst, 0, 0, TRN_HAL_SEM_SHAREABLE);
  const auto [a, b] = import_twice(inst, s);
  const int fa = watch(a, 1), fa2 = watch(a, 2), fb = watch(b, 1), fs = watch(s, 1);
  ops().sem_close_watches(a);
  CHECK(readable(fa, 5000));
  CHECK(read_word(fa) == 0);
  CHECK(readable(fa2, 5000));
  CHECK(read_word(fa2) == 0);
  // The other holds' watches still wait for the value.
  CHECK_FALSE(readable(fb, 20));
  CHECK_FALSE(readable(fs, 0));
  // The hold itself still works, and the others' watches see its signal.
  ops().sem_signal(a, 1, 0);
  CHECK(ops().sem_value(a) == 1);
  CHECK(readable(fb, 5000));
  CHECK(read_word(fb) == 8);
  CHECK(readable(fs, 5000));
  CHECK(read_word(fs) == 8);
  close(fa);
  close(fa2);
  close(fb);
  close(fs);
  ops().sem_destroy(inst, a);
  ops().sem_destroy(inst, b);
}

TEST_CASE("semaphores: destroying one hold ends its watches only", "[semaphores]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Sem s(inst, 0, 0, TRN_HAL_SEM_SHAREABLE);
  const auto [a, b] = import_twice(inst, s);
  const int fa = watch(a, 5), fb = watch(b, 5);
  ops().sem_destroy(inst, a);
  CHECK(readable(fa, 5000));
  CHECK(read_word(fa) == 0);
  CHECK_FALSE(readable(fb, 20));
  ops().sem_signal(b, 5, 0);
  CHECK(readable(fb, 5000));
  CHECK(read_word(fb) == 8);
  close(fa);
  close(fb);
  ops().sem_destroy(inst, b);
}

TEST_CASE("semaphores: another process imports, signals and fails a shareable semaphore",
          "[semaphores][processes]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Sem s(inst, 0, 1, TRN_HAL_SEM_SHAREABLE);
  Sem failing(inst, 0, 0, TRN_HAL_SEM_SHAREABLE);
  Err err;
  int fd = -1;
  HAL_REQUIRE_OK(ops().sem_watch(s, 5, &fd, &err), err);
  const uint32_t record = s.record(), record2 = failing.record();
  const uint64_t id = s.id(), id2 = failing.id();
  ChildProcess child([&]() -> char {
    const trn_hal_process_identity_t identity{"conformance-signaller", "0.2.0"};
    trn_hal_error_t e{};
    trn_hal_instance_t *other = nullptr;
    if (table().open(&identity, &other, &e) != TRN_SUCCESS) return 'O';
    trn_hal_sem_t *mine = nullptr, *theirs = nullptr;
    if (table().sem_import(other, 0, record, id, &mine, &e) != TRN_SUCCESS) return 'I';
    if (table().sem_import(other, 0, record2, id2, &theirs, &e) != TRN_SUCCESS) return 'I';
    if (table().sem_value(mine) != 1) return 'V';
    table().sem_signal(mine, 5, 0);
    table().sem_fail(theirs, "the other process gave up");
    return 'K';
  });
  const char status = child.status();
  INFO("child status " << status << " (O: open failed, I: import failed, V: wrong value)");
  REQUIRE(status == 'K');
  CHECK(ops().sem_wait(s, 5, kLong) == TRN_SUCCESS);
  CHECK(s.value() == 5);
  pollfd p{fd, POLLIN, 0};
  CHECK(poll(&p, 1, 5000) == 1);
  close(fd);
  CHECK(ops().sem_wait(failing, 1, kLong) == TRN_ERROR_CANCELLED);
  const auto st = failing.state();
  CHECK(st.failed != 0);
  // Why it failed: the header does not say that the failing process's text crosses processes.
  CHECK(std::strlen(st.reason) > 0);
  // The other process exits without letting go: this process's holds still work.
  CHECK(child.release());
  ops().sem_signal(s, 6, 0);
  CHECK(s.value() == 6);
}
