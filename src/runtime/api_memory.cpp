// C entry points for pools and allocations.
#include <cstdio>
#include <cstring>

#include "common/parse.hpp"
#include "runtime/api_support.hpp"
#include "runtime/driver_error.hpp"
#include "runtime/memory.hpp"
#include "runtime/process_info.hpp"
#include "runtime/session.hpp"

using namespace trn::rt;

namespace {

constexpr uint64_t kMaxAlignment = 2ull << 20;

trn_result_t check_range(const Mem &mem, uint64_t offset, uint64_t size, const void *pointer,
                         const char *pointer_name) {
  if (size > 0 && pointer == nullptr)
    return fail(TRN_ERROR_NULL_POINTER, std::string(pointer_name) + " is NULL");
  if (offset > mem.size || size > mem.size - offset)
    return fail(TRN_ERROR_OUT_OF_RANGE, outside_allocation(offset, size, mem.size));
  return TRN_SUCCESS;
}

// A new allocation's handle; from now on trn_mem_lookup finds it by address.
trn_mem_t publish(Session &session, std::shared_ptr<Mem> mem) {
  mem->handle = session.mems.insert(mem);
  index_memory(mem);
  return to_handle<trn_mem_t>(mem->handle);
}

}  // namespace

extern "C" {

TRN_API trn_result_t trn_pool_create(trn_device_t device_handle, const trn_pool_desc_t *desc,
                                     trn_pool_t *pool_out) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    Device *device = lookup_device(*session, device_handle, &result);
    if (!device) return result;
    trn_pool_desc_t d = TRN_POOL_DESC_INIT;
    if (trn_result_t r = read_desc(desc, TRN_STRUCT_POOL_DESC, "TRN_POOL_DESC_INIT", &d);
        r != TRN_SUCCESS)
      return r;
    if (!pool_out) return fail(TRN_ERROR_NULL_POINTER, "pool is NULL");
    const uint32_t kind_bits = enum_bits(d.kind);
    if (kind_bits != 0 && kind_bits != TRN_POOL_KIND_DEVICE && kind_bits != TRN_POOL_KIND_HOST)
      return fail(TRN_ERROR_INVALID_ENUM, "desc.kind " + std::to_string(kind_bits) +
                                              " is not TRN_POOL_KIND_DEVICE or TRN_POOL_KIND_HOST");
    const trn_pool_kind_t kind =
        kind_bits == TRN_POOL_KIND_HOST ? TRN_POOL_KIND_HOST : TRN_POOL_KIND_DEVICE;
    const trn_device_properties_t &p = device->properties;
    if (kind == TRN_POOL_KIND_DEVICE && d.hbm_bank >= p.hbm_bank_count)
      return fail(TRN_ERROR_OUT_OF_RANGE, "device " + std::to_string(p.index) +
                                              " has HBM banks 0-" +
                                              std::to_string(p.hbm_bank_count - 1) + ", not bank " +
                                              std::to_string(d.hbm_bank));
    // Without a limit of its own a pool is bounded by what the driver can give (the bank).
    const uint64_t limit = d.byte_limit == 0 ? UINT64_MAX : d.byte_limit;
    auto pool =
        std::make_shared<Pool>(*device, kind, kind == TRN_POOL_KIND_DEVICE ? d.hbm_bank : 0, limit);
    {
      std::lock_guard lock(device->memory_mu);
      std::erase_if(device->pools, [](const auto &weak) { return weak.expired(); });
      device->pools.push_back(pool);
    }
    *pool_out = to_handle<trn_pool_t>(session->pools.insert(std::move(pool)));
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_pool_destroy(trn_pool_t handle) {
  return TRN_API_CALL({
    if (handle == nullptr) return TRN_SUCCESS;
    TRN_GET_SESSION(session);
    auto pool = session->pools.find(handle, &result);
    if (!pool) return result;
    // Closing first: from then on an allocation that found the pool fails, and one that came
    // first is counted in its live allocations.
    if (trn_result_t r = pool->destroy(); r != TRN_SUCCESS) return r;
    session->pools.remove(from_handle(handle));
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_pool_trim(trn_pool_t handle) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto pool = session->pools.find(handle, &result);
    if (!pool) return result;
    pool->trim();
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_pool_get_stats(trn_pool_t handle, trn_mem_stats_t *stats) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto pool = session->pools.find(handle, &result);
    if (!pool) return result;
    if (trn_result_t r = check_struct(stats, TRN_STRUCT_MEM_STATS, "stats", "TRN_MEM_STATS_INIT");
        r != TRN_SUCCESS)
      return r;
    trn_mem_stats_t full = TRN_MEM_STATS_INIT;
    pool->stats(&full);
    copy_struct(full, stats);
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_device_get_memory_stats(trn_device_t device_handle, uint32_t bank,
                                                 trn_mem_stats_t *stats) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    Device *device = lookup_device(*session, device_handle, &result);
    if (!device) return result;
    if (trn_result_t r = check_struct(stats, TRN_STRUCT_MEM_STATS, "stats", "TRN_MEM_STATS_INIT");
        r != TRN_SUCCESS)
      return r;
    const trn_device_properties_t &p = device->properties;
    if (bank != UINT32_MAX && bank >= p.hbm_bank_count)
      return fail(TRN_ERROR_OUT_OF_RANGE,
                  "device " + std::to_string(p.index) + " has HBM banks 0-" +
                      std::to_string(p.hbm_bank_count - 1) + " (or UINT32_MAX for all), not " +
                      std::to_string(bank));
    trn_mem_stats_t full = TRN_MEM_STATS_INIT;
    const Driver &driver = *device->driver;
    for (uint32_t b = 0; b < p.hbm_bank_count; ++b) {
      if (bank != UINT32_MAX && b != bank) continue;
      uint64_t bank_bytes = 0, held = 0, largest = 0;
      DriverError err;
      if (trn_result_t r = driver.ops.mem_bank_usage(driver.instance, device->driver_index, b,
                                                     &bank_bytes, &held, &largest, &err);
          r != TRN_SUCCESS)
        return fail(r, err.message);
      full.limit_bytes += bank_bytes;
      full.reserved_bytes += held;
      full.largest_free_bytes = std::max(full.largest_free_bytes, largest);
    }
    std::vector<trn_hal_process_t> processes;
    if (trn_result_t r = list_processes(*device, &processes); r != TRN_SUCCESS) return r;
    for (const auto &process : processes) {
      bool holds = false;
      for (uint32_t b = 0; b < p.hbm_bank_count; ++b) {
        if (bank != UINT32_MAX && b != bank) continue;
        holds |= process.hbm_reserved_bytes[b] > 0;
        for (uint32_t c = 0; c < TRN_MEM_CATEGORY_COUNT; ++c) {
          trn_mem_usage_t &usage = full.by_category[c];
          usage.current_bytes += process.hbm_allocated_bytes[b][c];
          usage.peak_bytes += process.hbm_peak_bytes[b][c];
          usage.allocation_count += process.hbm_allocation_count[b][c];
          full.allocated_bytes += process.hbm_allocated_bytes[b][c];
          full.peak_allocated_bytes += process.hbm_peak_bytes[b][c];
          full.allocation_count += process.hbm_allocation_count[b][c];
          holds |= process.hbm_allocated_bytes[b][c] > 0;
        }
      }
      full.process_count += holds ? 1 : 0;
    }
    full.peak_reserved_bytes = full.reserved_bytes;
    copy_struct(full, stats);
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_mem_alloc(trn_pool_t pool_handle, uint64_t size, uint64_t alignment,
                                   trn_mem_category_t category, uint32_t flags,
                                   trn_mem_t *mem_out) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto pool = session->pools.find(pool_handle, &result);
    if (!pool) return result;
    if (!mem_out) return fail(TRN_ERROR_NULL_POINTER, "mem is NULL");
    if (size == 0)
      return fail(TRN_ERROR_INVALID_ARGUMENT, "size is 0: allocations hold at least one byte");
    if (alignment == 0) alignment = BlockAllocator::kMinBlock;
    if ((alignment & (alignment - 1)) != 0 || alignment > kMaxAlignment)
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  "alignment " + std::to_string(alignment) +
                      " is not a power of two from 1 to 2 MiB (0 means 512 bytes)");
    alignment = std::max(alignment, BlockAllocator::kMinBlock);
    const uint32_t category_bits = enum_bits(category);  // a C caller may pass any value
    if (category_bits >= TRN_MEM_CATEGORY_COUNT)
      return fail(TRN_ERROR_INVALID_ENUM,
                  "category " + std::to_string(category_bits) + " is not a trn_mem_category_t");
    if ((flags & ~TRN_MEM_FLAG_EXPORTABLE) != 0)
      return fail(TRN_ERROR_INVALID_ARGUMENT, "flags " + std::to_string(flags) +
                                                  " has bits other than TRN_MEM_FLAG_EXPORTABLE");
    if ((flags & TRN_MEM_FLAG_EXPORTABLE) && pool->kind() != TRN_POOL_KIND_DEVICE)
      return fail(TRN_ERROR_UNSUPPORTED, "only device memory can be exported");
    constexpr uint64_t kMaxSize = 1ull << 40;
    if (size > kMaxSize)
      return pool->kind() == TRN_POOL_KIND_HOST
                 ? fail(TRN_ERROR_OUT_OF_HOST_MEMORY, "size " + trn::common::format_bytes(size) +
                                                          " is more than 1 TiB of host memory")
                 : fail(TRN_ERROR_OUT_OF_DEVICE_MEMORY, "size " + trn::common::format_bytes(size) +
                                                            " is larger than any device memory");
    std::shared_ptr<Mem> mem;
    if (trn_result_t r = pool->allocate(
            size, alignment, static_cast<trn_mem_category_t>(category_bits), flags, pool, &mem);
        r != TRN_SUCCESS)
      return r;
    *mem_out = publish(*session, std::move(mem));
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_mem_free(trn_mem_t handle) {
  return TRN_API_CALL({
    if (handle == nullptr) return TRN_SUCCESS;
    TRN_GET_SESSION(session);
    auto mem = session->mems.remove(from_handle(handle));
    if (!mem) return invalid_handle(HandleKind::mem, from_handle(handle));
    release_memory(*mem);
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_mem_get_info(trn_mem_t handle, trn_mem_info_t *info) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto *mem = session->mems.find_fast(handle, &result);
    if (!mem) return result;
    if (trn_result_t r = check_struct(info, TRN_STRUCT_MEM_INFO, "info", "TRN_MEM_INFO_INIT");
        r != TRN_SUCCESS)
      return r;
    trn_mem_info_t full = TRN_MEM_INFO_INIT;
    full.device_address = mem->address;
    full.size = mem->size;
    full.category = mem->category;
    full.kind = mem->kind;
    full.device_index = mem->device->index;
    full.hbm_bank = mem->bank;
    full.imported = mem->imported ? 1 : 0;
    full.flags = mem->flags;
    full.registered = mem->registered ? 1 : 0;
    copy_struct(full, info);
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_mem_map(trn_mem_t handle, void **host_pointer) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto *mem = session->mems.find_fast(handle, &result);
    if (!mem) return result;
    if (!host_pointer) return fail(TRN_ERROR_NULL_POINTER, "host_pointer is NULL");
    UseGate::Hold in_use(mem->use);
    if (!in_use.entered()) return invalid_handle(HandleKind::mem, from_handle(handle));  // freed
    if (trn_result_t r = map_for_write(*mem, 0, mem->size); r != TRN_SUCCESS) return r;
    *host_pointer = mem->host;
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_mem_write(trn_mem_t handle, uint64_t offset, const void *source,
                                   uint64_t size) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto *mem = session->mems.find_fast(handle, &result);
    if (!mem) return result;
    if (trn_result_t r = check_range(*mem, offset, size, source, "source"); r != TRN_SUCCESS)
      return r;
    UseGate::Hold in_use(mem->use);
    if (!in_use.entered()) return invalid_handle(HandleKind::mem, from_handle(handle));  // freed
    return write_range(*mem, offset, source, size);
  });
}

TRN_API trn_result_t trn_mem_read(trn_mem_t handle, uint64_t offset, void *destination,
                                  uint64_t size) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto *mem = session->mems.find_fast(handle, &result);
    if (!mem) return result;
    if (trn_result_t r = check_range(*mem, offset, size, destination, "destination");
        r != TRN_SUCCESS)
      return r;
    UseGate::Hold in_use(mem->use);
    if (!in_use.entered()) return invalid_handle(HandleKind::mem, from_handle(handle));  // freed
    return read_range(*mem, offset, destination, size);
  });
}

