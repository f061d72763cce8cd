#include "runtime/segment_source.hpp"

#include "common/log.hpp"
#include "runtime/driver_error.hpp"
#include "runtime/host_memory.hpp"

namespace trn::rt {

uint64_t chunk_bytes(const Device &device) {
  return device.info.chunk_bytes ? device.info.chunk_bytes : (2ull << 20);
}

trn_result_t reserve_device_range(Device &device, uint32_t bank, uint64_t bytes, Segment *segment,
                                  std::string *why) {
  DriverError err;
  trn_result_t r = ops(device).mem_reserve(instance(device), device.driver_index, bank, bytes,
                                           &segment->address, &err);
  // Mapped for reading: what the host writes through it is backed first (map_for_write).
  if (r == TRN_SUCCESS)
    r = ops(device).mem_map(instance(device), device.driver_index, segment->address, bytes,
                            TRN_HAL_MAP_READ, &segment->host, &err);
  if (r != TRN_SUCCESS) {
    if (segment->address)
      ops(device).mem_release(instance(device), device.driver_index, segment->address, bytes,
                              nullptr);
    *why = err.message;
    return r;
  }
  segment->size = bytes;
  return TRN_SUCCESS;
}

void release_device_range(Device &device, const Segment &segment) {
  DriverError err;
  if (ops(device).mem_release(instance(device), device.driver_index, segment.address, segment.size,
                              &err) != TRN_SUCCESS)
    common::logger("runtime")->warn("returning device memory: {}", err.message);
}

trn_result_t take_host_range(Device &device, uint64_t bytes, Segment *segment, std::string *why) {
  void *memory = nullptr;
  if (trn_result_t r = map_host_memory(bytes, &memory, why); r != TRN_SUCCESS) return r;
  DriverError err;
  if (trn_result_t r = ops(device).mem_register_host(instance(device), device.driver_index, memory,
                                                     bytes, &segment->address, &err);
      r != TRN_SUCCESS) {
    unmap_host_memory(memory, bytes);
    *why = std::string("registering host memory with the driver: ") + err.message;
    return r;
  }
  segment->host = memory;
  segment->size = bytes;
  return TRN_SUCCESS;
}

void give_host_range_back(Device &device, const Segment &segment) {
  DriverError err;
  if (ops(device).mem_unregister_host(instance(device), device.driver_index, segment.address,
                                      &err) != TRN_SUCCESS)
    common::logger("runtime")->warn("unregistering host memory: {}", err.message);
  unmap_host_memory(segment.host, segment.size);
}

}  // namespace trn::rt
