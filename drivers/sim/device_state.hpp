// One simulated device's shared state: opening (creating, validating, re-creating an unused file
// for a new configuration), the process slot, and core claims. See state_layout.hpp.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "drivers/hal.h"
#include "sim/mapping_guard.hpp"
#include "sim/state_check.hpp"
#include "sim/state_layout.hpp"

namespace trn::sim {

// What this process wants the device to be; `explicit_*` = the user asked for it.
struct DeviceWish {
  uint32_t index = 0;
  uint32_t device_count = 1;
  trn_generation_t generation = TRN_GENERATION_TRN2;
  uint32_t physical_cores = 0;
  uint64_t hbm_bytes = 0;
  bool explicit_device_count = false;
  bool explicit_generation = false;
  bool explicit_hbm = false;
};

class DeviceState {
 public:
  // Opens `<root>/device<index>.state`; the caller holds the root's directory lock. A missing
  // file is created; a file nobody else has open is re-created when its configuration differs;
  // a file in use keeps its configuration (an explicit, different wish is then an error).
  static trn_result_t open(const std::string &root, const DeviceWish &wish,
                           std::unique_ptr<DeviceState> *out, std::string *why);
  ~DeviceState();
  // In a forked child: closes this process's descriptors of the device (inherited from the
  // parent, whose locks they share) and nothing else; the object is not used again.
  void abandon_after_fork();
  DeviceState(const DeviceState &) = delete;
  DeviceState &operator=(const DeviceState &) = delete;

  const StateHeader &header() const { return header_; }
  const std::string &path() const { return path_; }

  // Claims physical cores [first, first+count), all or none. Takes a process slot first if
  // this process has none yet. Never waits for another process (not even for the chunk lock).
  trn_result_t claim(const trn_hal_process_identity_t &identity, uint32_t first, uint32_t count,
                     uint32_t *busy_core, std::string *why);
  trn_result_t unclaim(uint32_t first, uint32_t count, std::string *why);
  // Whether this process holds every core of [first, first+count).
  bool holds_cores(uint32_t first, uint32_t count);
  // pid 0: free; pid -1: held by a process still registering.
  trn_result_t owner(uint32_t core, trn_hal_process_t *owner, std::string *why);
  trn_result_t processes(uint32_t *count, trn_hal_process_t *processes, std::string *why);

  // Device memory (device_memory.cpp). Offsets are byte offsets into the device's HBM, which
  // runs bank after bank.
  uint64_t bank_bytes() const;
  trn_result_t hbm_reserve(const trn_hal_process_identity_t &identity, uint32_t bank,
                           uint64_t bytes, uint64_t *offset, std::string *why);
  trn_result_t hbm_release(uint64_t offset, uint64_t bytes, std::string *why);
  trn_result_t hbm_map(uint64_t offset, uint64_t bytes, void **host, std::string *why);
  trn_result_t hbm_commit(uint64_t offset, uint64_t bytes, std::string *why);
  void account(uint32_t bank, uint32_t category, int64_t bytes, int64_t count);
  trn_result_t hbm_export(uint64_t offset, uint64_t bytes, uint32_t *record, uint64_t *id,
                          std::string *why);
  trn_result_t hbm_import(const trn_hal_process_identity_t &identity, uint32_t record, uint64_t id,
                          uint64_t *offset, uint64_t *bytes, std::string *why);
  trn_result_t hbm_unexport(uint32_t record, uint64_t id, std::string *why);
  // Shared semaphores (device_memory.cpp): cells in the state file, freed with their last holder.
  trn_result_t sem_create(const trn_hal_process_identity_t &identity, uint32_t *record,
                          uint64_t *id, SharedSemCell **cell, std::string *why);
  trn_result_t sem_import(const trn_hal_process_identity_t &identity, uint32_t record, uint64_t id,
                          SharedSemCell **cell, std::string *why);
  trn_result_t sem_release(uint32_t record, uint64_t id, std::string *why);
  void core_account(uint32_t core, const trn_hal_core_activity_t &delta);

  // Chunks of a bank held by live processes (exports included) and the largest free run.
  trn_result_t bank_usage(uint32_t bank, uint64_t *held_bytes, uint64_t *largest_free_bytes,
                          std::string *why);

 private:
  friend struct DeviceStateTestAccess;  // tests/support/chunk_lock_holder.cpp
  DeviceState(std::string path, int fd, StateFile *file, const StateHeader &header,
              const MemoryGeometry &geometry);
  // Whether both files still have their sizes (a mapping of a shrunken file faults when touched);
  // every entry point checks before it touches the mappings.
  trn_result_t check_files_locked(std::string *why);
  trn_result_t attach_locked(const trn_hal_process_identity_t &identity, std::string *why);
  // Live processes as seen now; must hold mu_.
  std::vector<trn_hal_process_t> live_processes_locked();
  // Bit per physical core that process slot `slot` holds.
  uint64_t core_mask_locked(uint32_t slot);
  bool slot_is_live_locked(uint32_t slot);
  bool core_is_held_by_other_locked(uint32_t core);
  trn_hal_process_t describe_slot_locked(uint32_t slot);
  trn_result_t owner_locked(uint32_t core, trn_hal_process_t *owner, std::string *why);

  // Holds the chunk lock (the OFD lock kLockChunks), waiting for it up to a deadline or not at
  // all; see device_memory.cpp. Taken under mu_ only: threads sharing fd_ share the OFD lock.
  class ChunkLock {
   public:
    enum class Wait { deadline, no };
    ChunkLock(DeviceState &state, std::string *why, Wait wait = Wait::deadline);
    ~ChunkLock();
    ChunkLock(const ChunkLock &) = delete;
    ChunkLock &operator=(const ChunkLock &) = delete;
    trn_result_t result() const { return result_; }

   private:
    DeviceState &state_;
    trn_result_t result_ = TRN_SUCCESS;
  };
  uint64_t live_slot_mask_locked();
  void reclaim_slots_locked(uint64_t slots);
  uint64_t dead_holders_locked();  // dead slots that still hold memory or exports
  void reclaim_slot_chunks_locked(uint32_t slot);
  void reclaim_dead_locked();
  void free_chunks_locked(uint32_t first, uint32_t count);
  // Frees each run of chunks whose owner `doomed` says is to go.
  template <typename Doomed>
  void free_chunks_where_locked(Doomed doomed);
  // Frees export record `index` and its chunks (the record's range if intact, else the chunks
  // the table says are the export's).
  void release_export_locked(uint32_t index);
  trn_result_t open_hbm_locked(std::string *why);
  void fill_memory_locked(uint32_t slot, trn_hal_process_t *process);

  std::string path_;
  std::string hbm_path_;
  int fd_;
  int hbm_fd_ = -1;
  char *hbm_base_ = nullptr;  // the whole HBM file, mapped on first use
  StateFile *file_;
  const StateHeader header_;       // validated when opened; never re-read
  const MemoryGeometry geometry_;  // likewise
  std::unique_ptr<MappingGuard> state_guard_;
  std::unique_ptr<MappingGuard> hbm_guard_;
  std::mutex mu_;  // serialises this process's writes and lock probes on the file
  int32_t slot_ = -1;
  // The slot was taken while another process held the chunk lock: what its previous (dead)
  // process held is returned the next time this process takes the chunk lock.
  bool reclaim_pending_ = false;
  uint64_t claimed_mask_ = 0;
};

// "trn2 (8 cores, 96 GiB)" for error messages.
std::string describe_device_config(trn_generation_t generation, uint32_t cores, uint64_t hbm_bytes);

}  // namespace trn::sim
