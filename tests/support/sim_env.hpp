// A private simulated device set for one test: a fresh TRN_SIM_ROOT, a clean trn environment,
// and a runtime shut down before and after so each test starts from its own configuration.
#pragma once

#include <string>
#include <vector>

namespace trn::test {

class SimEnv {
 public:
  SimEnv();
  ~SimEnv();
  SimEnv(const SimEnv &) = delete;
  SimEnv &operator=(const SimEnv &) = delete;

  const std::string &root() const { return root_; }
  // Sets (or with nullptr unsets) a variable and shuts the runtime down so the next call
  // re-reads the environment.
  void set(const char *name, const char *value);

 private:
  std::string root_;
};

// Every variable the runtime and the sim driver read.
const std::vector<const char *> &trn_environment_variables();

}  // namespace trn::test
