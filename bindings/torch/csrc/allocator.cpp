#include "allocator.hpp"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "check.hpp"
#include "devices.hpp"

namespace torch_trn {
namespace {

// Tensor data needs no more than the DMA's natural alignment; 64 keeps every dtype's vectors and
// trn_ops' offset checks happy.
constexpr uint64_t kAlignment = 64;

struct Counters {
  std::atomic<uint64_t> allocated{0};
  std::atomic<uint64_t> peak{0};
  // The pool's reserved bytes since the last reset: the most seen after an allocation (only an
  // allocation grows the pool) or at the reset, and the pool's own peak when it rose above what
  // it was at the reset (reserved_base). Before any reset the pool's peak is the answer, and
  // allocations need not look.
  std::atomic<bool> was_reset{false};
  std::atomic<uint64_t> reserved_seen{0};
  std::atomic<uint64_t> reserved_base{0};
};

void raise_to(std::atomic<uint64_t> &peak, uint64_t now) {
  uint64_t seen = peak.load();
  while (now > seen && !peak.compare_exchange_weak(seen, now)) {
  }
}

// One per device, made with the registry's size on first use; never shrinks.
std::vector<Counters> &counters() {
  static std::vector<Counters> all(static_cast<size_t>(std::max(device_count(), 1)));
  return all;
}

struct Block {
  trn_mem_t mem;
  trn_queue_t queue;  // the stream it was allocated on: where it is freed
  uint64_t size;
  int device_index;
};

void release(void *context) {
  auto *block = static_cast<Block *>(context);
  counters()[static_cast<size_t>(block->device_index)].allocated -= block->size;
  // A deleter cannot raise: a failure here (the runtime already shut down at exit) frees nothing
  // more than the process's exit will.
  if (trn_queue_free(block->queue, block->mem, nullptr, nullptr) != TRN_SUCCESS)
    trn_mem_free(block->mem);
  delete block;
}

class TrnAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) const override {
    const int index = current_device();
    const c10::Device where(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index));
    if (n == 0) return {nullptr, nullptr, &c10::detail::deleteNothing, where};
    Device &dev = device_at(index);
    trn_mem_t mem = nullptr;
    trn_result_t got = trn_mem_alloc(dev.pool(), n, kAlignment, TRN_MEM_CATEGORY_TENSORS, 0, &mem);
    if (got == TRN_ERROR_OUT_OF_DEVICE_MEMORY) {
      // Blocks freed on a stream return to the pool when the stream reaches their free: wait for
      // the device's queued work (CUDA's caching allocator would reuse them at once), then ask
      // again before raising.
      dev.synchronize();
      got = trn_mem_alloc(dev.pool(), n, kAlignment, TRN_MEM_CATEGORY_TENSORS, 0, &mem);
    }
    check(got, "trn_mem_alloc");
    trn_mem_info_t info = TRN_MEM_INFO_INIT;
    const trn_result_t r = trn_mem_get_info(mem, &info);
    if (r != TRN_SUCCESS) {
      trn_mem_free(mem);
      check(r, "trn_mem_get_info");
    }
    auto *block = new Block{mem, current_queue(index), n, index};
    Counters &c = counters()[static_cast<size_t>(index)];
    raise_to(c.peak, c.allocated += n);
    trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
    if (c.was_reset.load(std::memory_order_relaxed) &&
        trn_pool_get_stats(dev.pool(), &stats) == TRN_SUCCESS)
      raise_to(c.reserved_seen, stats.reserved_bytes);
    void *data = reinterpret_cast<void *>(static_cast<uintptr_t>(info.device_address));
    return {data, block, &release, where};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
};

trn_mem_stats_t pool_stats(int index) {
  trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
  check(trn_pool_get_stats(device_at(index).pool(), &stats), "trn_pool_get_stats");
  return stats;
}

}  // namespace

trn_queue_t allocation_queue(const c10::DataPtr &data) {
  if (data.get_deleter() != &release || !data.get_context()) return nullptr;
  return static_cast<const Block *>(data.get_context())->queue;
}

c10::Allocator *allocator() {
  static TrnAllocator instance;
  return &instance;
}

MemoryStats memory_stats(int index) {
  device_at(index);  // checks the range
  Counters &c = counters()[static_cast<size_t>(index)];
  MemoryStats s;
  s.allocated = c.allocated.load();
  s.peak_allocated = c.peak.load();
  const trn_mem_stats_t pool = pool_stats(index);
  s.reserved = pool.reserved_bytes;
  s.peak_reserved = std::max(c.reserved_seen.load(), pool.reserved_bytes);
  if (pool.peak_reserved_bytes > c.reserved_base.load())
    s.peak_reserved = std::max(s.peak_reserved, pool.peak_reserved_bytes);
  return s;
}

void reset_peak_memory_stats(int index) {
  device_at(index);
  Counters &c = counters()[static_cast<size_t>(index)];
  c.peak = c.allocated.load();
  const trn_mem_stats_t pool = pool_stats(index);
  c.reserved_base = pool.peak_reserved_bytes;
  c.reserved_seen = pool.reserved_bytes;
  c.was_reset = true;
}

void empty_cache(int index) {
  Device &dev = device_at(index);
  dev.synchronize();
  check(trn_pool_trim(dev.pool()), "trn_pool_trim");
}

namespace {
// Storage made without an explicit allocator (torch.load, untyped storages) finds ours too.
const bool registered = [] {
  c10::SetAllocator(c10::DeviceType::PrivateUse1, allocator());
  return true;
}();
}  // namespace

}  // namespace torch_trn
