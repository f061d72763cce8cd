// The runtime's static archive: the sim driver is linked in (trn_driver_sim).
#include "runtime/builtin_drivers.hpp"

namespace trn::rt {

std::span<const BuiltinDriver> builtin_drivers() {
  static constexpr BuiltinDriver kDrivers[] = {{"sim", trn_hal_get_ops}};
  return kDrivers;
}

}  // namespace trn::rt
