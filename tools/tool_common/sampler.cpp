#include "tool_common/sampler.hpp"

#include <algorithm>

#include "common/parse.hpp"
#include "tool_common/clock.hpp"

namespace trn::tools {

namespace {

// Counters of processes that exited vanish from the sums: a drop is not negative activity.
uint64_t grown(uint64_t now, uint64_t before) {
  return now > before ? now - before : 0;
}

double rate(uint64_t now, uint64_t before, double seconds) {
  return seconds > 0 ? static_cast<double>(grown(now, before)) / seconds : 0.0;
}

// A share of `whole` (both in the same unit) as a percentage, at most 100.
double percent(double part, double whole) {
  return whole > 0 ? std::min(100.0, 100.0 * part / whole) : 0.0;
}

void measure(const trn_core_activity_t &now, const trn_core_activity_t &before, double seconds,
             CoreFigures *core) {
  const double wall_ns = seconds * 1e9;
  core->busy_percent =
      percent(static_cast<double>(grown(now.busy_host_ns, before.busy_host_ns)), wall_ns);
  const auto kernel_ns = static_cast<double>(grown(now.kernel_ns, before.kernel_ns));
  core->utilization_percent = percent(kernel_ns, wall_ns);
  core->simulated_dma_busy_percent =
      percent(static_cast<double>(grown(now.dma_busy_ns, before.dma_busy_ns)), wall_ns);
  core->commands_per_s = rate(now.commands_completed, before.commands_completed, seconds);
  core->dma_bytes_per_s = rate(now.dma_bytes, before.dma_bytes, seconds);
  core->kernels_per_s = rate(now.kernels_completed + now.kernels_faulted,
                             before.kernels_completed + before.kernels_faulted, seconds);
  core->tensor_flops_per_s = rate(now.tensor_flops, before.tensor_flops, seconds);
  for (uint32_t e = 0; e < TRN_ENGINE_COUNT; ++e)
    core->engine_active_percent[e] = percent(
        static_cast<double>(grown(now.engine_busy_ns[e], before.engine_busy_ns[e])), kernel_ns);
}

}  // namespace

std::string describe_failure(trn_result_t result) {
  return std::string(trn_last_error()) + " (" + trn_result_name(result) + ")";
}

Frame Sampler::sample() {
  Frame frame;
  frame.timestamp_unix_ns = common::unix_now_ns();
  const uint64_t now = monotonic_ns();
  Snapshot snapshot;
  if (trn_result_t r = take_snapshot(&snapshot); r != TRN_SUCCESS) {
    frame.error = describe_failure(r);
    previous_ = Previous{};
    return frame;
  }
  frame.no_device_reason = snapshot.no_device_reason;
  frame.period_ns = previous_.monotonic_ns ? now - previous_.monotonic_ns : 0;
  const double seconds = static_cast<double>(frame.period_ns) / 1e9;
  Previous next;
  next.monotonic_ns = now;
  uint32_t count = 0;
  trn_device_get(&count, nullptr);
  std::vector<trn_device_t> handles(count);
  trn_device_get(&count, handles.data());
  for (size_t d = 0; d < snapshot.devices.size() && d < handles.size(); ++d) {
    DeviceFigures device{snapshot.devices[d], {}};
    // Every core of the device, visible to this process or not: tools watch the whole device.
    uint32_t cores = 0;
    trn_core_get_all(handles[d], &cores, nullptr);
    std::vector<trn_core_t> core_handles(cores);
    trn_core_get_all(handles[d], &cores, core_handles.data());
    next.activity.emplace_back();
    for (uint32_t c = 0; c < cores; ++c) {
      CoreFigures core;
      trn_core_properties_t p = TRN_CORE_PROPERTIES_INIT;
      trn_core_get_properties(core_handles[c], &p);
      core.index = p.index;
      core.core_id = p.global_id;
      trn_process_info_t owner = TRN_PROCESS_INFO_INIT;
      if (trn_core_get_owner(core_handles[c], &owner) == TRN_SUCCESS) core.owner_pid = owner.pid;
      trn_core_get_activity(core_handles[c], &core.totals);
      next.activity.back().push_back(core.totals);
      if (d < previous_.activity.size() && c < previous_.activity[d].size() && seconds > 0)
        measure(core.totals, previous_.activity[d][c], seconds, &core);
      device.cores.push_back(core);
    }
    frame.devices.push_back(std::move(device));
  }
  previous_ = std::move(next);
  return frame;
}

}  // namespace trn::tools
