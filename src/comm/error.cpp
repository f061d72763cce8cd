#include "comm/error.hpp"

#include <new>
#include <system_error>

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

namespace {

bool resources_exhausted(const std::system_error &e) {
  return e.code() == std::errc::resource_unavailable_try_again ||
         e.code() == std::errc::not_enough_memory;
}

}  // namespace

trn_result_t current_result() noexcept {
  try {
    throw;
  } catch (const CommError &e) {
    return e.result();
  } catch (const std::bad_alloc &) {
    return TRN_ERROR_OUT_OF_HOST_MEMORY;
  } catch (const std::system_error &e) {
    return resources_exhausted(e) ? TRN_ERROR_OUT_OF_HOST_MEMORY : TRN_ERROR_INTERNAL;
  } catch (...) {
    return TRN_ERROR_INTERNAL;
  }
}

std::string current_reason() {
  try {
    throw;
  } catch (const std::bad_alloc &) {
    return "out of host memory";
  } catch (const std::system_error &e) {
    // A thread that could not start (a communicator's monitor or proxy): the process is at its
    // limit of threads or memory, not a bug of the library.
    return resources_exhausted(e)
               ? std::string(e.what()) + " (the process is at its limit of threads or memory)"
               : std::string(e.what());
  } catch (const std::exception &e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

void set_last_error(std::string message) {
  g_last_error = std::move(message);
}

const char *last_error() {
  return g_last_error.c_str();
}

std::string duration_text(uint64_t ns) {
  if (ns == UINT64_MAX) return "no limit";
  if (ns >= 1'000'000) return std::to_string(ns / 1'000'000) + " ms";
  if (ns >= 1'000) return std::to_string(ns / 1'000) + " us";
  return std::to_string(ns) + " ns";
}

}  // namespace trn::comm
