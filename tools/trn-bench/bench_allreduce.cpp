// trn-bench allreduce: trn's all-reduce (trn-comm-test, one process per rank) against OpenMPI's
// MPI_Allreduce (trn-bench-mpi-allreduce under mpirun) on the same host, ranks and sizes, both
// measured the same way (P50 of the slowest rank, float sum, out of place): host busbw per size
// and the latency of 8 bytes; within a host (OpenMPI over shared memory) and across two simulated
// hosts (trn over libfabric, OpenMPI over TCP). Then the simulated busbw of ranks on separate
// simulated devices against one NeuronLink link, the bound of a ring on the torus.
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench.hpp"
#include "common/parse.hpp"
#include "tool_common/cpus.hpp"
#include "tool_common/json_text.hpp"

namespace trn::bench {

namespace {

// A helper program: next to trn-bench when installed, else where the build put it.
std::string helper(const char *name, const char *build_path) {
  char self[PATH_MAX] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/') + 1);
    if (access((dir + name).c_str(), X_OK) == 0) return dir + name;
  }
  return access(build_path, X_OK) == 0 ? build_path : "";
}

// Runs `command` (bounded by `timeout 900`) and returns its stdout's JSON lines; exits on failure.
std::vector<nlohmann::json> json_lines(const std::string &command) {
  const std::string bounded = "timeout 900 " + command;
  FILE *pipe = popen(bounded.c_str(), "r");
  if (!pipe) {
    std::fprintf(stderr, "trn-bench allreduce: cannot run %s\n", command.c_str());
    std::exit(1);
  }
  std::vector<nlohmann::json> lines;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe)) {
    auto j = nlohmann::json::parse(buffer, nullptr, false);
    if (!j.is_discarded() && j.is_object()) lines.push_back(std::move(j));
  }
  const int status = pclose(pipe);
  if (status != 0) {
    std::fprintf(stderr, "trn-bench allreduce: '%s' failed (status %d)\n", command.c_str(), status);
    std::exit(1);
  }
  return lines;
}

// `runs`: of each library, taking turns. The machine's speed drifts between runs (two runs of
// the same 8-byte case a minute apart read 0.2 and 0.5 us for OpenMPI, 2.2 and 3.5 us for trn),
// and a single run of each would credit that drift to whichever ran in the faster stretch. Each
// side's figure is the median of its runs.
struct Band {
  const char *min, *max;
  int iters, warmup, runs;
};

std::string size_label(uint64_t bytes) {
  return common::format_bytes(bytes);  // "64 MiB", "8 B"
}

// trn's rows by size: P50 time (us) and simulated busbw; exits when an element was wrong.
struct TrnRow {
  double time_us = 0, sim_busbw = 0;
};
std::map<uint64_t, TrnRow> run_trn(const std::string &tool, uint32_t ranks, uint32_t hosts,
                                   const Band &band, const std::string &env = "") {
  std::map<uint64_t, TrnRow> rows;
  const std::string command = (env.empty() ? "" : "env " + env + " ") + tool +
                              " --op allr --processes --hosts " + std::to_string(hosts) +
                              " --ranks " + std::to_string(ranks) + " --json -b " + band.min +
                              " -e " + band.max + " -f 4 -n " + std::to_string(band.iters) +
                              " -w " + std::to_string(band.warmup);
  for (const auto &j : json_lines(command)) {
    if (j.value("wrong", 0) != 0) {
      std::fprintf(stderr, "trn-bench allreduce: %s gave wrong elements: %s\n", command.c_str(),
                   trn::tools::json_text(j).c_str());
      std::exit(1);
    }
    rows[j.at("size").get<uint64_t>()] = {j.at("time_us").get<double>(),
                                          j.at("sim_busbw_gbps").get<double>()};
  }
  return rows;
}

// `btl`: OpenMPI's transports, "self,vader" (shared memory) or "self,tcp".
std::map<uint64_t, double> run_mpi(const std::string &program, uint32_t ranks, const char *btl,
                                   const std::vector<uint64_t> &sizes, int iters, int warmup) {
  // Bound like trn-comm-test's ranks (--bind auto): one per CPU when each can have one.
  const bool bind = ranks <= tools::allowed_cpus().size();
  std::string command = "mpirun -np " + std::to_string(ranks) + " --oversubscribe --bind-to " +
                        (bind ? "core:if-supported" : "none") + " --mca btl " + btl;
  if (geteuid() == 0) command += " --allow-run-as-root";
  command += " " + program + " " + std::to_string(iters) + " " + std::to_string(warmup);
  for (uint64_t s : sizes) command += " " + std::to_string(s);
  std::map<uint64_t, double> out;
  for (const auto &j : json_lines(command + " 2>/dev/null"))
    out[j.at("size").get<uint64_t>()] = j.at("time_us").get<double>();
  return out;
}

