// Allocations that no pool made, and the end of every allocation: caller memory registered for
// the device's DMA, and the release of what an allocation holds (its block, its dedicated range,
// its export or import, its registration).
#include "common/log.hpp"
#include "runtime/driver_error.hpp"
#include "runtime/error.hpp"
#include "runtime/memory.hpp"
#include "runtime/segment_source.hpp"

namespace trn::rt {

trn_result_t register_host_memory(Device &device, void *host, uint64_t size, uint32_t flags,
                                  std::shared_ptr<Mem> *out) {
  auto mem = std::make_shared<Mem>();
  DriverError err;
  if (trn_result_t r = ops(device).mem_register_host(instance(device), device.driver_index, host,
                                                     size, &mem->address, &err);
      r != TRN_SUCCESS)
    return fail(r, std::string(ops(device).name) + " driver: " + err.message);
  mem->device = &device;
  mem->kind = TRN_POOL_KIND_HOST;
  mem->flags = flags;
  mem->size = size;
  mem->host = static_cast<char *>(host);
  mem->registered = true;
  *out = std::move(mem);
  return TRN_SUCCESS;
}

void release_memory(Mem &mem) {
  if (!mem.use.close()) return;  // freed already
  Device &device = *mem.device;
  unindex_memory(mem);
  if (mem.registered) {
    DriverError err;
    if (ops(device).mem_unregister_host(instance(device), device.driver_index, mem.address, &err) !=
        TRN_SUCCESS)
      common::logger("runtime")->warn("unregistering host memory: {}", err.message);
    return;
  }
  if (mem.pool) mem.pool->free(mem);
  if (!mem.dedicated) return;
  DriverError err;
  trn_result_t r = TRN_SUCCESS;
  if (mem.exported) {
    // The count and the driver's hold change together (see import_memory).
    std::lock_guard lock(device.memory_mu);
    auto it = device.export_holds.find({mem.export_record, mem.export_id});
    const bool last = it == device.export_holds.end() || --it->second == 0;
    if (last && it != device.export_holds.end()) device.export_holds.erase(it);
    if (last)
      r = ops(device).mem_unexport(instance(device), device.driver_index, mem.export_record,
                                   mem.export_id, &err);
  } else
    r = ops(device).mem_release(instance(device), device.driver_index, mem.address,
                                mem.dedicated->segment.size, &err);
  if (r != TRN_SUCCESS) common::logger("runtime")->warn("returning device memory: {}", err.message);
  if (mem.pool) mem.pool->forget_dedicated(mem.dedicated->segment.size);
  mem.dedicated.reset();
}

}  // namespace trn::rt
