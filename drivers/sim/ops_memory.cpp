// Device memory: reservations, mappings, host copies, host registrations, sharing, accounting.
#include "sim/dma_engine.hpp"
#include "sim/ops_support.hpp"
#include "sim/ops_table.hpp"

namespace trn::sim {
namespace {

trn_result_t bad_address(uint32_t device, uint64_t address, uint64_t bytes, std::string *why) {
  *why = "device address " + hex_address(address) + "+" + std::to_string(bytes) +
         " is not device memory of device " + std::to_string(device);
  return TRN_ERROR_INVALID_ARGUMENT;
}

trn_result_t no_bank(uint32_t device, uint32_t bank, std::string *why) {
  *why = "device " + std::to_string(device) + " has no HBM bank " + std::to_string(bank);
  return TRN_ERROR_OUT_OF_RANGE;
}

uint32_t bank_count(const DeviceState &state) {
  return static_cast<uint32_t>(state.header().hbm_bytes / state.bank_bytes());
}

// Body(DeviceRuntime &, uint64_t offset, std::string *why) for an HBM range of a device.
template <typename Body>
trn_result_t with_hbm(trn_hal_instance_t *instance, uint32_t device, uint64_t address,
                      uint64_t bytes, trn_hal_error_t *err, Body body) {
  return with_device(instance, device, err, [&](DeviceRuntime &runtime, std::string *why) {
    uint64_t offset = 0;
    if (!hbm_offset(runtime.state(), device, address, bytes, &offset))
      return bad_address(device, address, bytes, why);
    return body(runtime, offset, why);
  });
}

trn_result_t sim_mem_reserve(trn_hal_instance_t *instance, uint32_t device, uint32_t bank,
                             uint64_t bytes, uint64_t *address, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceRuntime &runtime, std::string *why) {
    DeviceState &state = runtime.state();
    if (bank >= bank_count(state)) return no_bank(device, bank, why);
    if (bytes == 0 || bytes % kChunkBytes != 0) {
      *why = "mem_reserve of " + std::to_string(bytes) +
             " bytes: a reservation is a whole "
             "number of chunks (chunk_bytes " +
             std::to_string(kChunkBytes) + "): round the size up to a multiple of it";
      return TRN_ERROR_INVALID_ARGUMENT;
    }
    uint64_t offset = 0;
    const auto owning = runtime.lock_ownership();
    trn_result_t r = state.hbm_reserve(instance->identity, bank, bytes, &offset, why);
    if (r == TRN_SUCCESS) {
      runtime.held().add(offset, bytes);
      *address = hbm_address(state, device, offset);
    }
    return r;
  });
}

trn_result_t sim_mem_release(trn_hal_instance_t *instance, uint32_t device, uint64_t address,
                             uint64_t bytes, trn_hal_error_t *err) {
  return with_hbm(instance, device, address, bytes, err,
                  [&](DeviceRuntime &runtime, uint64_t offset, std::string *why) {
                    const auto owning = runtime.lock_ownership();
                    trn_result_t r = runtime.state().hbm_release(offset, bytes, why);
                    if (r == TRN_SUCCESS) {
                      runtime.held().remove(offset, bytes);
                      runtime.commits().forget(offset, bytes);
                    }
                    return r;
                  });
}

trn_result_t sim_mem_map(trn_hal_instance_t *instance, uint32_t device, uint64_t address,
                         uint64_t bytes, uint32_t flags, void **host, trn_hal_error_t *err) {
  return with_hbm(instance, device, address, bytes, err,
                  [&](DeviceRuntime &runtime, uint64_t offset, std::string *why) {
                    if (flags & ~(TRN_HAL_MAP_READ | TRN_HAL_MAP_WRITE)) {
                      *why = "unknown mem_map flags " + std::to_string(flags) +
                             ": use TRN_HAL_MAP_READ and/or TRN_HAL_MAP_WRITE";
                      return TRN_ERROR_INVALID_ARGUMENT;
                    }
                    if (!runtime.held().holds(offset, bytes)) {
                      *why = not_held(device, address, bytes);
                      return TRN_ERROR_INVALID_ARGUMENT;
                    }
                    // A writer must never fault on a full store: back the range first.
                    if (flags & TRN_HAL_MAP_WRITE)
                      if (trn_result_t r = runtime.commits().commit(offset, bytes, why);
                          r != TRN_SUCCESS)
                        return r;
                    char *base = nullptr;
                    if (trn_result_t r = runtime.hbm_base(&base, why); r != TRN_SUCCESS) return r;
                    *host = base + offset;
                    return TRN_SUCCESS;
                  });
}

// A host copy's device side: HBM of the device or host memory registered for it.
trn_result_t resolve_for(trn_hal_instance_t *instance, uint32_t device, uint64_t address,
                         uint64_t bytes, MemorySpan *span, std::string *why) {
  const uint64_t top = address >> 56;
  if (is_host_address(address)) {
    DeviceRuntime *runtime = instance->runtimes[device].get();
    if (char *host = runtime->hosts().find(address, bytes)) {
      *span = {host, nullptr, 0, bytes};
      return TRN_SUCCESS;
    }
    return bad_address(device, address, bytes, why);
  }
  if (top != device + 1u) return bad_address(device, address, bytes, why);
  return resolve(*instance, address, bytes, span, why);
}

