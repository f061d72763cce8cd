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
  return host_label(host_key());
}

std::string host_label(const std::string &key) {
  const size_t bar = key.find('|');
  if (bar == std::string::npos) return key;
  const std::string name = key.substr(0, bar), root = key.substr(bar + 1);
  return root.empty() ? name : name + " (TRN_SIM_ROOT " + root + ")";
}

}  // namespace trn::comm
