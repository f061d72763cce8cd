#include "tool_common/device_snapshot.hpp"

#include "common/parse.hpp"

namespace trn::tools {

namespace {

trn_result_t snapshot_device(trn_device_t device, DeviceSnapshot *out) {
  if (trn_result_t r = trn_device_get_properties(device, &out->properties); r != TRN_SUCCESS)
    return r;
  uint32_t count = 0;
  if (trn_result_t r = trn_device_get_neighbors(device, &count, nullptr); r != TRN_SUCCESS)
    return r;
  out->neighbors.resize(count);
  if (trn_result_t r = trn_device_get_neighbors(device, &count, out->neighbors.data());
      r != TRN_SUCCESS)
    return r;
  out->neighbors.resize(count);
  if (trn_result_t r = trn_device_get_processes(device, &count, nullptr); r != TRN_SUCCESS)
    return r;
  count += 4;  // room for processes that attach between the two calls
  out->processes.assign(count, TRN_PROCESS_INFO_INIT);
  if (trn_result_t r = trn_device_get_processes(device, &count, out->processes.data());
      r != TRN_SUCCESS)
    return r;
  out->processes.resize(count);
  return trn_device_get_memory_stats(device, UINT32_MAX, &out->memory);
}

trn_result_t list_drivers(std::vector<trn_driver_properties_t> *out) {
  uint32_t count = 0;
  if (trn_result_t r = trn_driver_get(&count, nullptr); r != TRN_SUCCESS) return r;
  std::vector<trn_driver_t> drivers(count);
  if (trn_result_t r = trn_driver_get(&count, drivers.data()); r != TRN_SUCCESS) return r;
  for (uint32_t i = 0; i < count; ++i) {
    trn_driver_properties_t p = TRN_DRIVER_PROPERTIES_INIT;
    if (trn_result_t r = trn_driver_get_properties(drivers[i], &p); r != TRN_SUCCESS) return r;
    out->push_back(p);
  }
  return TRN_SUCCESS;
}

}  // namespace

trn_result_t take_snapshot(Snapshot *snapshot) {
  *snapshot = Snapshot{};
  if (trn_result_t r = list_drivers(&snapshot->drivers); r != TRN_SUCCESS) return r;
  uint32_t count = 0;
  if (trn_result_t r = trn_device_get(&count, nullptr); r != TRN_SUCCESS) return r;
  std::vector<trn_device_t> devices(count);
  if (trn_result_t r = trn_device_get(&count, devices.data()); r != TRN_SUCCESS) return r;
  for (uint32_t i = 0; i < count; ++i) {
    DeviceSnapshot device;
    if (trn_result_t r = snapshot_device(devices[i], &device); r != TRN_SUCCESS) return r;
    snapshot->devices.push_back(std::move(device));
  }
  if (snapshot->devices.empty()) snapshot->no_device_reason = no_device_reason(snapshot->drivers);
  return TRN_SUCCESS;
}

std::string no_device_reason(const std::vector<trn_driver_properties_t> &drivers) {
  std::string why;
  for (const auto &d : drivers)
    why += (why.empty() ? "" : "; ") + std::string(d.name) + " driver: " + d.status_detail;
  return drivers.empty() ? "no driver is loaded" : why;
}

std::string no_device_reason() {
  std::vector<trn_driver_properties_t> drivers;
  if (trn_result_t r = list_drivers(&drivers); r != TRN_SUCCESS)
    return std::string("the drivers cannot be listed: ") + trn_result_name(r) + ": " +
           trn_last_error();
  return no_device_reason(drivers);
}

std::string format_core_mask(uint64_t mask) {
  std::vector<uint32_t> cores;
  for (uint32_t i = 0; i < 64; ++i)
    if (mask >> i & 1u) cores.push_back(i);
  return common::format_index_list(cores);
}

}  // namespace trn::tools