trn_result_t sim_mem_write(trn_hal_instance_t *instance, uint32_t device, uint64_t address,
                           const void *source, uint64_t bytes, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceRuntime &, std::string *why) {
    if (source == nullptr && bytes != 0) {
      *why = "mem_write has no source (NULL)";
      return TRN_ERROR_NULL_POINTER;
    }
    MemorySpan span;
    if (trn_result_t r = resolve_for(instance, device, address, bytes, &span, why);
        r != TRN_SUCCESS)
      return r;
    return dma_write(instance->dma, span, source, why);
  });
}

trn_result_t sim_mem_read(trn_hal_instance_t *instance, uint32_t device, uint64_t address,
                          void *destination, uint64_t bytes, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceRuntime &, std::string *why) {
    if (destination == nullptr && bytes != 0) {
      *why = "mem_read has no destination (NULL)";
      return TRN_ERROR_NULL_POINTER;
    }
    MemorySpan span;
    if (trn_result_t r = resolve_for(instance, device, address, bytes, &span, why);
        r != TRN_SUCCESS)
      return r;
    return dma_read(instance->dma, span, destination, why);
  });
}

trn_result_t sim_mem_register_host(trn_hal_instance_t *instance, uint32_t device, void *host,
                                   uint64_t bytes, uint64_t *address, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceRuntime &runtime, std::string *why) {
    if (address == nullptr) {
      *why = "mem_register_host needs somewhere to put the device address (NULL)";
      return TRN_ERROR_NULL_POINTER;
    }
    return runtime.hosts().add(host, bytes, address, why);
  });
}

trn_result_t sim_mem_unregister_host(trn_hal_instance_t *instance, uint32_t device,
                                     uint64_t address, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceRuntime &runtime, std::string *why) {
    return runtime.hosts().remove(address, why);
  });
}

void sim_mem_account(trn_hal_instance_t *instance, uint32_t device, uint32_t bank,
                     trn_mem_category_t category, int64_t bytes, int64_t count) {
  if (instance && device < instance->runtimes.size())
    instance->runtimes[device]->state().account(bank, static_cast<uint32_t>(category), bytes,
                                                count);
}

trn_result_t sim_mem_export(trn_hal_instance_t *instance, uint32_t device, uint64_t address,
                            uint64_t bytes, uint32_t *record, uint64_t *id, trn_hal_error_t *err) {
  return with_hbm(instance, device, address, bytes, err,
                  [&](DeviceRuntime &runtime, uint64_t offset, std::string *why) {
                    const auto owning = runtime.lock_ownership();
                    trn_result_t r = runtime.state().hbm_export(offset, bytes, record, id, why);
                    // Importers may write it from now on.
                    if (r == TRN_SUCCESS) {
                      runtime.held().note_export(*record, *id, offset, bytes);
                      runtime.commits().mark_shared(offset, bytes);
                    }
                    return r;
                  });
}

trn_result_t sim_mem_import(trn_hal_instance_t *instance, uint32_t device, uint32_t record,
                            uint64_t id, uint64_t *address, uint64_t *bytes, uint32_t *bank,
                            trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceRuntime &runtime, std::string *why) {
    DeviceState &state = runtime.state();
    uint64_t offset = 0, size = 0;
    const auto owning = runtime.lock_ownership();
    trn_result_t r = state.hbm_import(instance->identity, record, id, &offset, &size, why);
    if (r != TRN_SUCCESS) return r;
    // The exporter (and other importers) may have written it: reads must back and read it.
    runtime.commits().mark_shared(offset, size);
    runtime.held().add(offset, size);
    runtime.held().note_export(record, id, offset, size);
    if (address) *address = hbm_address(state, device, offset);
    if (bytes) *bytes = size;
    if (bank) *bank = static_cast<uint32_t>(offset / state.bank_bytes());
    return r;
  });
}

trn_result_t sim_mem_unexport(trn_hal_instance_t *instance, uint32_t device, uint32_t record,
                              uint64_t id, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceRuntime &runtime, std::string *why) {
    const auto owning = runtime.lock_ownership();
    const trn_result_t r = runtime.state().hbm_unexport(record, id, why);
    // STATE_CORRUPT: the hold was dropped all the same. What this process backed there is no
    // longer its to trust: the last holder's unexport frees the chunks (and their storage), and
    // a later reservation of them must back them again.
    if (r == TRN_SUCCESS || r == TRN_ERROR_STATE_CORRUPT) {
      const auto [offset, bytes] = runtime.held().drop_export(record, id);
      runtime.commits().forget(offset, bytes);
    }
    return r;
  });
}

trn_result_t sim_mem_bank_usage(trn_hal_instance_t *instance, uint32_t device, uint32_t bank,
                                uint64_t *bank_bytes, uint64_t *held, uint64_t *largest_free,
                                trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceRuntime &runtime, std::string *why) {
    DeviceState &state = runtime.state();
    if (bank >= bank_count(state)) return no_bank(device, bank, why);
    *bank_bytes = state.bank_bytes();
    return state.bank_usage(bank, held, largest_free, why);
  });
}

}  // namespace

void fill_memory_ops(trn_hal_ops_t *ops) {
  ops->mem_reserve = sim_mem_reserve;
  ops->mem_release = sim_mem_release;
  ops->mem_map = sim_mem_map;
  ops->mem_write = sim_mem_write;
  ops->mem_read = sim_mem_read;
  ops->mem_register_host = sim_mem_register_host;
  ops->mem_unregister_host = sim_mem_unregister_host;
  ops->mem_account = sim_mem_account;
  ops->mem_export = sim_mem_export;
  ops->mem_import = sim_mem_import;
  ops->mem_unexport = sim_mem_unexport;
  ops->mem_bank_usage = sim_mem_bank_usage;
}

}  // namespace trn::sim
