/* trn-test-holder: the other process of the multi-process tests. Plain C11 against the public
 * header.
 *
 *   trn-test-holder CORE...
 *     acquires the cores of device 0, prints "ready <pid>" and holds them until its standard
 *     input closes or 60 s pass. Prints "busy <core> <result>" and exits 3 if one is taken.
 *
 *   trn-test-holder --work CORE...
 *     runs memsets on a queue on each core until stdin closes (see work_mode).
 *
 *   trn-test-holder --cycle ITERATIONS OCCUPANCY_FILE CORE...
 *     repeatedly acquires and releases the cores (at most ITERATIONS rounds, at most 10 s).
 *     While it owns a core it marks the core in OCCUPANCY_FILE (one int per core, shared by all
 *     cycling processes); finding the mark of another process there is an exclusivity
 *     violation. Prints "cycles <acquired> <busy> <violations>".
 *
 *   trn-test-holder --alloc BANK MIB PATTERN
 *     allocates MIB MiB in HBM bank BANK of device 0, fills it with the byte PATTERN (decimal or
 *     0x hex), prints "allocated <pid> <bytes> <device address in hex>" and holds it until its
 *     standard input closes or 60 s pass; then frees it, destroys its pool and exits 0.
 *
 *   trn-test-holder --export MIB PATTERN
 *     allocates MIB MiB in bank 0 with TRN_MEM_FLAG_EXPORTABLE, fills it with PATTERN, exports it
 *     and prints "exported <the 64 handle bytes in hex>". The line "free" on its standard input
 *     frees the allocation (prints "freed"); it exits 0 when its standard input closes (freeing
 *     the allocation if it still holds it) or after 60 s.
 *
 *   trn-test-holder --import HEX PATTERN
 *     imports the handle HEX (as --export prints it) on device 0, checks every byte equals
 *     PATTERN and prints "imported ok" or "imported bad <detail>", then holds the import until
 *     its standard input closes or 60 s pass; then frees it and exits 0.
 *
 * Failures of the API print "error <what>: <trn_last_error()>" and exit 2. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "trn/trn.h"

static trn_core_t *get_cores(uint32_t *count) {
  uint32_t device_count = 1;
  trn_device_t device;
  if (trn_device_get(&device_count, &device) != TRN_SUCCESS || device_count == 0) {
    fprintf(stderr, "holder: no device: %s\n", trn_last_error());
    exit(2);
  }
  *count = 0;
  trn_core_get(device, count, NULL);
  trn_core_t *cores = calloc(*count ? *count : 1, sizeof *cores);
  if (!cores || trn_core_get(device, count, cores) != TRN_SUCCESS) exit(2);
  return cores;
}

static uint32_t core_arg(const char *text, uint32_t count) {
  uint32_t index = (uint32_t)strtoul(text, NULL, 10);
  if (index >= count) {
    fprintf(stderr, "holder: no core %u\n", index);
    exit(2);
  }
  return index;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cycle(int argc, char **argv) {
  if (argc < 5) return 2;
  long iterations = strtol(argv[2], NULL, 10);
  int fd = open(argv[3], O_RDWR);
  if (fd < 0) return 2;
  _Atomic int *occupancy = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (occupancy == MAP_FAILED) return 2;
  uint32_t count;
  trn_core_t *cores = get_cores(&count);
  const int me = (int)getpid();
  long acquired = 0, busy = 0, violations = 0;
  const double deadline = now_s() + 10.0;
  for (long i = 0; i < iterations && now_s() < deadline; ++i) {
    for (int a = 4; a < argc; ++a) {
      uint32_t index = core_arg(argv[a], count);
      trn_result_t result = trn_core_acquire(cores[index]);
      if (result == TRN_ERROR_CORE_BUSY) {
        ++busy;
        continue;
      }
      if (result != TRN_SUCCESS) {
        fprintf(stderr, "holder: acquire: %s\n", trn_last_error());
        return 2;
      }
      ++acquired;
      int expected = 0;
      if (!atomic_compare_exchange_strong(&occupancy[index], &expected, me)) ++violations;
      expected = me;
      if (!atomic_compare_exchange_strong(&occupancy[index], &expected, 0)) ++violations;
      if (trn_core_release(cores[index]) != TRN_SUCCESS) {
        fprintf(stderr, "holder: release: %s\n", trn_last_error());
        return 2;
      }
    }
  }
  printf("cycles %ld %ld %ld\n", acquired, busy, violations);
  free(cores);
  return 0;
}

// ---- memory modes ------------------------------------------------------------------------------

static trn_device_t device0(void) {
  uint32_t device_count = 1;
  trn_device_t device;
  if (trn_device_get(&device_count, &device) != TRN_SUCCESS || device_count == 0) {
    printf("error device: %s\n", trn_last_error());
    exit(2);
  }
  return device;
}

static void check(trn_result_t result, const char *what) {
  if (result == TRN_SUCCESS) return;
  printf("error %s: %s %s\n", what, trn_result_name(result), trn_last_error());
  fflush(stdout);
  exit(2);
}

static uint8_t pattern_arg(const char *text) {
  return (uint8_t)(strtoul(text, NULL, 0) & 0xffu);
}

// Standard input, line by line, with a deadline: 1 and the line (newline removed) in `line`,
// 0 at end of input, -1 at the deadline.
static int read_stdin_line(char *line, size_t capacity, double deadline) {
  static char buffer[256];
  static size_t used = 0;
  for (;;) {
    char *newline = memchr(buffer, '\n', used);
    if (newline) {
      size_t length = (size_t)(newline - buffer);
      size_t copy = length < capacity - 1 ? length : capacity - 1;
      memcpy(line, buffer, copy);
      line[copy] = '\0';
      used -= length + 1;
      memmove(buffer, newline + 1, used);
      return 1;
    }
    double left = deadline - now_s();
    if (left <= 0) return -1;
    struct pollfd in = {0, POLLIN, 0};
    if (poll(&in, 1, (int)(left * 1000.0) + 1) <= 0) continue;
    if (used == sizeof buffer) used = 0;  // an overlong line: drop it
    ssize_t n = read(0, buffer + used, sizeof buffer - used);
    if (n <= 0) return 0;
    used += (size_t)n;
  }
}

static void wait_for_stdin_close(void) {
  char line[64];
  const double deadline = now_s() + 60.0;
  while (read_stdin_line(line, sizeof line, deadline) == 1) {
  }
}

static trn_pool_t pool_in_bank(trn_device_t device, uint32_t bank) {
  trn_pool_desc_t desc = TRN_POOL_DESC_INIT;
  desc.kind = TRN_POOL_KIND_DEVICE;
  desc.hbm_bank = bank;
  trn_pool_t pool;
  check(trn_pool_create(device, &desc, &pool), "pool_create");
  return pool;
}

static int alloc_mode(int argc, char **argv) {
  if (argc < 5) return 2;
  const uint32_t bank = (uint32_t)strtoul(argv[2], NULL, 10);
  const uint64_t bytes = (uint64_t)strtoull(argv[3], NULL, 10) << 20;
  const uint8_t pattern = pattern_arg(argv[4]);
  trn_pool_t pool = pool_in_bank(device0(), bank);
  trn_mem_t mem;
  check(trn_mem_alloc(pool, bytes, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem), "mem_alloc");
  check(trn_mem_set(mem, 0, pattern, bytes), "mem_set");
  trn_mem_info_t info = TRN_MEM_INFO_INIT;
  check(trn_mem_get_info(mem, &info), "mem_get_info");
  printf("allocated %d %llu %llx\n", (int)getpid(), (unsigned long long)bytes,
         (unsigned long long)info.device_address);
  fflush(stdout);
  wait_for_stdin_close();
  check(trn_mem_free(mem), "mem_free");
  check(trn_pool_destroy(pool), "pool_destroy");
  return 0;
}

static int export_mode(int argc, char **argv) {
  if (argc < 4) return 2;
  const uint64_t bytes = (uint64_t)strtoull(argv[2], NULL, 10) << 20;
  const uint8_t pattern = pattern_arg(argv[3]);
  trn_pool_t pool = pool_in_bank(device0(), 0);
  trn_mem_t mem;
  check(trn_mem_alloc(pool, bytes, 0, TRN_MEM_CATEGORY_TENSORS, TRN_MEM_FLAG_EXPORTABLE, &mem),
        "mem_alloc");
  check(trn_mem_set(mem, 0, pattern, bytes), "mem_set");
  trn_ipc_handle_t handle;
  check(trn_mem_export(mem, &handle), "mem_export");
  printf("exported ");
  for (size_t i = 0; i < sizeof handle.bytes; ++i) printf("%02x", handle.bytes[i]);
  printf("\n");
  fflush(stdout);
  char line[64];
  const double deadline = now_s() + 60.0;
  while (read_stdin_line(line, sizeof line, deadline) == 1) {
    if (strcmp(line, "free") == 0 && mem != NULL) {
      check(trn_mem_free(mem), "mem_free");
      mem = NULL;
      printf("freed\n");
      fflush(stdout);
    }
  }
  check(trn_mem_free(mem), "mem_free");  // accepts NULL
  check(trn_pool_destroy(pool), "pool_destroy");
  return 0;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static int import_mode(int argc, char **argv) {
  if (argc < 4) return 2;
  trn_ipc_handle_t handle;
  const char *hex = argv[2];
  if (strlen(hex) != 2 * sizeof handle.bytes) {
    printf("imported bad handle text of %zu characters\n", strlen(hex));
    return 2;
  }
  for (size_t i = 0; i < sizeof handle.bytes; ++i) {
    const int high = hex_digit(hex[2 * i]), low = hex_digit(hex[2 * i + 1]);
    if (high < 0 || low < 0) {
      printf("imported bad handle text\n");
      return 2;
    }
    handle.bytes[i] = (uint8_t)(high * 16 + low);
  }
  const uint8_t pattern = pattern_arg(argv[3]);
  trn_mem_t mem;
  const trn_result_t result = trn_mem_import(device0(), &handle, &mem);
  if (result != TRN_SUCCESS) {
    printf("imported bad %s %s\n", trn_result_name(result), trn_last_error());
    fflush(stdout);
    return 2;
  }
  trn_mem_info_t info = TRN_MEM_INFO_INIT;
  check(trn_mem_get_info(mem, &info), "mem_get_info");
  uint8_t *data = malloc(info.size ? (size_t)info.size : 1);
  if (!data) return 2;
  check(trn_mem_read(mem, 0, data, info.size), "mem_read");
  uint64_t wrong = 0, first_wrong = 0;
  for (uint64_t i = 0; i < info.size; ++i) {
    if (data[i] != pattern && wrong++ == 0) first_wrong = i;
  }
  free(data);
  if (wrong == 0 && info.imported == 1)
    printf("imported ok\n");
  else
    printf("imported bad %llu of %llu bytes differ (first at %llu), imported=%u\n",
           (unsigned long long)wrong, (unsigned long long)info.size,
           (unsigned long long)first_wrong, info.imported);
  fflush(stdout);
  wait_for_stdin_close();
  check(trn_mem_free(mem), "mem_free");
  return 0;
}

/* --work CORE...: each core acquired, a copy queue on it and 64 MiB of device memory; memsets run
 * on every queue until stdin closes (60 s at most), so tools see busy, owned cores. Prints
 * "working <pid>". */
