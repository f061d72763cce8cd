#include "check.hpp"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <string>

#include "trn/trn_ops.h"

namespace torch_trn {
namespace {

[[noreturn]] void raise(trn_result_t result, const std::string &what, const char *message) {
  const std::string text = what + " failed: " + trn_result_name(result) + ": " +
                           (message && *message ? message : trn_result_string(result));
  if (result == TRN_ERROR_OUT_OF_DEVICE_MEMORY || result == TRN_ERROR_OUT_OF_HOST_MEMORY)
    TORCH_CHECK_WITH(OutOfMemoryError, false, text);
  TORCH_CHECK(false, text);
}

}  // namespace

void check(trn_result_t result, const char *what) {
  if (result != TRN_SUCCESS) raise(result, what, trn_last_error());
}

void check_ops(trn_result_t result, const char *op) {
  if (result != TRN_SUCCESS) raise(result, std::string("trn_ops_") + op, trn_ops_last_error());
}

uint64_t wait_timeout_ns() {
  static const uint64_t ns = [] {
    const char *env = std::getenv("TRN_TORCH_TIMEOUT");
    const double seconds = env ? std::strtod(env, nullptr) : 0.0;
    return static_cast<uint64_t>((seconds > 0 ? seconds : 300.0) * 1e9);
  }();
  return ns;
}

}  // namespace torch_trn
