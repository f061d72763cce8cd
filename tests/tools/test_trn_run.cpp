// trn-run: kernels (assembled by trn-as at build time, data/*.s) launched on a private simulated
// device with .npy inputs; outputs, comparisons, errors and exit codes, the trace and the JSON
// report. And the .npy reader/writer on its own: round trips and malformed files; and how
// --scalar values parse.
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "support/sim_env.hpp"
#include "support/subprocess.hpp"
#include "trn-run/npy.hpp"
#include "trn-run/scalar_value.hpp"

using nlohmann::json;
using trn::test::run_command;
using trn::test::SimEnv;
namespace npy = trn::tools::npy;

namespace {

constexpr int kTimeoutMs = 60000;

// A temporary directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/trn-run-test-XXXXXX";
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

std::string kernel(const std::string &name) {
  return std::string(TRN_RUN_KERNELS) + "/" + name + ".trnk";
}

template <typename T>
std::span<const std::byte> bytes_of(const std::vector<T> &v) {
  return std::as_bytes(std::span<const T>(v));
}

template <typename T>
void save(const std::string &path, const std::string &descr, const std::vector<uint64_t> &shape,
          const std::vector<T> &values) {
  REQUIRE_FALSE(npy::write_file(path, descr, shape, bytes_of(values)));
}

void save_bytes(const std::string &path, const std::vector<std::byte> &bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

template <typename T>
std::vector<T> load(const std::string &path, const std::string &descr,
                    const std::vector<uint64_t> &shape) {
  npy::Array a;
  const auto err = npy::read_file(path, a);
  INFO(err.value_or(""));
  REQUIRE_FALSE(err);
  REQUIRE(a.descr == descr);
  REQUIRE(a.shape == shape);
  std::vector<T> values(a.data.size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), a.data.data(), values.size() * sizeof(T));
  return values;
}

using Result = trn::test::ProgramResult;

Result trn_run(std::vector<std::string> args) {
  args.insert(args.begin(), TRN_RUN_PATH);
  return trn::test::run_program(args, kTimeoutMs);
}

json parse_json(const std::string &output) {
  const size_t start = output.find('{');
  REQUIRE(start != std::string::npos);
  return json::parse(output.substr(start));
}

const std::vector<uint64_t> kShape = {128, 64};

// a, b and a + b for the vector_add kernel (exact in f32).
struct VectorAddFiles {
  std::string a, b, want;
  std::vector<float> sum;
  explicit VectorAddFiles(const TempDir &dir) : a(dir / "a.npy"), b(dir / "b.npy") {
    want = dir / "want.npy";
    std::vector<float> va(128 * 64), vb(va.size());
    for (size_t i = 0; i < va.size(); ++i) {
      va[i] = static_cast<float>(i % 97) * 0.5f - 10.0f;
      vb[i] = static_cast<float>(i % 13) * 0.25f;
      sum.push_back(va[i] + vb[i]);
    }
    save(a, "<f4", kShape, va);
    save(b, "<f4", kShape, vb);
    save(want, "<f4", kShape, sum);
  }
};

// A valid .npy file to break.
std::vector<std::byte> valid_file() {
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};
  return npy::serialize("<f4", {2, 3}, bytes_of(values));
}

// A .npy file with the given header text (version 1.0, no padding rules).
std::vector<std::byte> with_header(const std::string &header, size_t data_bytes = 0) {
  std::vector<std::byte> out;
  for (char c : std::string("\x93NUMPY\x01\x00", 8)) out.push_back(static_cast<std::byte>(c));
  out.push_back(static_cast<std::byte>(header.size() & 0xff));
  out.push_back(static_cast<std::byte>(header.size() >> 8));
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  out.resize(out.size() + data_bytes);
  return out;
}

std::string parse_error(const std::vector<std::byte> &bytes) {
  npy::Array a;
  auto err = npy::parse(bytes, a);
  return err.value_or("");
}

}  // namespace

TEST_CASE("trn-run: vector add with --in/--out/--expect passes") {
  SimEnv env;
  TempDir dir;
  VectorAddFiles files(dir);
  const std::string out = dir / "out.npy";
  const Result r = trn_run({kernel("vector_add"), "--in", "a=" + files.a, "--in", "b=" + files.b,
                            "--out", "out=" + out, "--expect", "out=" + files.want});
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("kernel vector_add on device 0 core 0"));
  CHECK_THAT(r.output, Catch::Contains("simulated time"));
  CHECK_THAT(r.output, Catch::Contains("| vector"));
  CHECK_THAT(r.output, Catch::Contains("MFU"));
  CHECK_THAT(r.output, Catch::Contains("expect out: ok, 8192 elements"));
  CHECK(load<float>(out, "<f4", kShape) == files.sum);

  // --out-dir writes every output as NAME.npy.
  const Result all = trn_run({kernel("vector_add"), "--in", "a=" + files.a, "--in", "b=" + files.b,
                              "--out-dir", dir / ""});
  INFO(all.output);
  REQUIRE(all.code == 0);
  CHECK(load<float>(dir / "out.npy", "<f4", kShape) == files.sum);
  const Result missing = trn_run({kernel("vector_add"), "--in", "a=" + files.a, "--in",
                                  "b=" + files.b, "--out-dir", dir / "nowhere"});
  CHECK(missing.code == 2);
  CHECK_THAT(missing.output, Catch::Contains("no such directory (create it first)"));
}

