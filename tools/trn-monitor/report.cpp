#include "trn-monitor/report.hpp"

#include <cstdio>

namespace trn::tools {

namespace {

// Per-engine counters as {"tensor": n, "vector": n, ...} (trn_engine_t order).
nlohmann::ordered_json engine_map(const uint64_t (&values)[TRN_ENGINE_COUNT]) {
  static const char *const kNames[TRN_ENGINE_COUNT] = {"tensor", "vector", "scalar", "gpsimd",
                                                       "sync"};
  nlohmann::ordered_json out;
  for (uint32_t e = 0; e < TRN_ENGINE_COUNT; ++e) out[kNames[e]] = values[e];
  return out;
}

nlohmann::ordered_json by_category(const uint64_t (&bytes)[TRN_MEM_CATEGORY_COUNT]) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (uint32_t c = 0; c < TRN_MEM_CATEGORY_COUNT; ++c)
    out[trn_mem_category_name(static_cast<trn_mem_category_t>(c))] = bytes[c];
  return out;
}

std::vector<uint32_t> owned_ids(const trn_device_properties_t &p, uint64_t mask) {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 64; ++i)
    if (mask >> i & 1u) ids.push_back(p.first_core_id + i);
  return ids;
}

}  // namespace

nlohmann::ordered_json monitor_document(const Frame &frame) {
  nlohmann::ordered_json doc;
  doc["schema_version"] = kMonitorSchemaVersion;
  doc["trn_version"] = trn_get_version_string();
  doc["timestamp_unix_ns"] = frame.timestamp_unix_ns;
  doc["period_ns"] = frame.period_ns;
  doc["error"] =
      frame.error.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(frame.error);
  doc["no_device_reason"] = frame.no_device_reason.empty()
                                ? nlohmann::ordered_json()
                                : nlohmann::ordered_json(frame.no_device_reason);
  doc["devices"] = nlohmann::ordered_json::array();
  for (const DeviceFigures &device : frame.devices) {
    const trn_device_properties_t &p = device.snapshot.properties;
    const trn_mem_stats_t &m = device.snapshot.memory;
    uint64_t categories[TRN_MEM_CATEGORY_COUNT];
    for (uint32_t c = 0; c < TRN_MEM_CATEGORY_COUNT; ++c)
      categories[c] = m.by_category[c].current_bytes;
    nlohmann::ordered_json cores = nlohmann::ordered_json::array();
    for (const CoreFigures &core : device.cores)
      cores.push_back({{"core", core.index},
                       {"core_id", core.core_id},
                       {"owner_pid", core.owner_pid > 0 ? nlohmann::ordered_json(core.owner_pid)
                                                        : nlohmann::ordered_json()},
                       {"busy_percent", core.busy_percent},
                       {"utilization_percent", core.utilization_percent},
                       {"simulated_dma_busy_percent", core.simulated_dma_busy_percent},
                       {"commands_per_s", core.commands_per_s},
                       {"dma_bytes_per_s", core.dma_bytes_per_s},
                       {"commands_completed", core.totals.commands_completed},
                       {"commands_failed", core.totals.commands_failed},
                       {"dma_bytes", core.totals.dma_bytes},
                       {"kernels_completed", core.totals.kernels_completed},
                       {"kernels_faulted", core.totals.kernels_faulted},
                       {"kernel_simulated_ns", core.totals.kernel_ns},
                       {"tensor_flops", core.totals.tensor_flops},
                       {"engine_instructions", engine_map(core.totals.engine_instructions)},
                       {"engine_busy_simulated_ns", engine_map(core.totals.engine_busy_ns)}});
    nlohmann::ordered_json processes = nlohmann::ordered_json::array();
    for (const trn_process_info_t &proc : device.snapshot.processes)
      processes.push_back({{"pid", proc.pid},
                           {"command", proc.command},
                           {"runtime_version", proc.runtime_version},
                           {"neuroncore_ids", owned_ids(p, proc.core_mask)},
                           {"memory_reserved_bytes", proc.hbm_reserved_bytes},
                           {"memory_allocated_bytes", proc.hbm_allocated_bytes},
                           {"memory_by_category", by_category(proc.hbm_allocated_by_category)},
                           {"error", nullptr}});
    doc["devices"].push_back({{"device", p.index},
                              {"generation", trn_generation_name(p.generation)},
                              {"period_ns", frame.period_ns},
                              {"error", nullptr},
                              {"memory",
                               {{"total_bytes", p.hbm_bytes},
                                {"used_bytes", m.reserved_bytes},
                                {"allocated_bytes", m.allocated_bytes},
                                {"by_category", by_category(categories)}}},
                              {"cores", cores},
                              {"processes", processes}});
  }
  return doc;
}

