// Host memory registered for a device's DMA. The sim gives registered memory the device address
// its host pointer has (one address space for host and device, as unified addressing does): a
// user-space pointer has 0 in its top byte, an HBM address the device number + 1, so the two
// never collide. Only registered memory resolves: any other host pointer is refused.
#pragma once

#include <cstdint>
#include <map>
#include <shared_mutex>
#include <string>

#include "drivers/hal.h"

namespace trn::sim {

inline bool is_host_address(uint64_t address) {
  return (address >> 56) == 0;
}

class HostRegistry {
 public:
  explicit HostRegistry(uint32_t device) : device_(device) {}
  trn_result_t add(void *host, uint64_t bytes, uint64_t *address, std::string *why);
  trn_result_t remove(uint64_t address, std::string *why);
  // The host memory behind [address, address+bytes), or nullptr if no registration holds it.
  char *find(uint64_t address, uint64_t bytes) const;

 private:
  const uint32_t device_;
  mutable std::shared_mutex mu_;         // guards ranges_
  std::map<uint64_t, uint64_t> ranges_;  // start -> bytes
};

}  // namespace trn::sim
