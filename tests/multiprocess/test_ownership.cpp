// Core ownership across processes: exclusive, named in errors and tools, and never stale after
// a process dies, however it dies.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "support/sim_env.hpp"
#include "support/subprocess.hpp"
#include "trn/trn.h"

using trn::test::Child;
using trn::test::run_command;
using trn::test::SimEnv;

namespace {

std::vector<trn_core_t> device0_cores() {
  uint32_t count = 1;
  trn_device_t device = nullptr;
  REQUIRE(trn_device_get(&count, &device) == TRN_SUCCESS);
  REQUIRE(count == 1);
  uint32_t cores = 0;
  REQUIRE(trn_core_get(device, &cores, nullptr) == TRN_SUCCESS);
  std::vector<trn_core_t> out(cores);
  REQUIRE(trn_core_get(device, &cores, out.data()) == TRN_SUCCESS);
  return out;
}

std::vector<trn_process_info_t> device0_processes() {
  uint32_t count = 1;
  trn_device_t device = nullptr;
  REQUIRE(trn_device_get(&count, &device) == TRN_SUCCESS);
  uint32_t n = 0;
  REQUIRE(trn_device_get_processes(device, &n, nullptr) == TRN_SUCCESS);
  std::vector<trn_process_info_t> out(n + 2, TRN_PROCESS_INFO_INIT);
  n = static_cast<uint32_t>(out.size());
  REQUIRE(trn_device_get_processes(device, &n, out.data()) == TRN_SUCCESS);
  out.resize(n);
  return out;
}

const trn_process_info_t *find_pid(const std::vector<trn_process_info_t> &list, pid_t pid) {
  for (const auto &p : list)
    if (p.pid == pid) return &p;
  return nullptr;
}

}  // namespace

TEST_CASE("a core owned by another process is busy, named, listed, and freed by kill -9") {
  SimEnv env;
  Child holder({TRN_TEST_HOLDER, "0", "1", "2", "3"});
  const std::string ready = holder.read_line(20000);
  REQUIRE(ready == "ready " + std::to_string(holder.pid()));

  auto cores = device0_cores();
  REQUIRE(cores.size() == 8);
  CHECK(trn_core_acquire(cores[2]) == TRN_ERROR_CORE_BUSY);
  const std::string detail = trn_last_error();
  CHECK_THAT(detail, Catch::Contains("NeuronCore 2 on device 0"));
  CHECK_THAT(detail, Catch::Contains("pid " + std::to_string(holder.pid())));
  CHECK_THAT(detail, Catch::Contains("trn-test-holder 0 1 2 3"));
  CHECK_THAT(detail, Catch::Contains(" since "));

  trn_process_info_t owner = TRN_PROCESS_INFO_INIT;
  REQUIRE(trn_core_get_owner(cores[2], &owner) == TRN_SUCCESS);
  CHECK(owner.pid == holder.pid());
  CHECK(owner.since_unix_ns > 0);
  CHECK(std::string(owner.runtime_version) == trn_get_version_string());

  // Cores it does not hold are free to take.
  CHECK(trn_core_acquire(cores[4]) == TRN_SUCCESS);

  const auto processes = device0_processes();
  const trn_process_info_t *listed = find_pid(processes, holder.pid());
  REQUIRE(listed != nullptr);
  CHECK(listed->core_mask == 0x0f);
  const trn_process_info_t *self = find_pid(processes, getpid());
  REQUIRE(self != nullptr);
  CHECK(self->core_mask == 0x10);

  int status = 0;
  const std::string wide = run_command({TRN_LS_PATH, "-w"}, 20000, &status);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK_THAT(wide, Catch::Contains(std::to_string(holder.pid())));
  CHECK_THAT(wide, Catch::Contains("0-3"));
  CHECK_THAT(wide, Catch::Contains("trn-test-holder"));
  const std::string json = run_command({TRN_LS_PATH, "--json"}, 20000, &status);
  CHECK_THAT(json, Catch::Contains("\"pid\": " + std::to_string(holder.pid())));

  holder.kill(SIGKILL);
  REQUIRE(holder.wait(10000) != -1);

  // At once: no retry, no timeout, no clean-up step.
  CHECK(trn_core_acquire(cores[2]) == TRN_SUCCESS);
  owner = TRN_PROCESS_INFO_INIT;
  REQUIRE(trn_core_get_owner(cores[2], &owner) == TRN_SUCCESS);
  CHECK(owner.pid == getpid());
  CHECK(find_pid(device0_processes(), holder.pid()) == nullptr);
  const std::string after = run_command({TRN_LS_PATH, "-w"}, 20000, &status);
  CHECK_THAT(after, !Catch::Contains(std::to_string(holder.pid()) + " "));
}

