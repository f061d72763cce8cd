// trn-test-chunk-lock-holder: the process of the multi-process tests that holds the memory
// (chunk) lock of device 0 in $TRN_SIM_ROOT, taken the way the sim driver takes it. Prints
// "locked <pid>" and holds the lock until its standard input closes or 60 s pass, so a test can
// stop it (SIGSTOP) while it holds the lock. Prints "error <message>" and exits 2 on failure.
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "sim/config.hpp"
#include "sim/device_state.hpp"
#include "sim/generation.hpp"

namespace trn::sim {

struct DeviceStateTestAccess {
  static int hold_chunk_lock(DeviceState &state) {
    std::string why;
    DeviceState::ChunkLock lock(state, &why);
    if (lock.result() != TRN_SUCCESS) {
      std::printf("error %s\n", why.c_str());
      return 2;
    }
    std::printf("locked %d\n", static_cast<int>(getpid()));
    std::fflush(stdout);
    struct pollfd in = {STDIN_FILENO, POLLIN, 0};
    char buffer[64];
    while (poll(&in, 1, 60000) > 0 && read(STDIN_FILENO, buffer, sizeof buffer) > 0) {
    }
    return 0;
  }
};

}  // namespace trn::sim

int main() {
  using namespace trn::sim;
  SimConfig config;
  std::string why;
  if (load_config(&config, &why) != TRN_SUCCESS) {
    std::printf("error %s\n", why.c_str());
    return 2;
  }
  DeviceWish wish;
  wish.device_count = config.device_count;
  wish.generation = config.generation;
  wish.physical_cores = generation_spec(config.generation).physical_cores;
  wish.hbm_bytes = config.effective_hbm_bytes();
  std::unique_ptr<DeviceState> state;
  if (DeviceState::open(config.root, wish, &state, &why) != TRN_SUCCESS) {
    std::printf("error %s\n", why.c_str());
    return 2;
  }
  return DeviceStateTestAccess::hold_chunk_lock(*state);
}
