// Queues: creation on claimed cores, copies (device, host to device, device to host; small and
// multi-MiB, overlapping), memset, order, semaphore signals and waits between queues and
// devices, timestamps, host calls, status counters, QUEUE_FULL at capacity, and malformed
// commands (file commands included) refused at submission with nothing run; host calls and the
// threads that wait for a queue (TRN_HAL_HOST_CALL_BRIEF).
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "loader_support.hpp"

using namespace conformance;

namespace {

// Queue::run with the semaphore on `device` (another device's queue signals it).
void run_on(trn_hal_instance_t *inst, uint32_t device, Queue &q,
            std::vector<trn_hal_command_t> commands) {
  Sem done(inst, device, 0);
  commands.push_back(signal_command(done, 1));
  q.submit(commands);
  const trn_result_t r = ops().sem_wait(done, 1, kLong);
  const auto st = q.status();
  INFO("queue fault: " << st.fault.reason);
  REQUIRE(r == TRN_SUCCESS);
  REQUIRE(q.wait_retired(st.submitted));  // before `done` goes
}

// Host calls that note the thread they ran on.
class ThreadLog {
 public:
  trn_hal_command_t command(uint32_t flags) {
    trn_hal_command_t c;
    std::memset(&c, 0, sizeof c);
    c.kind = TRN_HAL_COMMAND_HOST_CALL;
    c.u.host_call.fn = &ThreadLog::record;
    c.u.host_call.user = this;
    c.u.host_call.flags = flags;
    return c;
  }
  std::vector<std::thread::id> threads() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return threads_;
  }

 private:
  static trn_result_t record(void *user, trn_result_t, trn_hal_error_t *) {
    auto *log = static_cast<ThreadLog *>(user);
    std::lock_guard<std::mutex> lock(log->mutex_);
    log->threads_.push_back(std::this_thread::get_id());
    return TRN_SUCCESS;
  }
  mutable std::mutex mutex_;
  std::vector<std::thread::id> threads_;
};

// `rounds` buffers of a host call (with `flags`) and a signal, each submitted once the queue has
// been idle a while (its thread may sleep) and waited for from this thread. Returns how many
// calls ran on this thread.
size_t calls_on_waiter(Queue &q, Sem &timeline, uint32_t flags, uint32_t rounds) {
  ThreadLog log;
  for (uint32_t i = 1; i <= rounds; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    const uint64_t target = timeline.value() + 1;
    q.submit({log.command(flags), signal_command(timeline, target)});
    REQUIRE(ops().sem_wait(timeline, target, kLong) == TRN_SUCCESS);
  }
  const auto threads = log.threads();
  REQUIRE(threads.size() == rounds);
  size_t here = 0;
  for (const std::thread::id &t : threads) here += t == std::this_thread::get_id() ? 1 : 0;
  return here;
}

}  // namespace