TEST_CASE("trn-run: the example of docs/assembly.md assembles and runs race-free") {
  SimEnv env;
  TempDir dir;
  std::ifstream doc_file(std::string(TRN_DOCS_DIR) + "/assembly.md");
  REQUIRE(doc_file.good());
  const std::string doc{std::istreambuf_iterator<char>(doc_file), {}};
  const size_t start = doc.find("```asm\n");
  REQUIRE(start != std::string::npos);
  const size_t end = doc.find("```", start + 7);
  REQUIRE(end != std::string::npos);
  {
    std::ofstream source(dir / "example.s");
    source << doc.substr(start + 7, end - start - 7);
  }
  const Result as = trn::test::run_program(
      {TRN_AS_PATH, dir / "example.s", "-o", dir / "example.trnk"}, kTimeoutMs);
  INFO(as.output);
  REQUIRE(as.code == 0);
  // out = relu(a + b) * 2 on one 128 x 512 tile, with the race checker on (the default).
  const std::vector<uint64_t> shape = {128, 512};
  std::vector<float> a(128 * 512), b(a.size()), want(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(i % 37) * 0.5f - 9.0f;
    b[i] = static_cast<float>(i % 11) * 0.25f;
    want[i] = std::max(a[i] + b[i], 0.0f) * 2.0f;
  }
  save(dir / "a.npy", "<f4", shape, a);
  save(dir / "b.npy", "<f4", shape, b);
  save(dir / "want.npy", "<f4", shape, want);
  const Result r = trn_run({dir / "example.trnk", "--in", "a=" + (dir / "a.npy"), "--in",
                            "b=" + (dir / "b.npy"), "--expect", "out=" + (dir / "want.npy")});
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("expect out: ok"));
}

TEST_CASE("trn-run: a wrong expected file fails with exit 1 and prints the mismatch") {
  SimEnv env;
  TempDir dir;
  VectorAddFiles files(dir);
  std::vector<float> wrong = files.sum;
  wrong[3 * 64 + 5] += 1.0f;
  wrong[100 * 64 + 1] = std::nanf("");
  save(dir / "wrong.npy", "<f4", kShape, wrong);
  const Result r = trn_run({kernel("vector_add"), "--in", "a=" + files.a, "--in", "b=" + files.b,
                            "--expect", "out=" + (dir / "wrong.npy")});
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains("expect out: MISMATCH in 2 of 8192 elements"));
  CHECK_THAT(r.output, Catch::Contains("out[3, 5]: got"));
  CHECK_THAT(r.output, Catch::Contains("out[100, 1]: got"));
  CHECK_THAT(r.output, Catch::Contains("max abs error 1"));

  // A tolerance that covers the difference passes (NaN still needs NaN).
  wrong[100 * 64 + 1] = files.sum[100 * 64 + 1];
  save(dir / "close.npy", "<f4", kShape, wrong);
  const Result close =
      trn_run({kernel("vector_add"), "--in", "a=" + files.a, "--in", "b=" + files.b, "--expect",
               "out=" + (dir / "close.npy"), "--atol", "1.5"});
  INFO(close.output);
  CHECK(close.code == 0);

  // Expected values may come in another numeric dtype (float64 here).
  std::vector<double> as_double(files.sum.begin(), files.sum.end());
  save(dir / "want64.npy", "<f8", kShape, as_double);
  const Result f64 = trn_run({kernel("vector_add"), "--in", "a=" + files.a, "--in", "b=" + files.b,
                              "--expect", "out=" + (dir / "want64.npy")});
  INFO(f64.output);
  CHECK(f64.code == 0);
}

