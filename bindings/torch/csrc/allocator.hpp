// Device memory for tensors: trn pools (which cache and sub-allocate segments, as PyTorch's
// caching allocator does) behind c10::Allocator. A block's data pointer is its device address;
// trn_mem_lookup turns any address inside it back into (allocation, offset). A freed block goes
// back in queue order on the stream it was allocated on (trn_queue_free), so work already
// queued there may still use it, as with CUDA's allocator; memory_allocated drops at once.
#pragma once

#include <c10/core/Allocator.h>

#include <cstdint>

#include "trn/trn.h"

namespace torch_trn {

struct MemoryStats {
  uint64_t allocated = 0;       // bytes of live tensor blocks
  uint64_t peak_allocated = 0;  // since the last reset
  uint64_t reserved = 0;        // taken from the device by the pool: allocated + cached
  uint64_t peak_reserved = 0;   // since the last reset
};

c10::Allocator *allocator();
// The stream queue a block of ours is freed on (the one it was allocated on); null for memory
// that is not ours.
trn_queue_t allocation_queue(const c10::DataPtr &data);
// Tensor.record_stream: the block is also used on `queue`, so its free waits (on the device) for
// the work queued there up to the free, as CUDA's caching allocator does. Memory not ours, or a
// block's own stream, is nothing to record.
void record_stream(const c10::DataPtr &data, trn_queue_t queue);
MemoryStats memory_stats(int device_index);
// Resets peak_allocated and peak_reserved to what is allocated and reserved now.
void reset_peak_memory_stats(int device_index);
// Waits for the device's queues, then returns the pool's cached memory to the device.
void empty_cache(int device_index);
// The device a trn tensor's data pointer (a device address) belongs to; -1 for other memory.
int device_of_pointer(const void *data);

}  // namespace torch_trn
