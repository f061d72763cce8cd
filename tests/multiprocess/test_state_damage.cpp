// Damaged device state never kills a process: the state and memory files are scribbled with
// random bytes, zeroed and truncated (at rest and while a process uses them), and each time
// trn-ls and an API program (trn-test-state-probe) must end on their own, by an exit, within a
// deadline, and any error they report names the damaged file.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "sim/state_layout.hpp"
#include "support/sim_env.hpp"
#include "support/subprocess.hpp"
#include "trn/trn.h"

using trn::sim::StateFile;
using trn::sim::StateHeader;
using trn::test::Child;
using trn::test::run_command;
using trn::test::SimEnv;

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// Random cases per test case (two test cases): at least 100 per run in every build.
constexpr int kRandomCases = kSanitized ? 50 : 80;
// A child that runs longer than this is hung (a healthy one takes well under a second).
constexpr int kChildDeadlineMs = kSanitized ? 20000 : 8000;
constexpr uint64_t kHbmBytes = 64ull << 20;  // 32 chunks: a small chunk table

using trn::test::now_ms;

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// Runs a program to its end and checks how it ended: by an exit (any code), in time, and with
// an exit code other than 0 only with a message naming a file under the root.
void expect_clean_end(const SimEnv &env, const std::vector<std::string> &argv) {
  int status = 0;
  const long long start = now_ms();
  const std::string output = run_command(argv, kChildDeadlineMs, &status);
  const long long took = now_ms() - start;
  INFO(argv[0] << " " << (argv.size() > 1 ? argv[1] : "") << ": " << describe_status(status)
               << " after " << took << " ms, output:\n"
               << output);
  REQUIRE(took < kChildDeadlineMs);
  REQUIRE(WIFEXITED(status));
  if (WEXITSTATUS(status) != 0) CHECK(output.find(env.root() + "/device0.") != std::string::npos);
}

void expect_tools_survive(const SimEnv &env) {
  expect_clean_end(env, {TRN_LS_PATH});
  expect_clean_end(env, {TRN_LS_PATH, "-w"});
  expect_clean_end(env, {TRN_STATE_PROBE_PATH, "run"});
}

std::vector<uint8_t> read_file(const std::string &path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  struct stat st {};
  REQUIRE(fstat(fd, &st) == 0);
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  REQUIRE(pread(fd, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()));
  close(fd);
  return bytes;
}

void write_file(const std::string &path, const std::vector<uint8_t> &bytes) {
  const int fd = open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(pwrite(fd, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()));
  close(fd);
}

void patch(const std::string &path, size_t offset, const std::vector<uint8_t> &bytes) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)) ==
          static_cast<ssize_t>(bytes.size()));
  close(fd);
}

// A device with a used state: created by the probe, so slots, cores and exports have records.
struct Device {
  SimEnv env;
  std::string state;
  std::string hbm;
  std::vector<uint8_t> pristine;

  Device() {
    env.set("TRN_SIM_HBM_BYTES", std::to_string(kHbmBytes).c_str());
    state = env.root() + "/device0.state";
    hbm = env.root() + "/device0.hbm";
    expect_clean_end(env, {TRN_STATE_PROBE_PATH, "run"});
    pristine = read_file(state);
    REQUIRE(pristine.size() == sizeof(StateFile));
  }
  void restore() {
    write_file(state, pristine);
    REQUIRE(truncate(hbm.c_str(), static_cast<off_t>(kHbmBytes)) == 0);
  }
};

// Where random bytes land: anywhere in the body, or over one structure of it.
struct Region {
  const char *name;
  size_t offset;
  size_t size;
};

const std::vector<Region> &regions() {
  using trn::sim::MemoryControl;
  static const std::vector<Region> all = {
      {"body", sizeof(StateHeader), sizeof(StateFile) - sizeof(StateHeader)},
      {"slots", offsetof(StateFile, slots), sizeof(StateFile::slots)},
      {"slot memory", offsetof(StateFile, slot_memory), sizeof(StateFile::slot_memory)},
      {"cores", offsetof(StateFile, cores), sizeof(StateFile::cores)},
      {"memory control", offsetof(StateFile, memory), offsetof(MemoryControl, exports)},
      {"exports", offsetof(StateFile, memory) + offsetof(MemoryControl, exports),
       sizeof(MemoryControl::exports)},
      {"semaphore records", offsetof(StateFile, memory) + offsetof(MemoryControl, sem_records),
       sizeof(MemoryControl::sem_records)},
      {"chunk table", offsetof(StateFile, memory) + offsetof(MemoryControl, chunk_owner),
       kHbmBytes / trn::sim::kChunkBytes * sizeof(uint16_t)},
  };
  return all;
}

