#include "common/read_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/parse.hpp"

namespace trn::common {

namespace {

// Closes the descriptor whatever way the read ends.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

const char *kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a pipe (FIFO)";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

namespace {

FileError from_errno() {
  return {errno, false, std::strerror(errno)};
}

FileError too_large(uint64_t size, uint64_t max_bytes) {
  return {0, true,
          "it is " + (size > max_bytes ? format_bytes(size) : "over " + format_bytes(max_bytes)) +
              "; the limit is " + format_bytes(max_bytes)};
}

}  // namespace

std::optional<FileError> open_regular_file(const std::string &path, int *fd, uint64_t *size) {
  *fd = -1;
  // O_NONBLOCK: opening a FIFO must not wait for a writer; regular files ignore it.
  Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (file.fd < 0) return from_errno();
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) return from_errno();
  if (!S_ISREG(st.st_mode))
    return FileError{0, false,
                     std::string("it is ") + kind_of(st.st_mode) + ", not a regular file"};
  const int flags = ::fcntl(file.fd, F_GETFL);
  if (flags < 0 || ::fcntl(file.fd, F_SETFL, flags & ~O_NONBLOCK) != 0) return from_errno();
  if (size) *size = static_cast<uint64_t>(st.st_size);
  *fd = std::exchange(file.fd, -1);
  return std::nullopt;
}

std::optional<FileError> read_all(int fd, uint64_t max_bytes, std::vector<std::byte> &out,
                                  uint64_t expected_bytes) {
  out.clear();
  out.resize(static_cast<size_t>(std::min(expected_bytes, max_bytes)));
  size_t done = 0;
  for (;;) {
    // One byte more than the limit, to notice an input that runs past it.
    if (done == out.size()) {
      if (done >= max_bytes + 1) break;
      out.resize(std::min<uint64_t>(max_bytes + 1, std::max<uint64_t>(done * 2, done + 4096)));
    }
    const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return from_errno();
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  if (done > max_bytes) return too_large(done, max_bytes);
  out.resize(done);
  return std::nullopt;
}

std::optional<FileError> read_regular_file(const std::string &path, uint64_t max_bytes,
                                           std::vector<std::byte> &out) {
  Fd file{-1};
  uint64_t size = 0;
  if (auto err = open_regular_file(path, &file.fd, &size)) return err;
  if (size > max_bytes) return too_large(size, max_bytes);
  return read_all(file.fd, max_bytes, out, size);
}

}  // namespace trn::common
