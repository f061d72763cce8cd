// Kernel launches on a queue: bind the arguments to device memory (backing what the kernel may
// write), run on the executors of the queue's first physical core, and say how it went.
#pragma once

#include <cstdint>
#include <string>

#include "sim/ops_support.hpp"

namespace trn::sim {

struct LaunchOutcome {
  trn_result_t result = TRN_SUCCESS;  // KERNEL_FAULT / KERNEL_DEADLOCK: see fault fields
  std::string why;
  uint64_t kernel_ns = 0;  // simulated time the kernel took
  uint32_t engine = 0, instruction = 0, source_line = 0;
  char opcode[32] = {};
};

// Checks a launch before it is queued: the kernel's device and argument count, and that every
// bound range is device memory.
trn_result_t check_launch(trn_hal_instance_t &instance, DeviceRuntime &device,
                          const trn_hal_kernel_t *kernel, const trn_hal_binding_t *args,
                          uint32_t arg_count, std::string *why);

// Runs it, filling `result` (the submitter's, or nullptr) and counting into `activity`.
LaunchOutcome run_launch(trn_hal_instance_t &instance, DeviceRuntime &device,
                         uint32_t physical_core, const trn_hal_kernel_t &kernel,
                         const trn_hal_binding_t *args, uint32_t arg_count,
                         trn_hal_run_result_t *result, trn_hal_core_activity_t *activity);

}  // namespace trn::sim
