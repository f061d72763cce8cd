// trn-bench NAME [options]: runs one benchmark; see --help for the list.
#include <cstdio>
#include <cstring>

#include "bench.hpp"

namespace {

struct Entry {
  const char *name;
  trn::bench::Bench run;
  const char *what;
};

constexpr Entry kBenches[] = {
    {"alloc", trn::bench::bench_alloc,
     "alloc+free pairs vs glibc malloc; fragmentation of a training-like trace"},
    {"sem", trn::bench::bench_sem,
     "semaphore signal->wake round trips vs raw atomic and futex ping-pong"},
    {"submit", trn::bench::bench_submit,
     "empty command submit->completion vs raw ping-pong; commands/s in batches"},
    {"copy", trn::bench::bench_copy, "h2d, d2h, d2d copy bandwidth vs memcpy (1 and all threads)"},
    {"matmul", trn::bench::bench_matmul,
     "simulating a tiled 2048^3 matmul kernel vs the bare GEMM (oneDNN bf16, OpenBLAS fp32)"},
};

void usage() {
  std::printf("usage: trn-bench NAME [--quick]\n\nbenchmarks (JSON lines on stdout):\n");
  for (const auto &b : kBenches) std::printf("  %-8s %s\n", b.name, b.what);
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  for (const auto &b : kBenches)
    if (!std::strcmp(argv[1], b.name)) return b.run(argc - 1, argv + 1);
  std::fprintf(stderr, "trn-bench: no benchmark named '%s'\n", argv[1]);
  usage();
  return 2;
}
