#include "runtime/error.hpp"

#include <string>

#include "runtime/session.hpp"

namespace trn::rt {

namespace {
thread_local std::string t_last_error;
thread_local std::string t_last_detail;
thread_local const char *t_function = nullptr;
}  // namespace

ApiScope::ApiScope(const char *function) : previous_(t_function) {
  t_function = function;
}
ApiScope::~ApiScope() {
  t_function = previous_;
  if (previous_ == nullptr) end_api_call();
}

const std::string &last_detail() {
  return t_last_detail;
}

const char *current_function() {
  return t_function ? t_function : "trn";
}

trn_result_t fail(trn_result_t result, const std::string &detail) {
  try {
    t_last_detail = detail;
    t_last_error = std::string(current_function()) + ": " + detail;
    common::logger("runtime")->debug("{} -> {}", t_last_error, trn_result_name(result));
  } catch (...) {
    // Out of memory while describing a failure: the result still says what happened.
  }
  return result;
}

}  // namespace trn::rt

extern "C" TRN_API const char *trn_last_error(void) {
  return trn::rt::t_last_error.c_str();
}
