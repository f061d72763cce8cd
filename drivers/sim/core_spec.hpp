// The execution view of a generation: what drivers/sim/exec needs to run one of its cores.
#pragma once

#include "exec/cost_model.hpp"
#include "sim/generation.hpp"

namespace trn::sim {

exec::CoreSpec core_spec(const GenerationSpec &g);
inline exec::CoreSpec core_spec(trn_generation_t g) {
  return core_spec(generation_spec(g));
}

}  // namespace trn::sim
