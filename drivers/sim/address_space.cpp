// Device addresses: HBM of each device and host memory registered for it (host_registry.hpp).
// An HBM address resolves only inside a range this process holds (held_ranges.hpp).
#include "sim/ops_support.hpp"

namespace trn::sim {

DeviceRuntime *device_of(trn_hal_instance_t *instance, uint32_t device, trn_hal_error_t *err) {
  if (instance == nullptr || device >= instance->runtimes.size()) {
    fail(err, TRN_ERROR_OUT_OF_RANGE,
         "sim driver: no device " + std::to_string(device) + " (the instance has " +
             std::to_string(instance ? instance->runtimes.size() : 0) + ")");
    return nullptr;
  }
  return instance->runtimes[device].get();
}

std::string hex_address(uint64_t address) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(address));
  return text;
}

uint64_t hbm_address(const DeviceState &state, uint32_t device, uint64_t offset) {
  const uint64_t bank = offset / state.bank_bytes();
  return (uint64_t{device + 1} << 56) | (bank << 48) | (offset % state.bank_bytes());
}

bool hbm_offset(const DeviceState &state, uint32_t device, uint64_t address, uint64_t bytes,
                uint64_t *offset) {
  const uint64_t bank = (address >> 48) & 0xffu;
  const uint64_t in_bank = address & ((uint64_t{1} << 48) - 1);
  if ((address >> 56) != device + 1u || in_bank >= state.bank_bytes() ||
      bank >= state.header().hbm_bytes / state.bank_bytes())
    return false;
  *offset = bank * state.bank_bytes() + in_bank;
  return bytes <= state.header().hbm_bytes - *offset;
}

std::string not_held(uint32_t device, uint64_t address, uint64_t bytes) {
  return "device address " + hex_address(address) + "+" + std::to_string(bytes) +
         " is not inside one range of device " + std::to_string(device) +
         " memory that this process holds (free, another process's, released, or past the end "
         "of a range): use an address of a range reserved (mem_reserve) or imported (mem_import)";
}

trn_result_t resolve(trn_hal_instance_t &instance, uint64_t address, uint64_t bytes,
                     MemorySpan *span, std::string *why, HeldRangesMemo *memo) {
  const uint64_t top = address >> 56;
  const size_t devices = instance.runtimes.size();
  if (is_host_address(address)) {
    // Host memory registered for any device of the instance.
    for (const auto &runtime : instance.runtimes)
      if (char *host = runtime->hosts().find(address, bytes)) {
        *span = {host, nullptr, 0, bytes};
        return TRN_SUCCESS;
      }
    *why = "address " + hex_address(address) + "+" + std::to_string(bytes) +
           " is not inside host memory registered for a device (mem_register_host): it was "
           "never registered, was unregistered, or the range runs past its end";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  if (top >= 1 && top <= devices) {
    DeviceRuntime &runtime = *instance.runtimes[top - 1];
    uint64_t offset = 0;
    if (hbm_offset(runtime.state(), static_cast<uint32_t>(top - 1), address, bytes, &offset)) {
      if (!runtime.held().holds(offset, bytes, memo)) {
        *why = not_held(static_cast<uint32_t>(top - 1), address, bytes);
        return TRN_ERROR_INVALID_ARGUMENT;
      }
      char *base = nullptr;
      if (trn_result_t r = runtime.hbm_base(&base, why); r != TRN_SUCCESS) return r;
      *span = {base + offset, &runtime, offset, bytes};
      return TRN_SUCCESS;
    }
    *why = "device address " + hex_address(address) + "+" + std::to_string(bytes) +
           " runs outside the memory of device " + std::to_string(top - 1);
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  *why = "device address " + hex_address(address) +
         " is neither device memory nor registered host memory of this driver's devices";
  return TRN_ERROR_INVALID_ARGUMENT;
}

trn_result_t resolve_operand(trn_hal_instance_t &instance, uint64_t address, uint64_t bytes,
                             bool host_pointer, MemorySpan *span, std::string *why,
                             HeldRangesMemo *memo) {
  if (!host_pointer) return resolve(instance, address, bytes, span, why, memo);
  // The process's own memory: nothing to look up. A pointer with a device's top byte, or a
  // range past the user address space, cannot be one.
  if (address == 0 || bytes > UINT64_MAX - address ||
      (bytes > 0 && !is_host_address(address + bytes - 1))) {
    *why = "host pointer " + hex_address(address) + "+" + std::to_string(bytes) +
           " is not a range of this process's memory";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  *span = {reinterpret_cast<char *>(static_cast<uintptr_t>(address)), nullptr, 0, bytes};
  return TRN_SUCCESS;
}

}  // namespace trn::sim
