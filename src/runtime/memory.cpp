#include "runtime/memory.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/parse.hpp"
#include "runtime/driver_error.hpp"
#include "runtime/error.hpp"
#include "runtime/host_memory.hpp"
#include "runtime/process_info.hpp"
#include "runtime/session.hpp"

namespace trn::rt {

namespace {

uint64_t round_up(uint64_t value, uint64_t to) {
  return (value + to - 1) / to * to;
}

bool is_out_of_memory(trn_result_t r) {
  return r == TRN_ERROR_OUT_OF_DEVICE_MEMORY || r == TRN_ERROR_OUT_OF_HOST_MEMORY;
}

const trn_hal_ops_t &ops(const Device &device) {
  return device.driver->ops;
}
trn_hal_instance_t *instance(const Device &device) {
  return device.driver->instance;
}

uint64_t chunk_bytes(const Device &device) {
  return device.info.chunk_bytes ? device.info.chunk_bytes : (2ull << 20);
}

// Device memory from the driver as one segment of whole chunks, mapped for host access.
trn_result_t reserve_device_range(Device &device, uint32_t bank, uint64_t bytes, Segment *segment,
                                  std::string *why) {
  DriverError err;
  trn_result_t r = ops(device).mem_reserve(instance(device), device.driver_index, bank, bytes,
                                           &segment->address, &err);
  // Mapped for reading: what the host writes through it is backed first (map_for_write).
  if (r == TRN_SUCCESS)
    r = ops(device).mem_map(instance(device), device.driver_index, segment->address, bytes,
                            TRN_HAL_MAP_READ, &segment->host, &err);
  if (r != TRN_SUCCESS) {
    if (segment->address)
      ops(device).mem_release(instance(device), device.driver_index, segment->address, bytes,
                              nullptr);
    *why = err.message;
    return r;
  }
  segment->size = bytes;
  return TRN_SUCCESS;
}

void release_device_range(Device &device, const Segment &segment) {
  DriverError err;
  if (ops(device).mem_release(instance(device), device.driver_index, segment.address, segment.size,
                              &err) != TRN_SUCCESS)
    common::logger("runtime")->warn("returning device memory: {}", err.message);
}

// Host memory the device's DMA engines can reach: mapped here, registered with the driver, which
// gives it the device address that copies use.
trn_result_t take_host_range(Device &device, uint64_t bytes, Segment *segment, std::string *why) {
  void *memory = nullptr;
  if (trn_result_t r = map_host_memory(bytes, &memory, why); r != TRN_SUCCESS) return r;
  DriverError err;
  if (trn_result_t r = ops(device).mem_register_host(instance(device), device.driver_index, memory,
                                                     bytes, &segment->address, &err);
      r != TRN_SUCCESS) {
    unmap_host_memory(memory, bytes);
    *why = std::string("registering host memory with the driver: ") + err.message;
    return r;
  }
  segment->host = memory;
  segment->size = bytes;
  return TRN_SUCCESS;
}

void give_host_range_back(Device &device, const Segment &segment) {
  DriverError err;
  if (ops(device).mem_unregister_host(instance(device), device.driver_index, segment.address,
                                      &err) != TRN_SUCCESS)
    common::logger("runtime")->warn("unregistering host memory: {}", err.message);
  unmap_host_memory(segment.host, segment.size);
}

}  // namespace

Pool::Pool(Device &device, trn_pool_kind_t kind, uint32_t bank, uint64_t limit)
    : device_(device), kind_(kind), bank_(bank), limit_(limit) {}

// Segments go back to the driver through trim() and release_all() only: a destructor that runs
// in a forked child must not return its parent's memory.
Pool::~Pool() {
  blocks_.clear();
}  // before stores_ frees the segments it walks

trn_result_t Pool::take_segment(uint64_t bytes, std::unique_ptr<SegmentStore> *out,
                                std::string *why) {
  auto store = std::make_unique<SegmentStore>();
  Segment &segment = store->segment;
  trn_result_t r = kind_ == TRN_POOL_KIND_HOST
                       ? take_host_range(device_, bytes, &segment, why)
                       : reserve_device_range(device_, bank_, bytes, &segment, why);
  if (r != TRN_SUCCESS) return r;
  segment.cookie = store.get();
  reserved_ += bytes;
  peak_reserved_ = std::max(peak_reserved_, reserved_);
  *out = std::move(store);
  return TRN_SUCCESS;
}

void Pool::give_back(SegmentStore &store) {
  if (kind_ == TRN_POOL_KIND_HOST)
    give_host_range_back(device_, store.segment);
  else
    release_device_range(device_, store.segment);
  reserved_ -= store.segment.size;
}

uint64_t Pool::trim_locked(uint64_t smaller_than) {
  uint64_t bytes = 0;
  for (Segment *segment : blocks_.release_free_segments(smaller_than)) {
    auto it = std::find_if(stores_.begin(), stores_.end(),
                           [&](const auto &store) { return &store->segment == segment; });
    bytes += segment->size;
    give_back(**it);
    stores_.erase(it);
  }
  return bytes;
}

trn_result_t Pool::check_limit_locked(uint64_t bytes, std::string *why) {
  if (reserved_ + bytes <= limit_) return TRN_SUCCESS;
  trim_locked();
  if (reserved_ + bytes <= limit_) return TRN_SUCCESS;
  *why = "the pool's byte limit is " + common::format_bytes(limit_) + " and it holds " +
         common::format_bytes(reserved_) + " already";
  return TRN_ERROR_OUT_OF_DEVICE_MEMORY;
}

uint64_t Pool::trim() {
  std::lock_guard lock(mu_);
  return trim_locked();
}

void Pool::release_all() {
  std::lock_guard lock(mu_);
  release_all_locked();
}

void Pool::release_all_locked() {
  closed_ = true;
  blocks_.clear();  // first: it walks the segments' block lists
  for (auto &store : stores_) give_back(*store);
  stores_.clear();
}

trn_result_t Pool::destroy() {
  std::lock_guard lock(mu_);
  if (closed_) return fail(TRN_ERROR_INVALID_HANDLE, "the pool was destroyed by another call");
  if (count_ > 0)
    return fail(TRN_ERROR_HANDLE_IN_USE, "the pool still has " + std::to_string(count_) +
                                             " live allocations: free them first");
  release_all_locked();
  return TRN_SUCCESS;
}

trn_result_t Pool::allocate_locked(uint64_t size, uint64_t alignment, Block **block,
                                   std::string *why) {
  *block = blocks_.allocate(size, alignment);
  if (*block) return TRN_SUCCESS;
  // The preferred segment (shared with later requests of its class), else the smallest that
  // serves this request: when the pool's limit or the bank's free ranges leave less room.
  const uint64_t minimum = BlockAllocator::minimum_segment_size(size, alignment);
  uint64_t bytes = BlockAllocator::segment_size_for(size, alignment);
  if (trn_result_t r = check_limit_locked(minimum, why); r != TRN_SUCCESS) return r;
  if (limit_ != UINT64_MAX && reserved_ + bytes > limit_)
    bytes = std::max(minimum, (limit_ - reserved_) / BlockAllocator::kLargeRounding *
                                  BlockAllocator::kLargeRounding);
  // Cached large segments too small for this request would only sit beside the new one: give
  // them back first. Their chunks are contiguous in the bank, so the driver can hand the same
  // range out again as one larger segment (what PyTorch's expandable segments achieve).
  if (!BlockAllocator::is_small(size, alignment)) trim_locked(bytes);
  std::unique_ptr<SegmentStore> store;
  trn_result_t r = take_segment(bytes, &store, why);
  if (is_out_of_memory(r) && bytes > minimum) {
    bytes = minimum;
    r = take_segment(bytes, &store, why);
  }
  if (is_out_of_memory(r) && trim_locked() > 0) r = take_segment(bytes, &store, why);
  if (r != TRN_SUCCESS) return r;
  store->segment.small = BlockAllocator::is_small(size, alignment);
  blocks_.add_segment(&store->segment);
  stores_.push_back(std::move(store));
  *block = blocks_.allocate(size, alignment);
  return TRN_SUCCESS;
}

void Pool::charge(const Mem &mem, int sign) {
  const int64_t bytes = sign * static_cast<int64_t>(mem.charged);
  allocated_ += static_cast<uint64_t>(bytes);
  count_ += static_cast<uint64_t>(sign);
  peak_allocated_ = std::max(peak_allocated_, allocated_);
  trn_mem_usage_t &usage = by_category_[mem.category];
  usage.current_bytes += static_cast<uint64_t>(bytes);
  usage.allocation_count += static_cast<uint64_t>(sign);
  usage.peak_bytes = std::max(usage.peak_bytes, usage.current_bytes);
  if (kind_ == TRN_POOL_KIND_DEVICE)
    ops(device_).mem_account(instance(device_), device_.driver_index, bank_, mem.category, bytes,
                             sign);
}

trn_result_t Pool::allocate_dedicated(uint64_t size, Mem &mem, std::string *why) {
  const uint64_t bytes = round_up(size == 0 ? 1 : size, chunk_bytes(device_));
  if (trn_result_t r = check_limit_locked(bytes, why); r != TRN_SUCCESS) return r;
  mem.dedicated = std::make_unique<SegmentStore>();
  trn_result_t r = reserve_device_range(device_, bank_, bytes, &mem.dedicated->segment, why);
  if (r == TRN_ERROR_OUT_OF_DEVICE_MEMORY && trim_locked() > 0)
    r = reserve_device_range(device_, bank_, bytes, &mem.dedicated->segment, why);
  if (r != TRN_SUCCESS) {
    mem.dedicated.reset();
    return r;
  }
  mem.address = mem.dedicated->segment.address;
  mem.host = static_cast<char *>(mem.dedicated->segment.host);
  mem.charged = bytes;
  reserved_ += bytes;
  peak_reserved_ = std::max(peak_reserved_, reserved_);
  return TRN_SUCCESS;
}

trn_result_t Pool::allocate(uint64_t size, uint64_t alignment, trn_mem_category_t category,
                            uint32_t flags, std::shared_ptr<Pool> self, std::shared_ptr<Mem> *out) {
  auto mem = std::make_shared<Mem>();
  mem->pool = std::move(self);
  mem->device = &device_;
  mem->kind = kind_;
  mem->bank = bank_;
  mem->category = category;
  mem->flags = flags;
  mem->size = size;
  std::string why;
  trn_result_t r = TRN_SUCCESS;
  for (int attempt = 0; attempt < 2; ++attempt) {
    {
      std::lock_guard lock(mu_);
      if (closed_)
        return fail(TRN_ERROR_INVALID_HANDLE,
                    "the pool was destroyed (or its runtime shut down) while this call ran");
      if (flags & TRN_MEM_FLAG_EXPORTABLE) {
        r = allocate_dedicated(size, *mem, &why);
      } else {
        Block *block = nullptr;
        r = allocate_locked(size, alignment, &block, &why);
        if (r == TRN_SUCCESS) {
          mem->block = block;
          mem->address = block->address;
          mem->charged = block->size;
          mem->host = static_cast<char *>(block->segment->host) +
                      (block->address - block->segment->address);
        }
      }
      if (r == TRN_SUCCESS) {
        if (attempt > 0) ++oom_retries_;
        charge(*mem, +1);
        *out = std::move(mem);
        return TRN_SUCCESS;
      }
    }
    if (!is_out_of_memory(r)) break;
    // Other pools of this process may cache what this one needs: return it all, try again.
    trim_device_pools(device_);
  }
  if (r == TRN_ERROR_OUT_OF_DEVICE_MEMORY && kind_ == TRN_POOL_KIND_DEVICE)
    return fail(r, describe_oom(device_, bank_, size, alignment, category, why));
  return fail(r, why);
}

void Pool::free(Mem &mem) {
  std::lock_guard lock(mu_);
  charge(mem, -1);
  // After a shutdown released the pool (a free racing with it), the block went with its segment.
  if (mem.block && !closed_) blocks_.free(mem.block);
  mem.block = nullptr;
}

void Pool::forget_dedicated(uint64_t bytes) {
  std::lock_guard lock(mu_);
  reserved_ -= bytes;
}

void Pool::stats(trn_mem_stats_t *stats) {
  std::lock_guard lock(mu_);
  stats->limit_bytes = limit_ != UINT64_MAX            ? limit_
                       : kind_ == TRN_POOL_KIND_DEVICE ? device_.properties.hbm_bank_bytes[bank_]
                                                       : 0;
  stats->reserved_bytes = reserved_;
  stats->peak_reserved_bytes = peak_reserved_;
  stats->allocated_bytes = allocated_;
  stats->peak_allocated_bytes = peak_allocated_;
  stats->allocation_count = count_;
  stats->largest_free_bytes = blocks_.largest_free();
  stats->oom_retries = oom_retries_;
  stats->process_count = 1;
  std::copy(std::begin(by_category_), std::end(by_category_), stats->by_category);
}

void trim_device_pools(Device &device) {
  std::vector<std::shared_ptr<Pool>> pools;
  {
    std::lock_guard lock(device.memory_mu);
    for (auto &weak : device.pools)
      if (auto pool = weak.lock()) pools.push_back(std::move(pool));
  }
  for (auto &pool : pools) pool->trim();
}

std::string outside_allocation(uint64_t offset, uint64_t size, uint64_t allocation_size) {
  const std::string end = size > UINT64_MAX - offset
                              ? std::to_string(offset) + " + " + std::to_string(size)
                              : std::to_string(offset + size);
  return "bytes " + std::to_string(offset) + ".." + end + " are outside the allocation of " +
         std::to_string(allocation_size) + " bytes";
}

std::string describe_oom(Device &device, uint32_t bank, uint64_t size, uint64_t alignment,
                         trn_mem_category_t category, const std::string &cause) {
  // The physical cores nearest the bank, as the driver lays them out.
  uint32_t first_core = UINT32_MAX, last_core = 0;
  for (const Core *core : device.cores)
    if (core->layout.hbm_bank == bank) {
      first_core = std::min(first_core, core->layout.first_physical_core);
      last_core = std::max(last_core,
                           core->layout.first_physical_core + core->layout.physical_core_count - 1);
    }
  const std::string near = first_core == UINT32_MAX
                               ? ""
                               : " (physical cores " + std::to_string(first_core) + "-" +
                                     std::to_string(last_core) + ")";
  std::string text = "cannot allocate " + common::format_bytes(size) + " (alignment " +
                     common::format_bytes(alignment) + ", category " +
                     trn_mem_category_name(category) + ") in HBM bank " + std::to_string(bank) +
                     " of device " + std::to_string(device.index) + near + ": " + cause;
  uint64_t bank_bytes = 0, held = 0, largest = 0;
  DriverError err;
  if (ops(device).mem_bank_usage(instance(device), device.driver_index, bank, &bank_bytes, &held,
                                 &largest, &err) == TRN_SUCCESS)
    text += ". The bank has " + common::format_bytes(bank_bytes) + ", " +
            common::format_bytes(held) + " held, largest free range " +
            common::format_bytes(largest) + ".";
  std::vector<trn_hal_process_t> processes;
  if (list_processes(device, &processes) != TRN_SUCCESS) return text;
  text += " Who holds the bank:\n";
  char line[512];
  std::snprintf(line, sizeof line, "  %-8s %-28s %10s %10s", "PID", "COMMAND", "RESERVED",
                "ALLOCATED");
  text += line;
  for (uint32_t c = 0; c < TRN_MEM_CATEGORY_COUNT; ++c) {
    std::snprintf(line, sizeof line, " %11s",
                  trn_mem_category_name(static_cast<trn_mem_category_t>(c)));
    text += line;
  }
  text += "\n";
  for (const auto &process : processes) {
    uint64_t allocated = 0;
    for (uint32_t c = 0; c < TRN_MEM_CATEGORY_COUNT; ++c)
      allocated += process.hbm_allocated_bytes[bank][c];
    if (process.hbm_reserved_bytes[bank] == 0 && allocated == 0) continue;
    std::string command = process.command;
    if (command.size() > 28) command = command.substr(0, 25) + "...";
    std::snprintf(line, sizeof line, "  %-8d %-28s %10s %10s", process.pid, command.c_str(),
                  common::format_bytes(process.hbm_reserved_bytes[bank]).c_str(),
                  common::format_bytes(allocated).c_str());
    text += line;
    for (uint32_t c = 0; c < TRN_MEM_CATEGORY_COUNT; ++c) {
      std::snprintf(line, sizeof line, " %11s",
                    common::format_bytes(process.hbm_allocated_bytes[bank][c]).c_str());
      text += line;
    }
    text += process.pid == getpid() ? "  (this process)\n" : "\n";
  }
  text +=
      "Free memory in those processes, use another bank (trn_pool_desc_t.hbm_bank), or "
      "lower the request.";
  return text;
}

trn_result_t map_for_write(Mem &mem, uint64_t offset, uint64_t bytes) {
  if (mem.kind == TRN_POOL_KIND_HOST || bytes == 0) return TRN_SUCCESS;
  Device &device = *mem.device;
  DriverError err;
  void *host = nullptr;
  if (trn_result_t r =
          ops(device).mem_map(instance(device), device.driver_index, mem.address + offset, bytes,
                              TRN_HAL_MAP_WRITE, &host, &err);
      r != TRN_SUCCESS)
    return fail(r, err.message);
  return TRN_SUCCESS;
}

trn_result_t write_range(Mem &mem, uint64_t offset, const void *source, uint64_t bytes) {
  if (bytes == 0) return TRN_SUCCESS;
  if (mem.kind == TRN_POOL_KIND_HOST) {
    std::memcpy(mem.host + offset, source, bytes);
    return TRN_SUCCESS;
  }
  Device &device = *mem.device;
  DriverError err;
  if (trn_result_t r = ops(device).mem_write(instance(device), device.driver_index,
                                             mem.address + offset, source, bytes, &err);
      r != TRN_SUCCESS)
    return fail(r, err.message);
  return TRN_SUCCESS;
}

trn_result_t read_range(Mem &mem, uint64_t offset, void *destination, uint64_t bytes) {
  if (bytes == 0) return TRN_SUCCESS;
  if (mem.kind == TRN_POOL_KIND_HOST) {
    std::memcpy(destination, mem.host + offset, bytes);
    return TRN_SUCCESS;
  }
  Device &device = *mem.device;
  DriverError err;
  if (trn_result_t r = ops(device).mem_read(instance(device), device.driver_index,
                                            mem.address + offset, destination, bytes, &err);
      r != TRN_SUCCESS)
    return fail(r, err.message);
  return TRN_SUCCESS;
}

// ---- IPC ------------------------------------------------------------------------------------

namespace {

constexpr char kIpcMagic[8] = {'T', 'R', 'N', 'I', 'P', 'C', '1', '\0'};

struct IpcHandle {
  char magic[8];
  uint32_t device_index;
  uint32_t record;
  uint64_t id;
  uint64_t address;
  uint64_t size;
  uint32_t category;
  uint32_t exporter_pid;
  uint8_t reserved[16];
};
static_assert(sizeof(IpcHandle) == sizeof(trn_ipc_handle_t), "handle layout");

}  // namespace

trn_result_t export_memory(Mem &mem, trn_ipc_handle_t *handle) {
  Device &device = *mem.device;
  {
    // Not while another thread frees it (release_memory closes `use` and waits for its users).
    UseGate::Hold in_use(mem.use);
    if (!in_use.entered())
      return fail(TRN_ERROR_INVALID_HANDLE,
                  "the memory handle is stale: the memory was freed while this call ran");
    if (!mem.dedicated || mem.imported)
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  mem.imported ? "imported memory cannot be exported again: export the original"
                               : "the allocation was not made with TRN_MEM_FLAG_EXPORTABLE");
    std::lock_guard lock(device.memory_mu);
    if (!mem.exported) {
      DriverError err;
      trn_result_t r = ops(device).mem_export(instance(device), device.driver_index, mem.address,
                                              mem.dedicated->segment.size, &mem.export_record,
                                              &mem.export_id, &err);
      if (r != TRN_SUCCESS) return fail(r, err.message);
      mem.exported = true;
      ++device.export_holds[{mem.export_record, mem.export_id}];
    }
  }
  IpcHandle out{};
  std::memcpy(out.magic, kIpcMagic, sizeof kIpcMagic);
  out.device_index = device.index;
  out.record = mem.export_record;
  out.id = mem.export_id;
  out.address = mem.address;
  out.size = mem.size;
  out.category = static_cast<uint32_t>(mem.category);
  out.exporter_pid = static_cast<uint32_t>(getpid());
  std::memcpy(handle->bytes, &out, sizeof out);
  return TRN_SUCCESS;
}

