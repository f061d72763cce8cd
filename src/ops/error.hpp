// How libtrn_ops reports failures: internal code throws OpError (a result and one line saying
// what was wrong and what to do); each C entry point catches it in api_call, which records the
// line as this thread's trn_ops_last_error() and returns the result. No exception crosses the C
// boundary.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include "trn/trn.h"

namespace trn::ops {

struct OpError : std::runtime_error {
  OpError(trn_result_t r, const std::string &what) : std::runtime_error(what), result(r) {}
  trn_result_t result;
};

// A kernel or device handle from before a runtime restart: the op looks it up again, once.
struct StaleHandle {};

// The kernel builder could not make the op's kernel (a row too wide for SBUF, ...): the op runs
// on the host instead, with the builder's message as the reason.
struct DeviceRefused {
  std::string why;
};

// Runs a device path; nullopt when it queued the op, else why the device refused it.
template <typename Body>
std::optional<std::string> try_device(Body &&body) {
  try {
    body();
    return std::nullopt;
  } catch (const DeviceRefused &r) {
    return "the kernel builder refused it: " + r.why;
  }
}

[[noreturn]] void fail(trn_result_t result, const std::string &what);
[[noreturn]] inline void invalid(const std::string &what) {
  fail(TRN_ERROR_INVALID_ARGUMENT, what);
}
// A runtime call's result: success passes; a failure throws with the runtime's own message,
// prefixed with what this library was doing.
void check(trn_result_t result, const char *doing);

void set_last_error(std::string message);
const char *last_error();

// The exception being handled (inside a catch block), recorded as "function: message"; its
// result. Out of memory while describing it leaves an empty message, never an exception.
trn_result_t record_current_exception(const char *function) noexcept;

// Runs `body` for the entry point `function`: TRN_SUCCESS, or the failure it threw, recorded as
// "function: message".
template <typename Body>
trn_result_t api_call(const char *function, Body &&body) noexcept {
  try {
    body();
    return TRN_SUCCESS;
  } catch (...) {
    return record_current_exception(function);
  }
}

}  // namespace trn::ops