TEST_CASE("a holder that asks for a busy core is told so and holds nothing") {
  SimEnv env;
  auto cores = device0_cores();
  REQUIRE(trn_core_acquire(cores[1]) == TRN_SUCCESS);
  Child holder({TRN_TEST_HOLDER, "0", "1"});
  CHECK(holder.read_line(20000) == "busy 1 TRN_ERROR_CORE_BUSY");
  const int status = holder.wait(10000);
  REQUIRE(status != -1);
  CHECK(WEXITSTATUS(status) == 3);
  // It took core 0 before failing on core 1, then exited: core 0 must be free again.
  CHECK(trn_core_acquire(cores[0]) == TRN_SUCCESS);
}

TEST_CASE("ownership ends with a normal exit too") {
  SimEnv env;
  {
    Child holder({TRN_TEST_HOLDER, "5"});
    REQUIRE(holder.read_line(20000).rfind("ready", 0) == 0);
    auto cores = device0_cores();
    CHECK(trn_core_acquire(cores[5]) == TRN_ERROR_CORE_BUSY);
    holder.close_stdin();
    const int status = holder.wait(10000);
    REQUIRE(status != -1);
    CHECK(WEXITSTATUS(status) == 0);
  }
  auto cores = device0_cores();
  CHECK(trn_core_acquire(cores[5]) == TRN_SUCCESS);
}

