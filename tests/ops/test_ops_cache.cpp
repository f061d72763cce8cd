// The kernel cache: compile on first use, then a hit in memory; a second process finds the
// kernel on disk; a damaged entry is detected, logged and rebuilt; processes writing the same
// entry at once all succeed and leave one whole entry; the memory bound evicts least recently
// used kernels; the cache can be switched off; only a directory of the user's own that nobody else
// can write is used, and its entries carry the kernels' build fingerprint.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "ops/kernels_fingerprint.hpp"
#include "ops_fixture.hpp"
#include "support/subprocess.hpp"

using namespace trn::test;
namespace fs = std::filesystem;

namespace {

const char *const kProbe = TRN_OPS_CACHE_PROBE;

// The probe's counters line ("ok builds=1 disk_hits=0 corrupt=0 disk_writes=1"), run with the
// test's simulated device and `cache_dir`; `log` receives the rest of what it printed.
std::string probe(const std::string &cache_dir, std::string *log = nullptr) {
  setenv("TRN_CACHE_DIR", cache_dir.c_str(), 1);
  const ProgramResult r = run_program({kProbe, "0"}, 120'000);
  unsetenv("TRN_CACHE_DIR");
  INFO(r.output);
  REQUIRE(r.code == 0);
  const size_t at = r.output.find("ok ");
  REQUIRE(at != std::string::npos);
  if (log) *log = r.output.substr(0, at);
  return r.output.substr(at, r.output.find('\n', at) - at);
}

std::vector<fs::path> entries(const std::string &dir) {
  std::vector<fs::path> out;
  if (!fs::exists(dir)) return out;
  for (const auto &e : fs::directory_iterator(dir)) out.push_back(e.path());
  return out;
}

// The one entry a first probe on an empty `dir` builds and writes.
fs::path first_entry(const std::string &dir) {
  CHECK(probe(dir) == "ok builds=1 disk_hits=0 corrupt=0 disk_writes=1");
  const std::vector<fs::path> e = entries(dir);
  REQUIRE(e.size() == 1);
  return e[0];
}

constexpr fs::perms kOwnerReadWrite = fs::perms::owner_read | fs::perms::owner_write;

void run_exp(OpsFixture &f, const Shape &shape) {
  std::mt19937 rng(1);
  const host_array x = random_array(rng, shape, TRN_DTYPE_F32);
  DeviceTensor tx = f.tensor(TRN_DTYPE_F32, x), ty = f.tensor(TRN_DTYPE_F32, shape);
  INFO(ops_error());
  REQUIRE(trn_ops_unary(f.queue(), TRN_OPS_EXP, ty.get(), tx.get(), nullptr) == TRN_SUCCESS);
  require_close(f.read(ty), trn::ops::host::unary(trn::ops::host::Unary::kExp, x), 1e-5, "exp");
}

}  // namespace

TEST_CASE("a kernel is built on first use, then found in memory, then on disk", "[ops][cache]") {
  OpsFixture f;
  run_exp(f, {128, 64});
  trn_ops_cache_stats_t s = cache_stats();
  CHECK(s.builds == 1);
  CHECK(s.memory_hits == 0);
  CHECK(s.disk_writes == 1);
  CHECK(s.memory_entries == 1);
  CHECK(s.memory_bytes > 0);
  CHECK(s.build_ns > 0);
  run_exp(f, {128, 64});
  s = cache_stats();
  CHECK(s.builds == 1);
  CHECK(s.memory_hits == 1);
  REQUIRE(entries(f.cache_dir()).size() == 1);
  CHECK(entries(f.cache_dir())[0].extension() == ".trnk");
  // Another shape is another kernel.
  run_exp(f, {128, 65});
  CHECK(cache_stats().builds == 2);
  // With memory let go, the kernels come from disk.
  REQUIRE(trn_ops_cache_clear() == TRN_SUCCESS);
  run_exp(f, {128, 64});
  s = cache_stats();
  CHECK(s.builds == 0);
  CHECK(s.disk_hits == 1);
  CHECK(s.disk_load_ns > 0);
}

TEST_CASE("a second process finds the kernel in the disk cache", "[ops][cache][process]") {
  SimEnv env;
  TempDir files;
  const std::string dir = files.file("cache");
  CHECK(probe(dir) == "ok builds=1 disk_hits=0 corrupt=0 disk_writes=1");
  CHECK(probe(dir) == "ok builds=0 disk_hits=1 corrupt=0 disk_writes=0");
}

TEST_CASE("a damaged or truncated entry is detected, logged and rebuilt", "[ops][cache][process]") {
  SimEnv env;
  TempDir files;
  const std::string dir = files.file("cache");
  CHECK(probe(dir) == "ok builds=1 disk_hits=0 corrupt=0 disk_writes=1");
  const std::vector<fs::path> e = entries(dir);
  REQUIRE(e.size() == 1);
  const auto size = fs::file_size(e[0]);
  SECTION("a flipped byte in the kernel") {
    std::fstream file(e[0], std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(size - 9));
    char c = 0;
    file.read(&c, 1);
    file.seekp(static_cast<std::streamoff>(size - 9));
    c = static_cast<char>(c ^ 0x5a);
    file.write(&c, 1);
  }
  SECTION("a truncated entry") {
    fs::resize_file(e[0], size / 2);
  }
  SECTION("garbage") {
    std::ofstream(e[0], std::ios::binary | std::ios::trunc) << "not a cache entry";
  }
  std::string log;
  CHECK(probe(dir, &log) == "ok builds=1 disk_hits=0 corrupt=1 disk_writes=1");
  CHECK(log.find("kernel cache entry is corrupt, rebuilding it") != std::string::npos);
  CHECK(probe(dir) == "ok builds=0 disk_hits=1 corrupt=0 disk_writes=0");
}

TEST_CASE("the disk cache is the user's alone: directories 0700, entries 0600, keyed by the build",
          "[ops][cache][process]") {
  SimEnv env;
  TempDir files;
  const std::string dir = files.file("cache/trn");  // its parent is made too
  const fs::path entry = first_entry(dir);
  for (const std::string &made : {files.file("cache"), dir})
    CHECK((fs::status(made).permissions() & fs::perms::all) == fs::perms::owner_all);
  CHECK((fs::status(entry).permissions() & fs::perms::all) == kOwnerReadWrite);
  // Its key names the kernels' fingerprint of this build: an edit to a kernel misses it.
  std::ifstream in(entry, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(bytes.find(std::string("|kernels") + TRN_KERNELS_FINGERPRINT) != std::string::npos);
}

TEST_CASE("a cache directory that others can write or another user owns is never used",
          "[ops][cache][process][negative]") {
  // Whoever can write the directory chooses the code the device runs: with an entry of the
  // right key already there, nothing of it is read or written, and the op is still right.
  SimEnv env;
  TempDir files;
  const std::string dir = files.file("cache");
  first_entry(dir);
  std::string why;
  SECTION("writable by others") {
    fs::permissions(dir, fs::perms::all);
    why = "is writable by others (mode 0777)";
  }
  SECTION("writable by its group") {
    fs::permissions(dir, fs::perms::owner_all | fs::perms::group_all);
    why = "is writable by its group (mode 0770)";
  }
  SECTION("owned by another user") {
    if (geteuid() != 0) {
      WARN("not root: another user's directory cannot be made here");
      return;
    }
    REQUIRE(chown(dir.c_str(), 65534, 65534) == 0);
    why = "is owned by another user (uid 65534";
  }
  std::string log;
  CHECK(probe(dir, &log) == "ok builds=1 disk_hits=0 corrupt=0 disk_writes=0");
  INFO(log);
  CHECK(log.find("the kernel cache directory " + dir + " " + why) != std::string::npos);
  CHECK(log.find("not used, kernels are built in memory") != std::string::npos);
  CHECK(entries(dir).size() == 1);  // nothing added or replaced
}

TEST_CASE("an entry that others could have written is rebuilt, never run",
          "[ops][cache][process]") {
  SimEnv env;
  TempDir files;
  const std::string dir = files.file("cache");
  const fs::path entry = first_entry(dir);
  fs::permissions(entry, kOwnerReadWrite | fs::perms::others_write);
  std::string log;
  CHECK(probe(dir, &log) == "ok builds=1 disk_hits=0 corrupt=1 disk_writes=1");
  CHECK(log.find("is writable by others") != std::string::npos);
  // Rewritten as the user's own: found next time.
  CHECK((fs::status(entry).permissions() & fs::perms::all) == kOwnerReadWrite);
  CHECK(probe(dir) == "ok builds=0 disk_hits=1 corrupt=0 disk_writes=0");
}

TEST_CASE("processes writing the same entry at once all succeed and leave one whole entry",
          "[ops][cache][process]") {
  SimEnv env;
  TempDir files;
  const std::string dir = files.file("cache");
  setenv("TRN_CACHE_DIR", dir.c_str(), 1);
  std::vector<std::unique_ptr<Child>> children;
  for (int core = 0; core < 4; ++core)
    children.push_back(
        std::make_unique<Child>(std::vector<std::string>{kProbe, std::to_string(core)}));
  unsetenv("TRN_CACHE_DIR");
  for (auto &c : children) {
    std::string line;
    while ((line = c->read_line(120'000)).size() && line.rfind("ok ", 0) != 0) {
    }
    INFO(line);
    CHECK(line.rfind("ok ", 0) == 0);
    CHECK(line.find("corrupt=0") != std::string::npos);
    CHECK(c->wait(60'000) == 0);
  }
  // One entry, no temporary files left, and it reads back whole.
  CHECK(entries(dir).size() == 1);
  CHECK(probe(dir) == "ok builds=0 disk_hits=1 corrupt=0 disk_writes=0");
}

TEST_CASE("threads issuing the same new op at once share one cache", "[ops][cache]") {
  OpsFixture f;
  std::mt19937 rng(2);
  const host_array x = random_array(rng, {128, 32}, TRN_DTYPE_F32);
  DeviceTensor tx = f.tensor(TRN_DTYPE_F32, x);
  std::vector<DeviceTensor> ys;
  for (int i = 0; i < 4; ++i) ys.push_back(f.tensor(TRN_DTYPE_F32, x.shape));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      if (trn_ops_unary(f.queue(), TRN_OPS_TANH, ys[i].get(), tx.get(), nullptr) != TRN_SUCCESS)
        ++failures;
    });
  for (auto &t : threads) t.join();
  CHECK(failures == 0);
  for (const DeviceTensor &y : ys)
    require_close(f.read(y), trn::ops::host::unary(trn::ops::host::Unary::kTanh, x), 1e-5, "tanh");
  const trn_ops_cache_stats_t s = cache_stats();
  CHECK(s.memory_entries == 1);
  CHECK(s.builds + s.disk_hits + s.memory_hits == 4);
}

TEST_CASE("the memory cache keeps within its bound, least recently used out first",
          "[ops][cache]") {
  OpsFixture f;
  run_exp(f, {128, 8});
  const uint64_t one = cache_stats().memory_bytes;
  REQUIRE(one > 0);
  f.configure(TRN_OPS_CONFIG_NO_DISK_CACHE, one * 2 + one / 2);  // room for two such kernels
  run_exp(f, {128, 9});
  run_exp(f, {128, 8});   // used again: now the most recent
  run_exp(f, {128, 10});  // a third: the least recently used (9) goes
  trn_ops_cache_stats_t s = cache_stats();
  CHECK(s.evictions == 1);
  CHECK(s.memory_entries == 2);
  const uint64_t builds = s.builds;
  run_exp(f, {128, 8});
  CHECK(cache_stats().builds == builds);  // still there
  run_exp(f, {128, 9});
  CHECK(cache_stats().builds == builds + 1);  // was evicted: built again (no disk cache)
}

TEST_CASE("the cache can be switched off, in memory and on disk", "[ops][cache]") {
  OpsFixture f;
  SECTION("no disk cache: nothing is written") {
    f.configure(TRN_OPS_CONFIG_NO_DISK_CACHE);
    run_exp(f, {128, 16});
    run_exp(f, {128, 16});
    const trn_ops_cache_stats_t s = cache_stats();
    CHECK(s.builds == 1);
    CHECK(s.memory_hits == 1);
    CHECK(s.disk_writes == 0);
    CHECK(entries(f.cache_dir()).empty());
  }
  SECTION("no cache at all: every op builds") {
    f.configure(TRN_OPS_CONFIG_NO_DISK_CACHE | TRN_OPS_CONFIG_NO_MEMORY_CACHE);
    run_exp(f, {128, 16});
    run_exp(f, {128, 16});
    const trn_ops_cache_stats_t s = cache_stats();
    CHECK(s.builds == 2);
    CHECK(s.memory_entries == 0);
    CHECK(entries(f.cache_dir()).empty());
  }
}

TEST_CASE("TRN_OPS_CACHE=off in the environment switches the cache off for a process",
          "[ops][cache][process]") {
  SimEnv env;
  TempDir files;
  const std::string dir = files.file("cache");
  setenv("TRN_OPS_CACHE", "off", 1);
  const std::string line = probe(dir);
  unsetenv("TRN_OPS_CACHE");
  CHECK(line == "ok builds=1 disk_hits=0 corrupt=0 disk_writes=0");
  CHECK(entries(dir).empty());
}

TEST_CASE("a TRN_OPS_HOST_ONLY or TRN_OPS_CACHE that is no switch fails the first op, named",
          "[ops][cache][process][negative]") {
  SimEnv env;
  TempDir files;
  const char *variable = GENERATE("TRN_OPS_HOST_ONLY", "TRN_OPS_CACHE");
  setenv(variable, "yes", 1);
  setenv("TRN_CACHE_DIR", files.file("cache").c_str(), 1);
  const ProgramResult r = run_program({kProbe, "0"}, 120'000);
  unsetenv("TRN_CACHE_DIR");
  unsetenv(variable);
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK(r.output.find("TRN_ERROR_INVALID_CONFIG") != std::string::npos);
  CHECK(r.output.find(std::string(variable) + " is 'yes'") != std::string::npos);
}

TEST_CASE("configuration and counters refuse bad arguments", "[ops][cache][negative]") {
  trn_ops_config_t c = TRN_OPS_CONFIG_INIT;
  c.flags = 0x80;
  CHECK(trn_ops_configure(&c) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(ops_error().find("unknown bits") != std::string::npos);
  trn_ops_config_t raw{};
  CHECK(trn_ops_configure(&raw) == TRN_ERROR_INVALID_STRUCT);
  CHECK(trn_ops_get_cache_stats(nullptr) == TRN_ERROR_NULL_POINTER);
  trn_ops_cache_stats_t stats{};
  CHECK(trn_ops_get_cache_stats(&stats) == TRN_ERROR_INVALID_STRUCT);
  CHECK(trn_ops_get_fallbacks(nullptr, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(trn_ops_configure(nullptr) == TRN_SUCCESS);
}

TEST_CASE("trn_last_error says why an op failed, as after any trn call", "[ops][negative]") {
  // One channel for every layer: a backend reads trn_last_error() whichever library failed.
  OpsFixture f;
  trn_set_last_error("an older failure");
  DeviceTensor x = f.tensor(TRN_DTYPE_F32, Shape{4, 4}), y = f.tensor(TRN_DTYPE_F32, Shape{4, 5});
  CHECK(trn_ops_unary(f.queue(), TRN_OPS_EXP, y.get(), x.get(), nullptr) != TRN_SUCCESS);
  CHECK(std::string(trn_last_error()) == trn_ops_last_error());
  CHECK(std::string(trn_last_error()).find("trn_ops_unary") == 0);
}
