// trn-comm-test: measures and checks collectives, as nccl-tests and nccom-test do. Ranks are
// threads of this process (default), forked processes (--processes), or, under torchrun's
// variables (RANK, WORLD_SIZE, ...), the processes of that world. Prints a table of host and
// simulated device times and bandwidths per size with the count of wrong elements, or JSON lines.
//
// Exit codes: 0 every result right, 1 some elements wrong, 2 any other error.
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/parse.hpp"
#include "rank_bench.hpp"
#include "report.hpp"
#include "sim_hosts.hpp"
#include "tool_common/cli_checks.hpp"
#include "tool_common/cli_parse.hpp"
#include "tool_common/clock.hpp"
#include "tool_common/cpus.hpp"

namespace {

using namespace trn::comm_test;

constexpr int kExitOk = 0;
constexpr int kExitWrong = 1;
constexpr int kExitError = 2;

struct Options {
  Settings settings;
  uint32_t ranks = 2;
  bool ranks_given = false;
  bool processes = false;
  uint32_t hosts = 1;         // simulated hosts of --processes, a TRN_SIM_ROOT each
  std::string bind = "auto";  // --bind: core, none, or auto (core when every rank has one)
  bool json = false;
};

struct ToolError {
  std::string message;
};

void check(trn_result_t result, const std::string &what) {
  if (result != TRN_SUCCESS)
    throw ToolError{what + ": " + trn_result_name(result) + ": " + trn_last_error()};
}

struct Place {
  trn_device_t device;
  trn_core_t core;
};

// Every visible core of every device, in order: rank r runs on the r-th.
std::vector<Place> visible_cores() {
  uint32_t count = 0;
  check(trn_device_get(&count, nullptr), "counting devices");
  std::vector<trn_device_t> devices(count);
  check(trn_device_get(&count, devices.data()), "listing devices");
  std::vector<Place> cores;
  for (trn_device_t device : devices) {
    uint32_t n = 0;
    check(trn_core_get(device, &n, nullptr), "counting cores");
    std::vector<trn_core_t> list(n);
    check(trn_core_get(device, &n, list.data()), "listing cores");
    for (trn_core_t core : list) cores.push_back({device, core});
  }
  return cores;
}

std::vector<Place> cores_for(uint32_t ranks) {
  std::vector<Place> cores = visible_cores();
  if (cores.size() < ranks)
    throw ToolError{"--ranks " + std::to_string(ranks) + " needs " + std::to_string(ranks) +
                    " cores, one per rank; " + std::to_string(cores.size()) +
                    " are visible (TRN_SIM_DEVICES=N simulates N devices; TRN_VISIBLE_CORES "
                    "may hide some)"};
  cores.resize(ranks);
  return cores;
}

void print(const Options &o, const RunInfo &info, const std::vector<Row> &rows) {
  const std::string text =
      o.json ? json_lines(o.settings, info, rows) : table_text(o.settings, info, rows);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

int exit_code(const std::vector<Row> &rows) {
  for (const Row &r : rows)
    if (r.wrong) return kExitWrong;
  return kExitOk;
}

// What the table's header and the JSON rows say about the run, from rank 0's communicator.
RunInfo run_info(trn_comm_t comm, const char *mode, uint32_t hosts) {
  trn_comm_info_t info = TRN_COMM_INFO_INIT;
  trn_comm_get_info(comm, &info);
  return {info.size, info.processes, hosts, mode, info.transport};
}

trn_comm_desc_t comm_desc(const Options &o) {
  trn_comm_desc_t desc = TRN_COMM_DESC_INIT;
  desc.timeout_ns = o.settings.timeout_ns;
  return desc;
}

// Every rank a thread of this process, through trn_comm_init_all.
int run_threads(const Options &o) {
  const std::vector<Place> places = cores_for(o.ranks);
  std::vector<trn_core_t> cores;
  for (const Place &p : places) cores.push_back(p.core);
  std::vector<trn_comm_t> comms(o.ranks);
  const trn_comm_desc_t desc = comm_desc(o);
  if (trn_comm_init_all(o.ranks, cores.data(), &desc, comms.data()) != TRN_SUCCESS)
    throw ToolError{std::string("making the communicator: ") + trn_comm_last_error()};
  std::vector<std::vector<Row>> rows(o.ranks);
  std::vector<std::string> errors(o.ranks);
  const RunInfo info = run_info(comms[0], "threads", 1);
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < o.ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        rows[r] = run_rank(o.settings, {places[r].device, cores[r], comms[r], r, o.ranks});
      } catch (const RankError &e) {
        errors[r] = e.message;
        trn_comm_abort(comms[r]);  // the others fail now instead of at their timeout
        comms[r] = nullptr;
      }
    });
  for (auto &t : threads) t.join();
  for (trn_comm_t comm : comms) trn_comm_destroy(comm);
  bool failed = false;
  for (uint32_t r = 0; r < o.ranks; ++r)
    if (!errors[r].empty()) {
      std::fprintf(stderr, "trn-comm-test: rank %u: %s\n", r, errors[r].c_str());
      failed = true;
    }
  if (failed) return kExitError;
  print(o, info, rows[0]);
  return exit_code(rows[0]);
}

