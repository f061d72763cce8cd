// libtrn.so: no driver is built in; every driver is a shared object.
#include "runtime/builtin_drivers.hpp"

namespace trn::rt {

std::span<const BuiltinDriver> builtin_drivers() {
  return {};
}

}  // namespace trn::rt
