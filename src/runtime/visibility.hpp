// Which cores this process sees and how physical cores group into logical ones:
//   TRN_VISIBLE_CORES (or NEURON_RT_VISIBLE_CORES): "3", "0-3", "0,2-3"; global core ids
//   TRN_LNC (or NEURON_LOGICAL_NC_CONFIG): 1 or 2 physical cores per logical core (default 1)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trn/trn.h"

namespace trn::rt {

struct VisibilityConfig {
  std::optional<std::vector<uint32_t>> visible_cores;  // nullopt = all
  std::string visible_cores_variable;                  // which variable set it
  std::string visible_cores_text;
  uint32_t lnc = 1;
  bool lnc_explicit = false;
  std::string lnc_variable;
};

// TRN_ERROR_INVALID_CONFIG with `why` naming the variable and its bad text.
trn_result_t load_visibility(VisibilityConfig *config, std::string *why);

}  // namespace trn::rt
