#include "trn-ls/render.hpp"

#include "common/parse.hpp"
#include "tool_common/table.hpp"

namespace trn::tools {

namespace {

std::string join(const std::vector<uint32_t> &values) {
  std::string out;
  for (uint32_t v : values) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return out;
}

std::vector<uint32_t> core_ids(const trn_device_properties_t &p) {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < p.core_count; ++i) ids.push_back(p.first_core_id + i);
  return ids;
}

}  // namespace

std::string render_devices(const Snapshot &snapshot) {
  Table table({"DEVICE", "GENERATION", "CORES", "CORE IDS", "MEMORY USED / TOTAL",
               "CONNECTED DEVICES", "PCI BDF", "PROCESSES"});
  for (const auto &device : snapshot.devices) {
    const trn_device_properties_t &p = device.properties;
    std::string processes;
    for (const auto &proc : device.processes)
      processes += (processes.empty() ? "" : ", ") + std::to_string(proc.pid);
    table.add_row({std::to_string(p.index), trn_generation_name(p.generation),
                   std::to_string(p.core_count), common::format_index_list(core_ids(p)),
                   common::format_bytes(device.memory.reserved_bytes) + " / " +
                       common::format_bytes(p.hbm_bytes),
                   join(device.neighbors), p.pci_bdf, processes.empty() ? "-" : processes});
  }
  return table.render();
}

std::string render_processes(const Snapshot &snapshot) {
  Table table({"DEVICE", "GENERATION", "CORES", "MEMORY USED / TOTAL", "PID", "COMMAND",
               "OWNED CORES", "PROCESS MEMORY", "RUNTIME VERSION", "ATTACHED"});
  for (const auto &device : snapshot.devices) {
    const trn_device_properties_t &p = device.properties;
    std::vector<std::string> base = {std::to_string(p.index), trn_generation_name(p.generation),
                                     std::to_string(p.core_count),
                                     common::format_bytes(device.memory.reserved_bytes) + " / " +
                                         common::format_bytes(p.hbm_bytes)};
    if (device.processes.empty()) {
      base.insert(base.end(), {"-", "-", "-", "-", "-", "-"});
      table.add_row(base);
    }
    for (const auto &proc : device.processes) {
      std::vector<std::string> row = base;
      // The program's name without its directory, then its arguments, cut to fit.
      std::string command = proc.command;
      const size_t program_end = command.find(' ');
      const size_t slash = command.rfind('/', program_end);
      if (slash != std::string::npos) command.erase(0, slash + 1);
      if (command.size() > 48) command = command.substr(0, 45) + "...";
      std::vector<uint32_t> owned;
      for (uint32_t i = 0; i < 64; ++i)
        if (proc.core_mask >> i & 1u) owned.push_back(p.first_core_id + i);
      row.insert(row.end(), {std::to_string(proc.pid), command,
                             owned.empty() ? "-" : common::format_index_list(owned),
                             common::format_bytes(proc.hbm_reserved_bytes), proc.runtime_version,
                             common::format_unix_time(proc.attached_unix_ns)});
      table.add_row(row);
    }
  }
  return table.render();
}

std::string render_topology(const Snapshot &snapshot) {
  const uint32_t n = static_cast<uint32_t>(snapshot.devices.size());
  // The grid drawn is the rows x cols torus the devices form (rows = the largest divisor of the
  // count not above its square root); the list below it is the driver's own word.
  uint32_t rows = 1;
  for (uint32_t r = 1; r * r <= n; ++r)
    if (n % r == 0) rows = r;
  const uint32_t cols = n / rows;
  if (cols == 0) return "";
  std::string out;
  auto cell = [](uint32_t d) {
    char text[16];
    std::snprintf(text, sizeof text, "[%2u]", d);
    return std::string(text);
  };
  for (uint32_t r = 0; r < rows; ++r) {
    std::string line = "  ";
    for (uint32_t c = 0; c < cols && r * cols + c < n; ++c)
      line += (c ? "--" : "") + cell(r * cols + c);
    if (cols > 2) line += "--(wraps to " + std::to_string(r * cols) + ")";
    out += line + "\n";
    if (r + 1 < rows) {
      std::string links = "  ";
      for (uint32_t c = 0; c < cols; ++c) links += c + 1 < cols ? " |    " : " |";
      out += links + "\n";
    }
  }
  if (rows > 2) out += "  (the last row wraps to the first)\n";
  out += "\n";
  for (const auto &device : snapshot.devices)
    out += "  device " + std::to_string(device.properties.index) + " <-> " +
           (device.neighbors.empty() ? std::string("(none)") : join(device.neighbors)) + "\n";
  return out;
}

nlohmann::json to_json(const Snapshot &snapshot) {
  nlohmann::json doc;
  doc["schema_version"] = kLsSchemaVersion;
  doc["trn_version"] = trn_get_version_string();
  doc["drivers"] = nlohmann::json::array();
  for (const auto &d : snapshot.drivers)
    doc["drivers"].push_back({{"name", d.name},
                              {"device_count", d.device_count},
                              {"status", trn_result_name(d.status)},
                              {"detail", d.status_detail}});
  doc["devices"] = nlohmann::json::array();
  for (const auto &device : snapshot.devices) {
    const trn_device_properties_t &p = device.properties;
    nlohmann::json processes = nlohmann::json::array();
    for (const auto &proc : device.processes) {
      std::vector<uint32_t> owned;
      for (uint32_t i = 0; i < 64; ++i)
        if (proc.core_mask >> i & 1u) owned.push_back(p.first_core_id + i);
      nlohmann::json by_category = nlohmann::json::object();
      for (uint32_t c = 0; c < TRN_MEM_CATEGORY_COUNT; ++c)
        by_category[trn_mem_category_name(static_cast<trn_mem_category_t>(c))] =
            proc.hbm_allocated_by_category[c];
      processes.push_back({{"pid", proc.pid},
                           {"command", proc.command},
                           {"neuroncore_ids", owned},
                           {"memory_reserved", proc.hbm_reserved_bytes},
                           {"memory_allocated", proc.hbm_allocated_bytes},
                           {"memory_allocated_by_category", by_category},
                           {"runtime_version", proc.runtime_version},
                           {"attached_unix_ns", proc.attached_unix_ns}});
    }
    std::vector<uint64_t> banks(p.hbm_bank_bytes, p.hbm_bank_bytes + p.hbm_bank_count);
    doc["devices"].push_back({{"device", p.index},
                              {"name", p.name},
                              {"driver", p.driver},
                              {"generation", trn_generation_name(p.generation)},
                              {"pci_bdf", p.pci_bdf},
                              {"nc_count", p.core_count},
                              {"physical_nc_count", p.physical_core_count},
                              {"logical_neuroncore_config", p.logical_core_config},
                              {"neuroncore_ids", core_ids(p)},
                              {"memory_size", p.hbm_bytes},
                              {"memory_used", device.memory.reserved_bytes},
                              {"memory_allocated", device.memory.allocated_bytes},
                              {"hbm_bank_sizes", banks},
                              {"connected_to", device.neighbors},
                              {"processes", processes}});
  }
  if (snapshot.devices.empty()) doc["no_device_reason"] = snapshot.no_device_reason;
  doc["error"] = nullptr;
  return doc;
}

}  // namespace trn::tools