// One rank in this process: rank 0 prints. Returns the exit code.
int run_one_rank(const Options &o, const char *mode, uint32_t hosts, const Place &place,
                 trn_comm_t comm, uint32_t rank) {
  int code = kExitOk;
  const RunInfo info = run_info(comm, mode, hosts);
  try {
    const std::vector<Row> rows =
        run_rank(o.settings, {place.device, place.core, comm, rank, info.ranks});
    if (rank == 0) {
      print(o, info, rows);
      code = exit_code(rows);
    }
    trn_comm_destroy(comm);
  } catch (const RankError &e) {
    std::fprintf(stderr, "trn-comm-test: rank %u: %s\n", rank, e.message.c_str());
    trn_comm_abort(comm);
    code = kExitError;
  }
  return code;
}

// The unique id, made by rank 0's process and passed to the others through a pipe: the parent
// forks before any thread exists (a child forked beside a running thread may inherit a lock
// that thread held, in the allocator or elsewhere, and never get it).
trn_comm_unique_id_t share_unique_id(uint32_t r, uint32_t ranks, const int pipe_fds[2],
                                     uint64_t timeout_ns) {
  trn_comm_unique_id_t id{};
  if (r == 0) {
    close(pipe_fds[0]);
    if (trn_comm_get_unique_id(&id) != TRN_SUCCESS)
      throw ToolError{std::string("making a unique id: ") + trn_comm_last_error()};
    for (uint32_t i = 1; i < ranks; ++i)
      if (write(pipe_fds[1], &id, sizeof id) != static_cast<ssize_t>(sizeof id))
        throw ToolError{"passing the unique id to the other ranks failed"};
    close(pipe_fds[1]);
    return id;
  }
  close(pipe_fds[1]);
  pollfd p{pipe_fds[0], POLLIN, 0};
  const int ms = static_cast<int>(std::min<uint64_t>(timeout_ns / 1'000'000, INT32_MAX));
  // One id per read: a pipe hands out writes of up to PIPE_BUF bytes whole.
  if (poll(&p, 1, ms) != 1 || read(pipe_fds[0], &id, sizeof id) != static_cast<ssize_t>(sizeof id))
    throw ToolError{"rank 0 did not pass the unique id (it failed before, see its message)"};
  close(pipe_fds[0]);
  return id;
}

// Child r of --processes: joins through rank 0's unique id. With simulated hosts it is on
// host r / (ranks / hosts), whose TRN_SIM_ROOT is `roots[host]`, on that host's cores.
int process_rank(const Options &o, const int id_pipe[2], uint32_t r,
                 const std::vector<std::string> &roots) {
  int code = kExitError;
  try {
    const trn_comm_unique_id_t id = share_unique_id(r, o.ranks, id_pipe, o.settings.timeout_ns);
    const uint32_t per_host = o.ranks / o.hosts;
    if (o.hosts > 1) setenv("TRN_SIM_ROOT", roots[r / per_host].c_str(), 1);
    const uint32_t local = o.hosts > 1 ? r % per_host : r;
    const std::vector<Place> cores = cores_for(local + 1);
    trn_comm_desc_t desc = comm_desc(o);
    desc.core = cores[local].core;
    desc.rank = r;
    desc.size = o.ranks;
    trn_comm_t comm = nullptr;
    if (trn_comm_init_rank(&id, &desc, &comm) != TRN_SUCCESS)
      throw ToolError{std::string("joining the communicator: ") + trn_comm_last_error()};
    code = run_one_rank(o, "processes", o.hosts, cores[local], comm, r);
  } catch (const ToolError &e) {
    std::fprintf(stderr, "trn-comm-test: rank %u: %s\n", r, e.message.c_str());
  }
  trn_runtime_shutdown();
  return code;
}

