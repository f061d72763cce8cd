// Devices and cores: figures, neighbours, logical-core layout, claims, processes, clocks.
#include <algorithm>
#include <cstdio>

#include "sim/generation.hpp"
#include "sim/ops_support.hpp"
#include "sim/ops_table.hpp"
#include "sim/topology.hpp"

namespace trn::sim {
namespace {

uint32_t sim_device_count(const trn_hal_instance_t *instance) {
  return instance ? static_cast<uint32_t>(instance->runtimes.size()) : 0;
}

trn_result_t sim_status(const trn_hal_instance_t *instance, char *detail, uint32_t detail_size) {
  if (instance == nullptr) return TRN_ERROR_NULL_POINTER;
  if (detail && detail_size)
    std::snprintf(detail, detail_size, "%s", instance->status_detail.c_str());
  return instance->status;
}

const GenerationSpec &spec_of(const DeviceState &state) {
  return generation_spec(static_cast<trn_generation_t>(state.header().generation));
}

// LNC=n is supported when the generation pairs cores (trn2 and later) and n divides the cores.
uint32_t lnc_mask(const DeviceState &state) {
  uint32_t mask = 1u << 1;
  const uint32_t cores = state.header().physical_cores;
  if (spec_of(state).generation != TRN_GENERATION_TRN1 && cores % 2 == 0) mask |= 1u << 2;
  return mask;
}

trn_result_t check_cores(const DeviceState &state, uint32_t first, uint32_t count,
                         std::string *why) {
  if (count == 0 || first >= state.header().physical_cores ||
      count > state.header().physical_cores - first) {
    *why = "physical cores " + std::to_string(first) + "+" + std::to_string(count) +
           " are outside device " + std::to_string(state.header().device_index) + " (it has " +
           std::to_string(state.header().physical_cores) + ")";
    return TRN_ERROR_OUT_OF_RANGE;
  }
  return TRN_SUCCESS;
}

trn_result_t sim_device_properties(trn_hal_instance_t *instance, uint32_t device,
                                   trn_device_properties_t *p, trn_hal_device_info_t *info,
                                   trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceRuntime &runtime, std::string *) {
    const DeviceState &state = runtime.state();
    const StateHeader &h = state.header();
    const GenerationSpec &spec = spec_of(state);
    if (p) {
      p->generation = spec.generation;
      std::snprintf(p->name, sizeof p->name, "%s (simulated)", spec.chip_name);
      std::snprintf(p->driver, sizeof p->driver, "sim");
      std::snprintf(p->pci_bdf, sizeof p->pci_bdf, "0000:%02x:00.0", 0x10 + device);
      p->physical_core_count = h.physical_cores;
      p->hbm_bytes = h.hbm_bytes;
      p->hbm_bank_count = spec.hbm_banks;
      for (uint32_t bank = 0; bank < TRN_MAX_HBM_BANKS; ++bank)
        p->hbm_bank_bytes[bank] = bank < spec.hbm_banks ? h.hbm_bytes / spec.hbm_banks : 0;
      p->hbm_bandwidth_bytes_per_s = spec.hbm_bandwidth_bytes_per_s;
      // Every core figure is the ISA's core table, which the executor runs with too.
      const isa::CoreSpec &core = spec.core();
      p->dma_engines_per_core = core.dma_queues;
      p->semaphores_per_core = core.semaphores;
      p->sbuf_partitions = core.partitions;
      p->sbuf_bytes_per_partition = core.sbuf_bytes_per_partition;
      p->sbuf_usable_bytes_per_partition = core.sbuf_usable_bytes_per_partition;
      p->psum_bytes_per_partition = core.psum_bytes_per_partition;
      p->psum_banks = core.psum_banks;
      p->tensor_clock_hz = core.tensor_hz;
      p->vector_clock_hz = core.vector_hz;
      p->scalar_clock_hz = core.scalar_hz;
      p->gpsimd_clock_hz = core.gpsimd_hz;
      p->peak_bf16_flops_per_core = core.tensor_hz * isa::kBf16FlopsPerTensorCycle;
      p->peak_fp32_flops_per_core = core.tensor_hz * isa::kFp32FlopsPerTensorCycle;
      p->dma_engine_bytes_per_s = core.dma_engine_bytes_per_s;
      p->neighbor_count = static_cast<uint32_t>(
          torus_neighbors(device, static_cast<uint32_t>(instance->runtimes.size())).size());
    }
    if (info) {
      info->lnc_mask = lnc_mask(state);
      info->reserved = 0;
      info->chunk_bytes = kChunkBytes;
    }
    return TRN_SUCCESS;
  });
}