TEST_CASE("queues: host calls and the threads that wait for the queue", "[queues]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  Queue q(inst, 0, TRN_HAL_QUEUE_COMPUTE);
  Sem timeline(inst, 0, 0);
  SECTION("an application's host call never runs on a thread waiting for the queue") {
    // Without TRN_HAL_HOST_CALL_BRIEF the call may take a lock its waiter holds: the queue's own
    // thread runs it.
    CHECK(calls_on_waiter(q, timeline, 0, 40) == 0);
  }
  SECTION("brief host calls run in order, on the queue's thread or on its waiter") {
    const size_t here = calls_on_waiter(q, timeline, TRN_HAL_HOST_CALL_BRIEF, 40);
    // The sim's waiters run the queue's buffers themselves whenever its thread is not at hand
    // (it sleeps after a while idle): some of these ran here.
    const char *spin = std::getenv("TRN_SPIN_NS");  // 0: waiters sleep at once, running nothing
    if (std::string(ops().name) == "sim" && !(spin && std::string(spin) == "0")) CHECK(here > 0);
    // A buffer nobody waits for still completes after waiters ran the queue (the queue's thread
    // no longer hears a doorbell for each buffer, but looks for work on its own).
    q.submit({signal_command(timeline, 1000)});
    const uint64_t deadline = monotonic_ns() + 10 * kSecond;
    while (timeline.value() < 1000 && monotonic_ns() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    CHECK(timeline.value() == 1000);
  }
  SECTION("a buffer's host calls run on one thread, even with a wait between them") {
    // The runtime holds memory in one call and lets go in another, with the operation (and
    // perhaps a wait) between: a lock taken on one thread is released on the same one. The
    // waiter arrives just as the queue's thread has made the first call and waits on the gate.
    Sem gate(inst, 0, 0);
    ThreadLog log;
    q.submit({log.command(TRN_HAL_HOST_CALL_BRIEF), wait_command(gate, 1),
              log.command(TRN_HAL_HOST_CALL_BRIEF), signal_command(timeline, 1)});
    const uint64_t deadline = monotonic_ns() + kLong;
    while (log.threads().empty() && monotonic_ns() < deadline) std::this_thread::yield();
    const trn_hal_ops_t &table = ops();  // Catch's macros (inside ops()) are this thread's only
    std::thread opener([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      table.sem_signal(gate, 1, 0);
    });
    REQUIRE(ops().sem_wait(timeline, 1, kLong) == TRN_SUCCESS);
    opener.join();
    const auto threads = log.threads();
    REQUIRE(threads.size() == 2);
    CHECK(threads[0] == threads[1]);
  }
  SECTION("destroying a queue ends a wait whose buffers its waiter was running") {
    Sem gate(inst, 0, 0);
    // The waiter runs the buffers up to the gate's wait, and waits there.
    q.submit({signal_command(timeline, 1)});
    REQUIRE(ops().sem_wait(timeline, 1, kLong) == TRN_SUCCESS);
    q.submit({wait_command(gate, 1), signal_command(timeline, 2)});
    std::atomic<trn_result_t> result{TRN_SUCCESS};
    std::atomic<bool> returned{false};
    const trn_hal_ops_t &table = ops();  // Catch's macros (inside ops()) are this thread's only
    std::thread waiter([&] {
      result = table.sem_wait(timeline, 2, kLong);
      returned = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const uint64_t start = monotonic_ns();
    q.destroy();
    waiter.join();
    CHECK(returned);
    CHECK(result == TRN_ERROR_CANCELLED);
    CHECK(monotonic_ns() - start < kLong / 2);
    CHECK(timeline.state().failed != 0);
  }
}

TEST_CASE("queues: a compute queue needs a claim on the cores, a copy queue does not", "[queues]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const auto core = first_core(inst, 0);
  Err err;
  trn_hal_queue_t *q = nullptr;
  HAL_CHECK_FAILS(ops().queue_create(inst, 0, core.first_physical_core, 1, TRN_HAL_QUEUE_COMPUTE, 8,
                                     0, &q, &err),
                  err);
  CHECK(q == nullptr);
  // DMA engines are shared: a copy queue needs no claim.
  HAL_REQUIRE_OK(
      ops().queue_create(inst, 0, core.first_physical_core, 1, TRN_HAL_QUEUE_COPY, 8, 0, &q, &err),
      err);
  REQUIRE(q != nullptr);
  ops().queue_destroy(inst, q);
  q = nullptr;
  {
    Claim claim(inst, 0, core.first_physical_core, 1);
    HAL_REQUIRE_OK(ops().queue_create(inst, 0, core.first_physical_core, 1, TRN_HAL_QUEUE_COMPUTE,
                                      8, 0, &q, &err),
                   err);
    ops().queue_destroy(inst, q);
    // Cores past the end.
    const uint32_t n = device_properties(inst, 0).physical_core_count;
    q = nullptr;
    HAL_CHECK_FAILS(ops().queue_create(inst, 0, n, 1, TRN_HAL_QUEUE_COPY, 8, 0, &q, &err), err);
    CHECK(q == nullptr);
  }
  ops().queue_destroy(inst, nullptr);  // accepts NULL
}

TEST_CASE("queues: a queue uses all or some of the core's DMA engines, no more", "[queues]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const auto core = first_core(inst, 0);
  INFO("the core has " << core.dma_engines << " DMA engines");
  REQUIRE(core.dma_engines > 0);
  Claim claim(inst, 0, core.first_physical_core, 1);
  Range r(inst, 0, 4 << 20, core.hbm_bank);
  const auto data = pattern(1 << 20, 31);
  write_device(inst, 0, r.address(), data);
  // 0 (all of them), one, and exactly the core's count are accepted, and copy correctly.
  uint32_t round = 0;
  for (const uint32_t engines : {0u, 1u, core.dma_engines}) {
    INFO("dma_engines " << engines);
    Queue q(inst, 0, TRN_HAL_QUEUE_COPY, 8, core.first_physical_core, 1, engines);
    const uint64_t to = r.address() + (1 + round++) * (1 << 20);
    q.run({copy_command(to, r.address(), data.size())});
    CHECK(first_difference(read_device(inst, 0, to, data.size()), data) == -1);
  }
  Err err;
  trn_hal_queue_t *q = nullptr;
  HAL_REQUIRE_OK(ops().queue_create(inst, 0, core.first_physical_core, 1, TRN_HAL_QUEUE_COMPUTE, 8,
                                    core.dma_engines, &q, &err),
                 err);
  ops().queue_destroy(inst, q);
  // More than the core has.
  for (const auto kind : {TRN_HAL_QUEUE_COPY, TRN_HAL_QUEUE_COMPUTE}) {
    q = nullptr;
    HAL_CHECK_RESULT(TRN_ERROR_OUT_OF_RANGE,
                     ops().queue_create(inst, 0, core.first_physical_core, 1, kind, 8,
                                        core.dma_engines + 1, &q, &err),
                     err);
    CHECK(q == nullptr);
    HAL_CHECK_RESULT(
        TRN_ERROR_OUT_OF_RANGE,
        ops().queue_create(inst, 0, core.first_physical_core, 1, kind, 8, UINT32_MAX, &q, &err),
        err);
    CHECK(q == nullptr);
  }
}

TEST_CASE("queues: device-to-device copies, small and multi-MiB", "[queues]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  Range a(inst, 0, 8 << 20);
  Range b(inst, 0, 8 << 20);
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  for (const uint64_t bytes : {uint64_t{1}, uint64_t{13}, uint64_t{4096}, uint64_t{5 << 20} + 3}) {
    INFO("bytes " << bytes);
    const auto data = pattern(bytes, static_cast<uint32_t>(bytes));
    write_device(inst, 0, a.address() + 5, data);
    q.run({copy_command(b.address() + 7, a.address() + 5, bytes)});
    CHECK(first_difference(read_device(inst, 0, b.address() + 7, bytes), data) == -1);
    // Nothing written around it.
    CHECK(read_device(inst, 0, b.address() + 7 + bytes, 1)[0] == 0);
  }
}

TEST_CASE("queues: host-to-device and device-to-host copies", "[queues]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  const uint64_t bytes = 6 << 20;
  Range dev(inst, 0, bytes);
  HostBuffer in(inst, 0, bytes);
  HostBuffer out(inst, 0, bytes);
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  const auto data = pattern(bytes, 21);
  std::memcpy(in.data(), data.data(), bytes);
  q.run({copy_command(dev.address(), in.address(), bytes)});
  CHECK(first_difference(read_device(inst, 0, dev.address(), bytes), data) == -1);

  // Back out, in pieces at odd offsets.
  q.run({copy_command(out.address(), dev.address(), 3),
         copy_command(out.address() + 3, dev.address() + 3, bytes - 3)});
  CHECK(std::memcmp(out.data(), data.data(), bytes) == 0);

  // Host to host through the device's DMA.
  std::memset(out.data(), 0, bytes);
  q.run({copy_command(out.address() + 100, in.address() + 50, 1000)});
  CHECK(std::memcmp(out.data() + 100, data.data() + 50, 1000) == 0);
  CHECK(out.data()[99] == 0);
  CHECK(out.data()[1100] == 0);
}

TEST_CASE("queues: copies to and from plain host pointers (TRN_HAL_COPY_HOST_*)", "[queues]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const uint64_t bytes = (3 << 20) + 5;
  Range dev(inst, 0, bytes);
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  // Registered nowhere, not page-aligned.
  std::vector<uint8_t> in = pattern(bytes, 17), out(bytes + 1, 0);
  auto host_copy = [](uint64_t destination, uint64_t source, uint64_t n, uint32_t flags) {
    trn_hal_command_t c = copy_command(destination, source, n);
    c.u.copy.flags = flags;
    return c;
  };
  q.run({host_copy(dev.address(), reinterpret_cast<uintptr_t>(in.data()), bytes,
                   TRN_HAL_COPY_HOST_SOURCE),
         host_copy(reinterpret_cast<uintptr_t>(out.data() + 1), dev.address(), bytes,
                   TRN_HAL_COPY_HOST_DESTINATION)});
  CHECK(first_difference(read_device(inst, 0, dev.address(), bytes), in) == -1);
  CHECK(std::memcmp(out.data() + 1, in.data(), bytes) == 0);
  CHECK(out[0] == 0);
  // A timestamp through a host pointer.
  trn_hal_timestamp_t stamp{};
  trn_hal_command_t t = timestamp_command(0);
  t.u.timestamp.host = &stamp;
  q.run({t});
  CHECK(stamp.host_ns > 0);
  // Refused at submission: both sides host, unknown flags, a device address flagged as host
  // memory, and a host pointer without the flag (it is not registered).
  Err err;
  const uint64_t host = reinterpret_cast<uintptr_t>(in.data());
  HAL_CHECK_FAILS(
      q.try_submit(
          {host_copy(host, host, 16, TRN_HAL_COPY_HOST_SOURCE | TRN_HAL_COPY_HOST_DESTINATION)},
          err),
      err);
  HAL_CHECK_FAILS(q.try_submit({host_copy(dev.address(), host, 16, 0x80)}, err), err);
  HAL_CHECK_FAILS(
      q.try_submit({host_copy(dev.address(), dev.address() + 64, 16, TRN_HAL_COPY_HOST_SOURCE)},
                   err),
      err);
  CHECK(std::string(err.message).find("not a range of this process's memory") != std::string::npos);
  HAL_CHECK_FAILS(q.try_submit({host_copy(dev.address(), host, 16, 0)}, err), err);
  CHECK(q.status().submitted == 2);  // the two buffers run above, nothing refused
}

TEST_CASE("queues: priorities are set and checked", "[queues]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  Err err;
  for (uint32_t p :
       {TRN_HAL_QUEUE_PRIORITY_LOW, TRN_HAL_QUEUE_PRIORITY_HIGH, TRN_HAL_QUEUE_PRIORITY_NORMAL})
    HAL_CHECK_OK(ops().queue_set_priority(q, p, &err), err);
  HAL_CHECK_FAILS(ops().queue_set_priority(q, 3, &err), err);
  HAL_CHECK_FAILS(ops().queue_set_priority(nullptr, 0, &err), err);
}

TEST_CASE("queues: overlapping copies behave like memmove", "[queues]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  const uint64_t bytes = 4 << 20;
  Range r(inst, 0, bytes);
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  auto model = pattern(bytes, 5);
  write_device(inst, 0, r.address(), model);
  struct Case {
    uint64_t dst, src, n;
  };
  const Case cases[] = {{1000, 0, 2 << 20},  // forward overlap
                        {0, 777, 2 << 20},   // backward overlap
                        {64, 64, 1 << 20},   // same range
                        {1, 0, 3 << 20}};
  for (const Case &c : cases) {
    INFO("copy " << c.n << " bytes from +" << c.src << " to +" << c.dst);
    q.run({copy_command(r.address() + c.dst, r.address() + c.src, c.n)});
    std::memmove(model.data() + c.dst, model.data() + c.src, c.n);
    const int64_t at = first_difference(read_device(inst, 0, r.address(), bytes), model);
    INFO("first difference at " << at);
    CHECK(at == -1);
  }
}

TEST_CASE("queues: memset fills exactly its bytes", "[queues]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  const uint64_t bytes = 3 << 20;
  Range r(inst, 0, bytes);
  HostBuffer h(inst, 0, 8192);
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  auto model = pattern(bytes, 8);
  write_device(inst, 0, r.address(), model);
  q.run({memset_command(r.address() + 3, (2 << 20) + 5, 0xA5), memset_command(r.address(), 1, 0),
         memset_command(r.address() + bytes - 1, 1, 255),
         memset_command(h.address() + 10, 100, 7)});
  std::memset(model.data() + 3, 0xA5, (2 << 20) + 5);
  model[0] = 0;
  model[bytes - 1] = 255;
  CHECK(first_difference(read_device(inst, 0, r.address(), bytes), model) == -1);
  CHECK(h.data()[9] == 0);
  CHECK(h.data()[10] == 7);
  CHECK(h.data()[109] == 7);
  CHECK(h.data()[110] == 0);
}

TEST_CASE("queues: buffers and commands run in order", "[queues]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  Range r(inst, 0, 1 << 20);
  Sem done(inst, 0, 0);
  HostCalls calls;
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  // Each buffer overwrites the same 4 KiB then copies it aside: the last value wins, and each
  // aside copy sees its own buffer's value.
  const uint32_t n = 16;
  for (uint32_t i = 0; i < n; ++i) {
    q.submit({memset_command(r.address(), 4096, i + 1), calls.command(i),
              copy_command(r.address() + 8192 + i * 4096, r.address(), 4096),
              signal_command(done, i + 1)},
             "order", 1000 + i);
  }
  REQUIRE(ops().sem_wait(done, n, kLong) == TRN_SUCCESS);
  REQUIRE(calls.wait_count(n));
  const auto got = calls.calls();
  for (uint32_t i = 0; i < n; ++i) {
    INFO("buffer " << i);
    CHECK(got[i].index == i);
    CHECK(got[i].status == TRN_SUCCESS);
    const auto aside = read_device(inst, 0, r.address() + 8192 + i * 4096, 4096);
    CHECK(first_difference(aside, std::vector<uint8_t>(4096, static_cast<uint8_t>(i + 1))) == -1);
  }
  CHECK(read_device(inst, 0, r.address(), 1)[0] == n);
  REQUIRE(q.wait_retired(n));
  const auto st = q.status();
  CHECK(st.submitted == n);
  CHECK(st.retired == n);
  CHECK(st.fault.result == TRN_SUCCESS);
}

TEST_CASE("queues: a queue signals a host waiter and another queue", "[queues]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  Range r(inst, 0, 1 << 20);
  Sem gate(inst, 0, 0);
  Sem ready(inst, 0, 0);
  Sem done(inst, 0, 0);
  Queue a(inst, 0, TRN_HAL_QUEUE_COPY);
  Queue b(inst, 0, TRN_HAL_QUEUE_COPY);
  // A waits for B's data, then copies it.
  a.submit({wait_command(ready, 1), copy_command(r.address() + 4096, r.address(), 4096),
            signal_command(done, 1)});
  b.submit(
      {wait_command(gate, 1), memset_command(r.address(), 4096, 0x5C), signal_command(ready, 1)});
  CHECK(ops().sem_wait(done, 1, 30 * kMs) == TRN_TIMEOUT);  // B is held by the gate
  CHECK(ready.value() == 0);
  ops().sem_signal(gate, 1, 0);
  REQUIRE(ops().sem_wait(ready, 1, kLong) == TRN_SUCCESS);
  REQUIRE(ops().sem_wait(done, 1, kLong) == TRN_SUCCESS);
  CHECK(first_difference(read_device(inst, 0, r.address() + 4096, 4096),
                         std::vector<uint8_t>(4096, 0x5C)) == -1);
  // The waiting queue's work is causally after the signal.
  CHECK(done.state().device_ns >= ready.state().device_ns);
}

TEST_CASE("queues: a queue waits on a semaphore another device's queue signals", "[queues]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 2);
  Claim c0(inst, 0, 0, 1);
  Claim c1(inst, 1, 0, 1);
  Range r0(inst, 0, 1 << 20);
  Range r1(inst, 1, 1 << 20);
  Sem gate(inst, 1, 0);
  Sem cross(inst, 1, 0);  // device 1's semaphore, waited on by device 0
  Sem done(inst, 0, 0);
  Queue q0(inst, 0, TRN_HAL_QUEUE_COPY);
  Queue q1(inst, 1, TRN_HAL_QUEUE_COPY);
  q0.submit(
      {wait_command(cross, 1), memset_command(r0.address(), 64, 0x11), signal_command(done, 1)});
  q1.submit(
      {wait_command(gate, 1), memset_command(r1.address(), 64, 0x22), signal_command(cross, 1)});
  CHECK(ops().sem_wait(done, 1, 30 * kMs) == TRN_TIMEOUT);
  ops().sem_signal(gate, 1, 0);
  REQUIRE(ops().sem_wait(done, 1, kLong) == TRN_SUCCESS);
  CHECK(read_device(inst, 0, r0.address(), 1)[0] == 0x11);
  CHECK(read_device(inst, 1, r1.address(), 1)[0] == 0x22);
  CHECK(done.state().device_ns >= cross.state().device_ns);
  // And the other way: a device 0 semaphore signalled by device 0, waited on by device 1.
  Sem back(inst, 0, 0);
  Sem done1(inst, 1, 0);
  q1.submit({wait_command(back, 1), signal_command(done1, 1)});
  run_on(inst, 0, q0, {signal_command(back, 1)});
  CHECK(ops().sem_wait(done1, 1, kLong) == TRN_SUCCESS);
  CHECK(q1.wait_retired(2));
}

TEST_CASE("queues: timestamps are non-decreasing and within the host's window", "[queues]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  Range r(inst, 0, 1 << 20);
  HostBuffer h(inst, 0, 4096);
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  const uint64_t before = monotonic_ns();
  q.run({timestamp_command(r.address()),
         copy_command(r.address() + 4096, r.address() + 8192, 1 << 20),
         timestamp_command(r.address() + 64), timestamp_command(h.address() + 128)});
  const uint64_t after = monotonic_ns();
  trn_hal_timestamp_t t[2];
  std::memset(t, 0, sizeof t);
  const auto first = read_device(inst, 0, r.address(), sizeof t[0]);
  const auto second = read_device(inst, 0, r.address() + 64, sizeof t[1]);
  std::memcpy(&t[0], first.data(), sizeof t[0]);
  std::memcpy(&t[1], second.data(), sizeof t[1]);
  trn_hal_timestamp_t third;
  std::memcpy(&third, h.data() + 128, sizeof third);
  INFO("device_ns " << t[0].device_ns << " then " << t[1].device_ns << "; host_ns " << t[0].host_ns
                    << " then " << t[1].host_ns << " in [" << before << ", " << after << "]");
  CHECK(t[1].device_ns >= t[0].device_ns);
  CHECK(t[1].host_ns >= t[0].host_ns);
  CHECK(third.device_ns >= t[1].device_ns);
  CHECK(third.host_ns >= t[1].host_ns);
  for (const auto &ts : {t[0], t[1], third}) {
    CHECK(ts.host_ns >= before);
    CHECK(ts.host_ns <= after);
  }
  CHECK(ops().device_time_ns(inst, 0) >= t[0].device_ns);
}

TEST_CASE("queues: host calls run in order with TRN_SUCCESS", "[queues]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  HostCalls calls;
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  q.submit({calls.command(0), calls.command(1)});
  q.submit({calls.command(2)});
  q.submit({calls.command(3), calls.command(4), calls.command(5)});
  REQUIRE(calls.wait_count(6));
  REQUIRE(q.wait_retired(3));
  const auto got = calls.calls();
  REQUIRE(got.size() == 6);
  for (uint32_t i = 0; i < 6; ++i) {
    INFO("call " << i);
    CHECK(got[i].index == i);
    CHECK(got[i].status == TRN_SUCCESS);
  }
  const auto st = q.status();
  CHECK(st.submitted == 3);
  CHECK(st.retired == 3);
}

TEST_CASE("queues: status counts submitted and retired buffers", "[queues]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  Sem gate(inst, 0, 0);
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  auto st = q.status();
  CHECK(st.submitted == 0);
  CHECK(st.retired == 0);
  CHECK(st.fault.result == TRN_SUCCESS);
  q.submit({wait_command(gate, 1)});
  q.submit({wait_command(gate, 0)});
  q.submit({wait_command(gate, 2)});
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  st = q.status();
  CHECK(st.submitted == 3);
  CHECK(st.retired == 0);
  ops().sem_signal(gate, 1, 0);
  const uint64_t deadline = monotonic_ns() + kLong;
  while (q.status().retired < 2 && monotonic_ns() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  st = q.status();
  CHECK(st.retired == 2);
  ops().sem_signal(gate, 2, 0);
  REQUIRE(q.wait_retired(3));
  CHECK(q.status().retired == 3);
  CHECK(q.status().submitted == 3);
}

TEST_CASE("queues: QUEUE_FULL with `capacity` buffers in flight", "[queues]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  Sem gate(inst, 0, 0);
  HostCalls calls;
  const uint32_t capacity = 4;
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY, capacity);
  q.submit({wait_command(gate, 1)});
  for (uint32_t i = 1; i < capacity; ++i) q.submit({calls.command(i)});
  Err err;
  {
    const trn_result_t r = q.try_submit({calls.command(99)}, err);
    INFO("driver said: " << err.message);
    CHECK(r == TRN_ERROR_QUEUE_FULL);
    CHECK_FALSE(err.empty());
  }
  CHECK(q.status().submitted == capacity);
  ops().sem_signal(gate, 1, 0);
  REQUIRE(q.wait_retired(capacity));
  // Room again.
  q.submit({calls.command(capacity)});
  REQUIRE(q.wait_retired(capacity + 1));
  const auto got = calls.calls();
  REQUIRE(got.size() == capacity);
  for (uint32_t i = 0; i < capacity; ++i) CHECK(got[i].index == i + 1);  // 99 never ran
}

TEST_CASE("queues: a buffer whose completion was seen has left room for the next", "[queues]") {
  // A slot is free by the time the buffer's signals are visible: a submitter that waited for
  // the completion never gets QUEUE_FULL, however small the ring and however many laps.
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  Range r(inst, 0, 1 << 20);
  for (const uint32_t capacity : {1u, 2u}) {
    INFO("capacity " << capacity);
    Sem done(inst, 0, 0);
    Queue q(inst, 0, TRN_HAL_QUEUE_COPY, capacity);
    constexpr uint64_t kLaps = 500;
    for (uint64_t i = 1; i <= kLaps; ++i) {
      Err err;
      const trn_result_t submitted = q.try_submit(
          {memset_command(r.address(), 64, static_cast<uint8_t>(i)), signal_command(done, i)}, err);
      INFO("buffer " << i << ": " << err.message);
      REQUIRE(submitted == TRN_SUCCESS);
      REQUIRE(ops().sem_wait(done, i, kLong) == TRN_SUCCESS);
    }
    REQUIRE(q.wait_retired(kLaps));
    CHECK(q.status().submitted == kLaps);
  }
}

TEST_CASE("queues: malformed commands are refused at submission, nothing runs", "[queues]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  Range r(inst, 0, 1 << 20);
  HostCalls calls;
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  trn_hal_command_t bad_kind = memset_command(r.address(), 16, 1);
  bad_kind.kind = 99;
  trn_hal_command_t zero_kind = memset_command(r.address(), 16, 1);
  zero_kind.kind = 0;
  Range other(inst, 0, 1 << 20);
  const auto kernel_less = launch_command(nullptr, nullptr, 0, nullptr);
  struct Case {
    const char *what;
    trn_hal_command_t command;
  };
  const Case cases[] = {
      {"an unknown kind", bad_kind},
      {"kind 0", zero_kind},
      {"a copy from an address that is not device memory", copy_command(r.address(), 16, 64)},
      {"a copy to an address that is not device memory", copy_command(0, r.address(), 64)},
      {"a copy of a huge size", copy_command(r.address(), other.address(), UINT64_MAX)},
      {"a memset of value 256", memset_command(r.address(), 16, 256)},
      {"a timestamp outside device memory", timestamp_command(8)},
      {"a wait on a NULL semaphore", wait_command(nullptr, 1)},
      {"a signal of a NULL semaphore", signal_command(nullptr, 1)},
      {"a host call without a function",
       [] {
         trn_hal_command_t c;
         std::memset(&c, 0, sizeof c);
         c.kind = TRN_HAL_COMMAND_HOST_CALL;
         return c;
       }()},
      {"a launch on a copy queue", kernel_less},
      {"a file read with fd -1", file_command(TRN_HAL_COMMAND_FILE_READ, -1, 0, r.address(), 16)},
      {"a file write with fd -5", file_command(TRN_HAL_COMMAND_FILE_WRITE, -5, 0, r.address(), 16)},
      {"a file write from memory that is not held",
       file_command(TRN_HAL_COMMAND_FILE_WRITE, 1, 0, 64, 16)},
      {"a file read of a huge size",
       file_command(TRN_HAL_COMMAND_FILE_READ, 0, 0, r.address(), UINT64_MAX)},
      {"a file read past the largest file offset",
       file_command(TRN_HAL_COMMAND_FILE_READ, 0, INT64_MAX, r.address(), 16)},
  };
  uint32_t index = 0;
  for (const Case &c : cases) {
    INFO("buffer with " << c.what);
    Err err;
    const trn_result_t res = q.try_submit(
        {memset_command(r.address(), 16, 0x77), calls.command(index++), c.command}, err);
    INFO("driver said: " << err.message);
    CHECK(res == TRN_ERROR_INVALID_ARGUMENT);
    CHECK_FALSE(err.empty());
  }
  // A NULL submission or command array.
  {
    Err err;
    trn_hal_submission_t s;
    std::memset(&s, 0, sizeof s);
    s.command_count = 2;
    HAL_CHECK_FAILS(ops().queue_submit(q, &s, &err), err);
    HAL_CHECK_FAILS(ops().queue_submit(q, nullptr, &err), err);
  }
  // Nothing ran and nothing was accepted; the queue still works.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(calls.count() == 0);
  CHECK(q.status().submitted == 0);
  CHECK(read_device(inst, 0, r.address(), 1)[0] == 0);
  q.run({memset_command(r.address(), 16, 0x33)});
  CHECK(read_device(inst, 0, r.address(), 1)[0] == 0x33);
  CHECK(q.status().fault.result == TRN_SUCCESS);
}

TEST_CASE("queues: commands past the end of a reserved range are refused", "[queues]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  Range r(inst, 0, 1 << 20);
  const uint64_t end = r.address() + r.bytes();
  HostBuffer h(inst, 0, 4096);
  HostCalls calls;
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  struct Case {
    const char *what;
    trn_hal_command_t command;
  };
  const Case cases[] = {
      {"a copy reading past the range", copy_command(r.address(), end - 32, 64)},
      {"a copy writing past the range", copy_command(end - 32, r.address(), 64)},
      {"a memset past the range", memset_command(end - 8, 16, 0)},
      {"a timestamp straddling the end", timestamp_command(end - 8)},
      {"a copy past registered host memory", copy_command(h.address() + 4000, r.address(), 200)},
      {"a file read past the range", file_command(TRN_HAL_COMMAND_FILE_READ, 0, 0, end - 8, 16)},
      {"a file write past the range", file_command(TRN_HAL_COMMAND_FILE_WRITE, 1, 0, end - 8, 16)},
  };
  uint32_t index = 0;
  for (const Case &c : cases) {
    INFO("buffer with " << c.what);
    Err err;
    const trn_result_t res = q.try_submit({calls.command(index++), c.command}, err);
    INFO("driver said: " << err.message);
    CHECK(res == TRN_ERROR_INVALID_ARGUMENT);
    CHECK_FALSE(err.empty());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(calls.count() == 0);
  CHECK(q.status().submitted == 0);
}
