#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "bench.hpp"
#include "tool_common/json_text.hpp"
#include "trn/trn.h"

namespace trn::bench {

void print(const Result &r, const Activity &activity_figures) {
  nlohmann::ordered_json line = {{"bench", r.bench},
                                 {"case", r.case_name},
                                 {"unit", r.unit},
                                 {"trn", r.trn},
                                 {"baseline", r.baseline},
                                 {"baseline_name", r.baseline_name},
                                 {"ratio", r.baseline != 0 ? r.trn / r.baseline : 0.0},
                                 {"better", r.higher_is_better ? "higher" : "lower"}};
  if (!activity_figures.empty()) {
    nlohmann::ordered_json activity = nlohmann::ordered_json::object();
    for (const auto &[name, value] : activity_figures) activity[name] = value;
    line["activity"] = activity;
  }
  std::printf("%s\n", trn::tools::json_text(line).c_str());
  std::fflush(stdout);
}

double median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

double now_ns() {
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double median_ns_between(int runs, const std::function<void()> &before,
                         const std::function<void()> &body, const std::function<void()> &after) {
  std::vector<double> samples;
  for (int i = 0; i < runs; ++i) {
    if (before) before();
    const double start = now_ns();
    body();
    samples.push_back(now_ns() - start);
    if (after) after();
  }
  return median(std::move(samples));
}

std::vector<double> interleaved_medians_ns(int runs, const std::function<void()> &before,
                                           const std::vector<std::function<void()>> &bodies) {
  const size_t n = bodies.size();
  std::vector<std::vector<double>> samples(n);
  for (int i = 0; i < runs; ++i) {
    // Which goes first rotates too, so that none always follows the same one's work.
    for (size_t turn = 0; turn < n; ++turn) {
      const size_t which = (static_cast<size_t>(i) + turn) % n;
      if (before) before();
      const double start = now_ns();
      bodies[which]();
      samples[which].push_back(now_ns() - start);
    }
  }
  std::vector<double> medians;
  for (auto &s : samples) medians.push_back(median(std::move(s)));
  return medians;
}

PairedMedians paired_medians_ns(int runs, const std::function<void()> &before,
                                const std::function<void()> &trn,
                                const std::function<void()> &baseline) {
  const std::vector<double> m = interleaved_medians_ns(runs, before, {trn, baseline});
  return {m[0], m[1]};
}

double median_ns_per_op(int runs, uint64_t operations, const std::function<void()> &body) {
  return median_ns_between(runs, {}, body, {}) / static_cast<double>(operations);
}

bool has_flag(int argc, char **argv, const char *flag) {
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], flag)) return true;
  return false;
}

void select_generation(int argc, char **argv) {
  // The simulated device of that generation (read when the runtime starts).
  for (const char *generation : {"trn1", "trn3"})
    if (has_flag(argc, argv, (std::string("--") + generation).c_str()))
      setenv("TRN_SIM_GENERATION", generation, 1);
}

void check(int result, const char *what) {
  if (result == TRN_SUCCESS) return;
  std::fprintf(stderr, "trn-bench: %s failed: %s: %s\n", what,
               trn_result_name(static_cast<trn_result_t>(result)), trn_last_error());
  std::exit(1);
}

Context open_device() {
  Context c;
  uint32_t count = 1;
  check(trn_device_get(&count, &c.device), "trn_device_get");
  if (count == 0) {
    std::fprintf(stderr, "trn-bench: no device\n");
    std::exit(1);
  }
  count = 1;
  check(trn_core_get(c.device, &count, &c.core), "trn_core_get");
  return c;
}

}  // namespace trn::bench
