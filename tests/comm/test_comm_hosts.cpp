// Collectives across simulated hosts: every rank a forked process whose host is its own
// TRN_SIM_ROOT, so ranks on different hosts cannot share device memory and go through the
// libfabric transport. Every operation and dtype on 2 hosts x 1 and 2 ranks, against the host
// reference; a host whose processes are killed mid-operation fails the others, naming the rank
// and the host, within the timeout.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <thread>

#include "comm_cases.hpp"
#include "forked_ranks.hpp"
#include "support/sim_env.hpp"

using namespace trn::test;

namespace {

// `hosts` simulated hosts under the test's root, `per_host` ranks each: rank r is on host
// r / per_host, on that host's (r % per_host)-th core.
struct Hosts {
  std::vector<std::string> roots;
  uint32_t per_host;

  Hosts(const SimEnv &env, uint32_t hosts, uint32_t per) : per_host(per) {
    for (uint32_t h = 0; h < hosts; ++h) {
      roots.push_back(env.root() + "/host" + std::to_string(h));
      mkdir(roots.back().c_str(), 0700);
    }
  }
  uint32_t ranks() const { return static_cast<uint32_t>(roots.size()) * per_host; }
  // In the child, before its runtime starts.
  void enter(uint32_t r) const { setenv("TRN_SIM_ROOT", roots[r / per_host].c_str(), 1); }
  std::string join(const trn_comm_unique_id_t &id, uint32_t r, RankResources *res, trn_comm_t *comm,
                   uint64_t timeout_ns = 30'000'000'000ull, uint64_t chunk_bytes = 4096,
                   trn_result_t *result = nullptr) const {
    enter(r);
    return join_rank_on(id, r, ranks(), r % per_host, chunk_bytes, timeout_ns, res, comm, result);
  }
};

// The process's handlers for the signals libfabric's libraries like to take (not SIGBUS, which
// the simulated device takes itself when it maps its memory).
std::vector<void *> signal_handlers() {
  std::vector<void *> out;
  for (int s : {SIGINT, SIGTERM, SIGQUIT, SIGILL, SIGABRT, SIGFPE, SIGSEGV}) {
    struct sigaction sa {};
    sigaction(s, nullptr, &sa);
    out.push_back(reinterpret_cast<void *>(sa.sa_handler));
  }
  return out;
}

// In a rank's process before it joins: rxm over TCP (which trn's default limit is for) and the
// eager limit `value`, or none (trn's default).
void use_eager_limit(const char *value) {
  setenv("FI_PROVIDER", "tcp", 1);
  if (value)
    setenv("FI_OFI_RXM_EAGER_LIMIT", value, 1);
  else
    unsetenv("FI_OFI_RXM_EAGER_LIMIT");
}

// In a rank's process: runs every spec in order (unless `why` already says what went wrong),
// destroys the communicator and closes the rank; returns the first failure.
std::string run_all(RankResources &res, trn_comm_t comm, uint32_t r, uint32_t n,
                    const std::vector<CaseSpec> &specs, std::string why = "") {
  for (const CaseSpec &spec : specs) {
    if (!why.empty()) break;
    why = run_case(res, comm, r, n, spec);
  }
  if (trn_comm_destroy(comm) != TRN_SUCCESS && why.empty()) why = comm_error();
  res.close();
  return why;
}

}  // namespace

