#include "sim/device_state.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "common/parse.hpp"
#include "sim/generation.hpp"
#include "sim/ofd_lock.hpp"
#include "sim/seqlock.hpp"

namespace trn::sim {

namespace {

std::string errno_text(int error) {
  return std::strerror(error);
}

std::string hbm_path_of(const std::string &state_path) {
  return state_path.substr(0, state_path.size() - std::string(".state").size()) + ".hbm";
}

StateHeader make_header(const DeviceWish &wish) {
  StateHeader header{};
  std::memcpy(header.magic, kStateMagic, sizeof header.magic);
  header.layout_version = kStateLayoutVersion;
  header.header_bytes = sizeof(StateHeader);
  header.file_bytes = sizeof(StateFile);
  header.device_index = wish.index;
  header.device_count = wish.device_count;
  header.generation = static_cast<uint32_t>(wish.generation);
  header.physical_cores = wish.physical_cores;
  header.hbm_bytes = wish.hbm_bytes;
  header.created_unix_ns = common::unix_now_ns();
  header.creator_pid = getpid();
  return header;
}

std::string temp_name(const std::string &path) {
  static std::atomic<uint32_t> counter{0};
  return path + ".tmp." + std::to_string(getpid()) + "." +
         std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
}

// Fills a new state file through a mapping: the header, empty core records, and the memory
// control block.
trn_result_t initialise_state(int fd, const std::string &path, const DeviceWish &wish,
                              std::string *why) {
  void *map = mmap(nullptr, sizeof(StateFile), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    *why = "cannot map " + path + ": " + errno_text(errno);
    return TRN_ERROR_DRIVER;
  }
  auto *file = static_cast<StateFile *>(map);
  file->header = make_header(wish);
  for (auto &core : file->cores) core.body.owner_slot = -1;
  MemoryControl &memory = file->memory;
  const GenerationSpec &spec = generation_spec(wish.generation);
  memory.chunk_count = static_cast<uint32_t>(wish.hbm_bytes / kChunkBytes);
  memory.bank_chunks = memory.chunk_count / spec.hbm_banks;
  memory.next_export_id = 1;
  munmap(map, sizeof(StateFile));
  return TRN_SUCCESS;
}

// Creates `path` complete under a temporary name and renames it into place, so no process ever
// opens a half-initialised file. `bytes` sizes the file (sparse).
template <typename Fill>
trn_result_t create_file(const std::string &path, uint64_t bytes, Fill fill, std::string *why) {
  const std::string temp = temp_name(path);
  const int fd = ::open(temp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    *why = "cannot create " + temp + ": " + errno_text(errno);
    return errno == EACCES ? TRN_ERROR_PERMISSION_DENIED : TRN_ERROR_DRIVER;
  }
  trn_result_t result = TRN_SUCCESS;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    *why = "cannot size " + temp + " to " + common::format_bytes(bytes) + ": " + errno_text(errno);
    result = TRN_ERROR_DRIVER;
  } else {
    result = fill(fd, temp);
  }
  close(fd);
  if (result == TRN_SUCCESS && rename(temp.c_str(), path.c_str()) != 0) {
    *why = "cannot rename " + temp + " to " + path + ": " + errno_text(errno);
    result = TRN_ERROR_DRIVER;
  }
  if (result != TRN_SUCCESS) unlink(temp.c_str());
  return result;
}

// A device is two files: the state (created last, so a state file always has its memory file)
// and the sparse backing of its HBM. The caller holds the directory lock.
trn_result_t create_state_file(const std::string &path, const DeviceWish &wish, std::string *why) {
  trn_result_t r = create_file(
      hbm_path_of(path), wish.hbm_bytes, [](int, const std::string &) { return TRN_SUCCESS; }, why);
  if (r != TRN_SUCCESS) return r;
  return create_file(
      path, sizeof(StateFile),
      [&](int fd, const std::string &temp) { return initialise_state(fd, temp, wish, why); }, why);
}

bool same_config(const StateHeader &header, const DeviceWish &wish) {
  return header.generation == static_cast<uint32_t>(wish.generation) &&
         header.physical_cores == wish.physical_cores && header.hbm_bytes == wish.hbm_bytes &&
         (wish.index != 0 || header.device_count == wish.device_count);
}

// Which explicit wishes the file contradicts, e.g. "TRN_SIM_GENERATION=trn1".
std::string conflicting_settings(const StateHeader &header, const DeviceWish &wish) {
  std::string out;
  auto add = [&](const std::string &text) { out += (out.empty() ? "" : ", ") + text; };
  if (wish.explicit_generation && header.generation != static_cast<uint32_t>(wish.generation))
    add(std::string("TRN_SIM_GENERATION=") + generation_spec(wish.generation).name());
  if (wish.explicit_hbm && header.hbm_bytes != wish.hbm_bytes)
    add("TRN_SIM_HBM_BYTES=" + common::format_bytes(wish.hbm_bytes));
  if (wish.explicit_device_count && wish.index == 0 && header.device_count != wish.device_count)
    add("TRN_SIM_DEVICES=" + std::to_string(wish.device_count));
  return out;
}

}  // namespace

