// Stress: destroying an object while another thread uses it, and shutting the runtime down while
// other threads hold handles. Each race has one documented outcome per order of events, which
// the tests check on every round; rounds are bounded by a count and a deadline. Built to run
// clean under ThreadSanitizer.
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/api_helpers.hpp"
#include "support/result_printing.hpp"
#include "support/sim_env.hpp"
#include "support/subprocess.hpp"
#include "trn/trn.h"

namespace {

using trn::test::core_at;
using trn::test::first_device;
using trn::test::last_error;
using trn::test::make_pool;
using trn::test::make_queue;
using trn::test::make_sem;
using trn::test::run_command;
using trn::test::SimEnv;
using Clock = std::chrono::steady_clock;

constexpr auto kRaceTime = std::chrono::seconds(3);
constexpr uint64_t kLong = 10'000'000'000;

std::vector<trn_process_info_t> processes_of(trn_device_t device) {
  uint32_t count = 0;
  INFO(last_error());
  REQUIRE(trn_device_get_processes(device, &count, nullptr) == TRN_SUCCESS);
  std::vector<trn_process_info_t> list(count + 4, TRN_PROCESS_INFO_INIT);
  count = static_cast<uint32_t>(list.size());
  REQUIRE(trn_device_get_processes(device, &count, list.data()) == TRN_SUCCESS);
  list.resize(count);
  return list;
}

bool lists_this_process(trn_device_t device) {
  for (const trn_process_info_t &p : processes_of(device))
    if (p.pid == getpid()) return true;
  return false;
}

// Whether another process (trn-ls) sees this one on a device.
bool trn_ls_lists_this_process() {
  int status = 0;
  const std::string json = run_command({TRN_LS_PATH, "--json"}, 20000, &status);
  INFO(json);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return json.find("\"pid\": " + std::to_string(getpid())) != std::string::npos;
}

// An allocation that is usable: what is written reads back.
void check_reads_back(trn_mem_t mem) {
  const uint64_t pattern = 0x0123456789abcdefull;
  uint64_t back = 0;
  CHECK(trn_mem_write(mem, 0, &pattern, sizeof pattern) == TRN_SUCCESS);
  CHECK(trn_mem_read(mem, 0, &back, sizeof back) == TRN_SUCCESS);
  CHECK(back == pattern);
}

trn_mem_t alloc_exportable(trn_pool_t pool) {
  trn_mem_t mem = nullptr;
  REQUIRE(trn_mem_alloc(pool, 1 << 20, 0, TRN_MEM_CATEGORY_TENSORS, TRN_MEM_FLAG_EXPORTABLE,
                        &mem) == TRN_SUCCESS);
  return mem;
}

// Nothing of the device's memory is left reserved by this process.
void check_holds_no_memory(trn_device_t device) {
  trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
  REQUIRE(trn_device_get_memory_stats(device, UINT32_MAX, &stats) == TRN_SUCCESS);
  CHECK(stats.reserved_bytes == 0);
}

// Runs `first` and `second` at once on two threads, `rounds` times or until the deadline:
// `prepare` sets a round up on the main thread, then both bodies start together, then `check`
// looks at what they did (on the main thread: Catch is not thread-safe). Returns the rounds run.
template <typename Prepare, typename First, typename Second, typename Check>
int race(int rounds, Prepare prepare, First first, Second second, Check check) {
  std::mutex mu;
  std::condition_variable cv;
  int round = 0, done = 0;
  bool stop = false;
  std::atomic<int> arrived{0};
  auto body = [&](auto &&work) {
    for (int seen = 0;;) {
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return stop || round != seen; });
        if (stop) return;
        seen = round;
      }
      // Both threads spin here so that neither gets a head start from the wake-up.
      arrived.fetch_add(1);
      while (arrived.load() < 2 * seen) {
      }
      work();
      std::lock_guard lock(mu);
      ++done;
      cv.notify_all();
    }
  };
  std::thread a(body, first), b(body, second);
  auto finish = [&] {
    {
      std::lock_guard lock(mu);
      stop = true;
      cv.notify_all();
    }
    a.join();
    b.join();
  };
  const auto deadline = Clock::now() + kRaceTime;
  int ran = 0;
  try {
    for (; ran < rounds && Clock::now() < deadline; ++ran) {
      prepare();
      {
        std::unique_lock lock(mu);
        ++round;
        cv.notify_all();
        cv.wait(lock, [&] { return done == 2 * round; });
      }
      check();
    }
  } catch (...) {  // a failed REQUIRE: stop the threads before Catch reports it
    finish();
    throw;
  }
  finish();
  return ran;
}

}  // namespace

