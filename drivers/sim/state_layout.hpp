// The layout of a simulated device's shared state file, device<N>.state. Every process using
// the device maps it. Bump kStateLayoutVersion on any change: a file of another version is
// refused with an error, never misread.
//
// Who writes what: the header is written once, before the file gets its name; a process slot
// is written only by the process holding that slot's lock; a core record only by the process
// holding that core's lock. Records carry a sequence counter (odd while being written) so
// readers in other processes never see a torn record.
#pragma once

#include <atomic>
#include <cstdint>

#include "trn/trn.h"

namespace trn::sim {

constexpr uint32_t kStateLayoutVersion = 1;
constexpr char kStateMagic[8] = {'T', 'R', 'N', 'S', 'I', 'M', 'S', 'T'};
constexpr uint32_t kMaxProcessSlots = 64;
constexpr uint32_t kMaxPhysicalCores = 16;

// Byte ranges of the state file used as open-file-description locks. The kernel drops them when
// the holder's last descriptor closes, which includes every way a process can die.
constexpr int64_t kLockUsers = int64_t{1} << 30;  // shared by every process that has it open
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

struct alignas(64) CoreRecord {
  std::atomic<uint32_t> seq;
  uint32_t pad;
  struct Body {
    int32_t owner_slot;  // -1 = none
    int32_t pid;
    uint64_t since_unix_ns;
  } body;
};

struct StateFile {
  StateHeader header;
  ProcessSlot slots[kMaxProcessSlots];
  CoreRecord cores[kMaxPhysicalCores];
};

static_assert(std::atomic<uint32_t>::is_always_lock_free, "state file needs lock-free atomics");

}  // namespace trn::sim
