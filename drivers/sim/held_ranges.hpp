// The device memory this process holds on one device: the ranges it reserved (mem_reserve) or
// imported (mem_import), by HBM offset. Every address an operation or a command takes must lie
// inside one of them (hal.h: memory this process holds). Lookups take a shared lock and are
// O(log n); reserving, releasing, importing and unexporting take it exclusively. A caller that
// looks up again and again (a queue's submissions and its runner) keeps a memo of the ranges it
// found: while no change was made since, an address inside one of them takes no lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <shared_mutex>
#include <utility>

namespace trn::sim {

class HeldRanges;

// Ranges a caller's lookups found, each with the change count it was found at. One caller at a
// time (it is not synchronised).
struct HeldRangesMemo {
  struct Entry {
    const HeldRanges *ranges = nullptr;
    uint64_t version = 0, offset = 0, bytes = 0;
  };
  static constexpr uint32_t kEntries = 4;  // a reduction's three operands, and one more
  Entry entries[kEntries];
  uint32_t next = 0;
};

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
  // With a memo: answered from it while the ranges are unchanged, and the range found noted in it.
  bool holds(uint64_t offset, uint64_t bytes, HeldRangesMemo *memo = nullptr) const;

 private:
  void remove_locked(uint64_t offset, uint64_t bytes);
  // Every change counts here before it starts (under the exclusive lock): a memo's entry of an
  // earlier count may be out of date.
  void changing() { version_.fetch_add(1, std::memory_order_release); }

  std::atomic<uint64_t> version_{1};  // memo entries start at 0: never current

  mutable std::shared_mutex mu_;         // guards both maps
  std::map<uint64_t, uint64_t> ranges_;  // offset -> bytes
  // (record, id) -> (offset, bytes)
  std::map<std::pair<uint32_t, uint64_t>, std::pair<uint64_t, uint64_t>> exports_;
};

}  // namespace trn::sim
