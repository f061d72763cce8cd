#include "runtime/process_info.hpp"

#include <cstring>

#include "runtime/driver_error.hpp"
#include "runtime/error.hpp"

namespace trn::rt {

trn_process_info_t to_process_info(const Device &device, const trn_hal_process_t &process) {
  trn_process_info_t info = TRN_PROCESS_INFO_INIT;
  info.pid = process.pid;
  info.uid = process.uid;
  info.attached_unix_ns = process.attached_unix_ns;
  info.since_unix_ns = process.since_unix_ns;
  std::memcpy(info.command, process.command, sizeof info.command);
  std::memcpy(info.runtime_version, process.runtime_version, sizeof info.runtime_version);
  for (uint32_t bank = 0; bank < TRN_MAX_HBM_BANKS; ++bank) {
    info.hbm_reserved_bytes += process.hbm_reserved_bytes[bank];
    for (uint32_t c = 0; c < TRN_MEM_CATEGORY_COUNT; ++c) {
      info.hbm_allocated_bytes += process.hbm_allocated_bytes[bank][c];
      info.hbm_allocated_by_category[c] += process.hbm_allocated_bytes[bank][c];
    }
  }
  for (const Core *core : device.cores)
    if (core->index < 64 && (process.physical_core_mask & core->layout.physical_core_mask))
      info.core_mask |= uint64_t{1} << core->index;
  return info;
}

trn_result_t list_processes(const Device &device, std::vector<trn_hal_process_t> *out) {
  const Driver &driver = *device.driver;
  DriverError err;
  uint32_t count = 0;
  trn_result_t r =
      driver.ops.process_list(driver.instance, device.driver_index, &count, nullptr, &err);
  if (r != TRN_SUCCESS) return fail(r, err.message);
  // Processes may attach between the two calls: leave room and retry a few times.
  for (int attempt = 0; attempt < 8; ++attempt) {
    out->resize(count + 4);
    uint32_t capacity = static_cast<uint32_t>(out->size());
    r = driver.ops.process_list(driver.instance, device.driver_index, &capacity, out->data(), &err);
    if (r != TRN_SUCCESS) return fail(r, err.message);
    if (capacity < out->size()) {
      out->resize(capacity);
      return TRN_SUCCESS;
    }
    count = capacity * 2;
  }
  return TRN_SUCCESS;
}

}  // namespace trn::rt
