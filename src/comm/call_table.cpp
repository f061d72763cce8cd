#include "comm/call_table.hpp"

#include <algorithm>
#include <atomic>

#include "comm/operations.hpp"

namespace trn::comm {

namespace {

// One call in a table, read and written through atomics: the other ranks' processes (or threads)
// read it while its owner may already write the call entries() later over it. `number` is a
// sequence lock's word: 0 while the owner writes the fields, then the call's number.
struct Entry {
  uint64_t number;
  uint32_t kind, dtype, op, root;
  uint64_t count;
};
static_assert(sizeof(Entry) == CallTable::kEntryBytes);

template <typename T>
std::atomic_ref<T> at(T &field) {
  return std::atomic_ref<T>(field);
}

void write(Entry *e, uint64_t number, const CallSignature &s) {
  // Release stores (and acquire loads in read()) instead of fences, which TSan cannot follow: a
  // reader that sees any field of this call then sees `number` at 0 or later, and retries.
  at(e->number).store(0, std::memory_order_relaxed);
  at(e->kind).store(s.kind, std::memory_order_release);
  at(e->dtype).store(s.dtype, std::memory_order_release);
  at(e->op).store(s.op, std::memory_order_release);
  at(e->root).store(s.root, std::memory_order_release);
  at(e->count).store(s.count, std::memory_order_release);
  // Sequentially consistent, as are the reads of the other entries after it: of two ranks that
  // write at once, at least one sees the other's call (so the last to arrive always knows it).
  at(e->number).store(number, std::memory_order_seq_cst);
}

// The call the entry holds if it is `number`'s, read whole; false if it holds another (an
// earlier one: not made yet; a later one: `number` was agreed and the owner went on).
bool read(Entry *e, uint64_t number, CallSignature *out) {
  if (at(e->number).load(std::memory_order_seq_cst) != number) return false;
  out->kind = at(e->kind).load(std::memory_order_acquire);
  out->dtype = at(e->dtype).load(std::memory_order_acquire);
  out->op = at(e->op).load(std::memory_order_acquire);
  out->root = at(e->root).load(std::memory_order_acquire);
  out->count = at(e->count).load(std::memory_order_acquire);
  return at(e->number).load(std::memory_order_relaxed) == number;
}

}  // namespace

CallTable::CallTable(std::byte *table, uint64_t bytes, uint32_t ranks, uint32_t rank)
    : table_(table),
      entries_(std::min(kMaxEntries, bytes / kEntryBytes / ranks)),
      ranks_(ranks),
      rank_(rank) {}

std::string CallSignature::text() const {
  const auto k = static_cast<OpKind>(kind);
  std::string out = op_kind_name(k);
  if (k == OpKind::barrier) return out;
  out += " of " + std::to_string(count) + " x " + trn_dtype_name(static_cast<trn_dtype_t>(dtype));
  if (k == OpKind::all_reduce || k == OpKind::reduce_scatter || k == OpKind::reduce)
    out += std::string(" (") + trn_comm_red_op_name(static_cast<trn_comm_red_op_t>(op)) + ")";
  if (k == OpKind::broadcast || k == OpKind::reduce)
    out += " rooted at rank " + std::to_string(root);
  return out;
}

CallTable::Outcome CallTable::publish(uint64_t number, const CallSignature &mine) {
  write(reinterpret_cast<Entry *>(entry(rank_, number)), number, mine);
  Outcome outcome;
  outcome.verdict = Verdict::agreed;
  for (uint32_t r = 0; r < ranks_; ++r) {
    if (r == rank_) continue;
    CallSignature theirs;
    auto *e = reinterpret_cast<Entry *>(entry(r, number));
    if (!read(e, number, &theirs)) {
      // Overwritten by a later call: this one was agreed (someone saw every rank's) before its
      // owner could go on that far.
      if (at(e->number).load(std::memory_order_seq_cst) > number) continue;
      outcome.verdict = Verdict::pending;
      continue;
    }
    if (!(theirs == mine)) return {Verdict::differs, r, theirs};
  }
  return outcome;
}

}  // namespace trn::comm
