// Host memory for host pools: what the device's DMA engines reach is pinned on hardware, so it is
// committed when it is allocated, and a request the system cannot back fails then, with
// TRN_ERROR_OUT_OF_HOST_MEMORY, instead of later through the OOM killer.
#pragma once

#include <cstdint>
#include <string>

#include "trn/trn.h"

namespace trn::rt {

// A host allocation must leave this much of the system's available memory unused.
inline constexpr uint64_t kHostMemoryReserve = 256ull << 20;
// What the system can still give without swapping (MemAvailable), or UINT64_MAX when the kernel
// does not say.
uint64_t host_memory_available();

// Maps `bytes` of zeroed, committed memory at *out, or fails with the reason in *why.
trn_result_t map_host_memory(uint64_t bytes, void **out, std::string *why);
void unmap_host_memory(void *memory, uint64_t bytes);

}  // namespace trn::rt