TEST_CASE("trn_pool_destroy racing trn_mem_alloc: never memory from a destroyed pool",
          "[stress][races][memory]") {
  SimEnv env;
  const trn_device_t device = first_device();
  const trn_pool_kind_t kind =
      GENERATE(TRN_POOL_KIND_DEVICE, TRN_POOL_KIND_HOST);  // host segments are unmapped
  trn_pool_t pool = nullptr;
  trn_mem_t mem = nullptr;
  trn_result_t alloc_result = TRN_SUCCESS, destroy_result = TRN_SUCCESS;
  int allocated = 0, refused = 0;
  const int rounds = race(
      2000, [&] { pool = make_pool(device, kind); },
      [&] {
        mem = nullptr;
        alloc_result = trn_mem_alloc(pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem);
      },
      [&] { destroy_result = trn_pool_destroy(pool); },
      [&] {
        INFO("alloc: " << alloc_result << ", destroy: " << destroy_result);
        if (alloc_result == TRN_SUCCESS) {
          // The allocation came first: the destroy saw it live and changed nothing.
          ++allocated;
          CHECK(destroy_result == TRN_ERROR_HANDLE_IN_USE);
          // The memory is the pool's and usable.
          check_reads_back(mem);
          trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
          CHECK(trn_pool_get_stats(pool, &stats) == TRN_SUCCESS);
          CHECK(stats.allocation_count == 1);
          REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
          REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
        } else {
          // The destroy came first: the allocation found no pool.
          ++refused;
          CHECK(alloc_result == TRN_ERROR_INVALID_HANDLE);
          CHECK(mem == nullptr);
          CHECK(destroy_result == TRN_SUCCESS);
          CHECK(trn_pool_destroy(pool) == TRN_ERROR_INVALID_HANDLE);
        }
      });
  INFO(rounds << " rounds: " << allocated << " allocations first, " << refused
              << " destroys first");
  CHECK(rounds > 0);
  // Nothing the pools took is left behind.
  trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
  REQUIRE(trn_device_get_memory_stats(device, UINT32_MAX, &stats) == TRN_SUCCESS);
  CHECK(stats.allocated_bytes == 0);
}

TEST_CASE("trn_pool_destroy of one pool racing trn_mem_alloc in another: both allocations usable",
          "[stress][races][memory]") {
  // The destroyed pool's device memory goes back to the device while the other pool takes some:
  // the same chunks may pass from one to the other, and must stay the new holder's.
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t doomed = nullptr, other = nullptr;
  trn_mem_t mem = nullptr;
  trn_result_t alloc_result = TRN_SUCCESS, destroy_result = TRN_SUCCESS;
  const int rounds = race(
      2000,
      [&] {
        doomed = make_pool(device);
        other = make_pool(device);
        trn_mem_t first = nullptr;  // gives the doomed pool a segment, then lets it be cached
        REQUIRE(trn_mem_alloc(doomed, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &first) == TRN_SUCCESS);
        REQUIRE(trn_mem_free(first) == TRN_SUCCESS);
      },
      [&] {
        mem = nullptr;
        alloc_result = trn_mem_alloc(other, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem);
      },
      [&] { destroy_result = trn_pool_destroy(doomed); },
      [&] {
        INFO(last_error());
        REQUIRE(alloc_result == TRN_SUCCESS);
        REQUIRE(destroy_result == TRN_SUCCESS);
        check_reads_back(mem);
        REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
        REQUIRE(trn_pool_destroy(other) == TRN_SUCCESS);
      });
  CHECK(rounds > 0);
}

