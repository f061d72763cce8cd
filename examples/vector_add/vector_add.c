/* Runs the vector_add kernel (vector_add.s, assembled by trn-as at build time) on core 0 of
 * device 0: loads the binary, uploads two inputs, launches on a compute queue, checks out = a + b
 * on the host and prints the simulated time. Plain C11 against the public header.
 *
 * Usage: trn-example-vector-add [KERNEL.trnk]   (default: vector_add.trnk next to the program)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trn/trn.h"

#define ARG_COUNT 3
#define FINISH_TIMEOUT_NS 60000000000ull /* 60 s */

static int check(trn_result_t result, const char *what) {
  if (result == TRN_SUCCESS) return 0;
  fprintf(stderr, "vector_add: %s failed: %s: %s\n", what, trn_result_name(result),
          trn_last_error());
  return 1;
}

/* The kernel next to the program: argv[0]'s directory + "vector_add.trnk". Caller frees. */
static char *default_kernel_path(const char *argv0) {
  static const char kName[] = "vector_add.trnk";
  const char *slash = argv0 ? strrchr(argv0, '/') : NULL;
  size_t dir = slash ? (size_t)(slash - argv0) + 1 : 0;
  char *path = malloc(dir + sizeof kName);
  if (!path) return NULL;
  if (dir) memcpy(path, argv0, dir);
  memcpy(path + dir, kName, sizeof kName);
  return path;
}

/* What the program holds; everything is released by cleanup() whatever was created. */
typedef struct state {
  trn_kernel_t kernel;
  trn_pool_t pool;
  trn_mem_t mem[ARG_COUNT];
  trn_queue_t queue;
  trn_profile_t profile;
  float *host[ARG_COUNT];
} state_t;

static void cleanup(state_t *s) {
  trn_profile_destroy(s->profile);
  trn_queue_destroy(s->queue);
  for (int i = 0; i < ARG_COUNT; ++i) {
    trn_mem_free(s->mem[i]);
    free(s->host[i]);
  }
  trn_pool_destroy(s->pool);
  trn_kernel_destroy(s->kernel);
  trn_runtime_shutdown();
}

