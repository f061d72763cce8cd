// trn-bench-mpi-allreduce: the baseline of `trn-bench allreduce`, run under mpirun. For each size
// given (bytes) it runs MPI_Allreduce (float, sum, out of place) `warmup` times untimed and
// `iters` times timed, and rank 0 prints one JSON line: the size and the P50 time of the slowest
// rank in microseconds, measured as trn-comm-test measures trn's all-reduce.
//
// usage: trn-bench-mpi-allreduce ITERS WARMUP SIZE...
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

}  // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc < 4) {
    if (rank == 0) std::fprintf(stderr, "usage: trn-bench-mpi-allreduce ITERS WARMUP SIZE...\n");
    MPI_Finalize();
    return 2;
  }
  const int iters = std::max(1, std::atoi(argv[1]));
  const int warmup = std::max(0, std::atoi(argv[2]));
  for (int a = 3; a < argc; ++a) {
    const auto bytes = std::strtoull(argv[a], nullptr, 10);
    const int count = static_cast<int>(std::max<unsigned long long>(bytes / sizeof(float), 1));
    std::vector<float> send(static_cast<size_t>(count), 1.0f), recv(static_cast<size_t>(count));
    for (int i = 0; i < warmup; ++i)
      MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    std::vector<double> us;
    for (int i = 0; i < iters; ++i) {
      const double start = MPI_Wtime();
      MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      us.push_back((MPI_Wtime() - start) * 1e6);
    }
    double mine = median(us), slowest = 0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
      std::printf("{\"size\": %llu, \"time_us\": %.3f}\n",
                  static_cast<unsigned long long>(count) * sizeof(float), slowest);
    std::fflush(stdout);
  }
  MPI_Finalize();
  return 0;
}
