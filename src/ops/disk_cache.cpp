#include "ops/disk_cache.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/read_file.hpp"
#include "common/write_file.hpp"

namespace trn::ops {

namespace {

// Entry layout, little-endian: magic, format version, key bytes, image bytes, checksum of key
// and image (FNV-1a 64), then the key and the image.
constexpr char kMagic[8] = {'T', 'R', 'N', 'O', 'P', 'S', 'K', '1'};
constexpr uint32_t kEntryVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8;

uint64_t fnv1a(const void *data, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

template <typename T>
void put(std::vector<std::byte> &out, T v) {
  const auto *p = reinterpret_cast<const std::byte *>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

template <typename T>
T get(const std::byte *p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// mkdir -p, for the cache directory and its parents: each one it makes is this user's alone
// (0700, as XDG asks of ~/.cache).
std::optional<std::string> make_dirs(const std::string &dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string part = dir.substr(0, pos);
    if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST)
      return fmt::format("cannot create {}: {}", part, std::strerror(errno));
  }
  return std::nullopt;
}

// Why a file or directory with `st` is not this user's alone to write, or empty.
std::string not_own(const struct stat &st) {
  if (st.st_uid != geteuid())
    return fmt::format("is owned by another user (uid {}, this process runs as {})", st.st_uid,
                       geteuid());
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return fmt::format("is writable by {} (mode {:04o})",
                       (st.st_mode & S_IWOTH) != 0 ? "others" : "its group", st.st_mode & 07777);
  return {};
}

}  // namespace

std::optional<std::string> untrusted_directory(const std::string &dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    return errno == ENOENT
               ? std::nullopt
               : std::optional(fmt::format("cannot be examined: {}", std::strerror(errno)));
  if (!S_ISDIR(st.st_mode)) return "is not a directory";
  if (std::string why = not_own(st); !why.empty()) return why;
  return std::nullopt;
}

uint64_t key_hash(const std::string &key) {
  return fnv1a(key.data(), key.size());
}

std::string entry_path(const std::string &dir, const std::string &key) {
  return fmt::format("{}/{:016x}.trnk", dir, key_hash(key));
}

DiskEntry read_entry(const std::string &dir, const std::string &key) {
  DiskEntry e;
  std::vector<std::byte> bytes;
  const std::string path = entry_path(dir, key);
  // An entry another user could have written is not run, whatever it holds.
  if (struct stat st{}; ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    if (std::string why = not_own(st); !why.empty()) {
      e.state = DiskEntry::State::kCorrupt;
      e.problem = fmt::format("{}: the entry {}; it will be replaced", path, why);
      return e;
    }
  }
  if (auto err = common::read_regular_file(path, common::kMaxKernelFileBytes, bytes)) {
    if (err->error_number == ENOENT) return e;
    e.state = DiskEntry::State::kCorrupt;
    e.problem = fmt::format("{}: {}", path, err->reason);
    return e;
  }
  auto corrupt = [&](const std::string &why) {
    e.state = DiskEntry::State::kCorrupt;
    e.problem = fmt::format("{}: {}", path, why);
    return e;
  };
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return corrupt("not a trn kernel cache entry (bad magic or truncated header)");
  if (get<uint32_t>(bytes.data() + 8) != kEntryVersion)
    return corrupt("an entry of another format version");
  const uint32_t key_bytes = get<uint32_t>(bytes.data() + 12);
  const uint64_t image_bytes = get<uint64_t>(bytes.data() + 16);
  const uint64_t checksum = get<uint64_t>(bytes.data() + 24);
  if (key_bytes > bytes.size() - kHeaderBytes ||
      image_bytes != bytes.size() - kHeaderBytes - key_bytes)
    return corrupt(fmt::format("{} bytes where the header says {}", bytes.size(),
                               kHeaderBytes + uint64_t{key_bytes} + image_bytes));
  const std::byte *body = bytes.data() + kHeaderBytes;
  if (fnv1a(body, key_bytes + image_bytes) != checksum)
    return corrupt("the checksum does not match (the entry is damaged)");
  if (std::string(reinterpret_cast<const char *>(body), key_bytes) != key)
    return corrupt("it holds another kernel (a hash collision); it will be replaced");
  e.state = DiskEntry::State::kFound;
  e.image.assign(body + key_bytes, body + key_bytes + image_bytes);
  return e;
}

std::optional<std::string> write_entry(const std::string &dir, const std::string &key,
                                       const std::vector<std::byte> &image) {
  if (auto err = make_dirs(dir)) return err;
  std::vector<std::byte> out;
  out.reserve(kHeaderBytes + key.size() + image.size());
  out.insert(out.end(), reinterpret_cast<const std::byte *>(kMagic),
             reinterpret_cast<const std::byte *>(kMagic) + sizeof kMagic);
  put<uint32_t>(out, kEntryVersion);
  put<uint32_t>(out, static_cast<uint32_t>(key.size()));
  put<uint64_t>(out, image.size());
  const uint64_t checksum = fnv1a(image.data(), image.size(), fnv1a(key.data(), key.size()));
  put<uint64_t>(out, checksum);
  out.insert(out.end(), reinterpret_cast<const std::byte *>(key.data()),
             reinterpret_cast<const std::byte *>(key.data()) + key.size());
  out.insert(out.end(), image.begin(), image.end());
  const std::string path = entry_path(dir, key);
  return common::write_file_replacing(path, common::unique_temp_path(path), out, true, 0600);
}

}  // namespace trn::ops