TEST_CASE("trn-run: --scalar gives scalar arguments their values, one binary for each") {
  SimEnv env;
  TempDir dir;
  std::vector<float> x(128 * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 13) - 6.0f;
  save(dir / "x.npy", "<f4", kShape, x);
  const std::string k = kernel("scale_bias");
  for (const auto &[alpha, beta] :
       std::vector<std::pair<float, float>>{{2.5f, -1.0f}, {-0.125f, 3.0f}, {0.0f, 0.0f}}) {
    INFO("alpha " << alpha << ", beta " << beta);
    std::vector<float> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = x[i] * alpha + beta;  // exact here
    save(dir / "want.npy", "<f4", kShape, want);
    const Result r =
        trn_run({k, "--in", "x=" + (dir / "x.npy"), "--scalar", "alpha=" + std::to_string(alpha),
                 "--scalar", "beta=" + std::to_string(beta), "--expect", "y=" + (dir / "want.npy"),
                 "--atol", "0", "--rtol", "0"});
    INFO(r.output);
    CHECK(r.code == 0);
    CHECK_THAT(r.output, Catch::Contains("expect y: ok, 8192 elements"));
  }
  const std::string in = "x=" + (dir / "x.npy");
  const std::vector<std::pair<std::vector<std::string>, std::string>> errors = {
      {{k, "--in", in, "--scalar", "alpha=1"},
       "argument beta (scalar f32) needs a value: --scalar beta=VALUE"},
      {{k, "--in", in, "--scalar", "alpha=two", "--scalar", "beta=1"},
       "--scalar alpha: 'two' is not a number (f32: e.g. 2.5, -1e-3, inf, nan)"},
      {{k, "--in", in, "--scalar", "alpha=1e39", "--scalar", "beta=1"},
       "--scalar alpha: '1e39' is out of range for f32"},
      {{k, "--in", in, "--scalar", "alpha", "--scalar", "beta=1"},
       "--scalar 'alpha': expected NAME=VALUE"},
      {{k, "--in", in, "--scalar", "x=1", "--scalar", "alpha=1", "--scalar", "beta=1"},
       "--scalar x: argument x (in f32[128,64]) is a tensor; give it a file with --in x=FILE.npy"},
      {{k, "--in", in, "--in", "alpha=" + (dir / "x.npy"), "--scalar", "beta=1"},
       "--in alpha: argument alpha (scalar f32) is a scalar; give its value with --scalar "
       "alpha=VALUE"},
      {{k, "--in", in, "--scalar", "alpha=1", "--scalar", "beta=1", "--expect",
        "alpha=" + (dir / "x.npy")},
       "--expect alpha: argument alpha (scalar f32) is an input"},
  };
  for (const auto &[args, message] : errors) {
    const Result r = trn_run(args);
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Catch::Contains(message));
  }
}

TEST_CASE("trn-run: scalar values parse exactly or say why not", "[scalar]") {
  using trn::run::parse_scalar;
  trn_scalar_t v;
  CHECK_FALSE(parse_scalar("2.5", TRN_DTYPE_F32, &v));
  CHECK(v.f32 == 2.5f);
  CHECK(v.bits == std::bit_cast<uint32_t>(2.5f));  // the high bytes are zero
  CHECK_FALSE(parse_scalar("0x1p-3", TRN_DTYPE_F32, &v));
  CHECK(v.f32 == 0.125f);
  CHECK_FALSE(parse_scalar("-inf", TRN_DTYPE_F32, &v));
  CHECK(std::isinf(v.f32));
  CHECK_FALSE(parse_scalar("nan", TRN_DTYPE_F32, &v));
  CHECK(std::isnan(v.f32));
  CHECK_FALSE(parse_scalar("1e-45", TRN_DTYPE_F32, &v));  // underflow to a subnormal: a value
  CHECK(v.f32 > 0.0f);
  CHECK_FALSE(parse_scalar("-2147483648", TRN_DTYPE_I32, &v));
  CHECK(v.i32 == INT32_MIN);
  CHECK_FALSE(parse_scalar("2147483647", TRN_DTYPE_I32, &v));
  CHECK(v.i32 == INT32_MAX);
  const std::vector<std::tuple<std::string, trn_dtype_t, std::string>> bad = {
      {"", TRN_DTYPE_F32, "is not a number"},
      {"1.5x", TRN_DTYPE_F32, "is not a number"},
      {" 1", TRN_DTYPE_F32, "is not a number"},
      {"-3.5e38", TRN_DTYPE_F32, "is out of range for f32"},
      {"1.5", TRN_DTYPE_I32, "is not a decimal integer (i32)"},
      {"2147483648", TRN_DTYPE_I32, "is out of range for i32 (-2147483648..2147483647)"},
      {"-99999999999999999999", TRN_DTYPE_I32, "is out of range for i32"},
      {"1", TRN_DTYPE_BF16, "cannot be given (scalars are f32 or i32)"},
  };
  for (const auto &[text, dtype, why] : bad) {
    INFO("'" << text << "'");
    const auto err = parse_scalar(text, dtype, &v);
    REQUIRE(err);
    CHECK_THAT(*err, Catch::Contains(why));
  }
}