trn_result_t sim_device_neighbors(trn_hal_instance_t *instance, uint32_t device, uint32_t *count,
                                  uint32_t *neighbors, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceRuntime &, std::string *why) {
    if (count == nullptr) {
      *why = "device_neighbors needs a count";
      return TRN_ERROR_NULL_POINTER;
    }
    const auto all = torus_neighbors(device, static_cast<uint32_t>(instance->runtimes.size()));
    if (neighbors == nullptr) {
      *count = static_cast<uint32_t>(all.size());
    } else {
      *count = std::min<uint32_t>(*count, static_cast<uint32_t>(all.size()));
      std::copy_n(all.begin(), *count, neighbors);
    }
    return TRN_SUCCESS;
  });
}

trn_result_t sim_core_info(trn_hal_instance_t *instance, uint32_t device, uint32_t lnc,
                           uint32_t core, trn_hal_core_info_t *info, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceRuntime &runtime, std::string *why) {
    const DeviceState &state = runtime.state();
    const uint32_t cores = state.header().physical_cores;
    const uint32_t mask = lnc_mask(state);
    if (lnc >= 32 || !(mask >> lnc & 1u)) {
      *why = "device " + std::to_string(device) + " (" + spec_of(state).name() +
             ") does not support LNC=" + std::to_string(lnc) + ": use " +
             (mask & (1u << 2) ? "1 or 2" : "1");
      return TRN_ERROR_OUT_OF_RANGE;
    }
    if (core >= cores / lnc) {
      *why = "device " + std::to_string(device) + " has " + std::to_string(cores / lnc) +
             " logical cores at LNC=" + std::to_string(lnc) + ", so no core " +
             std::to_string(core);
      return TRN_ERROR_OUT_OF_RANGE;
    }
    const uint32_t banks = spec_of(state).hbm_banks;
    info->first_physical_core = core * lnc;
    info->physical_core_count = lnc;
    info->hbm_bank = info->first_physical_core / std::max(1u, cores / std::max(1u, banks));
    info->dma_engines = spec_of(state).core().dma_queues * lnc;
    info->physical_core_mask = ((uint64_t{1} << lnc) - 1) << info->first_physical_core;
    return TRN_SUCCESS;
  });
}

trn_result_t sim_core_claim(trn_hal_instance_t *instance, uint32_t device, uint32_t first,
                            uint32_t count, uint32_t *busy_core, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceRuntime &runtime, std::string *why) {
    if (trn_result_t r = check_cores(runtime.state(), first, count, why); r != TRN_SUCCESS)
      return r;
    uint32_t busy = 0;
    trn_result_t r = runtime.state().claim(instance->identity, first, count, &busy, why);
    if (busy_core) *busy_core = busy;
    return r;
  });
}

trn_result_t sim_core_unclaim(trn_hal_instance_t *instance, uint32_t device, uint32_t first,
                              uint32_t count, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceRuntime &runtime, std::string *why) {
    if (trn_result_t r = check_cores(runtime.state(), first, count, why); r != TRN_SUCCESS)
      return r;
    return runtime.state().unclaim(first, count, why);
  });
}

trn_result_t sim_core_owner(trn_hal_instance_t *instance, uint32_t device, uint32_t core,
                            trn_hal_process_t *owner, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceRuntime &runtime, std::string *why) {
    if (trn_result_t r = check_cores(runtime.state(), core, 1, why); r != TRN_SUCCESS) return r;
    return runtime.state().owner(core, owner, why);
  });
}

trn_result_t sim_process_list(trn_hal_instance_t *instance, uint32_t device, uint32_t *count,
                              trn_hal_process_t *processes, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceRuntime &runtime, std::string *why) {
    return runtime.state().processes(count, processes, why);
  });
}

uint64_t sim_device_time_ns(trn_hal_instance_t *instance, uint32_t device) {
  if (instance == nullptr || device >= instance->runtimes.size()) return 0;
  return instance->runtimes[device]->time_ns();
}

}  // namespace

void fill_device_ops(trn_hal_ops_t *ops) {
  ops->device_count = sim_device_count;
  ops->status = sim_status;
  ops->device_properties = sim_device_properties;
  ops->device_neighbors = sim_device_neighbors;
  ops->core_info = sim_core_info;
  ops->core_claim = sim_core_claim;
  ops->core_unclaim = sim_core_unclaim;
  ops->core_owner = sim_core_owner;
  ops->process_list = sim_process_list;
  ops->device_time_ns = sim_device_time_ns;
}

}  // namespace trn::sim
