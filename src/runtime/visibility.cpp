#include "runtime/visibility.hpp"

#include "common/log.hpp"
#include "common/parse.hpp"

namespace trn::rt {

namespace {

// Our spelling wins; the AWS spelling is accepted so existing launch scripts work unchanged.
std::optional<std::string> read_either(const char *ours, const char *aws, std::string *variable) {
  auto mine = common::env(ours);
  auto theirs = common::env(aws);
  if (mine && theirs && *mine != *theirs)
    common::logger("runtime")->warn("{}='{}' and {}='{}' disagree; using {}", ours, *mine, aws,
                                    *theirs, ours);
  if (mine) {
    *variable = ours;
    return mine;
  }
  if (theirs) *variable = aws;
  return theirs;
}

}  // namespace

trn_result_t load_visibility(VisibilityConfig *config, std::string *why) {
  VisibilityConfig result;
  if (auto text = read_either("TRN_VISIBLE_CORES", "NEURON_RT_VISIBLE_CORES",
                              &result.visible_cores_variable)) {
    std::string reason;
    auto cores = common::parse_index_list(*text, &reason);
    if (!cores) {
      *why = result.visible_cores_variable + "='" + *text + "' is malformed (" + reason +
             "): use a core id (3), an inclusive range (0-3) or a comma list (0,2-3)";
      return TRN_ERROR_INVALID_CONFIG;
    }
    result.visible_cores = std::move(*cores);
    result.visible_cores_text = *text;
  }
  if (auto text = read_either("TRN_LNC", "NEURON_LOGICAL_NC_CONFIG", &result.lnc_variable)) {
    auto lnc = common::parse_uint(*text);
    if (!lnc || (*lnc != 1 && *lnc != 2)) {
      *why = result.lnc_variable + "='" + *text +
             "' is not a logical core configuration: use 1 (one physical core per logical "
             "core) or 2 (pairs, trn2 and trn3 only)";
      return TRN_ERROR_INVALID_CONFIG;
    }
    result.lnc = static_cast<uint32_t>(*lnc);
    result.lnc_explicit = true;
  }
  *config = std::move(result);
  return TRN_SUCCESS;
}

}  // namespace trn::rt