TEST_CASE("trn-run: errors exit 2 with a clear message") {
  SimEnv env;
  TempDir dir;
  VectorAddFiles files(dir);
  const std::string k = kernel("vector_add");
  Result r;
  std::vector<std::string> expected;
  SECTION("missing input") {
    r = trn_run({k, "--in", "a=" + files.a});
    expected = {"argument b (in f32[128,64]) needs an input: --in b=FILE.npy"};
  }
  SECTION("wrong dtype") {
    save(dir / "half.npy", "<f2", kShape, std::vector<uint16_t>(128 * 64));
    r = trn_run({k, "--in", "a=" + files.a, "--in", "b=" + (dir / "half.npy")});
    expected = {"--in b:", "'<f2' (128, 64)", "b (in f32[128,64])", "'float32'",
                "the dtype differs; convert it with numpy: python3 -c \"import numpy as np; "
                "np.save('" +
                    (dir / "half.npy") + "', np.load('" + (dir / "half.npy") +
                    "').astype('float32'))\""};
  }
  SECTION("wrong shape") {
    save(dir / "small.npy", "<f4", {64, 128}, std::vector<float>(128 * 64));
    r = trn_run({k, "--in", "a=" + (dir / "small.npy"), "--in", "b=" + files.b});
    expected = {"--in a:", "'<f4' (64, 128)", "shape (128, 64)", "the shape differs"};
  }
  SECTION("malformed .npy") {
    std::vector<std::byte> bytes = valid_file();
    bytes.resize(bytes.size() - 3);
    save_bytes(dir / "bad.npy", bytes);
    r = trn_run({k, "--in", "a=" + files.a, "--in", "b=" + (dir / "bad.npy")});
    expected = {"--in b: cannot read", "bad.npy", "truncated"};
  }
  SECTION("missing .npy file") {
    r = trn_run({k, "--in", "a=" + files.a, "--in", "b=" + (dir / "nope.npy")});
    expected = {"--in b: cannot read", "No such file or directory"};
  }
  SECTION("missing kernel file") {
    r = trn_run({dir / "missing.trnk", "--in", "a=" + files.a});
    expected = {"cannot read kernel file", "missing.trnk", "No such file or directory"};
  }
  SECTION("not a kernel") {
    r = trn_run({files.a, "--in", "a=" + files.a, "--in", "b=" + files.b});
    expected = {"loading kernel", "TRN_ERROR_INVALID_KERNEL"};
  }
  SECTION("an assembly file as the kernel") {
    r = trn_run({std::string(TRN_RUN_KERNEL_SOURCES) + "/vector_add.s", "--in", "a=" + files.a});
    expected = {
        "vector_add.s is assembly source, not a kernel binary: assemble it with trn-as "
        "first (trn-as ",
        "vector_add.trnk"};
  }
  SECTION("--in /dev/zero") {
    r = trn_run({k, "--in", "a=" + files.a, "--in", "b=/dev/zero"});
    expected = {"--in b: cannot read /dev/zero: it is a character device, not a regular file"};
  }
  SECTION("--in over the size limit") {
    { std::ofstream big(dir / "big.npy"); }
    std::filesystem::resize_file(dir / "big.npy", (uint64_t{16} << 30) + 1);
    r = trn_run({k, "--in", "a=" + files.a, "--in", "b=" + (dir / "big.npy")});
    expected = {"--in b: cannot read", "the limit is 16 GiB"};
  }
  SECTION("NaN and negative tolerances and timeouts") {
    for (const char *option : {"--rtol", "--atol", "--timeout"}) {
      for (const char *value : {"nan", "-1"}) {
        const Result bad =
            trn_run({k, "--in", "a=" + files.a, "--in", "b=" + files.b, option, value});
        INFO(option << " " << value << ": " << bad.output);
        CHECK(bad.code == 2);
        CHECK_THAT(bad.output, Catch::Contains(std::string("'") + value + "' is not"));
        CHECK(bad.output.size() < 400);  // no 309-digit DBL_MAX
      }
    }
    r = trn_run({k, "--in", "a=" + files.a, "--in", "b=" + files.b, "--repeat", "0"});
    expected = {"--repeat", "Value 0 not in range 1 to 4294967295"};
  }
  SECTION("unknown argument") {
    r = trn_run({k, "--in", "a=" + files.a, "--in", "b=" + files.b, "--in", "c=" + files.b});
    expected = {"--in c: kernel 'vector_add' has no argument 'c'",
                "a (in f32[128,64]), b (in f32[128,64]), out (out f32[128,64])"};
  }
  SECTION("--out for an input") {
    r = trn_run({k, "--in", "a=" + files.a, "--in", "b=" + files.b, "--out", "a=" + files.b});
    expected = {"--out a:", "is an input"};
  }
  SECTION("bad binding syntax") {
    r = trn_run({k, "--in", files.a});
    expected = {"expected NAME=FILE.npy"};
  }
  SECTION("no such core") {
    r = trn_run({k, "--in", "a=" + files.a, "--in", "b=" + files.b, "--core", "99"});
    expected = {"core 99 of the device is not visible"};
  }
  INFO(r.output);
  CHECK(r.code == 2);
  for (const std::string &part : expected) CHECK_THAT(r.output, Catch::Contains(part));
}

