// What the table's adapters share: error reporting, the C boundary's exception guard, device
// lookup and device address resolution.
#pragma once

#include <cstdio>
#include <new>
#include <string>
#include <system_error>

#include "drivers/hal.h"
#include "sim/sim_instance.hpp"

namespace trn::sim {

inline trn_result_t fail(trn_hal_error_t *err, trn_result_t result, const std::string &why) {
  if (err) std::snprintf(err->message, sizeof err->message, "%s", why.c_str());
  return result;
}

// The message of a failure caught at the C boundary, written without allocating (the failure
// may be that memory ran out).
inline trn_result_t fail_caught(trn_hal_error_t *err, trn_result_t result, const char *what,
                                const char *suffix = "") noexcept {
  if (err) std::snprintf(err->message, sizeof err->message, "sim driver: %s%s", what, suffix);
  return result;
}

// Runs an adapter's body; nothing thrown crosses the C boundary.
template <typename Body>
trn_result_t guarded(trn_hal_error_t *err, Body body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return fail_caught(err, TRN_ERROR_OUT_OF_HOST_MEMORY,
                       "out of host memory; free memory or lower the load");
  } catch (const std::system_error &e) {
    return fail_caught(err, TRN_ERROR_DRIVER, e.what(), " (threads or descriptors exhausted?)");
  } catch (const std::exception &e) {
    return fail_caught(err, TRN_ERROR_DRIVER, e.what());
  } catch (...) {
    return fail_caught(err, TRN_ERROR_DRIVER, "unknown exception");
  }
}

DeviceRuntime *device_of(trn_hal_instance_t *instance, uint32_t device, trn_hal_error_t *err);

// Runs body(DeviceRuntime &, std::string *why) for a device, guarded, reporting `why`.
template <typename Body>
trn_result_t with_device(trn_hal_instance_t *instance, uint32_t device, trn_hal_error_t *err,
                         Body body) {
  return guarded(err, [&] {
    DeviceRuntime *runtime = device_of(instance, device, err);
    if (!runtime) return TRN_ERROR_OUT_OF_RANGE;
    std::string why;
    trn_result_t r = body(*runtime, &why);
    return r == TRN_SUCCESS ? r : fail(err, r, why);
  });
}

std::string hex_address(uint64_t address);

// HBM addresses: (device + 1) << 56 | bank << 48 | offset in the bank.
uint64_t hbm_address(const DeviceState &state, uint32_t device, uint64_t offset);
// The HBM offset of [address, address+bytes) of `device`; false if it is not in its HBM.
bool hbm_offset(const DeviceState &state, uint32_t device, uint64_t address, uint64_t bytes,
                uint64_t *offset);

// A resolved device range: HBM of a device (runtime set) or registered host memory.
struct MemorySpan {
  char *host = nullptr;          // where it is mapped in this process
  DeviceRuntime *hbm = nullptr;  // HBM: its device; registered host memory: nullptr
  uint64_t offset = 0;           // HBM: offset in the device memory
  uint64_t bytes = 0;
};

// Why [address, address+bytes) of `device`'s HBM is refused: not inside a range this process holds.
std::string not_held(uint32_t device, uint64_t address, uint64_t bytes);

// Resolves an address of any device of the instance (HBM or registered host memory). `memo`: the
// caller's, for lookups of the ranges this process holds (held_ranges.hpp).
trn_result_t resolve(trn_hal_instance_t &instance, uint64_t address, uint64_t bytes,
                     MemorySpan *span, std::string *why, HeldRangesMemo *memo = nullptr);
// Where a TIMESTAMP command writes: its host pointer if it has one, else its device address.
inline uint64_t timestamp_address(const trn_hal_command_t &c) {
  return c.u.timestamp.host ? reinterpret_cast<uintptr_t>(c.u.timestamp.host)
                            : c.u.timestamp.destination;
}

// A command's operand: a device address, or (`host_pointer`) a plain pointer into this process's
// memory that the command pins for its duration (TRN_HAL_COPY_HOST_*).
trn_result_t resolve_operand(trn_hal_instance_t &instance, uint64_t address, uint64_t bytes,
                             bool host_pointer, MemorySpan *span, std::string *why,
                             HeldRangesMemo *memo = nullptr);

}  // namespace trn::sim
