// Single-writer sequence locks over records in shared memory: the writer is whoever holds the
// record's OFD lock; readers in any process retry until they see an even, unchanged sequence.
// The body is copied as 64-bit atomic words (no fences: the ordering comes from the acquire and
// release operations themselves, which ThreadSanitizer also understands).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

namespace trn::sim {

namespace detail {

template <typename Body>
constexpr size_t kWords = sizeof(Body) / sizeof(uint64_t);

template <typename Record>
uint64_t *body_words(Record &record) {
  static_assert(sizeof(typename Record::Body) % sizeof(uint64_t) == 0, "body must be whole words");
  static_assert(offsetof(Record, body) % alignof(uint64_t) == 0, "body must be word-aligned");
  return reinterpret_cast<uint64_t *>(&record.body);
}

}  // namespace detail

template <typename Record>
void seqlock_write(Record &record, const typename Record::Body &body) {
  using Body = typename Record::Body;
  uint64_t words[detail::kWords<Body>];
  std::memcpy(words, &body, sizeof body);
  // Odd while writing. A previous writer that died mid-write left it odd: start from even.
  uint32_t seq = record.seq.load(std::memory_order_relaxed);
  if (seq & 1u) ++seq;
  record.seq.store(seq + 1, std::memory_order_relaxed);
  // acq_rel read-modify-write: the body stores below cannot move above the odd sequence.
  record.seq.fetch_add(0, std::memory_order_acq_rel);
  uint64_t *target = detail::body_words(record);
  for (size_t i = 0; i < detail::kWords<Body>; ++i)
    std::atomic_ref<uint64_t>(target[i]).store(words[i], std::memory_order_relaxed);
  record.seq.store(seq + 2, std::memory_order_release);
}

// False when the writer kept it busy for the whole bounded number of tries (a writer that died
// half-way leaves an odd sequence: the record is then reported unreadable, never waited on).
template <typename Record>
bool seqlock_read(const Record &record, typename Record::Body *body) {
  using Body = typename Record::Body;
  auto &mutable_record = const_cast<Record &>(record);
  uint64_t *source = detail::body_words(mutable_record);
  uint64_t words[detail::kWords<Body>];
  for (int attempt = 0; attempt < 4096; ++attempt) {
    const uint32_t before = record.seq.load(std::memory_order_acquire);
    if (before & 1u) continue;
    // Acquire loads: the sequence re-check below cannot move above them.
    for (size_t i = 0; i < detail::kWords<Body>; ++i)
      words[i] = std::atomic_ref<uint64_t>(source[i]).load(std::memory_order_acquire);
    if (record.seq.load(std::memory_order_relaxed) == before) {
      std::memcpy(body, words, sizeof *body);
      return true;
    }
  }
  return false;
}

}  // namespace trn::sim
