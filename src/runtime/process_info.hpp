// Driver process records seen through the API: physical cores become logical ones.
#pragma once

#include <vector>

#include "drivers/hal.h"
#include "runtime/session.hpp"

namespace trn::rt {

trn_process_info_t to_process_info(const Device &device, const trn_hal_process_t &process);
trn_result_t list_processes(const Device &device, std::vector<trn_hal_process_t> *out);

}  // namespace trn::rt