std::string describe_device_config(trn_generation_t generation, uint32_t cores,
                                   uint64_t hbm_bytes) {
  return std::string(generation_spec(generation).name()) + " (" + std::to_string(cores) +
         " cores, " + common::format_bytes(hbm_bytes) + ")";
}

DeviceState::DeviceState(std::string path, int fd, StateFile *file, const StateHeader &header,
                         const MemoryGeometry &geometry)
    : path_(std::move(path)),
      hbm_path_(hbm_path_of(path_)),
      fd_(fd),
      file_(file),
      header_(header),
      geometry_(geometry),
      state_guard_(std::make_unique<MappingGuard>(file, sizeof(StateFile), fd, path_,
                                                  stale_state_advice(path_))) {}

DeviceState::~DeviceState() {
  state_guard_.reset();
  hbm_guard_.reset();
  if (hbm_base_) munmap(hbm_base_, header_.hbm_bytes);
  if (hbm_fd_ >= 0) close(hbm_fd_);
  munmap(file_, sizeof(StateFile));
  close(fd_);  // drops every lock this process holds on the device
}

void DeviceState::abandon_after_fork() {
  if (hbm_fd_ >= 0) close(hbm_fd_);
  hbm_fd_ = -1;
  close(fd_);  // the parent's descriptor keeps its locks
  fd_ = -1;
}

