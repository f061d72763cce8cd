// Where a pool's segments come from: device memory the driver reserves in a bank and maps for
// host reads, or host memory mapped here and registered with the driver for the device's DMA.
// Shared by the pool, which caches segments, and by the exportable allocations, which own theirs.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/alloc/block_allocator.hpp"
#include "runtime/session.hpp"
#include "trn/trn.h"

namespace trn::rt {

// The driver behind a device, as every memory call into it needs.
inline const trn_hal_ops_t &ops(const Device &device) {
  return device.driver->ops;
}
inline trn_hal_instance_t *instance(const Device &device) {
  return device.driver->instance;
}

// The driver's reservation granule (2 MiB when it does not say).
uint64_t chunk_bytes(const Device &device);

// Device memory from the driver as one segment of whole chunks, mapped for host access.
trn_result_t reserve_device_range(Device &device, uint32_t bank, uint64_t bytes, Segment *segment,
                                  std::string *why);
void release_device_range(Device &device, const Segment &segment);

// Host memory the device's DMA engines can reach: mapped here, registered with the driver, which
// gives it the device address that copies use.
trn_result_t take_host_range(Device &device, uint64_t bytes, Segment *segment, std::string *why);
void give_host_range_back(Device &device, const Segment &segment);

}  // namespace trn::rt
