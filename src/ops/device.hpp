// The device an op runs on, found from its tensors' memory: the runtime's handle, its
// properties and the kernel builder's target for its cores. Looked up once per device index and
// kept; a handle gone stale (the runtime was shut down and started again) is looked up anew.
#pragma once

#include <cstdint>
#include <string>

#include "kbuild/build_target.hpp"
#include "trn/trn.h"

namespace trn::ops {

struct Device {
  trn_device_t handle = nullptr;
  uint32_t index = 0;
  trn_device_properties_t properties{};
  kbuild::BuildTarget target;
  std::string target_key;  // what of the target a kernel depends on, for cache keys
};

Device device(uint32_t device_index);
// Forgets a device whose handle turned out stale.
void forget_device(uint32_t device_index);

}  // namespace trn::ops
