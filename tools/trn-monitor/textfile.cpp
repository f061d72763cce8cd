#include "trn-monitor/textfile.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace trn::tools {

namespace {

std::string failure(const std::string &what, const std::string &path) {
  return "cannot " + what + " " + path + ": " + std::strerror(errno);
}

}  // namespace

std::optional<std::string> write_textfile(const std::string &path, const std::string &text) {
  const std::string temp = path + ".tmp";
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return failure("write", temp);
  for (size_t written = 0; written < text.size();) {
    const ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string why = failure("write", temp);
      close(fd);
      unlink(temp.c_str());
      return why;
    }
    written += static_cast<size_t>(n);
  }
  if (close(fd) != 0) {
    std::string why = failure("write", temp);
    unlink(temp.c_str());
    return why;
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    std::string why = failure("replace", path);
    unlink(temp.c_str());
    return why;
  }
  return std::nullopt;
}

}  // namespace trn::tools
