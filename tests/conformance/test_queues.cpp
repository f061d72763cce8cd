// Conformance: queues — sequence numbers and in-order execution, copies and memsets between
// device and host memory, across banks, cores and devices, dependencies between queues through
// semaphores, finish deadlines, faults (record, cancellation of what follows, reset), capacity,
// destruction with work in flight, core ownership, and every function's refusal of bad input.
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "support/api_helpers.hpp"
#include "support/result_printing.hpp"
#include "support/sim_env.hpp"
#include "trn/trn.h"

namespace {

using trn::test::alloc;
using trn::test::core_at;
using trn::test::devices;
using trn::test::error_contains;
using trn::test::fault_of;
using trn::test::first_device;
using trn::test::last_error;
using trn::test::mem_info;
using trn::test::timeline_of;
using trn::test::value_of;

using trn::test::SimEnv;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kSecond = 1'000'000'000;
constexpr uint64_t kLong = 10 * kSecond;  // "forever" in a test: a hang fails, never blocks

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

trn_core_properties_t core_properties(trn_core_t core) {
  trn_core_properties_t p = TRN_CORE_PROPERTIES_INIT;
  INFO(last_error());
  REQUIRE(trn_core_get_properties(core, &p) == TRN_SUCCESS);
  return p;
}

trn_pool_t make_pool(trn_device_t device, uint32_t bank,
                     trn_pool_kind_t kind = TRN_POOL_KIND_DEVICE) {
  trn_pool_desc_t desc = TRN_POOL_DESC_INIT;
  desc.kind = kind;
  desc.hbm_bank = bank;
  trn_pool_t pool = nullptr;
  INFO(last_error());
  REQUIRE(trn_pool_create(device, &desc, &pool) == TRN_SUCCESS);
  return pool;
}

std::vector<uint8_t> read_mem(trn_mem_t mem, uint64_t offset, uint64_t size) {
  std::vector<uint8_t> bytes(size);
  INFO(last_error());
  REQUIRE(trn_mem_read(mem, offset, bytes.data(), size) == TRN_SUCCESS);
  return bytes;
}

// Whether every byte of the range is `value` (the first mismatch is reported).
bool reads_as(trn_mem_t mem, uint64_t offset, uint64_t size, uint8_t value) {
  const auto bytes = read_mem(mem, offset, size);
  for (uint64_t i = 0; i < size; ++i)
    if (bytes[i] != value) {
      UNSCOPED_INFO("byte " << offset + i << " is " << int(bytes[i]) << ", expected "
                            << int(value));
      return false;
    }
  return true;
}

std::vector<uint8_t> pattern(uint64_t size, uint32_t seed) {
  std::vector<uint8_t> bytes(size);
  uint32_t x = seed * 2654435761u + 1;
  for (auto &b : bytes) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return bytes;
}

trn_sem_t make_sem(trn_device_t device, uint64_t initial = 0) {
  trn_sem_desc_t desc = TRN_SEM_DESC_INIT;
  desc.initial_value = initial;
  trn_sem_t sem = nullptr;
  INFO(last_error());
  REQUIRE(trn_sem_create(device, &desc, &sem) == TRN_SUCCESS);
  return sem;
}

trn_queue_t make_queue(trn_core_t core, uint32_t capacity = 0,
                       trn_queue_kind_t kind = TRN_QUEUE_KIND_COPY) {
  trn_queue_desc_t desc = TRN_QUEUE_DESC_INIT;
  desc.core = core;
  desc.capacity = capacity;
  desc.kind = kind;
  trn_queue_t queue = nullptr;
  INFO(last_error());
  REQUIRE(trn_queue_create(&desc, &queue) == TRN_SUCCESS);
  REQUIRE(queue != nullptr);
  return queue;
}

void finish(trn_queue_t queue) {
  const trn_result_t r = trn_queue_finish(queue, kLong);
  INFO(last_error());
  REQUIRE(r == TRN_SUCCESS);
}

// One command's synchronisation, built from (semaphore, value) pairs.
struct Sync {
  std::vector<trn_sem_point_t> waits, signals;
  trn_sync_t sync{};
  const trn_sync_t *get() {
    sync = {waits.data(), static_cast<uint32_t>(waits.size()), signals.data(),
            static_cast<uint32_t>(signals.size())};
    return &sync;
  }
};

Sync waits_on(trn_sem_t sem, uint64_t value) {
  Sync s;
  s.waits.push_back({sem, value});
  return s;
}

Sync signals(trn_sem_t sem, uint64_t value) {
  Sync s;
  s.signals.push_back({sem, value});
  return s;
}

// A readable check through epoll (0 = not readable within the timeout).
int epoll_readable(int fd, int timeout_ms) {
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  REQUIRE(ep >= 0);
  epoll_event event{};
  event.events = EPOLLIN;
  REQUIRE(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &event) == 0);
  epoll_event out{};
  const int n = epoll_wait(ep, &out, 1, timeout_ms);
  close(ep);
  return n;
}

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

// Every function that takes a queue handle, with otherwise valid arguments.
std::vector<Call> queue_calls(trn_queue_t queue, trn_mem_t mem) {
  return {
      {"trn_queue_copy",
       [=] {
         uint64_t sequence = 77;
         const trn_result_t r = trn_queue_copy(queue, mem, 0, mem, 512, 512, nullptr, &sequence);
         CHECK(sequence == 77);
         return r;
       }},
      {"trn_queue_memset",
       [=] { return trn_queue_memset(queue, mem, 0, 1, 512, nullptr, nullptr); }},
      {"trn_queue_barrier", [=] { return trn_queue_barrier(queue, nullptr, nullptr); }},
      {"trn_queue_finish", [=] { return trn_queue_finish(queue, 0); }},
      {"trn_queue_get_semaphore",
       [=] {
         trn_sem_t sem = nullptr;
         return trn_queue_get_semaphore(queue, &sem);
       }},
      {"trn_queue_get_fault",
       [=] {
         trn_queue_fault_t fault = TRN_QUEUE_FAULT_INIT;
         return trn_queue_get_fault(queue, &fault);
       }},
      {"trn_queue_reset", [=] { return trn_queue_reset(queue); }},
      {"trn_queue_destroy", [=] { return trn_queue_destroy(queue); }},
  };
}

// Every way a memory handle reaches a queue: copy destination and source, memset destination.
std::vector<Call> queue_mem_calls(trn_queue_t queue, trn_mem_t good, trn_mem_t bad) {
  return {
      {"trn_queue_copy",
       [=] { return trn_queue_copy(queue, bad, 0, good, 0, 512, nullptr, nullptr); }},
      {"trn_queue_copy",
       [=] { return trn_queue_copy(queue, good, 0, bad, 0, 512, nullptr, nullptr); }},
      {"trn_queue_memset",
       [=] { return trn_queue_memset(queue, bad, 0, 1, 512, nullptr, nullptr); }},
  };
}

// Every command kind with `sync`.
std::vector<Call> sync_calls(trn_queue_t queue, trn_mem_t mem, const trn_sync_t *sync) {
  return {
      {"trn_queue_copy",
       [=] { return trn_queue_copy(queue, mem, 0, mem, 512, 512, sync, nullptr); }},
      {"trn_queue_memset", [=] { return trn_queue_memset(queue, mem, 0, 1, 512, sync, nullptr); }},
      {"trn_queue_barrier", [=] { return trn_queue_barrier(queue, sync, nullptr); }},
  };
}

// A forked child that exits with `body`'s result (no Catch assertions in there).
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

}  // namespace

