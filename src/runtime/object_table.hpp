// Handles of objects the API creates and destroys (pools, allocations): a slot per live object
// with a generation that is never reused, so a freed handle, a handle of another kind or of a
// previous session never finds an object. Lookups return a shared_ptr: an object stays alive
// for a call that found it even if another thread destroys its handle meanwhile.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/handle.hpp"

namespace trn::rt {

// A thread's recent find_fast lookups, a few per kind of object. It belongs to the thread's
// runtime state (session.cpp) rather than to each table, so that trn_runtime_shutdown on another
// thread can empty it: a thread that made no call since must not keep the objects of a closed
// session alive. Only its thread touches it during an API call; see current_session().
struct ThreadObjectCache {
  struct Entry {
    uint64_t table = 0;
    uint64_t version = 0;
    uint64_t handle = 0;
    std::shared_ptr<void> object;
  };
  static constexpr unsigned kKinds = static_cast<unsigned>(HandleKind::tensor_set) + 1;
  static constexpr unsigned kEntries = 8;
  Entry entries[kKinds][kEntries];
  unsigned next[kKinds] = {};
};

// The calling thread's cache, valid during an API call (defined in session.cpp).
ThreadObjectCache &thread_object_cache();

template <typename T>
class ObjectTable {
 public:
  explicit ObjectTable(HandleKind kind) : kind_(kind) {}

  uint64_t insert(std::shared_ptr<T> object) {
    std::lock_guard lock(mu_);
    uint32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      slot = static_cast<uint32_t>(entries_.size());
      entries_.emplace_back();
    }
    Entry &entry = entries_[slot];
    entry.generation = next_handle_generation();
    entry.object = std::move(object);
    return encode_handle(entry.generation, kind_, slot);
  }

  std::shared_ptr<T> lookup(uint64_t value) const {
    std::lock_guard lock(mu_);
    const Entry *entry = find(value);
    return entry ? entry->object : nullptr;
  }

  // The object of an API handle, or null with the error recorded in *result.
  template <typename Handle>
  std::shared_ptr<T> find(Handle handle, trn_result_t *result) const {
    auto object = lookup(from_handle(handle));
    *result = object ? TRN_SUCCESS : invalid_handle(kind_, from_handle(handle));
    return object;
  }

  // The same without taking the table's lock or touching the object's reference count (on the
  // hot path of signal, wait and submit, two threads would otherwise bounce those cache lines):
  // a few recent lookups are cached per thread, valid while no handle of the table has been
  // removed since. The pointer stays valid until this thread's next find_fast on a table of
  // this kind (the cache keeps the object alive), so use it within one API call.
  template <typename Handle>
  T *find_fast(Handle handle, trn_result_t *result) const {
    const std::shared_ptr<void> *object = find_cached(from_handle(handle), result);
    return object ? static_cast<T *>(object->get()) : nullptr;
  }

  // find_fast's cache, for a caller that keeps the object past the call (a command holds its
  // memory and semaphores until it completes): a reference of its own, without the table's lock.
  // Null, with the reason recorded (last_detail), for a handle that is not live.
  std::shared_ptr<T> find_shared(uint64_t value) const {
    trn_result_t result = TRN_SUCCESS;
    const std::shared_ptr<void> *object = find_cached(value, &result);
    return object ? std::static_pointer_cast<T>(*object) : nullptr;
  }

  // Removes the handle and returns its object (null if the handle is not live). The calling
  // thread's cache lets go of it too, so that the object goes when the caller drops it (what it
  // holds in the driver with it) unless another thread's cache still has it.
  std::shared_ptr<T> remove(uint64_t value) {
    std::shared_ptr<T> object;
    {
      std::lock_guard lock(mu_);
      Entry *entry = const_cast<Entry *>(find(value));
      if (!entry) return nullptr;
      object = std::move(entry->object);
      entry->generation = 0;
      version_.fetch_add(1, std::memory_order_release);
      free_.push_back(decode_handle(value).slot);
    }
    ThreadObjectCache &cache = thread_object_cache();
    for (ThreadObjectCache::Entry &cached : cache.entries[static_cast<unsigned>(kind_)])
      if (cached.table == id_ && cached.handle == value) cached.object.reset();
    return object;
  }

  // Removes whichever handle refers to `object` (teardown).
  void remove_object(const T *object) {
    std::lock_guard lock(mu_);
    for (uint32_t slot = 0; slot < entries_.size(); ++slot) {
      if (entries_[slot].object.get() != object) continue;
      entries_[slot].object.reset();
      entries_[slot].generation = 0;
      free_.push_back(slot);
      version_.fetch_add(1, std::memory_order_release);
    }
  }

  // Every live object, for teardown.
  std::vector<std::shared_ptr<T>> all() const {
    std::lock_guard lock(mu_);
    std::vector<std::shared_ptr<T>> out;
    for (const Entry &entry : entries_)
      if (entry.object) out.push_back(entry.object);
    return out;
  }

 private:
  // The thread's cached reference to the object of `value`, looked up (and cached) on a miss.
  const std::shared_ptr<void> *find_cached(uint64_t value, trn_result_t *result) const {
    const uint64_t version = version_.load(std::memory_order_acquire);
    ThreadObjectCache &cache = thread_object_cache();
    const auto kind = static_cast<unsigned>(kind_);
    for (ThreadObjectCache::Entry &entry : cache.entries[kind])
      if (entry.handle == value && entry.table == id_ && entry.version == version && entry.object) {
        *result = TRN_SUCCESS;
        return &entry.object;
      }
    auto object = lookup(value);
    if (!object) {
      *result = invalid_handle(kind_, value);
      return nullptr;
    }
    *result = TRN_SUCCESS;
    ThreadObjectCache::Entry &slot =
        cache.entries[kind][cache.next[kind]++ % ThreadObjectCache::kEntries];
    slot = ThreadObjectCache::Entry{id_, version, value, std::move(object)};
    return &slot.object;
  }

  struct Entry {
    uint32_t generation = 0;
    std::shared_ptr<T> object;
  };

  const Entry *find(uint64_t value) const {
    const DecodedHandle decoded = decode_handle(value);
    if (decoded.kind != kind_ || decoded.slot >= entries_.size()) return nullptr;
    const Entry &entry = entries_[decoded.slot];
    return entry.generation == decoded.generation && entry.generation != 0 ? &entry : nullptr;
  }

  static inline std::atomic<uint64_t> next_id_{1};

  const uint64_t id_ = next_id_.fetch_add(1, std::memory_order_relaxed);  // never reused
  std::atomic<uint64_t> version_{0};  // bumped whenever a handle is removed
  const HandleKind kind_;
  mutable std::mutex mu_;  // guards entries_ and free_
  std::vector<Entry> entries_;
  std::vector<uint32_t> free_;
};

}  // namespace trn::rt
