// Conformance: the simulated device's state directory and files refused when they are unsafe,
// damaged or from another layout — each with its own result, a message naming the path and
// saying what to do, and recovery once the user did it. Written to pass as root (the kernel
// skips permission checks for root, the runtime's mode checks still apply) and as a normal user.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include "support/api_helpers.hpp"
#include "support/result_printing.hpp"
#include "support/sim_env.hpp"
#include "trn/trn.h"

namespace {

using trn::test::error_contains;

using trn::test::SimEnv;

trn_result_t count_devices(uint32_t *count) {
  *count = 0;
  return trn_device_get(count, nullptr);
}

// Lets the runtime create the state files, then shuts it down so they can be tampered with.
std::string create_state(const SimEnv &env, uint32_t expected_devices = 1) {
  uint32_t count = 0;
  INFO(trn_last_error());
  REQUIRE(count_devices(&count) == TRN_SUCCESS);
  REQUIRE(count == expected_devices);
  REQUIRE(trn_runtime_shutdown() == TRN_SUCCESS);
  const std::string path = env.root() + "/device0.state";
  struct stat st {};
  REQUIRE(stat(path.c_str(), &st) == 0);
  REQUIRE((st.st_mode & 07777) == 0600);
  return path;
}

void patch_bytes(const std::string &path, off_t offset, const void *bytes, size_t size) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  const ssize_t written = pwrite(fd, bytes, size, offset);
  close(fd);
  REQUIRE(written == static_cast<ssize_t>(size));
}

void patch_u32(const std::string &path, off_t offset, uint32_t value) {
  patch_bytes(path, offset, &value, sizeof value);
}

// The runtime recovers once the user followed the advice.
void expect_recovery() {
  uint32_t count = 0;
  INFO(trn_last_error());
  CHECK(count_devices(&count) == TRN_SUCCESS);
  CHECK(count == 1);
}

}  // namespace

// ---- the state directory -----------------------------------------------------------------------

TEST_CASE("a TRN_SIM_ROOT readable by others gives TRN_ERROR_PERMISSION_DENIED", "[state]") {
  SimEnv env;
  REQUIRE(chmod(env.root().c_str(), 0755) == 0);
  uint32_t count = 0;
  REQUIRE(count_devices(&count) == TRN_ERROR_PERMISSION_DENIED);
  INFO("trn_last_error: " << trn_last_error());
  CHECK(error_contains("trn_device_get"));
  CHECK(error_contains(env.root()));
  CHECK(error_contains("TRN_SIM_ROOT"));
  CHECK(error_contains("0755"));
  CHECK(error_contains("chmod 700"));
  // Every entry point fails the same way.
  CHECK(trn_driver_get(&count, nullptr) == TRN_ERROR_PERMISSION_DENIED);

  REQUIRE(chmod(env.root().c_str(), 0700) == 0);
  expect_recovery();
}

TEST_CASE("a TRN_SIM_ROOT writable by its group gives TRN_ERROR_PERMISSION_DENIED", "[state]") {
  SimEnv env;
  REQUIRE(chmod(env.root().c_str(), 0770) == 0);
  uint32_t count = 0;
  REQUIRE(count_devices(&count) == TRN_ERROR_PERMISSION_DENIED);
  INFO("trn_last_error: " << trn_last_error());
  CHECK(error_contains("0770"));
  CHECK(error_contains("chmod 700"));
  REQUIRE(chmod(env.root().c_str(), 0700) == 0);
  expect_recovery();
}

TEST_CASE("a TRN_SIM_ROOT that is a regular file gives TRN_ERROR_INVALID_CONFIG", "[state]") {
  SimEnv env;
  const std::string file = env.root() + "/not-a-directory";
  { std::ofstream(file) << "hello\n"; }
  env.set("TRN_SIM_ROOT", file.c_str());
  uint32_t count = 0;
  REQUIRE(count_devices(&count) == TRN_ERROR_INVALID_CONFIG);
  INFO("trn_last_error: " << trn_last_error());
  CHECK(error_contains(file));
  CHECK(error_contains("TRN_SIM_ROOT"));
  CHECK(error_contains("not a directory"));
  CHECK(error_contains("set TRN_SIM_ROOT"));  // what to do

  env.set("TRN_SIM_ROOT", env.root().c_str());
  expect_recovery();
}

TEST_CASE("a TRN_SIM_ROOT owned by another user gives TRN_ERROR_PERMISSION_DENIED", "[state]") {
  SimEnv env;
  if (geteuid() != 0) {
    WARN("not root: cannot give the directory to another user; nothing to check");
    return;
  }
  REQUIRE(chown(env.root().c_str(), 65534, 65534) == 0);
  uint32_t count = 0;
  REQUIRE(count_devices(&count) == TRN_ERROR_PERMISSION_DENIED);
  INFO("trn_last_error: " << trn_last_error());
  CHECK(error_contains(env.root()));
  CHECK(error_contains("uid 65534"));
  CHECK(error_contains("set TRN_SIM_ROOT"));
  REQUIRE(chown(env.root().c_str(), 0, 0) == 0);
  expect_recovery();
}

