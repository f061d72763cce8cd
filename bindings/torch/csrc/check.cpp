#include "check.hpp"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <string>

#include "devices.hpp"
#include "kernel_ops.hpp"
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

// The queue's fault as a sentence (empty when it has none). The queue is then drained and reset,
// and its torch device marked faulted: the device's later work raises until reset_device.
std::string take_fault(trn_queue_t queue) {
  trn_queue_fault_t fault = TRN_QUEUE_FAULT_INIT;
  if (!queue || trn_queue_get_fault(queue, &fault) != TRN_SUCCESS || fault.result == TRN_SUCCESS)
    return {};
  std::string where =
      std::string(fault.command) + " (command " + std::to_string(fault.sequence) + ")";
  // Whose kernel it was: the user's own (torch_trn.kernel), or another (trn's op kernels, whose
  // faults are trn's bugs, or C code's launches beside torch).
  if (fault.kernel[0])
    where += is_user_kernel(fault.kernel)
                 ? std::string(" of your kernel '") + fault.kernel + "' (torch_trn.kernel)"
                 : std::string(" of kernel '") + fault.kernel +
                       "' (not launched through torch_trn.kernel: one of trn's op kernels, a "
                       "bug in trn to report, or C code's)";
  // An engine and instruction only for a fault inside the kernel's code (not one found before it
  // ran, such as freed memory bound to an argument).
  if (fault.kernel[0] && fault.engine[0])
    where += std::string(" on the ") + fault.engine + " engine, instruction " +
             std::to_string(fault.instruction) +
             (fault.opcode[0] ? std::string(" (") + fault.opcode + ")" : std::string()) +
             (fault.source_line ? ", line " + std::to_string(fault.source_line) : std::string());
  // Cancelled commands drain first; a reset that still fails leaves the queue as it is and the
  // next call reports the fault again.
  trn_queue_finish(queue, wait_timeout_ns());
  trn_queue_reset(queue);
  const std::string what = "the device faulted in " + where + ": " + trn_result_name(fault.result) +
                           ": " + fault.reason + "; " + std::to_string(fault.cancelled) +
                           " later commands were cancelled";
  Device *device = device_of_queue(queue);
  if (!device) return what + ". The queue was reset: new work runs";
  device->mark_faulted(what);
  const std::string index = std::to_string(device->index());
  return what + ". trn:" + index + "'s later work raises until torch.trn.reset_device(" + index +
         "): values written on it from the fault on are undefined";
}

}  // namespace

void check(trn_result_t result, const char *what) {
  if (result != TRN_SUCCESS) raise(result, what, trn_last_error());
}

void check_queue(trn_queue_t queue, trn_result_t result, const char *what) {
  if (result == TRN_SUCCESS) return;
  const std::string fault = take_fault(queue);
  raise(result, what, fault.empty() ? trn_last_error() : fault.c_str());
}

void check_ops(trn_result_t result, const char *op) {
  if (result == TRN_SUCCESS) return;
  // An op refused because its queue faulted earlier: report (and clear) that fault instead.
  trn_queue_t queue = nullptr;
  try {
    queue = current_queue(current_device());
  } catch (...) {
  }
  const std::string fault = take_fault(queue);
  raise(result, std::string("trn_ops_") + op, fault.empty() ? trn_ops_last_error() : fault.c_str());
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