TRN_API trn_result_t trn_mem_set(trn_mem_t handle, uint64_t offset, uint8_t value, uint64_t size) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto *mem = session->mems.find_fast(handle, &result);
    if (!mem) return result;
    if (trn_result_t r = check_range(*mem, offset, size, mem->host, "memory"); r != TRN_SUCCESS)
      return r;
    UseGate::Hold in_use(mem->use);
    if (!in_use.entered()) return invalid_handle(HandleKind::mem, from_handle(handle));  // freed
    if (trn_result_t r = map_for_write(*mem, offset, size); r != TRN_SUCCESS) return r;
    if (size) std::memset(mem->host + offset, value, size);
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_mem_export(trn_mem_t handle, trn_ipc_handle_t *ipc) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto *mem = session->mems.find_fast(handle, &result);
    if (!mem) return result;
    if (!ipc) return fail(TRN_ERROR_NULL_POINTER, "handle is NULL");
    return export_memory(*mem, ipc);
  });
}

TRN_API trn_result_t trn_mem_import(trn_device_t device_handle, const trn_ipc_handle_t *ipc,
                                    trn_mem_t *mem_out) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    Device *device = lookup_device(*session, device_handle, &result);
    if (!device) return result;
    if (!ipc) return fail(TRN_ERROR_NULL_POINTER, "handle is NULL");
    if (!mem_out) return fail(TRN_ERROR_NULL_POINTER, "mem is NULL");
    std::shared_ptr<Mem> mem;
    if (trn_result_t r = import_memory(*device, *ipc, &mem); r != TRN_SUCCESS) return r;
    *mem_out = publish(*session, std::move(mem));
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_mem_register_host(trn_device_t device_handle, void *ptr, uint64_t size,
                                           uint32_t flags, trn_mem_t *mem_out) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    Device *device = lookup_device(*session, device_handle, &result);
    if (!device) return result;
    if (!ptr) return fail(TRN_ERROR_NULL_POINTER, "ptr is NULL");
    if (!mem_out) return fail(TRN_ERROR_NULL_POINTER, "mem is NULL");
    if (size == 0) return fail(TRN_ERROR_INVALID_ARGUMENT, "size is 0: register at least one byte");
    if ((flags & ~TRN_MEM_REGISTER_READ_ONLY) != 0)
      return fail(
          TRN_ERROR_INVALID_ARGUMENT,
          "flags " + std::to_string(flags) + " has bits other than TRN_MEM_REGISTER_READ_ONLY");
    std::shared_ptr<Mem> mem;
    if (trn_result_t r = register_host_memory(*device, ptr, size, flags, &mem); r != TRN_SUCCESS)
      return r;
    *mem_out = publish(*session, std::move(mem));
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_mem_lookup(trn_device_t device_handle, uint64_t device_address,
                                    trn_mem_t *mem_out, uint64_t *offset) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    Device *device = lookup_device(*session, device_handle, &result);
    if (!device) return result;
    if (!mem_out) return fail(TRN_ERROR_NULL_POINTER, "mem is NULL");
    auto mem = find_memory(*device, device_address);
    if (!mem) {
      char text[24];
      std::snprintf(text, sizeof text, "0x%016llx",
                    static_cast<unsigned long long>(device_address));
      return fail(TRN_ERROR_NOT_FOUND,
                  std::string("no live allocation of this process on device ") +
                      std::to_string(device->index) + " holds address " + text +
                      " (freed, never allocated, or another device's)");
    }
    *mem_out = to_handle<trn_mem_t>(mem->handle);
    if (offset) *offset = device_address - mem->address;
    return TRN_SUCCESS;
  });
}

}  // extern "C"