std::string prometheus_text(const Frame &frame) {
  std::string out;
  auto family = [&](const char *name, const char *type, const char *help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  };
  auto sample = [&](const std::string &name, const std::string &labels, double value) {
    char number[64];
    std::snprintf(number, sizeof number, "%.17g", value);
    out += name + "{" + labels + "} " + number + "\n";
  };
  family("trn_up", "gauge", "1 when the device state could be read");
  out += std::string("trn_up ") + (frame.error.empty() ? "1" : "0") + "\n";
  family("trn_device_memory_total_bytes", "gauge", "device memory");
  for (const auto &d : frame.devices)
    sample("trn_device_memory_total_bytes",
           "device=\"" + std::to_string(d.snapshot.properties.index) + "\"",
           static_cast<double>(d.snapshot.properties.hbm_bytes));
  family("trn_device_memory_used_bytes", "gauge", "device memory held by live processes");
  for (const auto &d : frame.devices)
    sample("trn_device_memory_used_bytes",
           "device=\"" + std::to_string(d.snapshot.properties.index) + "\"",
           static_cast<double>(d.snapshot.memory.reserved_bytes));
  family("trn_device_memory_allocated_bytes", "gauge", "device memory in allocations, by category");
  for (const auto &d : frame.devices)
    for (uint32_t c = 0; c < TRN_MEM_CATEGORY_COUNT; ++c)
      sample("trn_device_memory_allocated_bytes",
             "device=\"" + std::to_string(d.snapshot.properties.index) + "\",category=\"" +
                 trn_mem_category_name(static_cast<trn_mem_category_t>(c)) + "\"",
             static_cast<double>(d.snapshot.memory.by_category[c].current_bytes));
  const struct {
    const char *name;
    const char *type;
    const char *help;
    double (*value)(const CoreFigures &);
  } kCoreFamilies[] = {
      {"trn_core_busy_ratio", "gauge", "share of wall time the core executed commands",
       [](const CoreFigures &c) { return c.busy_percent / 100; }},
      {"trn_core_utilization_ratio", "gauge", "simulated kernel time per wall time",
       [](const CoreFigures &c) { return c.utilization_percent / 100; }},
      {"trn_core_simulated_dma_busy_ratio", "gauge", "simulated DMA engine time per wall time",
       [](const CoreFigures &c) { return c.simulated_dma_busy_percent / 100; }},
      {"trn_core_commands_completed_total", "counter", "commands completed by live processes",
       [](const CoreFigures &c) { return static_cast<double>(c.totals.commands_completed); }},
      {"trn_core_commands_failed_total", "counter", "commands that faulted",
       [](const CoreFigures &c) { return static_cast<double>(c.totals.commands_failed); }},
      {"trn_core_dma_bytes_total", "counter", "bytes moved by the core's DMA engines",
       [](const CoreFigures &c) { return static_cast<double>(c.totals.dma_bytes); }},
      {"trn_core_kernels_completed_total", "counter", "kernels that ran to completion",
       [](const CoreFigures &c) { return static_cast<double>(c.totals.kernels_completed); }},
      {"trn_core_kernels_faulted_total", "counter", "kernels that faulted or deadlocked",
       [](const CoreFigures &c) { return static_cast<double>(c.totals.kernels_faulted); }},
      {"trn_core_kernel_simulated_seconds_total", "counter", "simulated time of kernels",
       [](const CoreFigures &c) { return static_cast<double>(c.totals.kernel_ns) * 1e-9; }},
      {"trn_core_tensor_flops_total", "counter", "Tensor engine flops of kernels",
       [](const CoreFigures &c) { return static_cast<double>(c.totals.tensor_flops); }},
      {"trn_core_owner_pid", "gauge", "pid owning the core, 0 when free",
       [](const CoreFigures &c) { return static_cast<double>(std::max(0, c.owner_pid)); }},
  };
  for (const auto &f : kCoreFamilies) {
    family(f.name, f.type, f.help);
    for (const auto &d : frame.devices)
      for (const auto &c : d.cores)
        sample(f.name,
               "device=\"" + std::to_string(d.snapshot.properties.index) + "\",core=\"" +
                   std::to_string(c.core_id) + "\"",
               f.value(c));
  }
  family("trn_process_memory_reserved_bytes", "gauge", "device memory a process holds");
  for (const auto &d : frame.devices)
    for (const auto &p : d.snapshot.processes)
      sample("trn_process_memory_reserved_bytes",
             "device=\"" + std::to_string(d.snapshot.properties.index) + "\",pid=\"" +
                 std::to_string(p.pid) + "\"",
             static_cast<double>(p.hbm_reserved_bytes));
  return out;
}

}  // namespace trn::tools