TEST_CASE("trn-run: a huge --timeout waits without limit, it does not time out at once") {
  SimEnv env;
  TempDir dir;
  VectorAddFiles files(dir);
  for (const char *timeout : {"1e19", "1e300", "inf"}) {
    const Result r = trn_run({kernel("vector_add"), "--in", "a=" + files.a, "--in", "b=" + files.b,
                              "--expect", "out=" + files.want, "--timeout", timeout});
    INFO(timeout << ": " << r.output);
    CHECK(r.code == 0);
  }
}

// The lines of a .s file that hold instructions (not blank, comment or directive lines).
std::set<uint32_t> instruction_lines(const std::string &path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::set<uint32_t> lines;
  uint32_t n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    const size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line[first] != ';' && line[first] != '#' &&
        line[first] != '.')
      lines.insert(n);
  }
  return lines;
}

TEST_CASE("trn-run: a fault and the trace name the line of the .s file") {
  SimEnv env;
  TempDir dir;
  VectorAddFiles files(dir);
  // overread.s faults at its line 12: no .loc in it, trn-as recorded the lines.
  const Result f = trn_run({kernel("overread"), "--in", "a=" + files.a, "--json"});
  INFO(f.output);
  REQUIRE(f.code == 3);
  CHECK_THAT(f.output, Catch::Contains("instruction 1 (dma_copy), source line 12:"));
  const json doc = parse_json(f.output.substr(f.output.find("\n{") + 1));
  CHECK(doc.at("fault").at("source_line") == 12);
  CHECK(doc.at("fault").at("instruction") == 1);

  // Every instruction event of the trace carries its line of vector_add.s.
  const std::string trace = dir / "trace.json";
  const Result r = trn_run(
      {kernel("vector_add"), "--in", "a=" + files.a, "--in", "b=" + files.b, "--profile", trace});
  INFO(r.output);
  REQUIRE(r.code == 0);
  std::ifstream in(trace);
  const json events = json::parse(in).at("traceEvents");
  const auto want = instruction_lines(std::string(TRN_RUN_KERNEL_SOURCES) + "/vector_add.s");
  std::set<uint32_t> seen;
  for (const json &e : events) {
    if (e.value("cat", "") != "instruction") continue;
    INFO(e.dump());
    REQUIRE(e.at("args").contains("line"));
    seen.insert(e.at("args").at("line").get<uint32_t>());
    // With its file: "source" is "<the .s file>:<line>".
    REQUIRE(e.at("args").contains("source"));
    CHECK_THAT(
        e.at("args").at("source").get<std::string>(),
        Catch::EndsWith("vector_add.s:" + std::to_string(e.at("args").at("line").get<uint32_t>())));
  }
  CHECK(seen == want);
}

TEST_CASE("trn-run: --profile writes a Chrome trace") {
  SimEnv env;
  TempDir dir;
  VectorAddFiles files(dir);
  const std::string trace = dir / "trace.json";
  const Result r = trn_run(
      {kernel("vector_add"), "--in", "a=" + files.a, "--in", "b=" + files.b, "--profile", trace});
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("trace written to " + trace));
  std::ifstream in(trace);
  REQUIRE(in.good());
  const json doc = json::parse(in);
  REQUIRE(doc.at("traceEvents").is_array());
  CHECK(!doc.at("traceEvents").empty());
}

TEST_CASE("trn-run: --json prints one object that parses") {
  SimEnv env;
  TempDir dir;
  VectorAddFiles files(dir);
  const Result r =
      trn_run({kernel("vector_add"), "--in", "a=" + files.a, "--in", "b=" + files.b, "--expect",
               "out=" + files.want, "--out", "out=" + (dir / "o.npy"), "--json", "--repeat", "2"});
  INFO(r.output);
  REQUIRE(r.code == 0);
  const json doc = parse_json(r.output);
  CHECK(doc.at("schema_version") == 1);
  CHECK(doc.at("kernel").at("name") == "vector_add");
  CHECK(doc.at("kernel").at("args").size() == 3);
  CHECK(doc.at("kernel").at("args").at(2).at("direction") == "out");
  CHECK(doc.at("launches") == 2);
  CHECK(doc.at("simulated_ns").get<uint64_t>() > 0);
  REQUIRE(doc.at("engines").size() == 5);
  CHECK(doc.at("engines").at(1).at("engine") == "vector");
  CHECK(doc.at("engines").at(1).at("instructions").get<uint64_t>() >= 1);
  CHECK(doc.at("dma").at("bytes").get<uint64_t>() >= 3 * 128 * 64 * 4);
  CHECK(doc.at("mfu_percent").is_number());
  REQUIRE(doc.at("expect").size() == 1);
  CHECK(doc.at("expect").at(0).at("ok") == true);
  CHECK(doc.at("expect").at(0).at("mismatches") == 0);
  CHECK(doc.at("outputs").at(0).at("path") == dir / "o.npy");
  CHECK(doc.at("trace").is_null());
  CHECK(doc.at("error").is_null());
  CHECK(doc.at("exit_code") == 0);

  // Errors are a JSON object too, with the exit code.
  const Result bad = trn_run({kernel("vector_add"), "--in", "a=" + files.a, "--json"});
  INFO(bad.output);
  CHECK(bad.code == 2);
  const json err = parse_json(bad.output.substr(bad.output.find("\n{") + 1));
  CHECK(err.at("exit_code") == 2);
  CHECK_THAT(err.at("error").get<std::string>(), Catch::Contains("needs an input"));
}

