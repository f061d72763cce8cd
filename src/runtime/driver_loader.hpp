// Finds and loads drivers (docs/ARCHITECTURE.md, "Driver discovery"): built into the program,
// a shared object beside libtrn, or the one TRN_DRIVER names by name or path. Each table is
// checked: the major interface version must be this runtime's and the table at least as large
// as this runtime's trn_hal_ops_t.
#pragma once

#include <string>
#include <vector>

#include "drivers/hal.h"
#include "trn/trn.h"

namespace trn::rt {

struct DriverTable {
  std::string name;    // "sim"
  std::string origin;  // the shared object's path, or "built in"
  trn_hal_ops_t ops{};
  trn_result_t result = TRN_SUCCESS;  // not TRN_SUCCESS: found but not usable, `why` says why
  std::string why;
};

// The drivers to open. With TRN_DRIVER set, exactly one, and a driver that cannot be loaded is
// an error (returned, with *why). With TRN_DRIVER unset, every driver found, in name order; one
// that cannot be loaded, or finding none, is an entry with `result` set, so the session lists it
// with no devices and the reason.
trn_result_t load_drivers(std::vector<DriverTable> *out, std::string *why);

// The first operation a driver with devices must have but whose table leaves out, or null.
const char *missing_operation(const trn_hal_ops_t &ops);

}  // namespace trn::rt