TEST_CASE("allocations on several threads are counted exactly for the process",
          "[stress][races][memory]") {
  // Every pool charges the device's counters of this process (what trn-ls and trn-top show):
  // concurrent charges to one bank and category must not lose updates.
  SimEnv env;
  const trn_device_t device = first_device();
  constexpr int kThreads = 4, kRounds = 3000;
  std::vector<trn_pool_t> pools;
  for (int t = 0; t < kThreads; ++t) pools.push_back(make_pool(device));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  const auto deadline = Clock::now() + kRaceTime;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds && Clock::now() < deadline; ++i) {
        trn_mem_t mem = nullptr;
        if (trn_mem_alloc(pools[t], 512, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem) != TRN_SUCCESS ||
            trn_mem_free(mem) != TRN_SUCCESS)
          failures.fetch_add(1);
      }
    });
  for (auto &thread : threads) thread.join();
  CHECK(failures.load() == 0);
  trn_mem_t kept = nullptr;  // one live allocation, counted once
  REQUIRE(trn_mem_alloc(pools[0], 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &kept) == TRN_SUCCESS);
  bool found = false;
  for (const trn_process_info_t &p : processes_of(device)) {
    if (p.pid != getpid()) continue;
    found = true;
    CHECK(p.hbm_allocated_bytes == 4096);
    CHECK(p.hbm_allocated_by_category[TRN_MEM_CATEGORY_TENSORS] == 4096);
  }
  CHECK(found);
  REQUIRE(trn_mem_free(kept) == TRN_SUCCESS);
  for (trn_pool_t pool : pools) REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("trn_mem_free of an export's last holder racing trn_mem_import: the import is usable",
          "[stress][races][memory][ipc]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device);
  trn_mem_t exported = nullptr, imported = nullptr;
  trn_ipc_handle_t handle;
  trn_result_t import_result = TRN_SUCCESS, free_result = TRN_SUCCESS;
  int imports = 0;
  const int rounds = race(
      500,
      [&] {
        exported = alloc_exportable(pool);
        REQUIRE(trn_mem_export(exported, &handle) == TRN_SUCCESS);
      },
      [&] { free_result = trn_mem_free(exported); },
      [&] {
        imported = nullptr;
        import_result = trn_mem_import(device, &handle, &imported);
      },
      [&] {
        INFO("free: " << free_result << ", import: " << import_result << " " << last_error());
        REQUIRE(free_result == TRN_SUCCESS);
        if (import_result != TRN_SUCCESS) {
          CHECK(imported == nullptr);  // the export was gone first
          return;
        }
        // The import came first, or after the free let go: either way it holds the memory.
        ++imports;
        void *host = nullptr;
        CHECK(trn_mem_map(imported, &host) == TRN_SUCCESS);
        check_reads_back(imported);
        REQUIRE(trn_mem_free(imported) == TRN_SUCCESS);
      });
  INFO(rounds << " rounds, " << imports << " imports");
  CHECK(rounds > 0);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  check_holds_no_memory(device);
}

TEST_CASE("trn_mem_export racing trn_mem_free of the same memory: nothing is left held",
          "[stress][races][memory][ipc]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device);
  trn_mem_t mem = nullptr;
  trn_ipc_handle_t handle;
  trn_result_t export_result = TRN_SUCCESS, free_result = TRN_SUCCESS;
  const int rounds = race(
      500, [&] { mem = alloc_exportable(pool); },
      [&] { export_result = trn_mem_export(mem, &handle); },
      [&] { free_result = trn_mem_free(mem); },
      [&] {
        INFO("export: " << export_result << ", free: " << free_result << " " << last_error());
        CHECK(free_result == TRN_SUCCESS);
        // Exported first (the free then let go of the export), or freed first.
        CHECK((export_result == TRN_SUCCESS || export_result == TRN_ERROR_INVALID_HANDLE));
        trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
        REQUIRE(trn_pool_get_stats(pool, &stats) == TRN_SUCCESS);
        CHECK(stats.reserved_bytes == 0);
      });
  CHECK(rounds > 0);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  check_holds_no_memory(device);
}

TEST_CASE("two trn_queue_reset racing a submission never complete work that did not run",
          "[stress][races][queues]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_queue_t queue = make_queue(core_at(device, 0));
  trn_pool_t pool = make_pool(device);
  trn_sem_t timeline = nullptr;
  REQUIRE(trn_queue_get_semaphore(queue, &timeline) == TRN_SUCCESS);
  uint64_t gate_value = 0;
  trn_sem_t gate = make_sem(device);
  uint64_t gated = 0;
  trn_result_t first = TRN_SUCCESS, second = TRN_SUCCESS, submitted = TRN_SUCCESS;
  const int rounds = race(
      300,
      [&] {
        // A write whose memory is freed before it runs faults the queue.
        trn_mem_t victim = nullptr;
        REQUIRE(trn_mem_alloc(pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &victim) == TRN_SUCCESS);
        const uint64_t word = 0;
        REQUIRE(trn_queue_write(queue, victim, 0, &word, sizeof word, nullptr, nullptr) ==
                TRN_SUCCESS);
        REQUIRE(trn_mem_free(victim) == TRN_SUCCESS);
        trn_queue_finish(queue, kLong);  // the fault, or success if the write won
        gated = 0;
      },
      [&] {
        first = trn_queue_reset(queue);
        // Work that waits on a gate the round opens only after its check.
        const trn_sem_point_t point{gate, gate_value + 1};
        const trn_sync_t wait{&point, 1, nullptr, 0};
        submitted = trn_queue_barrier(queue, &wait, &gated);
      },
      [&] { second = trn_queue_reset(queue); },
      [&] {
        INFO(last_error());
        CHECK(first == TRN_SUCCESS);
        CHECK(second == TRN_SUCCESS);
        REQUIRE(submitted == TRN_SUCCESS);
        uint64_t completed = 0;
        REQUIRE(trn_sem_query(timeline, &completed) == TRN_SUCCESS);
        INFO("the gated command is #" << gated << ", the queue says " << completed << " completed");
        CHECK(completed < gated);
        REQUIRE(trn_sem_signal(gate, ++gate_value) == TRN_SUCCESS);
        REQUIRE(trn_queue_finish(queue, kLong) == TRN_SUCCESS);
      });
  CHECK(rounds > 0);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
}

