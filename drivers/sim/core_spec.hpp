// The execution view of a generation: what drivers/sim/exec needs to run one of its cores. It is
// the ISA's core table (isa/target.hpp), so the device runs kernels with the very figures it
// reports and the kernel builder targets.
#pragma once

#include "isa/target.hpp"
#include "sim/generation.hpp"

namespace trn::sim {

inline const isa::CoreSpec &core_spec(trn_generation_t g) {
  return generation_spec(g).core();
}

}  // namespace trn::sim
