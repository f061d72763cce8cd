// C entry points for the runtime, drivers and devices.
#include <cstdio>

#include "runtime/api_support.hpp"
#include "runtime/driver_error.hpp"
#include "runtime/process_info.hpp"
#include "runtime/queue.hpp"
#include "runtime/session.hpp"

using namespace trn::rt;

extern "C" {

TRN_API trn_result_t trn_runtime_shutdown(void) {
  return TRN_API_CALL({
    // Shutting down waits for every queue, the one running this thread's host function too.
    if (Queue::running_host_call() != nullptr)
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  "trn_runtime_shutdown was called from a queue's host function (shutting down "
                  "waits for every queue, that one too): call it from another thread");
    shutdown_session();
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_driver_get(uint32_t *count, trn_driver_t *drivers) {
  return TRN_API_CALL({
    if (trn_result_t r = check_count(count); r != TRN_SUCCESS) return r;
    TRN_GET_SESSION(session);
    enumerate(count, drivers, session->drivers().size(),
              [&](uint32_t i) { return handle_of(*session, i); });
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_driver_get_properties(trn_driver_t handle,
                                               trn_driver_properties_t *properties) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    const Driver *driver = lookup_driver(*session, handle, &result);
    if (!driver) return result;
    if (trn_result_t r = check_struct(properties, TRN_STRUCT_DRIVER_PROPERTIES, "properties",
                                      "TRN_DRIVER_PROPERTIES_INIT");
        r != TRN_SUCCESS)
      return r;
    trn_driver_properties_t full = TRN_DRIVER_PROPERTIES_INIT;
    std::snprintf(full.name, sizeof full.name, "%s", driver->name.c_str());
    full.hal_version = driver->ops.version;
    full.device_count = driver->device_count;
    full.status = driver->status;
    std::snprintf(full.status_detail, sizeof full.status_detail, "%s",
                  driver->status_detail.c_str());
    copy_struct(full, properties);
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_device_get(uint32_t *count, trn_device_t *devices) {
  return TRN_API_CALL({
    if (trn_result_t r = check_count(count); r != TRN_SUCCESS) return r;
    TRN_GET_SESSION(session);
    enumerate(count, devices, session->devices().size(),
              [&](uint32_t i) { return handle_of(*session, *session->devices()[i]); });
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_device_get_properties(trn_device_t handle,
                                               trn_device_properties_t *properties) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    const Device *device = lookup_device(*session, handle, &result);
    if (!device) return result;
    if (trn_result_t r = check_struct(properties, TRN_STRUCT_DEVICE_PROPERTIES, "properties",
                                      "TRN_DEVICE_PROPERTIES_INIT");
        r != TRN_SUCCESS)
      return r;
    copy_struct(device->properties, properties);
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_device_get_neighbors(trn_device_t handle, uint32_t *count,
                                              uint32_t *device_indices) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    const Device *device = lookup_device(*session, handle, &result);
    if (!device) return result;
    if (trn_result_t r = check_count(count); r != TRN_SUCCESS) return r;
    const Driver &driver = *device->driver;
    DriverError err;
    result = driver.ops.device_neighbors(driver.instance, device->driver_index, count,
                                         device_indices, &err);
    if (result != TRN_SUCCESS) return fail(result, err.message);
    if (device_indices)
      for (uint32_t i = 0; i < *count; ++i) device_indices[i] += driver.first_device;
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_device_get_processes(trn_device_t handle, uint32_t *count,
                                              trn_process_info_t *processes) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    const Device *device = lookup_device(*session, handle, &result);
    if (!device) return result;
    if (trn_result_t r = check_count(count); r != TRN_SUCCESS) return r;
    std::vector<trn_process_info_t *> elements;
    if (processes)
      if (trn_result_t r = caller_elements(processes, *count, TRN_STRUCT_PROCESS_INFO, "processes",
                                           "TRN_PROCESS_INFO_INIT", &elements);
          r != TRN_SUCCESS)
        return r;
    std::vector<trn_hal_process_t> found;
    if (trn_result_t r = list_processes(*device, &found); r != TRN_SUCCESS) return r;
    if (!processes) {
      *count = static_cast<uint32_t>(found.size());
      return TRN_SUCCESS;
    }
    const uint32_t n = std::min<uint32_t>(*count, static_cast<uint32_t>(found.size()));
    for (uint32_t i = 0; i < n; ++i) copy_struct(to_process_info(*device, found[i]), elements[i]);
    *count = n;
    return TRN_SUCCESS;
  });
}

}  // extern "C"
