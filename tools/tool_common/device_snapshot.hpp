// What the tools show, read once through the public API: drivers, devices, their neighbours
// and processes. Reading claims nothing and disturbs no process.
#pragma once

#include <string>
#include <vector>

#include "trn/trn.h"

namespace trn::tools {

struct DeviceSnapshot {
  trn_device_properties_t properties = TRN_DEVICE_PROPERTIES_INIT;
  std::vector<uint32_t> neighbors;
  std::vector<trn_process_info_t> processes;
  trn_mem_stats_t memory = TRN_MEM_STATS_INIT;  // all banks, all live processes
};

struct Snapshot {
  std::vector<trn_driver_properties_t> drivers;
  std::vector<DeviceSnapshot> devices;
  // One line saying why there is no device (empty when there are devices).
  std::string no_device_reason;
};

// TRN_SUCCESS, or the failing result with trn_last_error() describing it.
trn_result_t take_snapshot(Snapshot *snapshot);

// Why the drivers offer no device, in the words every tool prints after "no devices: ":
// "sim driver: TRN_SIM_DEVICES=0 configures no simulated devices", or "no driver is loaded".
std::string no_device_reason(const std::vector<trn_driver_properties_t> &drivers);
// The same, asking the runtime for its drivers.
std::string no_device_reason();

// Logical core indices of a mask, "0-3,6".
std::string format_core_mask(uint64_t mask);

}  // namespace trn::tools
