#include "trn-monitor/metrics_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace trn::tools {

MetricsServer::~MetricsServer() {
  stop();
}

bool MetricsServer::start(uint16_t port, std::string *why) {
  listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener_ < 0) {
    *why = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  const int one = 1;
  setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener_, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0 ||
      listen(listener_, 16) != 0) {
    *why = "cannot listen on 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(errno);
    close(listener_);
    listener_ = -1;
    return false;
  }
  socklen_t length = sizeof address;
  getsockname(listener_, reinterpret_cast<sockaddr *>(&address), &length);
  port_ = ntohs(address.sin_port);
  thread_ = std::thread([this] { serve(); });
  return true;
}

void MetricsServer::set_text(std::string text) {
  std::lock_guard lock(mu_);
  text_ = std::move(text);
}

void MetricsServer::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  if (listener_ >= 0) close(listener_);
  listener_ = -1;
}

void MetricsServer::serve() {
  while (!stop_.load()) {
    pollfd p{listener_, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const int client = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    answer(client);
    close(client);
  }
}

void MetricsServer::answer(int client) {
  // Read the request line within a second; a silent client is dropped.
  std::string request;
  char buffer[1024];
  while (request.find("\r\n") == std::string::npos && request.size() < 8192) {
    pollfd p{client, POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) return;
    const ssize_t n = read(client, buffer, sizeof buffer);
    if (n <= 0) return;
    request.append(buffer, static_cast<size_t>(n));
  }
  std::string body, status = "200 OK";
  const bool metrics = request.rfind("GET /metrics ", 0) == 0 || request.rfind("GET / ", 0) == 0;
  if (metrics) {
    std::lock_guard lock(mu_);
    body = text_;
  } else {
    status = "404 Not Found";
    body = "trn-monitor serves GET /metrics\n";
  }
  const std::string response = "HTTP/1.1 " + status +
                               "\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " +
                               std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  size_t sent = 0;
  while (sent < response.size()) {
    const ssize_t n = send(client, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

}  // namespace trn::tools
