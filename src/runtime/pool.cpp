// Pools: segments taken from the driver, cached and sub-allocated, trimmed before out-of-memory
// is reported.
#include <algorithm>

#include "common/parse.hpp"
#include "runtime/error.hpp"
#include "runtime/memory.hpp"
#include "runtime/segment_source.hpp"

namespace trn::rt {

namespace {

uint64_t round_up(uint64_t value, uint64_t to) {
  return (value + to - 1) / to * to;
}

bool is_out_of_memory(trn_result_t r) {
  return r == TRN_ERROR_OUT_OF_DEVICE_MEMORY || r == TRN_ERROR_OUT_OF_HOST_MEMORY;
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

}  // namespace trn::rt
