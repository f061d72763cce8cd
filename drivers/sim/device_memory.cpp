// A simulated device's HBM: a sparse file, device<N>.hbm, mapped by every process that uses
// memory, and a chunk table in the state file saying which process (or export) holds each
// 2 MiB chunk. Reserving only marks chunks; committing backs them with storage (fallocate), so a
// full backing store is an allocation error and never a SIGBUS; releasing punches a hole, so the
// next holder reads zeros and no data passes between processes.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/parse.hpp"
#include "sim/device_state.hpp"
#include "sim/ofd_lock.hpp"

namespace trn::sim {

namespace {

// Changes under the chunk mutex take microseconds; a holder that keeps it ten seconds is stopped.
constexpr time_t kChunkLockTimeoutSeconds = 10;

uint64_t load(const uint64_t &word) {
  return std::atomic_ref<uint64_t>(const_cast<uint64_t &>(word)).load(std::memory_order_relaxed);
}
void store(uint64_t &word, uint64_t value) {
  std::atomic_ref<uint64_t>(word).store(value, std::memory_order_relaxed);
}

uint16_t slot_owner(uint32_t slot) {
  return static_cast<uint16_t>(slot + 1);
}

}  // namespace

DeviceState::ChunkLock::ChunkLock(DeviceState &state, std::string *why) : state_(state) {
  struct timespec deadline {};
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += kChunkLockTimeoutSeconds;
  const int rc = pthread_mutex_timedlock(&state_.file_->memory.mutex, &deadline);
  if (rc == EOWNERDEAD) {
    // Its holder died mid-change. Changes are ordered so that the worst left behind is chunks
    // owned by a dead slot: mark the mutex usable and return those.
    pthread_mutex_consistent(&state_.file_->memory.mutex);
    state_.reclaim_dead_locked();
  } else if (rc == ETIMEDOUT) {
    *why = "timed out after 10 s waiting for the memory lock of " + state_.path_ +
           ": another process holds it (is one stopped in a debugger?)";
    result_ = TRN_TIMEOUT;
  } else if (rc != 0) {
    *why = "cannot take the memory lock of " + state_.path_ + ": " + std::strerror(rc) +
           "; if it stays broken, stop the processes using the device and remove " + state_.path_;
    result_ = TRN_ERROR_STATE_CORRUPT;
  }
}

DeviceState::ChunkLock::~ChunkLock() {
  if (result_ == TRN_SUCCESS) pthread_mutex_unlock(&state_.file_->memory.mutex);
}

uint64_t DeviceState::bank_bytes() const {
  return uint64_t{file_->memory.bank_chunks} * kChunkBytes;
}

uint64_t DeviceState::live_slot_mask_locked() {
  uint64_t mask = 0;
  for (uint32_t slot = 0; slot < kMaxProcessSlots; ++slot)
    if (slot_is_live_locked(slot)) mask |= uint64_t{1} << slot;
  return mask;
}

void DeviceState::free_chunks_locked(uint32_t first, uint32_t count) {
  // Punch first, then mark free: dying in between leaves chunks a later reclaim frees again.
  if (hbm_fd_ >= 0 || open_hbm_locked(nullptr) == TRN_SUCCESS)
    fallocate(hbm_fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
              static_cast<off_t>(uint64_t{first} * kChunkBytes),
              static_cast<off_t>(uint64_t{count} * kChunkBytes));
  std::fill_n(&file_->memory.chunk_owner[first], count, kChunkFree);
}

void DeviceState::reclaim_slots_locked(uint64_t slots) {
  if (slots == 0) return;
  MemoryControl &memory = file_->memory;
  auto reclaimed = [&](uint16_t owner) {
    return owner != kChunkFree && owner < kExportOwnerBase && (slots >> (owner - 1) & 1u);
  };
  // One pass over the chunk table, freeing each run of reclaimed chunks at once.
  for (uint32_t chunk = 0; chunk < memory.chunk_count;) {
    if (!reclaimed(memory.chunk_owner[chunk])) {
      ++chunk;
      continue;
    }
    uint32_t end = chunk;
    while (end < memory.chunk_count && reclaimed(memory.chunk_owner[end])) ++end;
    free_chunks_locked(chunk, end - chunk);
    chunk = end;
  }
  for (ExportRecord &record : memory.exports) {
    if (record.id == 0 || !(record.holder_mask & slots)) continue;
    record.holder_mask &= ~slots;
    if (record.holder_mask == 0) {
      free_chunks_locked(record.first_chunk, record.chunk_count);
      record = ExportRecord{};
    }
  }
  for (ExportRecord &record : memory.sem_records) {
    if (record.id == 0 || !(record.holder_mask & slots)) continue;
    record.holder_mask &= ~slots;
    if (record.holder_mask == 0) record = ExportRecord{};
  }
  for (uint32_t slot = 0; slot < kMaxProcessSlots; ++slot) {
    if (!(slots >> slot & 1u)) continue;
    SlotMemory &counters = file_->slot_memory[slot];
    for (auto &activity : counters.activity) activity = trn_hal_core_activity_t{};
    for (auto &word : counters.reserved) store(word, 0);
    for (auto *table : {&counters.allocated, &counters.peak, &counters.count})
      for (auto &row : *table)
        for (auto &word : row) store(word, 0);
  }
}

void DeviceState::reclaim_slot_chunks_locked(uint32_t slot) {
  reclaim_slots_locked(uint64_t{1} << slot);
}

uint64_t DeviceState::dead_holders_locked() {
  const MemoryControl &memory = file_->memory;
  uint64_t holders = 0;
  for (uint32_t slot = 0; slot < kMaxProcessSlots; ++slot)
    for (uint64_t bytes : file_->slot_memory[slot].reserved)
      if (load(bytes) != 0) holders |= uint64_t{1} << slot;
  for (const ExportRecord &record : memory.exports) holders |= record.holder_mask;
  for (const ExportRecord &record : memory.sem_records) holders |= record.holder_mask;
  uint64_t dead = 0;
  for (uint32_t slot = 0; slot < kMaxProcessSlots; ++slot)
    if ((holders >> slot & 1u) && !slot_is_live_locked(slot)) dead |= uint64_t{1} << slot;
  return dead;
}

void DeviceState::reclaim_dead_locked() {
  reclaim_slots_locked(~live_slot_mask_locked());
}

trn_result_t DeviceState::open_hbm_locked(std::string *why) {
  if (hbm_base_) return TRN_SUCCESS;
  const std::string hbm_path = path_.substr(0, path_.size() - 6) + ".hbm";
  if (hbm_fd_ < 0) hbm_fd_ = ::open(hbm_path.c_str(), O_RDWR | O_CLOEXEC);
  if (hbm_fd_ < 0) {
    if (why)
      *why = "cannot open the device memory file " + hbm_path + ": " + std::strerror(errno) +
             "; stop the processes using the device and remove " + path_ + " to re-create both";
    return errno == EACCES ? TRN_ERROR_PERMISSION_DENIED : TRN_ERROR_STATE_CORRUPT;
  }
  struct stat st {};
  if (fstat(hbm_fd_, &st) != 0 || static_cast<uint64_t>(st.st_size) != header_.hbm_bytes) {
    if (why)
      *why = hbm_path + " is not the size of the device memory (" +
             common::format_bytes(header_.hbm_bytes) + "); stop the processes using the device " +
             "and remove " + path_ + " to re-create both";
    return TRN_ERROR_STATE_CORRUPT;
  }
  void *map = mmap(nullptr, header_.hbm_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
                   hbm_fd_, 0);
  if (map == MAP_FAILED) {
    if (why) *why = "cannot map " + hbm_path + ": " + std::strerror(errno);
    return TRN_ERROR_DRIVER;
  }
  hbm_base_ = static_cast<char *>(map);
  return TRN_SUCCESS;
}

trn_result_t DeviceState::hbm_reserve(const trn_hal_process_identity_t &identity, uint32_t bank,
                                      uint64_t bytes, uint64_t *offset, std::string *why) {
  std::lock_guard lock(mu_);
  if (trn_result_t r = attach_locked(identity, why); r != TRN_SUCCESS) return r;
  ChunkLock chunks(*this, why);
  if (chunks.result() != TRN_SUCCESS) return chunks.result();
  if (trn_result_t r = open_hbm_locked(why); r != TRN_SUCCESS) return r;
  MemoryControl &memory = file_->memory;
  const uint32_t want = static_cast<uint32_t>((bytes + kChunkBytes - 1) / kChunkBytes);
  const uint32_t first = bank * memory.bank_chunks;
  const uint32_t end = first + memory.bank_chunks;
  auto find_run = [&]() -> int64_t {
    for (uint32_t chunk = first; chunk + want <= end;) {
      uint32_t run = 0;
      while (run < want && memory.chunk_owner[chunk + run] == kChunkFree) ++run;
      if (run == want) return chunk;
      chunk += run + 1;
    }
    return -1;
  };
  // Chunks of dead processes are free space: return them before placing, so a range is never
  // placed around them. Only slots that hold something are probed; a slot that died before it
  // counted its chunks is caught by the full reclaim when no range is found.
  reclaim_slots_locked(dead_holders_locked());
  int64_t found = find_run();
  if (found < 0) {
    reclaim_dead_locked();
    found = find_run();
  }
  if (found < 0) {
    *why = "bank " + std::to_string(bank) + " has no free range of " +
           common::format_bytes(uint64_t{want} * kChunkBytes);
    return TRN_ERROR_OUT_OF_DEVICE_MEMORY;
  }
  const uint32_t chunk = static_cast<uint32_t>(found);
  std::fill_n(&memory.chunk_owner[chunk], want, slot_owner(static_cast<uint32_t>(slot_)));
  uint64_t &reserved = file_->slot_memory[slot_].reserved[bank];
  store(reserved, load(reserved) + uint64_t{want} * kChunkBytes);
  *offset = uint64_t{chunk} * kChunkBytes;
  return TRN_SUCCESS;
}

trn_result_t DeviceState::hbm_release(uint64_t offset, uint64_t bytes, std::string *why) {
  std::lock_guard lock(mu_);
  if (slot_ < 0 || offset % kChunkBytes != 0) {
    *why = "this process holds no device memory at offset " + std::to_string(offset);
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  ChunkLock chunks(*this, why);
  if (chunks.result() != TRN_SUCCESS) return chunks.result();
  MemoryControl &memory = file_->memory;
  const uint32_t first = static_cast<uint32_t>(offset / kChunkBytes);
  const uint32_t count = static_cast<uint32_t>((bytes + kChunkBytes - 1) / kChunkBytes);
  if (first + count > memory.chunk_count) {
    *why = "the range is outside the device memory";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  for (uint32_t c = first; c < first + count; ++c) {
    if (memory.chunk_owner[c] != slot_owner(static_cast<uint32_t>(slot_))) {
      *why = "chunk " + std::to_string(c) + " is not held by this process";
      return TRN_ERROR_INVALID_ARGUMENT;
    }
  }
  free_chunks_locked(first, count);
  const uint32_t bank = first / memory.bank_chunks;
  uint64_t &reserved = file_->slot_memory[slot_].reserved[bank];
  store(reserved, load(reserved) - uint64_t{count} * kChunkBytes);
  return TRN_SUCCESS;
}

trn_result_t DeviceState::hbm_map(uint64_t offset, uint64_t bytes, void **host, std::string *why) {
  std::lock_guard lock(mu_);
  if (offset > header_.hbm_bytes || bytes > header_.hbm_bytes - offset) {
    *why = "the range is outside the device memory";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  if (trn_result_t r = open_hbm_locked(why); r != TRN_SUCCESS) return r;
  *host = hbm_base_ + offset;
  return TRN_SUCCESS;
}

trn_result_t DeviceState::hbm_commit(uint64_t offset, uint64_t bytes, std::string *why) {
  {
    std::lock_guard lock(mu_);
    if (trn_result_t r = open_hbm_locked(why); r != TRN_SUCCESS) return r;
  }
  if (bytes == 0) return TRN_SUCCESS;
  if (fallocate(hbm_fd_, 0, static_cast<off_t>(offset), static_cast<off_t>(bytes)) == 0)
    return TRN_SUCCESS;
  int error = errno;
  if (error == ENOSPC) {
    // Storage written by processes that died is still allocated until their chunks are
    // reclaimed: return it and try once more.
    {
      std::lock_guard lock(mu_);
      ChunkLock chunks(*this, why);
      if (chunks.result() != TRN_SUCCESS) return chunks.result();
      reclaim_dead_locked();
    }
    if (fallocate(hbm_fd_, 0, static_cast<off_t>(offset), static_cast<off_t>(bytes)) == 0)
      return TRN_SUCCESS;
    error = errno;
  }
  if (error == ENOSPC) {
    struct statvfs fs {};
    const std::string root = path_.substr(0, path_.rfind('/'));
    std::string free_text;
    if (statvfs(root.c_str(), &fs) == 0)
      free_text = " (" + common::format_bytes(uint64_t{fs.f_bavail} * fs.f_frsize) + " free of " +
                  common::format_bytes(uint64_t{fs.f_blocks} * fs.f_frsize) + ")";
    *why = "the backing store of the simulated device memory, " + root + free_text +
           ", cannot hold " + common::format_bytes(bytes) +
           " more: free device memory, make the filesystem larger, or set TRN_SIM_ROOT on a "
           "larger tmpfs";
    return TRN_ERROR_OUT_OF_DEVICE_MEMORY;
  }
  *why =
      "cannot back device memory with storage (fallocate): " + std::string(std::strerror(error)) +
      (error == EOPNOTSUPP ? "; TRN_SIM_ROOT must be on a filesystem that supports fallocate, "
                             "such as tmpfs (/dev/shm)"
                           : "");
  return TRN_ERROR_DRIVER;
}

void DeviceState::account(uint32_t bank, uint32_t category, int64_t bytes, int64_t count) {
  if (slot_ < 0 || bank >= kMaxHbmBanks || category >= kCategories) return;
  SlotMemory &counters = file_->slot_memory[slot_];
  uint64_t &allocated = counters.allocated[bank][category];
  const uint64_t now = load(allocated) + static_cast<uint64_t>(bytes);
  store(allocated, now);
  uint64_t &live = counters.count[bank][category];
  store(live, load(live) + static_cast<uint64_t>(count));
  uint64_t &peak = counters.peak[bank][category];
  if (now > load(peak)) store(peak, now);
}

trn_result_t DeviceState::hbm_export(uint64_t offset, uint64_t bytes, uint32_t *record_index,
                                     uint64_t *id, std::string *why) {
  std::lock_guard lock(mu_);
  ChunkLock chunks(*this, why);
  if (chunks.result() != TRN_SUCCESS) return chunks.result();
  MemoryControl &memory = file_->memory;
  const uint32_t first = static_cast<uint32_t>(offset / kChunkBytes);
  const uint32_t count = static_cast<uint32_t>((bytes + kChunkBytes - 1) / kChunkBytes);
  if (slot_ < 0 || offset % kChunkBytes != 0 || first + count > memory.chunk_count) {
    *why = "the range is not device memory of this process";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  for (uint32_t c = first; c < first + count; ++c) {
    if (memory.chunk_owner[c] != slot_owner(static_cast<uint32_t>(slot_))) {
      *why = "chunk " + std::to_string(c) + " is not held by this process";
      return TRN_ERROR_INVALID_ARGUMENT;
    }
  }
  for (uint32_t i = 0; i < kMaxExports; ++i) {
    ExportRecord &record = memory.exports[i];
    if (record.id != 0) continue;
    record.id = memory.next_export_id++;
    record.holder_mask = uint64_t{1} << slot_;
    record.first_chunk = first;
    record.chunk_count = count;
    // The exporter keeps counting the range as reserved; every importer counts it too.
    std::fill_n(&memory.chunk_owner[first], count, static_cast<uint16_t>(kExportOwnerBase + i));
    *record_index = i;
    *id = record.id;
    return TRN_SUCCESS;
  }
  *why = "the device already has " + std::to_string(kMaxExports) +
         " exported allocations: free some first";
  return TRN_ERROR_OUT_OF_DEVICE_MEMORY;
}

trn_result_t DeviceState::hbm_import(const trn_hal_process_identity_t &identity,
                                     uint32_t record_index, uint64_t id, uint64_t *offset,
                                     uint64_t *bytes, std::string *why) {
  std::lock_guard lock(mu_);
  if (trn_result_t r = attach_locked(identity, why); r != TRN_SUCCESS) return r;
  ChunkLock chunks(*this, why);
  if (chunks.result() != TRN_SUCCESS) return chunks.result();
  if (record_index >= kMaxExports) {
    *why = "the handle names no export of this device";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  ExportRecord &record = file_->memory.exports[record_index];
  const uint64_t live = live_slot_mask_locked();
  if (record.id != id || (record.holder_mask & live) == 0) {
    *why = "the exported memory is gone: every process that held it freed it or exited";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  const uint64_t bit = uint64_t{1} << slot_;
  if (!(record.holder_mask & bit)) {
    record.holder_mask |= bit;
    uint64_t &reserved =
        file_->slot_memory[slot_].reserved[record.first_chunk / file_->memory.bank_chunks];
    store(reserved, load(reserved) + uint64_t{record.chunk_count} * kChunkBytes);
  }
  *offset = uint64_t{record.first_chunk} * kChunkBytes;
  *bytes = uint64_t{record.chunk_count} * kChunkBytes;
  return TRN_SUCCESS;
}

trn_result_t DeviceState::hbm_unexport(uint32_t record_index, uint64_t id, std::string *why) {
  std::lock_guard lock(mu_);
  ChunkLock chunks(*this, why);
  if (chunks.result() != TRN_SUCCESS) return chunks.result();
  if (record_index >= kMaxExports || slot_ < 0) {
    *why = "this process holds no such export";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  ExportRecord &record = file_->memory.exports[record_index];
  const uint64_t bit = uint64_t{1} << slot_;
  if (record.id != id || !(record.holder_mask & bit)) {
    *why = "this process holds no such export";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  uint64_t &reserved =
      file_->slot_memory[slot_].reserved[record.first_chunk / file_->memory.bank_chunks];
  store(reserved, load(reserved) - uint64_t{record.chunk_count} * kChunkBytes);
  record.holder_mask &= ~bit & live_slot_mask_locked();
  if (record.holder_mask == 0) {
    free_chunks_locked(record.first_chunk, record.chunk_count);
    record = ExportRecord{};
  }
  return TRN_SUCCESS;
}

trn_result_t DeviceState::bank_usage(uint32_t bank, uint64_t *held_bytes,
                                     uint64_t *largest_free_bytes, std::string *why) {
  (void)why;
  std::lock_guard lock(mu_);
  // Read without the chunk mutex: tools must never wait on (or disturb) the processes they
  // watch. Owners are single 16-bit words, so a racing change shows as either state.
  const MemoryControl &memory = file_->memory;
  const uint64_t live = live_slot_mask_locked();
  uint64_t held = 0, largest = 0, run = 0;
  const uint32_t first = bank * memory.bank_chunks;
  for (uint32_t c = first; c < first + memory.bank_chunks; ++c) {
    const uint16_t owner = std::atomic_ref<uint16_t>(const_cast<uint16_t &>(memory.chunk_owner[c]))
                               .load(std::memory_order_relaxed);
    bool busy = false;
    if (owner >= kExportOwnerBase) {
      const ExportRecord &record = memory.exports[owner - kExportOwnerBase];
      busy = (std::atomic_ref<uint64_t>(const_cast<uint64_t &>(record.holder_mask))
                  .load(std::memory_order_relaxed) &
              live) != 0;
    } else if (owner != kChunkFree) {
      busy = live >> (owner - 1) & 1u;
    }
    if (busy) {
      held += kChunkBytes;
      run = 0;
    } else {
      run += kChunkBytes;
      largest = std::max(largest, run);
    }
  }
  *held_bytes = held;
  *largest_free_bytes = largest;
  return TRN_SUCCESS;
}

trn_result_t DeviceState::sem_create(const trn_hal_process_identity_t &identity,
                                     uint32_t *record_index, uint64_t *id,
                                     trn_hal_sem_cell_t **cell, std::string *why) {
  std::lock_guard lock(mu_);
  if (trn_result_t r = attach_locked(identity, why); r != TRN_SUCCESS) return r;
  ChunkLock chunks(*this, why);
  if (chunks.result() != TRN_SUCCESS) return chunks.result();
  MemoryControl &memory = file_->memory;
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (uint32_t i = 0; i < kMaxSharedSems; ++i) {
      ExportRecord &record = memory.sem_records[i];
      if (record.id != 0) continue;
      record.id = memory.next_export_id++;
      record.holder_mask = uint64_t{1} << slot_;
      // A fresh cell: nobody can be waiting on a free record (its holders all let go).
      trn_hal_sem_cell_t &c = memory.sem_cells[i];
      std::atomic_ref<uint64_t>(c.value).store(0, std::memory_order_relaxed);
      std::atomic_ref<uint32_t>(c.failed).store(0, std::memory_order_relaxed);
      *record_index = i;
      *id = record.id;
      *cell = &c;
      return TRN_SUCCESS;
    }
    reclaim_dead_locked();
  }
  *why = "the device already has " + std::to_string(kMaxSharedSems) +
         " exportable semaphores: destroy some first";
  return TRN_ERROR_OUT_OF_DEVICE_MEMORY;
}

trn_result_t DeviceState::sem_import(const trn_hal_process_identity_t &identity,
                                     uint32_t record_index, uint64_t id, trn_hal_sem_cell_t **cell,
                                     std::string *why) {
  std::lock_guard lock(mu_);
  if (trn_result_t r = attach_locked(identity, why); r != TRN_SUCCESS) return r;
  ChunkLock chunks(*this, why);
  if (chunks.result() != TRN_SUCCESS) return chunks.result();
  if (record_index >= kMaxSharedSems) {
    *why = "the handle names no semaphore of this device";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  ExportRecord &record = file_->memory.sem_records[record_index];
  if (record.id != id || (record.holder_mask & live_slot_mask_locked()) == 0) {
    *why = "the semaphore is gone: every process that held it destroyed it or exited";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  record.holder_mask |= uint64_t{1} << slot_;
  *cell = &file_->memory.sem_cells[record_index];
  return TRN_SUCCESS;
}

trn_result_t DeviceState::sem_release(uint32_t record_index, uint64_t id, std::string *why) {
  std::lock_guard lock(mu_);
  ChunkLock chunks(*this, why);
  if (chunks.result() != TRN_SUCCESS) return chunks.result();
  if (record_index >= kMaxSharedSems || slot_ < 0 ||
      file_->memory.sem_records[record_index].id != id) {
    *why = "this process holds no such semaphore";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  ExportRecord &record = file_->memory.sem_records[record_index];
  record.holder_mask &= ~(uint64_t{1} << slot_) & live_slot_mask_locked();
  if (record.holder_mask == 0) record = ExportRecord{};
  return TRN_SUCCESS;
}

// The activity record is a run of 64-bit counters (hal.h); copy and add them word by word.
static_assert(sizeof(trn_hal_core_activity_t) % sizeof(uint64_t) == 0);
constexpr size_t kActivityWords = sizeof(trn_hal_core_activity_t) / sizeof(uint64_t);

void DeviceState::core_account(uint32_t core, const trn_hal_core_activity_t &delta) {
  if (slot_ < 0 || core >= kMaxPhysicalCores) return;
  auto *a = reinterpret_cast<uint64_t *>(&file_->slot_memory[slot_].activity[core]);
  const auto *d = reinterpret_cast<const uint64_t *>(&delta);
  for (size_t i = 0; i < kActivityWords; ++i) store(a[i], load(a[i]) + d[i]);
}

void DeviceState::fill_memory_locked(uint32_t slot, trn_hal_process_t *process) {
  const SlotMemory &counters = file_->slot_memory[slot];
  for (uint32_t core = 0; core < kMaxPhysicalCores && core < TRN_MAX_CORES_PER_DEVICE; ++core) {
    const auto *a = reinterpret_cast<const uint64_t *>(&counters.activity[core]);
    auto *out = reinterpret_cast<uint64_t *>(&process->core_activity[core]);
    for (size_t i = 0; i < kActivityWords; ++i) out[i] = load(a[i]);
  }
  for (uint32_t bank = 0; bank < kMaxHbmBanks; ++bank) {
    process->hbm_reserved_bytes[bank] = load(counters.reserved[bank]);
    for (uint32_t category = 0; category < kCategories; ++category) {
      process->hbm_allocated_bytes[bank][category] = load(counters.allocated[bank][category]);
      process->hbm_peak_bytes[bank][category] = load(counters.peak[bank][category]);
      process->hbm_allocation_count[bank][category] = load(counters.count[bank][category]);
    }
  }
}

}  // namespace trn::sim
