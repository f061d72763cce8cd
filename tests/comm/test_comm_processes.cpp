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

#include "comm_cases.hpp"
#include "support/sim_env.hpp"
#include "support/subprocess.hpp"

using namespace trn::test;

namespace {

// A child's exit code: 0 when everything held; its failure goes to the pipe.
struct Forked {
  pid_t pid = -1;
  int output = -1;
};

Forked fork_rank(const std::function<std::string()> &body) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    std::string why;
    try {
      why = body();
    } catch (const std::exception &e) {
      why = e.what();
    }
    if (!why.empty()) {
      why += "\n";
      (void)!write(fds[1], why.data(), why.size());
    }
    _exit(why.empty() ? 0 : 1);
  }
  close(fds[1]);
  return {pid, fds[0]};
}

// Waits for every child (bounded) and returns what the failing ones said.
std::vector<std::string> reap(std::vector<Forked> &children, int timeout_ms) {
  std::vector<std::string> failures;
  for (Forked &child : children) {
    bool reaped = false;
    const int status = wait_for_exit(child.pid, timeout_ms, &reaped, [] {});
    if (!reaped) {
      kill(child.pid, SIGKILL);
      waitpid(child.pid, nullptr, 0);
      failures.push_back("a rank did not finish in time");
    }
    char text[4096] = {};
    const ssize_t n = read(child.output, text, sizeof text - 1);
    close(child.output);
    if (reaped && status != 0)
      failures.push_back(n > 0 ? std::string(text, static_cast<size_t>(n))
                               : "a rank exited with status " + std::to_string(status));
  }
  return failures;
}

// Rank r of n on the r-th core: its queue and pool, and the communicator. "" or the failure.
std::string join_rank(const trn_comm_unique_id_t &id, uint32_t r, uint32_t n, uint64_t chunk_bytes,
                      uint64_t timeout_ns, RankResources *res, trn_comm_t *comm) {
  const auto cores = all_cores();
  std::string why;
  if (!res->open(cores[r], &why)) return why;
  trn_comm_desc_t desc = TRN_COMM_DESC_INIT;
  desc.core = cores[r];
  desc.rank = r;
  desc.size = n;
  desc.chunk_bytes = chunk_bytes;
  desc.timeout_ns = timeout_ns;
  return trn_comm_init_rank(&id, &desc, comm) == TRN_SUCCESS ? "" : comm_error();
}

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
  std::vector<CaseSpec> specs;
  for (trn_dtype_t dtype : {TRN_DTYPE_F32, TRN_DTYPE_BF16, TRN_DTYPE_F16, TRN_DTYPE_I32})
    for (Collective c : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter,
                         Collective::broadcast, Collective::reduce, Collective::all_to_all,
                         Collective::send_recv, Collective::barrier})
      for (bool in_place : {false, true}) {
        CaseSpec spec;
        spec.collective = c;
        spec.dtype = dtype;
        spec.in_place = in_place;
        spec.count = 2601;  // several 4096-byte chunks, uneven over every rank count
        spec.root = 1;
        spec.op = dtype == TRN_DTYPE_F32 ? TRN_COMM_MAX : TRN_COMM_SUM;
        specs.push_back(spec);
      }
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
  const std::string port = std::to_string(20000 + getpid() % 20000);
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

TEST_CASE("a rank killed with kill -9 mid-collective fails the others within the timeout",
          "[comm][processes][failure]") {
  SimEnv env;
  const uint32_t n = 3;
  trn_comm_unique_id_t id{};
  REQUIRE(trn_comm_get_unique_id(&id) == TRN_SUCCESS);
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  std::vector<Forked> children;
  for (uint32_t r = 0; r < n; ++r)
    children.push_back(fork_rank([&, r]() -> std::string {
      close(ready[0]);
      RankResources res;
      trn_comm_t comm = nullptr;
      if (auto why = join_rank(id, r, n, 0, 20'000'000'000ull, &res, &comm); !why.empty())
        return why;
      trn_mem_t buf = nullptr;
      trn_mem_alloc(res.pool, 8 << 20, 0, TRN_MEM_CATEGORY_TENSORS, 0, &buf);
      // Rank 2 says it is in the loop, then is killed while the all-reduces run.
      if (r == 2) (void)!write(ready[1], "x", 1);
      const auto start = std::chrono::steady_clock::now();
      trn_result_t result = TRN_SUCCESS;
      for (int i = 0; i < 100000 && result == TRN_SUCCESS; ++i) {
        result = trn_comm_all_reduce(comm, res.queue, {buf, 0}, {buf, 0}, 2 << 20, TRN_DTYPE_F32,
                                     TRN_COMM_SUM, nullptr, nullptr);
        if (result == TRN_SUCCESS) result = trn_comm_synchronize(comm, 60'000'000'000ull);
        if (std::chrono::steady_clock::now() - start > std::chrono::seconds(60)) break;
      }
      const std::string error = comm_error();
      if (result != TRN_ERROR_COLLECTIVE)
        return "rank " + std::to_string(r) + " got " + trn_result_name(result) + ": " + error;
      if (error.find("rank 2") == std::string::npos)
        return "rank " + std::to_string(r) + "'s error does not name rank 2: " + error;
      trn_comm_abort(comm);
      trn_queue_finish(res.queue, 10'000'000'000ull);
      trn_queue_reset(res.queue);
      trn_mem_free(buf);
      res.close();
      return "";
    }));
  close(ready[1]);
  char byte = 0;
  pollfd p{ready[0], POLLIN, 0};
  REQUIRE(poll(&p, 1, 60'000) == 1);
  REQUIRE(read(ready[0], &byte, 1) == 1);
  close(ready[0]);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto killed_at = std::chrono::steady_clock::now();
  kill(children[2].pid, SIGKILL);
  std::vector<Forked> survivors(children.begin(), children.begin() + 2);
  for (const auto &f : reap(survivors, 60'000)) FAIL_CHECK(f);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  CHECK(seconds < 20.0);  // the communicator's timeout; a death is seen at once
  waitpid(children[2].pid, nullptr, 0);
  close(children[2].output);
}
