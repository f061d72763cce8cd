// trn-bench: benchmark programs that print one JSON object per line with the project's figure,
// a baseline measured in the same run and their ratio (these machines are too noisy for
// absolute numbers to mean much on their own).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "trn/trn.h"

namespace trn::bench {

struct Result {
  std::string bench;
  std::string case_name;
  std::string unit;
  double trn = 0;
  double baseline = 0;
  std::string baseline_name;
  bool higher_is_better = false;
};
using Activity = std::vector<std::pair<std::string, double>>;

// {"bench": ..., "case": ..., "unit": ..., "trn": ..., "baseline": ..., "baseline_name": ...,
//  "ratio": trn / baseline, "better": "higher"|"lower"[, "activity": {...}]}
// `activity`, when given, is printed as an "activity" object (e.g. each engine's active %).
void print(const Result &result, const Activity &activity = {});

// The median of `runs` timings of `body`, in nanoseconds per `operations`.
double median_ns_per_op(int runs, uint64_t operations, const std::function<void()> &body);
// The median of samples; the host clock in nanoseconds (steady).
double median(std::vector<double> samples);
double now_ns();
// The median of `runs` timings of `body` in nanoseconds, each run between an untimed `before`
// and `after` (either may be empty).
double median_ns_between(int runs, const std::function<void()> &before,
                         const std::function<void()> &body, const std::function<void()> &after);
// The medians of `runs` timings each of `trn` and `baseline` in nanoseconds, the two taking
// turns (each after an untimed `before`, which may be empty): a machine whose speed drifts
// during the runs weighs on both alike, where timing all of one and then all of the other
// would credit the drift to whichever ran in the faster stretch.
struct PairedMedians {
  double trn_ns, baseline_ns;
};
PairedMedians paired_medians_ns(int runs, const std::function<void()> &before,
                                const std::function<void()> &trn,
                                const std::function<void()> &baseline);
// The same for any number of bodies, taking turns in a rotating order: each one's median.
std::vector<double> interleaved_medians_ns(int runs, const std::function<void()> &before,
                                           const std::vector<std::function<void()>> &bodies);

// Whether `flag` is among the benchmark's arguments (main.cpp has already refused unknown ones).
bool has_flag(int argc, char **argv, const char *flag);
// --trn1 / --trn3: the simulated generation, set before the runtime starts (default trn2).
void select_generation(int argc, char **argv);

// Fails the program with a message when a trn call does not succeed.
void check(int result, const char *what);

// Device 0 and its first visible core, or the program ends with a message.
struct Context {
  trn_device_t device = nullptr;
  trn_core_t core = nullptr;
};
Context open_device();

using Bench = int (*)(int argc, char **argv);
int bench_alloc(int argc, char **argv);
int bench_sem(int argc, char **argv);
int bench_submit(int argc, char **argv);
int bench_copy(int argc, char **argv);
int bench_matmul(int argc, char **argv);
int bench_load(int argc, char **argv);
int bench_kernels(int argc, char **argv);
int bench_graph(int argc, char **argv);
int bench_ops(int argc, char **argv);
int bench_allreduce(int argc, char **argv);

}  // namespace trn::bench
