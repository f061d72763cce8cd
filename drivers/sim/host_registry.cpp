#include "sim/host_registry.hpp"

#include <cstdio>
#include <iterator>
#include <mutex>

namespace trn::sim {

namespace {

std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

trn_result_t HostRegistry::add(void *host, uint64_t bytes, uint64_t *address, std::string *why) {
  const auto start = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(host));
  if (host == nullptr || bytes == 0 || bytes > UINT64_MAX - start ||
      !is_host_address(start + bytes - 1)) {
    *why = "host memory to register must be a non-empty range of this process's memory (host " +
           hex(start) + ", " + std::to_string(bytes) + " bytes)";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  std::unique_lock lock(mu_);
  // The registration starting after `start`, and the one before it.
  const auto after = ranges_.upper_bound(start);
  auto overlaps = [&](std::map<uint64_t, uint64_t>::const_iterator it) {
    return it->first < start + bytes && start < it->first + it->second;
  };
  const bool after_overlaps = after != ranges_.end() && overlaps(after);
  if (after_overlaps || (after != ranges_.begin() && overlaps(std::prev(after)))) {
    const auto other = after_overlaps ? after : std::prev(after);
    *why = "host range " + hex(start) + "+" + std::to_string(bytes) +
           " overlaps host memory already registered at " + hex(other->first) + "+" +
           std::to_string(other->second) + " for device " + std::to_string(device_) +
           ": unregister it first or register ranges that do not overlap";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  ranges_.emplace(start, bytes);
  *address = start;
  return TRN_SUCCESS;
}

trn_result_t HostRegistry::remove(uint64_t address, std::string *why) {
  std::unique_lock lock(mu_);
  if (ranges_.erase(address) == 0) {
    *why = "device address " + hex(address) + " is not host memory registered for device " +
           std::to_string(device_) + ": pass the address that mem_register_host returned, once";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  return TRN_SUCCESS;
}

char *HostRegistry::find(uint64_t address, uint64_t bytes) const {
  std::shared_lock lock(mu_);
  auto it = ranges_.upper_bound(address);
  if (it == ranges_.begin()) return nullptr;
  --it;
  const uint64_t offset = address - it->first;
  if (offset > it->second || bytes > it->second - offset) return nullptr;
  return reinterpret_cast<char *>(static_cast<uintptr_t>(address));
}

}  // namespace trn::sim
