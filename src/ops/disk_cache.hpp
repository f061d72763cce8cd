// The kernel cache on disk: one file per kernel, named by a hash of its key, holding the key and
// the kernel binary with a checksum. Processes share the directory: an entry is written to a
// temporary file and renamed into place, so a reader sees a whole entry or none. An entry that
// does not check out (truncated, damaged, another key under the same hash) is reported as
// corrupt; the caller rebuilds it and writes it again. Whoever can write the directory chooses
// the code the device runs: only a directory of this user's own that nobody else can write is
// used (untrusted_directory), its entries must be this user's and writable by nobody else too, and
// what it creates is 0700 (directories) and 0600 (entries).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace trn::ops {

struct DiskEntry {
  enum class State { kMissing, kFound, kCorrupt } state = State::kMissing;
  std::vector<std::byte> image;
  std::string problem;  // for kCorrupt: what was wrong
};

// Why `dir` may not hold kernels this process runs (owned by another user, writable by group or
// others, not a directory), or nullopt: it is fit (or does not exist yet: write_entry makes it
// 0700).
std::optional<std::string> untrusted_directory(const std::string &dir);
uint64_t key_hash(const std::string &key);  // FNV-1a, 64 bits
std::string entry_path(const std::string &dir, const std::string &key);
DiskEntry read_entry(const std::string &dir, const std::string &key);
// nullopt on success, else why the entry could not be written.
std::optional<std::string> write_entry(const std::string &dir, const std::string &key,
                                       const std::vector<std::byte> &image);

}  // namespace trn::ops
