#include "comm/host.hpp"

#include <unistd.h>

#include <cstdlib>

namespace trn::comm {

namespace {

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

std::string sim_root() {
  const char *root = std::getenv("TRN_SIM_ROOT");
  return root ? root : "";
}

}  // namespace

std::string host_key() {
  return host_name() + "|" + sim_root();
}

std::string host_label() {
  const std::string root = sim_root();
  return root.empty() ? host_name() : host_name() + " (TRN_SIM_ROOT " + root + ")";
}

}  // namespace trn::comm