void random_cases(uint32_t seed) {
  Device device;
  std::mt19937 random(seed);
  for (int i = 0; i < kRandomCases; ++i) {
    const Region &region = regions()[random() % regions().size()];
    // A whole region, a short span or a single word.
    const size_t shape = random() % 3;
    size_t length = shape == 0 ? region.size : shape == 1 ? 1 + random() % 256 : 8;
    length = std::min(length, region.size);
    const size_t offset = region.offset + random() % (region.size - length + 1);
    std::vector<uint8_t> bytes(length);
    for (auto &b : bytes) b = static_cast<uint8_t>(random());
    INFO("seed " << seed << " case " << i << ": " << length << " random bytes at " << offset << " ("
                 << region.name << ")");
    device.restore();
    patch(device.state, offset, bytes);
    expect_tools_survive(device.env);
  }
}

}  // namespace

TEST_CASE("random bytes in the device state never kill trn-ls or an API program", "[damage]") {
  random_cases(12345);
}

TEST_CASE("more random bytes in the device state never kill trn-ls or an API program", "[damage]") {
  random_cases(std::random_device{}());
}

TEST_CASE("a zeroed state header or body never kills trn-ls or an API program", "[damage]") {
  Device device;
  for (const Region &region : regions()) {
    INFO("zeroed " << region.name);
    device.restore();
    patch(device.state, region.offset, std::vector<uint8_t>(region.size, 0));
    expect_tools_survive(device.env);
  }
  INFO("zeroed header");
  device.restore();
  patch(device.state, 0, std::vector<uint8_t>(sizeof(StateHeader), 0));
  expect_tools_survive(device.env);
}

TEST_CASE("a truncated state or memory file never kills trn-ls or an API program", "[damage]") {
  Device device;
  const size_t state_lengths[] = {0,
                                  1,
                                  sizeof(StateHeader) - 1,
                                  sizeof(StateHeader),
                                  offsetof(StateFile, memory),
                                  sizeof(StateFile) - 1,
                                  sizeof(StateFile) + 4096};
  for (size_t length : state_lengths) {
    INFO("state file truncated to " << length << " bytes");
    device.restore();
    REQUIRE(truncate(device.state.c_str(), static_cast<off_t>(length)) == 0);
    expect_tools_survive(device.env);
  }
  const uint64_t hbm_lengths[] = {
      0, 1, trn::sim::kChunkBytes, kHbmBytes / 2, kHbmBytes - 1, kHbmBytes + trn::sim::kChunkBytes};
  for (uint64_t length : hbm_lengths) {
    INFO("memory file truncated to " << length << " bytes");
    device.restore();
    REQUIRE(truncate(device.hbm.c_str(), static_cast<off_t>(length)) == 0);
    expect_tools_survive(device.env);
  }
}

namespace {

// A process holding mapped device memory sees `path` shrink under it, then writes through the
// API and reads through its mapping: it must end by an exit with a message naming the file.
void shrink_under_a_user(const std::string &which) {
  Device device;
  const std::string path = which == "state" ? device.state : device.hbm;
  Child probe({TRN_STATE_PROBE_PATH, "hold-map"});
  const std::string ready = probe.read_line(kChildDeadlineMs);
  REQUIRE(ready == "ready " + std::to_string(probe.pid()));
  REQUIRE(truncate(path.c_str(), 0) == 0);
  probe.close_stdin();  // the probe goes on
  std::string output;
  for (std::string line; !(line = probe.read_line(kChildDeadlineMs)).empty();)
    output += line + "\n";
  const int status = probe.wait(kChildDeadlineMs);
  INFO(which << " file truncated while in use; " << describe_status(status) << ", output:\n"
             << output);
  REQUIRE(status != -1);
  REQUIRE(WIFEXITED(status));
  CHECK(output.find(path) != std::string::npos);
  expect_tools_survive(device.env);
}

}  // namespace

TEST_CASE("the memory file shrinking under a process that maps it gives a message and no SIGBUS",
          "[damage]") {
  shrink_under_a_user("hbm");
}

TEST_CASE("the state file shrinking under a process that uses it gives a message and no SIGBUS",
          "[damage]") {
  shrink_under_a_user("state");
}