TEST_CASE("every collective and dtype across two simulated hosts", "[comm][hosts]") {
  SimEnv env;
  const uint32_t per_host = GENERATE(1u, 2u);
  const Hosts hosts(env, 2, per_host);
  const uint32_t n = hosts.ranks();
  // One element, a size that does not divide by the ranks, and many chunks.
  auto specs = every_case(n - 1, {1, 2601}, [](trn_dtype_t t) {
    return t == TRN_DTYPE_BF16 ? TRN_COMM_MAX : TRN_COMM_SUM;
  });
  // A large all-reduce, whose chunks fill every slot of the outboxes many times over.
  CaseSpec large;
  large.count = 200'001;
  specs.push_back(large);
  trn_comm_unique_id_t id{};
  REQUIRE(trn_comm_get_unique_id(&id) == TRN_SUCCESS);
  std::vector<Forked> children;
  for (uint32_t r = 0; r < n; ++r)
    children.push_back(fork_rank([&, r]() -> std::string {
      RankResources res;
      trn_comm_t comm = nullptr;
      const std::vector<void *> handlers = signal_handlers();
      if (auto why = hosts.join(id, r, &res, &comm); !why.empty()) return why;
      trn_comm_info_t info = TRN_COMM_INFO_INIT;
      trn_comm_get_info(comm, &info);
      std::string why;
      if (std::string(info.transport).find("fabric") == std::string::npos)
        why = std::string("the transport is '") + info.transport + "', not the fabric";
      // libfabric is loaded now; the program's signal handlers stay its own.
      if (why.empty() && signal_handlers() != handlers)
        why = "opening the fabric replaced the program's signal handlers";
      if (why.empty() && (info.processes != n || info.devices != 2))
        why = "the communicator counts " + std::to_string(info.processes) + " processes and " +
              std::to_string(info.devices) + " devices";
      return run_all(res, comm, r, n, specs, why);
    }));
  for (const auto &f : reap(children, 240'000)) FAIL_CHECK(f);
}

TEST_CASE("chunks sent from where they are: every collective in and out of place across hosts",
          "[comm][hosts]") {
  // 64 KiB chunks, which the proxy sends from the operation's own memory (TRN_COMM_SEND_IN_PLACE=0:
  // through the outbox, as a reference). Sizes that take several chunks per transfer: recursive
  // doubling in place reduces into the bytes it sends, and rings overwrite blocks they sent, so
  // every write waits for the sends it would overwrite.
  const char *in_place = GENERATE("1", "0");
  const uint32_t per_host = GENERATE(1u, 2u);
  SimEnv env;
  const Hosts hosts(env, 2, per_host);
  const uint32_t n = hosts.ranks();
  auto specs = every_case(n - 1, {150'001}, [](trn_dtype_t t) {
    return t == TRN_DTYPE_BF16 ? TRN_COMM_MAX : TRN_COMM_SUM;
  });
  CaseSpec ring;  // an all-reduce above the recursive-doubling limit, in place
  ring.count = 300'007;
  ring.in_place = true;
  specs.push_back(ring);
  trn_comm_unique_id_t id{};
  REQUIRE(trn_comm_get_unique_id(&id) == TRN_SUCCESS);
  std::vector<Forked> children;
  for (uint32_t r = 0; r < n; ++r)
    children.push_back(fork_rank([&, r]() -> std::string {
      setenv("TRN_COMM_SEND_IN_PLACE", in_place, 1);
      RankResources res;
      trn_comm_t comm = nullptr;
      if (auto why = hosts.join(id, r, &res, &comm, 30'000'000'000ull, 64 << 10); !why.empty())
        return why;
      return run_all(res, comm, r, n, specs);
    }));
  for (const auto &f : reap(children, 240'000)) FAIL_CHECK(f);
}

TEST_CASE("a host killed mid-operation fails the ranks on the other host, naming it",
          "[comm][hosts][failure]") {
  SimEnv env;
  const Hosts hosts(env, 2, 2);
  const uint32_t n = hosts.ranks();
  trn_comm_unique_id_t id{};
  REQUIRE(trn_comm_get_unique_id(&id) == TRN_SUCCESS);
  kill_mid_collective(
      n, {2, 3}, 1 << 20,  // host1: ranks 2 and 3
      [&](uint32_t r, RankResources *res, trn_comm_t *comm) {
        return hosts.join(id, r, res, comm, 20'000'000'000ull);
      },
      [](const std::string &error) -> std::string {
        if (error.find("host1") == std::string::npos ||
            (error.find("rank 2") == std::string::npos &&
             error.find("rank 3") == std::string::npos))
          return "the error names neither host1 nor its ranks";
        return "";
      });
}

TEST_CASE("a rank that leaves once its part is done does not fail a peer that reads its data later",
          "[comm][hosts]") {
  // Rank 1 sends a chunk per slot and destroys its communicator, which waits only for its own
  // work. Rank 0's receives are held back until then, and go one at a time: the credits it
  // returns for the chunks it reads meet a closed connection, which is no failure.
  SimEnv env;
  const Hosts hosts(env, 2, 1);
  trn_comm_unique_id_t id{};
  REQUIRE(trn_comm_get_unique_id(&id) == TRN_SUCCESS);
  const std::string departed = env.root() + "/departed";
  constexpr uint32_t kChunks = 4;                    // the slots
  constexpr uint64_t kCount = 4096 / sizeof(float);  // a 4 KiB chunk each
  std::vector<Forked> children;
  for (uint32_t r = 0; r < 2; ++r)
    children.push_back(fork_rank([&, r]() -> std::string {
      RankResources res;
      trn_comm_t comm = nullptr;
      if (auto why = hosts.join(id, r, &res, &comm); !why.empty()) return why;
      trn_mem_t buf = nullptr;
      const uint64_t bytes = kChunks * kCount * sizeof(float);
      if (trn_mem_alloc(res.pool, bytes, 0, TRN_MEM_CATEGORY_TENSORS, 0, &buf) != TRN_SUCCESS)
        return "trn_mem_alloc: " + std::string(trn_last_error());
      std::vector<float> data(kChunks * kCount);
      for (uint64_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) + 0.5f;
      std::string why;
      if (r == 1) {
        if (trn_mem_write(buf, 0, data.data(), bytes) != TRN_SUCCESS) return trn_last_error();
        for (uint32_t c = 0; c < kChunks && why.empty(); ++c)
          if (trn_comm_send(comm, res.queue, {buf, c * kCount * sizeof(float)}, kCount,
                            TRN_DTYPE_F32, 0, nullptr, nullptr) != TRN_SUCCESS)
            why = "rank 1: trn_comm_send: " + comm_error();
        if (why.empty() && (trn_comm_synchronize(comm, 20'000'000'000ull) != TRN_SUCCESS ||
                            trn_comm_destroy(comm) != TRN_SUCCESS))
          why = "rank 1: " + comm_error();
        std::ofstream(departed) << "gone\n";
        res.close();
        return why;
      }
      trn_sem_t gate = nullptr;
      const trn_sem_desc_t gate_desc = TRN_SEM_DESC_INIT;
      if (trn_sem_create(res.device, &gate_desc, &gate) != TRN_SUCCESS)
        return "trn_sem_create: " + std::string(trn_last_error());
      std::vector<trn_sem_point_t> opens;
      for (uint32_t c = 0; c < kChunks; ++c) opens.push_back({gate, c + 1});
      for (uint32_t c = 0; c < kChunks && why.empty(); ++c) {
        const trn_sync_t held{&opens[c], 1, nullptr, 0};
        if (trn_comm_recv(comm, res.queue, {buf, c * kCount * sizeof(float)}, kCount, TRN_DTYPE_F32,
                          1, &held, nullptr) != TRN_SUCCESS)
          why = "rank 0: trn_comm_recv: " + comm_error();
      }
      // Rank 1 is gone (bounded): its end of the connection has reached this rank by then.
      for (int i = 0; i < 3000 && access(departed.c_str(), F_OK) != 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      for (uint32_t c = 0; c < kChunks; ++c) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        trn_sem_signal(gate, c + 1);  // a credit each, sent on its own
      }
      std::vector<float> got(data.size());
      if (why.empty() && trn_comm_synchronize(comm, 20'000'000'000ull) != TRN_SUCCESS)
        why = "rank 0: trn_comm_synchronize: " + comm_error();
      else if (why.empty() &&
               (trn_mem_read(buf, 0, got.data(), bytes) != TRN_SUCCESS || got != data))
        why = "rank 0: the data received is not what rank 1 sent";
      // The last credits go out on the proxy's thread: give them time to meet the connection.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (why.empty() && trn_comm_get_error(comm) != TRN_SUCCESS)
        why = "rank 0: the communicator failed: " + comm_error();
      if (trn_comm_destroy(comm) != TRN_SUCCESS && why.empty())
        why = "rank 0: trn_comm_destroy: " + comm_error();
      trn_sem_destroy(gate);
      res.close();
      return why;
    }));
  for (const auto &f : reap(children, 120'000)) FAIL_CHECK(f);
}

TEST_CASE(
    "over TCP the default provider is net and FI_PROVIDER=tcp picks rxm and ranks may not mix them",
    "[comm][hosts]") {
  // libfabric 1.17 lists rxm over tcp first and net (reliable datagrams over TCP itself) too:
  // trn takes net unless FI_PROVIDER names one. The two speak different protocols, so ranks
  // that differ are refused at init, on every rank, naming both. With one device per host the
  // default chunk is 512 KiB.
  struct Scenario {
    const char *rank0, *rank1;
    trn_result_t result;
    std::vector<const char *> parts;  // of the transport, or of the refusal
  };
  const Scenario s =
      GENERATE(Scenario{nullptr, nullptr, TRN_SUCCESS, {"fabric (net)"}},
               Scenario{"tcp", "tcp", TRN_SUCCESS, {"fabric (tcp;ofi_rxm)"}},
               Scenario{nullptr,
                        "tcp",
                        TRN_ERROR_INVALID_CONFIG,
                        {"uses libfabric's net but rank 1", "uses tcp;ofi_rxm", "same provider"}});
  SimEnv env;
  const Hosts hosts(env, 2, 1);
  trn_comm_unique_id_t id{};
  REQUIRE(trn_comm_get_unique_id(&id) == TRN_SUCCESS);
  CaseSpec spec;
  spec.count = 700'001;  // several 512 KiB chunks each way and a short one
  std::vector<Forked> children;
  for (uint32_t r = 0; r < 2; ++r)
    children.push_back(fork_rank([&, r]() -> std::string {
      const char *provider = r == 0 ? s.rank0 : s.rank1;
      if (provider)
        setenv("FI_PROVIDER", provider, 1);
      else
        unsetenv("FI_PROVIDER");
      RankResources res;
      trn_comm_t comm = nullptr;
      trn_result_t result = TRN_SUCCESS;
      const std::string message = hosts.join(id, r, &res, &comm, 30'000'000'000ull, 0, &result);
      if (result != s.result) {
        res.close();
        return std::string("trn_comm_init_rank gave ") + trn_result_name(result) + ": " + message;
      }
      if (result != TRN_SUCCESS) {
        res.close();
        for (const char *part : s.parts)
          if (message.find(part) == std::string::npos)
            return "the message does not say '" + std::string(part) + "': " + message;
        return "";
      }
      trn_comm_info_t info = TRN_COMM_INFO_INIT;
      std::string why;
      if (trn_comm_get_info(comm, &info) != TRN_SUCCESS) why = comm_error();
      if (why.empty() && std::string(info.transport) != s.parts[0])
        why = std::string("the transport is '") + info.transport + "', not '" + s.parts[0] + "'";
      if (why.empty() && info.chunk_bytes != 512u << 10)
        why = "the default chunk is " + std::to_string(info.chunk_bytes) + " bytes, not 512 KiB";
      if (why.empty()) why = run_case(res, comm, r, 2, spec);
      if (trn_comm_destroy(comm) != TRN_SUCCESS && why.empty()) why = comm_error();
      res.close();
      return why;
    }));
  for (const auto &f : reap(children, 120'000)) FAIL_CHECK(f);
}

TEST_CASE("libfabric's eager limit becomes the 1 MiB chunk unless the user set it",
          "[comm][hosts]") {
  // Unset, trn's 1 MiB chunks go eagerly; the user's 64 KiB sends them by the provider's
  // rendezvous. Either way the result is exact and the variable is what the provider read.
  const char *user = GENERATE(static_cast<const char *>(nullptr), "65536");
  SimEnv env;
  const Hosts hosts(env, 2, 1);
  trn_comm_unique_id_t id{};
  REQUIRE(trn_comm_get_unique_id(&id) == TRN_SUCCESS);
  CaseSpec spec;
  spec.count = 700'001;  // whole 1 MiB chunks and a short one
  std::vector<Forked> children;
  for (uint32_t r = 0; r < 2; ++r)
    children.push_back(fork_rank([&, r]() -> std::string {
      use_eager_limit(user);
      RankResources res;
      trn_comm_t comm = nullptr;
      if (auto why = hosts.join(id, r, &res, &comm, 30'000'000'000ull, 1u << 20); !why.empty())
        return why;
      std::string why = run_case(res, comm, r, 2, spec);
      const char *limit = getenv("FI_OFI_RXM_EAGER_LIMIT");
      const std::string want = user ? user : "1048576";
      if (why.empty() && (!limit || want != limit))
        why = "FI_OFI_RXM_EAGER_LIMIT is " + std::string(limit ? limit : "unset") + ", not " + want;
      if (trn_comm_destroy(comm) != TRN_SUCCESS && why.empty()) why = comm_error();
      res.close();
      return why;
    }));
  for (const auto &f : reap(children, 120'000)) FAIL_CHECK(f);
}

TEST_CASE("eager limits that differ or are no size are refused at init on every rank",
          "[comm][hosts]") {
  // Mixed limits stall the first large transfer until the timeout (a message sent eagerly is
  // never matched), and rxm reads "-5" as a huge limit: refused at once instead, on every rank.
  struct Scenario {
    const char *rank0, *rank1;
    trn_result_t result;
    std::vector<const char *> parts;
  };
  const Scenario s = GENERATE(
      Scenario{nullptr,
               "65536",
               TRN_ERROR_INVALID_CONFIG,
               {"FI_OFI_RXM_EAGER_LIMIT=1048576", "FI_OFI_RXM_EAGER_LIMIT=65536", "rank 1",
                "alike on every host"}},
      Scenario{
          "-5", "-5", TRN_ERROR_INVALID_CONFIG, {"FI_OFI_RXM_EAGER_LIMIT='-5' is not a size"}});
  SimEnv env;
  const Hosts hosts(env, 2, 1);
  trn_comm_unique_id_t id{};
  REQUIRE(trn_comm_get_unique_id(&id) == TRN_SUCCESS);
  std::vector<Forked> children;
  for (uint32_t r = 0; r < 2; ++r)
    children.push_back(fork_rank([&, r]() -> std::string {
      use_eager_limit(r == 0 ? s.rank0 : s.rank1);
      RankResources res;
      trn_comm_t comm = nullptr;
      trn_result_t result = TRN_SUCCESS;
      const std::string message = hosts.join(id, r, &res, &comm, 30'000'000'000ull, 4096, &result);
      res.close();
      if (result != s.result)
        return std::string("trn_comm_init_rank gave ") + trn_result_name(result) + ": " + message;
      for (const char *part : s.parts)
        if (message.find(part) == std::string::npos)
          return "the message does not say '" + std::string(part) + "': " + message;
      return "";
    }));
  for (const auto &f : reap(children, 120'000)) FAIL_CHECK(f);
}

TEST_CASE("communicators opened one after another across hosts connect their ranks once",
          "[comm][hosts][stress]") {
  // Each split opens new fabric endpoints, and an all-to-all as its first operation has every
  // pair of ranks on different hosts send to each other at once. Were both to connect, the
  // provider (tcp;ofi_rxm) would settle the collision by closing one connection, failing a
  // message already on it now and then ("Transport endpoint is not connected"): rare, so the
  // provider's own log of its connection requests is checked too. Bounded in time.
  SimEnv env;
  const Hosts hosts(env, 2, 2);
  const uint32_t n = hosts.ranks();
  trn_comm_unique_id_t id{};
  REQUIRE(trn_comm_get_unique_id(&id) == TRN_SUCCESS);
  CaseSpec spec;
  spec.collective = Collective::all_to_all;
  spec.count = 4 * 1024;
  constexpr int kRounds = 12;
  auto log_of = [&](uint32_t r) { return env.root() + "/fabric-log-" + std::to_string(r); };
  std::vector<Forked> children;
  for (uint32_t r = 0; r < n; ++r)
    children.push_back(fork_rank([&, r]() -> std::string {
      // Read when the provider loads, which in this child is at the join.
      setenv("FI_LOG_LEVEL", "info", 1);
      setenv("FI_LOG_SUBSYS", "ep_ctrl", 1);
      const int fd = open(log_of(r).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd < 0 || dup2(fd, STDERR_FILENO) < 0) return "redirecting stderr failed";
      close(fd);
      RankResources res;
      trn_comm_t comm = nullptr;
      if (auto why = hosts.join(id, r, &res, &comm); !why.empty()) return why;
      std::string why;
      for (int round = 0; round < kRounds && why.empty(); ++round) {
        trn_comm_t split = nullptr;
        if (trn_comm_split(comm, 0, static_cast<int32_t>(r), &split) != TRN_SUCCESS) {
          why = "split " + std::to_string(round) + ": " + comm_error();
          break;
        }
        why = run_case(res, split, r, n, spec);
        if (!why.empty()) why = "round " + std::to_string(round) + ": " + why;
        if (trn_comm_destroy(split) != TRN_SUCCESS && why.empty()) why = comm_error();
      }
      if (trn_comm_destroy(comm) != TRN_SUCCESS && why.empty()) why = comm_error();
      res.close();
      return why;
    }));
  for (const auto &f : reap(children, 120'000)) FAIL_CHECK(f);
  size_t requests = 0;
  for (uint32_t r = 0; r < n; ++r) {
    std::ifstream in(log_of(r));
    for (std::string line; std::getline(in, line);) {
      if (line.find("connreq for") != std::string::npos) ++requests;
      INFO("rank " << r << ": " << line);
      CHECK(line.find("simultaneous") == std::string::npos);
    }
  }
  // This process loaded the provider before (its log settings were read then), or a provider
  // that words its log otherwise: only the transfers were checked.
  if (requests == 0) WARN("the provider logged no connection requests");
}
