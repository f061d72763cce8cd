// Writing a whole file so that readers never see half of it: the bytes go to a temporary file
// beside the target, which is then renamed over it (rename is atomic within a file system).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <span>
#include <string>

namespace trn::common {

// Writes `bytes` to `temp` (created with `mode`), flushes it to the disk, renames it to `path`
// and flushes the directory: after a crash `path` holds the old bytes or the new, never a file
// cut short. nullopt on success; otherwise one line naming the file and the system's reason
// ("cannot write out.trnp.tmp: No space left on device"), and `temp` is gone. Only a regular
// file is replaced: a device node, a FIFO, a directory or a symbolic link at `path` is refused
// before anything is written. With `exclusive`, `temp` must not exist yet (for names unique to
// one writer); otherwise it is truncated.
std::optional<std::string> write_file_replacing(const std::string &path, const std::string &temp,
                                                std::span<const std::byte> bytes,
                                                bool exclusive = false, mode_t mode = 0644);

// A temporary name beside `path` that no other writer, in this process or another, uses now.
std::string unique_temp_path(const std::string &path);

}  // namespace trn::common
