// Child processes for multi-process tests: start a program with pipes, read its lines with a
// deadline, kill it, reap it. Nothing here waits without a deadline.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace trn::test {

// Milliseconds on the monotonic clock.
long long now_ms();

// Reaps `pid` if it exits within `timeout_ms`, calling `meanwhile` between checks (it must
// return within a few milliseconds): its exit status, or -1 on timeout. Sets *reaped on exit.
int wait_for_exit(pid_t pid, int timeout_ms, bool *reaped, const std::function<void()> &meanwhile);

class Child {
 public:
  // Starts `argv[0]` with the given arguments; stdin and stdout are pipes to this process.
  explicit Child(const std::vector<std::string> &argv);
  ~Child();  // kills (SIGKILL) and reaps if still running
  Child(const Child &) = delete;
  Child &operator=(const Child &) = delete;

  pid_t pid() const { return pid_; }
  // The next line of its stdout, or "" at EOF or after `timeout_ms`.
  std::string read_line(int timeout_ms);
  void close_stdin();
  void kill(int signal);
  // Waits up to `timeout_ms` for it to exit; its exit status, or -1 on timeout.
  int wait(int timeout_ms);

 private:
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  std::string buffer_;
  bool reaped_ = false;
};

// Runs a command to completion (bounded by timeout_ms) and returns its stdout+stderr.
std::string run_command(const std::vector<std::string> &argv, int timeout_ms, int *status);

// What a program run to completion did: its exit code (128 + the signal when one ended it) and
// its stdout and stderr together.
struct ProgramResult {
  int code = -1;
  std::string output;
};
ProgramResult run_program(const std::vector<std::string> &argv, int timeout_ms);

// A loopback TCP port nothing listens on now (the kernel's pick for a socket bound to port 0),
// for a server a child process starts.
uint16_t free_port();

}  // namespace trn::test
