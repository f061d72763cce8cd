#include "support/sim_env.hpp"

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>

#include "trn/trn.h"

namespace trn::test {

const std::vector<const char *> &trn_environment_variables() {
  static const std::vector<const char *> names = {"TRN_SIM_ROOT",
                                                  "TRN_SIM_DEVICES",
                                                  "TRN_SIM_GENERATION",
                                                  "TRN_SIM_HBM_BYTES",
                                                  "TRN_VISIBLE_CORES",
                                                  "NEURON_RT_VISIBLE_CORES",
                                                  "TRN_LNC",
                                                  "NEURON_LOGICAL_NC_CONFIG",
                                                  "TRN_DRIVER",
                                                  "TRN_SIM_RACE_CHECK",
                                                  "TRN_COMM_TIMEOUT_MS",
                                                  "TRN_COMM_CHUNK_BYTES",
                                                  "TRN_COMM_SOCKET_ADDR",
                                                  "TRN_COMM_PORT",
                                                  "TRN_COMM_RING_MIN_BYTES",
                                                  "RANK",
                                                  "WORLD_SIZE",
                                                  "LOCAL_RANK",
                                                  "MASTER_ADDR",
                                                  "MASTER_PORT",
                                                  "TORCHELASTIC_RUN_ID"};
  return names;
}

SimEnv::SimEnv() {
  char pattern[] = "/dev/shm/trn-test-XXXXXX";
  if (mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
  root_ = pattern;
  for (const char *name : trn_environment_variables()) unsetenv(name);
  setenv("TRN_SIM_ROOT", root_.c_str(), 1);
  trn_runtime_shutdown();
}

SimEnv::~SimEnv() {
  trn_runtime_shutdown();
  for (const char *name : trn_environment_variables()) unsetenv(name);
  std::error_code ignored;
  std::filesystem::permissions(root_, std::filesystem::perms::owner_all, ignored);
  std::filesystem::remove_all(root_, ignored);
}

void SimEnv::set(const char *name, const char *value) {
  if (value)
    setenv(name, value, 1);
  else
    unsetenv(name);
  trn_runtime_shutdown();
}

}  // namespace trn::test