TEST_CASE("trn_sem_get_fd racing trn_sem_destroy: a descriptor reads end-of-file",
          "[stress][races][semaphores]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_sem_t sem = nullptr;
  int fd = -1;
  trn_result_t watch_result = TRN_SUCCESS, destroy_result = TRN_SUCCESS;
  int watched = 0;
  const int rounds = race(
      1000, [&] { sem = make_sem(device); },
      [&] {
        fd = -1;
        watch_result = trn_sem_get_fd(sem, 5, &fd);
      },
      [&] { destroy_result = trn_sem_destroy(sem); },
      [&] {
        INFO("get_fd: " << watch_result << ", destroy: " << destroy_result << " " << last_error());
        REQUIRE(destroy_result == TRN_SUCCESS);
        if (watch_result != TRN_SUCCESS) {
          CHECK(watch_result == TRN_ERROR_INVALID_HANDLE);
          return;
        }
        ++watched;
        // The semaphore never reached 5 and was destroyed: end-of-file, soon.
        pollfd pfd{fd, POLLIN, 0};
        CHECK(poll(&pfd, 1, 5000) == 1);
        uint64_t count = 0;
        CHECK(read(fd, &count, sizeof count) == 0);
        close(fd);
      });
  INFO(rounds << " rounds, " << watched << " descriptors");
  CHECK(rounds > 0);
}

TEST_CASE("a compute trn_queue_create racing trn_core_release of its core: the queue is made",
          "[stress][races][queues]") {
  // The release comes first (the create takes the core again) or the create does (the release
  // finds a queue on the core and is refused); the create never fails.
  SimEnv env;
  const trn_core_t core = core_at(first_device(), 0);
  trn_queue_t queue = nullptr;
  trn_result_t create_result = TRN_SUCCESS, release_result = TRN_SUCCESS;
  int refused = 0;
  const int rounds = race(
      1000, [&] { REQUIRE(trn_core_acquire(core) == TRN_SUCCESS); },
      [&] {
        trn_queue_desc_t desc = TRN_QUEUE_DESC_INIT;
        desc.core = core;
        desc.kind = TRN_QUEUE_KIND_COMPUTE;
        queue = nullptr;
        create_result = trn_queue_create(&desc, &queue);
      },
      [&] { release_result = trn_core_release(core); },
      [&] {
        INFO("create: " << create_result << ", release: " << release_result << " " << last_error());
        REQUIRE(create_result == TRN_SUCCESS);
        CHECK((release_result == TRN_SUCCESS || release_result == TRN_ERROR_HANDLE_IN_USE));
        if (release_result != TRN_SUCCESS) ++refused;
        REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
        REQUIRE(trn_core_release(core) == TRN_SUCCESS);  // the queue's claim
      });
  INFO(rounds << " rounds, " << refused << " releases refused");
  CHECK(rounds > 0);
}

