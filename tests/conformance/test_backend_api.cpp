// Conformance: the API a framework backend needs (0.2) — host-pointer copies through queues,
// registered host memory, timestamps, allocation lookup by address, stream-ordered frees, host
// functions in queue order, device-wide synchronisation, queue priorities and which queues take
// a core; every function's refusal of bad input.
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "support/api_helpers.hpp"
#include "support/result_printing.hpp"
#include "support/sim_env.hpp"
#include "support/subprocess.hpp"
#include "support/test_kernels.hpp"
#include "trn/trn.h"

namespace {

using trn::test::alloc;
using trn::test::core_at;
using trn::test::error_contains;
using trn::test::first_device;
using trn::test::last_error;
using trn::test::make_pool;
using trn::test::make_queue;
using trn::test::make_sem;
using trn::test::SimEnv;

constexpr uint64_t kSecond = 1'000'000'000;
constexpr uint64_t kLong = 10 * kSecond;  // "forever" in a test: a hang fails, never blocks

uint64_t address_of(trn_mem_t mem) {
  return trn::test::mem_info(mem).device_address;
}

void finish(trn_queue_t queue) {
  INFO(last_error());
  REQUIRE(trn_queue_finish(queue, kLong) == TRN_SUCCESS);
}

std::vector<uint8_t> pattern(size_t bytes, uint8_t seed) {
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 9));
  return data;
}

// Queues a write, held back by `gate`, into memory freed at once: when the gate opens the queue
// faults (a use after free), and what follows it is cancelled.
void queue_doomed_write(trn_queue_t queue, trn_pool_t pool, trn_sem_t gate) {
  static uint32_t word = 0;
  trn_mem_t victim = alloc(pool, 4096);
  const trn_sem_point_t open{gate, 1};
  const trn_sync_t wait{&open, 1, nullptr, 0};
  REQUIRE(trn_queue_write(queue, victim, 0, &word, sizeof word, &wait, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(victim) == TRN_SUCCESS);
}

}  // namespace

TEST_CASE("trn_queue_write and trn_queue_read copy plain host memory in queue order",
          "[backend][copy]") {
  SimEnv env;
  trn_device_t device = first_device();
  trn_queue_t queue = make_queue(core_at(device, 0), TRN_QUEUE_KIND_COPY);
  trn_pool_t pool = make_pool(device);
  trn_pool_t host_pool = make_pool(device, TRN_POOL_KIND_HOST);
  for (trn_pool_t p : {pool, host_pool}) {
    const size_t bytes = 3 * 1024 * 1024 + 17;  // not a multiple of anything
    trn_mem_t mem = alloc(p, bytes + 64);
    const auto in = pattern(bytes, 3);
    std::vector<uint8_t> out(bytes, 0xee);
    uint64_t s1 = 0, s2 = 0;
    REQUIRE(trn_queue_write(queue, mem, 64, in.data(), bytes, nullptr, &s1) == TRN_SUCCESS);
    REQUIRE(trn_queue_read(queue, out.data(), mem, 64, bytes, nullptr, &s2) == TRN_SUCCESS);
    CHECK(s2 == s1 + 1);
    finish(queue);
    CHECK(out == in);
    // The bytes before the offset were not touched (fresh memory reads as zeros).
    uint8_t head[64];
    REQUIRE(trn_mem_read(mem, 0, head, sizeof head) == TRN_SUCCESS);
    CHECK(std::all_of(std::begin(head), std::end(head), [](uint8_t b) { return b == 0; }));
    // Zero bytes is a command like any other.
    REQUIRE(trn_queue_write(queue, mem, 0, in.data(), 0, nullptr, nullptr) == TRN_SUCCESS);
    finish(queue);
    REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  }
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
}

