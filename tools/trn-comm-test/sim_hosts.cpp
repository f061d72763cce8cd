#include "sim_hosts.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace trn::comm_test {

SimulatedHosts::SimulatedHosts(uint32_t hosts) {
  if (hosts <= 1) return;
  const char *tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/trn-comm-test-XXXXXX";
  if (!mkdtemp(pattern.data()))
    throw std::runtime_error("cannot make a directory for the simulated hosts in " + pattern +
                             ": " + std::strerror(errno) + " (set TMPDIR)");
  base_ = pattern;
  for (uint32_t h = 0; h < hosts; ++h) {
    roots_.push_back(base_ + "/host" + std::to_string(h));
    mkdir(roots_.back().c_str(), 0700);
  }
}

SimulatedHosts::~SimulatedHosts() {
  if (base_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(base_, ignored);
}

}  // namespace trn::comm_test
