#include "common/write_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace trn::common {

namespace {

std::string failure(const std::string &what, const std::string &path) {
  return "cannot " + what + " " + path + ": " + std::strerror(errno);
}

}  // namespace

std::optional<std::string> write_file_replacing(const std::string &path, const std::string &temp,
                                                std::span<const std::byte> bytes, bool exclusive) {
  const int fd =
      ::open(temp.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (exclusive ? O_EXCL : O_TRUNC), 0644);
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
  return std::nullopt;
}

std::string unique_temp_path(const std::string &path) {
  // The counter is the only state: atomic, so concurrent writers of one process differ too.
  static std::atomic<uint64_t> next{0};
  return path + ".partial." + std::to_string(::getpid()) + "." +
         std::to_string(next.fetch_add(1, std::memory_order_relaxed));
}

}  // namespace trn::common