trn_result_t DeviceState::open(const std::string &root, const DeviceWish &wish,
                               std::unique_ptr<DeviceState> *out, std::string *why) {
  const std::string path = root + "/device" + std::to_string(wish.index) + ".state";
  const std::string advice = stale_state_advice(path);
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool missing = false;
    trn_result_t result = TRN_SUCCESS;
    int fd = open_private_file(path, O_RDWR, advice, &missing, &result, why);
    if (fd < 0 && missing) {
      if (trn_result_t r = create_state_file(path, wish, why); r != TRN_SUCCESS) return r;
      fd = open_private_file(path, O_RDWR, advice, &missing, &result, why);
    }
    if (fd < 0) return result;
    struct stat st {};
    StateHeader header{};
    if (fstat(fd, &st) != 0) {
      *why = "cannot stat " + path + ": " + errno_text(errno);
      result = TRN_ERROR_DRIVER;
    } else if (static_cast<size_t>(st.st_size) < sizeof header ||
               pread(fd, &header, sizeof header, 0) != static_cast<ssize_t>(sizeof header)) {
      *why = path + " is truncated (" + std::to_string(st.st_size) +
             " bytes, shorter than a state header); " + advice;
      result = TRN_ERROR_STATE_CORRUPT;
    } else {
      result = validate_header(path, st.st_size, wish.index, header, why);
    }
    // The memory file belongs to the state file: refuse a foreign or damaged one now, not at
    // the first allocation (tools report it too).
    if (result == TRN_SUCCESS) {
      const int hbm_fd =
          open_private_file(hbm_path_of(path), O_RDWR, advice, &missing, &result, why);
      if (hbm_fd >= 0) {
        result = check_file_size(hbm_fd, hbm_path_of(path), header.hbm_bytes, advice, why);
        close(hbm_fd);
      }
    }
    if (result != TRN_SUCCESS) {
      close(fd);
      return result;
    }

    void *map = mmap(nullptr, sizeof(StateFile), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
      *why = "cannot map " + path + ": " + errno_text(errno);
      close(fd);
      return TRN_ERROR_DRIVER;
    }
    auto *file = static_cast<StateFile *>(map);
    MemoryGeometry geometry;
    {
      // The file may shrink while it is read: guard the read like every later one.
      MappingGuard guard(file, sizeof(StateFile), fd, path, advice);
      result = read_memory_geometry(path, header, file->memory, &geometry, why);
    }
    if (result != TRN_SUCCESS) {
      munmap(map, sizeof(StateFile));
      close(fd);
      return result;
    }
    std::unique_ptr<DeviceState> state(new DeviceState(path, fd, file, header, geometry));

    if (!same_config(header, wish)) {
      // Nobody else has the file open: it is ours to re-create with this configuration.
      if (attempt == 0 && ofd_try_lock(fd, kLockUsers, LockKind::exclusive) == 0) {
        state.reset();
        if (trn_result_t r = create_state_file(path, wish, why); r != TRN_SUCCESS) return r;
        continue;
      }
      const std::string conflicts = conflicting_settings(header, wish);
      if (!conflicts.empty()) {
        std::string users;
        {
          std::lock_guard lock(state->mu_);
          for (const auto &p : state->live_processes_locked())
            users += (users.empty() ? "" : ", ") + std::string("pid ") + std::to_string(p.pid) +
                     " (" + p.command + ")";
        }
        *why = "device " + std::to_string(wish.index) + " is in use as " +
               describe_device_config(static_cast<trn_generation_t>(header.generation),
                                      header.physical_cores, header.hbm_bytes) +
               (users.empty() ? " by another process or tool" : " by " + users) +
               ", but this process asks for " + conflicts +
               ": use the same settings while it runs, or another TRN_SIM_ROOT";
        return TRN_ERROR_INVALID_CONFIG;
      }
    }
    if (int rc = ofd_try_lock(fd, kLockUsers, LockKind::shared); rc != 0) {
      *why = "cannot lock " + path + ": " + errno_text(rc);
      return TRN_ERROR_DRIVER;
    }
    *out = std::move(state);
    return TRN_SUCCESS;
  }
  *why = "cannot re-create " + path + ": another process keeps replacing it";
  return TRN_ERROR_DRIVER;
}

bool DeviceState::slot_is_live_locked(uint32_t slot) {
  if (static_cast<int32_t>(slot) == slot_) return true;
  bool held = false;
  return ofd_is_held(fd_, kLockSlotBase + slot, LockKind::exclusive, &held) == 0 && held;
}

bool DeviceState::core_is_held_by_other_locked(uint32_t core) {
  if (claimed_mask_ & (uint64_t{1} << core)) return false;
  bool held = false;
  return ofd_is_held(fd_, kLockCoreBase + core, LockKind::exclusive, &held) == 0 && held;
}

trn_hal_process_t DeviceState::describe_slot_locked(uint32_t slot) {
  trn_hal_process_t process{};
  ProcessSlot::Body body{};
  if (!seqlock_read(file_->slots[slot], &body)) return process;
  process.pid = body.pid;
  process.uid = body.uid;
  process.attached_unix_ns = body.attached_unix_ns;
  std::memcpy(process.command, body.command, sizeof process.command);
  process.command[sizeof process.command - 1] = '\0';
  std::memcpy(process.runtime_version, body.runtime_version, sizeof process.runtime_version);
  process.runtime_version[sizeof process.runtime_version - 1] = '\0';
  return process;
}

std::vector<trn_hal_process_t> DeviceState::live_processes_locked() {
  std::vector<trn_hal_process_t> live;
  for (uint32_t slot = 0; slot < kMaxProcessSlots; ++slot) {
    if (!slot_is_live_locked(slot)) continue;
    trn_hal_process_t process = describe_slot_locked(slot);
    if (process.pid == 0) continue;  // still registering
    fill_memory_locked(slot, &process);
    process.physical_core_mask = core_mask_locked(slot);
    live.push_back(process);
  }
  return live;
}

