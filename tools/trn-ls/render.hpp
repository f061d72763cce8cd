// trn-ls output: the device table, the per-process table (-w), the torus drawing (-t) and the
// JSON document (--json, schema_version 1; see docs/tools.md).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tool_common/device_snapshot.hpp"

namespace trn::tools {

constexpr int kLsSchemaVersion = 1;

std::string render_devices(const Snapshot &snapshot);
std::string render_processes(const Snapshot &snapshot);
std::string render_topology(const Snapshot &snapshot);
nlohmann::json to_json(const Snapshot &snapshot);

}  // namespace trn::tools
