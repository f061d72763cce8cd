// Drivers linked into the program instead of loaded. libtrn.so has none (it loads every driver
// from its shared object); the runtime's static archive, which only the internal tests link, has
// the sim built in (docs/ARCHITECTURE.md, "Driver discovery").
#pragma once

#include <span>

#include "drivers/hal.h"

namespace trn::rt {

struct BuiltinDriver {
  const char *name;
  trn_hal_get_ops_fn get_ops;
};

std::span<const BuiltinDriver> builtin_drivers();

}  // namespace trn::rt