// Like mpirun's default for a few ranks: rank r on the r-th allowed CPU, when each rank can have
// one (--bind auto) or always (--bind core). Freshly forked ranks otherwise often share a core
// for the first milliseconds or longer, and operations timed then read several times slower.
void bind_rank(const Options &o, uint32_t r) {
  const std::vector<int> cpus = trn::tools::allowed_cpus();
  if (o.bind == "none" || cpus.empty() || (o.bind == "auto" && o.ranks > cpus.size())) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpus[r % cpus.size()], &set);
  sched_setaffinity(0, sizeof set, &set);  // a hint: a refusal leaves the rank unbound
}

// One process per rank (rank 0's serves the rendezvous). The parent only waits: once a rank fails,
// the others get the communicator's timeout and a few seconds to follow before they are killed.
int run_processes(const Options &o) {
  if (o.ranks % o.hosts != 0)
    throw ToolError{"--ranks " + std::to_string(o.ranks) + " do not split evenly over --hosts " +
                    std::to_string(o.hosts)};
  SimulatedHosts hosts(o.hosts);
  // Refuse too many ranks here, once, rather than in every child.
  if (o.hosts > 1) setenv("TRN_SIM_ROOT", hosts.roots()[0].c_str(), 1);
  cores_for(o.ranks / o.hosts);
  trn_runtime_shutdown();  // the children start their own runtimes
  int id_pipe[2];
  if (pipe(id_pipe) != 0) throw ToolError{"pipe failed"};
  std::fflush(stdout);
  std::fflush(stderr);
  std::map<pid_t, uint32_t> children;
  for (uint32_t r = 0; r < o.ranks; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      for (const auto &[child, rank] : children) kill(child, SIGKILL);
      close(id_pipe[0]);
      close(id_pipe[1]);
      throw ToolError{"fork failed"};
    }
    if (pid == 0) {
      bind_rank(o, r);
      _exit(process_rank(o, id_pipe, r, hosts.roots()));
    }
    children.emplace(pid, r);
  }
  close(id_pipe[0]);
  close(id_pipe[1]);
  int worst = kExitOk;
  auto kill_at = std::chrono::steady_clock::time_point::max();  // none yet
  while (!children.empty()) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0 && children.count(pid)) {
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : kExitError;
      if (!WIFEXITED(status))
        std::fprintf(stderr, "trn-comm-test: rank %u ended by signal %d\n", children[pid],
                     WTERMSIG(status));
      worst = std::max(worst, code);
      if (code == kExitError && kill_at == std::chrono::steady_clock::time_point::max())
        kill_at = trn::tools::steady_deadline(wait_ns(o.settings));
      children.erase(pid);
      continue;
    }
    if (std::chrono::steady_clock::now() > kill_at) {
      for (const auto &[child, rank] : children) {
        std::fprintf(stderr, "trn-comm-test: rank %u did not end after another failed; killed\n",
                     rank);
        kill(child, SIGKILL);
      }
      kill_at = std::chrono::steady_clock::time_point::max();
    }
    poll(nullptr, 0, 5);
  }
  return worst;
}

// A rank of the world torchrun's variables describe; its core is the LOCAL_RANK-th visible one.
int run_torchrun(const Options &o) {
  const auto world = trn::common::parse_uint(std::getenv("WORLD_SIZE"));
  const auto rank = trn::common::parse_uint(std::getenv("RANK"));
  if (!world || !rank || *world == 0 || *rank >= *world)
    throw ToolError{"RANK and WORLD_SIZE must be numbers with RANK < WORLD_SIZE (they are '" +
                    std::string(std::getenv("RANK")) + "' and '" + std::getenv("WORLD_SIZE") +
                    "')"};
  if (o.ranks_given && o.ranks != *world)
    throw ToolError{"--ranks " + std::to_string(o.ranks) + " differs from torchrun's WORLD_SIZE " +
                    std::to_string(*world) + "; leave --ranks out under torchrun"};
  if (o.processes)
    throw ToolError{
        "--processes forks ranks itself; under torchrun every process is a rank "
        "already, so leave it out"};
  const char *local_text = std::getenv("LOCAL_RANK");
  const auto local = local_text ? trn::common::parse_uint(local_text) : rank;
  if (!local) throw ToolError{std::string("LOCAL_RANK '") + local_text + "' is not a number"};
  const std::vector<Place> cores = visible_cores();
  if (*local >= cores.size())
    throw ToolError{"LOCAL_RANK " + std::to_string(*local) + " needs " +
                    std::to_string(*local + 1) + " visible cores (one per rank of the host), but " +
                    std::to_string(cores.size()) +
                    " are visible here (TRN_SIM_DEVICES=N simulates N devices; "
                    "TRN_VISIBLE_CORES may hide some): start at most that many ranks per host"};
  trn_comm_desc_t desc = comm_desc(o);
  desc.core = cores[*local].core;
  trn_comm_t comm = nullptr;
  if (trn_comm_init_from_env(&desc, &comm) != TRN_SUCCESS)
    throw ToolError{std::string("joining torchrun's world: ") + trn_comm_last_error()};
  trn_comm_info_t info = TRN_COMM_INFO_INIT;
  trn_comm_get_info(comm, &info);
  // torchrun's LOCAL_WORLD_SIZE gives the hosts; without it, 0 says they are not known.
  const auto per_host = trn::common::parse_uint(
      std::getenv("LOCAL_WORLD_SIZE") ? std::getenv("LOCAL_WORLD_SIZE") : "");
  const uint32_t hosts = per_host && *per_host ? static_cast<uint32_t>(*world / *per_host) : 0;
  return run_one_rank(o, "torchrun", hosts, cores[*local], comm, info.rank);
}