uint64_t DeviceState::core_mask_locked(uint32_t slot) {
  uint64_t mask = 0;
  for (uint32_t core = 0; core < header_.physical_cores; ++core) {
    const bool mine = static_cast<int32_t>(slot) == slot_ && (claimed_mask_ >> core & 1u);
    CoreRecord::Body record{};
    const bool theirs = !mine && core_is_held_by_other_locked(core) &&
                        seqlock_read(file_->cores[core], &record) &&
                        record.owner_slot == static_cast<int32_t>(slot);
    if (mine || theirs) mask |= uint64_t{1} << core;
  }
  return mask;
}

trn_result_t DeviceState::attach_locked(const trn_hal_process_identity_t &identity,
                                        std::string *why) {
  if (slot_ >= 0) return TRN_SUCCESS;
  for (uint32_t slot = 0; slot < kMaxProcessSlots; ++slot) {
    const int rc = ofd_try_lock(fd_, kLockSlotBase + slot, LockKind::exclusive);
    if (rc == EAGAIN) continue;
    if (rc != 0) {
      *why = "cannot lock a process slot of " + path_ + ": " + errno_text(rc);
      return TRN_ERROR_DRIVER;
    }
    ProcessSlot::Body body{};
    body.pid = getpid();
    body.uid = geteuid();
    body.attached_unix_ns = common::unix_now_ns();
    std::snprintf(body.command, sizeof body.command, "%s",
                  identity.command ? identity.command : "");
    std::snprintf(body.runtime_version, sizeof body.runtime_version, "%s",
                  identity.runtime_version ? identity.runtime_version : "");
    {
      // A slot is reused only after its previous process died: return what it held first. A
      // claim never waits for another process, so when the chunk lock is busy (its holder may
      // be stopped), the next chunk lock this process takes does it, before any memory change.
      std::string busy;
      ChunkLock chunks(*this, &busy, ChunkLock::Wait::no);
      if (chunks.result() == TRN_SUCCESS)
        reclaim_slot_chunks_locked(slot);
      else
        reclaim_pending_ = true;
    }
    seqlock_write(file_->slots[slot], body);
    slot_ = static_cast<int32_t>(slot);
    return TRN_SUCCESS;
  }
  std::string users;
  for (const auto &p : live_processes_locked())
    users += (users.empty() ? "" : ", ") + std::to_string(p.pid);
  *why = "device " + std::to_string(header_.device_index) + " already has " +
         std::to_string(kMaxProcessSlots) + " processes attached (pids " + users +
         "): end some of them first";
  return TRN_ERROR_TOO_MANY_PROCESSES;
}

trn_result_t DeviceState::check_files_locked(std::string *why) {
  const std::string advice = stale_state_advice(path_);
  if (trn_result_t r = check_file_size(fd_, path_, sizeof(StateFile), advice, why);
      r != TRN_SUCCESS)
    return r;
  if (hbm_fd_ >= 0) return check_file_size(hbm_fd_, hbm_path_, header_.hbm_bytes, advice, why);
  return TRN_SUCCESS;
}

trn_result_t DeviceState::owner(uint32_t core, trn_hal_process_t *owner, std::string *why) {
  std::lock_guard lock(mu_);
  if (trn_result_t r = check_files_locked(why); r != TRN_SUCCESS) return r;
  return owner_locked(core, owner, why);
}

trn_result_t DeviceState::claim(const trn_hal_process_identity_t &identity, uint32_t first,
                                uint32_t count, uint32_t *busy_core, std::string *why) {
  std::lock_guard lock(mu_);
  if (trn_result_t r = check_files_locked(why); r != TRN_SUCCESS) return r;
  if (trn_result_t r = attach_locked(identity, why); r != TRN_SUCCESS) return r;
  uint64_t taken = 0;
  for (uint32_t core = first; core < first + count; ++core) {
    const uint64_t bit = uint64_t{1} << core;
    if (claimed_mask_ & bit) continue;
    const int rc = ofd_try_lock(fd_, kLockCoreBase + core, LockKind::exclusive);
    if (rc != 0) {
      for (uint32_t undo = first; undo < core; ++undo)
        if (taken >> undo & 1u) ofd_unlock(fd_, kLockCoreBase + undo);
      if (rc != EAGAIN) {
        *why = "cannot lock core " + std::to_string(core) + " in " + path_ + ": " + errno_text(rc);
        return TRN_ERROR_DRIVER;
      }
      if (busy_core) *busy_core = core;
      trn_hal_process_t holder{};
      owner_locked(core, &holder, why);
      *why = holder.pid > 0 ? "pid " + std::to_string(holder.pid) + " (" + holder.command +
                                  ") since " + common::format_unix_time(holder.since_unix_ns)
                            : std::string("another process (it has not finished registering)");
      return TRN_ERROR_CORE_BUSY;
    }
    taken |= bit;
  }
  const uint64_t now = common::unix_now_ns();
  for (uint32_t core = first; core < first + count; ++core) {
    if (!(taken >> core & 1u)) continue;
    seqlock_write(file_->cores[core], CoreRecord::Body{slot_, getpid(), now});
  }
  claimed_mask_ |= taken;
  return TRN_SUCCESS;
}

