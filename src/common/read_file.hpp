// Reading a whole input file, for the tools and the runtime alike: only a regular file is read
// (a directory, a FIFO or a device such as /dev/zero is refused before anything is read, so an
// endless input can neither hang a tool nor exhaust its memory), and at most a stated size.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trn::common {

// The limits of the files the tools and trn_kernel_load_file read (docs/tools.md).
constexpr uint64_t kMaxKernelFileBytes = uint64_t{1} << 30;  // kernel binaries, assembly source
constexpr uint64_t kMaxArrayFileBytes = uint64_t{16} << 30;  // .npy arrays

// What a file that is not a regular one is, for messages: "a directory", "a pipe (FIFO)", ...
const char *kind_of(mode_t mode);

struct FileError {
  int error_number = 0;    // errno of a failed open or read, else 0
  bool too_large = false;  // the file is over the limit
  std::string reason;      // one line, without the path: "it is a directory, not a regular file"
};

// Opens `path` for reading (*fd, the caller's to close; *size, if given, its size) if it is a
// regular file; a FIFO without a writer is refused, not waited for. nullopt on success.
std::optional<FileError> open_regular_file(const std::string &path, int *fd,
                                           uint64_t *size = nullptr);

// Reads `fd` to its end into `out` (`expected_bytes`: a first guess of the size), refusing more
// than `max_bytes`: for standard input, which may be a pipe.
std::optional<FileError> read_all(int fd, uint64_t max_bytes, std::vector<std::byte> &out,
                                  uint64_t expected_bytes = 0);

// Reads all of `path` into `out`. nullopt on success. Files over `max_bytes` are refused with a
// reason that states the limit ("it is 2 GiB; the limit is 1 GiB").
std::optional<FileError> read_regular_file(const std::string &path, uint64_t max_bytes,
                                           std::vector<std::byte> &out);

}  // namespace trn::common
