/* A second process for the kernel cache tests: runs one op (y = exp(x), f32 [128, 64]) on core
 * argv[1] of the first simulated device, checks the result, and prints the cache's counters:
 *   ok builds=1 disk_hits=0 corrupt=0 disk_writes=1
 * It uses the environment's TRN_SIM_ROOT and TRN_CACHE_DIR (or TRN_OPS_CACHE). A plain C
 * program: trn_ops.h is C11-clean. Exit status 1 on any failure, with the reason on stderr. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "trn/trn_ops.h"

#define CHECK(call)                                                                       \
  do {                                                                                    \
    trn_result_t r_ = (call);                                                             \
    if (r_ != TRN_SUCCESS) {                                                              \
      fprintf(stderr, "%s: %s (%s | %s)\n", #call, trn_result_name(r_), trn_last_error(), \
              trn_ops_last_error());                                                      \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

enum { kRows = 128, kCols = 64, kElems = kRows * kCols };

int main(int argc, char **argv) {
  const uint32_t core_index = argc > 1 ? (uint32_t)atoi(argv[1]) : 0;
  uint32_t count = 1;
  trn_device_t device;
  CHECK(trn_device_get(&count, &device));
  uint32_t cores = 16;
  trn_core_t core_list[16];
  CHECK(trn_core_get(device, &cores, core_list));
  if (core_index >= cores) return fprintf(stderr, "no core %u\n", core_index), 1;
  trn_pool_desc_t pool_desc = TRN_POOL_DESC_INIT;
  trn_pool_t pool;
  CHECK(trn_pool_create(device, &pool_desc, &pool));
  trn_queue_desc_t queue_desc = TRN_QUEUE_DESC_INIT;
  queue_desc.kind = TRN_QUEUE_KIND_COMPUTE;
  queue_desc.core = core_list[core_index];
  trn_queue_t queue;
  CHECK(trn_queue_create(&queue_desc, &queue));
  trn_mem_t x_mem, y_mem;
  CHECK(trn_mem_alloc(pool, kElems * 4, 0, TRN_MEM_CATEGORY_TENSORS, 0, &x_mem));
  CHECK(trn_mem_alloc(pool, kElems * 4, 0, TRN_MEM_CATEGORY_TENSORS, 0, &y_mem));
  static float x[kElems], y[kElems];
  for (int i = 0; i < kElems; ++i) x[i] = (float)(i % 97) / 50.0f - 1.0f;
  CHECK(trn_mem_write(x_mem, 0, x, sizeof x));
  const int64_t shape[2] = {kRows, kCols};
  trn_ops_tensor_t tx, ty;
  CHECK(trn_ops_tensor_init(&tx, x_mem, 0, TRN_DTYPE_F32, 2, shape));
  CHECK(trn_ops_tensor_init(&ty, y_mem, 0, TRN_DTYPE_F32, 2, shape));
  CHECK(trn_ops_unary(queue, TRN_OPS_EXP, &ty, &tx, NULL));
  CHECK(trn_queue_finish(queue, 60000000000ull));
  CHECK(trn_mem_read(y_mem, 0, y, sizeof y));
  for (int i = 0; i < kElems; ++i)
    if (fabs(y[i] - exp(x[i])) > 1e-5 * exp(x[i]))
      return fprintf(stderr, "y[%d] = %g, want %g\n", i, y[i], exp(x[i])), 1;
  trn_ops_cache_stats_t s = TRN_OPS_CACHE_STATS_INIT;
  CHECK(trn_ops_get_cache_stats(&s));
  printf("ok builds=%llu disk_hits=%llu corrupt=%llu disk_writes=%llu\n",
         (unsigned long long)s.builds, (unsigned long long)s.disk_hits,
         (unsigned long long)s.corrupt_entries, (unsigned long long)s.disk_writes);
  trn_queue_destroy(queue);
  trn_mem_free(x_mem);
  trn_mem_free(y_mem);
  trn_pool_destroy(pool);
  return 0;
}
