// The device memory this process holds on one device: the ranges it reserved (mem_reserve) or
// imported (mem_import), by HBM offset. Every address an operation or a command takes must lie
// inside one of them (hal.h: memory this process holds). Lookups take a shared lock and are
// O(log n); reserving, releasing, importing and unexporting take it exclusively.
#pragma once

#include <cstdint>
#include <map>
#include <shared_mutex>
#include <utility>

namespace trn::sim {

class HeldRanges {
 public:
  // A range reserved or imported. Importing a range already held (its export, or a second
  // import) is one hold.
  void add(uint64_t offset, uint64_t bytes);
  // [offset, offset+bytes) was released: forget it (splitting a range released in part).
  void remove(uint64_t offset, uint64_t bytes);
  // [offset, offset+bytes), held, is export (record, id) (exported or imported): this process
  // holds it until it unexports it.
  void note_export(uint32_t record, uint64_t id, uint64_t offset, uint64_t bytes);
  // This process let go of export (record, id): forget its range. Returns it ({0, 0} if the
  // export was not held).
  std::pair<uint64_t, uint64_t> drop_export(uint32_t record, uint64_t id);
  // Whether [offset, offset+bytes) lies inside one held range (bytes may be 0: offset inside).
  bool holds(uint64_t offset, uint64_t bytes) const;

 private:
  void remove_locked(uint64_t offset, uint64_t bytes);

  mutable std::shared_mutex mu_;         // guards both maps
  std::map<uint64_t, uint64_t> ranges_;  // offset -> bytes
  // (record, id) -> (offset, bytes)
  std::map<std::pair<uint32_t, uint64_t>, std::pair<uint64_t, uint64_t>> exports_;
};

}  // namespace trn::sim
