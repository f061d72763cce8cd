// Moving bytes between files and device memory, as GPUDirect Storage has the storage DMA into
// device memory: FILE_READ and FILE_WRITE commands. The device range is resolved to its mapping
// in this process (HBM is backed first) and io_uring moves the bytes straight into or out of it,
// several chunks in flight. O_DIRECT is used for the part where the file offset and the memory
// address agree on 4096-byte alignment and the file allows it (the descriptor is reopened through
// /proc/self/fd); the unaligned head and tail, chunks the page cache holds already (a warm file
// is copied from there, by io_uring's workers, several chunks at once), and files that refuse
// O_DIRECT (tmpfs) go through the page cache. Without io_uring (a kernel or sandbox that refuses
// it) the same chunks are moved with pread/pwrite.
#pragma once

#include <cstdint>
#include <string>

#include "sim/ops_support.hpp"

namespace trn::sim {

enum class FileDirection { read, write };  // read: file -> memory; write: memory -> file

// Moves `memory.bytes` bytes between `memory` and `fd` at `file_offset`. A short file, an I/O
// error or a descriptor that is not open fails the transfer, naming the file offset where it
// failed and how many bytes came before it; nothing is left in flight on return.
trn_result_t file_transfer(FileDirection direction, const MemorySpan &memory, int fd,
                           uint64_t file_offset, std::string *why);

}  // namespace trn::sim
