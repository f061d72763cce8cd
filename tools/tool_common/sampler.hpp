// Live figures for trn-top and trn-monitor: two snapshots of the device state through the public
// API, a measured period between them, and the rates that follow. Reading claims nothing and
// never waits on the processes watched.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tool_common/device_snapshot.hpp"
#include "trn/trn.h"

namespace trn::tools {

// Percentages are over the measured period and never above 100; all are 0 in the first frame
// (period_ns 0), which has nothing to measure against.
struct CoreFigures {
  uint32_t index = 0;    // within the device
  uint32_t core_id = 0;  // global id
  int32_t owner_pid = 0;
  trn_core_activity_t totals = TRN_CORE_ACTIVITY_INIT;
  double busy_percent = 0;                // host time executing its commands / wall time
  double utilization_percent = 0;         // simulated kernel time / wall time
  double simulated_dma_busy_percent = 0;  // simulated DMA engine time / wall time
  double commands_per_s = 0;
  double dma_bytes_per_s = 0;
  double kernels_per_s = 0;
  double tensor_flops_per_s = 0;
  // Per engine (trn_engine_t order): busy time as a share of the kernels' simulated time.
  double engine_active_percent[TRN_ENGINE_COUNT] = {};
};

struct DeviceFigures {
  DeviceSnapshot snapshot;
  std::vector<CoreFigures> cores;
};

struct Frame {
  uint64_t timestamp_unix_ns = 0;
  uint64_t period_ns = 0;  // measured between the two samples (0 for the first)
  std::string error;       // one line; empty when the sample worked
  std::string no_device_reason;
  std::vector<DeviceFigures> devices;
};

class Sampler {
 public:
  // Takes a sample and returns the figures since the previous one.
  Frame sample();

 private:
  struct Previous {
    uint64_t monotonic_ns = 0;
    std::vector<std::vector<trn_core_activity_t>> activity;  // [device][core]
  };
  Previous previous_;
};

// The one line every tool prints when there is no device or the state cannot be read.
std::string describe_failure(trn_result_t result);

}  // namespace trn::tools
