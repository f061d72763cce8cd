// Files for tests that read and write them: a private directory under TMPDIR (a real file
// system, where O_DIRECT works; not /dev/shm), removed with everything in it at the end.
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace trn::test {

class TempDir {
 public:
  TempDir() {
    const char *tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/trn-files-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  const std::string &path() const { return path_; }
  std::string file(const std::string &name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// An open descriptor, closed at the end (or earlier with close()).
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { close(); }
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  int get() const { return fd_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// Writes `contents` to a new file at `path` and returns it open for reading and writing.
inline int create_file(const std::string &path, const std::vector<uint8_t> &contents) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot create " + path);
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n =
        ::pwrite(fd, contents.data() + done, contents.size() - done, static_cast<off_t>(done));
    if (n <= 0) throw std::runtime_error("cannot write " + path);
    done += static_cast<size_t>(n);
  }
  return fd;
}

// Writes the file's dirty pages out and drops its pages from the page cache, so that the next
// read goes to storage.
inline void drop_cached_pages(int fd) {
  if (::fsync(fd) != 0 || ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0)
    throw std::runtime_error("cannot drop a file's cached pages");
}

// The whole file behind `fd`.
inline std::vector<uint8_t> file_contents(int fd) {
  const off_t size = ::lseek(fd, 0, SEEK_END);
  std::vector<uint8_t> out(static_cast<size_t>(size));
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(done));
    if (n <= 0) throw std::runtime_error("cannot read back a file");
    done += static_cast<size_t>(n);
  }
  return out;
}

}  // namespace trn::test