TEST_CASE("trn_queue_free racing trn_mem_free of the same memory: exactly one succeeds",
          "[stress][races][memory]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_queue_t queue = make_queue(core_at(device, 0));
  trn_pool_t pool = make_pool(device);
  trn_mem_t mem = nullptr;
  trn_result_t queued = TRN_SUCCESS, freed = TRN_SUCCESS;
  const int rounds = race(
      1000,
      [&] {
        REQUIRE(trn_mem_alloc(pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem) == TRN_SUCCESS);
      },
      [&] { queued = trn_queue_free(queue, mem, nullptr, nullptr); },
      [&] { freed = trn_mem_free(mem); },
      [&] {
        INFO("trn_queue_free: " << queued << ", trn_mem_free: " << freed << " " << last_error());
        CHECK(((queued == TRN_SUCCESS) != (freed == TRN_SUCCESS)));
        CHECK((queued == TRN_SUCCESS || queued == TRN_ERROR_INVALID_HANDLE));
        CHECK((freed == TRN_SUCCESS || freed == TRN_ERROR_INVALID_HANDLE));
        REQUIRE(trn_queue_finish(queue, kLong) == TRN_SUCCESS);  // the loser's command is harmless
        trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
        REQUIRE(trn_pool_get_stats(pool, &stats) == TRN_SUCCESS);
        CHECK(stats.allocation_count == 0);
      });
  CHECK(rounds > 0);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE(
    "trn_mem_free racing a copy that reads the memory: the copy runs whole or faults as freed",
    "[stress][races][memory]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_queue_t queue = make_queue(core_at(device, 0));
  trn_pool_t pool = make_pool(device);
  trn_mem_t source = nullptr, destination = nullptr;
  REQUIRE(trn_mem_alloc(pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &destination) == TRN_SUCCESS);
  trn_result_t copied = TRN_SUCCESS, finished = TRN_SUCCESS, freed = TRN_SUCCESS;
  int ran = 0, faulted = 0;
  const int rounds = race(
      1000,
      [&] {
        REQUIRE(trn_mem_alloc(pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &source) == TRN_SUCCESS);
        REQUIRE(trn_mem_set(source, 0, 0x5a, 4096) == TRN_SUCCESS);
        REQUIRE(trn_mem_set(destination, 0, 0, 4096) == TRN_SUCCESS);
      },
      [&] {
        // The copy runs on this thread (its wait runs the queue) while the other frees.
        copied = trn_queue_copy(queue, destination, 0, source, 0, 4096, nullptr, nullptr);
        finished = trn_queue_finish(queue, kLong);
      },
      [&] { freed = trn_mem_free(source); },
      [&] {
        INFO("copy: " << copied << ", finish: " << finished << ", free: " << freed << " "
                      << last_error());
        CHECK(freed == TRN_SUCCESS);
        CHECK((copied == TRN_SUCCESS || copied == TRN_ERROR_INVALID_HANDLE));
        std::vector<uint8_t> bytes(4096);
        REQUIRE(trn_mem_read(destination, 0, bytes.data(), bytes.size()) == TRN_SUCCESS);
        if (copied == TRN_SUCCESS && finished == TRN_SUCCESS) {
          ++ran;  // it held the memory before the free returned it: every byte arrived
          CHECK(std::count(bytes.begin(), bytes.end(), uint8_t{0x5a}) == 4096);
        } else if (copied == TRN_SUCCESS) {
          ++faulted;  // reached after the free: a use after free, and nothing copied
          trn_queue_fault_t fault = TRN_QUEUE_FAULT_INIT;
          REQUIRE(trn_queue_get_fault(queue, &fault) == TRN_SUCCESS);
          CHECK(fault.result == TRN_ERROR_INVALID_HANDLE);
          CHECK(std::string(fault.reason).find("freed before the copy ran") != std::string::npos);
          CHECK(std::count(bytes.begin(), bytes.end(), uint8_t{0}) == 4096);
          REQUIRE(trn_queue_reset(queue) == TRN_SUCCESS);
        }
        trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
        REQUIRE(trn_pool_get_stats(pool, &stats) == TRN_SUCCESS);
        CHECK(stats.allocation_count == 1);  // the destination only
      });
  CHECK(rounds > 0);
  INFO("copies run: " << ran << ", faulted: " << faulted);
  CHECK(ran + faulted > 0);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(destination) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("trn_sem_destroy racing a submission that uses the semaphore: never both succeed",
          "[stress][races][semaphores]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_queue_t queue = make_queue(core_at(device, 0));
  // The command waits on a gate the test opens only after the round, so a submission that
  // succeeded is still queued when the destroy runs.
  trn_sem_t gate = make_sem(device);
  // Several semaphores the command signals, the contested one first: resolving the others
  // widens the window between its lookup and the submission.
  constexpr int kOthers = 6;
  std::vector<trn_sem_t> others;
  for (int i = 0; i < kOthers; ++i) others.push_back(make_sem(device));
  trn_sem_t victim = nullptr;
  trn_result_t submit_result = TRN_SUCCESS, destroy_result = TRN_SUCCESS;
  uint64_t gate_value = 0, signal_value = 0;
  int queued = 0, refused = 0;
  const bool launch_like = GENERATE(false, true);  // a barrier, or a memset with the same sync
  trn_pool_t pool = make_pool(device, TRN_POOL_KIND_DEVICE);
  trn_mem_t target = nullptr;
  REQUIRE(trn_mem_alloc(pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &target) == TRN_SUCCESS);
  const int rounds = race(
      1000,
      [&] {
        victim = make_sem(device);
        ++gate_value;
        ++signal_value;
      },
      [&] {
        trn_sem_point_t wait{gate, gate_value};
        std::vector<trn_sem_point_t> signals{{victim, 1}};
        for (trn_sem_t s : others) signals.push_back({s, signal_value});
        const trn_sync_t sync{&wait, 1, signals.data(), static_cast<uint32_t>(signals.size())};
        submit_result = launch_like ? trn_queue_memset(queue, target, 0, 7, 4096, &sync, nullptr)
                                    : trn_queue_barrier(queue, &sync, nullptr);
      },
      [&] { destroy_result = trn_sem_destroy(victim); },
      [&] {
        INFO("submit: " << submit_result << ", destroy: " << destroy_result);
        if (submit_result == TRN_SUCCESS) {
          ++queued;
          CHECK(destroy_result == TRN_ERROR_HANDLE_IN_USE);
          REQUIRE(trn_sem_signal(gate, gate_value) == TRN_SUCCESS);
          REQUIRE(trn_queue_finish(queue, kLong) == TRN_SUCCESS);
          uint64_t value = 0;
          CHECK(trn_sem_query(victim, &value) == TRN_SUCCESS);
          CHECK(value == 1);
          REQUIRE(trn_sem_destroy(victim) == TRN_SUCCESS);
        } else {
          ++refused;
          CHECK(submit_result == TRN_ERROR_INVALID_HANDLE);
          CHECK(destroy_result == TRN_SUCCESS);
          REQUIRE(trn_sem_signal(gate, gate_value) == TRN_SUCCESS);
          REQUIRE(trn_queue_finish(queue, kLong) == TRN_SUCCESS);
          --signal_value;  // nothing signalled the others this round
        }
      });
  INFO(rounds << " rounds: " << queued << " submissions first, " << refused << " destroys first");
  CHECK(rounds > 0);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
  for (trn_sem_t s : others) REQUIRE(trn_sem_destroy(s) == TRN_SUCCESS);
  REQUIRE(trn_sem_destroy(gate) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(target) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("trn_runtime_shutdown closes the drivers for every thread and invalidates their handles",
          "[stress][races][shutdown]") {
  SimEnv env;
  // Another thread uses the runtime, then sits idle holding its handles.
  std::mutex mu;
  std::condition_variable cv;
  int step = 0;
  auto await_step = [&](int wanted) {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return step >= wanted; });
  };
  auto set_step = [&](int value) {
    std::lock_guard lock(mu);
    step = value;
    cv.notify_all();
  };
  std::vector<std::string> errors;  // written by the other thread before it sets a step
  std::thread other([&] {
    auto expect = [&](trn_result_t got, trn_result_t want, const char *what) {
      if (got != want)
        errors.push_back(std::string(what) + ": " + trn_result_name(got) + " (" + last_error() +
                         ")");
    };
    trn_device_t device = nullptr;
    uint32_t count = 1;
    expect(trn_device_get(&count, &device), TRN_SUCCESS, "trn_device_get");
    trn_core_t core = nullptr;
    count = 1;
    expect(trn_core_get(device, &count, &core), TRN_SUCCESS, "trn_core_get");
    trn_queue_desc_t qdesc = TRN_QUEUE_DESC_INIT;
    qdesc.core = core;
    trn_queue_t queue = nullptr;
    expect(trn_queue_create(&qdesc, &queue), TRN_SUCCESS, "trn_queue_create");
    trn_sem_desc_t sdesc = TRN_SEM_DESC_INIT;
    trn_sem_t sem = nullptr;
    expect(trn_sem_create(device, &sdesc, &sem), TRN_SUCCESS, "trn_sem_create");
    trn_pool_desc_t pdesc = TRN_POOL_DESC_INIT;
    trn_pool_t pool = nullptr;
    expect(trn_pool_create(device, &pdesc, &pool), TRN_SUCCESS, "trn_pool_create");
    trn_mem_t mem = nullptr;
    expect(trn_mem_alloc(pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem), TRN_SUCCESS,
           "trn_mem_alloc");
    // Fill this thread's lookup caches with the objects.
    expect(trn_sem_signal(sem, 1), TRN_SUCCESS, "trn_sem_signal");
    expect(trn_queue_barrier(queue, nullptr, nullptr), TRN_SUCCESS, "trn_queue_barrier");
    expect(trn_queue_finish(queue, kLong), TRN_SUCCESS, "trn_queue_finish");
    uint64_t word = 0;
    expect(trn_mem_write(mem, 0, &word, sizeof word), TRN_SUCCESS, "trn_mem_write");
    set_step(1);
    await_step(2);  // the main thread shut the runtime down
    // Every old handle is stale; the next calls start a fresh session.
    uint64_t value = 0;
    expect(trn_sem_query(sem, &value), TRN_ERROR_INVALID_HANDLE, "old trn_sem_query");
    expect(trn_sem_signal(sem, 2), TRN_ERROR_INVALID_HANDLE, "old trn_sem_signal");
    expect(trn_mem_read(mem, 0, &word, sizeof word), TRN_ERROR_INVALID_HANDLE, "old trn_mem_read");
    expect(trn_queue_barrier(queue, nullptr, nullptr), TRN_ERROR_INVALID_HANDLE,
           "old trn_queue_barrier");
    expect(trn_pool_trim(pool), TRN_ERROR_INVALID_HANDLE, "old trn_pool_trim");
    trn_core_properties_t props = TRN_CORE_PROPERTIES_INIT;
    expect(trn_core_get_properties(core, &props), TRN_ERROR_INVALID_HANDLE,
           "old trn_core_get_properties");
    count = 1;
    expect(trn_device_get(&count, &device), TRN_SUCCESS, "new trn_device_get");
    trn_sem_t fresh = nullptr;
    expect(trn_sem_create(device, &sdesc, &fresh), TRN_SUCCESS, "new trn_sem_create");
    expect(trn_sem_signal(fresh, 3), TRN_SUCCESS, "new trn_sem_signal");
    expect(trn_sem_destroy(fresh), TRN_SUCCESS, "new trn_sem_destroy");
    set_step(3);
    await_step(4);
  });
  await_step(1);
  {
    INFO(last_error());
    REQUIRE(lists_this_process(first_device()));  // the other thread's queue holds a core
    REQUIRE(trn_ls_lists_this_process());
  }
  REQUIRE(trn_runtime_shutdown() == TRN_SUCCESS);
  // The drivers are closed although the other thread did not call since: this process holds
  // no slot of the device any more, for other processes too.
  CHECK_FALSE(trn_ls_lists_this_process());
  CHECK_FALSE(lists_this_process(first_device()));
  set_step(2);
  await_step(3);
  for (const auto &e : errors) FAIL_CHECK(e);
  CHECK(errors.empty());
  set_step(4);
  other.join();
  CHECK(trn_runtime_shutdown() == TRN_SUCCESS);
}

// Calls on several threads while this thread shuts the runtime down every few milliseconds. A
// call racing a shutdown completes on the old runtime or finds its handles stale (a wait on
// cancelled work may end with TRN_ERROR_CANCELLED): anything else is recorded, and ends the race.
class ShutdownRace {
 public:
  // Whether `r` is success; records it if the race does not allow it (`also` is allowed too).
  bool check(const char *what, trn_result_t r, trn_result_t also = TRN_SUCCESS) {
    if (r == TRN_SUCCESS || r == TRN_ERROR_INVALID_HANDLE || r == also) return r == TRN_SUCCESS;
    if (unexpected_.fetch_add(1) == 0) {
      std::lock_guard lock(mu_);
      first_unexpected_ = std::string(what) + ": " + trn_result_name(r) + " (" + last_error() + ")";
    }
    return false;
  }
  bool stopping() const { return stop_.load(); }
  void count_call() { calls_.fetch_add(1, std::memory_order_relaxed); }

  // Runs body(thread index) on `threads` threads, each in a loop until stopping().
  template <typename Body>
  void run(int threads, Body body) {
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        while (!stopping()) body(t);
      });
    const auto deadline = Clock::now() + kRaceTime;
    int shutdowns = 0;
    while (Clock::now() < deadline && unexpected_.load() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      CHECK(trn_runtime_shutdown() == TRN_SUCCESS);
      ++shutdowns;
    }
    stop_.store(true);
    for (auto &worker : workers) worker.join();
    INFO(first_unexpected_);
    CHECK(unexpected_.load() == 0);
    INFO(shutdowns << " shutdowns during " << calls_.load() << " rounds of calls");
    CHECK(shutdowns > 0);
    // The threads are idle now, some of them holding handles of the last session: one more
    // shutdown closes it all the same.
    REQUIRE(trn_runtime_shutdown() == TRN_SUCCESS);
    CHECK_FALSE(lists_this_process(first_device()));
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> unexpected_{0};
  std::atomic<uint64_t> calls_{0};
  std::mutex mu_;
  std::string first_unexpected_;  // guarded by mu_
};

TEST_CASE("trn_runtime_shutdown while other threads call: old session or INVALID_HANDLE",
          "[stress][races][shutdown]") {
  SimEnv env;
  ShutdownRace race;
  race.run(3, [&](int t) {
    uint64_t value = 0;
    uint32_t count = 1;
    trn_device_t device = nullptr;
    if (!race.check("trn_device_get", trn_device_get(&count, &device))) return;
    trn_sem_desc_t sdesc = TRN_SEM_DESC_INIT;
    trn_sem_t sem = nullptr;
    if (!race.check("trn_sem_create", trn_sem_create(device, &sdesc, &sem))) return;
    trn_pool_desc_t pdesc = TRN_POOL_DESC_INIT;
    pdesc.kind = TRN_POOL_KIND_HOST;
    trn_pool_t pool = nullptr;
    race.check("trn_pool_create", trn_pool_create(device, &pdesc, &pool));
    trn_queue_t queue = nullptr;
    trn_core_t core = nullptr;
    count = 1;
    if (t == 0 && trn_core_get(device, &count, &core) == TRN_SUCCESS) {
      trn_queue_desc_t qdesc = TRN_QUEUE_DESC_INIT;
      qdesc.core = core;
      race.check("trn_queue_create", trn_queue_create(&qdesc, &queue));
    }
    for (int i = 0; i < 50 && !race.stopping(); ++i) {
      race.count_call();
      race.check("trn_sem_signal", trn_sem_signal(sem, ++value));
      uint64_t seen = 0;
      race.check("trn_sem_query", trn_sem_query(sem, &seen));
      trn_mem_t mem = nullptr;
      if (race.check("trn_mem_alloc",
                     trn_mem_alloc(pool, 512, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem))) {
        race.check("trn_mem_write", trn_mem_write(mem, 0, &value, sizeof value));
        race.check("trn_mem_free", trn_mem_free(mem));
      }
      if (queue)
        race.check("trn_queue_barrier", trn_queue_barrier(queue, nullptr, nullptr),
                   TRN_ERROR_QUEUE_FULL);
    }
    // Whatever is still live goes (or was already invalidated by a shutdown).
    race.check("trn_queue_destroy", trn_queue_destroy(queue));
    race.check("trn_sem_destroy", trn_sem_destroy(sem));
    race.check("trn_pool_destroy", trn_pool_destroy(pool));
  });
}

TEST_CASE("trn_runtime_shutdown as the first call of a thread", "[stress][races][shutdown]") {
  SimEnv env;
  REQUIRE(trn_core_acquire(core_at(first_device(), 0)) == TRN_SUCCESS);
  trn_result_t result = TRN_ERROR_INTERNAL;
  std::thread([&] { result = trn_runtime_shutdown(); }).join();
  CHECK(result == TRN_SUCCESS);
  CHECK_FALSE(lists_this_process(first_device()));
}

TEST_CASE(
    "trn_runtime_shutdown while other threads use device memory: old session or "
    "INVALID_HANDLE",
    "[stress][races][shutdown]") {
  SimEnv env;
  ShutdownRace race;
  race.run(3, [&](int t) {
    uint64_t value = static_cast<uint64_t>(t) << 32;
    uint32_t count = 1;
    trn_device_t device = nullptr;
    if (!race.check("trn_device_get", trn_device_get(&count, &device))) return;
    trn_core_t core = nullptr;
    count = 1;
    trn_queue_t queue = nullptr;
    if (race.check("trn_core_get", trn_core_get(device, &count, &core))) {
      trn_queue_desc_t qdesc = TRN_QUEUE_DESC_INIT;
      qdesc.core = core;
      race.check("trn_queue_create", trn_queue_create(&qdesc, &queue));
    }
    trn_pool_desc_t pdesc = TRN_POOL_DESC_INIT;
    trn_pool_t pool = nullptr;
    race.check("trn_pool_create", trn_pool_create(device, &pdesc, &pool));
    for (int i = 0; i < 20 && !race.stopping(); ++i) {
      race.count_call();
      trn_mem_t mem = nullptr;
      if (!race.check("trn_mem_alloc",
                      trn_mem_alloc(pool, 1 << 16, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem)))
        continue;
      ++value;
      race.check("trn_mem_write", trn_mem_write(mem, 8, &value, sizeof value));
      race.check("trn_mem_set", trn_mem_set(mem, 4096, 0x5a, 4096));
      void *host = nullptr;
      race.check("trn_mem_map", trn_mem_map(mem, &host));
      if (queue) {
        race.check("trn_queue_memset",
                   trn_queue_memset(queue, mem, 8192, 0x11, 8192, nullptr, nullptr));
        race.check("trn_queue_write",
                   trn_queue_write(queue, mem, 16, &value, sizeof value, nullptr, nullptr));
        race.check("trn_queue_finish", trn_queue_finish(queue, kLong), TRN_ERROR_CANCELLED);
      }
      uint64_t back = 0;
      race.check("trn_mem_read", trn_mem_read(mem, 8, &back, sizeof back));
      race.check("trn_mem_free", trn_mem_free(mem));
    }
    race.check("trn_queue_destroy", trn_queue_destroy(queue));
    race.check("trn_pool_destroy", trn_pool_destroy(pool));
  });
}
