// Collectives with every rank a thread of this process (trn_comm_init_all): every operation,
// dtype and reduction, in place and out of place, on 1 to 8 ranks over two devices, against the
// host reference; then the API's refusals and its failures (a rank that never arrives, a rank
// that skips an operation, an abort).
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "comm_cases.hpp"
#include "support/fault_injection.hpp"
#include "support/sim_env.hpp"
#include "thread_world.hpp"

using namespace trn::test;

namespace {

void run_all(ThreadWorld &world, const std::vector<CaseSpec> &specs) {
  const uint32_t n = static_cast<uint32_t>(world.ranks.size());
  const auto failures = world.each([&](uint32_t r) -> std::string {
    for (const CaseSpec &spec : specs)
      if (auto why = run_case(world.ranks[r], world.comms[r], r, n, spec); !why.empty()) return why;
    return "";
  });
  for (const auto &f : failures) FAIL_CHECK(f);
}

}  // namespace

TEST_CASE("every collective and dtype, in and out of place, on 1 to 8 ranks", "[comm]") {
  SimEnv env;
  env.set("TRN_SIM_DEVICES", "2");
  const uint32_t n = GENERATE(1u, 2u, 3u, 5u, 8u);
  // 4096-byte chunks: 2600 elements take several chunks and split unevenly over any rank count.
  const uint64_t count = GENERATE(7ull, 2600ull);
  INFO(n << " ranks, " << count << " elements");
  ThreadWorld world(n);
  run_all(world, every_case(n > 1 ? n - 1 : 0, {count}, [](trn_dtype_t) { return TRN_COMM_SUM; }));
}

TEST_CASE("every reduction of all_reduce, reduce_scatter and reduce", "[comm]") {
  SimEnv env;
  env.set("TRN_SIM_DEVICES", "2");
  const uint32_t n = GENERATE(2u, 3u, 4u);
  ThreadWorld world(n);
  std::vector<CaseSpec> specs;
  for (trn_comm_red_op_t op :
       {TRN_COMM_SUM, TRN_COMM_PROD, TRN_COMM_MAX, TRN_COMM_MIN, TRN_COMM_AVG})
    for (trn_dtype_t dtype : {TRN_DTYPE_F32, TRN_DTYPE_BF16, TRN_DTYPE_I32})
      for (Collective c : {Collective::all_reduce, Collective::reduce_scatter, Collective::reduce})
        for (uint64_t count : {5ull, 3000ull}) {
          CaseSpec spec;
          spec.collective = c;
          spec.dtype = dtype;
          spec.op = op;
          spec.count = count;
          spec.root = 1;
          specs.push_back(spec);
        }
  run_all(world, specs);
}

TEST_CASE("a large all_reduce runs as a ring, a small one by recursive doubling", "[comm]") {
  SimEnv env;
  env.set("TRN_SIM_DEVICES", "2");
  env.set("TRN_COMM_RING_MIN_BYTES", "16384");
  const uint32_t n = GENERATE(3u, 4u, 6u);
  ThreadWorld world(n);
  std::vector<CaseSpec> specs;
  for (uint64_t count : {3ull, 4000ull, 70001ull}) {  // 12 B, 16 KB (doubling), 280 KB (ring)
    CaseSpec spec;
    spec.count = count;
    specs.push_back(spec);
    spec.in_place = true;
    specs.push_back(spec);
  }
  run_all(world, specs);
}

