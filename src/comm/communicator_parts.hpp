// What the parts of a communicator (communicator.cpp, peers.cpp, failure.cpp, chunks.cpp,
// operation_order.cpp) share and no one else needs.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "trn/trn.h"

namespace trn::comm {

inline constexpr uint32_t kMaxRanks = 64;
inline constexpr uint64_t kSliceNs =
    5'000'000;  // how often a blocked wait looks at the failure state
// Sends in place: from chunks of this size (copying a smaller one into the outbox costs less
// than waiting for its send before the operation ends), from allocations up to this size
// (mapping one commits all of it).
inline constexpr uint64_t kInPlaceMinBytes = 64 << 10;
inline constexpr uint64_t kInPlaceMaxAllocation = 1ull << 30;

// One random number per process: tells processes apart where pids might repeat (other hosts).
inline uint64_t process_token() {
  static const uint64_t token = [] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device() ^ static_cast<uint64_t>(getpid());
  }();
  return token;
}

// kAbort's payload: the operation's number (0: none), then the reason.
inline std::vector<uint8_t> abort_payload(uint64_t operation, const std::string &why) {
  std::vector<uint8_t> payload(sizeof operation + why.size());
  std::memcpy(payload.data(), &operation, sizeof operation);
  std::memcpy(payload.data() + sizeof operation, why.data(), why.size());
  return payload;
}

// The device of this process with that index (a peer's, from the table).
trn_device_t device_by_index(uint32_t index);

}  // namespace trn::comm