TEST_CASE("host-pointer copies are ordered with other commands and semaphores", "[backend][copy]") {
  SimEnv env;
  trn_device_t device = first_device();
  trn_queue_t first = make_queue(core_at(device, 0), TRN_QUEUE_KIND_COPY);
  trn_queue_t second = make_queue(core_at(device, 1), TRN_QUEUE_KIND_COPY);
  trn_pool_t pool = make_pool(device);
  trn_mem_t mem = alloc(pool, 4096);
  trn_sem_t sem = make_sem(device);
  std::vector<uint32_t> in(1024);
  std::iota(in.begin(), in.end(), 1u);
  std::vector<uint32_t> out(1024, 0);
  // The read on the second queue waits for the write on the first.
  const trn_sem_point_t done{sem, 1};
  const trn_sync_t wait{&done, 1, nullptr, 0};
  REQUIRE(trn_queue_read(second, out.data(), mem, 0, 4096, &wait, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_memset(first, mem, 0, 0xff, 4096, nullptr, nullptr) == TRN_SUCCESS);
  const trn_sync_t signal{nullptr, 0, &done, 1};
  REQUIRE(trn_queue_write(first, mem, 0, in.data(), 4096, &signal, nullptr) == TRN_SUCCESS);
  finish(second);
  CHECK(out == in);
  REQUIRE(trn_queue_destroy(first) == TRN_SUCCESS);
  REQUIRE(trn_queue_destroy(second) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(sem) == TRN_SUCCESS);
}

TEST_CASE("host-pointer copies refuse bad arguments", "[backend][copy][negative]") {
  SimEnv env;
  trn_device_t device = first_device();
  trn_queue_t queue = make_queue(core_at(device, 0), TRN_QUEUE_KIND_COPY);
  trn_pool_t pool = make_pool(device);
  trn_mem_t mem = alloc(pool, 4096);
  std::vector<uint8_t> host(8192);
  CHECK(trn_queue_write(queue, mem, 0, nullptr, 16, nullptr, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(error_contains("source is NULL"));
  CHECK(trn_queue_read(queue, nullptr, mem, 0, 16, nullptr, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(error_contains("destination is NULL"));
  CHECK(trn_queue_write(queue, mem, 4000, host.data(), 200, nullptr, nullptr) ==
        TRN_ERROR_OUT_OF_RANGE);
  CHECK(error_contains("outside the allocation"));
  CHECK(trn_queue_read(queue, host.data(), mem, 0, 8192, nullptr, nullptr) ==
        TRN_ERROR_OUT_OF_RANGE);
  CHECK(trn_queue_write(queue, nullptr, 0, host.data(), 16, nullptr, nullptr) ==
        TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_queue_read(nullptr, host.data(), mem, 0, 16, nullptr, nullptr) ==
        TRN_ERROR_INVALID_HANDLE);
  // A host pointer that cannot be one: past the user address space.
  CHECK(trn_queue_write(queue, mem, 0, reinterpret_cast<void *>(uintptr_t{0xff} << 56), 16, nullptr,
                        nullptr) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("not a range of this process's memory"));
  // Memory freed before a queued write runs: the queue faults with a use-after-free, not a crash.
  trn_sem_t gate = make_sem(device);
  const trn_sem_point_t open{gate, 1};
  const trn_sync_t wait{&open, 1, nullptr, 0};
  REQUIRE(trn_queue_write(queue, mem, 0, host.data(), 16, &wait, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  REQUIRE(trn_sem_signal(gate, 1) == TRN_SUCCESS);
  CHECK(trn_queue_finish(queue, kLong) == TRN_ERROR_INVALID_HANDLE);
  trn_queue_fault_t fault = TRN_QUEUE_FAULT_INIT;
  REQUIRE(trn_queue_get_fault(queue, &fault) == TRN_SUCCESS);
  CHECK(std::string(fault.command) == "write");
  CHECK(std::string(fault.reason).find("freed before the write ran") != std::string::npos);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(gate) == TRN_SUCCESS);
}

TEST_CASE("trn_mem_register_host wraps caller memory for copies and leaves it the caller's",
          "[backend][register]") {
  SimEnv env;
  trn_device_t device = first_device();
  trn_queue_t queue = make_queue(core_at(device, 0), TRN_QUEUE_KIND_COPY);
  trn_pool_t pool = make_pool(device);
  trn_mem_t dev = alloc(pool, 1 << 20);
  auto caller = std::make_unique<uint8_t[]>((1 << 20) + 3);
  uint8_t *unaligned = caller.get() + 3;  // no alignment needed
  const auto data = pattern(1 << 20, 11);
  std::memcpy(unaligned, data.data(), data.size());
  trn_mem_t host = nullptr;
  REQUIRE(trn_mem_register_host(device, unaligned, 1 << 20, 0, &host) == TRN_SUCCESS);
  trn_mem_info_t info = TRN_MEM_INFO_INIT;
  REQUIRE(trn_mem_get_info(host, &info) == TRN_SUCCESS);
  CHECK(info.kind == TRN_POOL_KIND_HOST);
  CHECK(info.registered == 1);
  CHECK(info.size == (1u << 20));
  CHECK(info.device_address == reinterpret_cast<uintptr_t>(unaligned));
  void *mapped = nullptr;
  REQUIRE(trn_mem_map(host, &mapped) == TRN_SUCCESS);
  CHECK(mapped == unaligned);
  // Device copies in both directions through the registration.
  REQUIRE(trn_queue_copy(queue, dev, 0, host, 0, 1 << 20, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_memset(queue, host, 0, 0, 1 << 20, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_copy(queue, host, 0, dev, 0, 1 << 20, nullptr, nullptr) == TRN_SUCCESS);
  finish(queue);
  CHECK(std::memcmp(unaligned, data.data(), data.size()) == 0);
  // A second registration overlapping it is refused; freeing unregisters, the memory stays.
  trn_mem_t again = nullptr;
  CHECK(trn_mem_register_host(device, unaligned + 100, 100, 0, &again) ==
        TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("overlaps"));
  REQUIRE(trn_mem_free(host) == TRN_SUCCESS);
  unaligned[0] = 42;  // still the caller's, still valid
  REQUIRE(trn_mem_register_host(device, unaligned + 100, 100, 0, &again) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(again) == TRN_SUCCESS);
  CHECK(trn_queue_copy(queue, dev, 0, host, 0, 16, nullptr, nullptr) == TRN_ERROR_INVALID_HANDLE);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
}

TEST_CASE("registered read-only memory is only read by the device", "[backend][register]") {
  SimEnv env;
  trn_device_t device = first_device();
  trn_queue_t queue = make_queue(core_at(device, 0), TRN_QUEUE_KIND_COPY);
  trn_pool_t pool = make_pool(device);
  trn_mem_t dev = alloc(pool, 4096);
  std::vector<uint8_t> source = pattern(4096, 5), back(4096);
  trn_mem_t ro = nullptr;
  REQUIRE(trn_mem_register_host(device, source.data(), 4096, TRN_MEM_REGISTER_READ_ONLY, &ro) ==
          TRN_SUCCESS);
  REQUIRE(trn_queue_copy(queue, dev, 0, ro, 0, 4096, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_read(queue, back.data(), dev, 0, 4096, nullptr, nullptr) == TRN_SUCCESS);
  finish(queue);
  CHECK(back == source);
  CHECK(trn_queue_copy(queue, ro, 0, dev, 0, 4096, nullptr, nullptr) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("TRN_MEM_REGISTER_READ_ONLY"));
  CHECK(trn_queue_memset(queue, ro, 0, 1, 16, nullptr, nullptr) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(trn_queue_write(queue, ro, 0, back.data(), 16, nullptr, nullptr) ==
        TRN_ERROR_INVALID_ARGUMENT);
  REQUIRE(trn_mem_free(ro) == TRN_SUCCESS);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
}

TEST_CASE("trn_mem_register_host refuses bad arguments", "[backend][register][negative]") {
  SimEnv env;
  trn_device_t device = first_device();
  std::vector<uint8_t> buffer(4096);
  trn_mem_t mem = nullptr;
  CHECK(trn_mem_register_host(nullptr, buffer.data(), 4096, 0, &mem) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_mem_register_host(device, nullptr, 4096, 0, &mem) == TRN_ERROR_NULL_POINTER);
  CHECK(trn_mem_register_host(device, buffer.data(), 4096, 0, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(trn_mem_register_host(device, buffer.data(), 0, 0, &mem) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("size is 0"));
  CHECK(trn_mem_register_host(device, buffer.data(), 4096, 0x80, &mem) ==
        TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("TRN_MEM_REGISTER_READ_ONLY"));
  CHECK(mem == nullptr);
}

TEST_CASE("trn_mem_lookup finds the allocation that holds an address", "[backend][lookup]") {
  SimEnv env;
  trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device);
  trn_pool_t host_pool = make_pool(device, TRN_POOL_KIND_HOST);
  std::vector<trn_mem_t> mems;
  for (int i = 0; i < 8; ++i) mems.push_back(alloc(i % 2 ? host_pool : pool, 1000 + 512 * i));
  std::vector<uint8_t> caller(777);
  trn_mem_t registered = nullptr;
  REQUIRE(trn_mem_register_host(device, caller.data(), caller.size(), 0, &registered) ==
          TRN_SUCCESS);
  mems.push_back(registered);
  for (trn_mem_t m : mems) {
    trn_mem_info_t info = TRN_MEM_INFO_INIT;
    REQUIRE(trn_mem_get_info(m, &info) == TRN_SUCCESS);
    for (uint64_t offset : {uint64_t{0}, uint64_t{1}, info.size / 2, info.size - 1}) {
      trn_mem_t found = nullptr;
      uint64_t at = UINT64_MAX;
      INFO(last_error());
      REQUIRE(trn_mem_lookup(device, info.device_address + offset, &found, &at) == TRN_SUCCESS);
      CHECK(found == m);
      CHECK(at == offset);
    }
    trn_mem_t found = nullptr;
    REQUIRE(trn_mem_lookup(device, info.device_address, &found, nullptr) == TRN_SUCCESS);
    CHECK(found == m);
  }
  // Past the end of an allocation, and after a free: not found.
  const uint64_t first = address_of(mems[0]);
  REQUIRE(trn_mem_free(mems[0]) == TRN_SUCCESS);
  trn_mem_t found = nullptr;
  CHECK(trn_mem_lookup(device, first, &found, nullptr) == TRN_ERROR_NOT_FOUND);
  CHECK(error_contains("no live allocation"));
  CHECK(trn_mem_lookup(device, 0x10, &found, nullptr) == TRN_ERROR_NOT_FOUND);
  REQUIRE(trn_mem_free(registered) == TRN_SUCCESS);
  CHECK(trn_mem_lookup(device, reinterpret_cast<uintptr_t>(caller.data()), &found, nullptr) ==
        TRN_ERROR_NOT_FOUND);
  // Bad arguments.
  CHECK(trn_mem_lookup(device, address_of(mems[1]), nullptr, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(trn_mem_lookup(nullptr, address_of(mems[1]), &found, nullptr) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_result_name(TRN_ERROR_NOT_FOUND) == std::string("TRN_ERROR_NOT_FOUND"));
}

TEST_CASE("timestamps carry the queue's device time and the host's clock", "[backend][time]") {
  SimEnv env;
  trn_device_t device = first_device();
  trn_queue_t queue = make_queue(core_at(device, 0), TRN_QUEUE_KIND_COPY);
  trn_pool_t pool = make_pool(device);
  trn_mem_t a = alloc(pool, 64 << 20), b = alloc(pool, 64 << 20);
  trn_timestamp_t start{}, end{};
  uint64_t device_before = 0, host_before = 0;
  REQUIRE(trn_device_get_timestamps(device, &device_before, &host_before) == TRN_SUCCESS);
  REQUIRE(trn_queue_write_timestamp(queue, &start, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_copy(queue, b, 0, a, 0, 64 << 20, nullptr, nullptr) == TRN_SUCCESS);
  uint64_t sequence = 0;
  REQUIRE(trn_queue_write_timestamp(queue, &end, nullptr, &sequence) == TRN_SUCCESS);
  CHECK(sequence == 3);
  finish(queue);
  uint64_t device_after = 0, host_after = 0;
  REQUIRE(trn_device_get_timestamps(device, &device_after, &host_after) == TRN_SUCCESS);
  // The copy's simulated time lies between the two: 64 MiB on a core's DMA engines is tens of
  // microseconds at least.
  CHECK(end.device_ns > start.device_ns + 10'000);
  CHECK(end.host_ns >= start.host_ns);
  CHECK(start.host_ns >= host_before);
  CHECK(end.host_ns <= host_after);
  CHECK(device_after >= end.device_ns);
  CHECK(device_before <= start.device_ns);
  // Bad arguments.
  CHECK(trn_queue_write_timestamp(queue, nullptr, nullptr, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(trn_queue_write_timestamp(nullptr, &start, nullptr, nullptr) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_device_get_timestamps(device, nullptr, &host_after) == TRN_ERROR_NULL_POINTER);
  CHECK(trn_device_get_timestamps(device, &device_after, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(trn_device_get_timestamps(nullptr, &device_after, &host_after) == TRN_ERROR_INVALID_HANDLE);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
}

// Two copy queues of one core, one signalling a semaphore to 1 and 2, the other waiting for it,
// with two 64 MiB buffers to move the queues' clocks apart.
struct SignallerAndWaiter {
  SimEnv env;
  trn_device_t device = first_device();
  trn_queue_t signaller = make_queue(core_at(device, 0), TRN_QUEUE_KIND_COPY);
  trn_queue_t waiter = make_queue(core_at(device, 0), TRN_QUEUE_KIND_COPY);
  trn_pool_t pool = make_pool(device);
  trn_mem_t a = alloc(pool, 64 << 20), b = alloc(pool, 64 << 20);
  trn_sem_t sem = make_sem(device);
  const trn_sem_point_t first{sem, 1}, second{sem, 2};
  const trn_sync_t signal_first{nullptr, 0, &first, 1}, signal_second{nullptr, 0, &second, 1};
  const trn_sync_t wait_first{&first, 1, nullptr, 0}, wait_second{&second, 1, nullptr, 0};

  // Signals 1 and then 2, each after a 64 MiB copy, with the signaller's time at each.
  void signal_apart(trn_timestamp_t *at_first, trn_timestamp_t *at_second) {
    REQUIRE(trn_queue_copy(signaller, b, 0, a, 0, 64 << 20, &signal_first, nullptr) == TRN_SUCCESS);
    REQUIRE(trn_queue_write_timestamp(signaller, at_first, nullptr, nullptr) == TRN_SUCCESS);
    REQUIRE(trn_queue_copy(signaller, a, 0, b, 0, 64 << 20, &signal_second, nullptr) ==
            TRN_SUCCESS);
    REQUIRE(trn_queue_write_timestamp(signaller, at_second, nullptr, nullptr) == TRN_SUCCESS);
    finish(signaller);
  }

  ~SignallerAndWaiter() {
    CHECK(trn_sem_destroy(sem) == TRN_SUCCESS);
    CHECK(trn_queue_destroy(waiter) == TRN_SUCCESS);
    CHECK(trn_queue_destroy(signaller) == TRN_SUCCESS);
  }
};

TEST_CASE("a queue's wait takes the device time of the signal that reached its value",
          "[backend][time]") {
  // A signaller that ran ahead (a collective's peer a few chunks on) raised the semaphore again
  // before the wait ran: the waiting queue's clock follows the signal it waited for, not the
  // latest one, whatever the host threads' timing was.
  SignallerAndWaiter q;
  trn_timestamp_t at_first{}, at_second{}, after_wait{};
  q.signal_apart(&at_first, &at_second);
  REQUIRE(trn_queue_write_timestamp(q.waiter, &after_wait, &q.wait_first, nullptr) == TRN_SUCCESS);
  finish(q.waiter);
  REQUIRE(at_second.device_ns > at_first.device_ns + 10'000);  // 64 MiB between them
  CHECK(after_wait.device_ns == at_first.device_ns);
}

TEST_CASE("a queue whose clock is past a signal's time keeps its clock when it waits for it",
          "[backend][time]") {
  // The other side of the case above: the wait moves a clock only forward, whether the signal
  // it waited for was the latest one or an earlier one.
  SignallerAndWaiter q;
  trn_timestamp_t at_signal{}, before_wait{}, after_first{}, after_second{};
  REQUIRE(trn_queue_copy(q.signaller, q.b, 0, q.a, 0, 4096, &q.signal_first, nullptr) ==
          TRN_SUCCESS);
  REQUIRE(trn_queue_copy(q.signaller, q.b, 0, q.a, 0, 4096, &q.signal_second, nullptr) ==
          TRN_SUCCESS);
  REQUIRE(trn_queue_write_timestamp(q.signaller, &at_signal, nullptr, nullptr) == TRN_SUCCESS);
  finish(q.signaller);
  REQUIRE(trn_queue_copy(q.waiter, q.b, 0, q.a, 0, 64 << 20, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_write_timestamp(q.waiter, &before_wait, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_write_timestamp(q.waiter, &after_first, &q.wait_first, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_write_timestamp(q.waiter, &after_second, &q.wait_second, nullptr) ==
          TRN_SUCCESS);
  finish(q.waiter);
  REQUIRE(before_wait.device_ns > at_signal.device_ns + 10'000);  // 64 MiB after the signals
  CHECK(after_first.device_ns == before_wait.device_ns);
  CHECK(after_second.device_ns == before_wait.device_ns);
}

TEST_CASE("a wait for a value an earlier wait saw passed takes the time of its own signal",
          "[backend][time]") {
  // Waits remember the highest value they saw reached (a value seen needs no second look at the
  // semaphore): a later wait for a lower value on a queue whose clock is behind still follows the
  // signal that reached that value, not the one the earlier wait saw.
  SignallerAndWaiter q;
  // Made before the signals, so that its clock is behind both (a new queue starts at the
  // device's time).
  trn_queue_t late = make_queue(core_at(q.device, 0), TRN_QUEUE_KIND_COPY);
  trn_timestamp_t at_first{}, at_second{}, after_second{}, after_first{};
  q.signal_apart(&at_first, &at_second);
  REQUIRE(trn_queue_write_timestamp(q.waiter, &after_second, &q.wait_second, nullptr) ==
          TRN_SUCCESS);
  finish(q.waiter);
  REQUIRE(trn_queue_write_timestamp(late, &after_first, &q.wait_first, nullptr) == TRN_SUCCESS);
  finish(late);
  REQUIRE(trn_queue_destroy(late) == TRN_SUCCESS);
  REQUIRE(at_second.device_ns > at_first.device_ns + 10'000);  // 64 MiB between them
  CHECK(after_second.device_ns == at_second.device_ns);
  CHECK(after_first.device_ns == at_first.device_ns);
}

TEST_CASE("trn_queue_free frees after the queue's earlier work, which does not fault",
          "[backend][free]") {
  SimEnv env;
  trn_device_t device = first_device();
  trn_queue_t queue = make_queue(core_at(device, 0), TRN_QUEUE_KIND_COPY);
  trn_pool_t pool = make_pool(device);
  trn_mem_t mem = alloc(pool, 1 << 20);
  trn_sem_t gate = make_sem(device);
  std::vector<uint8_t> in = pattern(1 << 20, 9), out(1 << 20);
  const trn_sem_point_t open{gate, 1};
  const trn_sync_t wait{&open, 1, nullptr, 0};
  // Held back until the free is queued behind them.
  REQUIRE(trn_queue_write(queue, mem, 0, in.data(), in.size(), &wait, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_read(queue, out.data(), mem, 0, out.size(), nullptr, nullptr) == TRN_SUCCESS);
  const uint64_t address = address_of(mem);
  uint64_t sequence = 0;
  REQUIRE(trn_queue_free(queue, mem, nullptr, &sequence) == TRN_SUCCESS);
  CHECK(sequence == 3);
  // The handle is gone at once; the memory is not, until the queue gets there.
  trn_mem_info_t info = TRN_MEM_INFO_INIT;
  CHECK(trn_mem_get_info(mem, &info) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_queue_free(queue, mem, nullptr, nullptr) == TRN_ERROR_INVALID_HANDLE);
  trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
  REQUIRE(trn_pool_get_stats(pool, &stats) == TRN_SUCCESS);
  CHECK(stats.allocation_count == 1);
  REQUIRE(trn_sem_signal(gate, 1) == TRN_SUCCESS);
  finish(queue);
  CHECK(out == in);
  REQUIRE(trn_pool_get_stats(pool, &stats) == TRN_SUCCESS);
  CHECK(stats.allocation_count == 0);
  trn_mem_t found = nullptr;
  CHECK(trn_mem_lookup(device, address, &found, nullptr) == TRN_ERROR_NOT_FOUND);
  CHECK(trn_pool_destroy(pool) == TRN_SUCCESS);
  CHECK(trn_queue_free(nullptr, mem, nullptr, nullptr) == TRN_ERROR_INVALID_HANDLE);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(gate) == TRN_SUCCESS);
}

TEST_CASE("a stream-ordered free still frees when the queue faulted or was destroyed first",
          "[backend][free]") {
  SimEnv env;
  trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device);
  for (bool destroy : {false, true}) {
    trn_queue_t queue = make_queue(core_at(device, 0), TRN_QUEUE_KIND_COPY);
    trn_sem_t gate = make_sem(device);
    queue_doomed_write(queue, pool, gate);
    trn_mem_t mem = alloc(pool, 4096);
    REQUIRE(trn_queue_free(queue, mem, nullptr, nullptr) == TRN_SUCCESS);
    if (!destroy) {
      REQUIRE(trn_sem_signal(gate, 1) == TRN_SUCCESS);
      CHECK(trn_queue_finish(queue, kLong) == TRN_ERROR_INVALID_HANDLE);
    }
    REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);  // cancels what did not run
    trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
    REQUIRE(trn_pool_get_stats(pool, &stats) == TRN_SUCCESS);
    CHECK(stats.allocation_count == 0);
    REQUIRE(trn_sem_destroy(gate) == TRN_SUCCESS);
  }
}

namespace {

struct HostCallLog {
  std::atomic<int> calls{0};
  std::atomic<trn_result_t> status{TRN_SUCCESS};
  uint32_t seen = 0;  // what the function read from the host buffer
  const uint32_t *watch = nullptr;
  trn_queue_t own = nullptr;
  trn_result_t finish_from_inside = TRN_SUCCESS;
  trn_result_t destroy_from_inside = TRN_SUCCESS;
  trn_result_t sync_from_inside = TRN_SUCCESS;
  trn_result_t shutdown_from_inside = TRN_SUCCESS;
  trn_device_t device = nullptr;
};

void record_call(void *user, trn_result_t status) {
  auto &log = *static_cast<HostCallLog *>(user);
  if (log.watch) log.seen = *log.watch;
  if (log.own) {
    log.finish_from_inside = trn_queue_finish(log.own, kSecond);
    log.destroy_from_inside = trn_queue_destroy(log.own);
    log.sync_from_inside = trn_device_synchronize(log.device, kSecond);
    log.shutdown_from_inside = trn_runtime_shutdown();
  }
  log.status = status;
  log.calls.fetch_add(1);
}

}  // namespace

TEST_CASE("trn_queue_host_call runs a host function in queue order", "[backend][host_call]") {
  SimEnv env;
  trn_device_t device = first_device();
  trn_queue_t queue = make_queue(core_at(device, 0), TRN_QUEUE_KIND_COPY);
  trn_pool_t pool = make_pool(device);
  trn_mem_t mem = alloc(pool, 4096);
  uint32_t value = 0;
  const uint32_t expected = 0xC0FFEE;
  REQUIRE(trn_mem_write(mem, 0, &expected, sizeof expected) == TRN_SUCCESS);
  HostCallLog log;
  log.watch = &value;
  REQUIRE(trn_queue_read(queue, &value, mem, 0, sizeof value, nullptr, nullptr) == TRN_SUCCESS);
  uint64_t sequence = 0;
  REQUIRE(trn_queue_host_call(queue, record_call, &log, nullptr, &sequence) == TRN_SUCCESS);
  CHECK(sequence == 2);
  finish(queue);
  CHECK(log.calls == 1);
  CHECK(log.status == TRN_SUCCESS);
  CHECK(log.seen == expected);  // the read before it had completed

  SECTION("it may not wait for its own queue") {
    HostCallLog inside;
    inside.own = queue;
    inside.device = device;
    REQUIRE(trn_queue_host_call(queue, record_call, &inside, nullptr, nullptr) == TRN_SUCCESS);
    finish(queue);
    CHECK(inside.calls == 1);
    CHECK(inside.finish_from_inside == TRN_ERROR_INVALID_ARGUMENT);
    CHECK(inside.destroy_from_inside == TRN_ERROR_INVALID_ARGUMENT);
    CHECK(inside.sync_from_inside == TRN_ERROR_INVALID_ARGUMENT);
    CHECK(inside.shutdown_from_inside == TRN_ERROR_INVALID_ARGUMENT);
    // Refused, not half done: the queue still works.
    REQUIRE(trn_queue_host_call(queue, record_call, &log, nullptr, nullptr) == TRN_SUCCESS);
    finish(queue);
    CHECK(log.calls == 2);
  }
  SECTION("it is called once with the failure when the queue faulted before it") {
    trn_sem_t gate = make_sem(device);
    queue_doomed_write(queue, pool, gate);
    HostCallLog after;
    REQUIRE(trn_queue_host_call(queue, record_call, &after, nullptr, nullptr) == TRN_SUCCESS);
    REQUIRE(trn_sem_signal(gate, 1) == TRN_SUCCESS);
    CHECK(trn_queue_finish(queue, kLong) == TRN_ERROR_INVALID_HANDLE);
    CHECK(after.calls == 1);
    CHECK(after.status == TRN_ERROR_CANCELLED);
    HostCallLog destroyed;
    REQUIRE(trn_queue_reset(queue) == TRN_SUCCESS);
    trn_sem_t never = make_sem(device);
    const trn_sem_point_t point{never, 1};
    const trn_sync_t wait{&point, 1, nullptr, 0};
    REQUIRE(trn_queue_host_call(queue, record_call, &destroyed, &wait, nullptr) == TRN_SUCCESS);
    REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
    queue = nullptr;
    CHECK(destroyed.calls == 1);
    CHECK(destroyed.status != TRN_SUCCESS);
    REQUIRE(trn_sem_destroy(never) == TRN_SUCCESS);
  }
  SECTION("bad arguments") {
    CHECK(trn_queue_host_call(queue, nullptr, &log, nullptr, nullptr) == TRN_ERROR_NULL_POINTER);
    CHECK(trn_queue_host_call(nullptr, record_call, &log, nullptr, nullptr) ==
          TRN_ERROR_INVALID_HANDLE);
  }
  trn_queue_destroy(queue);
}

namespace {

struct FreeOnCancel {
  trn_mem_t mem = nullptr;
  std::atomic<int> calls{0};
  std::atomic<trn_result_t> status{TRN_SUCCESS};
  std::atomic<trn_result_t> freed{TRN_ERROR_INTERNAL};
};

void free_on_cancel(void *user, trn_result_t status) {
  auto &state = *static_cast<FreeOnCancel *>(user);
  state.status = status;
  state.freed = trn_mem_free(state.mem);  // what a backend's callback does with what it held
  state.calls.fetch_add(1);
}

}  // namespace

TEST_CASE("a host function cancelled by trn_runtime_shutdown may call the API",
          "[backend][host_call][shutdown]") {
  // The shutdown waits for the queue's thread, which runs the cancelled function: its call must
  // not wait for the shutdown in turn. Run in a child, so that a hang fails the test.
  SimEnv env;
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int code = 0;
    {
      const trn_device_t device = first_device();
      trn_queue_t queue = nullptr;
      trn_queue_desc_t desc = TRN_QUEUE_DESC_INIT;
      desc.core = core_at(device, 0);
      trn_pool_t pool = nullptr;
      trn_pool_desc_t pdesc = TRN_POOL_DESC_INIT;
      trn_sem_t never = nullptr;
      trn_sem_desc_t sdesc = TRN_SEM_DESC_INIT;
      FreeOnCancel state;
      if (trn_queue_create(&desc, &queue) != TRN_SUCCESS ||
          trn_pool_create(device, &pdesc, &pool) != TRN_SUCCESS ||
          trn_mem_alloc(pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &state.mem) != TRN_SUCCESS ||
          trn_sem_create(device, &sdesc, &never) != TRN_SUCCESS)
        _exit(10);
      const trn_sem_point_t point{never, 1};
      const trn_sync_t wait{&point, 1, nullptr, 0};
      if (trn_queue_host_call(queue, free_on_cancel, &state, &wait, nullptr) != TRN_SUCCESS)
        _exit(11);
      if (trn_runtime_shutdown() != TRN_SUCCESS)
        code = 12;
      else if (state.calls != 1)
        code = 13;
      else if (state.status == TRN_SUCCESS)
        code = 14;
      // The allocation went with the runtime: freed before, or a stale handle after.
      else if (state.freed != TRN_SUCCESS && state.freed != TRN_ERROR_INVALID_HANDLE)
        code = 15;
    }
    _exit(code);
  }
  bool reaped = false;
  const int status = trn::test::wait_for_exit(child, 20000, &reaped, [] {});
  if (!reaped) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  }
  INFO("exit status " << status);
  REQUIRE(reaped);  // else the shutdown and the function waited for each other
  CHECK(status == 0);
}

TEST_CASE("trn_device_synchronize waits for every queue of the process on the device",
          "[backend][sync]") {
  SimEnv env;
  trn_device_t device = first_device();
  trn_queue_t a = make_queue(core_at(device, 0), TRN_QUEUE_KIND_COPY);
  trn_queue_t b = make_queue(core_at(device, 1), TRN_QUEUE_KIND_COMPUTE);
  trn_pool_t pool = make_pool(device);
  trn_mem_t src = alloc(pool, 16 << 20), dst = alloc(pool, 16 << 20);
  trn_sem_t gate = make_sem(device);
  HostCallLog log;
  const trn_sem_point_t open{gate, 1};
  const trn_sync_t wait{&open, 1, nullptr, 0};
  REQUIRE(trn_queue_copy(a, dst, 0, src, 0, 16 << 20, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_host_call(b, record_call, &log, &wait, nullptr) == TRN_SUCCESS);
  // Blocked on the gate: a deadline, then success once it opens.
  CHECK(trn_device_synchronize(device, 20'000'000) == TRN_TIMEOUT);
  REQUIRE(trn_sem_signal(gate, 1) == TRN_SUCCESS);
  INFO(last_error());
  REQUIRE(trn_device_synchronize(device, kLong) == TRN_SUCCESS);
  CHECK(log.calls == 1);
  // A faulted queue is the result, after the others drained.
  trn_sem_t doom = make_sem(device);
  queue_doomed_write(b, pool, doom);
  REQUIRE(trn_queue_copy(a, dst, 0, src, 0, 1 << 20, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_sem_signal(doom, 1) == TRN_SUCCESS);
  CHECK(trn_device_synchronize(device, kLong) == TRN_ERROR_INVALID_HANDLE);
  CHECK(error_contains("the queue on core 1"));
  CHECK(trn_device_synchronize(nullptr, kLong) == TRN_ERROR_INVALID_HANDLE);
  trn_queue_destroy(a);
  trn_queue_destroy(b);
  trn_sem_destroy(gate);
  trn_sem_destroy(doom);
}

TEST_CASE("copy queues take no core, compute queues do", "[backend][ownership]") {
  SimEnv env;
  trn_device_t device = first_device();
  trn_core_t core = core_at(device, 0);
  trn_queue_t copy = make_queue(core, TRN_QUEUE_KIND_COPY);
  trn_core_properties_t p = TRN_CORE_PROPERTIES_INIT;
  REQUIRE(trn_core_get_properties(core, &p) == TRN_SUCCESS);
  CHECK(p.owned == 0);
  trn_process_info_t owner = TRN_PROCESS_INFO_INIT;
  REQUIRE(trn_core_get_owner(core, &owner) == TRN_SUCCESS);
  CHECK(owner.pid == 0);
  // It copies all the same.
  trn_pool_t pool = make_pool(device);
  trn_mem_t mem = alloc(pool, 4096);
  uint32_t in = 7, out = 0;
  REQUIRE(trn_queue_write(copy, mem, 0, &in, 4, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_read(copy, &out, mem, 0, 4, nullptr, nullptr) == TRN_SUCCESS);
  finish(copy);
  CHECK(out == 7);
  // A compute queue takes the core; releasing it waits for no copy queue.
  trn_queue_t compute = make_queue(core, TRN_QUEUE_KIND_COMPUTE);
  REQUIRE(trn_core_get_properties(core, &p) == TRN_SUCCESS);
  CHECK(p.owned == 1);
  CHECK(trn_core_release(core) == TRN_ERROR_HANDLE_IN_USE);
  REQUIRE(trn_queue_destroy(compute) == TRN_SUCCESS);
  INFO(last_error());
  CHECK(trn_core_release(core) == TRN_SUCCESS);
  REQUIRE(trn_queue_destroy(copy) == TRN_SUCCESS);
}

TEST_CASE("queue priorities: invalid values are refused", "[backend][priority][negative]") {
  SimEnv env;
  trn_queue_desc_t desc = TRN_QUEUE_DESC_INIT;
  desc.core = core_at(first_device(), 0);
  desc.priority = static_cast<trn_queue_priority_t>(9);
  trn_queue_t queue = nullptr;
  CHECK(trn_queue_create(&desc, &queue) == TRN_ERROR_INVALID_ENUM);
  CHECK(error_contains("desc.priority 9"));
  CHECK(queue == nullptr);
  for (auto priority : {TRN_QUEUE_PRIORITY_LOW, TRN_QUEUE_PRIORITY_NORMAL, TRN_QUEUE_PRIORITY_HIGH,
                        static_cast<trn_queue_priority_t>(0)}) {
    desc.priority = priority;
    REQUIRE(trn_queue_create(&desc, &queue) == TRN_SUCCESS);
    REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  }
}

namespace {

// Memory for each argument of a kernel, from one pool.
std::vector<trn_kernel_binding_t> bind_all(trn_kernel_t kernel, trn_pool_t pool) {
  uint32_t count = 0;
  REQUIRE(trn_kernel_get_args(kernel, &count, nullptr) == TRN_SUCCESS);
  std::vector<trn_kernel_arg_t> args(count, TRN_KERNEL_ARG_INIT);
  REQUIRE(trn_kernel_get_args(kernel, &count, args.data()) == TRN_SUCCESS);
  std::vector<trn_kernel_binding_t> bindings;
  for (const auto &arg : args) {
    trn_kernel_binding_t binding{};
    binding.mem = alloc(pool, arg.bytes);
    bindings.push_back(binding);
  }
  return bindings;
}

void launch(trn_queue_t queue, trn_kernel_t kernel,
            const std::vector<trn_kernel_binding_t> &bindings) {
  trn_launch_desc_t desc = TRN_LAUNCH_DESC_INIT;
  desc.kernel = kernel;
  desc.args = bindings.data();
  desc.arg_count = static_cast<uint32_t>(bindings.size());
  INFO(last_error());
  REQUIRE(trn_queue_launch(queue, &desc, nullptr, nullptr) == TRN_SUCCESS);
}

void set_flag(void *user, trn_result_t) {
  static_cast<std::atomic<bool> *>(user)->store(true);
}

}  // namespace

TEST_CASE("queue priorities: a waiting high-priority launch takes the core before a low one",
          "[backend][priority]") {
  SimEnv env;
  trn_device_t device = first_device();
  trn_core_t core = core_at(device, 0);
  trn_queue_t busy = make_queue(core, TRN_QUEUE_KIND_COMPUTE);
  trn_queue_t low = make_queue(core, TRN_QUEUE_KIND_COMPUTE, TRN_QUEUE_PRIORITY_LOW);
  trn_queue_t high = make_queue(core, TRN_QUEUE_KIND_COMPUTE, TRN_QUEUE_PRIORITY_HIGH);
  trn_pool_t pool = make_pool(device);
  // Long enough (tens of ms of host time) that the others queue up behind it.
  trn_kernel_t matmul =
      trn::test::load_program(device, trn::test::tiled_matmul_program(2048, 1024, 1024));
  trn_kernel_t add = trn::test::load_program(device, trn::test::vector_add_program());
  const auto matmul_args = bind_all(matmul, pool);
  const auto low_args = bind_all(add, pool), high_args = bind_all(add, pool);
  // A round counts when the busy launch still held the engines well after the others were
  // submitted, so that both their queues' workers were waiting for the core when it came free
  // (the host may run the busy one's worker late, or theirs): its end in host time shows it.
  constexpr uint64_t kWaitingMarginNs = 5'000'000;  // the busy launch lasts ~13 ms
  int rounds = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int attempt = 0; attempt < 60 && rounds < 3 && std::chrono::steady_clock::now() < deadline;
       ++attempt) {
    std::atomic<bool> started{false};
    REQUIRE(trn_queue_host_call(busy, set_flag, &started, nullptr, nullptr) == TRN_SUCCESS);
    launch(busy, matmul, matmul_args);
    while (!started.load()) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // into its launch
    trn_timestamp_t low_done{}, high_done{}, busy_done{};
    REQUIRE(trn_queue_write_timestamp(busy, &busy_done, nullptr, nullptr) == TRN_SUCCESS);
    // Low first: arrival order alone would run it first.
    launch(low, add, low_args);
    REQUIRE(trn_queue_write_timestamp(low, &low_done, nullptr, nullptr) == TRN_SUCCESS);
    launch(high, add, high_args);
    REQUIRE(trn_queue_write_timestamp(high, &high_done, nullptr, nullptr) == TRN_SUCCESS);
    const uint64_t submitted_ns =
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now().time_since_epoch())
                                  .count());
    INFO(last_error());
    REQUIRE(trn_device_synchronize(device, kLong) == TRN_SUCCESS);
    INFO("busy " << busy_done.device_ns << " high " << high_done.device_ns << " low "
                 << low_done.device_ns);
    if (busy_done.host_ns < submitted_ns + kWaitingMarginNs) continue;
    // A loaded host may run the busy queue's worker so late that the low launch found the core
    // free and took it first: then the busy launch never held the core while both waited.
    if (busy_done.device_ns > std::min(low_done.device_ns, high_done.device_ns)) continue;
    ++rounds;
    // Device time: one launch at a time on the core, the high one first.
    CHECK(high_done.device_ns < low_done.device_ns);
  }
  CHECK(rounds == 3);
  trn_queue_destroy(busy);
  trn_queue_destroy(low);
  trn_queue_destroy(high);
  trn_kernel_destroy(matmul);
  trn_kernel_destroy(add);
}

TEST_CASE("the library is API version 0.5", "[backend]") {
  CHECK(TRN_API_VERSION == TRN_MAKE_VERSION(0, 5));
  CHECK(trn_get_version() == TRN_API_VERSION);
  CHECK(std::string(trn_dtype_name(TRN_DTYPE_BF16)) == "bf16");
  CHECK(std::string(trn_engine_name(TRN_ENGINE_GPSIMD)) == "gpsimd");
}