// ---- state file permissions
// ----------------------------------------------------------------------

TEST_CASE("a state file readable by others gives TRN_ERROR_PERMISSION_DENIED", "[state]") {
  SimEnv env;
  const std::string path = create_state(env);
  REQUIRE(chmod(path.c_str(), 0644) == 0);
  uint32_t count = 0;
  REQUIRE(count_devices(&count) == TRN_ERROR_PERMISSION_DENIED);
  INFO("trn_last_error: " << trn_last_error());
  CHECK(error_contains("trn_device_get"));
  CHECK(error_contains(path));
  CHECK(error_contains("0644"));
  CHECK(error_contains("chmod 600"));

  REQUIRE(chmod(path.c_str(), 0600) == 0);
  expect_recovery();
}

TEST_CASE("a state file with mode 0000 gives TRN_ERROR_PERMISSION_DENIED", "[state]") {
  SimEnv env;
  const std::string path = create_state(env);
  REQUIRE(chmod(path.c_str(), 0000) == 0);
  uint32_t count = 0;
  REQUIRE(count_devices(&count) == TRN_ERROR_PERMISSION_DENIED);
  INFO("trn_last_error: " << trn_last_error());
  INFO("running as uid " << geteuid());
  CHECK(error_contains(path));
  CHECK(error_contains("chmod 600"));
  if (geteuid() == 0) {
    // The kernel lets root open it; the runtime's own mode check must still refuse it.
    CHECK(error_contains("0000"));
  } else {
    // open() fails with EACCES.
    CHECK(error_contains("ermission denied"));
  }

  REQUIRE(chmod(path.c_str(), 0600) == 0);
  expect_recovery();
}

TEST_CASE("a state file owned by another user gives TRN_ERROR_PERMISSION_DENIED", "[state]") {
  SimEnv env;
  if (geteuid() != 0) {
    WARN("not root: cannot give the file to another user; nothing to check");
    return;
  }
  const std::string path = create_state(env);
  REQUIRE(chown(path.c_str(), 65534, 65534) == 0);
  uint32_t count = 0;
  REQUIRE(count_devices(&count) == TRN_ERROR_PERMISSION_DENIED);
  INFO("trn_last_error: " << trn_last_error());
  CHECK(error_contains(path));
  CHECK(error_contains("uid 65534"));
  CHECK(error_contains("set TRN_SIM_ROOT"));
  REQUIRE(chown(path.c_str(), 0, 0) == 0);
  expect_recovery();
}

// ---- damaged and foreign state files
// -------------------------------------------------------------

TEST_CASE("a truncated state file gives TRN_ERROR_STATE_CORRUPT", "[state]") {
  SimEnv env;
  const std::string path = create_state(env);
  REQUIRE(truncate(path.c_str(), 10) == 0);
  uint32_t count = 0;
  REQUIRE(count_devices(&count) == TRN_ERROR_STATE_CORRUPT);
  INFO("trn_last_error: " << trn_last_error());
  CHECK(error_contains("trn_device_get"));
  CHECK(error_contains(path));
  CHECK(error_contains("truncated"));
  CHECK(error_contains("remove"));

  // Doing what it says fixes it: the runtime re-creates the file.
  REQUIRE(unlink(path.c_str()) == 0);
  expect_recovery();
}

TEST_CASE("an empty state file gives TRN_ERROR_STATE_CORRUPT", "[state]") {
  SimEnv env;
  const std::string path = create_state(env);
  REQUIRE(truncate(path.c_str(), 0) == 0);
  uint32_t count = 0;
  REQUIRE(count_devices(&count) == TRN_ERROR_STATE_CORRUPT);
  INFO("trn_last_error: " << trn_last_error());
  CHECK(error_contains(path));
  CHECK(error_contains("truncated"));
  CHECK(error_contains("remove"));
  REQUIRE(unlink(path.c_str()) == 0);
  expect_recovery();
}

TEST_CASE("a state file of the wrong size gives TRN_ERROR_STATE_CORRUPT", "[state]") {
  SimEnv env;
  const std::string path = create_state(env);
  struct stat st {};
  REQUIRE(stat(path.c_str(), &st) == 0);
  REQUIRE(truncate(path.c_str(), st.st_size + 4096) == 0);
  uint32_t count = 0;
  REQUIRE(count_devices(&count) == TRN_ERROR_STATE_CORRUPT);
  INFO("trn_last_error: " << trn_last_error());
  CHECK(error_contains(path));
  CHECK(error_contains("damaged"));
  CHECK(error_contains("remove"));
  REQUIRE(unlink(path.c_str()) == 0);
  expect_recovery();
}

