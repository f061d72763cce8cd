#include "ops/error.hpp"

namespace trn::ops {

namespace {
thread_local std::string g_last_error;  // per thread, as trn_last_error()
}

void fail(trn_result_t result, const std::string &what) {
  throw OpError(result, what);
}

void check(trn_result_t result, const char *doing) {
  if (result == TRN_SUCCESS) return;
  const char *why = trn_last_error();
  fail(result, std::string(doing) + " failed (" + trn_result_name(result) + ")" +
                   (why && *why ? std::string(": ") + why : std::string()));
}

void set_last_error(std::string message) {
  g_last_error = std::move(message);
}

const char *last_error() {
  return g_last_error.c_str();
}

}  // namespace trn::ops
