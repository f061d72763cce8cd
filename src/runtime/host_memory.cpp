#include "runtime/host_memory.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/parse.hpp"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

namespace trn::rt {

uint64_t host_memory_available() {
  std::FILE *meminfo = std::fopen("/proc/meminfo", "re");
  if (!meminfo) return UINT64_MAX;
  uint64_t available = UINT64_MAX;
  char line[256];
  while (std::fgets(line, sizeof line, meminfo)) {
    unsigned long long kib = 0;
    if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
      available = static_cast<uint64_t>(kib) * 1024;
      break;
    }
  }
  std::fclose(meminfo);
  return available;
}

trn_result_t map_host_memory(uint64_t bytes, void **out, std::string *why) {
  const auto refuse = [&](const std::string &reason) {
    *why = "cannot allocate " + common::format_bytes(bytes) + " of host memory: " + reason +
           "; host pool memory is committed when allocated (it stands for pinned memory): free "
           "or trim host pools, or allocate less";
    return TRN_ERROR_OUT_OF_HOST_MEMORY;
  };
  const uint64_t available = host_memory_available();
  if (available != UINT64_MAX &&
      (available < kHostMemoryReserve || bytes > available - kHostMemoryReserve))
    return refuse("the system has " + common::format_bytes(available) +
                  " available and an allocation must leave " +
                  common::format_bytes(kHostMemoryReserve));
  // Without MAP_NORESERVE, so that a kernel in strict overcommit mode refuses here too.
  void *memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return refuse(std::strerror(errno));
  // Commit now. Kernels older than 5.14 lack the advice; the check above still holds there.
  if (madvise(memory, bytes, MADV_POPULATE_WRITE) != 0 && errno != EINVAL) {
    const int error = errno;
    munmap(memory, bytes);
    return refuse(std::strerror(error));
  }
  *out = memory;
  return TRN_SUCCESS;
}

void unmap_host_memory(void *memory, uint64_t bytes) {
  munmap(memory, bytes);
}

}  // namespace trn::rt
