// A simulated device's HBM: a sparse file, device<N>.hbm, mapped by every process that uses
// memory, and a chunk table in the state file saying which process (or export) holds each
// 2 MiB chunk. Reserving only marks chunks; committing backs them with storage (fallocate), so a
// full backing store is an allocation error and never a SIGBUS; releasing punches a hole, so the
// next holder reads zeros and no data passes between processes. Every owner, range and index
// read from the state file is checked before use (state_check.hpp): the file may hold anything.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.hpp"
#include "common/parse.hpp"
#include "sim/device_state.hpp"
#include "sim/ofd_lock.hpp"

namespace trn::sim {

namespace {

// Changes under the chunk lock take microseconds; a holder that keeps it ten seconds is stopped.
constexpr uint64_t kChunkLockTimeoutNs = 10'000'000'000ull;

uint64_t load(const uint64_t &word) {
  return std::atomic_ref<uint64_t>(const_cast<uint64_t &>(word)).load(std::memory_order_relaxed);
}
void store(uint64_t &word, uint64_t value) {
  std::atomic_ref<uint64_t>(word).store(value, std::memory_order_relaxed);
}

uint16_t slot_owner(uint32_t slot) {
  return static_cast<uint16_t>(slot + 1);
}

uint16_t load_owner(const uint16_t &owner) {
  return std::atomic_ref<uint16_t>(const_cast<uint16_t &>(owner)).load(std::memory_order_relaxed);
}

// Chunks covering `bytes`, or 0 when that is more than `limit` chunks (no overflow either way).
uint32_t chunks_for(uint64_t bytes, uint32_t limit) {
  const uint64_t chunks = bytes / kChunkBytes + (bytes % kChunkBytes != 0);
  return chunks <= limit ? static_cast<uint32_t>(chunks) : 0;
}

// A new export or semaphore id; 0 means "unused record", so it is never handed out.
uint64_t next_id(MemoryControl &memory) {
  uint64_t id = memory.next_export_id++;
  if (id == 0) id = memory.next_export_id++;
  return id;
}

}  // namespace

DeviceState::ChunkLock::ChunkLock(DeviceState &state, std::string *why, Wait wait) : state_(state) {
  const int rc = wait == Wait::deadline
                     ? ofd_lock_with_deadline(state_.fd_, kLockChunks, LockKind::exclusive,
                                              kChunkLockTimeoutNs)
                     : ofd_try_lock(state_.fd_, kLockChunks, LockKind::exclusive);
  if (rc == ETIMEDOUT || rc == EAGAIN) {
    *why = rc == ETIMEDOUT ? "timed out after 10 s waiting for the memory lock of " + state_.path_ +
                                 ": another process holds it (is one stopped in a debugger?)"
                           : "the memory lock of " + state_.path_ + " is held by another process";
    result_ = TRN_TIMEOUT;
    return;
  }
  if (rc != 0) {
    *why = "cannot take the memory lock of " + state_.path_ + ": " + std::strerror(rc);
    result_ = TRN_ERROR_DRIVER;
    return;
  }
  // Found set: the previous holder died mid-change. Changes are ordered so that the worst left
  // behind is chunks owned by a dead slot: return those. (A scribbled value costs one reclaim.)
  if (std::atomic_ref<uint32_t>(state_.file_->memory.changing)
          .exchange(1, std::memory_order_acq_rel))
    state_.reclaim_dead_locked();
  if (state_.reclaim_pending_ && state_.slot_ >= 0) {
    state_.reclaim_pending_ = false;
    state_.reclaim_slot_chunks_locked(static_cast<uint32_t>(state_.slot_));
  }
}

DeviceState::ChunkLock::~ChunkLock() {
  if (result_ != TRN_SUCCESS) return;
  std::atomic_ref<uint32_t>(state_.file_->memory.changing).store(0, std::memory_order_release);
  ofd_unlock(state_.fd_, kLockChunks);
}

uint64_t DeviceState::bank_bytes() const {
  return uint64_t{geometry_.bank_chunks} * kChunkBytes;
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

template <typename Doomed>
void DeviceState::free_chunks_where_locked(Doomed doomed) {
  const uint16_t *owners = file_->memory.chunk_owner;
  for (uint32_t chunk = 0; chunk < geometry_.chunk_count;) {
    if (!doomed(load_owner(owners[chunk]))) {
      ++chunk;
      continue;
    }
    uint32_t end = chunk + 1;
    while (end < geometry_.chunk_count && doomed(load_owner(owners[end]))) ++end;
    free_chunks_locked(chunk, end - chunk);
    chunk = end;
  }
}

void DeviceState::release_export_locked(uint32_t index) {
  ExportRecord &record = file_->memory.exports[index];
  ChunkRange range;
  std::string why;
  if (read_export_range(path_, geometry_, record, index, &range, &why)) {
    free_chunks_locked(range.first, range.count);
  } else {
    // A damaged record: the chunk table still says which chunks are the export's.
    common::logger("sim")->warn("{}", why);
    const uint16_t owner = static_cast<uint16_t>(kExportOwnerBase + index);
    free_chunks_where_locked([owner](uint16_t o) { return o == owner; });
  }
  record = ExportRecord{};
}

void DeviceState::reclaim_slots_locked(uint64_t slots) {
  if (slots == 0) return;
  MemoryControl &memory = file_->memory;
  // One pass over the chunk table, freeing each run of reclaimed chunks at once.
  free_chunks_where_locked(
      [slots](uint16_t owner) { return is_slot_owner(owner) && (slots >> (owner - 1) & 1u); });
  for (uint32_t i = 0; i < kMaxExports; ++i) {
    ExportRecord &record = memory.exports[i];
    if (record.id == 0 || !(record.holder_mask & slots)) continue;
    record.holder_mask &= ~slots;
    if (record.holder_mask == 0) release_export_locked(i);
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
  // Owners no writer stores (damage), and exports without a record: nobody holds those chunks.
  const ExportRecord *exports = file_->memory.exports;
  free_chunks_where_locked([exports](uint16_t owner) {
    if (owner == kChunkFree || is_slot_owner(owner)) return false;
    return !is_export_owner(owner) || exports[owner - kExportOwnerBase].id == 0;
  });
}

trn_result_t DeviceState::open_hbm_locked(std::string *why) {
  if (hbm_base_) return TRN_SUCCESS;
  std::string ignored;
  if (!why) why = &ignored;
  const std::string advice = stale_state_advice(path_);
  if (hbm_fd_ < 0) {
    bool missing = false;
    trn_result_t result = TRN_SUCCESS;
    hbm_fd_ = open_private_file(hbm_path_, O_RDWR, advice, &missing, &result, why);
    if (hbm_fd_ < 0) return result;
  }
  if (trn_result_t r = check_file_size(hbm_fd_, hbm_path_, header_.hbm_bytes, advice, why);
      r != TRN_SUCCESS)
    return r;
  void *map = mmap(nullptr, header_.hbm_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
                   hbm_fd_, 0);
  if (map == MAP_FAILED) {
    *why = "cannot map " + hbm_path_ + ": " + std::strerror(errno);
    return TRN_ERROR_DRIVER;
  }
  hbm_base_ = static_cast<char *>(map);
  hbm_guard_ =
      std::make_unique<MappingGuard>(hbm_base_, header_.hbm_bytes, hbm_fd_, hbm_path_, advice);
  return TRN_SUCCESS;
}

trn_result_t DeviceState::hbm_reserve(const trn_hal_process_identity_t &identity, uint32_t bank,
                                      uint64_t bytes, uint64_t *offset, std::string *why) {
  std::lock_guard lock(mu_);
  if (trn_result_t r = check_files_locked(why); r != TRN_SUCCESS) return r;
  if (bank >= geometry_.banks) {
    *why = "device " + std::to_string(header_.device_index) + " has no HBM bank " +
           std::to_string(bank);
    return TRN_ERROR_OUT_OF_RANGE;
  }
  const uint32_t want = chunks_for(bytes, geometry_.bank_chunks);
  if (want == 0) {
    *why = "bank " + std::to_string(bank) + " holds " + common::format_bytes(bank_bytes()) +
           ", less than the " + common::format_bytes(bytes) + " asked for";
    return TRN_ERROR_OUT_OF_DEVICE_MEMORY;
  }
  if (trn_result_t r = attach_locked(identity, why); r != TRN_SUCCESS) return r;
  ChunkLock chunks(*this, why);
  if (chunks.result() != TRN_SUCCESS) return chunks.result();
  if (trn_result_t r = open_hbm_locked(why); r != TRN_SUCCESS) return r;
  MemoryControl &memory = file_->memory;
  const uint32_t first = bank * geometry_.bank_chunks;
  const uint32_t end = first + geometry_.bank_chunks;
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
  if (trn_result_t r = check_files_locked(why); r != TRN_SUCCESS) return r;
  if (slot_ < 0 || offset % kChunkBytes != 0) {
    *why = "this process holds no device memory at offset " + std::to_string(offset);
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  ChunkLock chunks(*this, why);
  if (chunks.result() != TRN_SUCCESS) return chunks.result();
  MemoryControl &memory = file_->memory;
  const uint64_t first = offset / kChunkBytes;
  const uint32_t count = chunks_for(bytes, geometry_.chunk_count);
  if (first >= geometry_.chunk_count || count == 0 || count > geometry_.chunk_count - first) {
    *why = "the range is outside the device memory";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  for (uint64_t c = first; c < first + count; ++c) {
    if (memory.chunk_owner[c] != slot_owner(static_cast<uint32_t>(slot_))) {
      *why = "chunk " + std::to_string(c) + " is not held by this process";
      return TRN_ERROR_INVALID_ARGUMENT;
    }
  }
  free_chunks_locked(static_cast<uint32_t>(first), count);
  const uint64_t bank = first / geometry_.bank_chunks;
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
  if (trn_result_t r = check_files_locked(why); r != TRN_SUCCESS) return r;
  *host = hbm_base_ + offset;
  return TRN_SUCCESS;
}

trn_result_t DeviceState::hbm_commit(uint64_t offset, uint64_t bytes, std::string *why) {
  {
    std::lock_guard lock(mu_);
    if (trn_result_t r = open_hbm_locked(why); r != TRN_SUCCESS) return r;
    // fallocate past the end of a shrunken file would grow it back, holes and all.
    if (trn_result_t r = check_files_locked(why); r != TRN_SUCCESS) return r;
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
  // Pools of this process charge on their own threads, several to one bank: atomic updates.
  const uint64_t now = std::atomic_ref<uint64_t>(counters.allocated[bank][category])
                           .fetch_add(static_cast<uint64_t>(bytes), std::memory_order_relaxed) +
                       static_cast<uint64_t>(bytes);
  std::atomic_ref<uint64_t>(counters.count[bank][category])
      .fetch_add(static_cast<uint64_t>(count), std::memory_order_relaxed);
  std::atomic_ref<uint64_t> peak(counters.peak[bank][category]);
  for (uint64_t seen = peak.load(std::memory_order_relaxed);
       now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed);) {
  }
}

trn_result_t DeviceState::hbm_export(uint64_t offset, uint64_t bytes, uint32_t *record_index,
                                     uint64_t *id, std::string *why) {
  std::lock_guard lock(mu_);
  if (trn_result_t r = check_files_locked(why); r != TRN_SUCCESS) return r;
  ChunkLock chunks(*this, why);
  if (chunks.result() != TRN_SUCCESS) return chunks.result();
  MemoryControl &memory = file_->memory;
  const uint64_t first64 = offset / kChunkBytes;
  const uint32_t count = chunks_for(bytes, geometry_.bank_chunks);
  if (slot_ < 0 || offset % kChunkBytes != 0 || first64 >= geometry_.chunk_count || count == 0 ||
      count > geometry_.chunk_count - first64) {
    *why = "the range is not device memory of this process";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  const uint32_t first = static_cast<uint32_t>(first64);
  for (uint32_t c = first; c < first + count; ++c) {
    if (memory.chunk_owner[c] != slot_owner(static_cast<uint32_t>(slot_))) {
      *why = "chunk " + std::to_string(c) + " is not held by this process";
      return TRN_ERROR_INVALID_ARGUMENT;
    }
  }
  for (uint32_t i = 0; i < kMaxExports; ++i) {
    ExportRecord &record = memory.exports[i];
    if (record.id != 0) continue;
    record.id = next_id(memory);
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
  if (trn_result_t r = check_files_locked(why); r != TRN_SUCCESS) return r;
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
  ChunkRange range;
  if (!read_export_range(path_, geometry_, record, record_index, &range, why))
    return TRN_ERROR_STATE_CORRUPT;
  const uint64_t bit = uint64_t{1} << slot_;
  if (!(record.holder_mask & bit)) {
    record.holder_mask |= bit;
    uint64_t &reserved = file_->slot_memory[slot_].reserved[range.first / geometry_.bank_chunks];
    store(reserved, load(reserved) + uint64_t{range.count} * kChunkBytes);
  }
  *offset = uint64_t{range.first} * kChunkBytes;
  *bytes = uint64_t{range.count} * kChunkBytes;
  return TRN_SUCCESS;
}

trn_result_t DeviceState::hbm_unexport(uint32_t record_index, uint64_t id, std::string *why) {
  std::lock_guard lock(mu_);
  if (trn_result_t r = check_files_locked(why); r != TRN_SUCCESS) return r;
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
  ChunkRange range;
  const bool intact = read_export_range(path_, geometry_, record, record_index, &range, why);
  if (intact) {
    uint64_t &reserved = file_->slot_memory[slot_].reserved[range.first / geometry_.bank_chunks];
    store(reserved, load(reserved) - uint64_t{range.count} * kChunkBytes);
  }
  record.holder_mask &= ~bit & live_slot_mask_locked();
  if (record.holder_mask == 0) release_export_locked(record_index);
  return intact ? TRN_SUCCESS : TRN_ERROR_STATE_CORRUPT;
}

trn_result_t DeviceState::bank_usage(uint32_t bank, uint64_t *held_bytes,
                                     uint64_t *largest_free_bytes, std::string *why) {
  std::lock_guard lock(mu_);
  if (trn_result_t r = check_files_locked(why); r != TRN_SUCCESS) return r;
  if (bank >= geometry_.banks) {
    *why = "device " + std::to_string(header_.device_index) + " has no HBM bank " +
           std::to_string(bank);
    return TRN_ERROR_OUT_OF_RANGE;
  }
  // Read without the chunk lock: tools must never wait on (or disturb) the processes they
  // watch. Owners are single 16-bit words, so a racing change shows as either state; an owner
  // no writer stores (damage) holds nothing.
  const MemoryControl &memory = file_->memory;
  const uint64_t live = live_slot_mask_locked();
  uint64_t held = 0, largest = 0, run = 0;
  const uint32_t first = bank * geometry_.bank_chunks;
  for (uint32_t c = first; c < first + geometry_.bank_chunks; ++c) {
    const uint16_t owner = load_owner(memory.chunk_owner[c]);
    bool busy = false;
    if (is_export_owner(owner)) {
      const ExportRecord &record = memory.exports[owner - kExportOwnerBase];
      busy = (std::atomic_ref<uint64_t>(const_cast<uint64_t &>(record.holder_mask))
                  .load(std::memory_order_relaxed) &
              live) != 0;
    } else if (is_slot_owner(owner)) {
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
                                     uint32_t *record_index, uint64_t *id, SharedSemCell **cell,
                                     std::string *why) {
  std::lock_guard lock(mu_);
  if (trn_result_t r = check_files_locked(why); r != TRN_SUCCESS) return r;
  if (trn_result_t r = attach_locked(identity, why); r != TRN_SUCCESS) return r;
  ChunkLock chunks(*this, why);
  if (chunks.result() != TRN_SUCCESS) return chunks.result();
  MemoryControl &memory = file_->memory;
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (uint32_t i = 0; i < kMaxSharedSems; ++i) {
      ExportRecord &record = memory.sem_records[i];
      if (record.id != 0) continue;
      record.id = next_id(memory);
      record.holder_mask = uint64_t{1} << slot_;
      // A fresh cell: nobody can be waiting on a free record (its holders all let go).
      SharedSemCell &c = memory.sem_cells[i];
      c.value.store(0, std::memory_order_relaxed);
      c.device_ns.store(0, std::memory_order_relaxed);
      c.failed.store(0, std::memory_order_relaxed);
      c.wake_at.store(kNoWakeAt, std::memory_order_relaxed);
      for (SignalTime &t : c.times) t.value.store(0, std::memory_order_relaxed);
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
                                     uint32_t record_index, uint64_t id, SharedSemCell **cell,
                                     std::string *why) {
  std::lock_guard lock(mu_);
  if (trn_result_t r = check_files_locked(why); r != TRN_SUCCESS) return r;
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
  if (trn_result_t r = check_files_locked(why); r != TRN_SUCCESS) return r;
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
  // Several queue threads of this process add to the same counters: atomic adds, and only of
  // what changed (a command usually moves two or three of them).
  for (size_t i = 0; i < kActivityWords; ++i)
    if (d[i] != 0) std::atomic_ref<uint64_t>(a[i]).fetch_add(d[i], std::memory_order_relaxed);
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