TEST_CASE("a state file of another layout version gives TRN_ERROR_STATE_VERSION_MISMATCH",
          "[state]") {
  SimEnv env;
  const std::string path = create_state(env);
  patch_u32(path, 8, 99);  // StateHeader::layout_version follows the 8-byte magic
  uint32_t count = 0;
  REQUIRE(count_devices(&count) == TRN_ERROR_STATE_VERSION_MISMATCH);
  INFO("trn_last_error: " << trn_last_error());
  CHECK(error_contains("trn_device_get"));
  CHECK(error_contains(path));
  CHECK(error_contains("99"));
  CHECK(error_contains("remove"));
  CHECK(error_contains(trn_get_version_string()));  // which release refuses it
  CHECK(trn_driver_get(&count, nullptr) == TRN_ERROR_STATE_VERSION_MISMATCH);

  REQUIRE(unlink(path.c_str()) == 0);
  expect_recovery();
}

TEST_CASE("a state file with a bad magic gives TRN_ERROR_STATE_CORRUPT", "[state]") {
  SimEnv env;
  const std::string path = create_state(env);
  const char junk[8] = {'N', 'O', 'T', 'A', 'S', 'T', 'A', 'T'};
  patch_bytes(path, 0, junk, sizeof junk);
  uint32_t count = 0;
  REQUIRE(count_devices(&count) == TRN_ERROR_STATE_CORRUPT);
  INFO("trn_last_error: " << trn_last_error());
  CHECK(error_contains(path));
  CHECK(error_contains("magic"));
  CHECK(error_contains("remove"));
  REQUIRE(unlink(path.c_str()) == 0);
  expect_recovery();
}

TEST_CASE("a damaged second device names its own state file", "[state]") {
  SimEnv env;
  env.set("TRN_SIM_DEVICES", "2");
  create_state(env, 2);
  const std::string path = env.root() + "/device1.state";
  patch_u32(path, 8, 99);
  uint32_t count = 0;
  REQUIRE(count_devices(&count) == TRN_ERROR_STATE_VERSION_MISMATCH);
  INFO("trn_last_error: " << trn_last_error());
  CHECK(error_contains(path));
  CHECK(error_contains("remove"));
  REQUIRE(unlink(path.c_str()) == 0);
  CHECK(count_devices(&count) == TRN_SUCCESS);
  CHECK(count == 2);
}

TEST_CASE("a directory in place of a state file gives TRN_ERROR_STATE_CORRUPT", "[state]") {
  SimEnv env;
  const std::string path = env.root() + "/device0.state";
  REQUIRE(mkdir(path.c_str(), 0700) == 0);
  uint32_t count = 0;
  REQUIRE(count_devices(&count) == TRN_ERROR_STATE_CORRUPT);
  INFO("trn_last_error: " << trn_last_error());
  CHECK(error_contains(path));
  CHECK(error_contains("remove"));
  REQUIRE(rmdir(path.c_str()) == 0);
  expect_recovery();
}

// ---- the memory file and the directory lock ----------------------------------------------------

namespace {

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode));
  return text;
}

// `path` is refused with `expected`, named in the message with `detail`; the runtime recovers
// once `fix` ran.
template <typename Fix>
void expect_refused(const std::string &path, trn_result_t expected, const std::string &detail,
                    Fix fix) {
  uint32_t count = 0;
  REQUIRE(count_devices(&count) == expected);
  INFO("trn_last_error: " << trn_last_error());
  CHECK(error_contains(path));
  CHECK(error_contains(detail));
  fix();
  expect_recovery();
}

}  // namespace

TEST_CASE("a memory file readable by others gives TRN_ERROR_PERMISSION_DENIED", "[state]") {
  SimEnv env;
  create_state(env);
  const std::string hbm = env.root() + "/device0.hbm";
  for (mode_t mode : {0644, 0660, 0606}) {
    REQUIRE(chmod(hbm.c_str(), mode) == 0);
    expect_refused(hbm, TRN_ERROR_PERMISSION_DENIED, mode_text(mode), [&] {
      CHECK(error_contains("chmod 600"));
      REQUIRE(chmod(hbm.c_str(), 0600) == 0);
    });
    REQUIRE(trn_runtime_shutdown() == TRN_SUCCESS);
  }
}

TEST_CASE("a memory file owned by another user gives TRN_ERROR_PERMISSION_DENIED", "[state]") {
  SimEnv env;
  if (geteuid() != 0) {
    WARN("not root: cannot give the file to another user; nothing to check");
    return;
  }
  create_state(env);
  const std::string hbm = env.root() + "/device0.hbm";
  REQUIRE(chown(hbm.c_str(), 65534, 65534) == 0);
  expect_refused(hbm, TRN_ERROR_PERMISSION_DENIED, "uid 65534",
                 [&] { REQUIRE(chown(hbm.c_str(), 0, 0) == 0); });
}

