// Which chunks of a device's memory this process has backed with storage, and which may hold
// what another process wrote. Reads never take a lock: a flag per chunk, read with one atomic
// load. Only backing new chunks (fallocate) is serialised.
//
// A chunk this process never backed and that no other process can have written reads as zeros
// without touching the mapping (a read fault on a hole of a full tmpfs would be a SIGBUS, and
// would take storage for nothing). Chunks of ranges shared with other processes (exported or
// imported) are backed and read: their other holders may have written them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "trn/trn.h"

namespace trn::sim {

class DeviceState;

class CommitMap {
 public:
  explicit CommitMap(DeviceState &state);
  CommitMap(const CommitMap &) = delete;
  CommitMap &operator=(const CommitMap &) = delete;

  // Backs [offset, offset+bytes) with storage: afterwards a store there cannot fault.
  trn_result_t commit(uint64_t offset, uint64_t bytes, std::string *why);
  // Copies device memory at `offset` (mapped at `mapped`) to `out`, zeros for chunks never
  // written.
  trn_result_t read(const char *mapped, uint64_t offset, void *out, uint64_t bytes,
                    std::string *why);
  // The range may be written by other processes from now on.
  void mark_shared(uint64_t offset, uint64_t bytes);
  // The range was released: forget it (it reads as zeros until backed again).
  void forget(uint64_t offset, uint64_t bytes);

 private:
  static constexpr uint8_t kCommitted = 1;
  static constexpr uint8_t kShared = 2;
  std::atomic<uint8_t> *flags();
  template <typename Each>
  void for_chunks(uint64_t offset, uint64_t bytes, Each each);

  DeviceState &state_;
  uint64_t chunk_count_;
  std::once_flag made_;
  std::unique_ptr<std::atomic<uint8_t>[]> flags_;  // one per chunk, made on first use
  std::mutex commit_mu_;                           // serialises backing new chunks
};

}  // namespace trn::sim
