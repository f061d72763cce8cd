#include "comm/socket.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <thread>

#include "comm/error.hpp"

namespace trn::comm {

namespace {

// Messages larger than this are refused: no rendezvous table comes near it.
constexpr uint64_t kMaxPayload = 256ull << 20;

[[noreturn]] void fail_io(const std::string &what) {
  fail(TRN_ERROR_COLLECTIVE, what);
}

struct AddrInfo {
  addrinfo *list = nullptr;
  ~AddrInfo() {
    if (list) freeaddrinfo(list);
  }
};

void resolve(const Endpoint &where, bool passive, AddrInfo *out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const std::string port = std::to_string(where.port);
  const int r = getaddrinfo(where.host.empty() ? nullptr : where.host.c_str(), port.c_str(), &hints,
                            &out->list);
  if (r != 0)
    fail(TRN_ERROR_INVALID_CONFIG,
         "cannot resolve '" + where.host + "': " + gai_strerror(r) +
             " (set the rendezvous address to one that resolves to rank 0's host: "
             "TRN_COMM_SOCKET_ADDR for trn_comm_get_unique_id, MASTER_ADDR under torchrun's "
             "variables)");
}

int remaining_ms(uint64_t deadline_ns) {
  const uint64_t now = now_ns();
  if (now >= deadline_ns) return 0;
  const uint64_t ms = (deadline_ns - now + 999'999) / 1'000'000;
  return ms > 60'000 ? 60'000 : static_cast<int>(ms);
}

// Waits until fd is ready for `events`; throws at the deadline.
void wait_ready(int fd, short events, uint64_t deadline_ns, const char *doing) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int ms = remaining_ms(deadline_ns);
    const int r = poll(&p, 1, ms);
    if (r > 0) return;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail_io(std::string(doing) + ": poll: " + std::strerror(errno));
    if (ms == 0) fail(TRN_TIMEOUT, std::string(doing) + ": timed out");
  }
}

void set_nodelay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// false on end of file.
bool read_all(int fd, void *data, size_t bytes, uint64_t deadline_ns) {
  auto *p = static_cast<char *>(data);
  while (bytes > 0) {
    const ssize_t n = recv(fd, p, bytes, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    if (errno == ECONNRESET) return false;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      fail_io(std::string("rendezvous socket: recv: ") + std::strerror(errno));
    wait_ready(fd, POLLIN, deadline_ns, "rendezvous socket: receiving");
  }
  return true;
}

void write_all(int fd, const void *data, size_t bytes, uint64_t deadline_ns) {
  const auto *p = static_cast<const char *>(data);
  while (bytes > 0) {
    const ssize_t n = send(fd, p, bytes, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      wait_ready(fd, POLLOUT, deadline_ns, "rendezvous socket: sending");
      continue;
    }
    fail_io(std::string("rendezvous socket: send: ") + std::strerror(errno) +
            " (the other side closed the connection)");
  }
}

struct Header {
  uint32_t type;
  uint32_t rank;
  uint64_t bytes;
};

}  // namespace

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

Fd &Fd::operator=(Fd &&other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

void Fd::reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

Fd listen_on(const Endpoint &where, uint16_t *bound_port) {
  AddrInfo info;
  resolve(where, true, &info);
  std::string last = "no address";
  for (addrinfo *a = info.list; a; a = a->ai_next) {
    Fd fd(socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd) {
      last = std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || listen(fd.get(), 1024) != 0) {
      last = std::strerror(errno);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    getsockname(fd.get(), reinterpret_cast<sockaddr *>(&bound), &length);
    *bound_port =
        ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6 *>(&bound)->sin6_port
                                          : reinterpret_cast<sockaddr_in *>(&bound)->sin_port);
    return fd;
  }
  fail_io("cannot listen on " + where.text() + ": " + last +
          (where.port ? " (is another communicator's rendezvous using the port? pick another "
                        "MASTER_PORT or TRN_COMM_PORT)"
                      : ""));
}

Fd connect_to(const Endpoint &where, uint64_t deadline_ns) {
  std::string last;
  for (;;) {
    AddrInfo info;
    resolve(where, false, &info);
    for (addrinfo *a = info.list; a; a = a->ai_next) {
      Fd fd(socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
      if (!fd) {
        last = std::strerror(errno);
        continue;
      }
      if (connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
          last = std::strerror(errno);
          continue;
        }
        pollfd p{fd.get(), POLLOUT, 0};
        if (poll(&p, 1, remaining_ms(deadline_ns)) <= 0) {
          last = "no answer";
          continue;
        }
        int error = 0;
        socklen_t length = sizeof error;
        getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
        if (error != 0) {
          last = std::strerror(error);
          continue;
        }
      }
      set_nodelay(fd.get());
      return fd;
    }
    if (now_ns() >= deadline_ns)
      fail(TRN_TIMEOUT, "cannot reach the rendezvous at " + where.text() + ": " + last);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void send_message(int fd, const Message &message, uint64_t deadline_ns) {
  // Header and a small payload in one send: two small sends on a socket without TCP_NODELAY
  // hold the second back until the first is acknowledged, which the peer delays by 40 ms (a
  // round of the rendezvous took that long). On the stack: sending allocates nothing.
  const Header header{message.type, message.rank, message.payload.size()};
  constexpr size_t kCombined = 4096;
  if (message.payload.size() <= kCombined) {
    std::array<uint8_t, sizeof(Header) + kCombined> bytes;
    std::memcpy(bytes.data(), &header, sizeof header);
    if (!message.payload.empty())
      std::memcpy(bytes.data() + sizeof header, message.payload.data(), message.payload.size());
    write_all(fd, bytes.data(), sizeof header + message.payload.size(), deadline_ns);
    return;
  }
  write_all(fd, &header, sizeof header, deadline_ns);
  write_all(fd, message.payload.data(), message.payload.size(), deadline_ns);
}

Fd accept_connection(int listener) {
  Fd fd(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  if (fd) set_nodelay(fd.get());  // answers go out at once, whatever their size
  return fd;
}

bool receive_message(int fd, Message *message, uint64_t deadline_ns) {
  Header header{};
  if (!read_all(fd, &header, sizeof header, deadline_ns)) return false;
  if (header.bytes > kMaxPayload)
    fail_io("rendezvous socket: a message of " + std::to_string(header.bytes) +
            " bytes: not a trn communicator's peer");
  message->type = header.type;
  message->rank = header.rank;
  message->payload.resize(header.bytes);
  if (header.bytes && !read_all(fd, message->payload.data(), header.bytes, deadline_ns))
    return false;
  return true;
}

}  // namespace trn::comm
