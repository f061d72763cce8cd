// Failures: a buffer that fails (a wait on a failed semaphore, a host call returning an error)
// fails its semaphores and calls its host calls with the failure, cancels every later buffer,
// and leaves a fault record; queue_reset waits for retirement and brings the queue back;
// destroying a queue blocked on a semaphore returns and lets its host calls go.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <thread>

#include "loader_support.hpp"

using namespace conformance;

namespace {

// A host call that blocks (bounded) until released, whatever its status.
struct Blocker {
  std::atomic<bool> entered{false}, release{false};
  std::atomic<int> calls{0};
  std::atomic<int> status{-1};
  static trn_result_t fn(void *user, trn_result_t status, trn_hal_error_t *) {
    auto *b = static_cast<Blocker *>(user);
    b->status = status;
    b->calls++;
    b->entered = true;
    const uint64_t deadline = monotonic_ns() + 5 * kSecond;
    while (!b->release && monotonic_ns() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    return TRN_SUCCESS;
  }
  trn_hal_command_t command() {
    trn_hal_command_t c;
    std::memset(&c, 0, sizeof c);
    c.kind = TRN_HAL_COMMAND_HOST_CALL;
    c.u.host_call.fn = &Blocker::fn;
    c.u.host_call.user = this;
    return c;
  }
};

bool wait_for(const std::atomic<bool> &flag, uint64_t timeout_ns = kLong) {
  const uint64_t deadline = monotonic_ns() + timeout_ns;
  while (!flag && monotonic_ns() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  return flag;
}

}  // namespace

TEST_CASE("failures: a wait on a failed semaphore fails its buffer and cancels later ones",
          "[failures]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  Range r(inst, 0, 1 << 20);
  Sem broken(inst, 0, 0);
  Sem out(inst, 0, 0);
  Sem later(inst, 0, 0);
  HostCalls calls;
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  ops().sem_fail(broken, "upstream failed");
  q.submit({calls.command(0), wait_command(broken, 1), memset_command(r.address(), 64, 9),
            signal_command(out, 1), calls.command(1)},
           "first", 100);
  q.submit({calls.command(2), memset_command(r.address() + 4096, 64, 9), signal_command(later, 1)},
           "copy", 101);
  REQUIRE(q.wait_retired(2));
  REQUIRE(calls.wait_count(3));
  const auto got = calls.calls();
  REQUIRE(got.size() == 3);
  CHECK(got[0].index == 0);
  CHECK(got[0].status == TRN_SUCCESS);
  CHECK(got[1].index == 1);
  CHECK(got[1].status == TRN_ERROR_CANCELLED);
  CHECK(got[2].index == 2);
  CHECK(got[2].status == TRN_ERROR_CANCELLED);

  const auto st = q.status();
  CHECK(st.submitted == 2);
  CHECK(st.retired == 2);
  INFO("fault reason: " << st.fault.reason);
  CHECK(st.fault.result == TRN_ERROR_CANCELLED);
  REQUIRE(st.fault.label != nullptr);
  CHECK(std::string(st.fault.label) == "first");
  CHECK(st.fault.tag == 100);
  CHECK(st.fault.command_index == 1);
  CHECK(st.fault.command_kind == TRN_HAL_COMMAND_SEM_WAIT);
  CHECK(std::strlen(st.fault.reason) > 0);
  CHECK(st.fault.cancelled == 1);

  // The buffer's signal failed its semaphore; so did the cancelled buffer's.
  const auto o = out.state();
  CHECK(o.failed != 0);
  CHECK(o.value == 0);
  CHECK(std::strlen(o.reason) > 0);
  // Failure texts name the buffer by label and tag.
  INFO("out reason: " << o.reason);
  CHECK(std::string(o.reason).rfind("first #100 failed: ", 0) == 0);
  CHECK(ops().sem_wait(out, 1, kLong) == TRN_ERROR_CANCELLED);
  const auto l = later.state();
  CHECK(l.failed != 0);
  CHECK(l.value == 0);
  INFO("later reason: " << l.reason);
  CHECK(std::string(l.reason).rfind("copy #101 was cancelled: ", 0) == 0);
  // Skipped commands did not run.
  CHECK(read_device(inst, 0, r.address(), 1)[0] == 0);
  CHECK(read_device(inst, 0, r.address() + 4096, 1)[0] == 0);

  // Still in error: new buffers are cancelled too.
  q.submit({calls.command(3)}, "third", 102);
  REQUIRE(q.wait_retired(3));
  REQUIRE(calls.wait_count(4));
  CHECK(calls.calls()[3].status == TRN_ERROR_CANCELLED);
  CHECK(q.status().fault.cancelled == 2);
  CHECK(q.status().fault.tag == 100);
}

TEST_CASE("failures: a buffer without a label is named \"buffer\"", "[failures]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  Sem broken(inst, 0, 0);
  Sem out(inst, 0, 0);
  Sem later(inst, 0, 0);
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  ops().sem_fail(broken, "upstream failed");
  q.submit({wait_command(broken, 1), signal_command(out, 1)}, nullptr, 5);
  q.submit({signal_command(later, 1)}, nullptr, 6);
  REQUIRE(q.wait_retired(2));
  const auto o = out.state();
  INFO("out reason: " << o.reason);
  CHECK(std::string(o.reason).rfind("buffer #5 failed: ", 0) == 0);
  const auto l = later.state();
  INFO("later reason: " << l.reason);
  CHECK(std::string(l.reason).rfind("buffer #6 was cancelled: ", 0) == 0);
  CHECK(q.status().fault.tag == 5);
}

TEST_CASE("failures: a failing wait can come from a semaphore failed while waiting", "[failures]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  Sem s(inst, 0, 0);
  HostCalls calls;
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  q.submit({wait_command(s, 1), calls.command(0)}, "wait", 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(q.status().retired == 0);
  ops().sem_fail(s, "never coming");
  REQUIRE(q.wait_retired(1));
  REQUIRE(calls.wait_count(1));
  CHECK(calls.calls()[0].status == TRN_ERROR_CANCELLED);
  CHECK(q.status().fault.result == TRN_ERROR_CANCELLED);
  CHECK(q.status().fault.command_index == 0);
}

TEST_CASE("failures: queue_reset is HANDLE_IN_USE until retired, then the queue runs again",
          "[failures]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  Range r(inst, 0, 1 << 20);
  Sem broken(inst, 0, 0);
  Sem out(inst, 0, 0);
  Blocker blocker;
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  ops().sem_fail(broken, "upstream failed");
  q.submit({wait_command(broken, 1), signal_command(out, 1)}, "wait", 1);
  q.submit({blocker.command()}, "blocked", 2);  // cancelled: called, and holds its buffer unretired
  REQUIRE(wait_for(blocker.entered));
  CHECK(static_cast<trn_result_t>(blocker.status.load()) == TRN_ERROR_CANCELLED);
  CHECK(q.status().retired < 2);
  Err err;
  HAL_CHECK_RESULT(TRN_ERROR_HANDLE_IN_USE, ops().queue_reset(q, &err), err);
  blocker.release = true;
  REQUIRE(q.wait_retired(2));
  CHECK(blocker.calls == 1);
  HAL_REQUIRE_OK(ops().queue_reset(q, &err), err);
  const auto st = q.status();
  CHECK(st.fault.result == TRN_SUCCESS);
  CHECK(st.submitted == 2);
  CHECK(st.retired == 2);
  // The failed semaphore is usable again once the caller clears it.
  ops().sem_signal(out, 0, 1);
  CHECK(out.state().failed == 0);
  Sem done(inst, 0, 0);
  q.submit({memset_command(r.address(), 8, 0x42), signal_command(out, 1), signal_command(done, 1)},
           "memset", 3);
  REQUIRE(ops().sem_wait(done, 1, kLong) == TRN_SUCCESS);
  REQUIRE(q.wait_retired(3));
  CHECK(out.value() == 1);
  CHECK(read_device(inst, 0, r.address(), 1)[0] == 0x42);
  CHECK(q.status().fault.result == TRN_SUCCESS);
}

TEST_CASE("failures: a host call returning an error fails its buffer with that result",
          "[failures]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  Sem out(inst, 0, 0);
  HostCalls calls;
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  q.submit({calls.command(0), calls.command(1, TRN_ERROR_DEVICE_FAULTED, "the host saw a fault"),
            signal_command(out, 1), calls.command(2)},
           "host", 55);
  REQUIRE(q.wait_retired(1));
  REQUIRE(calls.wait_count(3));
  const auto got = calls.calls();
  CHECK(got[0].status == TRN_SUCCESS);
  CHECK(got[1].status == TRN_SUCCESS);
  CHECK(got[2].index == 2);
  CHECK(got[2].status == TRN_ERROR_DEVICE_FAULTED);
  const auto st = q.status();
  INFO("fault reason: " << st.fault.reason);
  CHECK(st.fault.result == TRN_ERROR_DEVICE_FAULTED);
  REQUIRE(st.fault.label != nullptr);
  CHECK(std::string(st.fault.label) == "host");
  CHECK(st.fault.tag == 55);
  CHECK(st.fault.command_index == 1);
  CHECK(st.fault.command_kind == TRN_HAL_COMMAND_HOST_CALL);
  CHECK(std::string(st.fault.reason).find("the host saw a fault") != std::string::npos);
  CHECK(st.fault.cancelled == 0);
  const auto o = out.state();
  CHECK(o.failed != 0);
  INFO("out reason: " << o.reason);
  CHECK(std::string(o.reason).rfind("host #55 failed: ", 0) == 0);
  CHECK(ops().sem_wait(out, 1, kLong) == TRN_ERROR_CANCELLED);
}

TEST_CASE("failures: destroying a queue blocked on a semaphore returns and lets go", "[failures]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  Sem never(inst, 0, 0);
  HostCalls calls;
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  q.submit({calls.command(0), wait_command(never, 1), calls.command(1)});
  q.submit({calls.command(2)});
  REQUIRE(calls.wait_count(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const uint64_t start = monotonic_ns();
  q.destroy();
  const uint64_t took = monotonic_ns() - start;
  INFO("queue_destroy took " << took / 1000 << " us");
  CHECK(took < 5 * kSecond);
  const auto got = calls.calls();
  REQUIRE(got.size() == 3);
  CHECK(got[0].status == TRN_SUCCESS);
  CHECK(got[1].index == 1);
  CHECK(got[1].status != TRN_SUCCESS);
  CHECK(got[2].index == 2);
  CHECK(got[2].status != TRN_SUCCESS);
  CHECK(never.value() == 0);
}

TEST_CASE("failures: closing an instance with a blocked queue returns", "[failures]") {
  PrivateRoot root;
  const trn_hal_process_identity_t identity{"trn-driver-conformance", "0.2.0"};
  Err err;
  trn_hal_instance_t *inst = nullptr;
  HAL_REQUIRE_OK(ops().open(&identity, &inst, &err), err);
  if (ops().device_count(inst) < 1) {
    ops().close(inst);
    WARN("skipped: needs 1 device");
    return;
  }
  uint32_t busy = 0;
  HAL_REQUIRE_OK(ops().core_claim(inst, 0, 0, 1, &busy, &err), err);
  trn_hal_sem_t *sem = nullptr;
  uint32_t record = 0;
  uint64_t id = 0;
  HAL_REQUIRE_OK(ops().sem_create(inst, 0, 0, 0, &sem, &record, &id, &err), err);
  trn_hal_queue_t *q = nullptr;
  HAL_REQUIRE_OK(ops().queue_create(inst, 0, 0, 1, TRN_HAL_QUEUE_COPY, 8, 0, &q, &err), err);
  HostCalls calls;
  const auto wait = wait_command(sem, 1);
  const auto call = calls.command(0);
  const trn_hal_command_t commands[] = {wait, call};
  trn_hal_submission_t s{commands, 2, 0, nullptr, 0};
  HAL_REQUIRE_OK(ops().queue_submit(q, &s, &err), err);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const uint64_t start = monotonic_ns();
  ops().close(inst);
  CHECK(monotonic_ns() - start < 5 * kSecond);
  const auto got = calls.calls();
  REQUIRE(got.size() == 1);
  CHECK(got[0].status != TRN_SUCCESS);
}
