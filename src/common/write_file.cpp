#include "common/write_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/read_file.hpp"

namespace trn::common {

namespace {

std::string failure(const std::string &what, const std::string &path) {
  return "cannot " + what + " " + path + ": " + std::strerror(errno);
}

}  // namespace

std::optional<std::string> write_file_replacing(const std::string &path, const std::string &temp,
                                                std::span<const std::byte> bytes, bool exclusive,
                                                mode_t mode) {
  // Run as root, rename() would put a file where a device node was (and a program where
  // /dev/sda was): only a regular file, or nothing, is replaced.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return "will not replace " + path + ": it is " +
           (S_ISLNK(st.st_mode) ? std::string("a symbolic link") : kind_of(st.st_mode)) +
           ", not a regular file";
  const int fd =
      ::open(temp.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (exclusive ? O_EXCL : O_TRUNC), mode);
  if (fd < 0) return failure("write", temp);
  for (size_t written = 0; written < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string why = failure("write", temp);
      ::close(fd);
      ::unlink(temp.c_str());
      return why;
    }
    written += static_cast<size_t>(n);
  }
  // The bytes reach the disk before the name does: a crash after the rename finds them.
  if (::fsync(fd) != 0 && errno != EINVAL) {
    std::string why = failure("write", temp);
    ::close(fd);
    ::unlink(temp.c_str());
    return why;
  }
  if (::close(fd) != 0) {
    std::string why = failure("write", temp);
    ::unlink(temp.c_str());
    return why;
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    std::string why = failure("replace", path);
    ::unlink(temp.c_str());
    return why;
  }
  // And the rename itself: the directory's entry.
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const int dir = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);  // best effort: some file systems refuse it for directories
    ::close(dir);
  }
  return std::nullopt;
}

std::string unique_temp_path(const std::string &path) {
  // The counter is the only state: atomic, so concurrent writers of one process differ too.
  static std::atomic<uint64_t> next{0};
  return path + ".partial." + std::to_string(::getpid()) + "." +
         std::to_string(next.fetch_add(1, std::memory_order_relaxed));
}

}  // namespace trn::common
