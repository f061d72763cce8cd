#include "support/subprocess.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stdexcept>

namespace trn::test {

long long now_ms() {
  struct timespec ts {};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

namespace {

pid_t spawn(const std::vector<std::string> &argv, int in_fd, int out_fd, int err_fd,
            const std::vector<int> &close_fds) {
  std::vector<char *> args;
  for (const auto &a : argv) args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    if (in_fd >= 0) dup2(in_fd, 0);
    if (out_fd >= 0) dup2(out_fd, 1);
    if (err_fd >= 0) dup2(err_fd, 2);
    for (int fd : close_fds) close(fd);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

Child::Child(const std::vector<std::string> &argv) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe failed");
  pid_ = spawn(argv, in[0], out[1], -1, {in[1], out[0]});
  close(in[0]);
  close(out[1]);
  to_child_ = in[1];
  from_child_ = out[0];
}

Child::~Child() {
  if (!reaped_) {
    kill(SIGKILL);
    wait(10000);
  }
  close_stdin();
  if (from_child_ >= 0) close(from_child_);
}

std::string Child::read_line(int timeout_ms) {
  const long long deadline = now_ms() + timeout_ms;
  for (;;) {
    const auto newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return line;
    }
    const long long left = deadline - now_ms();
    if (left <= 0) return "";
    struct pollfd p = {from_child_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char chunk[512];
    const ssize_t n = read(from_child_, chunk, sizeof chunk);
    if (n <= 0) return "";
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

void Child::close_stdin() {
  if (to_child_ >= 0) close(to_child_);
  to_child_ = -1;
}

void Child::kill(int signal) {
  if (!reaped_ && pid_ > 0) ::kill(pid_, signal);
}

int Child::wait(int timeout_ms) {
  if (reaped_) return 0;
  return wait_for_exit(pid_, timeout_ms, &reaped_, [] {
    struct timespec pause {
      0, 1'000'000
    };
    nanosleep(&pause, nullptr);
  });
}

int wait_for_exit(pid_t pid, int timeout_ms, bool *reaped, const std::function<void()> &meanwhile) {
  const long long deadline = now_ms() + timeout_ms;
  for (;;) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      *reaped = true;
      return status;
    }
    if (now_ms() >= deadline) return -1;
    meanwhile();
  }
}

std::string run_command(const std::vector<std::string> &argv, int timeout_ms, int *status) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = spawn(argv, -1, out[1], out[1], {out[0]});
  close(out[1]);
  std::string text;
  const long long deadline = now_ms() + timeout_ms;
  for (;;) {
    const long long left = deadline - now_ms();
    if (left <= 0) {
      ::kill(pid, SIGKILL);
      break;
    }
    struct pollfd p = {out[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char chunk[4096];
    const ssize_t n = read(out[0], chunk, sizeof chunk);
    if (n <= 0) break;
    text.append(chunk, static_cast<size_t>(n));
  }
  close(out[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  if (status) *status = st;
  return text;
}

ProgramResult run_program(const std::vector<std::string> &argv, int timeout_ms) {
  int status = 0;
  ProgramResult r;
  r.output = run_command(argv, timeout_ms, &status);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

uint16_t free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr *>(&address), sizeof address);
  socklen_t length = sizeof address;
  getsockname(fd, reinterpret_cast<sockaddr *>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

}  // namespace trn::test
