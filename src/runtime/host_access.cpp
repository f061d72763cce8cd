// Host access to an allocation: host-pool memory directly, device memory through the driver.
#include <cstring>

#include "runtime/driver_error.hpp"
#include "runtime/error.hpp"
#include "runtime/memory.hpp"
#include "runtime/segment_source.hpp"

namespace trn::rt {

trn_result_t map_for_write(Mem &mem, uint64_t offset, uint64_t bytes) {
  if (mem.kind == TRN_POOL_KIND_HOST || bytes == 0) return TRN_SUCCESS;
  Device &device = *mem.device;
  DriverError err;
  void *host = nullptr;
  if (trn_result_t r =
          ops(device).mem_map(instance(device), device.driver_index, mem.address + offset, bytes,
                              TRN_HAL_MAP_WRITE, &host, &err);
      r != TRN_SUCCESS)
    return fail(r, err.message);
  return TRN_SUCCESS;
}

trn_result_t write_range(Mem &mem, uint64_t offset, const void *source, uint64_t bytes) {
  if (bytes == 0) return TRN_SUCCESS;
  if (mem.kind == TRN_POOL_KIND_HOST) {
    std::memcpy(mem.host + offset, source, bytes);
    return TRN_SUCCESS;
  }
  Device &device = *mem.device;
  DriverError err;
  if (trn_result_t r = ops(device).mem_write(instance(device), device.driver_index,
                                             mem.address + offset, source, bytes, &err);
      r != TRN_SUCCESS)
    return fail(r, err.message);
  return TRN_SUCCESS;
}

trn_result_t read_range(Mem &mem, uint64_t offset, void *destination, uint64_t bytes) {
  if (bytes == 0) return TRN_SUCCESS;
  if (mem.kind == TRN_POOL_KIND_HOST) {
    std::memcpy(destination, mem.host + offset, bytes);
    return TRN_SUCCESS;
  }
  Device &device = *mem.device;
  DriverError err;
  if (trn_result_t r = ops(device).mem_read(instance(device), device.driver_index,
                                            mem.address + offset, destination, bytes, &err);
      r != TRN_SUCCESS)
    return fail(r, err.message);
  return TRN_SUCCESS;
}

}  // namespace trn::rt
