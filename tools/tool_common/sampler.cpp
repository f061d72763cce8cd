#include "tool_common/sampler.hpp"

#include <time.h>

#include <algorithm>

#include "common/parse.hpp"

namespace trn::tools {

namespace {

uint64_t monotonic_ns() {
  struct timespec now {};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec);
}

// Counters of processes that exited vanish from the sums: a drop is not negative activity.
double rate(uint64_t now, uint64_t before, double seconds) {
  return now > before && seconds > 0 ? static_cast<double>(now - before) / seconds : 0.0;
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
    uint32_t cores = 0;
    trn_core_get(handles[d], &cores, nullptr);
    std::vector<trn_core_t> core_handles(cores);
    trn_core_get(handles[d], &cores, core_handles.data());
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
      if (d < previous_.activity.size() && c < previous_.activity[d].size() && seconds > 0) {
        const trn_core_activity_t &before = previous_.activity[d][c];
        core.busy_percent =
            std::min(100.0, rate(core.totals.busy_host_ns, before.busy_host_ns, seconds) / 1e7);
        core.simulated_dma_busy_percent =
            rate(core.totals.dma_busy_ns, before.dma_busy_ns, seconds) / 1e7;
        core.commands_per_s =
            rate(core.totals.commands_completed, before.commands_completed, seconds);
        core.dma_bytes_per_s = rate(core.totals.dma_bytes, before.dma_bytes, seconds);
      }
      device.cores.push_back(core);
    }
    frame.devices.push_back(std::move(device));
  }
  previous_ = std::move(next);
  return frame;
}

}  // namespace trn::tools