TEST_CASE("operations are ordered with the queue's other work and with sync", "[comm]") {
  SimEnv env;
  ThreadWorld world(2);
  const auto failures = world.each([&](uint32_t r) -> std::string {
    RankResources &res = world.ranks[r];
    trn_mem_t buf = nullptr;
    if (trn_mem_alloc(res.pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &buf) != TRN_SUCCESS)
      return trn_last_error();
    // A memset before the all-reduce on the same queue, and a host semaphore it waits for.
    trn_sem_t go = nullptr, done = nullptr;
    trn_sem_desc_t sd = TRN_SEM_DESC_INIT;
    trn_sem_create(res.device, &sd, &go);
    trn_sem_create(res.device, &sd, &done);
    trn_queue_memset(res.queue, buf, 0, 0, 4096, nullptr, nullptr);
    const float one = 1.0f;
    trn_queue_write(res.queue, buf, 0, &one, 4, nullptr, nullptr);
    const trn_sem_point_t wait{go, 1}, signal{done, 1};
    const trn_sync_t sync{&wait, 1, &signal, 1};
    uint64_t sequence = 0;
    if (trn_comm_all_reduce(world.comms[r], res.queue, {buf, 0}, {buf, 0}, 1024, TRN_DTYPE_F32,
                            TRN_COMM_SUM, &sync, &sequence) != TRN_SUCCESS)
      return comm_error();
    std::string why;
    uint64_t value = 0;
    trn_sem_query(done, &value);
    if (value != 0) why = "the operation signalled before its wait was satisfied";
    trn_sem_signal(go, 1);
    if (why.empty() && trn_sem_wait(done, 1, 30'000'000'000ull) != TRN_SUCCESS)
      why = std::string("the operation's signal never came: ") + trn_last_error();
    trn_sem_t timeline = nullptr;
    trn_queue_get_semaphore(res.queue, &timeline);
    if (why.empty() && trn_sem_wait(timeline, sequence, 30'000'000'000ull) != TRN_SUCCESS)
      why = "the returned sequence was never reached";
    float out = 0;
    trn_mem_read(buf, 0, &out, 4);
    if (why.empty() && out != 2.0f) why = "the all-reduce of 1 and 1 gave " + std::to_string(out);
    trn_queue_finish(res.queue, 10'000'000'000ull);
    trn_sem_destroy(go);
    trn_sem_destroy(done);
    trn_mem_free(buf);
    return why;
  });
  for (const auto &f : failures) FAIL_CHECK(f);
}

TEST_CASE("trn_comm_synchronize with no time to wait returns at once after its queue failed",
          "[comm][failure]") {
  // A failed queue leaves the communicator out of step: synchronize fails it (or finds it failed
  // by the monitor), waiting for a peer's word of the cause at most until the caller's timeout.
  SimEnv env;
  ThreadWorld world(1);
  RankResources &res = world.ranks[0];
  trn_mem_t buf = nullptr;
  REQUIRE(trn_mem_alloc(res.pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &buf) == TRN_SUCCESS);
  trn_sem_t go = nullptr;
  trn_sem_desc_t sd = TRN_SEM_DESC_INIT;
  REQUIRE(trn_sem_create(res.device, &sd, &go) == TRN_SUCCESS);
  const trn_sem_point_t wait{go, 1};
  const trn_sync_t sync{&wait, 1, nullptr, 0};
  uint64_t sequence = 0;
  REQUIRE(trn_comm_all_reduce(world.comms[0], res.queue, {buf, 0}, {buf, 0}, 1024, TRN_DTYPE_F32,
                              TRN_COMM_SUM, &sync, &sequence) == TRN_SUCCESS);
  REQUIRE(trn_sem_fail(go, "the producer failed") == TRN_SUCCESS);
  CHECK(trn_queue_finish(res.queue, 30'000'000'000ull) != TRN_SUCCESS);  // the queue failed
  const auto start = std::chrono::steady_clock::now();
  CHECK(trn_comm_synchronize(world.comms[0], 0) == TRN_ERROR_COLLECTIVE);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1000));
  INFO(comm_error());
  // Its own reason, or the monitor's if that saw the failure first.
  CHECK((comm_error().find("the queue of its last operation failed") != std::string::npos ||
         comm_error().find("did not complete: its queue failed") != std::string::npos));
  CHECK(trn_comm_synchronize(world.comms[0], 10'000'000'000ull) == TRN_ERROR_COLLECTIVE);
  REQUIRE(trn_queue_reset(res.queue) == TRN_SUCCESS);
  trn_sem_destroy(go);
  trn_mem_free(buf);
}

TEST_CASE("a queue destroyed after its operations leaves nothing to synchronize", "[comm]") {
  SimEnv env;
  ThreadWorld world(2);
  const auto failures = world.each([&](uint32_t r) -> std::string {
    RankResources &res = world.ranks[r];
    trn_mem_t buf = nullptr;
    if (trn_mem_alloc(res.pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &buf) != TRN_SUCCESS)
      return trn_last_error();
    const float one = 1.0f;
    trn_queue_write(res.queue, buf, 0, &one, 4, nullptr, nullptr);
    std::string why;
    if (trn_comm_all_reduce(world.comms[r], res.queue, {buf, 0}, {buf, 0}, 1, TRN_DTYPE_F32,
                            TRN_COMM_SUM, nullptr, nullptr) != TRN_SUCCESS)
      why = comm_error();
    if (why.empty() && trn_queue_finish(res.queue, 30'000'000'000ull) != TRN_SUCCESS)
      why = trn_last_error();
    // The rank ends its queue before its communicator, as a program tearing down may.
    trn_queue_destroy(res.queue);
    res.queue = nullptr;
    if (why.empty() && trn_comm_synchronize(world.comms[r], 30'000'000'000ull) != TRN_SUCCESS)
      why = "synchronize after the queue was destroyed: " + comm_error();
    if (why.empty() && trn_comm_get_error(world.comms[r]) != TRN_SUCCESS)
      why = "the communicator failed when its queue was destroyed: " + comm_error();
    float out = 0;
    trn_mem_read(buf, 0, &out, 4);
    if (why.empty() && out != 2.0f) why = "the all-reduce of 1 and 1 gave " + std::to_string(out);
    // The next operation goes on a new queue: the destroyed one is not waited for.
    trn_queue_desc_t qd = TRN_QUEUE_DESC_INIT;
    qd.kind = TRN_QUEUE_KIND_COMPUTE;
    qd.core = res.core;
    if (why.empty() && trn_queue_create(&qd, &res.queue) != TRN_SUCCESS) why = trn_last_error();
    if (why.empty() &&
        trn_comm_all_reduce(world.comms[r], res.queue, {buf, 0}, {buf, 0}, 1, TRN_DTYPE_F32,
                            TRN_COMM_SUM, nullptr, nullptr) != TRN_SUCCESS)
      why = "an operation on a new queue after the last one was destroyed: " + comm_error();
    if (why.empty() && trn_comm_synchronize(world.comms[r], 30'000'000'000ull) != TRN_SUCCESS)
      why = comm_error();
    trn_mem_read(buf, 0, &out, 4);
    if (why.empty() && out != 4.0f) why = "the all-reduce of 2 and 2 gave " + std::to_string(out);
    trn_mem_free(buf);
    return why;
  });
  for (const auto &f : failures) FAIL_CHECK(f);
  for (trn_comm_t &comm : world.comms) {
    CHECK(trn_comm_destroy(comm) == TRN_SUCCESS);
    comm = nullptr;
  }
}

TEST_CASE("trn_comm_split makes groups by colour, ordered by key", "[comm]") {
  SimEnv env;
  env.set("TRN_SIM_DEVICES", "2");
  ThreadWorld world(6);
  std::vector<trn_comm_t> halves(6, nullptr);
  const auto failures = world.each([&](uint32_t r) -> std::string {
    // Colours 0 and 1 by parity; rank 5 stays out; keys reverse the order.
    const int32_t color = r == 5 ? TRN_COMM_SPLIT_NOCOLOR : static_cast<int32_t>(r % 2);
    if (trn_comm_split(world.comms[r], color, 10 - static_cast<int32_t>(r), &halves[r]) !=
        TRN_SUCCESS)
      return comm_error();
    if (r == 5) return halves[r] == nullptr ? "" : "a rank with no colour got a communicator";
    trn_comm_info_t info = TRN_COMM_INFO_INIT;
    trn_comm_get_info(halves[r], &info);
    const uint32_t want_size = r % 2 == 0 ? 3 : 2;  // {0, 2, 4} and {1, 3}
    const uint32_t want_rank = r % 2 == 0 ? (4 - r) / 2 : (3 - r) / 2;
    if (info.size != want_size || info.rank != want_rank)
      return "rank " + std::to_string(r) + " became " + std::to_string(info.rank) + " of " +
             std::to_string(info.size);
    CaseSpec spec;
    spec.count = 100;
    return run_case(world.ranks[r], halves[r], info.rank, info.size, spec);
  });
  for (const auto &f : failures) FAIL_CHECK(f);
  for (trn_comm_t c : halves) trn_comm_destroy(c);
}

TEST_CASE("a rank that never arrives fails the others' init within the timeout, named",
          "[comm][failure]") {
  SimEnv env;
  const auto cores = all_cores();
  trn_comm_unique_id_t id{};
  REQUIRE(trn_comm_get_unique_id(&id) == TRN_SUCCESS);
  std::vector<trn_comm_t> comms(2, nullptr);
  std::vector<trn_result_t> results(2);
  std::vector<std::string> errors(2);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      trn_comm_desc_t desc = TRN_COMM_DESC_INIT;
      desc.core = cores[r];
      desc.rank = r;
      desc.size = 3;  // rank 2 never comes
      // Long enough that rank 1 arrives within it of rank 0 on a loaded machine.
      desc.timeout_ns = 3'000'000'000ull;
      results[r] = trn_comm_init_rank(&id, &desc, &comms[r]);
      errors[r] = comm_error();
    });
  for (auto &t : threads) t.join();
  const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start);
  for (uint32_t r = 0; r < 2; ++r) {
    INFO(errors[r]);
    CHECK(results[r] == TRN_ERROR_COLLECTIVE);
    CHECK(errors[r].find("ranks 2 of 3 never arrived") != std::string::npos);
    // The ranks' own timeout bounded it, not the service's default: the message says which.
    CHECK(errors[r].find("within 3000 ms") != std::string::npos);
    CHECK(comms[r] == nullptr);
  }
  CHECK(seconds.count() < 10.0);
}

TEST_CASE("a timeout too short for the rendezvous says so, naming the timeout", "[comm][failure]") {
  SimEnv env;
  const auto cores = all_cores();
  trn_comm_desc_t desc = TRN_COMM_DESC_INIT;
  desc.timeout_ns = 1'000;  // 1 us: over before any rank can arrive
  trn_comm_t comms[2] = {nullptr, nullptr};
  CHECK(trn_comm_init_all(2, cores.data(), &desc, comms) == TRN_ERROR_COLLECTIVE);
  const std::string error = comm_error();
  INFO(error);
  // However the rendezvous ended for the rank (refused, closed, or never answered), the message
  // names the timeout rather than blaming a dead process, and the rank once.
  CHECK(error.find("1 us") != std::string::npos);
  CHECK(error.find("rank 0: rank 0:") == std::string::npos);
  CHECK(comms[0] == nullptr);
}

TEST_CASE("a rank that joins twice fails every rank at once, named", "[comm][failure]") {
  SimEnv env;
  const auto cores = all_cores();
  trn_comm_unique_id_t id{};
  REQUIRE(trn_comm_get_unique_id(&id) == TRN_SUCCESS);
  std::vector<trn_result_t> results(2);
  std::vector<std::string> errors(2);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      trn_comm_desc_t desc = TRN_COMM_DESC_INIT;
      desc.core = cores[t];
      desc.rank = 0;  // both: rank 1 never comes
      desc.size = 2;
      desc.timeout_ns = 60'000'000'000ull;
      trn_comm_t comm = nullptr;
      results[t] = trn_comm_init_rank(&id, &desc, &comm);
      errors[t] = comm_error();
      trn_comm_destroy(comm);
    });
  for (auto &t : threads) t.join();
  const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start);
  for (uint32_t t = 0; t < 2; ++t) {
    INFO(errors[t]);
    CHECK(results[t] == TRN_ERROR_COLLECTIVE);
    CHECK(errors[t].find("rank 0 joined twice") != std::string::npos);
  }
  CHECK(seconds.count() < 30.0);  // not the 60 s timeout, nor "rank 1 never arrived"
}

TEST_CASE("ranks that end their communicator as soon as init returns fail no other rank's init",
          "[comm]") {
  // A rank's exports go with its communicator: init must not return on any rank before every
  // rank has imported what it needs of the others.
  SimEnv env;
  const auto cores = all_cores();
  constexpr uint32_t kRanks = 4;
  for (int round = 0; round < 5; ++round) {
    trn_comm_unique_id_t id{};
    REQUIRE(trn_comm_get_unique_id(&id) == TRN_SUCCESS);
    std::vector<std::string> failures(kRanks);
    std::vector<std::thread> threads;
    for (uint32_t r = 0; r < kRanks; ++r)
      threads.emplace_back([&, r] {
        trn_comm_desc_t desc = TRN_COMM_DESC_INIT;
        desc.core = cores[r];
        desc.rank = r;
        desc.size = kRanks;
        desc.timeout_ns = 30'000'000'000ull;
        trn_comm_t comm = nullptr;
        if (trn_comm_init_rank(&id, &desc, &comm) != TRN_SUCCESS)
          failures[r] = "round " + std::to_string(round) + ", rank " + std::to_string(r) + ": " +
                        comm_error();
        if (trn_comm_destroy(comm) != TRN_SUCCESS && failures[r].empty())
          failures[r] = "destroy: " + comm_error();
      });
    for (auto &t : threads) t.join();
    for (const auto &f : failures)
      if (!f.empty()) FAIL_CHECK(f);
  }
}

TEST_CASE("ranks that end a split's communicator as soon as it returns fail no other's split",
          "[comm]") {
  ThreadWorld world(4);
  for (int round = 0; round < 5; ++round) {
    const auto failures = world.each([&](uint32_t r) -> std::string {
      trn_comm_t part = nullptr;
      if (trn_comm_split(world.comms[r], 0, static_cast<int32_t>(r), &part) != TRN_SUCCESS)
        return "round " + std::to_string(round) + ", rank " + std::to_string(r) + ": " +
               comm_error();
      return trn_comm_destroy(part) == TRN_SUCCESS ? "" : "destroy: " + comm_error();
    });
    for (const auto &f : failures) FAIL_CHECK(f);
  }
}

TEST_CASE("the staging buffer is ranks x 4 slots x the chunk the ranks use", "[comm]") {
  // With no chunk chosen, ranks on one device take the smaller default: the buffer is made for
  // it, not for the larger one (the table decides which, so the buffer comes after it).
  SimEnv env;
  const auto cores = all_cores();
  trn_core_properties_t props = TRN_CORE_PROPERTIES_INIT;
  REQUIRE(trn_core_get_properties(cores[0], &props) == TRN_SUCCESS);
  uint32_t count = 0;
  REQUIRE(trn_device_get(&count, nullptr) == TRN_SUCCESS);
  std::vector<trn_device_t> devices(count);
  REQUIRE(trn_device_get(&count, devices.data()) == TRN_SUCCESS);
  trn_device_t device = devices[props.device_index];
  const auto collectives = [&] {
    trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
    REQUIRE(trn_device_get_memory_stats(device, UINT32_MAX, &stats) == TRN_SUCCESS);
    return stats.by_category[TRN_MEM_CATEGORY_COLLECTIVES].current_bytes;
  };
  const uint64_t before = collectives();
  trn_comm_desc_t desc = TRN_COMM_DESC_INIT;  // chunk_bytes 0: the default
  trn_comm_t comms[2] = {nullptr, nullptr};
  INFO(comm_error());
  REQUIRE(trn_comm_init_all(2, cores.data(), &desc, comms) == TRN_SUCCESS);
  trn_comm_info_t info = TRN_COMM_INFO_INIT;
  REQUIRE(trn_comm_get_info(comms[0], &info) == TRN_SUCCESS);
  CHECK(info.chunk_bytes == 512u * 1024);
  CHECK(collectives() - before == 2 * (2 * 4 * info.chunk_bytes));
  for (trn_comm_t comm : comms) CHECK(trn_comm_destroy(comm) == TRN_SUCCESS);
  CHECK(collectives() == before);
}

TEST_CASE("a rank that skips an operation makes the others fail naming it", "[comm][failure]") {
  SimEnv env;
  // A timeout long enough that ranks 0 and 1 both enqueue within it on a loaded machine.
  ThreadWorld world(3, 4096, 4000);
  const auto failures = world.each([&](uint32_t r) -> std::string {
    if (r == 2) return "";  // never calls the all-reduce
    RankResources &res = world.ranks[r];
    trn_mem_t buf = nullptr;
    trn_mem_alloc(res.pool, 1 << 16, 0, TRN_MEM_CATEGORY_TENSORS, 0, &buf);
    if (trn_comm_all_reduce(world.comms[r], res.queue, {buf, 0}, {buf, 0}, 1 << 14, TRN_DTYPE_F32,
                            TRN_COMM_SUM, nullptr, nullptr) != TRN_SUCCESS)
      return comm_error();
    const trn_result_t result = trn_comm_synchronize(world.comms[r], 20'000'000'000ull);
    const std::string why = comm_error();
    std::string wrong;
    if (result != TRN_ERROR_COLLECTIVE)
      wrong = std::string("synchronize gave ") + trn_result_name(result);
    else if (why.find("all_reduce") == std::string::npos || why.find("2 (pid") == std::string::npos)
      wrong = "the error does not name the operation and rank 2: " + why;
    if (wrong.empty() && trn_comm_get_error(world.comms[r]) != TRN_ERROR_COLLECTIVE)
      wrong = "trn_comm_get_error does not report the failure";
    // The queue's commands that waited on rank 2 failed; the queue works after a reset.
    trn_queue_finish(res.queue, 10'000'000'000ull);
    trn_queue_fault_t fault = TRN_QUEUE_FAULT_INIT;
    trn_queue_get_fault(res.queue, &fault);
    if (wrong.empty() && fault.result != TRN_ERROR_CANCELLED)
      wrong = std::string("the queue's fault is ") + trn_result_name(fault.result);
    if (wrong.empty() && std::string(fault.reason).find("collective failed") == std::string::npos)
      wrong = std::string("the fault does not say the collective failed: ") + fault.reason;
    trn_queue_reset(res.queue);
    if (wrong.empty() &&
        trn_queue_memset(res.queue, buf, 0, 0, 64, nullptr, nullptr) != TRN_SUCCESS)
      wrong = "the queue does not take work after a reset";
    trn_queue_finish(res.queue, 10'000'000'000ull);
    // Further operations are refused at once.
    if (wrong.empty() &&
        trn_comm_barrier(world.comms[r], res.queue, nullptr, nullptr) != TRN_ERROR_COLLECTIVE)
      wrong = "a failed communicator took another operation";
    trn_mem_free(buf);
    return wrong;
  });
  for (const auto &f : failures) FAIL_CHECK(f);
}

TEST_CASE("trn_comm_abort fails the peers' operations", "[comm][failure]") {
  SimEnv env;
  ThreadWorld world(2, 4096, 60'000);
  std::atomic<bool> posted{false};
  const auto failures = world.each([&](uint32_t r) -> std::string {
    if (r == 1) {
      while (!posted.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      trn_comm_abort(world.comms[1]);
      world.comms[1] = nullptr;
      return "";
    }
    RankResources &res = world.ranks[0];
    trn_mem_t buf = nullptr;
    trn_mem_alloc(res.pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &buf);
    trn_comm_all_reduce(world.comms[0], res.queue, {buf, 0}, {buf, 0}, 1024, TRN_DTYPE_F32,
                        TRN_COMM_SUM, nullptr, nullptr);
    posted = true;
    const auto start = std::chrono::steady_clock::now();
    const trn_result_t result = trn_comm_synchronize(world.comms[0], 30'000'000'000ull);
    const std::string why = comm_error();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    trn_queue_finish(res.queue, 10'000'000'000ull);
    trn_queue_reset(res.queue);
    trn_mem_free(buf);
    if (result != TRN_ERROR_COLLECTIVE) return std::string("gave ") + trn_result_name(result);
    if (why.find("rank 1 aborted") == std::string::npos) return "the reason is " + why;
    if (s > 10) return "it took " + std::to_string(s) + " s";
    return "";
  });
  for (const auto &f : failures) FAIL_CHECK(f);
}

TEST_CASE("trn_comm_abort on another thread while a rank's operations run ends them cleanly",
          "[comm][failure]") {
  // The abort lets go of the communicator's semaphores and staging memory: never while an
  // operation on another thread still queues work with them.
  SimEnv env;
  ThreadWorld world(2, 4096, 20'000);
  std::atomic<int> started{0};
  const trn_comm_t doomed = world.comms[0];
  std::thread aborter([&] {
    while (started.load() < 20) std::this_thread::yield();
    trn_comm_abort(doomed);
  });
  const auto failures = world.each([&](uint32_t r) -> std::string {
    RankResources &res = world.ranks[r];
    trn_mem_t buf = nullptr;
    if (trn_mem_alloc(res.pool, 1 << 16, 0, TRN_MEM_CATEGORY_TENSORS, 0, &buf) != TRN_SUCCESS)
      return "alloc: " + comm_error();
    trn_result_t result = TRN_SUCCESS;
    for (int i = 0; i < 100000 && result == TRN_SUCCESS; ++i) {
      started.fetch_add(1);
      result = trn_comm_all_reduce(world.comms[r], res.queue, {buf, 0}, {buf, 0}, 4096,
                                   TRN_DTYPE_F32, TRN_COMM_SUM, nullptr, nullptr);
      if (result == TRN_SUCCESS && i % 8 == 7)
        result = trn_comm_synchronize(world.comms[r], 20'000'000'000ull);
    }
    const std::string why = comm_error();
    trn_queue_finish(res.queue, 10'000'000'000ull);
    trn_queue_reset(res.queue);
    trn_mem_free(buf);
    // Rank 0's handle went with the abort, or its operation failed; rank 1's peer aborted.
    if (result != TRN_ERROR_COLLECTIVE && result != TRN_ERROR_INVALID_HANDLE)
      return "rank " + std::to_string(r) + " gave " + trn_result_name(result) + ": " + why;
    return "";
  });
  aborter.join();
  world.comms[0] = nullptr;
  for (const auto &f : failures) FAIL_CHECK(f);
}

TEST_CASE("an operation whose sync->waits meet a full queue waits for space", "[comm]") {
  // trn_comm.h: a rank's call may wait for queue space (up to the timeout), never fail for it.
  SimEnv env;
  ThreadWorld world(1, 4096, 20'000);
  RankResources &res = world.ranks[0];
  trn_queue_desc_t qdesc = TRN_QUEUE_DESC_INIT;
  qdesc.core = res.core;
  qdesc.capacity = 4;
  trn_queue_t small = nullptr;
  REQUIRE(trn_queue_create(&qdesc, &small) == TRN_SUCCESS);
  trn_sem_t gate = nullptr;
  trn_sem_desc_t sdesc = TRN_SEM_DESC_INIT;
  REQUIRE(trn_sem_create(res.device, &sdesc, &gate) == TRN_SUCCESS);
  const trn_sem_point_t closed{gate, 1};
  const trn_sync_t held{&closed, 1, nullptr, 0};
  trn_result_t r = TRN_SUCCESS;
  while ((r = trn_queue_barrier(small, &held, nullptr)) == TRN_SUCCESS) {
  }
  REQUIRE(r == TRN_ERROR_QUEUE_FULL);
  trn_mem_t buf = nullptr;
  REQUIRE(trn_mem_alloc(res.pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &buf) == TRN_SUCCESS);
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    trn_sem_signal(gate, 1);
  });
  const trn_sem_point_t after{gate, 1};
  const trn_sync_t sync{&after, 1, nullptr, 0};
  r = trn_comm_all_reduce(world.comms[0], small, {buf, 0}, {buf, 0}, 1024, TRN_DTYPE_F32,
                          TRN_COMM_SUM, &sync, nullptr);
  const std::string why = comm_error();
  opener.join();
  INFO(why);
  CHECK(r == TRN_SUCCESS);
  CHECK(trn_comm_synchronize(world.comms[0], 20'000'000'000ull) == TRN_SUCCESS);
  trn_comm_info_t info = TRN_COMM_INFO_INIT;
  REQUIRE(trn_comm_get_info(world.comms[0], &info) == TRN_SUCCESS);
  CHECK(info.operations == 1);
  trn_mem_free(buf);
  REQUIRE(trn_queue_destroy(small) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(gate) == TRN_SUCCESS);
}

TEST_CASE("bad arguments are refused and nothing is enqueued", "[comm][negative]") {
  SimEnv env;
  ThreadWorld world(1);
  RankResources &res = world.ranks[0];
  trn_comm_t comm = world.comms[0];
  trn_mem_t buf = nullptr;
  REQUIRE(trn_mem_alloc(res.pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &buf) == TRN_SUCCESS);
  const trn_comm_buffer_t b{buf, 0};
  CHECK(trn_comm_all_reduce(nullptr, res.queue, b, b, 4, TRN_DTYPE_F32, TRN_COMM_SUM, nullptr,
                            nullptr) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_comm_all_reduce(reinterpret_cast<trn_comm_t>(0x1234), res.queue, b, b, 4, TRN_DTYPE_F32,
                            TRN_COMM_SUM, nullptr, nullptr) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_comm_all_reduce(comm, nullptr, b, b, 4, TRN_DTYPE_F32, TRN_COMM_SUM, nullptr,
                            nullptr) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_comm_all_reduce(comm, res.queue, b, b, 4, TRN_DTYPE_F64, TRN_COMM_SUM, nullptr,
                            nullptr) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(comm_error().find("f32, bf16, f16 or i32") != std::string::npos);
  CHECK(trn_comm_all_reduce(comm, res.queue, b, b, 2048, TRN_DTYPE_F32, TRN_COMM_SUM, nullptr,
                            nullptr) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(comm_error().find("do not fit") != std::string::npos);
  CHECK(trn_comm_all_reduce(comm, res.queue, {buf, 2}, b, 4, TRN_DTYPE_F32, TRN_COMM_SUM, nullptr,
                            nullptr) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(trn_comm_all_reduce(comm, res.queue, b, b, 4, TRN_DTYPE_F32,
                            static_cast<trn_comm_red_op_t>(9), nullptr,
                            nullptr) == TRN_ERROR_INVALID_ENUM);
  // ARGMAX and ARGMIN are values of the shared enum that no collective computes.
  for (const trn_comm_red_op_t op : {TRN_REDUCE_ARGMAX, TRN_REDUCE_ARGMIN}) {
    CHECK(trn_comm_all_reduce(comm, res.queue, b, b, 4, TRN_DTYPE_F32, op, nullptr, nullptr) ==
          TRN_ERROR_INVALID_ENUM);
    CHECK(comm_error().find(std::string("(") + trn_reduce_op_name(op) +
                            ") is not one collectives compute") != std::string::npos);
    CHECK(trn_comm_reduce_scatter(comm, res.queue, b, b, 4, TRN_DTYPE_F32, op, nullptr, nullptr) ==
          TRN_ERROR_INVALID_ENUM);
    CHECK(trn_comm_reduce(comm, res.queue, b, b, 4, TRN_DTYPE_F32, op, 0, nullptr, nullptr) ==
          TRN_ERROR_INVALID_ENUM);
  }
  CHECK(trn_comm_all_reduce(comm, res.queue, b, {buf, 4}, 4, TRN_DTYPE_F32, TRN_COMM_SUM, nullptr,
                            nullptr) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(comm_error().find("overlap") != std::string::npos);
  CHECK(trn_comm_broadcast(comm, res.queue, b, b, 4, TRN_DTYPE_F32, 1, nullptr, nullptr) ==
        TRN_ERROR_INVALID_ARGUMENT);
  CHECK(trn_comm_send(comm, res.queue, b, 4, TRN_DTYPE_F32, 0, nullptr, nullptr) ==
        TRN_ERROR_INVALID_ARGUMENT);
  CHECK(comm_error().find("this rank itself") != std::string::npos);
  CHECK(trn_comm_all_reduce(comm, res.queue, {nullptr, 0}, b, 4, TRN_DTYPE_F32, TRN_COMM_SUM,
                            nullptr, nullptr) == TRN_ERROR_INVALID_HANDLE);
  const trn_sync_t bad_sync{nullptr, 1, nullptr, 0};
  CHECK(trn_comm_barrier(comm, res.queue, &bad_sync, nullptr) == TRN_ERROR_NULL_POINTER);
  // Nothing was enqueued by any of them: the communicator still works.
  CHECK(trn_comm_get_error(comm) == TRN_SUCCESS);
  CaseSpec spec;
  CHECK(run_case(res, comm, 0, 1, spec) == "");

  trn_comm_info_t info = TRN_COMM_INFO_INIT;
  CHECK(trn_comm_get_info(comm, nullptr) == TRN_ERROR_NULL_POINTER);
  trn_comm_info_t raw{};
  CHECK(trn_comm_get_info(comm, &raw) == TRN_ERROR_INVALID_STRUCT);
  REQUIRE(trn_comm_get_info(comm, &info) == TRN_SUCCESS);
  CHECK(info.size == 1);
  CHECK(std::string(info.transport) == "device");
  CHECK(trn_comm_get_unique_id(nullptr) == TRN_ERROR_NULL_POINTER);
  trn_comm_unique_id_t garbage{};
  trn_comm_desc_t desc = TRN_COMM_DESC_INIT;
  desc.core = res.core;
  desc.size = 1;
  trn_comm_t out = nullptr;
  CHECK(trn_comm_init_rank(&garbage, &desc, &out) == TRN_ERROR_INVALID_ARGUMENT);
  trn_comm_unique_id_t id{};
  REQUIRE(trn_comm_get_unique_id(&id) == TRN_SUCCESS);
  desc.rank = 1;
  CHECK(trn_comm_init_rank(&id, &desc, &out) == TRN_ERROR_INVALID_ARGUMENT);
  desc.rank = 0;
  desc.size = 0;
  CHECK(trn_comm_init_rank(&id, &desc, &out) == TRN_ERROR_INVALID_ARGUMENT);
  desc.size = 1;
  desc.chunk_bytes = 1000;
  CHECK(trn_comm_init_rank(&id, &desc, &out) == TRN_ERROR_INVALID_ARGUMENT);
  desc.core = nullptr;
  CHECK(trn_comm_init_rank(&id, &desc, &out) == TRN_ERROR_NULL_POINTER);
  CHECK(trn_comm_destroy(nullptr) == TRN_SUCCESS);
  CHECK(trn_comm_abort(nullptr) == TRN_SUCCESS);
  CHECK(trn_comm_destroy(reinterpret_cast<trn_comm_t>(0x42)) == TRN_ERROR_INVALID_HANDLE);
  CHECK(std::string(trn_comm_red_op_name(TRN_COMM_AVG)) == "avg");
  static_assert(TRN_COMM_SUM == TRN_REDUCE_SUM && TRN_COMM_PROD == TRN_REDUCE_PROD &&
                TRN_COMM_MAX == TRN_REDUCE_MAX && TRN_COMM_MIN == TRN_REDUCE_MIN &&
                TRN_COMM_AVG == TRN_REDUCE_AVG);
  CHECK(std::string(trn_comm_red_op_name(TRN_COMM_PROD)) == "prod");
  CHECK(std::string(trn_comm_red_op_name(static_cast<trn_comm_red_op_t>(77))) == "unknown");
  CHECK(trn_comm_get_version() == TRN_COMM_API_VERSION);
  trn_mem_free(buf);
}

TEST_CASE("trn_last_error says why a collectives call failed, as after any trn call",
          "[comm][negative]") {
  // One channel for every layer: a backend reads trn_last_error() whichever library failed.
  SimEnv env;
  trn_set_last_error("an older failure");
  CHECK(trn_comm_destroy(reinterpret_cast<trn_comm_t>(0x42)) == TRN_ERROR_INVALID_HANDLE);
  CHECK(std::string(trn_last_error()) == trn_comm_last_error());
  CHECK(std::string(trn_last_error()).find("trn_comm_destroy") == 0);
  // A call that succeeds leaves it as it was.
  trn_comm_unique_id_t id{};
  REQUIRE(trn_comm_get_unique_id(&id) == TRN_SUCCESS);
  CHECK(std::string(trn_last_error()).find("trn_comm_destroy") == 0);
}

TEST_CASE(
    "the default chunk is 512 KiB within one device and 1 MiB across devices, a chosen one stays",
    "[comm]") {
  SimEnv env;
  env.set("TRN_SIM_DEVICES", "2");
  uint64_t chunk_bytes = 0, expected = 0;
  uint32_t first_core = 0, devices = 0;
  SECTION("one device") {
    expected = 512 << 10;
    devices = 1;
  }
  SECTION("two devices") {
    // The last core of device 0, then the first of device 1.
    const auto cores = all_cores();
    for (trn_core_t core : cores) {
      trn_core_properties_t p = TRN_CORE_PROPERTIES_INIT;
      REQUIRE(trn_core_get_properties(core, &p) == TRN_SUCCESS);
      if (p.device_index != 0) break;
      ++first_core;
    }
    REQUIRE(first_core > 0);
    REQUIRE(first_core < cores.size());
    --first_core;
    expected = 1 << 20;
    devices = 2;
  }
  SECTION("the descriptor's") {
    chunk_bytes = expected = 8192;
    devices = 1;
  }
  SECTION("TRN_COMM_CHUNK_BYTES") {
    env.set("TRN_COMM_CHUNK_BYTES", "1048576");
    expected = 1 << 20;
    devices = 1;
  }
  ThreadWorld world(2, chunk_bytes, 30'000, first_core);
  for (trn_comm_t comm : world.comms) {
    trn_comm_info_t info = TRN_COMM_INFO_INIT;
    REQUIRE(trn_comm_get_info(comm, &info) == TRN_SUCCESS);
    CHECK(info.devices == devices);
    CHECK(info.chunk_bytes == expected);
  }
  // Three chunks and a part of 512 KiB each way: every rank cuts them alike.
  CaseSpec spec;
  spec.count = 3 * 131072 + 1000;
  run_all(world, {spec});
}

TEST_CASE("a malformed TRN_COMM_CHUNK_BYTES is refused naming the variable", "[comm][negative]") {
  SimEnv env;
  const auto cores = all_cores();
  REQUIRE(cores.size() >= 2);
  const trn_core_t two[2] = {cores[0], cores[1]};
  for (const char *bad : {"4095", "4097", "abc", "70000000"}) {
    env.set("TRN_COMM_CHUNK_BYTES", bad);
    trn_comm_t comms[2] = {nullptr, nullptr};
    INFO(bad);
    CHECK(trn_comm_init_all(2, two, nullptr, comms) == TRN_ERROR_INVALID_CONFIG);
    CHECK_THAT(comm_error(), Catch::Contains("TRN_COMM_CHUNK_BYTES='" + std::string(bad) + "'"));
  }
  env.set("TRN_COMM_CHUNK_BYTES", "8192");
  ThreadWorld world(2, 0);  // no chunk in the descriptor: the variable's
  trn_comm_info_t info = TRN_COMM_INFO_INIT;
  REQUIRE(trn_comm_get_info(world.comms[0], &info) == TRN_SUCCESS);
  CHECK(info.chunk_bytes == 8192);
}

TEST_CASE("trn_comm_init_all refuses one core given twice before any rank starts",
          "[comm][negative]") {
  SimEnv env;
  const auto cores = all_cores();
  REQUIRE(cores.size() >= 3);
  for (int attempt = 0; attempt < 4; ++attempt) {
    const trn_core_t twice[3] = {cores[0], cores[1], cores[0]};
    trn_comm_t comms[3] = {nullptr, nullptr, nullptr};
    CHECK(trn_comm_init_all(3, twice, nullptr, comms) == TRN_ERROR_INVALID_ARGUMENT);
    CHECK(comm_error().find("cores[2] and cores[0] are the same core") != std::string::npos);
    CHECK(comms[0] == nullptr);
  }
  // Nothing was left behind: two distinct cores make a communicator that works.
  ThreadWorld world(2);
  run_all(world, {CaseSpec{}});
}

TEST_CASE("a timeout of UINT64_MAX means no limit, and sizes above 64 ranks are refused",
          "[comm]") {
  SimEnv env;
  const auto cores = all_cores();
  REQUIRE(cores.size() >= 2);
  {
    ThreadWorld world(2, 4096, UINT64_MAX);
    trn_comm_info_t info = TRN_COMM_INFO_INIT;
    REQUIRE(trn_comm_get_info(world.comms[0], &info) == TRN_SUCCESS);
    CHECK(info.timeout_ns == UINT64_MAX);
    run_all(world, {CaseSpec{}});
  }
  trn_comm_unique_id_t id{};
  REQUIRE(trn_comm_get_unique_id(&id) == TRN_SUCCESS);
  trn_comm_desc_t desc = TRN_COMM_DESC_INIT;
  desc.core = cores[0];
  desc.size = 65;
  trn_comm_t out = nullptr;
  CHECK(trn_comm_init_rank(&id, &desc, &out) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(comm_error().find("1 to 64 ranks") != std::string::npos);
}

TEST_CASE("the ranks' timeout bounds the rendezvous, not the id maker's default, once one arrives",
          "[comm]") {
  // The id's service starts with TRN_COMM_TIMEOUT_MS (3 s here: rank 0 arrives within it on a
  // loaded machine); the ranks ask for 20 s, and one of them arrives after 5.
  SimEnv env;
  env.set("TRN_COMM_TIMEOUT_MS", "3000");
  const auto cores = all_cores();
  REQUIRE(cores.size() >= 2);
  trn_comm_unique_id_t id{};
  REQUIRE(trn_comm_get_unique_id(&id) == TRN_SUCCESS);
  trn_comm_t comms[2] = {nullptr, nullptr};
  trn_result_t results[2] = {TRN_ERROR_INTERNAL, TRN_ERROR_INTERNAL};
  std::string errors[2];
  std::vector<std::thread> ranks;
  for (uint32_t r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      if (r == 1) std::this_thread::sleep_for(std::chrono::seconds(5));
      trn_comm_desc_t desc = TRN_COMM_DESC_INIT;
      desc.core = cores[r];
      desc.rank = r;
      desc.size = 2;
      desc.timeout_ns = 20'000'000'000ull;
      results[r] = trn_comm_init_rank(&id, &desc, &comms[r]);
      if (results[r] != TRN_SUCCESS) errors[r] = comm_error();
    });
  for (auto &rank : ranks) rank.join();
  for (uint32_t r = 0; r < 2; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    CHECK(results[r] == TRN_SUCCESS);
    trn_comm_destroy(comms[r]);
  }
}

TEST_CASE("trn_comm_init_all refuses a NULL core before any rank waits", "[comm][negative]") {
  SimEnv env;
  const auto cores = all_cores();
  REQUIRE(cores.size() >= 2);
  const trn_core_t some[3] = {cores[0], nullptr, cores[1]};
  trn_comm_t comms[3] = {nullptr, nullptr, nullptr};
  trn_comm_desc_t desc = TRN_COMM_DESC_INIT;
  desc.timeout_ns = 60'000'000'000ull;  // what the other ranks would have waited
  CHECK(trn_comm_init_all(3, some, &desc, comms) == TRN_ERROR_NULL_POINTER);
  CHECK(comm_error().find("cores[1] is NULL") != std::string::npos);
  CHECK(comms[0] == nullptr);
}

TEST_CASE("trn_comm_init_all fails at once when a rank's thread cannot start", "[comm][negative]") {
  // Ranks 0 and 1 get their threads, rank 2 does not: the call fails with the reason, and the
  // started ranks never went to the rendezvous (where they would have waited for rank 2 for the
  // whole timeout).
  SimEnv env;
  const auto cores = all_cores();
  REQUIRE(cores.size() >= 4);
  trn_comm_t comms[4] = {nullptr, nullptr, nullptr, nullptr};
  trn_comm_desc_t desc = TRN_COMM_DESC_INIT;
  desc.timeout_ns = 120'000'000'000ull;
  const auto start = std::chrono::steady_clock::now();
  trn_result_t r = TRN_SUCCESS;
  {
    ThreadFailure failure(2);
    r = trn_comm_init_all(4, cores.data(), &desc, comms);
  }
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(r == TRN_ERROR_OUT_OF_HOST_MEMORY);
  CHECK(comm_error().find("cannot start a thread for rank 2 of 4") != std::string::npos);
  CHECK(took < std::chrono::seconds(30));
  CHECK(comms[0] == nullptr);
  // Nothing was left behind: the same cores make a communicator that works.
  ThreadWorld world(4);
  run_all(world, {CaseSpec{}});
}

TEST_CASE("a communicator whose own thread cannot start is refused as out of host memory",
          "[comm][negative]") {
  SimEnv env;
  const auto cores = all_cores();
  REQUIRE(!cores.empty());
  trn_comm_unique_id_t id{};
  REQUIRE(trn_comm_get_unique_id(&id) == TRN_SUCCESS);
  trn_comm_desc_t desc = TRN_COMM_DESC_INIT;
  desc.core = cores[0];
  desc.size = 1;
  trn_comm_t comm = nullptr;
  trn_result_t r = TRN_SUCCESS;
  {
    ThreadFailure failure(0);  // its monitor
    r = trn_comm_init_rank(&id, &desc, &comm);
  }
  CHECK(r == TRN_ERROR_OUT_OF_HOST_MEMORY);
  CHECK(comm_error().find("limit of threads or memory") != std::string::npos);
  CHECK(comm == nullptr);
}

TEST_CASE("trn_comm_init_from_env refuses a missing or malformed variable", "[comm][negative]") {
  SimEnv env;
  trn_comm_t comm = nullptr;
  unsetenv("RANK");
  setenv("WORLD_SIZE", "2", 1);
  CHECK(trn_comm_init_from_env(nullptr, &comm) == TRN_ERROR_INVALID_CONFIG);
  CHECK(comm_error().find("RANK is not set") != std::string::npos);
  setenv("RANK", "two", 1);
  CHECK(trn_comm_init_from_env(nullptr, &comm) == TRN_ERROR_INVALID_CONFIG);
  CHECK(comm_error().find("RANK='two'") != std::string::npos);
  setenv("RANK", "0", 1);
  unsetenv("MASTER_ADDR");
  CHECK(trn_comm_init_from_env(nullptr, &comm) == TRN_ERROR_INVALID_CONFIG);
  CHECK(comm_error().find("MASTER_ADDR") != std::string::npos);
  for (const char *name : {"RANK", "WORLD_SIZE", "MASTER_ADDR"}) unsetenv(name);
}

TEST_CASE("a malformed TRN_COMM_RING_MIN_BYTES is refused when the communicator is made",
          "[comm][negative]") {
  SimEnv env;
  env.set("TRN_COMM_RING_MIN_BYTES", "64k");
  const auto cores = all_cores();
  REQUIRE(!cores.empty());
  trn_comm_t comm = nullptr;
  CHECK(trn_comm_init_all(1, cores.data(), nullptr, &comm) == TRN_ERROR_INVALID_CONFIG);
  CHECK(comm_error().find("TRN_COMM_RING_MIN_BYTES='64k'") != std::string::npos);
  CHECK(comm == nullptr);
}

TEST_CASE("a TRN_COMM_SEND_IN_PLACE other than 0 or 1 is refused when the communicator is made",
          "[comm][negative]") {
  SimEnv env;
  const auto cores = all_cores();
  REQUIRE(!cores.empty());
  trn_comm_t comm = nullptr;
  for (const char *bad : {"yes", "2", "-1"}) {
    env.set("TRN_COMM_SEND_IN_PLACE", bad);
    CHECK(trn_comm_init_all(1, cores.data(), nullptr, &comm) == TRN_ERROR_INVALID_CONFIG);
    CHECK(comm_error().find("TRN_COMM_SEND_IN_PLACE='" + std::string(bad) + "'") !=
          std::string::npos);
    CHECK(comm == nullptr);
  }
  for (const char *good : {"0", "1"}) {
    env.set("TRN_COMM_SEND_IN_PLACE", good);
    ThreadWorld world(1);  // REQUIREs that it is made
  }
}
