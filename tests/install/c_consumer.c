/* A C program built with `pkg-config --cflags --libs trn-ops trn-comm` against an installed trn:
 * on two ranks of one process, fills each rank's buffer with an eager op (libtrn_ops) and
 * all-reduces them (libtrn_comm), then checks the sum. */
#include <stdio.h>
#include <trn/trn.h>
#include <trn/trn_comm.h>
#include <trn/trn_ops.h>

#define COUNT 1000

static int failed(trn_result_t r, const char *what, const char *why) {
  if (r == TRN_SUCCESS) return 0;
  fprintf(stderr, "%s: %s\n", what, why);
  return 1;
}

int main(void) {
  uint32_t count = 1, core_count = 2;
  trn_device_t device = NULL;
  trn_core_t cores[2] = {NULL, NULL};
  if (failed(trn_device_get(&count, &device), "trn_device_get", trn_last_error()) || count == 0 ||
      failed(trn_core_get(device, &core_count, cores), "trn_core_get", trn_last_error()) ||
      core_count < 2)
    return 1;
  trn_pool_desc_t pool_desc = TRN_POOL_DESC_INIT;
  trn_pool_t pool = NULL;
  if (failed(trn_pool_create(device, &pool_desc, &pool), "trn_pool_create", trn_last_error()))
    return 1;
  trn_queue_t queues[2] = {NULL, NULL};
  trn_mem_t bufs[2] = {NULL, NULL};
  for (uint32_t r = 0; r < 2; ++r) {
    trn_queue_desc_t queue_desc = TRN_QUEUE_DESC_INIT;
    queue_desc.kind = TRN_QUEUE_KIND_COMPUTE;
    queue_desc.core = cores[r];
    if (failed(trn_queue_create(&queue_desc, &queues[r]), "trn_queue_create", trn_last_error()) ||
        failed(trn_mem_alloc(pool, COUNT * 4, 0, TRN_MEM_CATEGORY_TENSORS, 0, &bufs[r]),
               "trn_mem_alloc", trn_last_error()))
      return 1;
    trn_ops_tensor_t t;
    const int64_t shape[1] = {COUNT};
    if (failed(trn_ops_tensor_init(&t, bufs[r], 0, TRN_DTYPE_F32, 1, shape), "trn_ops_tensor_init",
               trn_ops_last_error()) ||
        failed(trn_ops_fill(queues[r], &t, r + 1.5, NULL), "trn_ops_fill", trn_ops_last_error()))
      return 1;
  }
  trn_comm_t comms[2] = {NULL, NULL};
  if (failed(trn_comm_init_all(2, cores, NULL, comms), "trn_comm_init_all", trn_comm_last_error()))
    return 1;
  for (uint32_t r = 0; r < 2; ++r) {
    trn_comm_buffer_t buf = {bufs[r], 0};
    if (failed(trn_comm_all_reduce(comms[r], queues[r], buf, buf, COUNT, TRN_DTYPE_F32,
                                   TRN_COMM_SUM, NULL, NULL),
               "trn_comm_all_reduce", trn_comm_last_error()))
      return 1;
  }
  for (uint32_t r = 0; r < 2; ++r) {
    float out[COUNT];
    if (failed(trn_comm_synchronize(comms[r], 60000000000ull), "trn_comm_synchronize",
               trn_comm_last_error()) ||
        failed(trn_mem_read(bufs[r], 0, out, sizeof out), "trn_mem_read", trn_last_error()))
      return 1;
    for (uint32_t i = 0; i < COUNT; ++i)
      if (out[i] != 4.0f) {
        fprintf(stderr, "rank %u element %u is %g, not 4\n", r, i, out[i]);
        return 1;
      }
  }
  printf("trn-ops %u.%u and trn-comm from C: 2 ranks summed %d elements\n",
         TRN_VERSION_MAJOR(trn_ops_get_version()), TRN_VERSION_MINOR(trn_ops_get_version()), COUNT);
  for (uint32_t r = 0; r < 2; ++r) {
    trn_comm_destroy(comms[r]);
    trn_queue_destroy(queues[r]);
    trn_mem_free(bufs[r]);
  }
  trn_pool_destroy(pool);
  return 0;
}