TEST_CASE("trn-run: bf16 arguments take uint16 bit patterns or a bfloat16 descr") {
  SimEnv env;
  TempDir dir;
  std::vector<uint16_t> bits(32);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<uint16_t>(0x3f80 + i * 3);
  save(dir / "x.npy", "<u2", {4, 8}, bits);
  Result r = trn_run({kernel("copy_bf16"), "--in", "x=" + (dir / "x.npy"), "--out",
                      "y=" + (dir / "y.npy"), "--expect", "y=" + (dir / "x.npy")});
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("bfloat16 bit patterns"));
  CHECK(load<uint16_t>(dir / "y.npy", "<u2", {4, 8}) == bits);

  save(dir / "xb.npy", "bfloat16", {4, 8}, bits);  // as an ml_dtypes-aware writer may name it
  r = trn_run(
      {kernel("copy_bf16"), "--in", "x=" + (dir / "xb.npy"), "--expect", "y=" + (dir / "xb.npy")});
  INFO(r.output);
  CHECK(r.code == 0);

  // float32 expected values compare by value: bf16 0x3f80 is 1.0.
  std::vector<float> values(32);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint32_t f = static_cast<uint32_t>(bits[i]) << 16;
    std::memcpy(&values[i], &f, sizeof f);
  }
  save(dir / "values.npy", "<f4", {4, 8}, values);
  r = trn_run({kernel("copy_bf16"), "--in", "x=" + (dir / "x.npy"), "--expect",
               "y=" + (dir / "values.npy")});
  INFO(r.output);
  CHECK(r.code == 0);

  save(dir / "i16.npy", "<i2", {4, 8}, bits);  // int16 is not a bf16 bit pattern
  r = trn_run({kernel("copy_bf16"), "--in", "x=" + (dir / "i16.npy")});
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Catch::Contains("or '<u2' bit patterns"));
}

TEST_CASE("trn-run: a kernel fault prints the fault record and exits 3") {
  SimEnv env;
  TempDir dir;
  for (const char *mode : {"text", "json"}) {
    std::vector<std::string> args = {kernel("stuck"), "--timeout", "30"};
    if (std::string(mode) == "json") args.push_back("--json");
    const Result r = trn_run(args);
    INFO(r.output);
    CHECK(r.code == 3);
    CHECK_THAT(r.output, Catch::Contains("kernel fault"));
    CHECK_THAT(r.output, Catch::Contains("'stuck'"));
    if (std::string(mode) == "json") {
      const json doc = parse_json(r.output.substr(r.output.find("\n{") + 1));
      CHECK(doc.at("exit_code") == 3);
      CHECK(doc.at("fault").at("kernel") == "stuck");
    }
  }
}