trn_result_t import_memory(Device &device, const trn_ipc_handle_t &handle,
                           std::shared_ptr<Mem> *out) {
  IpcHandle in;
  std::memcpy(&in, handle.bytes, sizeof in);
  if (std::memcmp(in.magic, kIpcMagic, sizeof kIpcMagic) != 0 ||
      in.category >= TRN_MEM_CATEGORY_COUNT)
    return fail(TRN_ERROR_INVALID_ARGUMENT,
                "the bytes are not a trn IPC handle (made by trn_mem_export)");
  if (in.device_index != device.index)
    return fail(TRN_ERROR_INVALID_ARGUMENT, "the handle is memory of device " +
                                                std::to_string(in.device_index) +
                                                ", not of device " + std::to_string(device.index));
  auto mem = std::make_shared<Mem>();
  mem->device = &device;
  mem->dedicated = std::make_unique<SegmentStore>();
  DriverError err;
  uint64_t bytes = 0;
  // The driver keeps one hold per process and export, which export_holds counts: both change
  // together, so that a free of another holder cannot let go of the hold this import relies on.
  std::lock_guard lock(device.memory_mu);
  trn_result_t r = ops(device).mem_import(instance(device), device.driver_index, in.record, in.id,
                                          &mem->address, &bytes, &mem->bank, &err);
  if (r != TRN_SUCCESS)
    return fail(
        r, std::string(err.message) + " (exported by pid " + std::to_string(in.exporter_pid) + ")");
  auto let_go = [&] {
    // Only if no allocation of this process already holds the export.
    if (!device.export_holds.count({in.record, in.id}))
      ops(device).mem_unexport(instance(device), device.driver_index, in.record, in.id, nullptr);
  };
  if (mem->address != in.address || in.size > bytes) {
    let_go();
    return fail(TRN_ERROR_INVALID_ARGUMENT, "the handle does not match the exported memory");
  }
  Segment &segment = mem->dedicated->segment;
  segment.address = mem->address;
  segment.size = bytes;
  r = ops(device).mem_map(instance(device), device.driver_index, mem->address, bytes,
                          TRN_HAL_MAP_READ, &segment.host, &err);
  if (r != TRN_SUCCESS) {
    let_go();
    return fail(r, err.message);
  }
  mem->host = static_cast<char *>(segment.host);
  mem->size = in.size;
  mem->charged = bytes;
  mem->category = static_cast<trn_mem_category_t>(in.category);
  mem->imported = true;
  mem->exported = true;
  mem->export_record = in.record;
  mem->export_id = in.id;
  ++device.export_holds[{in.record, in.id}];
  *out = std::move(mem);
  return TRN_SUCCESS;
}

