// The examples, run as a user runs them on a private simulated device: the C vector_add program
// with its trn-as-assembled kernel, and the matmul harness, whose output lines, exit codes and
// Chrome trace (Tensor-engine and DMA tracks, overlapping in time) are checked; and the MLP
// program, run by trn-run.
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "support/sim_env.hpp"
#include "support/subprocess.hpp"

using nlohmann::json;
using trn::test::run_command;
using trn::test::SimEnv;

namespace {

constexpr int kTimeoutMs = 100000;

struct Result {
  int code = -1;
  std::string output;
};

Result run(const std::vector<std::string> &argv) {
  int status = 0;
  Result r;
  r.output = run_command(argv, kTimeoutMs, &status);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// A temporary directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/trn-examples-test-XXXXXX";
    REQUIRE(mkdtemp(pattern) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string operator/(const std::string &name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct Interval {
  double begin, end;
};

// The "X" events of a trace per track name (from the thread_name metadata).
std::map<std::string, std::vector<Interval>> tracks_of(const json &trace) {
  std::map<int64_t, std::string> names;
  for (const json &e : trace.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "thread_name")
      names[e.at("tid").get<int64_t>()] = e.at("args").at("name").get<std::string>();
  std::map<std::string, std::vector<Interval>> tracks;
  for (const json &e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const double ts = e.at("ts").get<double>(), dur = e.at("dur").get<double>();
    tracks[names.at(e.at("tid").get<int64_t>())].push_back({ts, ts + dur});
  }
  return tracks;
}

// Simulated time during which an interval of `a` and one of `b` are both in progress.
double overlap_us(std::vector<Interval> a, std::vector<Interval> b) {
  // Merge each set into disjoint intervals, then intersect the two unions.
  auto merge = [](std::vector<Interval> v) {
    std::sort(v.begin(), v.end(),
              [](const Interval &x, const Interval &y) { return x.begin < y.begin; });
    std::vector<Interval> out;
    for (const Interval &i : v) {
      if (!out.empty() && i.begin <= out.back().end)
        out.back().end = std::max(out.back().end, i.end);
      else
        out.push_back(i);
    }
    return out;
  };
  a = merge(std::move(a));
  b = merge(std::move(b));
  double total = 0;
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    total += std::max(0.0, std::min(a[i].end, b[j].end) - std::max(a[i].begin, b[j].begin));
    if (a[i].end < b[j].end)
      ++i;
    else
      ++j;
  }
  return total;
}

}  // namespace

TEST_CASE("examples: vector_add runs its assembled kernel and checks out = a + b") {
  SimEnv env;
  SECTION("kernel path given") {
    const Result r = run({TRN_EXAMPLE_VECTOR_ADD_PATH, TRN_EXAMPLE_VECTOR_ADD_KERNEL});
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK_THAT(r.output, Catch::Contains("kernel vector_add from " TRN_EXAMPLE_VECTOR_ADD_KERNEL
                                         ": out [128, 2048] = a + b (f32)"));
    CHECK_THAT(r.output, Catch::Contains("result: all 262144 elements match a + b"));
    CHECK_THAT(r.output, Catch::Contains("simulated time: "));
    CHECK_THAT(r.output, Catch::Contains(" us on core 0"));
    CHECK_THAT(r.output, Catch::Contains("vector_add: OK"));
  }
  SECTION("the kernel next to the program by default") {
    const Result r = run({TRN_EXAMPLE_VECTOR_ADD_PATH});
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK_THAT(r.output, Catch::Contains("vector_add: OK"));
  }
  SECTION("a failure exits nonzero with the runtime's error") {
    const Result r = run({TRN_EXAMPLE_VECTOR_ADD_PATH, "/nonexistent/vector_add.trnk"});
    INFO(r.output);
    CHECK(r.code == 1);
    CHECK_THAT(r.output, Catch::Contains("trn_kernel_load_file failed: TRN_ERROR_"));
    CHECK_THAT(r.output, Catch::Contains("/nonexistent/vector_add.trnk"));
    CHECK_THAT(r.output, !Catch::Contains("vector_add: OK"));
  }
}

TEST_CASE(
    "examples: the matmul harness checks the kernel and writes a trace of overlapping "
    "engines") {
  SimEnv env;
  TempDir dir;
  const std::string trace_path = dir / "matmul.json";
  const Result r = run({TRN_EXAMPLE_MATMUL_HARNESS_PATH, "--m", "256", "--n", "1024", "--k", "256",
                        "--profile", trace_path});
  INFO(r.output);
  REQUIRE(r.code == 0);
  for (const char *line :
       {"matmul 256x1024x256 (M x N x K): out[M,N] f32 = lhsT[K,M]^T @ rhs[K,N] bf16\n",
        "device 0 (trn2), core 0; plan: ", "\nsimulated time: ", "\nthroughput: ", " TFLOPS; MFU ",
        "\nengines active: Tensor ", "\nDMA: ", "% of 16 queues\n",
        "\ncheck: passed, 262144 of 262144 output elements within atol 0.01 rtol 0.01",
        "\nhost time: "})
    CHECK_THAT(r.output, Catch::Contains(line));
  CHECK_THAT(r.output, Catch::Contains("profile written to " + trace_path +
                                       " (open in https://ui.perfetto.dev or chrome://tracing)"));

  REQUIRE(std::filesystem::exists(trace_path));
  std::ifstream in(trace_path);
  const json trace = json::parse(in);
  REQUIRE(trace.at("traceEvents").is_array());
  const auto tracks = tracks_of(trace);
  REQUIRE(tracks.count("Tensor (PE)") == 1);
  const std::vector<Interval> &tensor = tracks.at("Tensor (PE)");
  CHECK(tensor.size() >= 2 * 2 * 2);  // at least one matmul per (M/128, N/512, K/128) tile
  std::vector<Interval> dma;
  for (const auto &[name, events] : tracks)
    if (name.rfind("DMA queue ", 0) == 0) dma.insert(dma.end(), events.begin(), events.end());
  REQUIRE(!dma.empty());
  // The pipeline: the Tensor engine multiplies while DMA queues load the next tiles.
  const double overlap = overlap_us(tensor, dma);
  INFO("Tensor/DMA overlap " << overlap << " us");
  CHECK(overlap > 0);
  CHECK(trace.at("otherData").at("total_ns").get<uint64_t>() > 0);
}

TEST_CASE("examples: the matmul harness takes f32 inputs and --no-check, and rejects bad input") {
  SimEnv env;
  TempDir dir;
  SECTION("f32 inputs, trn1") {
    env.set("TRN_SIM_GENERATION", "trn1");
    const Result r = run({TRN_EXAMPLE_MATMUL_HARNESS_PATH, "--m", "128", "--n", "512", "--k", "128",
                          "--dtype", "f32", "--profile", dir / "f32.json"});
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK_THAT(r.output, Catch::Contains("matmul 128x512x128 (M x N x K)"));
    CHECK_THAT(r.output, Catch::Contains("] f32\ndevice 0 (trn1)"));
    CHECK_THAT(r.output, Catch::Contains(" TFLOPS fp32 peak)"));
    CHECK_THAT(r.output, Catch::Contains("check: passed"));
    CHECK(std::filesystem::exists(dir / "f32.json"));
  }
  SECTION("--no-check") {
    const Result r = run({TRN_EXAMPLE_MATMUL_HARNESS_PATH, "--m", "128", "--n", "512", "--k", "128",
                          "--no-check", "--profile", dir / "nocheck.json"});
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK_THAT(r.output, Catch::Contains("check: skipped (--no-check)"));
  }
  SECTION("a shape the kernel cannot tile") {
    const Result r =
        run({TRN_EXAMPLE_MATMUL_HARNESS_PATH, "--m", "100", "--profile", dir / "bad.json"});
    INFO(r.output);
    CHECK(r.code == 1);
    CHECK_THAT(r.output, Catch::Contains("M and K must be multiples of 128 and N of 512"));
    CHECK_FALSE(std::filesystem::exists(dir / "bad.json"));
  }
  SECTION("a bad option") {
    const Result r = run({TRN_EXAMPLE_MATMUL_HARNESS_PATH, "--dtype", "f64"});
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Catch::Contains("--dtype"));
  }
}

TEST_CASE("examples: the kernel builder's softmax runs, checks out and saves a kernel binary") {
  SimEnv env;
  const std::string kernel = env.root() + "/softmax.trnk";  // removed with the device root
  const Result r =
      run({TRN_EXAMPLE_KBUILD_SOFTMAX_PATH, "--rows", "300", "--cols", "512", "--save", kernel});
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("softmax [300, 512] f32 on trn2: "));
  CHECK_THAT(r.output, Catch::Contains(" us simulated; engines active: vector "));
  CHECK_THAT(r.output, Catch::Contains("check: ok"));
  // The saved binary names the C++ lines that built it.
  const Result dump = run({TRN_OBJDUMP_PATH, kernel});
  REQUIRE(dump.code == 0);
  CHECK_THAT(dump.output, Catch::Contains(".file \"kbuild_softmax.cpp\""));
  CHECK_THAT(dump.output, Catch::Contains("tensor_reduce max"));
  const Result bad = run({TRN_EXAMPLE_KBUILD_SOFTMAX_PATH, "--cols", "20000"});
  CHECK(bad.code == 2);
}