TEST_CASE("trn-run: npy round trip", "[npy]") {
  TempDir dir;
  const std::vector<float> f = {1.5f, -2.0f, 3.25f, 0.0f, 1e30f, -0.0f};
  save(dir / "f.npy", "<f4", {2, 3}, f);
  CHECK(load<float>(dir / "f.npy", "<f4", {2, 3}) == f);

  const std::vector<int8_t> i8 = {-128, -1, 0, 1, 127};
  save(dir / "i8.npy", "|i1", {5}, i8);
  CHECK(load<int8_t>(dir / "i8.npy", "|i1", {5}) == i8);

  save(dir / "scalar.npy", "<i4", {}, std::vector<int32_t>{42});
  CHECK(load<int32_t>(dir / "scalar.npy", "<i4", {}) == std::vector<int32_t>{42});

  save(dir / "empty.npy", "<f2", {3, 0, 2}, std::vector<uint16_t>{});
  CHECK(load<uint16_t>(dir / "empty.npy", "<f2", {3, 0, 2}).empty());

  // The header is what numpy writes: a 64-byte aligned dict ending in a newline.
  const auto bytes = valid_file();
  const std::string text(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  CHECK(text.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
  CHECK(text.find("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }") == 10);
  CHECK((bytes.size() - 24) % 64 == 0);
  CHECK(text[bytes.size() - 25] == '\n');

  // Version 2.0 and 3.0 headers, and the variations numpy and Python accept.
  for (const char *version : {"\x02", "\x03"}) {
    std::string header = "{\"descr\": \"<u2\", \"shape\": (2,), \"fortran_order\": False}\n";
    std::vector<std::byte> v;
    for (char c : std::string("\x93NUMPY", 6) + version + std::string(1, '\0'))
      v.push_back(static_cast<std::byte>(c));
    for (int i = 0; i < 4; ++i) v.push_back(static_cast<std::byte>(i == 0 ? header.size() : 0));
    for (char c : header) v.push_back(static_cast<std::byte>(c));
    for (int i = 0; i < 4; ++i) v.push_back(static_cast<std::byte>(i + 1));
    npy::Array a;
    const auto err = npy::parse(v, a);
    INFO(err.value_or(""));
    REQUIRE_FALSE(err);
    CHECK(a.shape == std::vector<uint64_t>{2});
    CHECK(a.dtype.kind == 'u');
    CHECK(a.data.size() == 4);
  }
  npy::Array named;
  REQUIRE_FALSE(npy::parse(
      with_header("{'descr': 'float8_e4m3fn', 'fortran_order': False, 'shape': (3L,), }", 3),
      named));
  CHECK(named.dtype.kind == 'n');
  CHECK(named.dtype.name == "float8_e4m3fn");
}

TEST_CASE("trn-run: npy malformed headers are rejected", "[npy]") {
  const auto valid = valid_file();
  SECTION("truncated at every length") {
    for (size_t n = 0; n < valid.size(); ++n) {
      const std::vector<std::byte> cut(valid.begin(), valid.begin() + static_cast<ptrdiff_t>(n));
      CHECK_FALSE(parse_error(cut).empty());
    }
    std::vector<std::byte> cut(valid.begin(), valid.end() - 1);
    CHECK_THAT(parse_error(cut), Catch::Contains("truncated"));
  }
  SECTION("bad magic") {
    auto bad = valid;
    bad[1] = std::byte{'X'};
    CHECK_THAT(parse_error(bad), Catch::Contains("bad magic"));
    CHECK_THAT(parse_error({}), Catch::Contains("bad magic"));
  }
  SECTION("bad version") {
    auto bad = valid;
    bad[6] = std::byte{9};
    CHECK_THAT(parse_error(bad), Catch::Contains("unsupported .npy format version 9.0"));
  }
  SECTION("header length past the end") {
    auto bad = valid;
    bad[8] = std::byte{0xff};
    bad[9] = std::byte{0x7f};
    CHECK_THAT(parse_error(bad), Catch::Contains("truncated"));
  }
  SECTION("bad dict") {
    for (const char *header :
         {"",
          "{",
          "}",
          "[1, 2]",
          "{'descr': '<f4', 'fortran_order': False, 'shape': (2,3)",
          "{'descr': '<f4' 'fortran_order': False}",
          "{descr: '<f4'}",
          "{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}",
          "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} extra",
          "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,)}",
          "{'descr': '<f4', 'fortran_order': False}",
          "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
          "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}",
          "{'descr': 4, 'fortran_order': False, 'shape': (1,)}",
          "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}",
          "{'descr': '<f4', 'fortran_order': False, 'shape': 1}",
          "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
          "{'descr': '<f4', 'fortran_order': False, 'shape': ('a',)}",
          "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,)}",
          "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}",
          "{'descr': '<f4', 'fortran_order': False, 'shape': (1,,)}"}) {
      INFO(header);
      CHECK_FALSE(parse_error(with_header(header, 4)).empty());
    }
    CHECK_THAT(parse_error(with_header(std::string(10000, '(') + "1", 0)),
               Catch::Contains("nesting too deep"));
    CHECK_THAT(parse_error(with_header("{'descr': [('a', '<f4')], 'fortran_order': False, "
                                       "'shape': (1,)}",
                                       4)),
               Catch::Contains("structured dtypes") && Catch::Contains("a['name']"));
  }
  SECTION("unsupported layouts and dtypes") {
    CHECK_THAT(
        parse_error(with_header("{'descr': '<f4', 'fortran_order': True, 'shape': (1,)}", 4)),
        Catch::Contains("fortran_order True is not supported"));
    CHECK_THAT(
        parse_error(with_header("{'descr': '>f4', 'fortran_order': False, 'shape': (1,)}", 4)),
        Catch::Contains("big-endian"));
    CHECK_THAT(
        parse_error(with_header("{'descr': '|O', 'fortran_order': False, 'shape': (1,)}", 8)),
        Catch::Contains("unsupported dtype descr '|O': an object array holds Python objects") &&
            Catch::Contains("np.asarray(a, dtype=np.float32)"));
    CHECK_THAT(
        parse_error(with_header("{'descr': '<c8', 'fortran_order': False, 'shape': (1,)}", 8)),
        Catch::Contains("complex arrays have no trn dtype") && Catch::Contains("a.real"));
    CHECK_THAT(
        parse_error(with_header("{'descr': '<U4', 'fortran_order': False, 'shape': (1,)}", 16)),
        Catch::Contains("astype(np.float32)"));
    // A big-endian single byte has no byte order: accepted.
    CHECK(parse_error(with_header("{'descr': '>u1', 'fortran_order': False, 'shape': (1,)}", 1))
              .empty());
  }
  SECTION("data size must match the shape") {
    CHECK_THAT(
        parse_error(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 7)),
        Catch::Contains("needs 8 data bytes, the file has 7"));
    CHECK_THAT(
        parse_error(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 9)),
        Catch::Contains("1 bytes after the array data"));
  }
  SECTION("random corruption never crashes") {
    std::mt19937 rng(1234);
    for (int i = 0; i < 3000; ++i) {
      auto bytes = valid;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f)
        bytes[rng() % bytes.size()] = static_cast<std::byte>(rng() & 0xff);
      npy::Array a;
      if (!npy::parse(bytes, a)) CHECK(a.data.size() == a.elements() * a.dtype.itemsize);
    }
  }
}

