// Collectives with every rank its own process (forked), joined through a unique id or through
// torchrun's variables: the operations against the host reference, and a rank killed with
// kill -9 in the middle of a collective, which the others must report within the timeout.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>
#include <tuple>

#include "comm_cases.hpp"
#include "forked_ranks.hpp"
#include "support/sim_env.hpp"
#include "support/subprocess.hpp"

using namespace trn::test;

namespace {

std::string run_rank(const trn_comm_unique_id_t &id, uint32_t r, uint32_t n,
                     const std::vector<CaseSpec> &specs) {
  RankResources res;
  trn_comm_t comm = nullptr;
  std::string why = join_rank(id, r, n, 4096, 30'000'000'000ull, &res, &comm);
  if (!why.empty()) return why;
  for (const CaseSpec &spec : specs) {
    why = run_case(res, comm, r, n, spec);
    if (!why.empty()) break;
  }
  trn_comm_info_t info = TRN_COMM_INFO_INIT;
  trn_comm_get_info(comm, &info);
  if (why.empty() && info.processes != n)
    why = "the communicator counts " + std::to_string(info.processes) + " processes";
  if (trn_comm_destroy(comm) != TRN_SUCCESS && why.empty()) why = comm_error();
  res.close();
  return why;
}

}  // namespace

TEST_CASE("every collective and dtype with ranks as processes", "[comm][processes]") {
  SimEnv env;
  env.set("TRN_SIM_DEVICES", "2");
  const uint32_t n = GENERATE(2u, 3u, 4u);
  // Several 4096-byte chunks, uneven over every rank count.
  const auto specs = every_case(
      1, {2601}, [](trn_dtype_t t) { return t == TRN_DTYPE_F32 ? TRN_COMM_MAX : TRN_COMM_SUM; });
  trn_comm_unique_id_t id{};
  REQUIRE(trn_comm_get_unique_id(&id) == TRN_SUCCESS);
  std::vector<Forked> children;
  for (uint32_t r = 0; r < n; ++r)
    children.push_back(fork_rank([&, r] { return run_rank(id, r, n, specs); }));
  for (const auto &f : reap(children, 240'000)) FAIL_CHECK(f);
}

TEST_CASE("ranks from torchrun's variables meet at MASTER_ADDR:MASTER_PORT", "[comm][processes]") {
  SimEnv env;
  const uint32_t n = 3;
  const std::string port = std::to_string(free_port());
  std::vector<Forked> children;
  for (uint32_t r = 0; r < n; ++r)
    children.push_back(fork_rank([&, r]() -> std::string {
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
      setenv("MASTER_ADDR", "localhost", 1);
      setenv("MASTER_PORT", port.c_str(), 1);
      trn_comm_t comm = nullptr;
      if (trn_comm_init_from_env(nullptr, &comm) != TRN_SUCCESS) return comm_error();
      trn_comm_info_t info = TRN_COMM_INFO_INIT;
      trn_comm_get_info(comm, &info);
      if (info.rank != r || info.size != n || info.core_index != r)
        return "rank " + std::to_string(r) + " got rank " + std::to_string(info.rank) + " of " +
               std::to_string(info.size) + " on core " + std::to_string(info.core_index);
      RankResources res;
      std::string why;
      if (!res.open(all_cores()[r], &why)) return why;
      CaseSpec spec;
      spec.count = 1000;
      why = run_case(res, comm, r, n, spec);
      trn_comm_destroy(comm);
      res.close();
      return why;
    }));
  for (const auto &f : reap(children, 120'000)) FAIL_CHECK(f);
}

TEST_CASE("ranks given different WORLD_SIZEs are all told so at once, not that the id is stale",
          "[comm][processes][negative]") {
  SimEnv env;
  const std::string port = std::to_string(free_port());
  std::vector<Forked> children;
  for (uint32_t r = 0; r < 2; ++r)
    children.push_back(fork_rank([&, r]() -> std::string {
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", r == 0 ? "2" : "3", 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", port.c_str(), 1);
      // Long: the rank that came first must not wait it out and then blame a rank that came.
      setenv("TRN_COMM_TIMEOUT_MS", "60000", 1);
      const auto start = std::chrono::steady_clock::now();
      trn_comm_t comm = nullptr;
      if (trn_comm_init_from_env(nullptr, &comm) == TRN_SUCCESS)
        return "rank " + std::to_string(r) + " joined a communicator whose ranks disagree";
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const std::string error = comm_error();
      if (error.find("stale") != std::string::npos) return "told: " + error;
      if (error.find("has 3 ranks, rank 0 said 2") == std::string::npos &&
          error.find("has 2 ranks, rank 1 said 3") == std::string::npos)
        return "rank " + std::to_string(r) + " is not told both sizes: " + error;
      if (seconds > 30) return "rank " + std::to_string(r) + " waited out its timeout: " + error;
      return "";
    }));
  for (const auto &f : reap(children, 90'000)) FAIL_CHECK(f);
}

TEST_CASE("a rank killed with kill -9 mid-collective fails the others within the timeout",
          "[comm][processes][failure]") {
  SimEnv env;
  const uint32_t n = 3;
  trn_comm_unique_id_t id{};
  REQUIRE(trn_comm_get_unique_id(&id) == TRN_SUCCESS);
  kill_mid_collective(
      n, {2}, 2 << 20,
      [&](uint32_t r, RankResources *res, trn_comm_t *comm) {
        return join_rank(id, r, n, 0, 20'000'000'000ull, res, comm);
      },
      [](const std::string &error) -> std::string {
        return error.find("rank 2") == std::string::npos ? "the error does not name rank 2" : "";
      });
}

TEST_CASE("processes that all-reduce different counts or dtypes both fail, naming both calls",
          "[comm][processes][failure]") {
  SimEnv env;
  // 8 KiB against 4 KiB, and f32 against i32: both fit one chunk, so nothing else tells them apart.
  const auto [count1, dtype1, named0, named1] =
      GENERATE(std::tuple{uint64_t{1024}, TRN_DTYPE_F32, "2048 x f32", "1024 x f32"},
               std::tuple{uint64_t{2048}, TRN_DTYPE_I32, "2048 x f32", "2048 x i32"});
  trn_comm_unique_id_t id{};
  REQUIRE(trn_comm_get_unique_id(&id) == TRN_SUCCESS);
  std::vector<Forked> children;
  for (uint32_t r = 0; r < 2; ++r)
    children.push_back(fork_rank([&, r]() -> std::string {
      RankResources res;
      trn_comm_t comm = nullptr;
      std::string why = join_rank(id, r, 2, 4096, 20'000'000'000ull, &res, &comm);
      if (!why.empty()) return why;
      trn_mem_t buf = nullptr;
      if (trn_mem_alloc(res.pool, 8192, 0, TRN_MEM_CATEGORY_TENSORS, 0, &buf) != TRN_SUCCESS)
        return trn_last_error();
      trn_result_t result =
          trn_comm_all_reduce(comm, res.queue, {buf, 0}, {buf, 0}, r == 0 ? 2048 : count1,
                              r == 0 ? TRN_DTYPE_F32 : dtype1, TRN_COMM_SUM, nullptr, nullptr);
      if (result == TRN_SUCCESS) result = trn_comm_synchronize(comm, 20'000'000'000ull);
      const std::string error = comm_error();
      if (result != TRN_ERROR_COLLECTIVE)
        why = "rank " + std::to_string(r) + " got " + trn_result_name(result);
      else if (error.find(named0) == std::string::npos || error.find(named1) == std::string::npos)
        why = "rank " + std::to_string(r) + " is not told both calls: " + error;
      trn_queue_finish(res.queue, 10'000'000'000ull);
      trn_mem_free(buf);
      trn_comm_destroy(comm);
      res.close();
      return why;
    }));
  for (const auto &f : reap(children, 90'000)) FAIL_CHECK(f);
}

namespace {

// A rank of a job under torchrun's variables that starts at once (so that its process exists)
// and joins when `go` says so; tells `joined` how init went ("" or the error), then waits for
// `go` again and all-reduces its rank + 1 with its communicator: "" or what went wrong. `expect`
// is what init or the all-reduce must fail with ("" when the job must work: the sum is 3).
struct JobRank {
  int go[2] = {-1, -1};
  int joined[2] = {-1, -1};
  Forked child;

  void start(uint32_t rank, const std::string &port, const std::string &expect) {
    REQUIRE(pipe(go) == 0);
    REQUIRE(pipe(joined) == 0);
    child = fork_rank([=, this]() -> std::string {
      close(go[1]);
      close(joined[0]);
      char byte = 0;
      if (read(go[0], &byte, 1) != 1) return "never told to join";
      setenv("RANK", std::to_string(rank).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      setenv("WORLD_SIZE", "2", 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", port.c_str(), 1);
      setenv("TRN_COMM_TIMEOUT_MS", "20000", 1);
      trn_comm_t comm = nullptr;
      const trn_result_t init = trn_comm_init_from_env(nullptr, &comm);
      const std::string init_error = init == TRN_SUCCESS ? "" : comm_error();
      (void)!write(joined[1], init == TRN_SUCCESS ? "y" : "n", 1);
      if (init != TRN_SUCCESS) {
        if (expect.empty()) return "rank " + std::to_string(rank) + ": " + init_error;
        return init_error.find(expect) == std::string::npos
                   ? "rank " + std::to_string(rank) + " failed init without saying '" + expect +
                         "': " + init_error
                   : "";
      }
      if (read(go[0], &byte, 1) != 1) return "never told to all-reduce";
      RankResources res;
      std::string why;
      if (!res.open(all_cores()[rank], &why)) return why;
      trn_mem_t buf = nullptr;
      trn_mem_alloc(res.pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &buf);
      const float mine = static_cast<float>(rank + 1);
      trn_mem_write(buf, 0, &mine, sizeof mine);
      trn_result_t result = trn_comm_all_reduce(comm, res.queue, {buf, 0}, {buf, 0}, 1,
                                                TRN_DTYPE_F32, TRN_COMM_SUM, nullptr, nullptr);
      if (result == TRN_SUCCESS) result = trn_comm_synchronize(comm, 20'000'000'000ull);
      const std::string error = comm_error();
      float sum = 0;
      trn_queue_finish(res.queue, 10'000'000'000ull);
      trn_mem_read(buf, 0, &sum, sizeof sum);
      if (expect.empty() && result != TRN_SUCCESS)
        why = "rank " + std::to_string(rank) + " of the first job failed: " + error;
      else if (expect.empty() && sum != 3.0f)
        why = "rank " + std::to_string(rank) + " summed " + std::to_string(sum);
      else if (!expect.empty() && result == TRN_SUCCESS)
        why = "rank " + std::to_string(rank) + " all-reduced with another job's rank (sum " +
              std::to_string(sum) + ")";
      else if (!expect.empty() && error.find(expect) == std::string::npos)
        why = "rank " + std::to_string(rank) + " is not told '" + expect + "': " + error;
      trn_mem_free(buf);
      trn_comm_destroy(comm);
      res.close();
      return why;
    });
    close(go[0]);
    close(joined[1]);
  }
  void tell() { (void)!write(go[1], "g", 1); }
  // Whether init succeeded, once it ended (bounded).
  bool wait_joined() {
    pollfd p{joined[0], POLLIN, 0};
    char byte = 0;
    return poll(&p, 1, 30'000) == 1 && read(joined[0], &byte, 1) == 1 && byte == 'y';
  }
  ~JobRank() {
    close(go[1]);
    close(joined[0]);
  }
};

}  // namespace

TEST_CASE("a second job on a busy MASTER_PORT fails at init and never joins the first",
          "[comm][processes][failure]") {
  SimEnv env;
  const std::string port = std::to_string(free_port());
  JobRank first[2], second[2];
  for (uint32_t r = 0; r < 2; ++r) first[r].start(r, port, "");
  for (auto &rank : first) rank.tell();
  for (auto &rank : first) REQUIRE(rank.wait_joined());
  // The second job's processes start well after the first's rendezvous completed.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (uint32_t r = 0; r < 2; ++r) second[r].start(r, port, "MASTER_PORT");
  for (auto &rank : second) rank.tell();
  for (auto &rank : second) CHECK_FALSE(rank.wait_joined());
  // The first job is untouched: its all-reduce sums its own ranks.
  for (auto &rank : first) rank.tell();
  std::vector<Forked> children{first[0].child, first[1].child, second[0].child, second[1].child};
  for (const auto &f : reap(children, 60'000)) FAIL_CHECK(f);
}

TEST_CASE("two jobs started together on one MASTER_PORT never run with each other's ranks",
          "[comm][processes][failure]") {
  SimEnv env;
  const std::string port = std::to_string(free_port());
  // Every process exists before any rendezvous completes, as when both jobs start at once; the
  // second job's rank 1 reaches the first job's rendezvous before the first job's rank 1 does.
  JobRank a0, a1, b0, b1;
  a0.start(0, port, "two jobs share one rendezvous address");
  a1.start(1, port, "MASTER_PORT");
  b0.start(0, port, "MASTER_PORT");
  b1.start(1, port, "two jobs share one rendezvous address");
  a0.tell();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a0 listens
  b1.tell();
  const bool a0_joined = a0.wait_joined(), b1_joined = b1.wait_joined();
  a1.tell();
  b0.tell();
  CHECK_FALSE(a1.wait_joined());
  CHECK_FALSE(b0.wait_joined());
  // The pair that did meet must not complete a collective.
  if (a0_joined) a0.tell();
  if (b1_joined) b1.tell();
  std::vector<Forked> children{a0.child, a1.child, b0.child, b1.child};
  for (const auto &f : reap(children, 60'000)) FAIL_CHECK(f);
}
