#include "allocator.hpp"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "address_map.hpp"
#include "check.hpp"
#include "devices.hpp"
#include "events.hpp"

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
  uintptr_t address = 0;             // the data pointer tensors see: the device address
  std::vector<trn_queue_t> used_on;  // other streams' queues (record_stream), under uses_mutex()
};

std::mutex &uses_mutex() {
  static std::mutex mutex;
  return mutex;
}

// The points the free of a block waits for: each stream it was recorded on, as far as its work is
// queued now. False when a stream could be neither marked nor waited for (the deadline): the
// block must then not be freed.
bool recorded_uses(Block *block, std::vector<trn_sem_point_t> *waits) {
  std::vector<trn_queue_t> queues;
  {
    std::lock_guard lock(uses_mutex());
    queues.swap(block->used_on);
  }
  for (trn_queue_t q : queues) {
    uint64_t sequence = 0;
    trn_sem_t timeline = nullptr;
    if (submit_when_room(q, [&] { return trn_queue_barrier(q, nullptr, &sequence); }) ==
            TRN_SUCCESS &&
        trn_queue_get_semaphore(q, &timeline) == TRN_SUCCESS) {
      waits->push_back({timeline, sequence});
      continue;
    }
    // A faulted queue cancels its work; otherwise wait for it here.
    if (trn_queue_finish(q, wait_timeout_ns()) == TRN_TIMEOUT) return false;
  }
  return true;
}

// The live blocks by device address: copy_data (storage clones) is given addresses alone.
AddressMap<Block> &live_blocks() {
  static auto *blocks = new AddressMap<Block>;  // outlives tensors freed at exit
  return *blocks;
}

// The block holding `address` and the address's offset in it.
std::pair<Block *, uint64_t> block_at(const void *address) {
  const auto found = live_blocks().find(address, [](const Block &b) { return b.size; });
  TORCH_CHECK(found.first, "trn: ", address, " is no trn tensor's memory");
  return found;
}

void release(void *context) {
  auto *block = static_cast<Block *>(context);
  live_blocks().remove(block->address);
  counters()[static_cast<size_t>(block->device_index)].allocated -= block->size;
  // Freed in stream order: the queue's work queued before may still use the block. A full queue
  // is waited out; never freed at once under queued work.
  std::vector<trn_sem_point_t> waits;
  if (!recorded_uses(block, &waits)) {
    delete block;  // another stream may still use it: kept (a leak, never a corruption)
    return;
  }
  const trn_sync_t after{waits.data(), static_cast<uint32_t>(waits.size()), nullptr, 0};
  const trn_result_t queued = submit_when_room(block->queue, [&] {
    return trn_queue_free(block->queue, block->mem, waits.empty() ? nullptr : &after, nullptr);
  });
  // A deleter cannot raise. If the free could not be queued (a faulted queue, the deadline), the
  // block is freed once the queue is idle (its work done, or cancelled by a fault); a queue still
  // busy at the deadline keeps it (a leak, never a corruption). A runtime already shut down at
  // exit fails both calls, and the exit frees everything.
  if (queued != TRN_SUCCESS && trn_queue_finish(block->queue, wait_timeout_ns()) != TRN_TIMEOUT)
    trn_mem_free(block->mem);
  delete block;
}

class TrnAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
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
    auto *block = new Block{mem, current_queue(index), n, index, 0, {}};
    Counters &c = counters()[static_cast<size_t>(index)];
    raise_to(c.peak, c.allocated += n);
    trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
    if (c.was_reset.load(std::memory_order_relaxed) &&
        trn_pool_get_stats(dev.pool(), &stats) == TRN_SUCCESS)
      raise_to(c.reserved_seen, stats.reserved_bytes);
    void *data = reinterpret_cast<void *>(static_cast<uintptr_t>(info.device_address));
    block->address = static_cast<uintptr_t>(info.device_address);
    live_blocks().add(block->address, block);
    return {data, block, &release, where};
  }
  // A storage's clone: a device copy on the destination's stream, complete when this returns (a
  // clone is synchronous to its caller).
  void copy_data(void *dest, const void *src, std::size_t count) const override {
    if (count == 0) return;
    const auto [to, to_offset] = block_at(dest);
    const auto [from, from_offset] = block_at(src);
    TORCH_CHECK(to_offset + count <= to->size && from_offset + count <= from->size,
                "trn: a copy of ", count, " bytes runs past its allocation");
    check(submit_when_room(to->queue,
                           [&] {
                             return trn_queue_copy(to->queue, to->mem, to_offset, from->mem,
                                                   from_offset, count, nullptr, nullptr);
                           }),
          "trn_queue_copy");
    device_at(to->device_index).synchronize();
  }
  // No raw_deleter: the data pointer is a device address, not the context (the Block) that
  // raw_allocate's contract needs them to be.
};

trn_mem_stats_t pool_stats(int index) {
  trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
  check(trn_pool_get_stats(device_at(index).pool(), &stats), "trn_pool_get_stats");
  return stats;
}

}  // namespace

int device_of_pointer(const void *data) {
  const Block *block =
      live_blocks().find(data, [](const Block &b) { return std::max<uint64_t>(b.size, 1); }).first;
  return block ? block->device_index : -1;
}

trn_queue_t allocation_queue(const c10::DataPtr &data) {
  if (data.get_deleter() != &release || !data.get_context()) return nullptr;
  return static_cast<const Block *>(data.get_context())->queue;
}

void record_stream(const c10::DataPtr &data, trn_queue_t queue) {
  if (data.get_deleter() != &release || !data.get_context()) return;
  auto *block = static_cast<Block *>(data.get_context());
  if (queue == block->queue) return;
  std::lock_guard lock(uses_mutex());
  if (std::find(block->used_on.begin(), block->used_on.end(), queue) == block->used_on.end())
    block->used_on.push_back(queue);
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