TEST_CASE("trn-run: --core counts the visible cores, reports name the physical core") {
  SimEnv env;
  TempDir dir;
  VectorAddFiles files(dir);
  const std::vector<std::string> run = {
      kernel("vector_add"), "--in",     "a=" + files.a,     "--in",
      "b=" + files.b,       "--expect", "out=" + files.want};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = run;
    args.insert(args.end(), extra.begin(), extra.end());
    return trn_run(args);
  };

  env.set("TRN_VISIBLE_CORES", "3");
  Result r = with({});  // the default core: the first visible one
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("kernel vector_add on device 0 core 3"));

  env.set("TRN_VISIBLE_CORES", "2,5");
  r = with({"--core", "1", "--json"});
  INFO(r.output);
  REQUIRE(r.code == 0);
  const json doc = parse_json(r.output);
  CHECK(doc.at("core") == 5);
  CHECK(doc.at("core_id") == 5);
  r = with({"--core", "0"});
  CHECK_THAT(r.output, Catch::Contains("on device 0 core 2"));
  r = with({"--core", "2"});
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Catch::Contains("core 2 of the device is not visible") &&
                           Catch::Contains("--core 0-1"));

  // Core ids are global: the second device's first core is id 8.
  env.set("TRN_SIM_DEVICES", "2");
  env.set("TRN_VISIBLE_CORES", "9");
  r = with({"--device", "1", "--json"});
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(parse_json(r.output).at("core") == 1);
  CHECK(parse_json(r.output).at("core_id") == 9);
  r = with({"--device", "0"});
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Catch::Contains("sees no core of this device"));
}

TEST_CASE("trn-run: a busy core's error names --core and the cores that are free") {
  SimEnv env;
  TempDir dir;
  VectorAddFiles files(dir);
  trn::test::Child holder({TRN_TEST_HOLDER, "0", "2"});
  REQUIRE(holder.read_line(20000) == "ready " + std::to_string(holder.pid()));
  const Result r = trn_run({kernel("vector_add"), "--in", "a=" + files.a, "--in", "b=" + files.b});
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Catch::Contains("TRN_ERROR_CORE_BUSY") &&
                           Catch::Contains(std::to_string(holder.pid())) &&
                           Catch::Contains("pass --core 1,3-7 (free now)"));
}

TEST_CASE("trn-top's engine table shows the engines of a kernel trn-run keeps launching") {
  SimEnv env;
  TempDir dir;
  VectorAddFiles files(dir);
  trn::test::Child run({TRN_RUN_PATH, kernel("vector_add"), "--in", "a=" + files.a, "--in",
                        "b=" + files.b, "--repeat", "1000000"});
  // Until a frame shows core 0 running kernels (trn-run first loads the kernel), at most 20 s.
  bool seen = false;
  std::string top;
  for (int attempt = 0; attempt < 20 && !seen; ++attempt) {
    int status = 0;
    top = run_command({TRN_TOP_PATH, "-b", "-n", "2", "-d", "300", "--engines"}, 20000, &status);
    std::istringstream lines(top);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream fields(line);
      std::string core, owner, kernels, utilization, tensor, vector;
      if (fields >> core >> owner >> kernels >> utilization >> tensor >> vector && core == "0" &&
          kernels != "-" && std::stod(kernels) > 0 && std::stod(vector) > 0)
        seen = true;
    }
  }
  INFO(top);
  CHECK(seen);
}
