#include "trn-monitor/metrics_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tool_common/clock.hpp"

namespace trn::tools {

namespace {

constexpr uint64_t kConnectionDeadlineNs = 5'000'000'000;  // to send a request and read the answer
constexpr size_t kMaxConnections = 64;
constexpr size_t kMaxRequestBytes = 8192;
constexpr int kPollMs = 100;  // how soon stop() is noticed

}  // namespace

MetricsServer::~MetricsServer() {
  stop();
}

bool MetricsServer::start(uint16_t port, std::string *why) {
  listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
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
  std::vector<Connection> connections;
  std::vector<pollfd> fds;
  while (!stop_.load()) {
    fds.clear();
    // At the connection limit the listener waits (clients queue in its backlog).
    fds.push_back({connections.size() < kMaxConnections ? listener_ : -1, POLLIN, 0});
    for (const Connection &c : connections)
      fds.push_back({c.fd, static_cast<short>(c.response.empty() ? POLLIN : POLLOUT), 0});
    if (poll(fds.data(), fds.size(), kPollMs) < 0 && errno != EINTR) break;
    const uint64_t now = monotonic_ns();
    std::vector<Connection> open;
    for (size_t i = 0; i < connections.size(); ++i) {
      Connection &c = connections[i];
      const bool ready = fds[i + 1].revents != 0;
      if ((ready && !advance(c)) || now >= c.deadline_ns)
        close(c.fd);  // done, failed, or out of time
      else
        open.push_back(std::move(c));
    }
    connections = std::move(open);
    if (fds[0].revents & POLLIN) accept_clients(&connections);
  }
  for (const Connection &c : connections) close(c.fd);
}

void MetricsServer::accept_clients(std::vector<Connection> *connections) {
  while (connections->size() < kMaxConnections) {
    const int client = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (client < 0) return;  // none left (EAGAIN), or the client gave up already
    Connection c;
    c.fd = client;
    c.deadline_ns = monotonic_ns() + kConnectionDeadlineNs;
    connections->push_back(std::move(c));
  }
}

bool MetricsServer::advance(Connection &c) {
  if (c.response.empty()) {
    char buffer[1024];
    const ssize_t n = read(c.fd, buffer, sizeof buffer);
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    if (n == 0) return false;  // closed before a whole request line
    c.request.append(buffer, static_cast<size_t>(n));
    if (c.request.find("\r\n") == std::string::npos) return c.request.size() < kMaxRequestBytes;
    c.response = respond(c.request);
  }
  const ssize_t n =
      send(c.fd, c.response.data() + c.sent, c.response.size() - c.sent, MSG_NOSIGNAL);
  if (n < 0) return errno == EAGAIN || errno == EINTR;
  c.sent += static_cast<size_t>(n);
  return c.sent < c.response.size();
}

std::string MetricsServer::respond(const std::string &request) {
  // The request line: METHOD TARGET VERSION. The target's query string does not matter.
  const size_t method_end = request.find(' ');
  const std::string method = request.substr(0, method_end);
  const size_t target_start = method_end == std::string::npos ? request.size() : method_end + 1;
  std::string path =
      request.substr(target_start, request.find_first_of(" \r", target_start) - target_start);
  path = path.substr(0, path.find('?'));
  std::string body, status = "200 OK", extra;
  if (path != "/metrics" && path != "/") {
    status = "404 Not Found";
    body = "trn-monitor serves GET /metrics\n";
  } else if (method != "GET" && method != "HEAD") {
    status = "405 Method Not Allowed";
    extra = "Allow: GET, HEAD\r\n";
    body = "trn-monitor serves GET /metrics\n";
  } else {
    std::lock_guard lock(mu_);
    body = text_;
  }
  const std::string head =
      "HTTP/1.1 " + status + "\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n" + extra + "Connection: close\r\n\r\n";
  return method == "HEAD" ? head : head + body;
}

}  // namespace trn::tools
