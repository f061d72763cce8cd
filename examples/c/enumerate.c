/* Lists the devices and their properties, then claims the first free core, shows who owns it
 * and gives it back. Plain C11 against the public header. */
#include <stdio.h>
#include <stdlib.h>

#include "trn/trn.h"

static int check(trn_result_t result, const char *what) {
  if (result == TRN_SUCCESS) return 0;
  fprintf(stderr, "%s failed: %s: %s\n", what, trn_result_name(result), trn_last_error());
  return 1;
}

static void print_device(trn_device_t device) {
  trn_device_properties_t p = TRN_DEVICE_PROPERTIES_INIT;
  if (check(trn_device_get_properties(device, &p), "trn_device_get_properties")) return;
  printf("device %u: %s, %s, driver %s, bus %s\n", p.index, p.name,
         trn_generation_name(p.generation), p.driver, p.pci_bdf);
  printf("  cores: %u logical (LNC=%u, %u physical), ids %u-%u, %u visible to this process\n",
         p.core_count, p.logical_core_config, p.physical_core_count, p.first_core_id,
         p.first_core_id + p.core_count - 1, p.visible_core_count);
  printf("  HBM: %.0f GiB in %u banks, %.2f TB/s\n", (double)p.hbm_bytes / (1u << 30),
         p.hbm_bank_count, (double)p.hbm_bandwidth_bytes_per_s / 1e12);
  printf(
      "  per core: SBUF %u x %u KiB, PSUM %u x %u KiB (%u banks), %u DMA engines, %u semaphores\n",
      p.sbuf_partitions, p.sbuf_bytes_per_partition / 1024, p.sbuf_partitions,
      p.psum_bytes_per_partition / 1024, p.psum_banks, p.dma_engines_per_core,
      p.semaphores_per_core);
  printf("  clocks: Tensor %.2f GHz, Vector %.2f GHz, Scalar %.2f GHz, GpSimd %.2f GHz\n",
         (double)p.tensor_clock_hz / 1e9, (double)p.vector_clock_hz / 1e9,
         (double)p.scalar_clock_hz / 1e9, (double)p.gpsimd_clock_hz / 1e9);
  printf("  peak per core: %.1f TFLOPS bf16, %.1f TFLOPS fp32\n",
         (double)p.peak_bf16_flops_per_core / 1e12, (double)p.peak_fp32_flops_per_core / 1e12);

  uint32_t count = 0;
  if (check(trn_device_get_neighbors(device, &count, NULL), "trn_device_get_neighbors")) return;
  if (count > 0) {
    uint32_t *neighbors = malloc(count * sizeof *neighbors);
    if (neighbors && trn_device_get_neighbors(device, &count, neighbors) == TRN_SUCCESS) {
      printf("  linked to devices:");
      for (uint32_t i = 0; i < count; ++i) printf(" %u", neighbors[i]);
      printf("\n");
    }
    free(neighbors);
  }
}

/* Claims the first core nobody owns; returns 0 on success. */
static int claim_a_core(trn_device_t device) {
  uint32_t count = 0;
  if (check(trn_core_get(device, &count, NULL), "trn_core_get")) return 1;
  trn_core_t *cores = malloc((count ? count : 1) * sizeof *cores);
  if (!cores || check(trn_core_get(device, &count, cores), "trn_core_get")) {
    free(cores);
    return 1;
  }
  int status = 1;
  for (uint32_t i = 0; i < count && status != 0; ++i) {
    trn_result_t result = trn_core_acquire(cores[i]);
    trn_core_properties_t cp = TRN_CORE_PROPERTIES_INIT;
    trn_core_get_properties(cores[i], &cp);
    if (result == TRN_ERROR_CORE_BUSY) {
      printf("core %u is busy: %s\n", cp.global_id, trn_last_error());
      continue;
    }
    if (check(result, "trn_core_acquire")) break;
    trn_process_info_t owner = TRN_PROCESS_INFO_INIT;
    if (check(trn_core_get_owner(cores[i], &owner), "trn_core_get_owner")) break;
    printf("claimed core %u (device %u core %u, HBM bank %u): owner pid %d (%s)\n", cp.global_id,
           cp.device_index, cp.index, cp.hbm_bank, owner.pid, owner.command);
    status = check(trn_core_release(cores[i]), "trn_core_release");
    if (status == 0) printf("released core %u\n", cp.global_id);
  }
  if (count == 0) printf("no core of device 0 is visible to this process\n");
  free(cores);
  return status;
}

int main(void) {
  printf("trn %s (API %u.%u)\n", trn_get_version_string(), TRN_VERSION_MAJOR(trn_get_version()),
         TRN_VERSION_MINOR(trn_get_version()));
  uint32_t count = 0;
  if (check(trn_device_get(&count, NULL), "trn_device_get")) return 1;
  if (count == 0) {
    printf("no devices\n");
    return 0;
  }
  trn_device_t *devices = malloc(count * sizeof *devices);
  if (!devices || check(trn_device_get(&count, devices), "trn_device_get")) return 1;
  for (uint32_t i = 0; i < count; ++i) print_device(devices[i]);
  int status = claim_a_core(devices[0]);
  free(devices);
  trn_runtime_shutdown();
  return status;
}
