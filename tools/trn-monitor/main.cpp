// trn-monitor: one JSON document per period on stdout (JSON Lines), for automation; optionally
// the same figures for Prometheus, served on 127.0.0.1 or written to a node_exporter textfile.
#include <signal.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <fstream>

#include "trn-monitor/metrics_server.hpp"
#include "trn-monitor/report.hpp"

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) {
  g_stop.store(true);
}

bool write_textfile(const std::string &path, const std::string &text) {
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    if (!(out << text)) return false;
  }
  return std::rename(temp.c_str(), path.c_str()) == 0;
}

void sleep_ms(uint32_t ms) {
  // In slices, so a signal ends the wait promptly.
  for (uint32_t slept = 0; slept < ms && !g_stop.load(); slept += 50) {
    struct timespec pause {
      0, static_cast<long>(std::min<uint32_t>(50, ms - slept)) * 1000000
    };
    nanosleep(&pause, nullptr);
  }
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"trn-monitor: periodic JSON documents (and Prometheus metrics) for automation"};
  uint32_t interval_ms = 1000, count = 0;
  int prometheus_port = -1;
  std::string textfile;
  app.add_option("-i,--interval-ms", interval_ms, "period between documents")
      ->check(CLI::Range(10u, 3600000u));
  app.add_option("-n,--count", count, "documents to print, then exit (0: until interrupted)");
  app.add_option("--prometheus", prometheus_port,
                 "serve Prometheus text on 127.0.0.1:PORT/metrics (0 picks a port)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--prometheus-textfile", textfile,
                 "write Prometheus text to this file every period (node_exporter textfile)");
  app.set_version_flag("--version", std::string("trn-monitor ") + trn_get_version_string());
  CLI11_PARSE(app, argc, argv);

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
  if (prometheus_port >= 0) server.set_text(trn::tools::prometheus_text(baseline));
  for (uint32_t printed = 0; (count == 0 || printed < count) && !g_stop.load(); ++printed) {
    sleep_ms(interval_ms);
    const trn::tools::Frame frame = sampler.sample();
    // Metrics first: a reader that saw the document finds the same figures at the endpoint.
    const std::string text = trn::tools::prometheus_text(frame);
    if (prometheus_port >= 0) server.set_text(text);
    if (!textfile.empty() && !write_textfile(textfile, text))
      std::fprintf(stderr, "trn-monitor: cannot write %s\n", textfile.c_str());
    std::printf("%s\n", trn::tools::monitor_document(frame).dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}
