// trn-comm-test: every operation checked and measured on ranks as threads, as forked processes
// and as a torchrun world of two processes; the table and the JSON lines; refusals of bad
// arguments with exit code 2.

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/sim_env.hpp"
#include "support/subprocess.hpp"

using nlohmann::json;
using trn::test::SimEnv;

namespace {

constexpr int kTimeoutMs = 120000;

trn::test::ProgramResult comm_test(std::vector<std::string> args) {
  args.insert(args.begin(), TRN_COMM_TEST_PATH);
  return trn::test::run_program(args, kTimeoutMs);
}

// trn-comm-test all-reducing from 8 bytes to `max` in steps of 64 times, two timed operations
// after one warm-up, with JSON rows.
std::vector<std::string> allreduce_sweep(const std::string &max) {
  return {TRN_COMM_TEST_PATH,
          "--op",
          "allr",
          "-b",
          "8",
          "-e",
          max,
          "-f",
          "64",
          "-n",
          "2",
          "-w",
          "1",
          "--json"};
}

std::vector<json> rows_of(const std::string &output) {
  std::vector<json> rows;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] == '{') rows.push_back(json::parse(line));
  return rows;
}

// Two ranks run to the end: rank 0's output (only it prints), each exit code checked.
std::string finish_two_ranks(trn::test::Child &rank0, trn::test::Child &rank1) {
  std::string output;
  for (std::string line; !(line = rank0.read_line(kTimeoutMs)).empty();) output += line + "\n";
  CHECK(rank1.read_line(kTimeoutMs).empty());
  CHECK(rank0.wait(kTimeoutMs) == 0);
  CHECK(rank1.wait(kTimeoutMs) == 0);
  return output;
}

// Ranks 0 and 1 of torchrun's world (LOCAL_RANK as RANK) run `args` to the end.
std::string run_two_local_ranks(SimEnv &env, const std::vector<std::string> &args) {
  env.set("RANK", "0");
  env.set("LOCAL_RANK", "0");
  trn::test::Child rank0(args);
  env.set("RANK", "1");
  env.set("LOCAL_RANK", "1");
  trn::test::Child rank1(args);
  return finish_two_ranks(rank0, rank1);
}

}  // namespace

TEST_CASE("every operation and dtype on three ranks as threads, all elements right",
          "[trn-comm-test]") {
  SimEnv env;
  const std::string op = GENERATE("allr", "allg", "redsct", "bcast", "alltoall", "sendrecv");
  const std::string dtype = GENERATE("f32", "bf16", "f16", "i32");
  auto r = comm_test({"--op", op, "--dtype", dtype, "--ranks", "3", "-b", "7", "-e", "40000", "-f",
                      "10", "-n", "2", "-w", "1", "--json"});
  INFO(op << " " << dtype << "\n" << r.output);
  REQUIRE(r.code == 0);
  const auto rows = rows_of(r.output);
  REQUIRE(rows.size() == 5);  // 7, 70, 700, 7000 bytes and the maximum 40000
  for (const json &row : rows) {
    CHECK(row["op"] == op);
    CHECK(row["wrong"] == 0);
    CHECK(row["ranks"] == 3);
    CHECK(row["mode"] == "threads");
    CHECK(row["time_us"].get<double>() > 0);
    CHECK(row["sim_time_us"].get<double>() > 0);
    const double factor = op == "allr"                          ? 4.0 / 3
                          : (op == "bcast" || op == "sendrecv") ? 1
                                                                : 2.0 / 3;
    CHECK(row["busbw_gbps"].get<double>() ==
          Approx(row["algbw_gbps"].get<double>() * factor).epsilon(1e-9));
    // Whole elements, and for the block operations whole elements per rank.
    const uint64_t es = dtype == "bf16" || dtype == "f16" ? 2 : 4;
    CHECK(row["size"].get<uint64_t>() == row["count"].get<uint64_t>() * es);
    if (op == "allg" || op == "redsct" || op == "alltoall")
      CHECK(row["count"].get<uint64_t>() % 3 == 0);
  }
  CHECK(rows.back()["size"].get<uint64_t>() <= 40000);
}

