// Faults part-way through an operation: rank 0's all-reduce runs out of host memory at each of
// its allocations in turn, and the ranks must agree on the outcome, also with several such
// communicators at once and the simulator's queues pausing at random (TRN_SIM_JITTER_NS): a
// rank whose own part completed must still fail when a peer's did not.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <sstream>
#include <thread>

#include "support/fault_injection.hpp"
#include "support/sim_env.hpp"
#include "thread_world.hpp"

using namespace trn::test;

namespace {

struct RoundOutcome {
  std::string wrong;       // what broke the rule (empty: the ranks agreed)
  bool completed = false;  // rank 0's first call had every allocation it needed
  bool failed = false;     // the communicator failed, and both ranks said so
};

// One round on a fresh 2-rank communicator from `first_core` on: rank 0's all-reduce may make
// `allowed` allocations, then runs out. Either nothing was enqueued (the communicator stays
// usable: the call is made again and both ranks get the sum), or the communicator failed and both
// ranks learn it from trn_comm_synchronize; never a healthy communicator whose ranks count chunks
// differently, nor one rank done while the other failed. Uses no Catch macros (any thread).
RoundOutcome partial_failure_round(uint64_t allowed, uint32_t first_core) {
  RoundOutcome out;
  std::ostringstream wrong;
  ThreadWorld world;
  if (std::string why = world.open(2, 65536, 10'000, first_core); !why.empty()) {
    out.wrong = "making the communicator: " + why;
    return out;
  }
  const uint32_t count = 300000;  // a ring with several chunks
  std::vector<trn_mem_t> bufs(2);
  for (uint32_t r = 0; r < 2; ++r) {
    std::vector<float> values(count, static_cast<float>(r + 1));
    if (trn_mem_alloc(world.ranks[r].pool, count * 4ull, 0, TRN_MEM_CATEGORY_TENSORS, 0,
                      &bufs[r]) != TRN_SUCCESS ||
        trn_mem_write(bufs[r], 0, values.data(), count * 4ull) != TRN_SUCCESS) {
      out.wrong = std::string("rank buffers: ") + trn_last_error();
      return out;
    }
  }
  trn_result_t first = TRN_SUCCESS, retried = TRN_SUCCESS;
  std::string first_error;
  trn_result_t synced[2] = {TRN_SUCCESS, TRN_SUCCESS};
  std::string synced_error[2];
  const auto failures = world.each([&](uint32_t r) -> std::string {
    RankResources &res = world.ranks[r];
    auto call = [&] {
      uint64_t sequence = 0;
      return trn_comm_all_reduce(world.comms[r], res.queue, {bufs[r], 0}, {bufs[r], 0}, count,
                                 TRN_DTYPE_F32, TRN_COMM_SUM, nullptr, &sequence);
    };
    trn_result_t result = TRN_SUCCESS;
    if (r == 0) {
      {
        AllocationFailure failure(allowed);
        result = call();
      }
      first = result;
      if (result != TRN_SUCCESS) {
        first_error = comm_error();
        if (trn_comm_get_error(world.comms[0]) == TRN_SUCCESS) result = retried = call();
      }
    } else {
      result = call();
    }
    // A failed communicator says so here, whatever the call returned.
    synced[r] = trn_comm_synchronize(world.comms[r], 30'000'000'000ull);
    if (synced[r] != TRN_SUCCESS) synced_error[r] = comm_error();
    if (r == 1 && result != TRN_SUCCESS && synced[r] == TRN_SUCCESS)
      return "rank 1's call failed but its communicator did not: " + comm_error();
    return "";
  });
  for (const auto &f : failures) wrong << f << "; ";
  out.completed = first == TRN_SUCCESS;
  if (first != TRN_SUCCESS && first != TRN_ERROR_OUT_OF_HOST_MEMORY)
    wrong << "rank 0's first call gave " << trn_result_name(first) << " (" << first_error << "); ";
  if (retried != TRN_SUCCESS)
    wrong << "the call made again gave " << trn_result_name(retried) << "; ";
  if (synced[0] == TRN_SUCCESS && synced[1] == TRN_SUCCESS) {
    for (uint32_t r = 0; r < 2; ++r) {
      std::vector<float> got(count);
      if (trn_mem_read(bufs[r], 0, got.data(), count * 4ull) != TRN_SUCCESS)
        wrong << "reading rank " << r << ": " << trn_last_error() << "; ";
      else if (std::count(got.begin(), got.end(), 3.0f) != count)
        wrong << "rank " << r << " holds a wrong sum; ";
    }
  } else if (synced[0] != TRN_ERROR_COLLECTIVE || synced[1] != TRN_ERROR_COLLECTIVE) {
    // Out of step: one rank done (or failed otherwise) while the other failed.
    wrong << "the ranks disagree: rank 0 synchronized with " << trn_result_name(synced[0]) << " ("
          << synced_error[0] << "), rank 1 with " << trn_result_name(synced[1]) << " ("
          << synced_error[1] << "); ";
  } else {
    out.failed = true;
    // Each names rank 0 and why its part failed.
    for (uint32_t r = 0; r < 2; ++r)
      if (synced_error[r].find("on rank 0") == std::string::npos ||
          synced_error[r].find("out of host memory") == std::string::npos)
        wrong << "rank " << r << "'s error does not name rank 0 and its reason: " << synced_error[r]
              << "; ";
    for (auto &rank : world.ranks) {
      trn_queue_finish(rank.queue, 10'000'000'000ull);  // the cancelled commands drain
      if (trn_queue_reset(rank.queue) != TRN_SUCCESS)
        wrong << "trn_queue_reset: " << trn_last_error() << "; ";
    }
  }
  for (trn_mem_t b : bufs) trn_mem_free(b);
  out.wrong = wrong.str();
  if (!out.wrong.empty())
    out.wrong = "allocations allowed " + std::to_string(allowed) + ", first call " +
                trn_result_name(first) + " " + first_error + ": " + out.wrong;
  return out;
}

}  // namespace

TEST_CASE("an operation that runs out of host memory part-way leaves no rank out of step",
          "[comm][failure]") {
  SimEnv env;
  bool completed = false;
  uint64_t failed = 0;
  for (uint64_t allowed = 0; allowed < 400 && !completed; ++allowed) {
    const RoundOutcome round = partial_failure_round(allowed, 0);
    INFO(round.wrong);
    CHECK(round.wrong.empty());
    completed = round.completed;
    failed += round.failed;
  }
  CHECK(completed);   // enough allocations for the whole call were reached
  CHECK(failed > 0);  // and some failed part-way, after commands were enqueued
  // Memory that stays short: even the failure's description cannot be made, and the call still
  // returns its result.
  ThreadWorld world(1);
  trn_mem_t buf = nullptr;
  REQUIRE(trn_mem_alloc(world.ranks[0].pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &buf) ==
          TRN_SUCCESS);
  trn_result_t r = TRN_SUCCESS;
  {
    AllocationFailure failure(0, 1'000'000);
    uint64_t sequence = 0;
    r = trn_comm_all_reduce(world.comms[0], world.ranks[0].queue, {buf, 0}, {buf, 0}, 1024,
                            TRN_DTYPE_F32, TRN_COMM_SUM, nullptr, &sequence);
  }
  CHECK(r == TRN_ERROR_OUT_OF_HOST_MEMORY);
  trn_queue_finish(world.ranks[0].queue, 10'000'000'000ull);
  trn_mem_free(buf);
}

TEST_CASE("ranks agree on operations that fail part-way, several at once with queues jittered",
          "[comm][failure][stress]") {
  // Three communicators of 2 ranks at once on 2 devices' cores (6 rank threads and their queues'
  // workers on whatever cores the machine has), each sweeping rank 0's allocation limit six times,
  // while every queue command waits a random moment first. Bounded in time: sweeps stop at the
  // deadline (a sanitizer build runs fewer rounds).
  SimEnv env;
  env.set("TRN_SIM_DEVICES", "2");
  env.set("TRN_SIM_JITTER_NS", "100000");
  constexpr uint32_t kWorlds = 3, kSweeps = 6;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  std::vector<std::vector<std::string>> wrong(kWorlds);
  std::atomic<uint64_t> rounds{0}, failed{0}, completed{0};
  std::vector<std::thread> threads;
  for (uint32_t w = 0; w < kWorlds; ++w)
    threads.emplace_back([&, w] {
      for (uint32_t sweep = 0; sweep < kSweeps; ++sweep) {
        // Each world takes every kWorlds-th limit, from a different start each sweep.
        for (uint64_t allowed = (w + sweep) % kWorlds;
             allowed < 400 && std::chrono::steady_clock::now() < deadline; allowed += kWorlds) {
          const RoundOutcome round = partial_failure_round(allowed, 2 * w);
          ++rounds;
          failed += round.failed;
          if (!round.wrong.empty()) wrong[w].push_back(round.wrong);
          if (round.completed) {
            ++completed;
            break;
          }
        }
      }
    });
  for (auto &t : threads) t.join();
  env.set("TRN_SIM_JITTER_NS", nullptr);
  INFO(rounds << " rounds, " << failed << " failed part-way, " << completed << " sweeps completed");
  for (const auto &list : wrong)
    for (const auto &why : list) FAIL_CHECK(why);
  CHECK(failed > 0);  // the part-way failures were reached, not only the early refusals
  CHECK(rounds >= kWorlds);
}

TEST_CASE("a queue too small for a collective's closing commands fails it rather than hang",
          "[comm][negative]") {
  // The closing agreement's commands after its gate wait for each other: on a queue of capacity 1
  // the second cannot be queued before the gate opens, which needs it queued. Every rank fails,
  // saying what capacity to give; a capacity of 2 is enough for 2 ranks.
  SimEnv env;
  ThreadWorld world(2, 4096, 20'000);
  for (uint32_t capacity : {1u, 2u}) {
    INFO("capacity " << capacity);
    std::vector<trn_queue_t> queues(2);
    std::vector<trn_mem_t> bufs(2);
    for (uint32_t r = 0; r < 2; ++r) {
      trn_queue_desc_t desc = TRN_QUEUE_DESC_INIT;
      desc.kind = TRN_QUEUE_KIND_COMPUTE;
      desc.core = world.ranks[r].core;
      desc.capacity = capacity;
      REQUIRE(trn_queue_create(&desc, &queues[r]) == TRN_SUCCESS);
      REQUIRE(trn_mem_alloc(world.ranks[r].pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &bufs[r]) ==
              TRN_SUCCESS);
      std::vector<float> ones(1024, 1.0f);
      REQUIRE(trn_mem_write(bufs[r], 0, ones.data(), 4096) == TRN_SUCCESS);
    }
    trn_result_t called[2] = {TRN_SUCCESS, TRN_SUCCESS}, synced[2] = {TRN_SUCCESS, TRN_SUCCESS};
    std::string said[2], synced_said[2];
    world.each([&](uint32_t r) -> std::string {
      called[r] = trn_comm_all_reduce(world.comms[r], queues[r], {bufs[r], 0}, {bufs[r], 0}, 1024,
                                      TRN_DTYPE_F32, TRN_COMM_SUM, nullptr, nullptr);
      said[r] = comm_error();
      synced[r] = trn_comm_synchronize(world.comms[r], 20'000'000'000ull);
      synced_said[r] = comm_error();
      return "";
    });
    uint32_t told = 0;  // ranks that found the queue too small themselves
    for (uint32_t r = 0; r < 2; ++r) {
      INFO("rank " << r << ": " << said[r] << " / " << synced_said[r]);
      if (capacity == 1) {
        // A rank that found it first fails the communicator, which may reach the other first:
        // its call then fails, or (its queue already failed, so that everything after it went
        // in) returns, and its synchronize says why.
        CHECK((called[r] == TRN_ERROR_QUEUE_FULL || called[r] == TRN_ERROR_COLLECTIVE ||
               called[r] == TRN_SUCCESS));
        told += called[r] == TRN_ERROR_QUEUE_FULL;
        CHECK(synced[r] == TRN_ERROR_COLLECTIVE);
        CHECK(synced_said[r].find("capacity of at least 16") != std::string::npos);
      } else {
        CHECK(called[r] == TRN_SUCCESS);
        CHECK(synced[r] == TRN_SUCCESS);
        std::vector<float> got(1024);
        REQUIRE(trn_mem_read(bufs[r], 0, got.data(), 4096) == TRN_SUCCESS);
        CHECK(std::count(got.begin(), got.end(), 2.0f) == 1024);
      }
    }
    if (capacity == 1) CHECK(told >= 1);
    for (uint32_t r = 0; r < 2; ++r) {
      trn_queue_finish(queues[r], 10'000'000'000ull);
      trn_queue_destroy(queues[r]);
      trn_mem_free(bufs[r]);
    }
    if (capacity == 1) {
      // The communicator failed; the next capacity gets a fresh one.
      for (trn_comm_t &comm : world.comms) {
        trn_comm_destroy(comm);
        comm = nullptr;
      }
      for (auto &rank : world.ranks) rank.close();
      world.ranks.clear();
      world.comms.clear();
      REQUIRE(world.open(2, 4096, 20'000) == "");
    }
  }
}
