// A minimal HTTP server on 127.0.0.1 for Prometheus to scrape: GET /metrics returns the latest
// text; anything else is 404. One thread, polling with a deadline so it stops promptly.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace trn::tools {

class MetricsServer {
 public:
  ~MetricsServer();
  // Binds 127.0.0.1:port (0 picks a free port); false with `why` on failure.
  bool start(uint16_t port, std::string *why);
  uint16_t port() const { return port_; }
  void set_text(std::string text);
  void stop();

 private:
  void serve();
  void answer(int client);

  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;  // guards text_
  std::string text_ = "trn_up 0\n";
  std::thread thread_;
};

}  // namespace trn::tools
