// Host memory registered for a device's DMA. Registered ranges get device addresses whose top
// byte is 0x80 + device (HBM addresses have device + 1 there, 1..64), so the two never collide.
#pragma once

#include <cstdint>
#include <map>
#include <shared_mutex>
#include <string>

#include "trn/trn.h"

namespace trn::sim {

constexpr uint64_t kHostAddressTag = 0x80;  // top byte: kHostAddressTag + device

inline bool is_host_address(uint64_t address) {
  return (address >> 56) >= kHostAddressTag;
}

class HostRegistry {
 public:
  explicit HostRegistry(uint32_t device) : device_(device) {}
  trn_result_t add(void *host, uint64_t bytes, uint64_t *address, std::string *why);
  trn_result_t remove(uint64_t address, std::string *why);
  // The host memory behind [address, address+bytes), or nullptr if no registration holds it.
  char *find(uint64_t address, uint64_t bytes) const;

 private:
  struct Range {
    char *host;
    uint64_t bytes;
  };
  const uint32_t device_;
  mutable std::shared_mutex mu_;           // guards the maps and next_
  std::map<uint64_t, Range> by_address_;   // device address -> range
  std::map<uintptr_t, uint64_t> by_host_;  // host start -> device address
  uint64_t next_ = 1ull << 16;             // addresses are never reused
};

}  // namespace trn::sim
