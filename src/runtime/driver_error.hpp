// The error a driver call fills in when it fails. Only the message's first byte is cleared:
// zeroing all 512 bytes on every submission or query costs more than the call itself, and a
// driver writes the message whenever it fails.
#pragma once

#include "drivers/hal.h"

namespace trn::rt {

struct DriverError : trn_hal_error_t {
  DriverError() { message[0] = '\0'; }
};

}  // namespace trn::rt
