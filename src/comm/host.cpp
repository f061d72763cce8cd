#include "comm/host.hpp"

#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

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

uint64_t process_age_ns() {
  // Field 22 of /proc/self/stat (after the command name, which may hold spaces and parentheses):
  // when the process started, in clock ticks from boot, the clock CLOCK_BOOTTIME counts.
  std::ifstream stat("/proc/self/stat");
  std::string line;
  if (!std::getline(stat, line)) return UINT64_MAX;
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 > line.size()) return UINT64_MAX;
  std::istringstream fields(line.substr(paren + 2));
  std::string field;
  for (int i = 3; i < 22 && fields >> field;) ++i;
  uint64_t ticks = 0;
  const long hz = sysconf(_SC_CLK_TCK);
  timespec now{};
  if (!(fields >> ticks) || hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &now) != 0) return UINT64_MAX;
  const uint64_t started = ticks * (1'000'000'000ull / static_cast<uint64_t>(hz));
  const uint64_t uptime =
      static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(now.tv_nsec);
  return uptime > started ? uptime - started : 0;
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
