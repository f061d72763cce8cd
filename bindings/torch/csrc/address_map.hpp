// Live allocations by their start address, and the one holding an address: how the allocators
// find their own record from a bare data pointer (a storage clone, torch's "which device is this
// pointer on", is_pinned). Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

namespace torch_trn {

// `Record` is owned by its allocator; this only indexes it.
template <typename Record>
class AddressMap {
 public:
  void add(uintptr_t start, Record *record) {
    std::lock_guard lock(mutex_);
    records_[start] = record;
  }
  void remove(uintptr_t start) {
    std::lock_guard lock(mutex_);
    records_.erase(start);
  }
  // The record whose [start, start + size_of(record)) holds `address`, and the address's offset
  // in it; {nullptr, 0} for none.
  template <typename SizeOf>
  std::pair<Record *, uint64_t> find(const void *address, SizeOf size_of) {
    const auto at = reinterpret_cast<uintptr_t>(address);
    std::lock_guard lock(mutex_);
    auto it = records_.upper_bound(at);
    if (it == records_.begin()) return {nullptr, 0};
    --it;
    if (at - it->first >= size_of(*it->second)) return {nullptr, 0};
    return {it->second, at - it->first};
  }

 private:
  std::mutex mutex_;
  std::map<uintptr_t, Record *> records_;
};

}  // namespace torch_trn
