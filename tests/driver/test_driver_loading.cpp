// How libtrn finds its drivers (docs/ARCHITECTURE.md, "Driver discovery"): the sim's shared
// object beside libtrn, TRN_DRIVER naming a driver by name or by path, and the refusals: no such
// file, a library that is not a driver, a driver of another major interface version, a table
// smaller than this runtime's. A larger table of a later minor version is accepted.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "drivers/hal.h"
#include "support/api_helpers.hpp"
#include "support/sim_env.hpp"
#include "support/subprocess.hpp"

using trn::test::error_contains;
using trn::test::SimEnv;

namespace {

namespace fs = std::filesystem;

constexpr int kTimeoutMs = 30000;

std::string fake_driver(const char *name) {
  return std::string(TRN_FAKE_DRIVER_DIR) + "/libtrn-driver-" + name + ".so";
}

struct Run {
  int code = -1;
  std::string output;
};

// trn-ls with extra environment variables (NAME=value), its exit status and output.
Run trn_ls(const std::vector<std::string> &environment) {
  std::vector<std::string> argv{"/usr/bin/env"};
  argv.insert(argv.end(), environment.begin(), environment.end());
  argv.emplace_back(TRN_LS_PATH);
  int status = 0;
  Run r;
  r.output = trn::test::run_command(argv, kTimeoutMs, &status);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

// Every TRN_DRIVER value here names one driver that the runtime refuses.
void expect_refused(SimEnv &env, const std::string &value, trn_result_t expected) {
  env.set("TRN_DRIVER", value.c_str());
  uint32_t count = 0;
  CHECK(trn_device_get(&count, nullptr) == expected);
  CHECK(trn_driver_get(&count, nullptr) == expected);
  CHECK(error_contains("TRN_DRIVER='" + value + "'"));
}

// A directory with a copy of libtrn and chosen drivers beside it, used through LD_LIBRARY_PATH.
class LibraryDir {
 public:
  LibraryDir() {
    char pattern[] = "/tmp/trn-driver-test-XXXXXX";
    REQUIRE(mkdtemp(pattern) != nullptr);
    path_ = pattern;
    fs::copy_file(TRN_LIBRARY_PATH, path_ / TRN_LIBRARY_SONAME);
  }
  ~LibraryDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  LibraryDir(const LibraryDir &) = delete;
  LibraryDir &operator=(const LibraryDir &) = delete;

  void add(const std::string &driver) {
    fs::copy_file(driver, path_ / fs::path(driver).filename());
  }
  std::string path() const { return path_.string(); }
  Run trn_ls() const { return ::trn_ls({"LD_LIBRARY_PATH=" + path()}); }

 private:
  fs::path path_;
};

// The properties of the one driver the runtime has.
trn_driver_properties_t only_driver() {
  uint32_t count = 0;
  INFO(trn_last_error());
  REQUIRE(trn_driver_get(&count, nullptr) == TRN_SUCCESS);
  REQUIRE(count == 1);
  trn_driver_t driver = nullptr;
  REQUIRE(trn_driver_get(&count, &driver) == TRN_SUCCESS);
  trn_driver_properties_t p = TRN_DRIVER_PROPERTIES_INIT;
  REQUIRE(trn_driver_get_properties(driver, &p) == TRN_SUCCESS);
  return p;
}

}  // namespace

TEST_CASE("the sim driver is found beside libtrn, by name and by path", "[driver]") {
  SimEnv env;
  for (const char *value : {static_cast<const char *>(nullptr), "sim", TRN_SIM_DRIVER_PATH}) {
    INFO("TRN_DRIVER=" << (value ? value : "(unset)"));
    env.set("TRN_DRIVER", value);
    const trn_driver_properties_t p = only_driver();
    CHECK(std::string(p.name) == "sim");
    CHECK(p.device_count == 1);
    CHECK(p.hal_version == TRN_HAL_VERSION);
    uint32_t count = 0;
    CHECK(trn_device_get(&count, nullptr) == TRN_SUCCESS);
    CHECK(count == 1);
  }
}

TEST_CASE("trn-ls runs with TRN_DRIVER naming the sim by path and by name", "[driver][tools]") {
  SimEnv env;
  for (const char *value : {TRN_SIM_DRIVER_PATH, "sim"}) {
    INFO("TRN_DRIVER=" << value);
    const Run r = trn_ls({std::string("TRN_DRIVER=") + value});
    INFO(r.output);
    CHECK(r.code == 0);
    CHECK(contains(r.output, "driver sim"));
    CHECK(contains(r.output, "trn2"));
  }
}

TEST_CASE("a driver of another major interface version is refused, naming both versions",
          "[driver]") {
  SimEnv env;
  const std::string path = fake_driver("wrong-major");
  expect_refused(env, path, TRN_ERROR_DRIVER_INCOMPATIBLE);
  INFO(trn_last_error());
  CHECK(error_contains(path));
  CHECK(error_contains("version 9.0"));
  // The runtime's own interface version is the oldest it accepts.
  CHECK(error_contains("accepts versions 2.x (2." +
                       std::to_string(TRN_HAL_VERSION_MINOR(TRN_HAL_VERSION)) + " or later)"));

  // A driver of the first interface (1.x), which this runtime no longer speaks.
  expect_refused(env, fake_driver("old-major"), TRN_ERROR_DRIVER_INCOMPATIBLE);
  CHECK(error_contains("version 1.0"));

  const Run r = trn_ls({"TRN_DRIVER=" + path});
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK(contains(r.output, "version 9.0"));
  CHECK(contains(r.output, "TRN_ERROR_DRIVER_INCOMPATIBLE"));
}

TEST_CASE("a driver table smaller than this runtime's is refused", "[driver]") {
  SimEnv env;
  const std::string accepted = "accepts versions 2.x (2." +
                               std::to_string(TRN_HAL_VERSION_MINOR(TRN_HAL_VERSION)) +
                               " or later)";
  expect_refused(env, fake_driver("small"), TRN_ERROR_DRIVER_INCOMPATIBLE);
  INFO(trn_last_error());
  CHECK(error_contains("table of " + std::to_string(sizeof(trn_hal_ops_t) - 8) + " bytes"));
  CHECK(error_contains("needs " + std::to_string(sizeof(trn_hal_ops_t))));
  CHECK(error_contains(accepted));
  // A table of the full size from an older minor version still lacks what came since.
  expect_refused(env, fake_driver("older-minor"), TRN_ERROR_DRIVER_INCOMPATIBLE);
  CHECK(error_contains("version 2.0, older than this runtime's"));
  CHECK(error_contains(accepted));
}

TEST_CASE("a driver of a later minor version with a larger table is accepted", "[driver]") {
  SimEnv env;
  env.set("TRN_DRIVER", fake_driver("newer-minor").c_str());
  const trn_driver_properties_t p = only_driver();
  CHECK(std::string(p.name) == "fake");
  CHECK(p.hal_version == TRN_HAL_MAKE_VERSION(2u, 7u));
  CHECK(p.device_count == 0);
  CHECK(p.status == TRN_ERROR_NO_DEVICE);
  uint32_t count = 0;
  CHECK(trn_device_get(&count, nullptr) == TRN_SUCCESS);
  CHECK(count == 0);
}

TEST_CASE("a driver that has devices but not every operation is listed with none, saying which",
          "[driver]") {
  SimEnv env;
  env.set("TRN_DRIVER", fake_driver("incomplete").c_str());
  const trn_driver_properties_t p = only_driver();
  CHECK(p.device_count == 0);
  CHECK(p.status == TRN_ERROR_DRIVER_INCOMPATIBLE);
  INFO(p.status_detail);
  CHECK(contains(p.status_detail, "no 'abandon' operation"));
  CHECK(contains(p.status_detail, "use a driver built for this release"));
  uint32_t count = 0;
  CHECK(trn_device_get(&count, nullptr) == TRN_SUCCESS);
  CHECK(count == 0);  // never a call into a hole of the table
}

TEST_CASE("a library without the entry point, a missing file and a missing name are refused",
          "[driver]") {
  SimEnv env;
  const std::string no_entry = fake_driver("no-entry");
  expect_refused(env, no_entry, TRN_ERROR_DRIVER_INCOMPATIBLE);
  CHECK(error_contains("is not a trn driver"));
  CHECK(error_contains("trn_hal_get_ops"));

  const std::string missing = std::string(TRN_FAKE_DRIVER_DIR) + "/libtrn-driver-missing.so";
  expect_refused(env, missing, TRN_ERROR_DRIVER_NOT_FOUND);
  CHECK(error_contains("there is no " + missing));

  // Not a shared object at all: dlopen's own words.
  expect_refused(env, std::string(TRN_FAKE_DRIVER_DIR) + "/CMakeFiles",
                 TRN_ERROR_DRIVER_INCOMPATIBLE);
  CHECK(error_contains("does not load"));

  // A name is looked for beside libtrn, and the message says where and what is there.
  expect_refused(env, "missing", TRN_ERROR_DRIVER_NOT_FOUND);
  INFO(trn_last_error());
  CHECK(error_contains(
      (fs::path(TRN_LIBRARY_PATH).parent_path() / "libtrn-driver-missing.so").string()));
  CHECK(error_contains("sim"));
}

TEST_CASE("with TRN_DRIVER unset, what lies beside libtrn is used and failures are listed",
          "[driver][tools]") {
  SimEnv env;
  LibraryDir dir;
  Run r = dir.trn_ls();
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK(contains(r.output, "no devices"));
  CHECK(contains(r.output, "no libtrn-driver-*.so in " + dir.path()));

  dir.add(fake_driver("wrong-major"));
  r = dir.trn_ls();
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK(contains(r.output, "no devices"));
  CHECK(contains(r.output, "wrong-major driver"));
  CHECK(contains(r.output, "version 9.0"));

  // A link whose driver is gone is listed as not found, not as a library that does not load.
  fs::create_symlink(dir.path() + "/no-such-file.so", dir.path() + "/libtrn-driver-gone.so");
  r = dir.trn_ls();
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK(contains(r.output, "libtrn-driver-gone.so is a link to " + dir.path() +
                               "/no-such-file.so, which does not exist"));
  CHECK(contains(r.output, "version 9.0"));  // the other driver is still listed

  dir.add(TRN_SIM_DRIVER_PATH);
  r = dir.trn_ls();
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK(contains(r.output, "driver sim"));
  CHECK(contains(r.output, "trn2"));
}
