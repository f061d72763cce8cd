// trn-top: live view of NeuronCore utilisation, memory and processes, one device at a time.
// Keys: q quits, d (or right/left) picks the device, p picks a process (or all), e switches
// between the core and the engine table. -b prints plain snapshots of every device instead.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <optional>

#include "tool_common/cli_parse.hpp"
#include "tool_common/clock.hpp"
#include "trn-top/live.hpp"
#include "trn-top/screen.hpp"

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) {
  g_stop.store(true);
}

// The devices to print: --device's one, or every device of the frame (or the frame's one line
// when there is none).
std::vector<size_t> devices_to_show(const trn::tools::Frame &frame, std::optional<uint32_t> only) {
  if (only) return {*only};
  std::vector<size_t> all;
  for (size_t d = 0; d < frame.devices.size(); ++d) all.push_back(d);
  if (all.empty()) all.push_back(0);
  return all;
}

int run_batch(trn::tools::Sampler &sampler, trn::tools::View view, std::optional<uint32_t> only,
              uint32_t delay_ms, uint32_t count) {
  bool unreadable = false;  // the last snapshot's state could not be read: exit 1, as trn-ls
  for (uint32_t i = 0; (count == 0 || i < count) && !g_stop.load(); ++i) {
    trn::tools::sleep_ms(delay_ms, g_stop);
    const trn::tools::Frame frame = sampler.sample();
    unreadable = !frame.error.empty();
    for (size_t device : devices_to_show(frame, only)) {
      view.device = device;
      for (const auto &line : trn::tools::render_top(frame, view))
        std::printf("%s\n", line.c_str());
      std::printf("\n");
    }
    std::fflush(stdout);
  }
  return unreadable ? 1 : 0;
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"trn-top: live NeuronCore utilisation, memory and processes"};
  bool batch = false, engines = false;
  uint32_t count = 0, delay_ms = 1000, width = 100;
  std::optional<uint32_t> device;
  app.add_flag("-b,--batch", batch,
               "print plain text snapshots of every device instead of a screen");
  app.add_option("-n,--count", count, "snapshots to print in batch mode (0: until interrupted)");
  app.add_option("-d,--delay-ms", delay_ms, "refresh period in milliseconds")
      ->check(CLI::Range(50u, 3600000u))
      ->capture_default_str();
  app.add_option("-w,--width", width, "line width in batch mode")
      ->check(CLI::Range(40u, 1000u))
      ->capture_default_str();
  app.add_option("--device", device,
                 "only this device in batch mode; the device shown first on the screen");
  app.add_flag("-e,--engines", engines, "the per-engine table instead of the per-core one");
  app.set_version_flag("--version", std::string("trn-top ") + trn_get_version_string());
  if (auto status = trn::tools::parse_command_line(app, "trn-top", argc, argv)) return *status;
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);

  trn::tools::Sampler sampler;
  // The baseline the first period's rates are measured from; it also says which devices exist.
  const trn::tools::Frame baseline = sampler.sample();
  if (device && baseline.error.empty() && baseline.devices.empty()) {
    std::fprintf(stderr, "trn-top: there is no device %u (no devices: %s)\n", *device,
                 baseline.no_device_reason.c_str());
    return 2;
  }
  if (device && !baseline.devices.empty() && *device >= baseline.devices.size()) {
    const size_t last = baseline.devices.size() - 1;
    std::fprintf(
        stderr, "trn-top: there is no device %u (%s)\n", *device,
        last == 0 ? "the only device is 0" : ("devices: 0-" + std::to_string(last)).c_str());
    return 2;
  }
  trn::tools::View view;
  view.device = device.value_or(0);
  view.engines = engines;
  if (batch) {
    view.width = width;
    return run_batch(sampler, view, device, delay_ms, count);
  }
  return trn::tools::run_live(sampler, baseline, view, delay_ms, g_stop);
}
