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

// A message in lines of at most `width`, broken at spaces (a word longer than that stands alone):
// a reason must be read whole, not cut at the edge.
std::vector<std::string> wrap(const std::string &text, size_t width) {
  std::vector<std::string> out{""};
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(' ', at);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(at, end - at);
    if (!out.back().empty() && out.back().size() + 1 + word.size() > width) out.emplace_back();
    out.back() += (out.back().empty() ? "" : " ") + word;
    at = end + 1;
  }
  return out;
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

// A figure measured over the period; "-" in the first frame, which has no period yet.
class Figures {
 public:
  explicit Figures(const Frame &frame) : measured_(frame.period_ns > 0) {}
  std::string operator()(const char *pattern, double value) const {
    return measured_ ? format(pattern, value) : "-";
  }

 private:
  bool measured_;
};

std::string owner(const CoreFigures &core) {
  return core.owner_pid > 0 ? std::to_string(core.owner_pid) : "-";
}

void add_core_table(const DeviceFigures &device, const Frame &frame, const View &view,
                    size_t bar_width, std::vector<std::string> *lines) {
  const Figures figure(frame);
  lines->push_back("NeuronCores (BUSY = host time running commands; UTIL = simulated kernel time)");
  lines->push_back(format("%-5s %-8s %6s %-*s %6s %6s %8s %8s %6s", "CORE", "OWNER", "BUSY%",
                          static_cast<int>(bar_width + 2), "", "UTIL%", "DMA%", "DMA GB/s", "CMD/s",
                          "FAULTS"));
  for (const CoreFigures &core : device.cores) {
    if (view.process && core.owner_pid != view.process) continue;
    lines->push_back(format("%-5u %-8s %6s %s %6s %6s %8s %8s %6llu", core.core_id,
                            owner(core).c_str(), figure("%.1f", core.busy_percent).c_str(),
                            bar(core.busy_percent, bar_width).c_str(),
                            figure("%.1f", core.utilization_percent).c_str(),
                            figure("%.1f", core.simulated_dma_busy_percent).c_str(),
                            figure("%.3f", core.dma_bytes_per_s / 1e9).c_str(),
                            figure("%.0f", core.commands_per_s).c_str(),
                            static_cast<unsigned long long>(core.totals.commands_failed)));
  }
}

void add_engine_table(const DeviceFigures &device, const Frame &frame, const View &view,
                      std::vector<std::string> *lines) {
  const Figures figure(frame);
  lines->push_back("Engines (% of the simulated kernel time each engine was busy)");
  lines->push_back(format("%-5s %-8s %7s %6s %7s %7s %7s %7s %6s %8s", "CORE", "OWNER", "KERN/s",
                          "UTIL%", "TENSOR%", "VECTOR%", "SCALAR%", "GPSIMD%", "SYNC%", "TFLOP/s"));
  for (const CoreFigures &core : device.cores) {
    if (view.process && core.owner_pid != view.process) continue;
    const double *e = core.engine_active_percent;
    lines->push_back(format(
        "%-5u %-8s %7s %6s %7s %7s %7s %7s %6s %8s", core.core_id, owner(core).c_str(),
        figure("%.0f", core.kernels_per_s).c_str(),
        figure("%.1f", core.utilization_percent).c_str(),
        figure("%.1f", e[TRN_ENGINE_TENSOR]).c_str(), figure("%.1f", e[TRN_ENGINE_VECTOR]).c_str(),
        figure("%.1f", e[TRN_ENGINE_SCALAR]).c_str(), figure("%.1f", e[TRN_ENGINE_GPSIMD]).c_str(),
        figure("%.1f", e[TRN_ENGINE_SYNC]).c_str(),
        figure("%.3f", core.tensor_flops_per_s / 1e12).c_str()));
  }
}

void add_memory(const DeviceFigures &device, size_t width, size_t bar_width,
                std::vector<std::string> *lines) {
  const trn_device_properties_t &p = device.snapshot.properties;
  const trn_mem_stats_t &m = device.snapshot.memory;
  const double used_percent =
      p.hbm_bytes ? 100.0 * static_cast<double>(m.reserved_bytes) / static_cast<double>(p.hbm_bytes)
                  : 0;
  lines->push_back("Memory  used " + common::format_bytes(m.reserved_bytes) + " / " +
                   common::format_bytes(p.hbm_bytes) + "  " + bar(used_percent, bar_width) +
                   "  allocated " + common::format_bytes(m.allocated_bytes));
  // "  tensors 64 MiB constants 0 B ...", wrapped to the width.
  std::string line;
  for (uint32_t c = 0; c < TRN_MEM_CATEGORY_COUNT; ++c) {
    const std::string item = std::string(" ") +
                             trn_mem_category_name(static_cast<trn_mem_category_t>(c)) + " " +
                             common::format_bytes(m.by_category[c].current_bytes);
    if (!line.empty() && line.size() + item.size() > width) {
      lines->push_back(line);
      line.clear();
    }
    line += (line.empty() ? " " : "") + item;
  }
  lines->push_back(line);
}

void add_processes(const DeviceFigures &device, const View &view, std::vector<std::string> *lines) {
  const trn_device_properties_t &p = device.snapshot.properties;
  lines->push_back(
      format("%-8s %-10s %-10s %-10s %s", "PID", "CORES", "RESERVED", "ALLOCATED", "COMMAND"));
  if (device.snapshot.processes.empty()) lines->push_back("(no process uses this device)");
  for (const trn_process_info_t &proc : device.snapshot.processes) {
    if (view.process && proc.pid != view.process) continue;
    std::vector<uint32_t> ids;
    for (uint32_t i = 0; i < 64; ++i)
      if (proc.core_mask >> i & 1u) ids.push_back(p.first_core_id + i);
    lines->push_back(format("%-8d %-10s %-10s %-10s %s", proc.pid,
                            ids.empty() ? "-" : common::format_index_list(ids).c_str(),
                            common::format_bytes(proc.hbm_reserved_bytes).c_str(),
                            common::format_bytes(proc.hbm_allocated_bytes).c_str(), proc.command));
  }
}

}  // namespace

std::vector<std::string> render_top(const Frame &frame, const View &view) {
  std::vector<std::string> lines;
  const size_t width = std::max<size_t>(view.width, 40);
  const std::string title = std::string("trn-top ") + trn_get_version_string();
  if (!frame.error.empty() || frame.devices.empty()) {
    lines = wrap(frame.error.empty() ? "trn-top: no devices: " + frame.no_device_reason
                                     : "trn-top: " + frame.error,
                 width);
    lines.insert(lines.begin(), title);
    return lines;
  } else {
    const size_t index = std::min(view.device, frame.devices.size() - 1);
    const DeviceFigures &device = frame.devices[index];
    const trn_device_properties_t &p = device.snapshot.properties;
    lines.push_back(title + format("  device %u/%zu  %s  ", p.index, frame.devices.size(), p.name) +
                    (frame.period_ns
                         ? format("period %.1f s", static_cast<double>(frame.period_ns) / 1e9)
                         : std::string("first sample")) +
                    (view.process ? format("  process %d", view.process) : std::string()));
    lines.push_back("");
    const size_t bar_width = width >= 100 ? 30 : 12;
    if (view.engines)
      add_engine_table(device, frame, view, &lines);
    else
      add_core_table(device, frame, view, bar_width, &lines);
    lines.push_back("");
    add_memory(device, width, bar_width, &lines);
    lines.push_back("");
    add_processes(device, view, &lines);
  }
  for (std::string &line : lines) line = fit(std::move(line), width);
  return lines;
}

}  // namespace trn::tools