static int run(const char *kernel_path, state_t *s) {
  uint32_t count = 1;
  trn_device_t device = NULL;
  if (check(trn_device_get(&count, &device), "trn_device_get")) return 1;
  if (count == 0) {
    fprintf(stderr, "vector_add: no device (see trn-ls)\n");
    return 1;
  }
  trn_core_t core = NULL;
  count = 1;
  if (check(trn_core_get(device, &count, &core), "trn_core_get")) return 1;
  if (count == 0) {
    fprintf(stderr, "vector_add: no core of device 0 is visible to this process\n");
    return 1;
  }
  trn_core_properties_t cp = TRN_CORE_PROPERTIES_INIT;
  if (check(trn_core_get_properties(core, &cp), "trn_core_get_properties")) return 1;

  /* The kernel, and what its arguments are: out = a + b, all of one f32 shape. */
  if (check(trn_kernel_load_file(device, kernel_path, &s->kernel), "trn_kernel_load_file"))
    return 1;
  trn_kernel_arg_t args[ARG_COUNT];
  for (int i = 0; i < ARG_COUNT; ++i) args[i] = TRN_KERNEL_ARG_INIT;
  count = ARG_COUNT;
  if (check(trn_kernel_get_args(s->kernel, &count, args), "trn_kernel_get_args")) return 1;
  if (count != ARG_COUNT || args[0].dtype != TRN_DTYPE_F32 || args[1].bytes != args[0].bytes ||
      args[2].bytes != args[0].bytes || args[2].direction != TRN_ARG_OUT) {
    fprintf(stderr, "vector_add: %s is not an f32 kernel out = f(a, b) of one shape\n",
            kernel_path);
    return 1;
  }
  const uint64_t bytes = args[0].bytes;
  const size_t n = (size_t)(bytes / sizeof(float));
  trn_kernel_properties_t kp = TRN_KERNEL_PROPERTIES_INIT;
  if (check(trn_kernel_get_properties(s->kernel, &kp), "trn_kernel_get_properties")) return 1;
  printf("kernel %s from %s: %s [", kp.name, kernel_path, args[2].name);
  for (uint32_t d = 0; d < args[0].rank; ++d)
    printf("%s%llu", d ? ", " : "", (unsigned long long)args[0].shape[d]);
  printf("] = %s + %s (f32)\n", args[0].name, args[1].name);

  /* Device memory in the HBM bank nearest core 0, and the inputs. */
  trn_pool_desc_t pool_desc = TRN_POOL_DESC_INIT;
  pool_desc.kind = TRN_POOL_KIND_DEVICE;
  pool_desc.hbm_bank = cp.hbm_bank;
  if (check(trn_pool_create(device, &pool_desc, &s->pool), "trn_pool_create")) return 1;
  for (int i = 0; i < ARG_COUNT; ++i) {
    if (check(trn_mem_alloc(s->pool, bytes, 0, TRN_MEM_CATEGORY_TENSORS, 0, &s->mem[i]),
              "trn_mem_alloc"))
      return 1;
    s->host[i] = malloc(bytes);
    if (!s->host[i]) {
      fprintf(stderr, "vector_add: out of host memory\n");
      return 1;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    s->host[0][i] = (float)i * 0.5f;
    s->host[1][i] = 1000.0f - (float)(i % 977);
  }
  /* out starts as NaN (all bytes 0xff), so an element the kernel does not write shows. */
  if (check(trn_mem_write(s->mem[0], 0, s->host[0], bytes), "trn_mem_write") ||
      check(trn_mem_write(s->mem[1], 0, s->host[1], bytes), "trn_mem_write") ||
      check(trn_mem_set(s->mem[2], 0, 0xff, bytes), "trn_mem_set"))
    return 1;

  /* Launch on a compute queue of core 0 (creating it acquires the core) and wait. */
  trn_queue_desc_t queue_desc = TRN_QUEUE_DESC_INIT;
  queue_desc.kind = TRN_QUEUE_KIND_COMPUTE;
  queue_desc.core = core;
  if (check(trn_queue_create(&queue_desc, &s->queue), "trn_queue_create")) return 1;
  if (check(trn_profile_create(0, &s->profile), "trn_profile_create")) return 1;
  trn_kernel_binding_t bindings[ARG_COUNT];
  for (int i = 0; i < ARG_COUNT; ++i) {
    bindings[i].mem = s->mem[i];
    bindings[i].offset = 0;
  }
  trn_launch_desc_t launch = TRN_LAUNCH_DESC_INIT;
  launch.kernel = s->kernel;
  launch.args = bindings;
  launch.arg_count = ARG_COUNT;
  launch.profile = s->profile;
  if (check(trn_queue_launch(s->queue, &launch, NULL, NULL), "trn_queue_launch")) return 1;
  trn_result_t finished = trn_queue_finish(s->queue, FINISH_TIMEOUT_NS);
  if (finished != TRN_SUCCESS) {
    trn_queue_fault_t fault = TRN_QUEUE_FAULT_INIT;
    if (trn_queue_get_fault(s->queue, &fault) == TRN_SUCCESS && fault.result != TRN_SUCCESS)
      fprintf(stderr, "vector_add: kernel fault on %s[%u] %s: %s\n", fault.engine,
              fault.instruction, fault.opcode, fault.reason);
    return check(finished, "trn_queue_finish");
  }

  /* The result, checked on the host. */
  if (check(trn_mem_read(s->mem[2], 0, s->host[2], bytes), "trn_mem_read")) return 1;
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    float expected = s->host[0][i] + s->host[1][i];
    if (s->host[2][i] != expected) {
      if (wrong++ < 5)
        fprintf(stderr, "vector_add: out[%zu] = %g, expected %g\n", i, (double)s->host[2][i],
                (double)expected);
    }
  }
  if (wrong) {
    fprintf(stderr, "vector_add: %zu of %zu elements are wrong\n", wrong, n);
    return 1;
  }
  printf("result: all %zu elements match a + b\n", n);

  trn_profile_summary_t summary = TRN_PROFILE_SUMMARY_INIT;
  if (check(trn_profile_get_summary(s->profile, &summary), "trn_profile_get_summary")) return 1;
  printf(
      "simulated time: %.3f us on core %u (Vector engine active %.1f%%, DMA %.1f MiB in %llu "
      "transfers)\n",
      (double)summary.total_ns / 1e3, cp.global_id,
      summary.engine_active_percent[TRN_ENGINE_VECTOR],
      (double)summary.dma_bytes / (1024.0 * 1024.0), (unsigned long long)summary.dma_transfers);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 2) {
    fprintf(stderr, "usage: %s [KERNEL.trnk]\n", argv[0]);
    return 2;
  }
  char *kernel_path = argc == 2 ? NULL : default_kernel_path(argv[0]);
  if (argc < 2 && !kernel_path) {
    fprintf(stderr, "vector_add: out of host memory\n");
    return 1;
  }
  state_t s;
  memset(&s, 0, sizeof s);
  int status = run(argc == 2 ? argv[1] : kernel_path, &s);
  cleanup(&s);
  free(kernel_path);
  if (status == 0) printf("vector_add: OK\n");
  return status;
}
