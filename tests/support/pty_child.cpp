#include "support/pty_child.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "support/subprocess.hpp"

namespace trn::test {

PtyChild::PtyChild(const std::vector<std::string> &argv, int rows, int cols, bool stdin_at_eof) {
  std::vector<char *> args;
  for (const auto &a : argv) args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  struct winsize size {};
  size.ws_row = static_cast<unsigned short>(rows);
  size.ws_col = static_cast<unsigned short>(cols);
  pid_ = forkpty(&master_, nullptr, nullptr, &size);
  if (pid_ < 0) throw std::runtime_error("forkpty failed");
  if (pid_ == 0) {
    setenv("TERM", "xterm", 1);
    if (stdin_at_eof) {
      const int null = open("/dev/null", O_RDONLY);
      dup2(null, 0);
      close(null);
    }
    execv(args[0], args.data());
    _exit(127);
  }
  fcntl(master_, F_SETFD, FD_CLOEXEC);
}

PtyChild::~PtyChild() {
  if (!reaped_) {
    ::kill(pid_, SIGKILL);
    wait(10000);
  }
  if (master_ >= 0) close(master_);
}

bool PtyChild::read_for(int ms) {
  const long long deadline = now_ms() + ms;
  for (long long left = ms; left > 0; left = deadline - now_ms()) {
    struct pollfd p = {master_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char chunk[4096];
    const ssize_t n = read(master_, chunk, sizeof chunk);
    if (n <= 0) return false;  // the terminal closed (EIO once the child is gone)
    output_.append(chunk, static_cast<size_t>(n));
  }
  return true;
}

bool PtyChild::read_until(const std::regex &pattern, int timeout_ms, size_t from) {
  const long long deadline = now_ms() + timeout_ms;
  for (;;) {
    if (std::regex_search(
            output_.begin() + static_cast<std::ptrdiff_t>(std::min(from, output_.size())),
            output_.end(), pattern))
      return true;
    const long long left = deadline - now_ms();
    if (left <= 0) return false;
    if (!read_for(static_cast<int>(std::min<long long>(left, 50)))) return false;
  }
}

void PtyChild::send(const std::string &keys) {
  (void)!write(master_, keys.data(), keys.size());
}

double PtyChild::cpu_seconds() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the command (which may hold spaces) in parentheses: state is field 3; utime
  // and stime are fields 14 and 15.
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

int PtyChild::wait(int timeout_ms) {
  return wait_for_exit(pid_, timeout_ms, &reaped_, [this] { read_for(20); });
}

}  // namespace trn::test
