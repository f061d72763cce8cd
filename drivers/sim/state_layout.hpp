// The layout of a simulated device's shared state file, device<N>.state. Every process using
// the device maps it. Bump kStateLayoutVersion on any change: a file of another version is
// refused with an error, never misread.
//
// Who writes what: the header is written once, before the file gets its name; a process slot
// is written only by the process holding that slot's lock; a core record only by the process
// holding that core's lock. Records carry a sequence counter (odd while being written) so
// readers in other processes never see a torn record.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "drivers/hal.h"
#include "trn/trn.h"

namespace trn::sim {

// 10: a semaphore cell's times in lines of their own, apart from the value a waiter reads.
// 11: the time of the latest signal beside the value (one line per signal and wait), the ring of
// recent signals' times still apart.
constexpr uint32_t kStateLayoutVersion = 11;
constexpr char kStateMagic[8] = {'T', 'R', 'N', 'S', 'I', 'M', 'S', 'T'};
constexpr uint32_t kMaxProcessSlots = 64;
constexpr uint32_t kMaxPhysicalCores = 16;
constexpr uint32_t kMaxHbmBanks = TRN_MAX_HBM_BANKS;
constexpr uint32_t kCategories = TRN_MEM_CATEGORY_COUNT;

// HBM is handed to processes in chunks: big enough that the chunk table stays small and a
// process takes few of them, small enough that little is stranded (PyTorch's small segment).
constexpr uint64_t kChunkBytes = 2ull << 20;
constexpr uint64_t kMaxHbmBytes = 1ull << 40;  // 1 TiB per device
constexpr uint32_t kMaxChunks = static_cast<uint32_t>(kMaxHbmBytes / kChunkBytes);
constexpr uint32_t kMaxExports = 256;
constexpr uint32_t kMaxSharedSems = 1024;

// Chunk owners: 0 = free, 1..kMaxProcessSlots = process slot + 1, kExportOwnerBase + i = export
// record i (memory shared between processes, freed when its last holder lets go).
constexpr uint16_t kChunkFree = 0;
constexpr uint16_t kExportOwnerBase = 0x100;

// Byte ranges of the state file used as open-file-description locks. The kernel drops them when
// the holder's last descriptor closes, which includes every way a process can die.
constexpr int64_t kLockUsers = int64_t{1} << 30;  // shared by every process that has it open
constexpr int64_t kLockChunks = kLockUsers + 1;   // exclusive while changing MemoryControl
constexpr int64_t kLockSlotBase = kLockUsers + 64;
constexpr int64_t kLockCoreBase = kLockSlotBase + 4096;

struct StateHeader {
  char magic[8];
  uint32_t layout_version;
  uint32_t header_bytes;
  uint64_t file_bytes;
  uint32_t device_index;
  uint32_t device_count;  // devices in the set this file was created with
  uint32_t generation;    // trn_generation_t
  uint32_t physical_cores;
  uint64_t hbm_bytes;
  uint64_t created_unix_ns;
  int32_t creator_pid;
  uint32_t reserved[7];
};

struct alignas(64) ProcessSlot {
  std::atomic<uint32_t> seq;
  uint32_t pad;
  struct Body {
    int32_t pid;
    uint32_t uid;
    uint64_t attached_unix_ns;
    char command[TRN_COMMAND_MAX];
    char runtime_version[32];
  } body;
};

// Memory accounting of a process slot, written by its owner with relaxed atomic stores and read
// by anyone (each counter is a single word: no record-level consistency is needed).
struct alignas(64) SlotMemory {
  uint64_t reserved[kMaxHbmBanks];                // chunks held, in bytes
  uint64_t allocated[kMaxHbmBanks][kCategories];  // bytes handed out by allocations
  uint64_t peak[kMaxHbmBanks][kCategories];
  uint64_t count[kMaxHbmBanks][kCategories];
  trn_hal_core_activity_t activity[kMaxPhysicalCores];
};

// Memory exported by one process and imported by others. Guarded by the chunk lock.
struct ExportRecord {
  uint64_t id;           // never reused within a file; 0 = unused record
  uint64_t holder_mask;  // process slots holding it (liveness still checked through locks)
  uint32_t first_chunk;
  uint32_t chunk_count;
};

// One signal of a semaphore: its value and simulated time. `value` doubles as the entry's
// sequence word: 0 while it is written (a signal to 0 raises nothing).
struct SignalTime {
  std::atomic<uint64_t> value;
  std::atomic<uint64_t> device_ns;
};
constexpr uint32_t kSignalTimes = 8;

// A shareable semaphore's cell: every process holding it maps the same one. `wake` is a futex
// word (non-private: sleepers may be in other processes) that changes on every wake: a failure, or
// a signal that reaches the lowest value a sleeper waits for.
struct SharedSemCell {
  // The line a spinning waiter reads: a signal takes it from the waiter once, to raise the value
  // and the time. `device_ns` is the simulated time of the latest signal: a queue's wait whose
  // own clock is past it has its time without looking further.
  std::atomic<uint64_t> value;
  std::atomic<uint64_t> device_ns;
  std::atomic<uint32_t> wake;
  std::atomic<uint32_t> failed;    // nonzero: a pending signal will not happen
  std::atomic<uint32_t> sleepers;  // waiters asleep on `wake`
  // No sleeper waits for a value below this (their targets, clamped to 32 bits: a clamped target
  // only wakes early): a signal that stays below it wakes nobody. kNoWakeAt when none registered
  // since the last wake; 0 wakes on every signal.
  std::atomic<uint32_t> wake_at;
  // The signallers' lines, read only by queue waits whose clock is behind `device_ns`: the last
  // kSignalTimes signals, a ring (`times_next` counts them), so that a wait that looks after
  // later signals raised the cell (a peer a few chunks ahead) still finds when its own value was
  // reached, where `device_ns` holds only the latest.
  alignas(64) std::atomic<uint32_t> times_next;
  SignalTime times[kSignalTimes];
};
static_assert(offsetof(SharedSemCell, times_next) == 64,
              "a waiter's words fill the first line alone");
constexpr uint32_t kNoWakeAt = UINT32_MAX;

struct alignas(64) CoreRecord {
  std::atomic<uint32_t> seq;
  uint32_t pad;
  struct Body {
    int32_t owner_slot;  // -1 = none
    int32_t pid;
    uint64_t since_unix_ns;
  } body;
};

// Shared mutable memory state. Every change is made under the chunk lock (the OFD lock
// kLockChunks, dropped by the kernel when its holder dies) and in an order that a half-done
// change leaves only chunks owned by a dead slot, which the next reclaim returns. `changing` is
// set while the lock's holder works: found set by the next holder, its previous holder died
// mid-change, and the next holder reclaims what dead processes held.
struct alignas(64) MemoryControl {
  uint32_t changing;
  uint32_t pad;
  uint64_t next_export_id;
  uint32_t chunk_count;  // chunks in the device (hbm_bytes / kChunkBytes)
  uint32_t bank_chunks;  // chunks per bank
  ExportRecord exports[kMaxExports];
  ExportRecord sem_records[kMaxSharedSems];  // first_chunk/chunk_count unused
  SharedSemCell sem_cells[kMaxSharedSems];
  uint16_t chunk_owner[kMaxChunks];
};

struct StateFile {
  StateHeader header;
  ProcessSlot slots[kMaxProcessSlots];
  SlotMemory slot_memory[kMaxProcessSlots];
  CoreRecord cores[kMaxPhysicalCores];
  MemoryControl memory;
};

static_assert(std::atomic<uint32_t>::is_always_lock_free, "state file needs lock-free atomics");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "state file needs lock-free atomics");

}  // namespace trn::sim