// trn's all-reduce against OpenMPI's over `ranks` processes on `hosts` simulated hosts: host
// busbw per size, latency at 8 bytes.
void compare(const std::string &tool, const std::string &mpi, uint32_t ranks, uint32_t hosts,
             const std::vector<Band> &bands) {
  const double factor = 2.0 * (ranks - 1) / ranks;
  const std::string who = hosts == 1 ? std::to_string(ranks) + " processes"
                                     : std::to_string(hosts) + " hosts x " +
                                           std::to_string(ranks / hosts) + " processes";
  const char *btl = hosts == 1 ? "self,vader" : "self,tcp";
  const std::string baseline =
      std::string("OpenMPI MPI_Allreduce (") + (hosts == 1 ? "shared memory" : "tcp") + ")";
  for (const Band &band : bands) {
    // Per size, each run's P50 time (us) of trn and of OpenMPI, the runs taking turns.
    std::map<uint64_t, std::vector<double>> trn_us, mpi_us;
    for (int run = 0; run < band.runs; ++run) {
      const auto trn = run_trn(tool, ranks, hosts, band);
      std::vector<uint64_t> sizes;
      for (const auto &[size, row] : trn) sizes.push_back(size);
      const auto base = run_mpi(mpi, ranks, btl, sizes, band.iters, band.warmup);
      for (const auto &[size, row] : trn) {
        auto it = base.find(size);
        if (it == base.end()) continue;
        trn_us[size].push_back(row.time_us);
        mpi_us[size].push_back(it->second);
      }
    }
    for (auto &[size, times] : trn_us) {
      const double trn_time = median(times), mpi_time = median(mpi_us[size]);
      const std::string name = who + ", " + size_label(size);
      if (size == 8) {
        print({"allreduce", name + " latency", "us", trn_time, mpi_time, baseline, false});
        continue;
      }
      // busbw from the median time, as nccl-tests and trn-comm-test define it.
      auto busbw = [&](double us) { return static_cast<double>(size) / (us * 1e3) * factor; };
      print({"allreduce", name, "GB/s busbw", busbw(trn_time), busbw(mpi_time), baseline, true});
    }
  }
}

}  // namespace

int bench_allreduce(int argc, char **argv) {
  const bool quick = has_flag(argc, argv, "--quick");
  const std::string tool = helper("trn-comm-test", TRN_COMM_TEST_BUILD_PATH);
  const std::string mpi = helper("trn-bench-mpi-allreduce", TRN_MPI_ALLREDUCE_BUILD_PATH);
  if (tool.empty()) {
    std::fprintf(stderr, "trn-bench allreduce: trn-comm-test is not installed beside trn-bench\n");
    return 1;
  }
  if (mpi.empty() || system("command -v mpirun > /dev/null 2>&1") != 0) {
    std::fprintf(stderr,
                 "trn-bench allreduce: the OpenMPI baseline is missing (mpirun or "
                 "trn-bench-mpi-allreduce); run scripts/install-deps and build again\n");
    return 1;
  }
  // Small sizes take many iterations to settle, large ones few to keep the run short. The
  // warm-up of the first band also gives the scheduler time to spread freshly forked ranks over
  // the cores (a few milliseconds): fifty 8-byte operations took under a millisecond, and runs
  // whose two ranks still shared a core read 3x slower for either library.
  const std::vector<Band> bands = quick ? std::vector<Band>{{"8", "8", 200, 500, 5},
                                                            {"1K", "256K", 20, 5, 5},
                                                            {"1M", "4M", 20, 5, 5}}
                                        : std::vector<Band>{{"8", "8", 2000, 2000, 5},
                                                            {"1K", "256K", 200, 20, 5},
                                                            {"1M", "4M", 100, 10, 5},
                                                            {"16M", "256M", 5, 1, 3}};
  // Across hosts every byte crosses TCP: up to 64 MiB.
  const std::vector<Band> cross_host_bands = {{"8", "8", 2000, 2000, 5},
                                              {"1K", "256K", 200, 20, 5},
                                              {"1M", "4M", 100, 10, 5},
                                              {"16M", "64M", 5, 1, 3}};
  const std::vector<uint32_t> rank_counts =
      quick ? std::vector<uint32_t>{2} : std::vector<uint32_t>{2, 4};
  for (uint32_t ranks : rank_counts) compare(tool, mpi, ranks, 1, bands);
  // Simulated hosts (a TRN_SIM_ROOT each) joined over libfabric, against OpenMPI over TCP.
  for (uint32_t ranks : rank_counts) compare(tool, mpi, ranks, 2, quick ? bands : cross_host_bands);
  // Ranks on separate simulated trn2 devices (the first core of each, devices in a 2x2 torus):
  // simulated busbw against one NeuronLink-v3 link, 1.28 TB/s per chip over 4 links.
  char root[] = "/tmp/trn-bench-allreduce-XXXXXX";
  if (!mkdtemp(root)) {
    std::fprintf(stderr, "trn-bench allreduce: cannot make a temporary directory\n");
    return 1;
  }
  const double link_gbps = 1280.0 / 4;
  for (uint32_t ranks : quick ? std::vector<uint32_t>{2} : std::vector<uint32_t>{2, 4}) {
    std::string cores;
    for (uint32_t r = 0; r < ranks; ++r) cores += (r ? "," : "") + std::to_string(r * 8);
    const std::string env =
        std::string("TRN_SIM_ROOT=") + root +
        " TRN_SIM_GENERATION=trn2 TRN_LNC=1 TRN_SIM_DEVICES=" + std::to_string(ranks) +
        " TRN_VISIBLE_CORES=" + cores;
    const Band band = quick ? Band{"16M", "16M", 2, 1, 1} : Band{"16M", "64M", 2, 1, 1};
    for (const auto &[size, row] : run_trn(tool, ranks, 1, band, env))
      print({"allreduce", "simulated, " + std::to_string(ranks) + " devices, " + size_label(size),
             "GB/s busbw", row.sim_busbw, link_gbps, "NeuronLink-v3, one link (320 GB/s)", true});
  }
  std::string cleanup = std::string("rm -rf ") + root;
  return system(cleanup.c_str()) == 0 ? 0 : 1;
}

}  // namespace trn::bench
