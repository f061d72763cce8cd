// Stress: many threads submitting to many queues at once, chained through semaphores, with small
// capacities so that TRN_ERROR_QUEUE_FULL is the normal case. Everything is bounded by a
// deadline (a hang fails the test instead of blocking it), every sequence number is accounted
// for, and the data proves the commands ran in the order the semaphores imposed. Built to run
// clean under ThreadSanitizer.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/api_helpers.hpp"
#include "support/result_printing.hpp"
#include "support/sim_env.hpp"
#include "trn/trn.h"

namespace {

using trn::test::alloc;
using trn::test::first_device;
using trn::test::last_error;
using trn::test::make_sem;
using trn::test::timeline_of;

using trn::test::SimEnv;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kSecond = 1'000'000'000;

std::vector<trn_core_t> all_cores(trn_device_t device) {
  uint32_t count = 0;
  INFO(last_error());
  REQUIRE(trn_core_get(device, &count, nullptr) == TRN_SUCCESS);
  std::vector<trn_core_t> cores(count);
  REQUIRE(trn_core_get(device, &count, cores.data()) == TRN_SUCCESS);
  return cores;
}

trn_queue_t make_queue(trn_core_t core, uint32_t capacity) {
  trn_queue_desc_t desc = TRN_QUEUE_DESC_INIT;
  desc.core = core;
  desc.capacity = capacity;
  trn_queue_t queue = nullptr;
  INFO(last_error());
  REQUIRE(trn_queue_create(&desc, &queue) == TRN_SUCCESS);
  return queue;
}

uint64_t value_of(trn_sem_t sem) {
  uint64_t value = 0;
  INFO(last_error());
  REQUIRE(trn_sem_query(sem, &value) == TRN_SUCCESS);
  return value;
}

uint64_t ns_left(Clock::time_point deadline) {
  const auto left = deadline - Clock::now();
  return left.count() <= 0
             ? 0
             : static_cast<uint64_t>(
                   std::chrono::duration_cast<std::chrono::nanoseconds>(left).count());
}

// What a worker thread saw go wrong; checked by the main thread (Catch is not thread-safe).
struct Errors {
  std::mutex mu;
  std::vector<std::string> list;
  void add(const std::string &what) {
    std::lock_guard lock(mu);
    list.push_back(what);
  }
};

// Submits with `submit(&sequence)`, waiting on the queue's semaphore while it is full. Returns
// false (and records why) on any other result or when the deadline passes. `last_submitted` is
// the queue's last sequence number when this thread is its only submitter: then a full queue
// has a command in flight until the timeline reaches it, and the wait for the next completion
// uses the whole deadline (a lost wake-up fails the test). With several submitters (UINT64_MAX)
// the queue may drain between the refusal and the query, so the wait is sliced and retried.
template <typename Submit>
bool submit_retrying(trn_sem_t timeline, Clock::time_point deadline, Errors &errors,
                     std::atomic<uint64_t> &full_count, const std::string &what, Submit submit,
                     uint64_t *sequence, uint64_t last_submitted) {
  for (;;) {
    const trn_result_t r = submit(sequence);
    if (r == TRN_SUCCESS) return true;
    if (r != TRN_ERROR_QUEUE_FULL) {
      errors.add(what + ": " + trn_result_name(r) + ": " + last_error());
      return false;
    }
    full_count.fetch_add(1, std::memory_order_relaxed);
    uint64_t done = 0;
    if (trn_sem_query(timeline, &done) != TRN_SUCCESS) {
      errors.add(what + ": querying the queue's semaphore: " + last_error());
      return false;
    }
    const bool sole = last_submitted != UINT64_MAX;
    if (sole && done >= last_submitted) continue;  // drained since the refusal
    const uint64_t left = ns_left(deadline);
    if (left == 0) {
      errors.add(what + ": the deadline passed while the queue was full");
      return false;
    }
    const uint64_t slice = sole ? left : std::min<uint64_t>(left, 10'000'000);
    const trn_result_t w = trn_sem_wait(timeline, done + 1, slice);
    if (w != TRN_SUCCESS && (sole || w != TRN_TIMEOUT)) {
      errors.add(what + ": waiting for room: " + trn_result_name(w) + ": " + last_error());
      return false;
    }
  }
}

uint8_t byte_for(uint32_t thread, uint64_t iteration) {
  return static_cast<uint8_t>(iteration * 7 + thread * 13 + 1);
}

}  // namespace

