// A test fixture for file loads: a private simulated device (SimEnv) with a copy queue on its
// first core and a device pool, and a private directory for the test's files.
#pragma once

#include "support/api_helpers.hpp"
#include "support/sim_env.hpp"
#include "support/temp_files.hpp"
#include "trn/trn.h"

namespace trn::test {

struct DeviceFiles {
  SimEnv env;  // first: the runtime reads its environment
  TempDir dir;
  trn_device_t device = first_device();
  trn_queue_t queue = make_queue(core_at(device, 0));
  trn_pool_t pool = make_pool(device);
};

}  // namespace trn::test
