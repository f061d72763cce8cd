// Pools and allocations: the process side of device memory. A pool caches memory it took from
// the driver (whole chunks, as segments) and sub-allocates it with a BlockAllocator; it gives
// cached memory back on trim, and trims itself and the process's other pools of the device
// before it reports out-of-memory. One file per job: pool.cpp (pools), segment_source.* (the
// driver ranges segments are), memory_report.cpp (out-of-memory and range messages),
// host_access.cpp (host reads and writes), memory_ipc.cpp (export and import), memory_index.cpp
// (lookup by address), memory_lifetime.cpp (host registration and every allocation's release).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/alloc/block_allocator.hpp"
#include "runtime/use_gate.hpp"
#include "trn/trn.h"

namespace trn::rt {

struct Device;
class Pool;

// A segment the pool took from the driver (its storage is the driver's business).
struct SegmentStore {
  Segment segment;
};

struct Mem {
  std::shared_ptr<Pool> pool;  // null for imported memory
  Device *device = nullptr;
  trn_pool_kind_t kind = TRN_POOL_KIND_DEVICE;
  uint32_t bank = 0;
  trn_mem_category_t category = TRN_MEM_CATEGORY_TENSORS;
  uint32_t flags = 0;
  uint64_t address = 0;
  uint64_t size = 0;       // asked for
  uint64_t charged = 0;    // counted in statistics (the block or the dedicated range)
  char *host = nullptr;    // host view of `address`
  Block *block = nullptr;  // sub-allocated memory
  std::unique_ptr<SegmentStore> dedicated;  // exportable or imported memory: whole chunks
  bool imported = false;
  bool registered = false;  // caller memory (trn_mem_register_host): unregistered, never freed
  bool exported = false;    // guarded by Device::memory_mu
  uint64_t handle = 0;      // its handle in the session (trn_mem_lookup returns it)
  // Users of the memory (queue commands, host copies) enter it; freeing closes it and waits for
  // them, so memory is never returned under a copy that runs, and a copy that starts after the
  // free is turned away and faults instead. Closed = freed.
  UseGate use;
  uint32_t export_record = 0;
  uint64_t export_id = 0;

  // Registered with TRN_MEM_REGISTER_READ_ONLY: the device may not write it.
  bool device_read_only() const { return registered && (flags & TRN_MEM_REGISTER_READ_ONLY); }
};

class Pool {
 public:
  Pool(Device &device, trn_pool_kind_t kind, uint32_t bank, uint64_t limit);
  ~Pool();  // returns every segment
  Pool(const Pool &) = delete;
  Pool &operator=(const Pool &) = delete;

  trn_result_t allocate(uint64_t size, uint64_t alignment, trn_mem_category_t category,
                        uint32_t flags, std::shared_ptr<Pool> self, std::shared_ptr<Mem> *out);
  void free(Mem &mem);
  // Returns cached free segments to the driver; how many bytes.
  uint64_t trim();
  // Returns every segment (shutdown); later allocations fail with TRN_ERROR_INVALID_HANDLE.
  void release_all();
  // Destroys the pool unless allocations of it are live (TRN_ERROR_HANDLE_IN_USE) or it was
  // destroyed already (TRN_ERROR_INVALID_HANDLE): the check and the end of allocation happen
  // under one lock, so an allocation racing with it either comes first (and the destroy reports
  // it) or fails.
  trn_result_t destroy();
  // A dedicated range of this pool went back to the driver.
  void forget_dedicated(uint64_t bytes);
  void stats(trn_mem_stats_t *stats);

  Device &device() const { return device_; }
  trn_pool_kind_t kind() const { return kind_; }
  uint32_t bank() const { return bank_; }

 private:
  uint64_t trim_locked(uint64_t smaller_than = UINT64_MAX);
  void release_all_locked();
  trn_result_t check_limit_locked(uint64_t bytes, std::string *why);
  trn_result_t allocate_locked(uint64_t size, uint64_t alignment, Block **block, std::string *why);
  trn_result_t allocate_dedicated(uint64_t size, Mem &mem, std::string *why);
  trn_result_t take_segment(uint64_t bytes, std::unique_ptr<SegmentStore> *out, std::string *why);
  void give_back(SegmentStore &store);
  void charge(const Mem &mem, int sign);

  Device &device_;
  const trn_pool_kind_t kind_;
  const uint32_t bank_;
  const uint64_t limit_;
  std::mutex mu_;  // guards everything below
  BlockAllocator blocks_;
  std::vector<std::unique_ptr<SegmentStore>> stores_;
  uint64_t reserved_ = 0, peak_reserved_ = 0;
  uint64_t allocated_ = 0, peak_allocated_ = 0, count_ = 0, oom_retries_ = 0;
  trn_mem_usage_t by_category_[TRN_MEM_CATEGORY_COUNT] = {};
  bool closed_ = false;  // destroyed or released: allocates nothing more
};

// Out-of-memory report: what was asked and who holds the bank.
std::string describe_oom(Device &device, uint32_t bank, uint64_t size, uint64_t alignment,
                         trn_mem_category_t category, const std::string &cause);

// "bytes 4..4100 are outside the allocation of 4096 bytes"; a range whose end passes 2^64 is
// written as offset + size, never as a wrapped end.
std::string outside_allocation(uint64_t offset, uint64_t size, uint64_t allocation_size);

// Gives the process's cached memory of a device back (every pool), before reporting OOM.
void trim_device_pools(Device &device);

// Host access to an allocation through the driver: a range the host is about to write through
// its mapping is backed first (a full store fails here, never as a fault in the writer); copies
// in and out (memory never written reads as zeros).
trn_result_t map_for_write(Mem &mem, uint64_t offset, uint64_t bytes);
trn_result_t write_range(Mem &mem, uint64_t offset, const void *source, uint64_t bytes);
trn_result_t read_range(Mem &mem, uint64_t offset, void *destination, uint64_t bytes);

trn_result_t import_memory(Device &device, const trn_ipc_handle_t &handle,
                           std::shared_ptr<Mem> *out);
// Caller memory registered with the driver for the device's DMA.
trn_result_t register_host_memory(Device &device, void *host, uint64_t size, uint32_t flags,
                                  std::shared_ptr<Mem> *out);
// The device's index of live allocations by address (trn_mem_lookup): entered once the
// allocation has its handle, left when it is released.
void index_memory(const std::shared_ptr<Mem> &mem);
void unindex_memory(Mem &mem);
std::shared_ptr<Mem> find_memory(Device &device, uint64_t address);
trn_result_t export_memory(Mem &mem, trn_ipc_handle_t *handle);
// Frees what the allocation holds (block, dedicated range or import).
void release_memory(Mem &mem);

}  // namespace trn::rt
