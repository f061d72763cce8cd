// Simulated hosts for --processes --hosts N: a private TRN_SIM_ROOT per host under a temporary
// directory, so that the ranks of different hosts have different device sets and reach each
// other only over the fabric, as on separate machines. Removed when the run ends.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trn::comm_test {

class SimulatedHosts {
 public:
  // One host: nothing is made (the ranks use the caller's TRN_SIM_ROOT).
  explicit SimulatedHosts(uint32_t hosts);
  ~SimulatedHosts();
  SimulatedHosts(const SimulatedHosts &) = delete;
  SimulatedHosts &operator=(const SimulatedHosts &) = delete;

  const std::vector<std::string> &roots() const { return roots_; }

 private:
  std::string base_;
  std::vector<std::string> roots_;
};

}  // namespace trn::comm_test
