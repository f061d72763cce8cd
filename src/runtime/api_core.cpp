// C entry points for NeuronCores: listing, properties and ownership.
#include <cstddef>
#include <string>

#include "common/parse.hpp"
#include "runtime/api_support.hpp"
#include "runtime/driver_error.hpp"
#include "runtime/process_info.hpp"
#include "runtime/session.hpp"

using namespace trn::rt;

namespace {

std::string core_name(const Core &core) {
  return "NeuronCore " + std::to_string(core.index) + " on device " +
         std::to_string(core.device->index);
}

// The live owner among the core's physical cores (pid 0: free).
trn_result_t find_owner(const Core &core, trn_hal_process_t *owner) {
  const Device &device = *core.device;
  *owner = trn_hal_process_t{};
  const uint32_t first = core.layout.first_physical_core;
  for (uint32_t p = first; p < first + core.layout.physical_core_count; ++p) {
    DriverError err;
    trn_result_t r =
        device.driver->ops.core_owner(device.driver->instance, device.driver_index, p, owner, &err);
    if (r != TRN_SUCCESS) return fail(r, err.message);
    if (owner->pid != 0) break;
  }
  return TRN_SUCCESS;
}

}  // namespace

namespace trn::rt {

trn_result_t check_visible(const Core &core) {
  if (core.visible) return TRN_SUCCESS;
  return fail(TRN_ERROR_INVALID_ARGUMENT,
              core_name(core) + " (core id " + std::to_string(core.global_id) +
                  ") is not visible to this process (TRN_VISIBLE_CORES or "
                  "NEURON_RT_VISIBLE_CORES leave it out): it can be watched, not used; "
                  "trn_core_get lists the cores this process may use");
}

trn_result_t acquire_core(Core &core) {
  if (trn_result_t r = check_visible(core); r != TRN_SUCCESS) return r;
  std::lock_guard lock(core.device->mu);
  return acquire_core_locked(core);
}

trn_result_t check_not_shut_down(const Device &device) {
  if (!device.shut_down) return TRN_SUCCESS;
  return fail(TRN_ERROR_INVALID_HANDLE,
              "the runtime was shut down (trn_runtime_shutdown) while this call ran: get the "
              "core again");
}

trn_result_t acquire_core_locked(Core &core) {
  Device &device = *core.device;
  if (trn_result_t r = check_not_shut_down(device); r != TRN_SUCCESS) return r;
  if (core.owned) return TRN_SUCCESS;
  DriverError err;
  uint32_t busy = 0;
  const trn_result_t result = device.driver->ops.core_claim(
      device.driver->instance, device.driver_index, core.layout.first_physical_core,
      core.layout.physical_core_count, &busy, &err);
  if (result == TRN_ERROR_CORE_BUSY)
    return fail(result, core_name(core) + " (core id " + std::to_string(core.global_id) +
                            ") is in use by " + err.message +
                            ": wait for it to release the core, end it, or pick another core "
                            "with TRN_VISIBLE_CORES (trn-ls -w shows who owns what)");
  if (result != TRN_SUCCESS) return fail(result, err.message);
  core.owned = true;
  return TRN_SUCCESS;
}

}  // namespace trn::rt

namespace {

// trn_core_get (the visible cores, renumbered from 0) and trn_core_get_all (every core).
trn_result_t list_cores(trn_device_t handle, uint32_t *count, trn_core_t *cores,
                        bool visible_only) {
  TRN_GET_SESSION(session);
  const Device *device = lookup_device(*session, handle, &result);
  if (!device) return result;
  if (trn_result_t r = check_count(count); r != TRN_SUCCESS) return r;
  std::vector<const Core *> listed;
  for (const Core *core : device->cores)
    if (core->visible || !visible_only) listed.push_back(core);
  enumerate(count, cores, listed.size(),
            [&](uint32_t i) { return handle_of(*session, *listed[i]); });
  return TRN_SUCCESS;
}

}  // namespace