bool DeviceState::holds_cores(uint32_t first, uint32_t count) {
  if (count == 0 || first >= 64 || count > 64 - first) return false;
  const uint64_t wanted = (count == 64 ? ~uint64_t{0} : ((uint64_t{1} << count) - 1)) << first;
  std::lock_guard lock(mu_);
  return (claimed_mask_ & wanted) == wanted;
}

trn_result_t DeviceState::unclaim(uint32_t first, uint32_t count, std::string *why) {
  std::lock_guard lock(mu_);
  if (trn_result_t r = check_files_locked(why); r != TRN_SUCCESS) return r;
  for (uint32_t core = first; core < first + count; ++core) {
    const uint64_t bit = uint64_t{1} << core;
    if (!(claimed_mask_ & bit)) continue;
    seqlock_write(file_->cores[core], CoreRecord::Body{-1, 0, 0});
    if (int rc = ofd_unlock(fd_, kLockCoreBase + core); rc != 0) {
      *why = "cannot unlock core " + std::to_string(core) + " in " + path_ + ": " + errno_text(rc);
      return TRN_ERROR_DRIVER;
    }
    claimed_mask_ &= ~bit;
  }
  return TRN_SUCCESS;
}

trn_result_t DeviceState::owner_locked(uint32_t core, trn_hal_process_t *owner, std::string *why) {
  (void)why;
  *owner = trn_hal_process_t{};
  const bool mine = claimed_mask_ >> core & 1u;
  if (!mine && !core_is_held_by_other_locked(core)) return TRN_SUCCESS;  // free
  // The owner writes its record right after taking the lock; give it a moment if we raced it.
  for (int attempt = 0; attempt < 100; ++attempt) {
    CoreRecord::Body record{};
    if (seqlock_read(file_->cores[core], &record) && record.owner_slot >= 0 &&
        record.owner_slot < static_cast<int32_t>(kMaxProcessSlots)) {
      const auto slot = static_cast<uint32_t>(record.owner_slot);
      *owner = describe_slot_locked(slot);
      owner->since_unix_ns = record.since_unix_ns;
      if (owner->pid == record.pid && owner->pid != 0) {
        // The whole record, as process_list gives it: its cores and its memory.
        fill_memory_locked(slot, owner);
        owner->physical_core_mask = core_mask_locked(slot);
        return TRN_SUCCESS;
      }
    }
    if (mine || !core_is_held_by_other_locked(core)) break;
    struct timespec pause {
      0, 100'000
    };
    nanosleep(&pause, nullptr);
  }
  *owner = trn_hal_process_t{};
  owner->pid = -1;  // held, but by a process that has not finished registering
  return TRN_SUCCESS;
}

trn_result_t DeviceState::processes(uint32_t *count, trn_hal_process_t *processes,
                                    std::string *why) {
  std::lock_guard lock(mu_);
  if (trn_result_t r = check_files_locked(why); r != TRN_SUCCESS) return r;
  const std::vector<trn_hal_process_t> live = live_processes_locked();
  if (processes != nullptr) {
    const uint32_t n = std::min<uint32_t>(*count, static_cast<uint32_t>(live.size()));
    std::copy_n(live.begin(), n, processes);
    *count = n;
  } else {
    *count = static_cast<uint32_t>(live.size());
  }
  return TRN_SUCCESS;
}

}  // namespace trn::sim
