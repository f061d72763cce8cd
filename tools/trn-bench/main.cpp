// trn-bench NAME [options]: runs one benchmark; see --help for the list.
#include <array>
#include <cstdio>
#include <cstring>
#include <string>

#include "bench.hpp"

namespace {

struct Entry {
  const char *name;
  trn::bench::Bench run;
  const char *what;
  std::array<const char *, 3> flags;  // what the benchmark takes (unused entries null)
};

constexpr Entry kBenches[] = {
    {"alloc",
     trn::bench::bench_alloc,
     "alloc+free pairs vs glibc malloc; fragmentation of a training-like trace",
     {"--quick"}},
    {"sem",
     trn::bench::bench_sem,
     "semaphore signal->wake round trips vs raw atomic and futex ping-pong",
     {"--quick", "--parked"}},
    {"submit",
     trn::bench::bench_submit,
     "empty command submit->completion vs raw ping-pong; commands/s in batches",
     {"--quick"}},
    {"copy",
     trn::bench::bench_copy,
     "h2d, d2h, d2d copy bandwidth vs memcpy (1 and all threads); write/read of plain host "
     "memory through a queue vs memcpy (1 thread)",
     {"--quick"}},
    {"load",
     trn::bench::bench_load,
     "file -> device memory (trn_queue_read_file), 256 MiB-2 GiB: cold cache vs an O_DIRECT read "
     "into host memory, warm cache vs memcpy from the cached pages",
     {"--quick"}},
    {"matmul",
     trn::bench::bench_matmul,
     "simulating a tiled 2048^3 matmul kernel vs the bare GEMM (oneDNN bf16, OpenBLAS fp32)",
     {"--quick", "--trn1", "--trn3"}},
    {"kernels",
     trn::bench::bench_kernels,
     "builder kernels (matmul, elementwise, softmax, layernorm, rmsnorm, transpose) in bf16 and "
     "f32: simulated time vs the roofline (compute- or HBM-bound, the larger)",
     {"--quick", "--trn1", "--trn3"}},
    {"graph",
     trn::bench::bench_graph,
     "a captured sequence of 100 small ops replayed as a program (trn_queue_execute) vs issuing "
     "them one by one: host time to issue",
     {"--quick"}},
    {"ops",
     trn::bench::bench_ops,
     "eager ops (libtrn_ops): host time to issue a cached op vs computing it on the host CPU; "
     "first-use build vs disk-cache load; large ops' simulated time vs the roofline",
     {"--quick"}},
    {"allreduce",
     trn::bench::bench_allreduce,
     "all-reduce over 2 and 4 processes, 8 B-256 MiB, within a host and across 2 simulated hosts: "
     "host busbw and 8 B latency vs OpenMPI's MPI_Allreduce (shared memory, tcp); simulated "
     "busbw across devices vs a NeuronLink link",
     {"--quick"}},
};

void usage() {
  std::printf("usage: trn-bench NAME [--quick]\n\nbenchmarks (JSON lines on stdout):\n");
  for (const auto &b : kBenches) std::printf("  %-8s %s\n", b.name, b.what);
  std::printf("\nmatmul and kernels also take --trn1 or --trn3 (the generation, default trn2)\n");
}

// Every argument after the name must be one of the benchmark's flags.
bool flags_ok(const Entry &b, int argc, char **argv) {
  for (int i = 2; i < argc; ++i) {
    bool known = false;
    for (const char *flag : b.flags) known = known || (flag && !std::strcmp(argv[i], flag));
    if (known) continue;
    std::string list;
    for (const char *flag : b.flags)
      if (flag) list += std::string(list.empty() ? "" : ", ") + flag;
    std::fprintf(stderr, "trn-bench %s: unknown argument '%s' (it takes %s)\n", b.name, argv[i],
                 list.c_str());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  for (const auto &b : kBenches)
    if (!std::strcmp(argv[1], b.name))
      return flags_ok(b, argc, argv) ? b.run(argc - 1, argv + 1) : 2;
  std::fprintf(stderr, "trn-bench: no benchmark named '%s'\n", argv[1]);
  usage();
  return 2;
}
