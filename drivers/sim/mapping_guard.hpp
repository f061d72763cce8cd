// The last line of defence for the shared mappings of the simulated device (the state file and
// the memory file). The driver checks the files' sizes before it uses them, but an application
// holds pointers into device memory (trn_mem_map, and the runtime's own copies) and another
// process can shrink a file at any moment; touching a page past the new end of file raises
// SIGBUS, which would kill the process without a word. While a mapping is registered here, a
// SIGBUS inside it prints a message naming the file and what to do, and ends the process with
// kMappingFaultExitStatus. A SIGBUS anywhere else goes to the handler installed before.
#pragma once

#include <cstddef>
#include <string>

namespace trn::sim {

constexpr int kMappingFaultExitStatus = 74;  // EX_IOERR

class MappingGuard {
 public:
  // Guards [base, base + bytes), a mapping of the file `path` open as `fd` (both must outlive
  // the guard). `advice` ends the message.
  MappingGuard(const void *base, size_t bytes, int fd, const std::string &path,
               const std::string &advice);
  ~MappingGuard();
  MappingGuard(const MappingGuard &) = delete;
  MappingGuard &operator=(const MappingGuard &) = delete;

 private:
  int entry_ = -1;  // -1: the registry was full (nothing guarded)
};

}  // namespace trn::sim