TEST_CASE("the table names its columns and counts wrong elements", "[trn-comm-test]") {
  SimEnv env;
  auto r = comm_test({"--ranks", "2", "-b", "1K", "-e", "4K", "-n", "2", "-w", "0"});
  INFO(r.output);
  REQUIRE(r.code == 0);
  for (const char *column : {"size(B)", "count", "type", "redop", "time(us)", "algbw(GB/s)",
                             "busbw(GB/s)", "sim time(us)", "sim busbw(GB/s)", "#wrong"})
    CHECK(r.output.find(column) != std::string::npos);
  CHECK(r.output.find("| 1024 ") != std::string::npos);
  CHECK(r.output.find("| 4096 ") != std::string::npos);
  CHECK(r.output.find("# 0 wrong elements") != std::string::npos);
}

TEST_CASE("sizes that round to the same elements give one row each", "[trn-comm-test]") {
  SimEnv env;
  // 8 B * 1.1^k rounds down to whole f32 elements (and for allg to whole blocks of 3 ranks):
  // every row must be a size of its own, in increasing order.
  const std::string op = GENERATE("allr", "allg");
  auto r = comm_test({"--op", op, "--ranks", "3", "-b", "8", "-e", "64", "-f", "1.1", "-n", "1",
                      "-w", "0", "--json"});
  INFO(r.output);
  REQUIRE(r.code == 0);
  const auto rows = rows_of(r.output);
  REQUIRE(rows.size() >= 4);
  for (size_t i = 1; i < rows.size(); ++i)
    CHECK(rows[i]["size"].get<uint64_t>() > rows[i - 1]["size"].get<uint64_t>());
  CHECK(rows.back()["size"] == (op == "allr" ? 64 : 60));
}

TEST_CASE("max and min reductions are checked too", "[trn-comm-test]") {
  SimEnv env;
  const std::string redop = GENERATE("max", "min");
  auto r = comm_test({"--op", "allr", "--redop", redop, "--ranks", "3", "-b", "4K", "-e", "4K",
                      "-n", "1", "-w", "0", "--json"});
  INFO(r.output);
  REQUIRE(r.code == 0);
  const auto rows = rows_of(r.output);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0]["redop"] == redop);
  CHECK(rows[0]["wrong"] == 0);
}

TEST_CASE("with --processes every rank is a forked process", "[trn-comm-test]") {
  SimEnv env;
  auto r = comm_test({"--op", "allr", "--processes", "--ranks", "3", "-b", "8", "-e", "300K", "-f",
                      "64", "-n", "2", "-w", "1", "--json"});
  INFO(r.output);
  REQUIRE(r.code == 0);
  const auto rows = rows_of(r.output);
  REQUIRE(rows.size() == 4);  // 8 B, 512 B, 32 KiB (recursive doubling), 300 KiB (a ring)
  for (const json &row : rows) {
    CHECK(row["mode"] == "processes");
    CHECK(row["processes"] == 3);
    CHECK(row["wrong"] == 0);
  }
}

TEST_CASE("forked ranks are pinned to CPUs with --bind core or auto, or left alone with none",
          "[trn-comm-test]") {
  SimEnv env;
  // core with more ranks than CPUs shares them round robin; none pins nothing.
  for (const char *bind : {"core", "none", "auto"}) {
    auto r = comm_test({"--op", "allr", "--processes", "--ranks", "3", "--bind", bind, "-b", "8",
                        "-e", "8", "-n", "2", "-w", "1", "--json"});
    INFO(bind << ": " << r.output);
    REQUIRE(r.code == 0);
    const auto rows = rows_of(r.output);
    REQUIRE(rows.size() == 1);
    CHECK(rows[0]["wrong"] == 0);
  }
}

TEST_CASE("under torchrun's variables each process joins that world, rank 0 prints",
          "[trn-comm-test]") {
  SimEnv env;
  const std::string port = std::to_string(trn::test::free_port());
  env.set("WORLD_SIZE", "2");
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", port.c_str());
  std::vector<std::string> args = {TRN_COMM_TEST_PATH,
                                   "--op",
                                   "allg",
                                   "-b",
                                   "64",
                                   "-e",
                                   "64K",
                                   "-f",
                                   "32",
                                   "-n",
                                   "2",
                                   "-w",
                                   "1",
                                   "--json"};
  const std::string output = run_two_local_ranks(env, args);
  INFO(output);
  const auto rows = rows_of(output);
  REQUIRE(rows.size() == 3);
  for (const json &row : rows) {
    CHECK(row["mode"] == "torchrun");
    CHECK(row["ranks"] == 2);
    CHECK(row["processes"] == 2);
    CHECK(row["wrong"] == 0);
  }
  // Without LOCAL_WORLD_SIZE the hosts are not known, and the table's header says so.
  const std::vector<std::string> text = {
      TRN_COMM_TEST_PATH, "-b", "64", "-e", "64", "-n", "1", "-w", "0"};
  const std::string table = run_two_local_ranks(env, text);
  INFO(table);
  CHECK(table.find("2 processes, hosts unknown, transport device") != std::string::npos);
  // --processes makes no sense inside a world that already has its processes.
  auto refused = comm_test({"--processes"});
  CHECK(refused.code == 2);
  CHECK(refused.output.find("under torchrun") != std::string::npos);
}

