#include "sim/host_registry.hpp"

#include <cstdio>
#include <mutex>

namespace trn::sim {

namespace {

constexpr uint64_t kAddressSpace = 1ull << 56;
constexpr uint64_t kAlignment = 1ull << 16;

std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

trn_result_t HostRegistry::add(void *host, uint64_t bytes, uint64_t *address, std::string *why) {
  const auto start = reinterpret_cast<uintptr_t>(host);
  if (host == nullptr || bytes == 0 || bytes > UINTPTR_MAX - start) {
    *why = "host memory to register must be a non-empty range (host " + hex(start) + ", " +
           std::to_string(bytes) + " bytes)";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  std::unique_lock lock(mu_);
  // The registration starting at or before `start`, and the first one after it.
  auto after = by_host_.upper_bound(start);
  auto overlaps = [&](std::map<uintptr_t, uint64_t>::const_iterator it) {
    const Range &r = by_address_.at(it->second);
    return it->first < start + bytes && start < it->first + r.bytes;
  };
  if ((after != by_host_.end() && overlaps(after)) ||
      (after != by_host_.begin() && overlaps(std::prev(after)))) {
    const auto other = after != by_host_.end() && overlaps(after) ? after : std::prev(after);
    *why = "host range " + hex(start) + "+" + std::to_string(bytes) +
           " overlaps host memory already registered at " + hex(other->first) + "+" +
           std::to_string(by_address_.at(other->second).bytes) + " for device " +
           std::to_string(device_) + ": unregister it first or register ranges that do not overlap";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  const uint64_t span = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (span > kAddressSpace - next_) {
    *why = "device " + std::to_string(device_) +
           " has no device addresses left for host registrations: unregister ranges no longer "
           "needed";
    return TRN_ERROR_OUT_OF_DEVICE_MEMORY;
  }
  const uint64_t device_address = ((kHostAddressTag + device_) << 56) | next_;
  next_ += span;
  by_address_.emplace(device_address, Range{static_cast<char *>(host), bytes});
  by_host_.emplace(start, device_address);
  *address = device_address;
  return TRN_SUCCESS;
}

trn_result_t HostRegistry::remove(uint64_t address, std::string *why) {
  std::unique_lock lock(mu_);
  auto it = by_address_.find(address);
  if (it == by_address_.end()) {
    *why = "device address " + hex(address) + " is not host memory registered for device " +
           std::to_string(device_) + ": pass the address that mem_register_host returned, once";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  by_host_.erase(reinterpret_cast<uintptr_t>(it->second.host));
  by_address_.erase(it);
  return TRN_SUCCESS;
}

char *HostRegistry::find(uint64_t address, uint64_t bytes) const {
  std::shared_lock lock(mu_);
  auto it = by_address_.upper_bound(address);
  if (it == by_address_.begin()) return nullptr;
  --it;
  const uint64_t offset = address - it->first;
  if (offset > it->second.bytes || bytes > it->second.bytes - offset) return nullptr;
  return it->second.host + offset;
}

}  // namespace trn::sim
