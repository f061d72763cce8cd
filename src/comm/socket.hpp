// TCP for the rendezvous: listening, connecting with retries, and framed messages, every call
// bounded by a deadline (CLOCK_MONOTONIC ns). Failures throw CommError(TRN_ERROR_COLLECTIVE).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trn::comm {

uint64_t now_ns();

// A file descriptor closed on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd &&other) noexcept : fd_(other.release()) {}
  Fd &operator=(Fd &&other) noexcept;
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset();
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

struct Endpoint {
  std::string host;  // a name or a numeric address
  uint16_t port = 0;
  std::string text() const { return host + ":" + std::to_string(port); }
};

// Listens on host:port (port 0: an ephemeral one, returned in *bound_port).
Fd listen_on(const Endpoint &where, uint16_t *bound_port);
// Connects, retrying refused connections (the listener may not be up yet) until the deadline.
Fd connect_to(const Endpoint &where, uint64_t deadline_ns);
// A connection waiting on `listener` (an invalid Fd if none), with TCP_NODELAY set.
Fd accept_connection(int listener);

// A message: a type, the sender's rank and a payload.
struct Message {
  uint32_t type = 0;
  uint32_t rank = 0;
  std::vector<uint8_t> payload;
};

// Whole messages; false on end of file (the peer closed or died). Throws on a timeout or error.
void send_message(int fd, const Message &message, uint64_t deadline_ns);
bool receive_message(int fd, Message *message, uint64_t deadline_ns);

}  // namespace trn::comm
