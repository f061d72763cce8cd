// trn-monitor's output: one JSON document per period (schema in docs/tools.md) and the same
// figures as Prometheus text exposition.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tool_common/sampler.hpp"

namespace trn::tools {

constexpr int kMonitorSchemaVersion = 1;

nlohmann::ordered_json monitor_document(const Frame &frame);
std::string prometheus_text(const Frame &frame);

}  // namespace trn::tools
