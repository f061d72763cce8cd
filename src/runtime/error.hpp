// The runtime's error reporting: every C entry point runs inside api_call(), which turns C++
// exceptions into results (none crosses the C boundary), and failures record a thread-local
// detail for trn_last_error().
#pragma once

#include <new>
#include <string>

#include "common/log.hpp"
#include "trn/trn.h"

namespace trn::rt {

// Records `detail` as this thread's last error, prefixed with the API function running, logs it
// at debug level, and returns `result`.
trn_result_t fail(trn_result_t result, const std::string &detail);
// Records the exception being handled (inside a catch block): std::bad_alloc is
// TRN_ERROR_OUT_OF_HOST_MEMORY, anything else TRN_ERROR_INTERNAL. Out of memory while
// describing it leaves an empty message, never an exception.
trn_result_t fail_current_exception() noexcept;

// The last failure's detail without the "function: " prefix, for wrapping into another message.
const std::string &last_detail();

// The API function running on this thread (for error prefixes).
const char *current_function();

class ApiScope {
 public:
  explicit ApiScope(const char *function);
  ~ApiScope();
  ApiScope(const ApiScope &) = delete;
  ApiScope &operator=(const ApiScope &) = delete;

 private:
  const char *previous_;
};

template <typename Body>
trn_result_t api_call(const char *function, Body &&body) noexcept {
  ApiScope scope(function);
  try {
    return body();
  } catch (...) {
    return fail_current_exception();
  }
}

#define TRN_API_CALL(...) ::trn::rt::api_call(__func__, [&]() -> trn_result_t __VA_ARGS__)

}  // namespace trn::rt
