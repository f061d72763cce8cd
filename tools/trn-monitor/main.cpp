// trn-monitor: one JSON document per period on stdout (JSON Lines), for automation; optionally
// the same figures for Prometheus, served on 127.0.0.1 or written to a node_exporter textfile.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>

#include "tool_common/cli_parse.hpp"
#include "tool_common/clock.hpp"
#include "tool_common/json_text.hpp"
#include "trn-monitor/metrics_server.hpp"
#include "trn-monitor/report.hpp"
#include "trn-monitor/textfile.hpp"

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) {
  g_stop.store(true);
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"trn-monitor: periodic JSON documents (and Prometheus metrics) for automation"};
  uint32_t interval_ms = 1000, count = 0;
  int prometheus_port = -1;
  std::string textfile;
  app.add_option("-i,--interval-ms", interval_ms,
                 "milliseconds between documents, 10 to 3600000 (default 1000)")
      ->check(CLI::Range(10u, 3600000u));
  app.add_option("-n,--count", count, "documents to print, then exit (0: until interrupted)");
  app.add_option("--prometheus", prometheus_port,
                 "serve Prometheus text on 127.0.0.1:PORT/metrics (0 picks a port)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--prometheus-textfile", textfile,
                 "write Prometheus text to this file every period (node_exporter textfile)");
  app.set_version_flag("--version", std::string("trn-monitor ") + trn_get_version_string());
  if (auto status = trn::tools::parse_command_line(app, "trn-monitor", argc, argv)) return *status;

  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  trn::tools::MetricsServer server;
  if (prometheus_port >= 0) {
    std::string why;
    if (!server.start(static_cast<uint16_t>(prometheus_port), &why)) {
      std::fprintf(stderr, "trn-monitor: %s\n", why.c_str());
      return 1;
    }
    std::fprintf(stderr, "trn-monitor: Prometheus metrics on http://127.0.0.1:%u/metrics\n",
                 server.port());
  }
  trn::tools::Sampler sampler;
  // The baseline the first period's rates are measured from; the endpoint serves it meanwhile.
  const trn::tools::Frame baseline = sampler.sample();
  // Metrics first: a reader that saw a document finds the same figures at the endpoint and in
  // the textfile. An unwritable textfile ends the monitor (at once, with the baseline).
  auto publish = [&](const trn::tools::Frame &frame) {
    const std::string text = trn::tools::prometheus_text(frame);
    if (prometheus_port >= 0) server.set_text(text);
    if (textfile.empty()) return true;
    const auto why = trn::tools::write_textfile(textfile, text);
    if (why) std::fprintf(stderr, "trn-monitor: --prometheus-textfile: %s\n", why->c_str());
    return !why;
  };
  if (!publish(baseline)) return 1;
  for (uint32_t printed = 0; (count == 0 || printed < count) && !g_stop.load(); ++printed) {
    trn::tools::sleep_ms(interval_ms, g_stop);
    const trn::tools::Frame frame = sampler.sample();
    if (!publish(frame)) return 1;
    std::printf("%s\n", trn::tools::json_text(trn::tools::monitor_document(frame)).c_str());
    std::fflush(stdout);
  }
  return 0;
}