TEST_CASE("commands complete in order with sequence numbers 1, 2, 3 per queue", "[queues]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_mem_t x = alloc(pool, 4096);
  trn_mem_t y = alloc(pool, 4096);
  trn_mem_t z = alloc(pool, 4096);
  trn_queue_t a = make_queue(core_at(device, 0));
  trn_queue_t b = make_queue(core_at(device, 1), 0, TRN_QUEUE_KIND_COMPUTE);
  const trn_sem_t ta = timeline_of(a), tb = timeline_of(b);
  CHECK(ta != tb);
  CHECK(value_of(ta) == 0);

  // In order: y gets x as set first, z gets x as set second.
  uint64_t s[5] = {};
  REQUIRE(trn_queue_memset(a, x, 0, 0xaa, 4096, nullptr, &s[0]) == TRN_SUCCESS);
  REQUIRE(trn_queue_copy(a, y, 0, x, 0, 4096, nullptr, &s[1]) == TRN_SUCCESS);
  REQUIRE(trn_queue_memset(a, x, 0, 0xbb, 4096, nullptr, &s[2]) == TRN_SUCCESS);
  REQUIRE(trn_queue_barrier(a, nullptr, &s[3]) == TRN_SUCCESS);
  REQUIRE(trn_queue_copy(a, z, 0, x, 0, 4096, nullptr, &s[4]) == TRN_SUCCESS);
  for (uint64_t i = 0; i < 5; ++i) CHECK(s[i] == i + 1);
  // Each queue counts on its own; a NULL sequence pointer is allowed.
  uint64_t sb = 0;
  REQUIRE(trn_queue_barrier(b, nullptr, &sb) == TRN_SUCCESS);
  CHECK(sb == 1);
  REQUIRE(trn_queue_barrier(b, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_barrier(b, nullptr, &sb) == TRN_SUCCESS);
  CHECK(sb == 3);

  for (uint64_t i = 1; i <= 5; ++i) CHECK(trn_sem_wait(ta, i, kLong) == TRN_SUCCESS);
  CHECK(trn_sem_wait(tb, 3, kLong) == TRN_SUCCESS);
  finish(a);
  finish(b);
  CHECK(value_of(ta) == 5);
  CHECK(value_of(tb) == 3);
  CHECK(trn_sem_wait(ta, 6, 0) == TRN_TIMEOUT);
  CHECK(reads_as(x, 0, 4096, 0xbb));
  CHECK(reads_as(y, 0, 4096, 0xaa));
  CHECK(reads_as(z, 0, 4096, 0xbb));
  CHECK(fault_of(a).result == TRN_SUCCESS);
  // An idle queue finishes at once, even with a zero deadline.
  CHECK(trn_queue_finish(a, 0) == TRN_SUCCESS);

  // A longer in-order run: every memset of one byte overwrites the last.
  for (uint64_t i = 0; i < 200; ++i) {
    uint64_t seq = 0;
    REQUIRE(trn_queue_memset(a, x, (i % 8) * 512, static_cast<uint8_t>(i), 512, nullptr, &seq) ==
            TRN_SUCCESS);
    CHECK(seq == 6 + i);
  }
  finish(a);
  CHECK(value_of(ta) == 205);
  for (uint64_t slot = 0; slot < 8; ++slot)
    CHECK(reads_as(x, slot * 512, 512, static_cast<uint8_t>(192 + slot)));

  REQUIRE(trn_queue_destroy(a) == TRN_SUCCESS);
  REQUIRE(trn_queue_destroy(b) == TRN_SUCCESS);
  for (trn_mem_t m : {x, y, z}) REQUIRE(trn_mem_free(m) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("memset and copies move data between device and host pool memory", "[queues][copy]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_pool_t host_pool = make_pool(device, 0, TRN_POOL_KIND_HOST);
  constexpr uint64_t kSize = 64 * 1024;
  trn_mem_t d1 = alloc(pool, kSize);
  trn_mem_t d2 = alloc(pool, kSize);
  trn_mem_t h = alloc(host_pool, kSize);
  trn_queue_t queue = make_queue(core_at(device, 0));

  // memset → device-to-device copy → device-to-host copy.
  REQUIRE(trn_queue_memset(queue, d1, 512, 0x5a, 4096, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_copy(queue, d2, 0, d1, 0, kSize, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_copy(queue, h, 1024, d2, 0, kSize - 1024, nullptr, nullptr) == TRN_SUCCESS);
  finish(queue);
  void *host = nullptr;
  REQUIRE(trn_mem_map(h, &host) == TRN_SUCCESS);
  const auto *bytes = static_cast<const uint8_t *>(host);
  for (uint64_t i = 0; i < kSize; ++i) {
    const bool set = i >= 1024 + 512 && i < 1024 + 512 + 4096;
    if (bytes[i] != (set ? 0x5a : 0)) {
      FAIL("host byte " << i << " is " << int(bytes[i]));
    }
  }
  CHECK(reads_as(d2, 0, 512, 0));
  CHECK(reads_as(d2, 512, 4096, 0x5a));
  CHECK(reads_as(d2, 512 + 4096, kSize - 512 - 4096, 0));

  // Host pool → device: a pattern written through the mapping arrives intact.
  const auto data = pattern(kSize, 7);
  std::memcpy(host, data.data(), kSize);
  REQUIRE(trn_queue_copy(queue, d1, 0, h, 0, kSize, nullptr, nullptr) == TRN_SUCCESS);
  // Overlapping copy within one allocation: memmove semantics.
  REQUIRE(trn_queue_copy(queue, d2, 0, h, 0, kSize, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_copy(queue, d2, 512, d2, 0, 8192, nullptr, nullptr) == TRN_SUCCESS);
  finish(queue);
  CHECK(read_mem(d1, 0, kSize) == data);
  const auto moved = read_mem(d2, 0, kSize);
  CHECK(std::equal(data.begin(), data.begin() + 512, moved.begin()));
  CHECK(std::equal(data.begin(), data.begin() + 8192, moved.begin() + 512));
  CHECK(std::equal(data.begin() + 8704, data.end(), moved.begin() + 8704));

  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  for (trn_mem_t m : {d1, d2, h}) REQUIRE(trn_mem_free(m) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(host_pool) == TRN_SUCCESS);
}

TEST_CASE("a queue copies into memory of another core's bank", "[queues][copy]") {
  SimEnv env;
  const trn_device_t device = first_device();
  const trn_core_t core0 = core_at(device, 0);
  REQUIRE(core_properties(core0).hbm_bank == 0);
  REQUIRE(core_properties(core_at(device, 7)).hbm_bank == 3);
  trn_pool_t near_pool = make_pool(device, 0);
  trn_pool_t far_pool = make_pool(device, 3);
  constexpr uint64_t kSize = 1 << 20;
  trn_mem_t near_mem = alloc(near_pool, kSize);
  trn_mem_t far_mem = alloc(far_pool, kSize);
  CHECK(mem_info(far_mem).hbm_bank == 3);
  const auto data = pattern(kSize, 3);
  REQUIRE(trn_mem_write(near_mem, 0, data.data(), kSize) == TRN_SUCCESS);

  trn_queue_t queue = make_queue(core0);
  REQUIRE(trn_queue_copy(queue, far_mem, 0, near_mem, 0, kSize, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_memset(queue, far_mem, kSize - 4096, 0xee, 4096, nullptr, nullptr) ==
          TRN_SUCCESS);
  // And back from the far bank.
  REQUIRE(trn_queue_copy(queue, near_mem, 0, far_mem, kSize - 8192, 8192, nullptr, nullptr) ==
          TRN_SUCCESS);
  finish(queue);
  const auto far_bytes = read_mem(far_mem, 0, kSize);
  CHECK(std::equal(data.begin(), data.end() - 4096, far_bytes.begin()));
  CHECK(reads_as(far_mem, kSize - 4096, 4096, 0xee));
  const auto back = read_mem(near_mem, 0, 8192);
  CHECK(std::equal(data.end() - 8192, data.end() - 4096, back.begin()));
  CHECK(reads_as(near_mem, 4096, 4096, 0xee));

  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(near_mem) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(far_mem) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(near_pool) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(far_pool) == TRN_SUCCESS);
}

TEST_CASE("a queue on one device copies to and from memory of another device", "[queues][copy]") {
  SimEnv env;
  env.set("TRN_SIM_DEVICES", "2");
  const auto list = devices();
  REQUIRE(list.size() == 2);
  trn_pool_t pool0 = make_pool(list[0], 0);
  trn_pool_t pool1 = make_pool(list[1], 2);
  trn_pool_t host1 = make_pool(list[1], 0, TRN_POOL_KIND_HOST);
  constexpr uint64_t kSize = 256 * 1024;
  trn_mem_t m0 = alloc(pool0, kSize);
  trn_mem_t m1 = alloc(pool1, kSize);
  trn_mem_t h1 = alloc(host1, kSize);
  CHECK(mem_info(m1).device_index == 1);
  CHECK((mem_info(m1).device_address >> 56) == 2);
  const auto data = pattern(kSize, 11);
  REQUIRE(trn_mem_write(m1, 0, data.data(), kSize) == TRN_SUCCESS);

  trn_queue_t queue = make_queue(core_at(list[0], 0));
  // Device 1 → device 0, then device 0 → device 1's host pool, then a memset on device 1.
  REQUIRE(trn_queue_copy(queue, m0, 0, m1, 0, kSize, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_copy(queue, h1, 0, m0, 0, kSize, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_memset(queue, m1, 0, 0x11, 4096, nullptr, nullptr) == TRN_SUCCESS);
  finish(queue);
  CHECK(read_mem(m0, 0, kSize) == data);
  CHECK(read_mem(h1, 0, kSize) == data);
  CHECK(reads_as(m1, 0, 4096, 0x11));
  const auto rest = read_mem(m1, 4096, kSize - 4096);
  CHECK(std::equal(rest.begin(), rest.end(), data.begin() + 4096));

  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  for (trn_mem_t m : {m0, m1, h1}) REQUIRE(trn_mem_free(m) == TRN_SUCCESS);
  for (trn_pool_t p : {pool0, pool1, host1}) REQUIRE(trn_pool_destroy(p) == TRN_SUCCESS);
}

TEST_CASE("a queue waits for a semaphore another queue signals", "[queues][sync]") {
  SimEnv env;
  const trn_device_t device = first_device();
  // (core of A, core of B): the same core, neighbours, and cores far apart.
  const auto cores =
      GENERATE(std::pair<uint32_t, uint32_t>{0, 0}, std::pair<uint32_t, uint32_t>{0, 1},
               std::pair<uint32_t, uint32_t>{0, 5});
  // Through a semaphore of our own, or through B's timeline (an event: B's sequence number).
  const bool through_timeline = GENERATE(false, true);
  INFO("A on core " << cores.first << ", B on core " << cores.second
                    << (through_timeline ? ", through B's timeline" : ", through a semaphore"));
  trn_queue_t a = make_queue(core_at(device, cores.first));
  trn_queue_t b = make_queue(core_at(device, cores.second));
  trn_pool_t pool = make_pool(device, 1);
  trn_mem_t src = alloc(pool, 8192);
  trn_mem_t dst = alloc(pool, 8192);
  REQUIRE(trn_mem_set(src, 0, 0x3c, 8192) == TRN_SUCCESS);
  trn_sem_t host_gate = make_sem(device);
  trn_sem_t link = make_sem(device);

  // B: blocked on the host, then signals `link`. A: its copy waits for B.
  Sync b_sync = waits_on(host_gate, 1);
  b_sync.signals.push_back({link, 1});
  uint64_t b_seq = 0;
  REQUIRE(trn_queue_barrier(b, b_sync.get(), &b_seq) == TRN_SUCCESS);
  Sync a_sync = through_timeline ? waits_on(timeline_of(b), b_seq) : waits_on(link, 1);
  uint64_t a_seq = 0;
  REQUIRE(trn_queue_copy(a, dst, 0, src, 0, 8192, a_sync.get(), &a_seq) == TRN_SUCCESS);
  CHECK(a_seq == 1);

  // Nothing ran: A's copy has not happened.
  CHECK(trn_queue_finish(a, 50 * kMs) == TRN_TIMEOUT);
  CHECK(trn_queue_finish(b, 0) == TRN_TIMEOUT);
  CHECK(reads_as(dst, 0, 8192, 0));
  CHECK(value_of(timeline_of(a)) == 0);
  CHECK(value_of(timeline_of(b)) == 0);
  CHECK(value_of(link) == 0);

  REQUIRE(trn_sem_signal(host_gate, 1) == TRN_SUCCESS);
  finish(a);
  finish(b);
  CHECK(reads_as(dst, 0, 8192, 0x3c));
  CHECK(value_of(link) == 1);
  CHECK(value_of(timeline_of(a)) == 1);
  CHECK(value_of(timeline_of(b)) == 1);

  REQUIRE(trn_queue_destroy(a) == TRN_SUCCESS);
  REQUIRE(trn_queue_destroy(b) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(host_gate) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(link) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(src) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(dst) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("trn_queue_finish times out on a semaphore nobody signals, then succeeds",
          "[queues][sync]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_queue_t queue = make_queue(core_at(device, 2));
  trn_sem_t gate = make_sem(device);
  REQUIRE(trn_queue_barrier(queue, nullptr, nullptr) == TRN_SUCCESS);
  Sync sync = waits_on(gate, 1);
  REQUIRE(trn_queue_barrier(queue, sync.get(), nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_barrier(queue, nullptr, nullptr) == TRN_SUCCESS);
  // The first barrier done, so that the count below does not depend on how soon it ran.
  REQUIRE(trn_sem_wait(timeline_of(queue), 1, kLong) == TRN_SUCCESS);

  const auto start = Clock::now();
  CHECK(trn_queue_finish(queue, 30 * kMs) == TRN_TIMEOUT);
  const double elapsed = seconds_since(start);
  CHECK(elapsed >= 0.03);
  CHECK(elapsed < 5.0);
  INFO(last_error());
  CHECK(error_contains("trn_queue_finish: "));
  CHECK(error_contains("completed 1 of 3 commands"));
  CHECK(error_contains("nobody signals"));
  CHECK(trn_queue_finish(queue, 0) == TRN_TIMEOUT);
  CHECK(value_of(timeline_of(queue)) == 1);
  CHECK(fault_of(queue).result == TRN_SUCCESS);  // waiting is not a fault

  REQUIRE(trn_sem_signal(gate, 1) == TRN_SUCCESS);
  finish(queue);
  CHECK(value_of(timeline_of(queue)) == 3);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(gate) == TRN_SUCCESS);
}

TEST_CASE("a copy from freed memory faults the queue and cancels what follows", "[queues][fault]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_mem_t src = alloc(pool, 8192);
  trn_mem_t dst = alloc(pool, 8192);
  const uint64_t src_address = mem_info(src).device_address;
  const uint64_t dst_address = mem_info(dst).device_address;
  trn_queue_t queue = make_queue(core_at(device, 0));
  const trn_sem_t timeline = timeline_of(queue);
  trn_sem_t gate = make_sem(device);
  trn_sem_t after1 = make_sem(device);
  trn_sem_t after2 = make_sem(device);

  trn_queue_fault_t none = fault_of(queue);
  CHECK(none.result == TRN_SUCCESS);
  CHECK(none.sequence == 0);
  CHECK(none.cancelled == 0);

  Sync blocked = waits_on(gate, 1);
  REQUIRE(trn_queue_barrier(queue, blocked.get(), nullptr) == TRN_SUCCESS);  // #1
  uint64_t copy_seq = 0;
  REQUIRE(trn_queue_copy(queue, dst, 512, src, 1024, 4096, nullptr, &copy_seq) == TRN_SUCCESS);
  CHECK(copy_seq == 2);
  Sync s1 = signals(after1, 1), s2 = signals(after2, 1);
  REQUIRE(trn_queue_barrier(queue, s1.get(), nullptr) == TRN_SUCCESS);                    // #3
  REQUIRE(trn_queue_memset(queue, dst, 0, 0x77, 512, s2.get(), nullptr) == TRN_SUCCESS);  // #4
  // Freeing memory a queued command uses is allowed; the command faults when it runs.
  REQUIRE(trn_mem_free(src) == TRN_SUCCESS);
  // A descriptor waiting for a cancelled signal becomes readable too.
  int fd = -1;
  REQUIRE(trn_sem_get_fd(after2, 1, &fd) == TRN_SUCCESS);
  CHECK(epoll_readable(fd, 0) == 0);
  REQUIRE(trn_sem_signal(gate, 1) == TRN_SUCCESS);

  CHECK(trn_queue_finish(queue, kLong) == TRN_ERROR_INVALID_HANDLE);
  {
    INFO(last_error());
    CHECK(error_contains("trn_queue_finish: "));
    CHECK(error_contains("copy #2"));
    CHECK(error_contains("freed"));
    CHECK(error_contains("trn_queue_get_fault"));
  }
  const trn_queue_fault_t fault = fault_of(queue);
  CHECK(fault.result == TRN_ERROR_INVALID_HANDLE);
  CHECK(std::string(fault.command) == "copy");
  CHECK(fault.sequence == 2);
  INFO("reason: " << fault.reason);
  CHECK(std::string(fault.reason).find("source") != std::string::npos);
  CHECK(std::string(fault.reason).find("freed") != std::string::npos);
  CHECK(fault.source_address == src_address + 1024);
  CHECK(fault.destination_address == dst_address + 512);
  CHECK(fault.size == 4096);
  CHECK(fault.cancelled == 2);

  // Waiters for the cancelled commands' signals are released at once, not after the deadline.
  for (trn_sem_t sem : {after1, after2}) {
    const auto start = Clock::now();
    CHECK(trn_sem_wait(sem, 1, kLong) == TRN_ERROR_CANCELLED);
    CHECK(seconds_since(start) < 5.0);
    INFO(last_error());
    CHECK(error_contains("trn_sem_wait: "));
    CHECK(error_contains("cancelled"));
    CHECK(error_contains("(a queue of device 0, physical core 0)"));  // which queue
    uint64_t value = 9;
    CHECK(trn_sem_query(sem, &value) == TRN_ERROR_CANCELLED);
    CHECK(value == 0);
  }
  CHECK(epoll_readable(fd, 5000) == 1);
  close(fd);
  // The queue's timeline stopped at the last completed command and is marked failed.
  CHECK(trn_sem_wait(timeline, 2, kLong) == TRN_ERROR_CANCELLED);
  CHECK(trn_sem_wait(timeline, 1, 0) == TRN_SUCCESS);
  CHECK(value_of(timeline) == 1);
  CHECK(reads_as(dst, 0, 8192, 0));  // neither the copy nor the memset wrote
  CHECK(trn_queue_finish(queue, 0) == TRN_ERROR_INVALID_HANDLE);

  // Reset: the record is cleared and sequence numbers continue.
  REQUIRE(trn_queue_reset(queue) == TRN_SUCCESS);
  CHECK(fault_of(queue).result == TRN_SUCCESS);
  CHECK(fault_of(queue).cancelled == 0);
  CHECK(trn_queue_finish(queue, 0) == TRN_SUCCESS);
  uint64_t seq = 0;
  REQUIRE(trn_queue_memset(queue, dst, 0, 0x42, 8192, nullptr, &seq) == TRN_SUCCESS);
  CHECK(seq == 5);
  Sync s3 = signals(after1, 2);
  REQUIRE(trn_queue_barrier(queue, s3.get(), &seq) == TRN_SUCCESS);
  CHECK(seq == 6);
  finish(queue);
  CHECK(value_of(timeline) == 6);
  CHECK(trn_sem_wait(timeline, 6, 0) == TRN_SUCCESS);
  CHECK(reads_as(dst, 0, 8192, 0x42));
  // A semaphore a command after the reset signals gets its value; a host signal clears the
  // failed mark.
  CHECK(trn_sem_wait(after1, 2, 0) == TRN_SUCCESS);
  CHECK(value_of(after1) == 2);
  REQUIRE(trn_sem_signal(after2, 1) == TRN_SUCCESS);
  CHECK(trn_sem_wait(after2, 1, 0) == TRN_SUCCESS);
  uint64_t value = 0;
  CHECK(trn_sem_query(after2, &value) == TRN_SUCCESS);
  CHECK(value == 1);
  // Resetting a healthy queue is allowed and changes nothing.
  CHECK(trn_queue_reset(queue) == TRN_SUCCESS);

  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  for (trn_sem_t sem : {gate, after1, after2}) REQUIRE(trn_sem_destroy(sem) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(dst) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("after trn_queue_finish reports a fault, the queue is drained and resets at once",
          "[queues][fault]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_mem_t dst = alloc(pool, 4096);
  trn_mem_t other = alloc(pool, 4096);
  trn_queue_t queue = make_queue(core_at(device, 0));
  trn_sem_t gate = make_sem(device);
  trn_sem_t later = make_sem(device);
  Sync blocked = waits_on(gate, 1);
  REQUIRE(trn_queue_barrier(queue, blocked.get(), nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_memset(queue, dst, 0, 1, 4096, nullptr, nullptr) == TRN_SUCCESS);  // #2
  // Three commands behind it, one of which signals a semaphore of ours.
  Sync s = signals(later, 1);
  REQUIRE(trn_queue_memset(queue, other, 0, 2, 4096, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_barrier(queue, s.get(), nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_copy(queue, other, 0, other, 2048, 2048, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(dst) == TRN_SUCCESS);
  REQUIRE(trn_sem_signal(gate, 1) == TRN_SUCCESS);

  CHECK(trn_queue_finish(queue, kLong) == TRN_ERROR_INVALID_HANDLE);
  // Once finish has reported the fault, the commands behind it are all cancelled: the record
  // counts them, nothing holds our semaphore, and a reset succeeds without a retry.
  const trn_queue_fault_t fault = fault_of(queue);
  CHECK(fault.result == TRN_ERROR_INVALID_HANDLE);
  CHECK(std::string(fault.command) == "memset");
  CHECK(fault.sequence == 2);
  CHECK(std::string(fault.reason).find("freed") != std::string::npos);
  CHECK(fault.size == 4096);
  CHECK(fault.source_address == 0);
  CHECK(fault.cancelled == 3);
  const trn_result_t reset = trn_queue_reset(queue);
  INFO(last_error());
  CHECK(reset == TRN_SUCCESS);
  CHECK(trn_sem_destroy(later) == TRN_SUCCESS);
  CHECK(reads_as(other, 0, 4096, 0));
  if (reset != TRN_SUCCESS) {
    REQUIRE(trn_queue_finish(queue, kLong) == TRN_ERROR_INVALID_HANDLE);
    REQUIRE(trn_queue_reset(queue) == TRN_SUCCESS);
  }
  uint64_t seq = 0;
  REQUIRE(trn_queue_barrier(queue, nullptr, &seq) == TRN_SUCCESS);
  CHECK(seq == 6);
  finish(queue);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(gate) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(other) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("a full queue refuses a submission at once with TRN_ERROR_QUEUE_FULL",
          "[queues][capacity]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_mem_t mem = alloc(pool, 4096);
  trn_queue_t queue = make_queue(core_at(device, 0), 4);
  trn_sem_t gate = make_sem(device);
  Sync blocked = waits_on(gate, 1);
  REQUIRE(trn_queue_barrier(queue, blocked.get(), nullptr) == TRN_SUCCESS);
  for (uint8_t i = 0; i < 3; ++i)
    REQUIRE(trn_queue_memset(queue, mem, 0, i, 4096, nullptr, nullptr) == TRN_SUCCESS);

  const auto start = Clock::now();
  uint64_t seq = 99;
  CHECK(trn_queue_barrier(queue, nullptr, &seq) == TRN_ERROR_QUEUE_FULL);
  CHECK(seconds_since(start) < 5.0);  // not waiting for space (loose: a loaded machine)
  {
    INFO(last_error());
    CHECK(error_contains("trn_queue_barrier: "));
    CHECK(error_contains("capacity"));
  }
  CHECK(seq == 99);
  CHECK(trn_queue_memset(queue, mem, 0, 9, 4096, nullptr, &seq) == TRN_ERROR_QUEUE_FULL);
  CHECK(trn_queue_copy(queue, mem, 0, mem, 2048, 2048, nullptr, &seq) == TRN_ERROR_QUEUE_FULL);
  CHECK(error_contains("trn_queue_copy: "));
  CHECK(seq == 99);
  CHECK(value_of(timeline_of(queue)) == 0);

  REQUIRE(trn_sem_signal(gate, 1) == TRN_SUCCESS);
  finish(queue);
  CHECK(value_of(timeline_of(queue)) == 4);
  CHECK(reads_as(mem, 0, 4096, 2));
  // Room again; refused submissions took no sequence numbers.
  REQUIRE(trn_queue_barrier(queue, nullptr, &seq) == TRN_SUCCESS);
  CHECK(seq == 5);
  finish(queue);

  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(gate) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("destroying a queue with work in flight cancels it promptly", "[queues][destroy]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_mem_t mem = alloc(pool, 4096);
  trn_queue_t queue = make_queue(core_at(device, 0));
  const trn_sem_t timeline = timeline_of(queue);
  trn_sem_t gate = make_sem(device);  // never signalled
  trn_sem_t done1 = make_sem(device);
  trn_sem_t done2 = make_sem(device);
  Sync blocked = waits_on(gate, 1);
  REQUIRE(trn_queue_barrier(queue, blocked.get(), nullptr) == TRN_SUCCESS);
  Sync s1 = signals(done1, 1), s2 = signals(done2, 5);
  REQUIRE(trn_queue_memset(queue, mem, 0, 0xff, 4096, s1.get(), nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_barrier(queue, s2.get(), nullptr) == TRN_SUCCESS);
  int fd = -1;
  REQUIRE(trn_sem_get_fd(done2, 5, &fd) == TRN_SUCCESS);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the worker is parked on `gate`

  const auto start = Clock::now();
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  CHECK(seconds_since(start) < 8.0);  // not waiting for the gate (loose: a loaded machine)
  for (trn_sem_t sem : {done1, done2}) {
    const auto wait_start = Clock::now();
    CHECK(trn_sem_wait(sem, 1, kLong) == TRN_ERROR_CANCELLED);
    CHECK(seconds_since(wait_start) < 5.0);
    INFO(last_error());
    CHECK(error_contains("destroyed"));
  }
  CHECK(epoll_readable(fd, 5000) == 1);
  close(fd);
  CHECK(reads_as(mem, 0, 4096, 0));  // the memset never ran
  // The queue, its semaphore and its hold on the other semaphores are gone.
  CHECK(trn_queue_finish(queue, 0) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_queue_destroy(queue) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_sem_wait(timeline, 1, 0) == TRN_ERROR_INVALID_HANDLE);
  for (trn_sem_t sem : {gate, done1, done2}) CHECK(trn_sem_destroy(sem) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("trn_runtime_shutdown with a blocked queue cancels it and frees the core",
          "[queues][destroy]") {
  SimEnv env;
  trn_device_t device = first_device();
  trn_queue_t queue = make_queue(core_at(device, 4));
  trn_sem_t gate = make_sem(device);
  trn_sem_t done = make_sem(device);
  Sync sync = waits_on(gate, 1);
  sync.signals.push_back({done, 1});
  REQUIRE(trn_queue_barrier(queue, sync.get(), nullptr) == TRN_SUCCESS);
  Sync later = signals(done, 2);
  REQUIRE(trn_queue_barrier(queue, later.get(), nullptr) == TRN_SUCCESS);
  int fd = -1;
  REQUIRE(trn_sem_get_fd(done, 2, &fd) == TRN_SUCCESS);

  const auto start = Clock::now();
  REQUIRE(trn_runtime_shutdown() == TRN_SUCCESS);
  CHECK(seconds_since(start) < 8.0);     // not waiting for the gate (loose: a loaded machine)
  CHECK(epoll_readable(fd, 5000) == 1);  // failed, so its waiters were released
  close(fd);
  CHECK(trn_queue_finish(queue, 0) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_sem_signal(gate, 1) == TRN_ERROR_INVALID_HANDLE);
  device = first_device();
  trn_process_info_t owner = TRN_PROCESS_INFO_INIT;
  REQUIRE(trn_core_get_owner(core_at(device, 4), &owner) == TRN_SUCCESS);
  CHECK(owner.pid == 0);
}

TEST_CASE("a compute queue owns its core while it exists, a copy queue takes nothing",
          "[queues][ownership]") {
  SimEnv env;
  const trn_device_t device = first_device();
  const trn_core_t core = core_at(device, 2);
  CHECK(core_properties(core).owned == 0);
  trn_queue_t copy = make_queue(core);  // the core's DMA engines are shared
  CHECK(core_properties(core).owned == 0);
  trn_queue_t queue = make_queue(core, 0, TRN_QUEUE_KIND_COMPUTE);
  CHECK(core_properties(core).owned == 1);
  trn_process_info_t owner = TRN_PROCESS_INFO_INIT;
  REQUIRE(trn_core_get_owner(core, &owner) == TRN_SUCCESS);
  CHECK(owner.pid == getpid());
  CHECK(core_properties(core_at(device, 3)).owned == 0);

  CHECK(trn_core_release(core) == TRN_ERROR_HANDLE_IN_USE);
  {
    INFO(last_error());
    CHECK(error_contains("trn_core_release: "));
    CHECK(error_contains("1 queues"));
  }
  CHECK(core_properties(core).owned == 1);
  // A second queue on the same core, and the core already owned: both fine.
  trn_queue_t second = make_queue(core, 0, TRN_QUEUE_KIND_COMPUTE);
  CHECK(trn_core_release(core) == TRN_ERROR_HANDLE_IN_USE);
  CHECK(error_contains("2 queues"));
  REQUIRE(trn_queue_barrier(queue, nullptr, nullptr) == TRN_SUCCESS);
  finish(queue);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  CHECK(trn_core_release(core) == TRN_ERROR_HANDLE_IN_USE);
  REQUIRE(trn_queue_destroy(second) == TRN_SUCCESS);
  CHECK(core_properties(core).owned == 1);         // destroying queues does not release the core
  REQUIRE(trn_core_release(core) == TRN_SUCCESS);  // the copy queue does not hold it
  CHECK(core_properties(core).owned == 0);
  REQUIRE(trn_queue_barrier(copy, nullptr, nullptr) == TRN_SUCCESS);
  finish(copy);
  REQUIRE(trn_queue_destroy(copy) == TRN_SUCCESS);
}

TEST_CASE("a compute queue on a core another process owns gives TRN_ERROR_CORE_BUSY",
          "[queues][ownership]") {
  SimEnv env;
  int ready[2], hold[2];
  REQUIRE(pipe(ready) == 0);
  REQUIRE(pipe(hold) == 0);
  const pid_t child = fork_child([&] {
    close(ready[0]);
    close(hold[1]);
    uint32_t count = 1;
    trn_device_t device = nullptr;
    if (trn_device_get(&count, &device) != TRN_SUCCESS || count != 1) return 10;
    trn_core_t cores[8] = {};
    count = 8;
    if (trn_core_get(device, &count, cores) != TRN_SUCCESS || count != 8) return 11;
    if (trn_core_acquire(cores[3]) != TRN_SUCCESS) return 12;
    if (write(ready[1], "r", 1) != 1) return 13;
    pollfd pfd{hold[0], POLLIN, 0};
    poll(&pfd, 1, 30000);  // until the parent closes its end, or kills us
    return 0;
  });
  close(ready[1]);
  close(hold[0]);
  pollfd pfd{ready[0], POLLIN, 0};
  char byte = 0;
  const bool child_ready = poll(&pfd, 1, 10000) == 1 && read(ready[0], &byte, 1) == 1;
  close(ready[0]);
  if (!child_ready) {
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    FAIL("the child did not acquire core 3; exit status " << status);
  }

  const trn_device_t device = first_device();
  const trn_core_t core = core_at(device, 3);
  trn_queue_desc_t desc = TRN_QUEUE_DESC_INIT;
  desc.core = core;
  desc.kind = TRN_QUEUE_KIND_COMPUTE;
  trn_queue_t queue = nullptr;
  CHECK(trn_queue_create(&desc, &queue) == TRN_ERROR_CORE_BUSY);
  {
    INFO(last_error());
    CHECK(error_contains("trn_queue_create: "));
    CHECK(error_contains("NeuronCore 3"));
    CHECK(error_contains(std::to_string(child)));
  }
  CHECK(queue == nullptr);
  CHECK(core_properties(core).owned == 0);
  // Its DMA engines are shared: a copy queue on it works while the other process owns it.
  trn_queue_t copy = make_queue(core);
  REQUIRE(trn_queue_barrier(copy, nullptr, nullptr) == TRN_SUCCESS);
  finish(copy);
  REQUIRE(trn_queue_destroy(copy) == TRN_SUCCESS);

  kill(child, SIGKILL);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  close(hold[1]);
  // The kernel dropped the child's claim: the core is free now.
  queue = make_queue(core, 0, TRN_QUEUE_KIND_COMPUTE);
  CHECK(core_properties(core).owned == 1);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
}

TEST_CASE("copy and memset ranges outside an allocation give TRN_ERROR_OUT_OF_RANGE at submission",
          "[queues][negative]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_mem_t small = alloc(pool, 4096);
  trn_mem_t big = alloc(pool, 8192);
  trn_queue_t queue = make_queue(core_at(device, 0));
  uint64_t seq = 55;

  struct Case {
    const char *what;
    std::function<trn_result_t()> run;
    const char *detail;
  };
  const std::vector<Case> cases = {
      {"copy past the destination",
       [&] { return trn_queue_copy(queue, small, 0, big, 0, 8192, nullptr, &seq); }, "destination"},
      {"copy past the source",
       [&] { return trn_queue_copy(queue, big, 0, small, 512, 4096, nullptr, &seq); }, "source"},
      {"copy at an offset past the end",
       [&] { return trn_queue_copy(queue, big, 8193, small, 0, 0, nullptr, &seq); }, "destination"},
      {"copy with an offset that would wrap",
       [&] { return trn_queue_copy(queue, big, UINT64_MAX - 10, small, 0, 512, nullptr, &seq); },
       "destination"},
      {"copy with a size that would wrap",
       [&] { return trn_queue_copy(queue, big, 0, small, 512, UINT64_MAX - 100, nullptr, &seq); },
       "destination"},
      {"memset past the end",
       [&] { return trn_queue_memset(queue, small, 4095, 1, 2, nullptr, &seq); }, "destination"},
      {"memset of more than the allocation",
       [&] { return trn_queue_memset(queue, small, 0, 1, 4097, nullptr, &seq); }, "destination"},
      {"memset with an offset that would wrap",
       [&] { return trn_queue_memset(queue, small, UINT64_MAX, 1, 2, nullptr, &seq); },
       "destination"},
  };
  for (const Case &c : cases) {
    INFO(c.what);
    CHECK(c.run() == TRN_ERROR_OUT_OF_RANGE);
    INFO(last_error());
    CHECK(error_contains(c.detail));
    CHECK(error_contains("outside the allocation"));
    CHECK(seq == 55);
  }
  // Exactly to the end is fine; nothing refused took a sequence number.
  REQUIRE(trn_queue_memset(queue, small, 4095, 7, 1, nullptr, &seq) == TRN_SUCCESS);
  CHECK(seq == 1);
  REQUIRE(trn_queue_copy(queue, big, 4096, small, 0, 4096, nullptr, &seq) == TRN_SUCCESS);
  CHECK(seq == 2);
  finish(queue);
  CHECK(reads_as(big, 8191, 1, 7));
  CHECK(reads_as(big, 0, 8191, 0));
  CHECK(fault_of(queue).result == TRN_SUCCESS);

  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(small) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(big) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("trn_queue_create refuses bad descriptors and pointers", "[queues][negative]") {
  SimEnv env;
  const trn_device_t device = first_device();
  const trn_core_t core = core_at(device, 1);
  trn_queue_t queue = nullptr;
  trn_queue_desc_t desc = TRN_QUEUE_DESC_INIT;
  desc.core = core;

  CHECK(trn_queue_create(nullptr, &queue) == TRN_ERROR_NULL_POINTER);
  CHECK(error_contains("trn_queue_create: desc is NULL"));
  CHECK(trn_queue_create(&desc, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(error_contains("trn_queue_create: queue is NULL"));

  trn_queue_desc_t bad = desc;
  bad.header.type = TRN_STRUCT_SEM_DESC;
  CHECK(trn_queue_create(&bad, &queue) == TRN_ERROR_INVALID_STRUCT);
  CHECK(error_contains("TRN_QUEUE_DESC_INIT"));
  bad = desc;
  bad.header.size = 4;
  CHECK(trn_queue_create(&bad, &queue) == TRN_ERROR_INVALID_STRUCT);

  static_assert(sizeof(trn_queue_kind_t) == sizeof(uint32_t), "the enums are 32-bit");
  for (uint32_t kind : {3u, 9u, 0x7fffffffu, 0xffffffffu}) {
    INFO("kind " << kind);
    bad = desc;
    // Stored as a C caller would: any 32-bit value can arrive in the field.
    std::memcpy(&bad.kind, &kind, sizeof kind);
    CHECK(trn_queue_create(&bad, &queue) == TRN_ERROR_INVALID_ENUM);
    CHECK(error_contains("desc.kind"));
  }
  for (uint32_t capacity : {(1u << 20) + 1, 1u << 30, UINT32_MAX}) {
    INFO("capacity " << capacity);
    bad = desc;
    bad.capacity = capacity;
    CHECK(trn_queue_create(&bad, &queue) == TRN_ERROR_INVALID_ARGUMENT);
    CHECK(error_contains("desc.capacity"));
  }
  const uint32_t engines = core_properties(core).dma_engines;
  REQUIRE(engines > 0);
  for (uint32_t dma : {engines + 1, 999u, UINT32_MAX}) {
    INFO("dma_engines " << dma);
    bad = desc;
    bad.dma_engines = dma;
    CHECK(trn_queue_create(&bad, &queue) == TRN_ERROR_OUT_OF_RANGE);
    CHECK(error_contains("desc.dma_engines"));
  }
  bad = desc;
  bad.core = nullptr;
  CHECK(trn_queue_create(&bad, &queue) == TRN_ERROR_INVALID_HANDLE);
  CHECK(error_contains("desc.core"));
  bad.core = recast<trn_core_t>(device);
  CHECK(trn_queue_create(&bad, &queue) == TRN_ERROR_INVALID_HANDLE);
  CHECK(error_contains("expected a core handle but got a device handle"));
  bad.core = handle_from<trn_core_t>(0xdeadbeef);
  CHECK(trn_queue_create(&bad, &queue) == TRN_ERROR_INVALID_HANDLE);
  CHECK(queue == nullptr);
  // Nothing refused took the core.
  CHECK(core_properties(core).owned == 0);

  // The limits themselves are accepted.
  bad = desc;
  bad.capacity = 1u << 20;
  bad.dma_engines = engines;
  bad.kind = TRN_QUEUE_KIND_COMPUTE;
  REQUIRE(trn_queue_create(&bad, &queue) == TRN_SUCCESS);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  bad.capacity = 1;
  bad.dma_engines = 1;
  REQUIRE(trn_queue_create(&bad, &queue) == TRN_SUCCESS);
  REQUIRE(trn_queue_barrier(queue, nullptr, nullptr) == TRN_SUCCESS);
  finish(queue);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
}

TEST_CASE("queue functions refuse NULL, stale, wrong-kind and garbage queue handles",
          "[queues][negative][handle]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_mem_t mem = alloc(pool, 4096);
  trn_queue_t queue = make_queue(core_at(device, 0));
  trn_sem_t sem = make_sem(device);

  SECTION("NULL") {
    auto calls = queue_calls(nullptr, mem);
    calls.pop_back();  // destroy(NULL) is allowed
    expect_all(calls, TRN_ERROR_INVALID_HANDLE, "queue handle is NULL");
    CHECK(trn_queue_destroy(nullptr) == TRN_SUCCESS);
  }
  SECTION("stale: destroyed queues") {
    trn_queue_t gone = make_queue(core_at(device, 1));
    REQUIRE(trn_queue_destroy(gone) == TRN_SUCCESS);
    expect_all(queue_calls(gone, mem), TRN_ERROR_INVALID_HANDLE, "stale");
    trn_queue_t fresh = make_queue(core_at(device, 1));
    CHECK(fresh != gone);
    expect_all(queue_calls(gone, mem), TRN_ERROR_INVALID_HANDLE, "stale");
    CHECK(value_of(timeline_of(fresh)) == 0);  // untouched by the stale submissions
    REQUIRE(trn_queue_destroy(fresh) == TRN_SUCCESS);
  }
  SECTION("stale: after trn_runtime_shutdown") {
    REQUIRE(trn_runtime_shutdown() == TRN_SUCCESS);
    expect_all(queue_calls(queue, mem), TRN_ERROR_INVALID_HANDLE, "stale");
    const trn_device_t again = first_device();
    pool = make_pool(again, 0);
    mem = alloc(pool, 4096);
    queue = make_queue(core_at(again, 0));
    sem = make_sem(again);
  }
  SECTION("wrong kind") {
    expect_all(queue_calls(recast<trn_queue_t>(sem), mem), TRN_ERROR_INVALID_HANDLE,
               "expected a queue handle but got a semaphore handle");
    expect_all(queue_calls(recast<trn_queue_t>(timeline_of(queue)), mem), TRN_ERROR_INVALID_HANDLE,
               "expected a queue handle but got a semaphore handle");
    expect_all(queue_calls(recast<trn_queue_t>(mem), mem), TRN_ERROR_INVALID_HANDLE,
               "expected a queue handle but got a memory handle");
    expect_all(queue_calls(recast<trn_queue_t>(pool), mem), TRN_ERROR_INVALID_HANDLE,
               "got a pool handle");
    expect_all(queue_calls(recast<trn_queue_t>(device), mem), TRN_ERROR_INVALID_HANDLE,
               "got a device handle");
    expect_all(queue_calls(recast<trn_queue_t>(core_at(device, 0)), mem), TRN_ERROR_INVALID_HANDLE,
               "got a core handle");
  }
  SECTION("garbage") {
    const uintptr_t value = reinterpret_cast<uintptr_t>(queue);
    const std::vector<uintptr_t> garbage = {0x1,
                                            0x1234,
                                            static_cast<uintptr_t>(-1),
                                            static_cast<uintptr_t>(0xdeadbeefcafef00dull),
                                            reinterpret_cast<uintptr_t>(&env),
                                            value + 1,
                                            value + 0xffffff,
                                            value ^ (uintptr_t{1} << 40),
                                            value ^ (uintptr_t{0x80} << 24)};
    for (uintptr_t g : garbage) {
      INFO("handle value " << std::hex << g);
      expect_all(queue_calls(handle_from<trn_queue_t>(g), mem), TRN_ERROR_INVALID_HANDLE, "handle");
    }
  }
  // The real queue is unharmed: nothing refused took a sequence number.
  uint64_t seq = 0;
  REQUIRE(trn_queue_barrier(queue, nullptr, &seq) == TRN_SUCCESS);
  CHECK(seq == 1);
  finish(queue);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  CHECK(trn_queue_destroy(queue) == TRN_ERROR_INVALID_HANDLE);  // twice
  CHECK(error_contains("trn_queue_destroy: "));
  CHECK(error_contains("stale"));
  REQUIRE(trn_sem_destroy(sem) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("queue commands refuse bad memory and semaphore handles and sync lists",
          "[queues][negative][handle]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_mem_t mem = alloc(pool, 4096);
  trn_queue_t queue = make_queue(core_at(device, 0));
  trn_queue_t other = make_queue(core_at(device, 1));
  trn_sem_t sem = make_sem(device, 1);
  trn_mem_t freed = alloc(pool, 4096);
  REQUIRE(trn_mem_free(freed) == TRN_SUCCESS);
  trn_sem_t destroyed = make_sem(device);
  REQUIRE(trn_sem_destroy(destroyed) == TRN_SUCCESS);

  SECTION("memory handles") {
    expect_all(queue_mem_calls(queue, mem, nullptr), TRN_ERROR_INVALID_HANDLE,
               "memory handle is NULL");
    expect_all(queue_mem_calls(queue, mem, freed), TRN_ERROR_INVALID_HANDLE, "stale");
    expect_all(queue_mem_calls(queue, mem, recast<trn_mem_t>(pool)), TRN_ERROR_INVALID_HANDLE,
               "expected a memory handle but got a pool handle");
    expect_all(queue_mem_calls(queue, mem, recast<trn_mem_t>(sem)), TRN_ERROR_INVALID_HANDLE,
               "got a semaphore handle");
    expect_all(queue_mem_calls(queue, mem, recast<trn_mem_t>(queue)), TRN_ERROR_INVALID_HANDLE,
               "got a queue handle");
    expect_all(queue_mem_calls(queue, mem, handle_from<trn_mem_t>(0x1234)),
               TRN_ERROR_INVALID_HANDLE, "handle");
    // Which side was wrong is named.
    CHECK(trn_queue_copy(queue, nullptr, 0, mem, 0, 512, nullptr, nullptr) ==
          TRN_ERROR_INVALID_HANDLE);
    CHECK(error_contains("destination"));
    CHECK(trn_queue_copy(queue, mem, 0, nullptr, 0, 512, nullptr, nullptr) ==
          TRN_ERROR_INVALID_HANDLE);
    CHECK(error_contains("source"));
  }
  SECTION("semaphore handles in waits and signals") {
    const std::vector<std::pair<trn_sem_t, const char *>> bad = {
        {nullptr, "semaphore handle is NULL"},
        {destroyed, "stale"},
        {recast<trn_sem_t>(mem), "expected a semaphore handle but got a memory handle"},
        {recast<trn_sem_t>(queue), "expected a semaphore handle but got a queue handle"},
        {recast<trn_sem_t>(device), "got a device handle"},
        {handle_from<trn_sem_t>(0xdeadbeef), "handle"},
        {handle_from<trn_sem_t>(reinterpret_cast<uintptr_t>(sem) + 1), "handle"},
    };
    for (const auto &[handle, detail] : bad) {
      INFO("semaphore handle " << handle << ": " << detail);
      // The bad one second in each list, so the index is reported.
      Sync in_waits;
      in_waits.waits = {{sem, 1}, {handle, 1}};
      expect_all(sync_calls(queue, mem, in_waits.get()), TRN_ERROR_INVALID_HANDLE,
                 "sync->waits[1]");
      expect_all(sync_calls(queue, mem, in_waits.get()), TRN_ERROR_INVALID_HANDLE, detail);
      Sync in_signals;
      in_signals.waits = {{sem, 1}};
      in_signals.signals = {{sem, 2}, {handle, 1}};
      expect_all(sync_calls(queue, mem, in_signals.get()), TRN_ERROR_INVALID_HANDLE,
                 "sync->signals[1]");
    }
  }
  SECTION("NULL arrays with a count") {
    trn_sync_t no_waits{nullptr, 1, nullptr, 0};
    expect_all(sync_calls(queue, mem, &no_waits), TRN_ERROR_NULL_POINTER, "sync->waits is NULL");
    trn_sync_t no_signals{nullptr, 0, nullptr, 2};
    expect_all(sync_calls(queue, mem, &no_signals), TRN_ERROR_NULL_POINTER,
               "sync->signals is NULL");
    // A NULL array with a zero count is nothing to wait for.
    trn_sync_t empty{nullptr, 0, nullptr, 0};
    REQUIRE(trn_queue_barrier(queue, &empty, nullptr) == TRN_SUCCESS);
  }
  SECTION("a queue's own semaphore cannot be signalled by a command") {
    for (trn_queue_t owner : {queue, other}) {
      Sync s = signals(timeline_of(owner), 100);
      expect_all(sync_calls(queue, mem, s.get()), TRN_ERROR_INVALID_ARGUMENT,
                 "queue's own semaphore");
    }
    // Waiting on one (an event) is what it is for.
    REQUIRE(trn_queue_barrier(other, nullptr, nullptr) == TRN_SUCCESS);
    Sync event = waits_on(timeline_of(other), 1);
    REQUIRE(trn_queue_barrier(queue, event.get(), nullptr) == TRN_SUCCESS);
  }
  // Nothing refused was queued: the semaphores used in refused commands can be destroyed, and
  // the queues count only what succeeded.
  finish(queue);
  finish(other);
  const uint64_t done = value_of(timeline_of(queue));
  CHECK(done <= 1);
  uint64_t seq = 0;
  REQUIRE(trn_queue_barrier(queue, nullptr, &seq) == TRN_SUCCESS);
  CHECK(seq == done + 1);
  finish(queue);
  CHECK(value_of(sem) == 1);  // no refused command signalled it
  CHECK(trn_sem_destroy(sem) == TRN_SUCCESS);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  REQUIRE(trn_queue_destroy(other) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("queue functions refuse NULL output pointers and bad fault structs",
          "[queues][negative][null]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_queue_t queue = make_queue(core_at(device, 0));
  CHECK(trn_queue_get_semaphore(queue, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(error_contains("trn_queue_get_semaphore: sem is NULL"));
  CHECK(trn_queue_get_fault(queue, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(error_contains("trn_queue_get_fault: fault is NULL"));
  trn_queue_fault_t bad = TRN_QUEUE_FAULT_INIT;
  bad.header.type = TRN_STRUCT_QUEUE_DESC;
  CHECK(trn_queue_get_fault(queue, &bad) == TRN_ERROR_INVALID_STRUCT);
  CHECK(error_contains("TRN_QUEUE_FAULT_INIT"));
  // An older, smaller fault struct is filled up to its size only.
  trn_queue_fault_t older = TRN_QUEUE_FAULT_INIT;
  std::memset(reinterpret_cast<char *>(&older) + sizeof older.header, 0x5b,
              sizeof older - sizeof older.header);
  older.header.size = static_cast<uint32_t>(offsetof(trn_queue_fault_t, command));
  REQUIRE(trn_queue_get_fault(queue, &older) == TRN_SUCCESS);
  CHECK(older.result == TRN_SUCCESS);
  CHECK(older.sequence == 0);
  CHECK(static_cast<uint8_t>(older.command[0]) == 0x5b);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
}

TEST_CASE("core activity counts the commands, bytes and simulated DMA time of a core",
          "[queues][telemetry]") {
  SimEnv env;
  trn_device_t device = first_device();
  trn_core_t busy = core_at(device, 2);
  trn_core_t idle = core_at(device, 3);
  trn_pool_t pool = make_pool(device, 1);
  constexpr uint64_t kSize = 4 << 20;
  trn_mem_t a = alloc(pool, kSize);
  trn_mem_t b = alloc(pool, kSize);
  trn_queue_t queue = make_queue(busy);
  REQUIRE(trn_queue_memset(queue, a, 0, 1, kSize, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_copy(queue, b, 0, a, 0, kSize, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_barrier(queue, nullptr, nullptr) == TRN_SUCCESS);
  finish(queue);

  trn_core_activity_t activity = TRN_CORE_ACTIVITY_INIT;
  REQUIRE(trn_core_get_activity(busy, &activity) == TRN_SUCCESS);
  CHECK(activity.commands_completed == 3);
  CHECK(activity.commands_failed == 0);
  CHECK(activity.dma_bytes == 2 * kSize);
  // 16 engines at 23 B/ns move 4 MiB in ~11.4 us, plus 1.9 us to start: per transfer.
  const uint64_t expected_ns = 2 * (1900 + static_cast<uint64_t>(kSize / (16 * 23.0)));
  CHECK(activity.dma_busy_ns >= expected_ns - 2);
  CHECK(activity.dma_busy_ns <= expected_ns + 2);
  CHECK(activity.busy_host_ns > 0);

  trn_core_activity_t none = TRN_CORE_ACTIVITY_INIT;
  REQUIRE(trn_core_get_activity(idle, &none) == TRN_SUCCESS);
  CHECK(none.commands_completed == 0);
  CHECK(none.dma_bytes == 0);

  // Negative: NULL, bad struct, bad handles.
  CHECK(trn_core_get_activity(busy, nullptr) == TRN_ERROR_NULL_POINTER);
  trn_core_activity_t bad = TRN_CORE_ACTIVITY_INIT;
  bad.header.type = TRN_STRUCT_CORE_PROPERTIES;
  CHECK(trn_core_get_activity(busy, &bad) == TRN_ERROR_INVALID_STRUCT);
  CHECK(trn_core_get_activity(nullptr, &activity) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_core_get_activity(reinterpret_cast<trn_core_t>(device), &activity) ==
        TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_core_get_activity(reinterpret_cast<trn_core_t>(uintptr_t{0x1234}), &activity) ==
        TRN_ERROR_INVALID_HANDLE);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  trn_mem_free(a);
  trn_mem_free(b);
  trn_pool_destroy(pool);
}

namespace {

// The names of this process's threads, as /proc shows them.
std::vector<std::string> thread_names() {
  std::vector<std::string> names;
  for (const auto &task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (std::getline(comm, name)) names.push_back(name);
  }
  return names;
}

size_t count_prefixed(const std::vector<std::string> &names, const std::string &prefix) {
  return static_cast<size_t>(std::count_if(
      names.begin(), names.end(), [&](const std::string &n) { return n.rfind(prefix, 0) == 0; }));
}

}  // namespace

TEST_CASE("the simulated device's queue workers carry the device and core in their names",
          "[queues][threads]") {
  SimEnv env;
  const trn_device_t device = first_device();
  // Named "trn-q<device>.<first physical core>", as ps, top, perf and gdb show them.
  CHECK(count_prefixed(thread_names(), "trn-q0.") == 0);
  trn_queue_t first = make_queue(core_at(device, 0));
  trn_queue_t second = make_queue(core_at(device, 1));
  const auto names = thread_names();
  CHECK(count_prefixed(names, "trn-q0.") == 2);
  CHECK(count_prefixed(names, "trn-q0.0") == 1);
  REQUIRE(trn_queue_destroy(first) == TRN_SUCCESS);
  REQUIRE(trn_queue_destroy(second) == TRN_SUCCESS);
  // A destroyed queue's worker is gone. A joined thread's /proc entry may outlive the join by a
  // moment (the kernel clears the thread id before it releases the task): look for up to 2 s.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (count_prefixed(thread_names(), "trn-q0.") != 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(count_prefixed(thread_names(), "trn-q0.") == 0);
}

TEST_CASE("copies and memsets over 8 MiB from two queues at once are exact at odd offsets",
          "[queues][copy]") {
  // Transfers from 8 MiB are cut into pieces that the thread running the command and the
  // driver's DMA helpers take in turn; two queues' transfers share the helpers.
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_pool_t host_pool = make_pool(device, 0, TRN_POOL_KIND_HOST);
  constexpr uint64_t kSize = (9ull << 20) + 4097;  // an odd tail past the last whole page
  constexpr uint64_t kRoom = kSize + 8192;
  struct Lane {
    trn_queue_t queue;
    trn_mem_t host, a, b;
    std::vector<uint8_t> data;
  };
  std::vector<Lane> lanes;
  for (uint32_t i = 0; i < 2; ++i) {
    Lane lane{make_queue(core_at(device, i)), alloc(host_pool, kRoom), alloc(pool, kRoom),
              alloc(pool, kRoom), pattern(kSize, 11 + i)};
    void *host = nullptr;
    REQUIRE(trn_mem_map(lane.host, &host) == TRN_SUCCESS);
    std::memcpy(static_cast<char *>(host) + 5, lane.data.data(), kSize);
    lanes.push_back(std::move(lane));
  }
  // Host pool -> device at offsets of no alignment, device -> device, then a memset over the
  // middle: each queue's commands in order, the two queues at once.
  for (const Lane &lane : lanes) {
    REQUIRE(trn_queue_copy(lane.queue, lane.a, 3, lane.host, 5, kSize, nullptr, nullptr) ==
            TRN_SUCCESS);
    REQUIRE(trn_queue_copy(lane.queue, lane.b, 4101, lane.a, 3, kSize, nullptr, nullptr) ==
            TRN_SUCCESS);
    REQUIRE(trn_queue_memset(lane.queue, lane.a, 1000, 0xe7, (8ull << 20) + 1, nullptr, nullptr) ==
            TRN_SUCCESS);
  }
  for (const Lane &lane : lanes) finish(lane.queue);
  for (const Lane &lane : lanes) {
    CHECK(read_mem(lane.b, 4101, kSize) == lane.data);
    CHECK(reads_as(lane.b, 0, 4101, 0));
    CHECK(reads_as(lane.b, 4101 + kSize, kRoom - 4101 - kSize, 0));
    const auto a = read_mem(lane.a, 0, kRoom);
    CHECK(std::equal(lane.data.begin(), lane.data.begin() + 997, a.begin() + 3));
    CHECK(reads_as(lane.a, 1000, (8ull << 20) + 1, 0xe7));
    const uint64_t after = 1000 + (8ull << 20) + 1;
    CHECK(std::equal(lane.data.begin() + (after - 3), lane.data.end(), a.begin() + after));
  }
  // The helpers outlive a transfer: later ones find the same threads, none started per copy.
  const size_t helpers = count_prefixed(thread_names(), "trn-dma");
  CHECK(helpers <= 3);
  if (std::thread::hardware_concurrency() > 1) CHECK(helpers >= 1);
  for (int i = 0; i < 3; ++i) {
    REQUIRE(trn_queue_copy(lanes[0].queue, lanes[0].b, 0, lanes[0].a, 0, kRoom, nullptr, nullptr) ==
            TRN_SUCCESS);
    finish(lanes[0].queue);
    CHECK(count_prefixed(thread_names(), "trn-dma") == helpers);
  }
  for (const Lane &lane : lanes) {
    REQUIRE(trn_queue_destroy(lane.queue) == TRN_SUCCESS);
    for (trn_mem_t m : {lane.host, lane.a, lane.b}) REQUIRE(trn_mem_free(m) == TRN_SUCCESS);
  }
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(host_pool) == TRN_SUCCESS);
}
