// Checks of everything the simulated device reads from its shared files before it is used: the
// files themselves (type, owner, mode, size) and every field of the state used as a count, an
// offset or an index. Another process (or a stray write) can put anything there, so a check
// that fails is an error naming the file, the field and what to do, never a signal.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "sim/state_layout.hpp"

namespace trn::sim {

// What to do about a damaged state file: stop its users, remove it (trn re-creates it).
std::string stale_state_advice(const std::string &state_path);

// Opens a file of the state directory (O_CLOEXEC and O_NOFOLLOW added to `flags`; `flags` may
// hold O_CREAT, which creates it with mode 0600) and checks that it is a regular file of this
// user with mode 0600. On failure returns -1 with *result and *why set (`advice` ends the
// message of a damaged file) and *missing telling whether the file does not exist.
int open_private_file(const std::string &path, int flags, const std::string &advice, bool *missing,
                      trn_result_t *result, std::string *why);

// Checks a state file's header (read once, before mapping) against the file and this device.
trn_result_t validate_header(const std::string &path, off_t file_bytes, uint32_t device_index,
                             const StateHeader &header, std::string *why);

// The memory geometry of a device, read from its state file once when it is opened, checked
// against the (validated) header, and trusted from then on: later writes to the file do not
// change it.
struct MemoryGeometry {
  uint32_t chunk_count = 0;  // chunks in the device
  uint32_t bank_chunks = 0;  // chunks per bank
  uint32_t banks = 0;
};
trn_result_t read_memory_geometry(const std::string &path, const StateHeader &header,
                                  const MemoryControl &memory, MemoryGeometry *geometry,
                                  std::string *why);

// Chunk owners as the chunk table holds them: free, a process slot, an export record, or a value
// no writer ever stores (damage).
inline bool is_slot_owner(uint16_t owner) {
  return owner >= 1 && owner <= kMaxProcessSlots;
}
inline bool is_export_owner(uint16_t owner) {
  return owner >= kExportOwnerBase && owner < kExportOwnerBase + kMaxExports;
}

// The chunk range of export record `index`, copied once and checked to lie in one bank of the
// device. False, with *why naming the file and the record, when it does not.
struct ChunkRange {
  uint32_t first = 0;
  uint32_t count = 0;
};
bool read_export_range(const std::string &path, const MemoryGeometry &geometry,
                       const ExportRecord &record, uint32_t index, ChunkRange *range,
                       std::string *why);

// Whether the file behind `fd` still has `bytes` bytes: a mapping of a shorter file faults
// (SIGBUS) when touched. TRN_SUCCESS, or TRN_ERROR_STATE_CORRUPT with *why naming `path`.
trn_result_t check_file_size(int fd, const std::string &path, uint64_t bytes,
                             const std::string &advice, std::string *why);

}  // namespace trn::sim
