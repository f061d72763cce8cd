// What each rank of a communicator on one host says it called, collective by collective, so that
// ranks that call different collectives (another count, dtype, op or root) fail instead of
// exchanging bytes that mean different things on each side.
//
// Every rank writes its calls into its row of a table in rank 0's staging buffer (a ring of
// entries() calls per rank), which the ranks on its host map. A rank that has written its call
// looks at everybody's (of two ranks that write at once, one sees the other's): the last to arrive
// sees all of them, and either they agree (the communicator then opens the closing agreement's
// gate, which every rank's operation waits behind) or two differ, and the communicator fails naming
// both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace trn::comm {

// A collective call as every rank must make it. Fields that do not apply to the kind are 0.
struct CallSignature {
  uint32_t kind = 0;  // OpKind
  uint32_t dtype = 0;
  uint32_t op = 0;    // the reduction, for reducing kinds
  uint32_t root = 0;  // for rooted kinds
  uint64_t count = 0;
  bool operator==(const CallSignature &) const = default;
  // "all_reduce of 2048 x f32 (sum)", "broadcast of 16 x i32 from rank 2", "barrier".
  std::string text() const;
};

class CallTable {
 public:
  static constexpr uint64_t kEntryBytes = 32;
  static constexpr uint64_t kMaxEntries = 128;

  // `table`: `bytes` of mapped memory (at least 8 entries a rank) for `ranks` rows.
  CallTable(std::byte *table, uint64_t bytes, uint32_t ranks, uint32_t rank);

  // Calls a row holds: a rank may run this far ahead of the slowest before it waits for the
  // call this many before to have been agreed.
  uint64_t entries() const { return entries_; }

  enum class Verdict {
    pending,  // some rank has not made call `number` yet (it will see this rank's call)
    agreed,   // every rank made it, alike
    differs,  // `other` made it otherwise
  };
  struct Outcome {
    Verdict verdict = Verdict::pending;
    uint32_t other = 0;
    CallSignature theirs;
  };
  // Writes this rank's call `number` (1, 2, ...; its entry must be free: the call entries()
  // before was agreed) and reads every rank's.
  Outcome publish(uint64_t number, const CallSignature &mine);

 private:
  std::byte *entry(uint32_t rank, uint64_t number) const {
    return table_ + (rank * entries_ + number % entries_) * kEntryBytes;
  }
  std::byte *table_ = nullptr;
  uint64_t entries_ = 0;
  uint32_t ranks_ = 0;
  uint32_t rank_ = 0;
};

}  // namespace trn::comm
