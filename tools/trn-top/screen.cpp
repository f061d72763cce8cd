#include "trn-top/screen.hpp"

#include <algorithm>
#include <cstdio>

#include "common/parse.hpp"

namespace trn::tools {

namespace {

std::string bar(double percent, size_t width) {
  const size_t filled = static_cast<size_t>(
      std::clamp(percent, 0.0, 100.0) / 100.0 * static_cast<double>(width) + 0.5);
  return "[" + std::string(filled, '#') + std::string(width - filled, ' ') + "]";
}

std::string fit(std::string text, size_t width) {
  if (text.size() > width) text.resize(width);
  return text;
}

std::string format(const char *pattern, auto... values) {
  char line[512];
  std::snprintf(line, sizeof line, pattern, values...);
  return line;
}

}  // namespace

std::vector<std::string> render_top(const Frame &frame, const View &view) {
  std::vector<std::string> lines;
  const size_t width = std::max<size_t>(view.width, 40);
  auto add = [&](std::string line) { lines.push_back(fit(std::move(line), width)); };
  std::string title = std::string("trn-top ") + trn_get_version_string();
  if (!frame.error.empty()) {
    add(title);
    add("trn-top: " + frame.error);
    return lines;
  }
  if (frame.devices.empty()) {
    add(title);
    add("trn-top: no devices: " + frame.no_device_reason);
    return lines;
  }
  const size_t index = std::min(view.device, frame.devices.size() - 1);
  const DeviceFigures &device = frame.devices[index];
  const trn_device_properties_t &p = device.snapshot.properties;
  add(title +
      format("  device %u/%zu %s  %s  period %.1f s", p.index, frame.devices.size(),
             trn_generation_name(p.generation), p.name,
             static_cast<double>(frame.period_ns) / 1e9) +
      (view.process ? format("  process %d", view.process) : std::string()));
  add("");
  add("NeuronCores (busy = host time executing commands; DMA = simulated engine time)");
  const size_t bar_width = width >= 100 ? 30 : 12;
  add(format("%-5s %-8s %6s %-*s %7s %9s %9s %7s", "CORE", "OWNER", "BUSY%",
             static_cast<int>(bar_width + 2), "", "DMA%", "DMA GB/s", "CMD/s", "FAULTS"));
  for (const CoreFigures &core : device.cores) {
    if (view.process && core.owner_pid != view.process) continue;
    add(format("%-5u %-8s %6.1f %s %7.1f %9.3f %9.0f %7llu", core.core_id,
               core.owner_pid > 0 ? std::to_string(core.owner_pid).c_str() : "-", core.busy_percent,
               bar(core.busy_percent, bar_width).c_str(), core.simulated_dma_busy_percent,
               core.dma_bytes_per_s / 1e9, core.commands_per_s,
               static_cast<unsigned long long>(core.totals.commands_failed)));
  }
  add("");
  const trn_mem_stats_t &m = device.snapshot.memory;
  const double used_percent =
      p.hbm_bytes ? 100.0 * static_cast<double>(m.reserved_bytes) / static_cast<double>(p.hbm_bytes)
                  : 0;
  add("Memory  used " + common::format_bytes(m.reserved_bytes) + " / " +
      common::format_bytes(p.hbm_bytes) + "  " + bar(used_percent, bar_width) + "  allocated " +
      common::format_bytes(m.allocated_bytes));
  std::string categories = " ";
  for (uint32_t c = 0; c < TRN_MEM_CATEGORY_COUNT; ++c)
    categories += std::string(" ") + trn_mem_category_name(static_cast<trn_mem_category_t>(c)) +
                  " " + common::format_bytes(m.by_category[c].current_bytes);
  add(categories);
  add("");
  add(format("%-8s %-10s %-10s %-10s %s", "PID", "CORES", "RESERVED", "ALLOCATED", "COMMAND"));
  if (device.snapshot.processes.empty()) add("(no process uses this device)");
  for (const trn_process_info_t &proc : device.snapshot.processes) {
    if (view.process && proc.pid != view.process) continue;
    std::vector<uint32_t> ids;
    for (uint32_t i = 0; i < 64; ++i)
      if (proc.core_mask >> i & 1u) ids.push_back(p.first_core_id + i);
    add(format("%-8d %-10s %-10s %-10s %s", proc.pid,
               ids.empty() ? "-" : common::format_index_list(ids).c_str(),
               common::format_bytes(proc.hbm_reserved_bytes).c_str(),
               common::format_bytes(proc.hbm_allocated_bytes).c_str(), proc.command));
  }
  return lines;
}

}  // namespace trn::tools
