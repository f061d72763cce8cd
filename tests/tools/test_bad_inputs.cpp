// The tools given bad files and flags: a directory, an endless file (/dev/zero, a FIFO) or a file
// over the size limit is refused with a message, never read, never a crash or a hang; assembly
// that breaks the ISA's rules is refused by trn-as against its --target; trn-bench refuses
// flags it does not know.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/subprocess.hpp"

namespace {

constexpr int kTimeoutMs = 30000;

struct Result {
  int code = -1;  // the exit status, or 128 + the signal
  std::string output;
};

Result run(const std::vector<std::string> &argv) {
  int status = 0;
  Result r;
  r.output = trn::test::run_command(argv, kTimeoutMs, &status);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/trn-bad-input-XXXXXX";
    REQUIRE(mkdtemp(pattern) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string &path() const { return path_; }
  std::string operator/(const std::string &name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void write_text(const std::string &path, const std::string &text) {
  std::ofstream out(path);
  out << text;
  REQUIRE(out.good());
}

// A file of `bytes` bytes that takes no space (sparse).
void sparse_file(const std::string &path, uint64_t bytes) {
  { std::ofstream out(path); }
  std::filesystem::resize_file(path, bytes);
}

void expect_refused(const Result &r, int code, const std::vector<std::string> &parts) {
  INFO(r.output);
  CHECK(r.code == code);
  for (const std::string &part : parts) CHECK_THAT(r.output, Catch::Contains(part));
}

const std::string kHeader =
    ".kernel k\n.arg a in f32[128,512]\n.engine vector\n";  // the next line is line 4

}  // namespace

TEST_CASE("tools: a directory is not an input file", "[tools]") {
  TempDir dir;
  expect_refused(run({TRN_OBJDUMP_PATH, dir.path()}), 1,
                 {"trn-objdump: cannot read", "it is a directory, not a regular file"});
  expect_refused(run({TRN_AS_PATH, dir.path(), "-o", dir / "k.trnk"}), 1,
                 {"trn-as: cannot read", "it is a directory, not a regular file"});
  CHECK_FALSE(std::filesystem::exists(dir / "k.trnk"));
  expect_refused(run({TRN_RUN_PATH, dir.path()}), 2,
                 {"trn-run: cannot read kernel file", "it is a directory"});
}

TEST_CASE("tools: endless files (/dev/zero, a FIFO) are refused, not read", "[tools]") {
  TempDir dir;
  const std::string fifo = dir / "fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  for (const std::string &endless : {std::string("/dev/zero"), fifo}) {
    INFO(endless);
    const std::string kind = endless == fifo ? "a pipe (FIFO)" : "a character device";
    expect_refused(run({TRN_OBJDUMP_PATH, endless}), 1, {"it is " + kind + ", not a regular file"});
    expect_refused(run({TRN_AS_PATH, endless, "-o", dir / "k.trnk"}), 1,
                   {"it is " + kind + ", not a regular file"});
    expect_refused(run({TRN_RUN_PATH, endless}), 2, {"cannot read kernel file", "it is " + kind});
  }
}

TEST_CASE("tools: files over the size limit are refused, naming the limit", "[tools]") {
  TempDir dir;
  const std::string big = dir / "big.trnk";
  sparse_file(big, (uint64_t{1} << 30) + 1);
  expect_refused(run({TRN_OBJDUMP_PATH, big}), 1, {"the limit is 1 GiB"});
  expect_refused(run({TRN_AS_PATH, big, "-o", dir / "k.trnk"}), 1, {"the limit is 1 GiB"});
  expect_refused(run({TRN_RUN_PATH, big}), 2, {"cannot read kernel file", "the limit is 1 GiB"});
}

TEST_CASE("tools: trn-as checks SBUF ranges against --target", "[tools]") {
  TempDir dir;
  const std::string src = dir / "past.s";
  write_text(src, kHeader + "memset sbuf.f32 p0:128 @229000 [1,512], 0\n");
  expect_refused(run({TRN_AS_PATH, src, "-o", dir / "k.trnk"}), 1,
                 {"past.s:4: error: vector[0] memset: dst reaches bytes [229000, 231048) of each "
                  "SBUF partition, which has 229376 bytes on NeuronCore-v3"});
  CHECK_FALSE(std::filesystem::exists(dir / "k.trnk"));
  // trn3's partitions have 256 KiB.
  const Result ok = run({TRN_AS_PATH, src, "--target", "trn3", "-o", dir / "k.trnk"});
  INFO(ok.output);
  CHECK(ok.code == 0);
}

TEST_CASE("tools: trn-as refuses tensor_tensor bypass and duplicate operands", "[tools]") {
  TempDir dir;
  const std::string tile = ".tile t = sbuf.f32 p0:128 [1,64]\n";
  write_text(dir / "bypass.s", kHeader + tile + "tensor_tensor bypass t, t, t\n");
  expect_refused(run({TRN_AS_PATH, dir / "bypass.s", "-o", dir / "k.trnk"}), 1,
                 {"bypass.s:5: error: vector[0] tensor_tensor:", "use tensor_copy"});
  write_text(dir / "bias.s", ".kernel k\n" + tile +
                                 ".tile tb = sbuf.f32 p0:128 @4096 [1,1]\n.engine scalar\n"
                                 "activation relu t, t bias=0.5 bias=tb\n");
  expect_refused(run({TRN_AS_PATH, dir / "bias.s", "-o", dir / "k.trnk"}), 1,
                 {"bias.s:5:31: error: bias given twice"});
}

TEST_CASE("tools: trn-bench refuses arguments it does not know", "[tools]") {
  expect_refused(run({TRN_BENCH_PATH, "alloc", "--quik"}), 2,
                 {"trn-bench alloc: unknown argument '--quik' (it takes --quick)"});
  expect_refused(run({TRN_BENCH_PATH, "matmul", "--quick", "--trn4"}), 2,
                 {"unknown argument '--trn4' (it takes --quick, --trn1, --trn3)"});
}

TEST_CASE("tools: a usage error is one line naming the tool, and exit status 2", "[tools]") {
  const std::vector<std::pair<std::string, std::string>> tools = {
      {TRN_LS_PATH, "trn-ls"},           {TRN_TOP_PATH, "trn-top"},
      {TRN_MONITOR_PATH, "trn-monitor"}, {TRN_AS_PATH, "trn-as"},
      {TRN_OBJDUMP_PATH, "trn-objdump"}, {TRN_RUN_PATH, "trn-run"},
      {TRN_LOAD_PATH, "trn-load"},       {TRN_COMM_TEST_PATH, "trn-comm-test"}};
  for (const auto &[path, name] : tools) {
    INFO(name);
    const Result r = run({path, "--no-such-option", "x"});
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK(r.output.rfind(name + ": ", 0) == 0);
    CHECK(r.output.find(name + " --help lists the options") != std::string::npos);
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  }
  // trn-run --json: the error is a JSON object on stdout too.
  const Result r = run({TRN_RUN_PATH, "--json"});
  CHECK(r.code == 2);
  CHECK(r.output.find("\"exit_code\": 2") != std::string::npos);
}