std::optional<trn_dtype_t> parse_dtype(const std::string &name) {
  static const std::map<std::string, trn_dtype_t> names = {
      {"f32", TRN_DTYPE_F32},   {"fp32", TRN_DTYPE_F32},      {"float32", TRN_DTYPE_F32},
      {"bf16", TRN_DTYPE_BF16}, {"bfloat16", TRN_DTYPE_BF16}, {"f16", TRN_DTYPE_F16},
      {"fp16", TRN_DTYPE_F16},  {"float16", TRN_DTYPE_F16},   {"i32", TRN_DTYPE_I32},
      {"int32", TRN_DTYPE_I32}};
  auto it = names.find(name);
  if (it == names.end()) return std::nullopt;
  return it->second;
}

CLI::Validator byte_count() {
  return CLI::Validator(
      [](std::string &text) -> std::string {
        const auto n = trn::common::parse_bytes(text);
        if (!n || *n == 0) return "'" + text + "' is not a byte count > 0 (8, 64K, 256MiB, 1G)";
        return {};
      },
      "BYTES");
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{
      "trn-comm-test: measure and check collectives on NeuronCores (nccl-tests' algbw and "
      "busbw).\nRanks are threads of this process, forked processes (--processes), or under "
      "torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) that world.\n"
      "Exit codes: 0 all results right, 1 some elements wrong, 2 error."};
  Options o;
  std::string op = "allr", dtype = "f32", redop = "sum", min_bytes = "8", max_bytes = "1M";
  double timeout_s = 60;
  app.add_option("--op,-o", op, "allr, allg, redsct, bcast, alltoall or sendrecv")
      ->check(CLI::IsMember({"allr", "allg", "redsct", "bcast", "alltoall", "sendrecv"}))
      ->capture_default_str();
  app.add_option("--ranks,-r", o.ranks, "ranks, one per visible core (default 2)")
      ->check(CLI::Range(1, 64));
  app.add_flag("--processes,-p", o.processes, "one forked process per rank (default: threads)");
  app.add_option("--bind", o.bind,
                 "with --processes: pin rank r to the r-th allowed CPU (core), or not (none); "
                 "auto pins when every rank has a CPU of its own, as mpirun does for a few ranks")
      ->check(CLI::IsMember({"auto", "core", "none"}))
      ->capture_default_str();
  app.add_option("--hosts", o.hosts,
                 "with --processes: simulated hosts, each its own TRN_SIM_ROOT, the ranks split "
                 "evenly over them and joined over libfabric (default 1)")
      ->check(CLI::Range(1, 64));
  app.add_option("--min-bytes,-b", min_bytes, "smallest size (8, 64K, 1M, ...)")
      ->check(byte_count())
      ->capture_default_str();
  app.add_option("--max-bytes,-e", max_bytes, "largest size")
      ->check(byte_count())
      ->capture_default_str();
  app.add_option("--step-factor,-f", o.settings.step_factor, "each size this times the last")
      ->check(CLI::Range(1.0, 1024.0))
      ->capture_default_str();
  app.add_option("--dtype,-d", dtype, "f32, bf16, f16 or i32")->capture_default_str();
  app.add_option("--redop", redop, "the reduction of allr and redsct: sum, max or min")
      ->check(CLI::IsMember({"sum", "max", "min"}))
      ->capture_default_str();
  app.add_option("--iters,-n", o.settings.iters, "timed iterations per size")
      ->check(CLI::Range(1, 1'000'000))
      ->capture_default_str();
  app.add_option("--warmup,-w", o.settings.warmup, "untimed iterations first")
      ->check(CLI::Range(0, 1'000'000))
      ->capture_default_str();
  app.add_option("--timeout", timeout_s,
                 "the communicator's rendezvous and per-operation deadline, seconds (default 60, "
                 "or TRN_COMM_TIMEOUT_MS when set)")
      ->check(trn::tools::positive_seconds())
      ->capture_default_str();
  app.add_flag("--json", o.json, "one JSON object per size instead of the table");
  app.set_version_flag("--version", std::string("trn-comm-test ") + trn_get_version_string());
  if (auto status = trn::tools::parse_command_line(app, "trn-comm-test", argc, argv))
    return *status;
  o.ranks_given = app.count("--ranks") > 0;
  o.settings.op = *parse_op(op);
  o.settings.redop = redop == "max" ? TRN_COMM_MAX : redop == "min" ? TRN_COMM_MIN : TRN_COMM_SUM;
  o.settings.min_bytes = *trn::common::parse_bytes(min_bytes);
  o.settings.max_bytes = *trn::common::parse_bytes(max_bytes);
  o.settings.timeout_ns = trn::tools::seconds_to_ns(timeout_s);
  int code = kExitOk;
  try {
    // The library's variable, as any program on libtrn_comm would read it, unless --timeout says
    // otherwise.
    if (const char *ms = std::getenv("TRN_COMM_TIMEOUT_MS"); ms && *ms && !app.count("--timeout")) {
      const auto value = trn::common::parse_uint(ms);
      if (!value || *value < 1 || *value > 86'400'000)
        throw ToolError{std::string("TRN_COMM_TIMEOUT_MS='") + ms +
                        "' is not a number of milliseconds from 1 to 86400000"};
      o.settings.timeout_ns = *value * 1'000'000;
    }
    const auto type = parse_dtype(dtype);
    if (!type) throw ToolError{"--dtype '" + dtype + "' is not one of f32, bf16, f16, i32"};
    o.settings.dtype = *type;
    const bool torchrun = std::getenv("RANK") && std::getenv("WORLD_SIZE");
    // One without the other is a launcher's mistake, not a request for the local mode.
    if (!torchrun && (std::getenv("RANK") || std::getenv("WORLD_SIZE")))
      throw ToolError{std::string(std::getenv("RANK") ? "RANK" : "WORLD_SIZE") + " is set but " +
                      (std::getenv("RANK") ? "WORLD_SIZE" : "RANK") +
                      " is not: set both to join a torchrun-style world, or neither to run "
                      "the ranks here"};
    if (o.settings.op == Op::send_recv && !torchrun && o.ranks < 2)
      throw ToolError{"sendrecv needs 2 ranks or more (--ranks): each rank sends to the next"};
    if (o.hosts > 1 && torchrun)
      throw ToolError{"--hosts " + std::to_string(o.hosts) +
                      " forks simulated hosts itself; under torchrun each process is a rank of "
                      "torchrun's world (give each host its own TRN_SIM_ROOT instead)"};
    if (o.hosts > 1 && !o.processes)
      throw ToolError{"--hosts " + std::to_string(o.hosts) +
                      " needs --processes (simulated hosts are separate processes)"};
    if (app.count("--bind") > 0 && !o.processes)
      throw ToolError{"--bind " + o.bind +
                      " needs --processes (the ranks of one process are its threads)"};
    if (app.count("--redop") > 0 && o.settings.op != Op::all_reduce &&
        o.settings.op != Op::reduce_scatter)
      throw ToolError{std::string("--redop applies to allr and redsct, not ") +
                      op_name(o.settings.op)};
    if (o.settings.min_bytes > o.settings.max_bytes)
      throw ToolError{"--min-bytes " + min_bytes + " is larger than --max-bytes " + max_bytes};
    if (torchrun)
      code = run_torchrun(o);
    else
      code = o.processes ? run_processes(o) : run_threads(o);
  } catch (const ToolError &e) {
    std::fprintf(stderr, "trn-comm-test: %s\n", e.message.c_str());
    code = kExitError;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "trn-comm-test: %s\n", e.what());
    code = kExitError;
  }
  trn_runtime_shutdown();
  return code;
}
