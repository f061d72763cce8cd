#include "ops/error.hpp"

#include <new>

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

trn_result_t record_current_exception(const char *function) noexcept {
  trn_result_t result = TRN_ERROR_OUT_OF_HOST_MEMORY;  // if even its description fails
  try {
    g_last_error.clear();  // no stale message stays, should the new one not be made
    trn_set_last_error(nullptr);
    std::string why;
    try {
      throw;
    } catch (const OpError &e) {
      result = e.result;
      why = e.what();
    } catch (const StaleHandle &) {
      result = TRN_ERROR_INVALID_HANDLE;
      why = "the runtime was shut down while the op was issued; issue it again";
    } catch (const DeviceRefused &r) {
      result = TRN_ERROR_UNSUPPORTED;
      why = r.why;
    } catch (const std::bad_alloc &) {
      result = TRN_ERROR_OUT_OF_HOST_MEMORY;
      why = "out of host memory";
    } catch (const std::exception &e) {
      result = TRN_ERROR_INVALID_ARGUMENT;
      why = e.what();
    } catch (...) {
      result = TRN_ERROR_INTERNAL;
      why = "internal error: unknown exception";
    }
    set_last_error(std::string(function) + ": " + why);
    trn_set_last_error(g_last_error.c_str());  // one channel for every layer: trn_last_error()
  } catch (...) {
    // The description ran out of memory: the result stands.
  }
  return result;
}

const char *last_error() {
  return g_last_error.c_str();
}

}  // namespace trn::ops