TEST_CASE("4 threads x 3 queues chain memsets, copies and barriers through semaphores",
          "[stress][queues]") {
  SimEnv env;
  const trn_device_t device = first_device();
  const auto cores = all_cores(device);
  REQUIRE(cores.size() == 8);

  constexpr uint32_t kThreads = 4;
  constexpr uint32_t kQueues = 3;
  constexpr uint64_t kIterations = 600;  // 3 commands each, plus a barrier every 4th: ~1950
  constexpr uint64_t kSlots = 8;         // A and B are rings of kSlots slots; D has one per step
  constexpr uint64_t kSlot = 512;
  constexpr uint32_t kCapacity = 16;
  const auto deadline = Clock::now() + std::chrono::seconds(20);

  struct Lane {
    trn_queue_t queues[kQueues] = {};
    trn_sem_t timelines[kQueues] = {};
    trn_sem_t chain[kQueues] = {};  // C0: A[s] set, C1: B[s] copied, C2: D copied
    trn_sem_t progress = nullptr;   // signalled by the barriers
    trn_mem_t a = nullptr, b = nullptr, d = nullptr;
    uint64_t submitted[kQueues] = {};
    uint64_t last_progress = 0;
  };
  std::vector<Lane> lanes(kThreads);
  std::vector<trn_pool_t> pools;
  for (uint32_t bank = 0; bank < 4; ++bank) {
    trn_pool_desc_t desc = TRN_POOL_DESC_INIT;
    desc.hbm_bank = bank;
    trn_pool_t pool = nullptr;
    REQUIRE(trn_pool_create(device, &desc, &pool) == TRN_SUCCESS);
    pools.push_back(pool);
  }
  for (uint32_t t = 0; t < kThreads; ++t) {
    Lane &lane = lanes[t];
    for (uint32_t q = 0; q < kQueues; ++q) {
      // Three different cores per thread; threads share cores with each other.
      lane.queues[q] = make_queue(cores[(t * kQueues + q) % cores.size()], kCapacity);
      lane.timelines[q] = timeline_of(lane.queues[q]);
      lane.chain[q] = make_sem(device);
    }
    lane.progress = make_sem(device);
    lane.a = alloc(pools[t % 4], kSlots * kSlot);
    lane.b = alloc(pools[(t + 1) % 4], kSlots * kSlot);
    lane.d = alloc(pools[(t + 2) % 4], kIterations * kSlot);
  }

  Errors errors;
  std::atomic<uint64_t> full_count{0};
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Lane &lane = lanes[t];
      auto submit = [&](uint32_t q, const std::string &what, auto call) {
        uint64_t sequence = 0;
        if (!submit_retrying(lane.timelines[q], deadline, errors, full_count, what, call, &sequence,
                             lane.submitted[q]))
          return false;
        if (sequence != ++lane.submitted[q]) {
          errors.add(what + ": sequence " + std::to_string(sequence) + ", expected " +
                     std::to_string(lane.submitted[q]));
          return false;
        }
        return true;
      };
      for (uint64_t i = 1; i <= kIterations; ++i) {
        const uint64_t slot = (i % kSlots) * kSlot;
        const std::string at = "thread " + std::to_string(t) + " step " + std::to_string(i);
        // q0: A[s] = byte, once q2 has taken the slot's previous value on from B.
        trn_sem_point_t w0{lane.chain[2], i > kSlots ? i - kSlots : 0};
        trn_sem_point_t s0{lane.chain[0], i};
        trn_sync_t sync0{&w0, 1, &s0, 1};
        if (!submit(0, at + " memset", [&](uint64_t *seq) {
              return trn_queue_memset(lane.queues[0], lane.a, slot, byte_for(t, i), kSlot, &sync0,
                                      seq);
            }))
          return;
        // q1: B[s] = A[s].
        trn_sem_point_t w1{lane.chain[0], i};
        trn_sem_point_t s1{lane.chain[1], i};
        trn_sync_t sync1{&w1, 1, &s1, 1};
        if (!submit(1, at + " copy A->B", [&](uint64_t *seq) {
              return trn_queue_copy(lane.queues[1], lane.b, slot, lane.a, slot, kSlot, &sync1, seq);
            }))
          return;
        // q2: D[i] = B[s].
        trn_sem_point_t w2{lane.chain[1], i};
        trn_sem_point_t s2{lane.chain[2], i};
        trn_sync_t sync2{&w2, 1, &s2, 1};
        if (!submit(2, at + " copy B->D", [&](uint64_t *seq) {
              return trn_queue_copy(lane.queues[2], lane.d, (i - 1) * kSlot, lane.b, slot, kSlot,
                                    &sync2, seq);
            }))
          return;
        // Every 4th step, a barrier on q1 waits for q0's latest command (an event) and signals
        // progress.
        if (i % 4 == 0) {
          trn_sem_point_t wb{lane.timelines[0], lane.submitted[0]};
          trn_sem_point_t sb{lane.progress, i};
          trn_sync_t syncb{&wb, 1, &sb, 1};
          if (!submit(1, at + " barrier", [&](uint64_t *seq) {
                return trn_queue_barrier(lane.queues[1], &syncb, seq);
              }))
            return;
          lane.last_progress = i;
        }
      }
      for (uint32_t q = 0; q < kQueues; ++q) {
        const uint64_t left = ns_left(deadline);
        const trn_result_t r = left == 0 ? TRN_TIMEOUT : trn_queue_finish(lane.queues[q], left);
        if (r != TRN_SUCCESS)
          errors.add("thread " + std::to_string(t) + " finishing queue " + std::to_string(q) +
                     ": " + trn_result_name(r) + ": " + last_error());
      }
    });
  }
  for (auto &thread : threads) thread.join();
  for (const auto &e : errors.list) UNSCOPED_INFO(e);
  REQUIRE(errors.list.empty());
  WARN("submissions refused with TRN_ERROR_QUEUE_FULL and retried: " << full_count.load());

  for (uint32_t t = 0; t < kThreads; ++t) {
    INFO("thread " << t);
    Lane &lane = lanes[t];
    // Every sequence number is accounted for: each timeline reached what was submitted.
    CHECK(lane.submitted[0] == kIterations);
    CHECK(lane.submitted[1] == kIterations + kIterations / 4);
    CHECK(lane.submitted[2] == kIterations);
    for (uint32_t q = 0; q < kQueues; ++q) {
      CHECK(value_of(lane.timelines[q]) == lane.submitted[q]);
      CHECK(trn_queue_finish(lane.queues[q], 0) == TRN_SUCCESS);
      trn_queue_fault_t fault = TRN_QUEUE_FAULT_INIT;
      REQUIRE(trn_queue_get_fault(lane.queues[q], &fault) == TRN_SUCCESS);
      CHECK(fault.result == TRN_SUCCESS);
      CHECK(value_of(lane.chain[q]) == kIterations);
    }
    CHECK(value_of(lane.progress) == lane.last_progress);
    // D[i] holds step i's byte: every copy saw the value its semaphores promised.
    std::vector<uint8_t> d(kIterations * kSlot);
    REQUIRE(trn_mem_read(lane.d, 0, d.data(), d.size()) == TRN_SUCCESS);
    uint64_t wrong = 0, first_wrong = 0;
    for (uint64_t i = 1; i <= kIterations; ++i)
      for (uint64_t k = 0; k < kSlot; ++k)
        if (d[(i - 1) * kSlot + k] != byte_for(t, i) && wrong++ == 0) first_wrong = i;
    INFO("first wrong step " << first_wrong);
    CHECK(wrong == 0);
    // A and B hold the last step of each slot.
    std::vector<uint8_t> a(kSlots * kSlot), b(kSlots * kSlot);
    REQUIRE(trn_mem_read(lane.a, 0, a.data(), a.size()) == TRN_SUCCESS);
    REQUIRE(trn_mem_read(lane.b, 0, b.data(), b.size()) == TRN_SUCCESS);
    for (uint64_t s = 0; s < kSlots; ++s) {
      uint64_t last = kIterations - (kIterations % kSlots) + s;
      if (last > kIterations) last -= kSlots;
      CHECK(a[s * kSlot] == byte_for(t, last));
      CHECK(a[s * kSlot + kSlot - 1] == byte_for(t, last));
      CHECK(b[s * kSlot] == byte_for(t, last));
      CHECK(b[s * kSlot + kSlot - 1] == byte_for(t, last));
    }
  }

  for (Lane &lane : lanes) {
    for (uint32_t q = 0; q < kQueues; ++q)
      REQUIRE(trn_queue_destroy(lane.queues[q]) == TRN_SUCCESS);
    for (uint32_t q = 0; q < kQueues; ++q) REQUIRE(trn_sem_destroy(lane.chain[q]) == TRN_SUCCESS);
    REQUIRE(trn_sem_destroy(lane.progress) == TRN_SUCCESS);
    for (trn_mem_t m : {lane.a, lane.b, lane.d}) REQUIRE(trn_mem_free(m) == TRN_SUCCESS);
  }
  for (trn_pool_t pool : pools) REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("threads sharing queues get unique, gapless sequence numbers", "[stress][queues]") {
  SimEnv env;
  const trn_device_t device = first_device();
  const auto cores = all_cores(device);
  constexpr uint32_t kThreads = 4;
  constexpr uint64_t kPerThread = 500;  // per queue
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  trn_queue_t queues[2] = {make_queue(cores[6], 8), make_queue(cores[7], 8)};
  trn_sem_t timelines[2] = {timeline_of(queues[0]), timeline_of(queues[1])};
  std::vector<trn_sem_t> marks;
  for (uint32_t t = 0; t < kThreads; ++t) marks.push_back(make_sem(device));

  Errors errors;
  std::atomic<uint64_t> full_count{0};
  std::vector<std::vector<uint64_t>> seen(kThreads * 2);
  std::atomic<bool> submitting{true};
  // An observer finishes and reads the fault records while submissions go on.
  std::thread observer([&] {
    while (submitting.load()) {
      for (trn_queue_t queue : queues) {
        const trn_result_t r = trn_queue_finish(queue, 100'000);
        if (r != TRN_SUCCESS && r != TRN_TIMEOUT)
          errors.add(std::string("observer finish: ") + trn_result_name(r) + ": " + last_error());
        trn_queue_fault_t fault = TRN_QUEUE_FAULT_INIT;
        if (trn_queue_get_fault(queue, &fault) != TRN_SUCCESS || fault.result != TRN_SUCCESS)
          errors.add("observer: unexpected fault record");
      }
    }
  });
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 1; i <= kPerThread; ++i) {
        for (uint32_t q = 0; q < 2; ++q) {
          trn_sem_point_t mark{marks[t], i};
          trn_sync_t sync{nullptr, 0, &mark, 1};
          uint64_t sequence = 0;
          if (!submit_retrying(
                  timelines[q], deadline, errors, full_count,
                  "thread " + std::to_string(t) + " barrier " + std::to_string(i),
                  [&](uint64_t *seq) { return trn_queue_barrier(queues[q], &sync, seq); },
                  &sequence, UINT64_MAX))
            return;
          seen[t * 2 + q].push_back(sequence);
        }
      }
    });
  }
  for (auto &thread : threads) thread.join();
  submitting.store(false);
  observer.join();
  for (const auto &e : errors.list) UNSCOPED_INFO(e);
  REQUIRE(errors.list.empty());

  for (uint32_t q = 0; q < 2; ++q) {
    INFO("queue " << q);
    REQUIRE(trn_queue_finish(queues[q], 10 * kSecond) == TRN_SUCCESS);
    const uint64_t total = kThreads * kPerThread;
    CHECK(value_of(timelines[q]) == total);
    std::vector<uint32_t> hits(total + 1, 0);
    for (uint32_t t = 0; t < kThreads; ++t) {
      const auto &list = seen[t * 2 + q];
      CHECK(list.size() == kPerThread);
      for (size_t k = 0; k < list.size(); ++k) {
        REQUIRE(list[k] >= 1);
        REQUIRE(list[k] <= total);
        ++hits[list[k]];
        if (k > 0) CHECK(list[k] > list[k - 1]);  // one thread's submissions stay in order
      }
    }
    uint64_t missing = 0, doubled = 0;
    for (uint64_t s = 1; s <= total; ++s) {
      missing += hits[s] == 0;
      doubled += hits[s] > 1;
    }
    CHECK(missing == 0);
    CHECK(doubled == 0);
  }
  for (trn_sem_t mark : marks) {
    CHECK(value_of(mark) == kPerThread);
    REQUIRE(trn_sem_destroy(mark) == TRN_SUCCESS);
  }
  for (trn_queue_t queue : queues) REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
}

