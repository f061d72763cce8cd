// Fixed-size values in and out of the byte strings the rendezvous carries (one host's byte
// order: the ranks of a communicator run the same build).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "comm/error.hpp"

namespace trn::comm {

template <typename T>
void put(std::vector<uint8_t> *out, const T &value) {
  const auto *p = reinterpret_cast<const uint8_t *>(&value);
  out->insert(out->end(), p, p + sizeof value);
}

// Reads a T at *at and advances it; a short string is TRN_ERROR_COLLECTIVE naming `what`.
template <typename T>
T take(const std::vector<uint8_t> &in, size_t *at, const char *what) {
  T value{};
  if (*at + sizeof value > in.size())
    fail(TRN_ERROR_COLLECTIVE,
         std::string("rendezvous: ") + what + " is truncated (not a trn communicator's peer?)");
  std::memcpy(&value, in.data() + *at, sizeof value);
  *at += sizeof value;
  return value;
}

}  // namespace trn::comm