extern "C" {

TRN_API trn_result_t trn_core_get(trn_device_t handle, uint32_t *count, trn_core_t *cores) {
  return TRN_API_CALL({ return list_cores(handle, count, cores, true); });
}

TRN_API trn_result_t trn_core_get_all(trn_device_t handle, uint32_t *count, trn_core_t *cores) {
  return TRN_API_CALL({ return list_cores(handle, count, cores, false); });
}

TRN_API trn_result_t trn_core_get_properties(trn_core_t handle, trn_core_properties_t *properties) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    Core *core = lookup_core(*session, handle, &result);
    if (!core) return result;
    if (trn_result_t r = check_struct(properties, TRN_STRUCT_CORE_PROPERTIES, "properties",
                                      "TRN_CORE_PROPERTIES_INIT");
        r != TRN_SUCCESS)
      return r;
    Device &device = *core->device;
    trn_core_properties_t full = TRN_CORE_PROPERTIES_INIT;
    full.device_index = device.index;
    full.index = core->index;
    full.global_id = core->global_id;
    full.physical_core_count = core->layout.physical_core_count;
    full.first_physical_core = core->layout.first_physical_core;
    full.hbm_bank = core->layout.hbm_bank;
    full.dma_engines = core->layout.dma_engines;
    full.visible = core->visible ? 1 : 0;
    {
      std::lock_guard lock(device.mu);
      full.owned = core->owned ? 1 : 0;
    }
    copy_struct(full, properties);
    return TRN_SUCCESS;
  });
}

static_assert(sizeof(trn_hal_core_activity_t) ==
              sizeof(trn_core_activity_t) - offsetof(trn_core_activity_t, commands_completed));
constexpr size_t kActivityWords = sizeof(trn_hal_core_activity_t) / sizeof(uint64_t);

TRN_API trn_result_t trn_core_get_activity(trn_core_t handle, trn_core_activity_t *activity) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    const Core *core = lookup_core(*session, handle, &result);
    if (!core) return result;
    if (trn_result_t r =
            check_struct(activity, TRN_STRUCT_CORE_ACTIVITY, "activity", "TRN_CORE_ACTIVITY_INIT");
        r != TRN_SUCCESS)
      return r;
    const Device &device = *core->device;
    std::vector<trn_hal_process_t> processes;
    if (trn_result_t r = list_processes(device, &processes); r != TRN_SUCCESS) return r;
    trn_core_activity_t full = TRN_CORE_ACTIVITY_INIT;
    const uint32_t first = core->layout.first_physical_core;
    const uint32_t end = first + core->layout.physical_core_count;
    for (const auto &process : processes) {
      for (uint32_t p = first; p < end && p < TRN_MAX_CORES_PER_DEVICE; ++p) {
        // Both records are the same run of 64-bit counters (after the public header).
        const auto *a = reinterpret_cast<const uint64_t *>(&process.core_activity[p]);
        auto *sum = reinterpret_cast<uint64_t *>(&full.commands_completed);
        for (size_t i = 0; i < kActivityWords; ++i) sum[i] += a[i];
      }
    }
    copy_struct(full, activity);
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_core_acquire(trn_core_t handle) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    Core *core = lookup_core(*session, handle, &result);
    if (!core) return result;
    return acquire_core(*core);
  });
}

TRN_API trn_result_t trn_core_release(trn_core_t handle) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    Core *core = lookup_core(*session, handle, &result);
    if (!core) return result;
    Device &device = *core->device;
    std::lock_guard lock(device.mu);
    if (!core->owned)
      return fail(TRN_ERROR_NOT_OWNER,
                  core_name(*core) + " is not owned by this process: acquire it first");
    if (core->queues > 0)
      return fail(TRN_ERROR_HANDLE_IN_USE, core_name(*core) + " still has " +
                                               std::to_string(core->queues) +
                                               " queues: destroy them before releasing the core");
    DriverError err;
    result = device.driver->ops.core_unclaim(device.driver->instance, device.driver_index,
                                             core->layout.first_physical_core,
                                             core->layout.physical_core_count, &err);
    if (result != TRN_SUCCESS) return fail(result, err.message);
    core->owned = false;
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_core_get_owner(trn_core_t handle, trn_process_info_t *owner) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    const Core *core = lookup_core(*session, handle, &result);
    if (!core) return result;
    if (trn_result_t r =
            check_struct(owner, TRN_STRUCT_PROCESS_INFO, "owner", "TRN_PROCESS_INFO_INIT");
        r != TRN_SUCCESS)
      return r;
    trn_hal_process_t found{};
    if (trn_result_t r = find_owner(*core, &found); r != TRN_SUCCESS) return r;
    if (found.pid > 0) {
      // Every core the owner holds on this device, as trn_device_get_processes reports it.
      std::vector<trn_hal_process_t> processes;
      if (trn_result_t r = list_processes(*core->device, &processes); r != TRN_SUCCESS) return r;
      for (const auto &p : processes)
        if (p.pid == found.pid) found.physical_core_mask = p.physical_core_mask;
    }
    copy_struct(to_process_info(*core->device, found), owner);
    return TRN_SUCCESS;
  });
}

}  // extern "C"
