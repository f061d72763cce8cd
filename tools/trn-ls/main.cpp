// trn-ls: list the devices, their cores, memory, links and the processes using them.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "tool_common/cli_parse.hpp"
#include "tool_common/json_text.hpp"
#include "trn-ls/render.hpp"

int main(int argc, char **argv) {
  CLI::App app{"trn-ls: list NeuronCore devices, their cores, memory, links and users"};
  bool json = false, wide = false, topology = false;
  app.add_flag("-j,--json,--json-output", json, "print one JSON document (schema_version 1)");
  app.add_flag("-w,--wide", wide, "one line per process: pid, command, cores, runtime version");
  app.add_flag("-t,--topology", topology, "draw the links between devices");
  app.set_version_flag("--version", std::string("trn-ls ") + trn_get_version_string());
  if (auto status = trn::tools::parse_command_line(app, "trn-ls", argc, argv)) return *status;

  trn::tools::Snapshot snapshot;
  if (trn_result_t r = trn::tools::take_snapshot(&snapshot); r != TRN_SUCCESS) {
    if (json) {
      nlohmann::json doc = {{"schema_version", trn::tools::kLsSchemaVersion},
                            {"trn_version", trn_get_version_string()},
                            {"devices", nlohmann::json::array()},
                            {"error", std::string(trn_result_name(r)) + ": " + trn_last_error()}};
      std::cout << trn::tools::json_text(doc, 2) << "\n";
    } else {
      std::fprintf(stderr, "trn-ls: %s (%s)\n", trn_last_error(), trn_result_name(r));
    }
    return 1;
  }

  if (json) {
    std::cout << trn::tools::json_text(trn::tools::to_json(snapshot), 2) << "\n";
    return 0;
  }
  if (snapshot.devices.empty()) {
    std::printf("trn-ls: no devices: %s\n", snapshot.no_device_reason.c_str());
    return 0;
  }
  const trn_device_properties_t &first = snapshot.devices.front().properties;
  std::printf("trn %s, driver %s, logical-neuroncore-config: %u\n", trn_get_version_string(),
              first.driver, first.logical_core_config);
  std::fputs((wide ? trn::tools::render_processes(snapshot) : trn::tools::render_devices(snapshot))
                 .c_str(),
             stdout);
  if (topology) {
    std::printf("\nTopology (%zu devices, NeuronLink torus):\n", snapshot.devices.size());
    std::fputs(trn::tools::render_topology(snapshot).c_str(), stdout);
  }
  return 0;
}
