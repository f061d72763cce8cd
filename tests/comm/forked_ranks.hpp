// Ranks as forked children for the multi-process collectives tests: fork one with a body whose
// failure text comes back through a pipe, reap them all within a deadline, and join a rank to a
// communicator on a given core of this process's devices.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "comm_world.hpp"
#include "support/subprocess.hpp"

namespace trn::test {

// A child's exit code: 0 when everything held; its failure goes to the pipe.
struct Forked {
  pid_t pid = -1;
  int output = -1;
};

inline Forked fork_rank(const std::function<std::string()> &body) {
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
inline std::vector<std::string> reap(std::vector<Forked> &children, int timeout_ms) {
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

// Rank r of n on this process's `core`-th core: its queue and pool, and the communicator.
// "" or the failure (and trn_comm_init_rank's result in `result`, when given).
inline std::string join_rank_on(const trn_comm_unique_id_t &id, uint32_t r, uint32_t n,
                                uint32_t core, uint64_t chunk_bytes, uint64_t timeout_ns,
                                RankResources *res, trn_comm_t *comm,
                                trn_result_t *result = nullptr) {
  const auto cores = all_cores();
  std::string why;
  if (core >= cores.size()) return "no core " + std::to_string(core);
  if (!res->open(cores[core], &why)) return why;
  trn_comm_desc_t desc = TRN_COMM_DESC_INIT;
  desc.core = cores[core];
  desc.rank = r;
  desc.size = n;
  desc.chunk_bytes = chunk_bytes;
  desc.timeout_ns = timeout_ns;
  const trn_result_t r_init = trn_comm_init_rank(&id, &desc, comm);
  if (result) *result = r_init;
  return r_init == TRN_SUCCESS ? "" : comm_error();
}

// Rank r of n on the r-th core.
inline std::string join_rank(const trn_comm_unique_id_t &id, uint32_t r, uint32_t n,
                             uint64_t chunk_bytes, uint64_t timeout_ns, RankResources *res,
                             trn_comm_t *comm) {
  return join_rank_on(id, r, n, r, chunk_bytes, timeout_ns, res, comm);
}

// Every rank of `ranks` (joined by `join`) runs all-reduces of `count` floats until the
// communicator fails; once the last rank is in its loop the `victims` are killed with SIGKILL.
// Each survivor must get TRN_ERROR_COLLECTIVE with an error `check_error` accepts ("" or what is
// wrong with it), within 20 s (the ranks' timeout; a death is seen at once).
inline void kill_mid_collective(
    uint32_t ranks, const std::vector<uint32_t> &victims, uint64_t count,
    const std::function<std::string(uint32_t, RankResources *, trn_comm_t *)> &join,
    const std::function<std::string(const std::string &)> &check_error) {
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  std::vector<Forked> children;
  for (uint32_t r = 0; r < ranks; ++r)
    children.push_back(fork_rank([&, r]() -> std::string {
      close(ready[0]);
      RankResources res;
      trn_comm_t comm = nullptr;
      if (auto why = join(r, &res, &comm); !why.empty()) return why;
      trn_mem_t buf = nullptr;
      trn_mem_alloc(res.pool, count * 4, 0, TRN_MEM_CATEGORY_TENSORS, 0, &buf);
      if (r == ranks - 1) (void)!write(ready[1], "x", 1);  // the all-reduces are about to run
      const auto start = std::chrono::steady_clock::now();
      trn_result_t result = TRN_SUCCESS;
      while (result == TRN_SUCCESS) {
        result = trn_comm_all_reduce(comm, res.queue, {buf, 0}, {buf, 0}, count, TRN_DTYPE_F32,
                                     TRN_COMM_SUM, nullptr, nullptr);
        if (result == TRN_SUCCESS) result = trn_comm_synchronize(comm, 60'000'000'000ull);
        if (std::chrono::steady_clock::now() - start > std::chrono::seconds(60)) break;
      }
      const std::string error = comm_error();
      if (result != TRN_ERROR_COLLECTIVE)
        return "rank " + std::to_string(r) + " got " + trn_result_name(result) + ": " + error;
      if (auto wrong = check_error(error); !wrong.empty())
        return "rank " + std::to_string(r) + ": " + wrong + ": " + error;
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
  for (uint32_t v : victims) kill(children[v].pid, SIGKILL);
  std::vector<Forked> survivors;
  for (uint32_t r = 0; r < ranks; ++r)
    if (std::find(victims.begin(), victims.end(), r) == victims.end())
      survivors.push_back(children[r]);
  for (const auto &f : reap(survivors, 60'000)) FAIL_CHECK(f);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  CHECK(seconds < 20.0);
  for (uint32_t v : victims) {
    waitpid(children[v].pid, nullptr, 0);
    close(children[v].output);
  }
}

}  // namespace trn::test
