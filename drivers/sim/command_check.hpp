// Checks a command buffer before it is queued (hal.h queue_submit: TRN_ERROR_INVALID_ARGUMENT
// for an unknown kind, a launch on a copy queue, an address that is neither device memory nor
// registered host memory, a range that overflows, a wrong argument count, a memset value that is
// not a byte, a missing semaphore or host function). `memo`: the caller's (ops_support.hpp
// resolve).
#pragma once

#include <string>

#include "sim/ops_support.hpp"

namespace trn::sim {

trn_result_t check_submission(trn_hal_instance_t &instance, DeviceRuntime &device,
                              trn_hal_queue_kind_t kind, const trn_hal_submission_t &submission,
                              std::string *why, HeldRangesMemo *memo = nullptr);

}  // namespace trn::sim