trn_result_t register_host_memory(Device &device, void *host, uint64_t size, uint32_t flags,
                                  std::shared_ptr<Mem> *out) {
  auto mem = std::make_shared<Mem>();
  DriverError err;
  if (trn_result_t r = ops(device).mem_register_host(instance(device), device.driver_index, host,
                                                     size, &mem->address, &err);
      r != TRN_SUCCESS)
    return fail(r, std::string(ops(device).name) + " driver: " + err.message);
  mem->device = &device;
  mem->kind = TRN_POOL_KIND_HOST;
  mem->flags = flags;
  mem->size = size;
  mem->host = static_cast<char *>(host);
  mem->registered = true;
  *out = std::move(mem);
  return TRN_SUCCESS;
}

void index_memory(const std::shared_ptr<Mem> &mem) {
  Device &device = *mem->device;
  std::lock_guard lock(device.index_mu);
  device.by_address.emplace(mem->address, mem);
}

namespace {

void unindex_memory(Mem &mem) {
  Device &device = *mem.device;
  std::lock_guard lock(device.index_mu);
  auto [first, last] = device.by_address.equal_range(mem.address);
  for (auto it = first; it != last; ++it)
    if (auto known = it->second.lock(); !known || known.get() == &mem) {
      device.by_address.erase(it);
      return;
    }
}

}  // namespace

