#include "runtime/error.hpp"

#include <new>
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
    // Out of memory while describing a failure: the result still says what happened, and no
    // stale message from an earlier call stays.
    t_last_error.clear();
    t_last_detail.clear();
  }
  return result;
}

trn_result_t fail_current_exception() noexcept {
  trn_result_t result = TRN_ERROR_INTERNAL;
  try {
    try {
      throw;
    } catch (const std::bad_alloc &) {
      result = TRN_ERROR_OUT_OF_HOST_MEMORY;
      return fail(result, "out of host memory");
    } catch (const std::exception &e) {
      return fail(result, std::string("internal error: ") + e.what());
    } catch (...) {
      return fail(result, "internal error: unknown exception");
    }
  } catch (...) {
    // The description itself ran out of memory: the result stands, and no stale message from
    // an earlier call stays.
    t_last_error.clear();
    t_last_detail.clear();
  }
  return result;
}

}  // namespace trn::rt

extern "C" TRN_API const char *trn_last_error(void) {
  return trn::rt::t_last_error.c_str();
}

extern "C" TRN_API void trn_set_last_error(const char *message) {
  try {
    trn::rt::t_last_error = message ? message : "";
  } catch (...) {
    trn::rt::t_last_error.clear();  // out of memory: no stale message stays
  }
}
