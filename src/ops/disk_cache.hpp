// The kernel cache on disk: one file per kernel, named by a hash of its key, holding the key and
// the kernel binary with a checksum. Processes share the directory: an entry is written to a
// temporary file and renamed into place, so a reader sees a whole entry or none. An entry that
// does not check out (truncated, damaged, another key under the same hash) is reported as
// corrupt; the caller rebuilds it and writes it again.
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

uint64_t key_hash(const std::string &key);  // FNV-1a, 64 bits
std::string entry_path(const std::string &dir, const std::string &key);
DiskEntry read_entry(const std::string &dir, const std::string &key);
// nullopt on success, else why the entry could not be written.
std::optional<std::string> write_entry(const std::string &dir, const std::string &key,
                                       const std::vector<std::byte> &image);

}  // namespace trn::ops