TEST_CASE("with --hosts the processes are on simulated hosts joined over libfabric",
          "[trn-comm-test][heavy]") {
  SimEnv env;
  const std::string op = GENERATE("allr", "allg", "redsct", "bcast", "alltoall", "sendrecv");
  auto r = comm_test({"--op", op, "--processes", "--hosts", "2", "--ranks", "4", "-b", "100", "-e",
                      "3M", "-f", "30", "-n", "2", "-w", "1", "--json"});
  INFO(op << "\n" << r.output);
  REQUIRE(r.code == 0);
  const auto rows = rows_of(r.output);
  REQUIRE(rows.size() == 5);  // 100 B, 3000 B, 90000 B, 2700000 B and 3 MiB
  for (const json &row : rows) {
    CHECK(row["hosts"] == 2);
    CHECK(row["processes"] == 4);
    CHECK(row["transport"].get<std::string>().find("fabric") != std::string::npos);
    CHECK(row["wrong"] == 0);
  }
}

TEST_CASE("two simulated hosts under torchrun's variables, a TRN_SIM_ROOT each",
          "[trn-comm-test][heavy]") {
  SimEnv env;
  const std::string port = std::to_string(trn::test::free_port());
  env.set("WORLD_SIZE", "2");
  env.set("LOCAL_WORLD_SIZE", "1");
  env.set("LOCAL_RANK", "0");
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", port.c_str());
  const std::vector<std::string> args = allreduce_sweep("1M");
  std::vector<std::unique_ptr<trn::test::Child>> ranks;
  for (const char *rank : {"0", "1"}) {
    const std::string root = env.root() + "/host" + rank;
    mkdir(root.c_str(), 0700);
    env.set("RANK", rank);
    env.set("TRN_SIM_ROOT", root.c_str());
    ranks.push_back(std::make_unique<trn::test::Child>(args));
  }
  const std::string output = finish_two_ranks(*ranks[0], *ranks[1]);
  INFO(output);
  const auto rows = rows_of(output);
  REQUIRE(rows.size() == 4);  // 8 B, 512 B, 32 KiB and 1 MiB
  for (const json &row : rows) {
    CHECK(row["mode"] == "torchrun");
    CHECK(row["hosts"] == 2);
    CHECK(row["transport"].get<std::string>().find("fabric") != std::string::npos);
    CHECK(row["wrong"] == 0);
  }
}

namespace {

// Two network namespaces joined by a veth pair, removed at the end. `ok` is false (and `why`
// says why) where the machine does not allow them (not root, no iproute2, no CAP_NET_ADMIN).
struct NetnsPair {
  std::string tool, a, b, veth_a, veth_b, ip_a, ip_b, why;
  bool ok = false;

