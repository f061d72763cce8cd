// The CPUs a tool's process may run on (its affinity mask), for pinning ranks the way mpirun does.
#pragma once

#include <vector>

namespace trn::tools {

// In order; empty when the mask cannot be read.
std::vector<int> allowed_cpus();

}  // namespace trn::tools
