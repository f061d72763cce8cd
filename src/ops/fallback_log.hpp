// The record of ops that ran on the host instead of the device (trn_ops_get_fallbacks): one entry
// per op and signature with a count and the reason, in the order first seen. The first time an
// op falls back, it is logged as a warning, so that a slow model says why.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trn::ops {

struct Fallback {
  std::string op, signature, reason;
  uint64_t count = 0;
};

void record_fallback(const std::string &op, const std::string &signature,
                     const std::string &reason);
std::vector<Fallback> fallbacks();
void reset_fallbacks();

}  // namespace trn::ops