TEST_CASE("examples: trn-run executes the MLP program and its output matches the host's") {
  SimEnv env;
  const std::string y = env.root() + "/y.npy";
  const Result r = run({TRN_RUN_PATH, TRN_MLP_PROGRAM, "--in", std::string("xT=") + TRN_MLP_X,
                        "--out", "y=" + y, "--expect", std::string("y=") + TRN_MLP_EXPECTED,
                        "--rtol", "1e-4", "--atol", "1e-7", "--repeat", "2"});
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("program mlp_forward on device 0 core 0: 2 tensors, 2 "
                                       "executions"));
  CHECK_THAT(r.output, Catch::Contains("expect y: ok, 262144 elements"));
  CHECK(std::filesystem::file_size(y) > 512 * 512 * 4);
  // --json: `executions` where a kernel's report has `launches` (docs/trn-run.md's key order).
  const Result report =
      run({TRN_RUN_PATH, TRN_MLP_PROGRAM, "--in", std::string("xT=") + TRN_MLP_X, "--json"});
  INFO(report.output);
  REQUIRE(report.code == 0);
  const size_t core_id = report.output.find("\"core_id\"");
  const size_t executions = report.output.find("\"executions\"");
  const size_t simulated = report.output.find("\"simulated_ns\"");
  REQUIRE(executions != std::string::npos);
  CHECK(core_id < executions);
  CHECK(executions < simulated);
  CHECK(report.output.find("\"launches\"") == std::string::npos);
  // Bindings are checked by name, as a kernel's arguments are.
  const Result missing = run({TRN_RUN_PATH, TRN_MLP_PROGRAM});
  CHECK(missing.code == 2);
  CHECK_THAT(missing.output, Catch::Contains("xT"));
  const Result typo = run({TRN_RUN_PATH, TRN_MLP_PROGRAM, "--in", std::string("x=") + TRN_MLP_X});
  CHECK(typo.code == 2);
  CHECK_THAT(typo.output, Catch::Contains("program 'mlp_forward' has no tensor 'x'"));
  const Result scalar = run({TRN_RUN_PATH, TRN_MLP_PROGRAM, "--in", std::string("xT=") + TRN_MLP_X,
                             "--scalar", "alpha=1"});
  CHECK(scalar.code == 2);
  CHECK_THAT(scalar.output, Catch::Contains("a program has no scalar arguments"));
  const Result wrong_shape =
      run({TRN_RUN_PATH, TRN_MLP_PROGRAM, "--in", std::string("xT=") + TRN_MLP_EXPECTED});
  CHECK(wrong_shape.code == 2);
  CHECK_THAT(wrong_shape.output, Catch::Contains("the shape differs"));
}