std::shared_ptr<Mem> find_memory(Device &device, uint64_t address) {
  std::lock_guard lock(device.index_mu);
  // Allocations do not overlap (an import of this process's own export shares the exporter's
  // range exactly): the nearest live one starting at or below the address holds it, or none.
  for (auto it = device.by_address.upper_bound(address); it != device.by_address.begin();) {
    --it;
    if (auto mem = it->second.lock()) return address - mem->address < mem->size ? mem : nullptr;
  }
  return nullptr;
}

void release_memory(Mem &mem) {
  if (!mem.use.close()) return;  // freed already
  Device &device = *mem.device;
  unindex_memory(mem);
  if (mem.registered) {
    DriverError err;
    if (ops(device).mem_unregister_host(instance(device), device.driver_index, mem.address, &err) !=
        TRN_SUCCESS)
      common::logger("runtime")->warn("unregistering host memory: {}", err.message);
    return;
  }
  if (mem.pool) mem.pool->free(mem);
  if (!mem.dedicated) return;
  DriverError err;
  trn_result_t r = TRN_SUCCESS;
  if (mem.exported) {
    // The count and the driver's hold change together (see import_memory).
    std::lock_guard lock(device.memory_mu);
    auto it = device.export_holds.find({mem.export_record, mem.export_id});
    const bool last = it == device.export_holds.end() || --it->second == 0;
    if (last && it != device.export_holds.end()) device.export_holds.erase(it);
    if (last)
      r = ops(device).mem_unexport(instance(device), device.driver_index, mem.export_record,
                                   mem.export_id, &err);
  } else
    r = ops(device).mem_release(instance(device), device.driver_index, mem.address,
                                mem.dedicated->segment.size, &err);
  if (r != TRN_SUCCESS) common::logger("runtime")->warn("returning device memory: {}", err.message);
  if (mem.pool) mem.pool->forget_dedicated(mem.dedicated->segment.size);
  mem.dedicated.reset();
}

}  // namespace trn::rt