TEST_CASE("a forked child does not inherit or release its parent's cores") {
  SimEnv env;
  auto cores = device0_cores();
  REQUIRE(trn_core_acquire(cores[0]) == TRN_SUCCESS);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // A new process: the parent's claim must look busy from here, and shutting this child's
    // runtime down must not release it.
    auto mine = device0_cores();
    const bool busy = trn_core_acquire(mine[0]) == TRN_ERROR_CORE_BUSY;
    const bool free_ok = trn_core_acquire(mine[1]) == TRN_SUCCESS;
    trn_runtime_shutdown();
    _exit(busy && free_ok ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  trn_process_info_t owner = TRN_PROCESS_INFO_INIT;
  REQUIRE(trn_core_get_owner(cores[0], &owner) == TRN_SUCCESS);
  CHECK(owner.pid == getpid());
  CHECK(trn_core_acquire(cores[1]) == TRN_SUCCESS);  // the child's claim ended with it
}

TEST_CASE("racing acquire/release cycles in several processes never share a core") {
  SimEnv env;
  const std::string occupancy = env.root() + "/occupancy";
  {
    const int fd = open(occupancy.c_str(), O_RDWR | O_CREAT, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(ftruncate(fd, 4096) == 0);
    close(fd);
  }
  device0_cores();  // create the device state before the racers start
  constexpr int kProcesses = 4;
  std::vector<std::unique_ptr<Child>> racers;
  for (int i = 0; i < kProcesses; ++i)
    racers.push_back(std::make_unique<Child>(
        std::vector<std::string>{TRN_TEST_HOLDER, "--cycle", "400", occupancy, "0", "1", "2"}));
  long acquired = 0, busy = 0;
  for (auto &racer : racers) {
    const std::string line = racer->read_line(30000);
    long a = 0, b = 0, v = -1;
    REQUIRE(std::sscanf(line.c_str(), "cycles %ld %ld %ld", &a, &b, &v) == 3);
    CHECK(v == 0);
    acquired += a;
    busy += b;
    REQUIRE(racer->wait(10000) != -1);
  }
  CHECK(acquired > 0);
  INFO("acquired " << acquired << ", found busy " << busy);
  // Every core is free once the racers are gone.
  auto cores = device0_cores();
  for (int core = 0; core < 3; ++core) CHECK(trn_core_acquire(cores[core]) == TRN_SUCCESS);
}

namespace {

double seconds_since(const struct timespec &start) {
  struct timespec now {};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec - start.tv_sec) +
         static_cast<double>(now.tv_nsec - start.tv_nsec) / 1e9;
}

// Starts trn-test-chunk-lock-holder and stops it (SIGSTOP) while it holds the memory lock.
std::unique_ptr<Child> stopped_memory_lock_holder() {
  auto holder = std::make_unique<Child>(std::vector<std::string>{TRN_CHUNK_LOCK_HOLDER_PATH});
  const std::string line = holder->read_line(20000);
  REQUIRE(line == "locked " + std::to_string(holder->pid()));
  holder->kill(SIGSTOP);
  return holder;
}

}  // namespace

TEST_CASE("trn_core_acquire does not wait for a stopped process that holds the memory lock") {
  SimEnv env;
  auto cores = device0_cores();
  auto holder = stopped_memory_lock_holder();

  struct timespec start {};
  clock_gettime(CLOCK_MONOTONIC, &start);
  INFO(trn_last_error());
  CHECK(trn_core_acquire(cores[0]) == TRN_SUCCESS);
  CHECK(trn_core_acquire(cores[1]) == TRN_SUCCESS);
  CHECK(trn_core_release(cores[1]) == TRN_SUCCESS);
  const double took = seconds_since(start);
  INFO("acquire and release took " << took << " s");
  CHECK(took < 6.0);  // the memory lock's deadline is 10 s (loose: a loaded machine)

  holder->kill(SIGCONT);
  holder->close_stdin();
  REQUIRE(holder->wait(10000) != -1);
}

TEST_CASE("a slot reused while the memory lock is held returns its dead process's memory later") {
  SimEnv env;
  env.set("TRN_SIM_HBM_BYTES", "64MiB");  // 4 banks of 16 MiB
  device0_cores();
  {
    // A process takes bank 0's first chunk and dies without returning it; its slot is free.
    Child dead({TRN_TEST_HOLDER, "--alloc", "0", "2", "0x33"});
    const std::string line = dead.read_line(20000);
    REQUIRE(line.rfind("allocated ", 0) == 0);
    dead.kill(SIGKILL);
    REQUIRE(dead.wait(10000) != -1);
  }
  auto cores = device0_cores();
  auto holder = stopped_memory_lock_holder();
  // This process takes the dead process's slot while the memory lock is held.
  CHECK(trn_core_acquire(cores[0]) == TRN_SUCCESS);
  holder->kill(SIGCONT);
  holder->close_stdin();
  REQUIRE(holder->wait(10000) != -1);

  // The dead process's chunk came back: the whole bank fits.
  uint32_t count = 1;
  trn_device_t device = nullptr;
  REQUIRE(trn_device_get(&count, &device) == TRN_SUCCESS);
  trn_pool_desc_t desc = TRN_POOL_DESC_INIT;
  desc.hbm_bank = 0;
  trn_pool_t pool = nullptr;
  REQUIRE(trn_pool_create(device, &desc, &pool) == TRN_SUCCESS);
  trn_mem_t mem = nullptr;
  INFO(trn_last_error());
  CHECK(trn_mem_alloc(pool, 16ull << 20, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem) == TRN_SUCCESS);
  CHECK(trn_mem_free(mem) == TRN_SUCCESS);
  CHECK(trn_pool_destroy(pool) == TRN_SUCCESS);
}