  NetnsPair() {
    std::string ip;
    for (const char *path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
      if (access(path, X_OK) == 0) ip = path;
    if (ip.empty()) {
      why = "iproute2's ip is not installed";
      return;
    }
    tool = ip;
    const std::string id = std::to_string(getpid() % 100000);
    a = "trncA" + id;
    b = "trncB" + id;
    veth_a = "tva" + id;
    veth_b = "tvb" + id;
    const std::string net = "10.211." + std::to_string(getpid() % 250) + ".";
    ip_a = net + "1";
    ip_b = net + "2";
    const std::vector<std::vector<std::string>> steps = {
        {ip, "netns", "add", a},
        {ip, "netns", "add", b},
        {ip, "link", "add", veth_a, "netns", a, "type", "veth", "peer", "name", veth_b, "netns", b},
        {ip, "-n", a, "addr", "add", ip_a + "/24", "dev", veth_a},
        {ip, "-n", b, "addr", "add", ip_b + "/24", "dev", veth_b},
        {ip, "-n", a, "link", "set", veth_a, "up"},
        {ip, "-n", b, "link", "set", veth_b, "up"},
        {ip, "-n", a, "link", "set", "lo", "up"},
        {ip, "-n", b, "link", "set", "lo", "up"}};
    for (const auto &step : steps) {
      const auto r = trn::test::run_program(step, 10000);
      if (r.code != 0) {
        why = step[1] + " " + step[2] + ": " + r.output;
        return;
      }
    }
    // A fresh veth pair refuses libfabric's tcp connections (EINVAL) for about a second after
    // it comes up; wait that out with a margin.
    std::this_thread::sleep_for(std::chrono::seconds(3));
    ok = true;
  }
  ~NetnsPair() {
    if (!tool.empty())
      for (const std::string &ns : {a, b})
        trn::test::run_program({tool, "netns", "del", ns}, 10000);
  }
};

}  // namespace

TEST_CASE("two hosts in separate network namespaces joined by a veth pair",
          "[trn-comm-test][heavy]") {
  // The default provider over TCP (net) and the one FI_PROVIDER=tcp picks (rxm over tcp).
  const std::string provider = GENERATE(std::string("net"), std::string("tcp;ofi_rxm"));
  SimEnv env;
  NetnsPair net;
  if (!net.ok) {
    WARN("not run: this machine does not allow network namespaces (" << net.why << ")");
    return;
  }
  std::vector<std::unique_ptr<trn::test::Child>> ranks;
  for (int r = 0; r < 2; ++r) {
    const std::string root = env.root() + "/host" + std::to_string(r);
    mkdir(root.c_str(), 0700);
    std::vector<std::string> command = {net.tool, "netns", "exec", r == 0 ? net.a : net.b,
                                        "/usr/bin/env"};
    // env's options come before its variables: the test's own environment may name a provider.
    if (provider == "net")
      command.insert(command.end(), {"-u", "FI_PROVIDER"});
    else
      command.push_back("FI_PROVIDER=tcp");
    command.insert(command.end(), {"RANK=" + std::to_string(r), "WORLD_SIZE=2", "LOCAL_RANK=0",
                                   "LOCAL_WORLD_SIZE=1", "MASTER_ADDR=" + net.ip_a,
                                   "MASTER_PORT=29500", "TRN_SIM_ROOT=" + root});
    const std::vector<std::string> sweep = allreduce_sweep("4M");
    command.insert(command.end(), sweep.begin(), sweep.end());
    ranks.push_back(std::make_unique<trn::test::Child>(command));
  }
  const std::string output = finish_two_ranks(*ranks[0], *ranks[1]);
  INFO(output);
  const auto rows = rows_of(output);
  REQUIRE(rows.size() == 5);  // 8 B, 512 B, 32 KiB, 2 MiB and 4 MiB
  for (const json &row : rows) {
    CHECK(row["hosts"] == 2);
    CHECK(row["transport"] == "fabric (" + provider + ")");
    CHECK(row["wrong"] == 0);
  }
}

TEST_CASE("without --timeout TRN_COMM_TIMEOUT_MS is the deadline and a malformed one is refused",
          "[trn-comm-test]") {
  SimEnv env;
  const std::string port = std::to_string(trn::test::free_port());
  env.set("WORLD_SIZE", "2");
  env.set("RANK", "0");
  env.set("LOCAL_RANK", "0");
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", port.c_str());
  // Rank 1 never comes: rank 0 gives up at the variable's deadline, not the tool's 60 s.
  env.set("TRN_COMM_TIMEOUT_MS", "1500");
  auto r = comm_test({"-b", "8", "-e", "8", "-n", "1"});
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK(r.output.find("within 1500 ms") != std::string::npos);
  env.set("TRN_COMM_TIMEOUT_MS", "abc");
  r = comm_test({"-b", "8", "-e", "8", "-n", "1"});
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK(r.output.find("TRN_COMM_TIMEOUT_MS='abc'") != std::string::npos);
  // --hosts forks its own simulated hosts: not inside torchrun's world.
  env.set("TRN_COMM_TIMEOUT_MS", nullptr);
  r = comm_test({"--hosts", "2"});
  CHECK(r.code == 2);
  CHECK(r.output.find("under torchrun") != std::string::npos);
}

TEST_CASE("under torchrun a rank that stops taking part fails the other with the diagnosis",
          "[trn-comm-test][heavy]") {
  // The tool waits a little past the communicator's deadline: the failure is the
  // communicator's, naming the operation and the rank, not the wait's own timeout. The deadline
  // also bounds the rendezvous, which rank 1 reaches first: long enough for rank 0 to start on a
  // loaded machine.
  SimEnv env;
  const std::string port = std::to_string(trn::test::free_port());
  env.set("WORLD_SIZE", "2");
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", port.c_str());
  const std::vector<std::string> args = {
      TRN_COMM_TEST_PATH, "-b", "8", "-e", "8", "-w", "0", "-n", "1000000", "--timeout", "4"};
  env.set("RANK", "1");
  env.set("LOCAL_RANK", "1");
  trn::test::Child rank1(args);
  // Stopped once it is past the rendezvous (its communicator's monitor thread runs, which
  // starts after it) and a few operations in: a rank stopped before would be reported as one
  // that never arrived.
  std::thread stopper([&] {
    const std::string tasks = "/proc/" + std::to_string(rank1.pid()) + "/task";
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (bool joined = false; !joined && std::chrono::steady_clock::now() < until;) {
      std::error_code ec;
      for (const auto &task : std::filesystem::directory_iterator(tasks, ec)) {
        std::ifstream comm(task.path() / "comm");
        std::string name;
        std::getline(comm, name);
        joined = joined || name.rfind("trn-comm-mon", 0) == 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    rank1.kill(SIGSTOP);
  });
  env.set("RANK", "0");
  env.set("LOCAL_RANK", "0");
  const auto r = trn::test::run_program(args, kTimeoutMs);
  stopper.join();
  rank1.kill(SIGKILL);
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK(r.output.find("TRN_ERROR_COLLECTIVE") != std::string::npos);
  CHECK(r.output.find("timed out after 4000 ms") != std::string::npos);
  CHECK(r.output.find("ranks that never called operation") != std::string::npos);
}

TEST_CASE("a --timeout of inf runs with no limit", "[trn-comm-test]") {
  SimEnv env;
  auto r = comm_test({"--timeout", "inf", "-b", "8", "-e", "8", "-n", "1", "-w", "0", "--json"});
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK(r.output.find("\"wrong\":0") != std::string::npos);
}

TEST_CASE("bad arguments are refused with a message and exit code 2", "[trn-comm-test]") {
  SimEnv env;
  struct Case {
    std::vector<std::string> args;
    const char *says;
  };
  const Case cases[] = {
      {{"--op", "allreduce"}, "--op"},
      {{"--dtype", "f64"}, "f64"},
      {{"--min-bytes", "1M", "--max-bytes", "8"}, "larger than --max-bytes"},
      {{"--min-bytes", "lots"}, "byte count"},
      {{"--ranks", "0"}, "--ranks"},
      {{"--ranks", "60"}, "needs 60 cores"},
      {{"--iters", "0"}, "--iters"},
      {{"--redop", "prod"}, "--redop"},
      {{"--timeout", "-1"}, "--timeout"},
      {{"--hosts", "2"}, "needs --processes"},
      {{"--bind", "core"}, "--bind core needs --processes"},
      {{"--op", "allg", "--redop", "max"}, "--redop applies to allr and redsct"},
      {{"--processes", "--hosts", "2", "--ranks", "3"}, "evenly"},
      {{"--processes", "--bind", "socket"}, "--bind"},
      {{"--op", "sendrecv", "--ranks", "1"}, "sendrecv needs 2 ranks or more"},
  };
  for (const Case &c : cases) {
    auto r = comm_test(c.args);
    INFO(c.args.front() << ": " << r.output);
    CHECK(r.code == 2);
    CHECK(r.output.find(c.says) != std::string::npos);
  }
  // Half of torchrun's pair is a launcher's mistake, not a request for ranks as threads.
  env.set("RANK", "0");
  auto r = comm_test({});
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK(r.output.find("RANK is set but WORLD_SIZE is not") != std::string::npos);
}

TEST_CASE("under torchrun, a LOCAL_RANK past the visible cores says how many there are",
          "[trn-comm-test]") {
  SimEnv env;
  env.set("WORLD_SIZE", "2");
  env.set("RANK", "1");
  env.set("LOCAL_RANK", "40");
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", std::to_string(trn::test::free_port()).c_str());
  auto r = comm_test({"--op", "allr", "-e", "8"});
  INFO(r.output);
  CHECK(r.code == 2);  // an error, not wrong elements (1)
  CHECK(r.output.find("LOCAL_RANK 40 needs 41 visible cores") != std::string::npos);
  CHECK(r.output.find("--ranks") == std::string::npos);  // not an option given
}
