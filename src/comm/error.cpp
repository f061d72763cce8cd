#include "comm/error.hpp"

#include "trn/trn_ops.h"

namespace trn::comm {

namespace {
thread_local std::string g_last_error;  // per thread, as trn_last_error()

std::string with_reason(trn_result_t result, const std::string &doing, const char *why) {
  return doing + " failed (" + trn_result_name(result) + ")" +
         (why && *why ? std::string(": ") + why : std::string());
}
}  // namespace

void fail(trn_result_t result, const std::string &what) {
  throw CommError(result, what);
}

void check(trn_result_t result, const std::string &doing) {
  if (result != TRN_SUCCESS) fail(result, with_reason(result, doing, trn_last_error()));
}

void check_ops(trn_result_t result, const std::string &doing) {
  if (result != TRN_SUCCESS) fail(result, with_reason(result, doing, trn_ops_last_error()));
}

void set_last_error(std::string message) {
  g_last_error = std::move(message);
}

const char *last_error() {
  return g_last_error.c_str();
}

}  // namespace trn::comm
