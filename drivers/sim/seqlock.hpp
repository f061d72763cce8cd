// Single-writer sequence locks over records in shared memory: the writer is whoever holds the
// record's OFD lock; readers in any process retry until they see an even, unchanged sequence.
#pragma once

#include <atomic>
#include <cstring>

namespace trn::sim {

template <typename Record>
void seqlock_write(Record &record, const typename Record::Body &body) {
  uint32_t seq = record.seq.load(std::memory_order_relaxed);
  if (seq & 1u) ++seq;  // a previous writer died mid-write; its record is overwritten whole
  record.seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  std::memcpy(static_cast<void *>(&record.body), &body, sizeof body);
  record.seq.store(seq + 2, std::memory_order_release);
}

// False when the writer kept it busy for the whole bounded number of tries (a writer that died
// half-way leaves an odd sequence: the record is then reported unreadable, never waited on).
template <typename Record>
bool seqlock_read(const Record &record, typename Record::Body *body) {
  for (int attempt = 0; attempt < 4096; ++attempt) {
    const uint32_t before = record.seq.load(std::memory_order_acquire);
    if (before & 1u) continue;
    std::memcpy(body, static_cast<const void *>(&record.body), sizeof *body);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (record.seq.load(std::memory_order_relaxed) == before) return true;
  }
  return false;
}

}  // namespace trn::sim
