#include "sim/config.hpp"

#include <unistd.h>

#include "common/parse.hpp"

namespace trn::sim {

uint64_t SimConfig::effective_hbm_bytes() const {
  const GenerationSpec &spec = generation_spec(generation);
  const uint64_t total = hbm_bytes != 0 ? hbm_bytes : spec.hbm_bytes;
  const uint64_t per_bank = total / spec.hbm_banks / kHbmBankGranule * kHbmBankGranule;
  return per_bank * spec.hbm_banks;
}

trn_result_t load_config(SimConfig *config, std::string *why) {
  SimConfig result;
  result.root =
      common::env("TRN_SIM_ROOT").value_or("/dev/shm/trn-sim-" + std::to_string(getuid()));

  if (auto text = common::env("TRN_SIM_DEVICES")) {
    auto count = common::parse_uint(*text);
    if (!count || *count > kMaxDevices) {
      *why = "TRN_SIM_DEVICES='" + *text + "' is not a device count: use a number from 0 to " +
             std::to_string(kMaxDevices);
      return TRN_ERROR_INVALID_CONFIG;
    }
    result.device_count = static_cast<uint32_t>(*count);
    result.device_count_explicit = true;
  }

  if (auto text = common::env("TRN_SIM_GENERATION")) {
    auto generation = parse_generation(*text);
    if (!generation) {
      *why = "TRN_SIM_GENERATION='" + *text + "' is not a generation: use trn1, trn2 or trn3";
      return TRN_ERROR_INVALID_CONFIG;
    }
    result.generation = *generation;
    result.generation_explicit = true;
  }

  if (auto text = common::env("TRN_SIM_HBM_BYTES")) {
    auto bytes = common::parse_bytes(*text);
    const GenerationSpec &spec = generation_spec(result.generation);
    const uint64_t minimum = kHbmBankGranule * spec.hbm_banks;
    if (!bytes || *bytes < minimum || *bytes > kMaxHbmBytes) {
      *why = "TRN_SIM_HBM_BYTES='" + *text + "' is not a usable memory size: use bytes or a size " +
             "like 8GiB, at least " + common::format_bytes(minimum) + " (" +
             std::to_string(spec.hbm_banks) + " banks of 2 MiB) and at most 1 TiB";
      return TRN_ERROR_INVALID_CONFIG;
    }
    result.hbm_bytes = *bytes;
    result.hbm_explicit = true;
  }

  if (auto text = common::env("TRN_SPIN_NS")) {
    auto value = common::parse_uint(*text);
    if (!value || *value > kMaxSpinNs) {
      *why = "TRN_SPIN_NS='" + *text +
             "' is not a spin time: use nanoseconds, a whole number from 0 to 10000000000 (10 s)";
      return TRN_ERROR_INVALID_CONFIG;
    }
    result.spin_ns = *value;
  }

  if (auto text = common::env("TRN_SIM_RACE_CHECK")) {
    if (*text != "0" && *text != "1") {
      *why = "TRN_SIM_RACE_CHECK='" + *text + "' is not a switch: use 1 (check kernels for " +
             "races, the default) or 0 (do not)";
      return TRN_ERROR_INVALID_CONFIG;
    }
    result.race_check = *text == "1";
  }

  if (auto text = common::env("TRN_SIM_JITTER_NS")) {
    auto value = common::parse_uint(*text);
    if (!value || *value > kMaxJitterNs) {
      *why = "TRN_SIM_JITTER_NS='" + *text +
             "' is not a jitter: use nanoseconds, a whole number from 0 (none, the default) to "
             "100000000 (100 ms)";
      return TRN_ERROR_INVALID_CONFIG;
    }
    result.jitter_ns = *value;
  }

  *config = std::move(result);
  return TRN_SUCCESS;
}

}  // namespace trn::sim
