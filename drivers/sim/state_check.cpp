#include "sim/state_check.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/parse.hpp"
#include "sim/config.hpp"
#include "sim/generation.hpp"

namespace trn::sim {

namespace {

trn_result_t damaged(const std::string &path, const std::string &what, std::string *why) {
  *why = path + " is damaged: " + what + "; " + stale_state_advice(path);
  return TRN_ERROR_STATE_CORRUPT;
}

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// Who owns the file and that nobody else may read it.
trn_result_t check_access(const std::string &path, const struct stat &st, const std::string &advice,
                          std::string *why) {
  if (!S_ISREG(st.st_mode)) {
    *why = path + " is not a regular file; " + advice;
    return TRN_ERROR_STATE_CORRUPT;
  }
  if (st.st_uid != geteuid()) {
    *why = path + " belongs to uid " + std::to_string(st.st_uid) + ", not to this user (uid " +
           std::to_string(geteuid()) + "); simulated devices are private to their user: " +
           "set TRN_SIM_ROOT to a directory of your own";
    return TRN_ERROR_PERMISSION_DENIED;
  }
  if ((st.st_mode & 077) != 0 || (st.st_mode & 0600) != 0600) {
    *why = path + " has mode " + mode_text(st.st_mode) + " but must be 0600 (yours to read and " +
           "write, nobody else's): run chmod 600 " + path;
    return TRN_ERROR_PERMISSION_DENIED;
  }
  return TRN_SUCCESS;
}

trn_result_t open_error(const std::string &path, int error, const std::string &advice,
                        std::string *why) {
  switch (error) {
    case ELOOP:
      *why = path + " is a symbolic link; trn uses only files it created itself: " + advice;
      return TRN_ERROR_STATE_CORRUPT;
    case EISDIR:
      *why = path + " is a directory, not a file of a simulated device; " + advice;
      return TRN_ERROR_STATE_CORRUPT;
    case ENOENT:
      *why = "cannot open " + path + ": " + std::strerror(error) + "; " + advice;
      return TRN_ERROR_STATE_CORRUPT;
    case EACCES:
      *why = "cannot open " + path + ": " + std::strerror(error) +
             "; it must be readable and writable by you (mode 0600): run chmod 600 " + path;
      return TRN_ERROR_PERMISSION_DENIED;
    default: *why = "cannot open " + path + ": " + std::strerror(error); return TRN_ERROR_DRIVER;
  }
}

}  // namespace

std::string stale_state_advice(const std::string &state_path) {
  return "stop the processes using the device (trn-ls -w lists them), then remove " + state_path +
         " (trn re-creates it), or point TRN_SIM_ROOT at another directory";
}

int open_private_file(const std::string &path, int flags, const std::string &advice, bool *missing,
                      trn_result_t *result, std::string *why) {
  *missing = false;
  // O_NONBLOCK: opening a FIFO put in the file's place must not wait for a writer.
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
  if (fd < 0) {
    const int error = errno;
    *missing = error == ENOENT;
    *result = open_error(path, error, advice, why);
    return -1;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    *why = "cannot stat " + path + ": " + std::strerror(errno);
    *result = TRN_ERROR_DRIVER;
  } else {
    *result = check_access(path, st, advice, why);
  }
  if (*result != TRN_SUCCESS) {
    close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

trn_result_t validate_header(const std::string &path, off_t file_bytes, uint32_t device_index,
                             const StateHeader &header, std::string *why) {
  if (std::memcmp(header.magic, kStateMagic, sizeof kStateMagic) != 0) {
    *why = path + " is not a trn device state file (bad magic); " + stale_state_advice(path);
    return TRN_ERROR_STATE_CORRUPT;
  }
  if (header.layout_version != kStateLayoutVersion) {
    *why =
        path + " has state layout version " + std::to_string(header.layout_version) +
        " but this trn " TRN_RELEASE_STRING " uses version " + std::to_string(kStateLayoutVersion) +
        ": a process of another trn release created it. To clear it, " + stale_state_advice(path);
    return TRN_ERROR_STATE_VERSION_MISMATCH;
  }
  if (static_cast<uint64_t>(file_bytes) != sizeof(StateFile))
    return damaged(path,
                   "it has " + std::to_string(file_bytes) + " bytes, a state file has " +
                       std::to_string(sizeof(StateFile)),
                   why);
  if (header.header_bytes != sizeof(StateHeader) || header.file_bytes != sizeof(StateFile))
    return damaged(path,
                   "its header gives sizes (header_bytes " + std::to_string(header.header_bytes) +
                       ", file_bytes " + std::to_string(header.file_bytes) + ") of another layout",
                   why);
  if (!is_known_generation(header.generation))
    return damaged(path, "its header names generation " + std::to_string(header.generation), why);
  if (header.physical_cores == 0 || header.physical_cores > kMaxPhysicalCores)
    return damaged(path,
                   "its header says physical_cores " + std::to_string(header.physical_cores) +
                       " (1 to " + std::to_string(kMaxPhysicalCores) + ")",
                   why);
  if (header.device_count == 0 || header.device_count > kMaxDevices ||
      header.device_index != device_index || header.device_index >= header.device_count)
    return damaged(path,
                   "its header says device " + std::to_string(header.device_index) + " of " +
                       std::to_string(header.device_count) + " (this is device " +
                       std::to_string(device_index) + ", of at most " +
                       std::to_string(kMaxDevices) + ")",
                   why);
  const uint64_t banks =
      generation_spec(static_cast<trn_generation_t>(header.generation)).hbm_banks;
  const uint64_t granule = banks * kChunkBytes;
  if (header.hbm_bytes < granule || header.hbm_bytes > kMaxHbmBytes ||
      header.hbm_bytes % granule != 0)
    return damaged(path,
                   "its header says hbm_bytes " + std::to_string(header.hbm_bytes) +
                       ", not a whole number of " + std::to_string(banks) +
                       " banks of 2 MiB chunks up to 1 TiB",
                   why);
  return TRN_SUCCESS;
}

trn_result_t read_memory_geometry(const std::string &path, const StateHeader &header,
                                  const MemoryControl &memory, MemoryGeometry *geometry,
                                  std::string *why) {
  const uint32_t banks =
      generation_spec(static_cast<trn_generation_t>(header.generation)).hbm_banks;
  // Copied once: what is checked is what is used.
  const uint32_t chunk_count = memory.chunk_count;
  const uint32_t bank_chunks = memory.bank_chunks;
  const uint64_t expected = header.hbm_bytes / kChunkBytes;
  if (banks == 0 || banks > kMaxHbmBanks || chunk_count != expected || bank_chunks == 0 ||
      uint64_t{bank_chunks} * banks != chunk_count)
    return damaged(path,
                   "its memory control says chunk_count " + std::to_string(chunk_count) +
                       " and bank_chunks " + std::to_string(bank_chunks) + ", but " +
                       common::format_bytes(header.hbm_bytes) + " in " + std::to_string(banks) +
                       " banks is " + std::to_string(expected) + " chunks",
                   why);
  *geometry = MemoryGeometry{chunk_count, bank_chunks, banks};
  return TRN_SUCCESS;
}

bool read_export_range(const std::string &path, const MemoryGeometry &geometry,
                       const ExportRecord &record, uint32_t index, ChunkRange *range,
                       std::string *why) {
  const uint32_t first = record.first_chunk;
  const uint32_t count = record.chunk_count;
  // Within the device and within one bank (an export is one allocation), without overflow.
  if (count == 0 || first >= geometry.chunk_count || count > geometry.chunk_count - first ||
      first / geometry.bank_chunks != (first + count - 1) / geometry.bank_chunks) {
    damaged(path,
            "export record " + std::to_string(index) + " says chunks " + std::to_string(first) +
                "+" + std::to_string(count) + ", outside one bank of the device's " +
                std::to_string(geometry.chunk_count) + " chunks",
            why);
    return false;
  }
  *range = ChunkRange{first, count};
  return true;
}

trn_result_t check_file_size(int fd, const std::string &path, uint64_t bytes,
                             const std::string &advice, std::string *why) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    *why = "cannot stat " + path + ": " + std::strerror(errno);
    return TRN_ERROR_DRIVER;
  }
  if (static_cast<uint64_t>(st.st_size) == bytes) return TRN_SUCCESS;
  *why = path + " has " + std::to_string(st.st_size) + " bytes but the device needs " +
         std::to_string(bytes) + " (another process truncated or replaced it); " + advice;
  return TRN_ERROR_STATE_CORRUPT;
}

}  // namespace trn::sim
