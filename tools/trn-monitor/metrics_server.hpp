// A minimal HTTP server on 127.0.0.1 for Prometheus to scrape: GET /metrics returns the latest
// text; anything else is 404. One thread serves every connection at once with poll(), so a
// client that connects and stays silent delays no other; each connection gets a deadline.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

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
  struct Connection {
    int fd = -1;
    uint64_t deadline_ns = 0;
    std::string request;
    std::string response;  // empty while the request is being read
    size_t sent = 0;
  };

  void serve();
  void accept_clients(std::vector<Connection> *connections);
  // Reads or writes what the connection is ready for; false when it is done (or failed).
  bool advance(Connection &connection);
  std::string respond(const std::string &request);

  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;  // guards text_
  std::string text_ = "trn_up 0\n";
  std::thread thread_;
};

}  // namespace trn::tools