TEST_CASE("a queue destroyed while other threads submit to it", "[stress][queues][destroy]") {
  SimEnv env;
  const trn_device_t device = first_device();
  const auto cores = all_cores(device);
  trn_pool_desc_t pool_desc = TRN_POOL_DESC_INIT;
  trn_pool_t pool = nullptr;
  REQUIRE(trn_pool_create(device, &pool_desc, &pool) == TRN_SUCCESS);
  trn_mem_t mem = alloc(pool, 64 * 1024);

  for (int round = 0; round < 10; ++round) {
    INFO("round " << round);
    trn_queue_t queue = make_queue(cores[round % 8], 64);
    trn_sem_t done = make_sem(device);
    std::atomic<bool> go{false};
    std::atomic<uint64_t> accepted{0};
    Errors errors;
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&, t] {
        while (!go.load()) std::this_thread::yield();
        const auto stop = Clock::now() + std::chrono::seconds(10);
        for (uint64_t i = 0; Clock::now() < stop; ++i) {
          trn_sem_point_t mark{done, i};
          trn_sync_t sync{nullptr, 0, &mark, 1};
          const trn_result_t r = (i % 2) ? trn_queue_memset(queue, mem, uint64_t(t) * 4096,
                                                            uint8_t(i), 4096, &sync, nullptr)
                                         : trn_queue_barrier(queue, &sync, nullptr);
          if (r == TRN_SUCCESS) {
            accepted.fetch_add(1);
          } else if (r == TRN_ERROR_INVALID_HANDLE) {
            return;  // destroyed
          } else if (r != TRN_ERROR_QUEUE_FULL) {
            errors.add(std::string(trn_result_name(r)) + ": " + last_error());
            return;
          }
        }
        errors.add("submissions still accepted 10 s after the queue was destroyed");
      });
    }
    go.store(true);
    while (accepted.load() < 50) std::this_thread::yield();
    const auto start = Clock::now();
    const trn_result_t destroyed = trn_queue_destroy(queue);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    for (auto &thread : threads) thread.join();
    for (const auto &e : errors.list) UNSCOPED_INFO(e);
    CHECK(errors.list.empty());
    CHECK(destroyed == TRN_SUCCESS);
    CHECK(seconds < 5.0);
    // Every command that named the semaphore ran or was cancelled: none still holds it.
    const trn_result_t gone = trn_sem_destroy(done);
    INFO(last_error());
    CHECK(gone == TRN_SUCCESS);
  }
  REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("many waiters on one semaphore follow a fast signaller", "[stress][semaphores]") {
  SimEnv env;
  const trn_device_t device = first_device();
  const uint32_t flags = GENERATE(0u, TRN_SEM_FLAG_EXPORTABLE);
  INFO((flags ? "exportable" : "process-local"));
  trn_sem_desc_t desc = TRN_SEM_DESC_INIT;
  desc.flags = flags;
  trn_sem_t sem = nullptr;
  REQUIRE(trn_sem_create(device, &desc, &sem) == TRN_SUCCESS);
  constexpr uint64_t kTop = 3000;
  constexpr int kWaiters = 6;
  Errors errors;
  std::vector<std::thread> waiters;
  for (int w = 0; w < kWaiters; ++w) {
    waiters.emplace_back([&, w] {
      for (uint64_t v = uint64_t(w) + 1; v <= kTop; v += uint64_t(w) + 1) {
        const trn_result_t r = trn_sem_wait(sem, v, 10 * kSecond);
        if (r != TRN_SUCCESS) {
          errors.add("waiter " + std::to_string(w) + " for " + std::to_string(v) + ": " +
                     trn_result_name(r));
          return;
        }
        uint64_t now = 0;
        if (trn_sem_query(sem, &now) != TRN_SUCCESS || now < v) {
          errors.add("woken below the value");
          return;
        }
      }
    });
  }
  for (uint64_t v = 1; v <= kTop; ++v) {
    REQUIRE(trn_sem_signal(sem, v) == TRN_SUCCESS);
    if (v % 500 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (auto &w : waiters) w.join();
  for (const auto &e : errors.list) UNSCOPED_INFO(e);
  CHECK(errors.list.empty());
  REQUIRE(trn_sem_destroy(sem) == TRN_SUCCESS);
}
