// A program on a pseudo-terminal of a given size, for tests of full-screen tools: its output is
// read (and so never blocks it), its CPU time measured. Nothing here waits without a deadline.
#pragma once

#include <sys/types.h>

#include <regex>
#include <string>
#include <vector>

namespace trn::test {

class PtyChild {
 public:
  // Starts argv[0] with TERM=xterm on a rows x cols terminal. With `stdin_at_eof` its standard
  // input is /dev/null instead of the terminal (keys then cannot reach it).
  PtyChild(const std::vector<std::string> &argv, int rows, int cols, bool stdin_at_eof);
  ~PtyChild();  // kills (SIGKILL) and reaps if still running
  PtyChild(const PtyChild &) = delete;
  PtyChild &operator=(const PtyChild &) = delete;

  pid_t pid() const { return pid_; }
  // Reads what it writes for `ms` milliseconds (or until it closes the terminal); appends it
  // to output(). False once the terminal is closed.
  bool read_for(int ms);
  // Reads until what it wrote from offset `from` of output() on matches `pattern`, for up to
  // `timeout_ms` (or until it closes the terminal); whether it matched.
  bool read_until(const std::regex &pattern, int timeout_ms, size_t from = 0);
  const std::string &output() const { return output_; }
  // Types on its terminal.
  void send(const std::string &keys);
  // User plus system CPU time it has used so far, in seconds (from /proc).
  double cpu_seconds() const;
  // Waits up to `timeout_ms` for it to exit (reading meanwhile); its exit status, or -1.
  int wait(int timeout_ms);

 private:
  pid_t pid_ = -1;
  int master_ = -1;
  bool reaped_ = false;
  std::string output_;
};

}  // namespace trn::test