static int work_mode(int argc, char **argv) {
  uint32_t count;
  trn_core_t *cores = get_cores(&count);
  uint32_t device_count = 1;
  trn_device_t device;
  trn_device_get(&device_count, &device);
  trn_pool_desc_t desc = TRN_POOL_DESC_INIT;
  trn_pool_t pool;
  trn_mem_t mem;
  if (trn_pool_create(device, &desc, &pool) != TRN_SUCCESS ||
      trn_mem_alloc(pool, 64u << 20, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem) != TRN_SUCCESS) {
    fprintf(stderr, "holder: %s\n", trn_last_error());
    return 2;
  }
  trn_queue_t queues[16];
  int queue_count = 0;
  for (int a = 2; a < argc && queue_count < 16; ++a) {
    trn_queue_desc_t qd = TRN_QUEUE_DESC_INIT;
    qd.core = cores[core_arg(argv[a], count)];
    if (trn_core_acquire(qd.core) != TRN_SUCCESS ||
        trn_queue_create(&qd, &queues[queue_count]) != TRN_SUCCESS) {
      printf("busy %s %s\n", argv[a], trn_last_error());
      fflush(stdout);
      return 3;
    }
    ++queue_count;
  }
  printf("working %d\n", (int)getpid());
  fflush(stdout);
  const double deadline = now_s() + 60.0;
  struct pollfd in = {0, POLLIN, 0};
  while (now_s() < deadline && poll(&in, 1, 0) == 0) {
    for (int q = 0; q < queue_count; ++q)  // each queue its own 16 MiB: no two write one byte
      trn_queue_memset(queues[q], mem, (uint64_t)(q % 4) * (16u << 20), (uint8_t)q, 16u << 20, NULL,
                       NULL);
    for (int q = 0; q < queue_count; ++q) trn_queue_finish(queues[q], 10000000000ull);
  }
  for (int q = 0; q < queue_count; ++q) trn_queue_destroy(queues[q]);
  trn_mem_free(mem);
  trn_pool_destroy(pool);
  free(cores);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--work") == 0) return work_mode(argc, argv);
  if (argc > 1 && strcmp(argv[1], "--cycle") == 0) return cycle(argc, argv);
  if (argc > 1 && strcmp(argv[1], "--alloc") == 0) return alloc_mode(argc, argv);
  if (argc > 1 && strcmp(argv[1], "--export") == 0) return export_mode(argc, argv);
  if (argc > 1 && strcmp(argv[1], "--import") == 0) return import_mode(argc, argv);
  uint32_t count;
  trn_core_t *cores = get_cores(&count);
  for (int i = 1; i < argc; ++i) {
    uint32_t index = core_arg(argv[i], count);
    trn_result_t result = trn_core_acquire(cores[index]);
    if (result != TRN_SUCCESS) {
      printf("busy %u %s\n", index, trn_result_name(result));
      fflush(stdout);
      free(cores);
      return 3;
    }
  }
  printf("ready %d\n", (int)getpid());
  fflush(stdout);
  struct pollfd in = {0, POLLIN, 0};
  poll(&in, 1, 60000);
  free(cores);
  return 0;
}