TEST_CASE("a memory file that is a FIFO or a symbolic link gives TRN_ERROR_STATE_CORRUPT",
          "[state]") {
  SimEnv env;
  const std::string state = create_state(env);
  const std::string hbm = env.root() + "/device0.hbm";
  REQUIRE(unlink(hbm.c_str()) == 0);
  REQUIRE(mkfifo(hbm.c_str(), 0600) == 0);
  // Removing the state file, as the message says, re-creates both files.
  expect_refused(hbm, TRN_ERROR_STATE_CORRUPT, "not a regular file",
                 [&] { REQUIRE(unlink(state.c_str()) == 0); });
  REQUIRE(trn_runtime_shutdown() == TRN_SUCCESS);

  const std::string elsewhere = env.root() + "/elsewhere";
  REQUIRE(rename(hbm.c_str(), elsewhere.c_str()) == 0);
  REQUIRE(symlink(elsewhere.c_str(), hbm.c_str()) == 0);
  expect_refused(hbm, TRN_ERROR_STATE_CORRUPT, "symbolic link",
                 [&] { REQUIRE(unlink(state.c_str()) == 0); });
}

TEST_CASE("a directory lock readable by others gives TRN_ERROR_PERMISSION_DENIED", "[state]") {
  SimEnv env;
  create_state(env);
  const std::string lock = env.root() + "/.lock";
  REQUIRE(chmod(lock.c_str(), 0644) == 0);
  expect_refused(lock, TRN_ERROR_PERMISSION_DENIED, "0644", [&] {
    CHECK(error_contains("chmod 600"));
    REQUIRE(chmod(lock.c_str(), 0600) == 0);
  });
}

TEST_CASE("a directory lock owned by another user gives TRN_ERROR_PERMISSION_DENIED", "[state]") {
  SimEnv env;
  if (geteuid() != 0) {
    WARN("not root: cannot give the file to another user; nothing to check");
    return;
  }
  create_state(env);
  const std::string lock = env.root() + "/.lock";
  REQUIRE(chown(lock.c_str(), 65534, 65534) == 0);
  expect_refused(lock, TRN_ERROR_PERMISSION_DENIED, "uid 65534",
                 [&] { REQUIRE(chown(lock.c_str(), 0, 0) == 0); });
}

TEST_CASE("a directory lock that is a FIFO or a symbolic link gives TRN_ERROR_STATE_CORRUPT",
          "[state]") {
  SimEnv env;
  const std::string lock = env.root() + "/.lock";
  REQUIRE(mkfifo(lock.c_str(), 0600) == 0);
  expect_refused(lock, TRN_ERROR_STATE_CORRUPT, "not a regular file",
                 [&] { REQUIRE(unlink(lock.c_str()) == 0); });
  REQUIRE(trn_runtime_shutdown() == TRN_SUCCESS);

  const std::string elsewhere = env.root() + "/elsewhere";
  { std::ofstream(elsewhere) << ""; }
  REQUIRE(chmod(elsewhere.c_str(), 0600) == 0);
  REQUIRE(unlink(lock.c_str()) == 0);
  REQUIRE(symlink(elsewhere.c_str(), lock.c_str()) == 0);
  expect_refused(lock, TRN_ERROR_STATE_CORRUPT, "symbolic link",
                 [&] { REQUIRE(unlink(lock.c_str()) == 0); });
}

TEST_CASE("a TRN_SIM_ROOT that is a symbolic link is refused however it is spelled", "[state]") {
  SimEnv env;
  const std::string real = env.root() + "/real";
  const std::string link = env.root() + "/link";
  REQUIRE(mkdir(real.c_str(), 0700) == 0);
  REQUIRE(symlink(real.c_str(), link.c_str()) == 0);
  for (const std::string &spelling : {link, link + "/", link + "/.", link + "//", link + "/./"}) {
    env.set("TRN_SIM_ROOT", spelling.c_str());
    uint32_t count = 0;
    INFO("TRN_SIM_ROOT=" << spelling);
    REQUIRE(count_devices(&count) == TRN_ERROR_INVALID_CONFIG);
    INFO("trn_last_error: " << trn_last_error());
    CHECK(error_contains(link));
    CHECK(error_contains("symbolic link"));
    CHECK(error_contains("TRN_SIM_ROOT"));
  }
  // Nothing was created through the link.
  struct stat st {};
  CHECK(stat((real + "/device0.state").c_str(), &st) != 0);
  env.set("TRN_SIM_ROOT", real.c_str());
  expect_recovery();
}
