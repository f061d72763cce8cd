/* trn-test-holder: the other process of the multi-process tests. Plain C11 against the public
 * header.
 *
 *   trn-test-holder CORE...
 *     acquires the cores of device 0, prints "ready <pid>" and holds them until its standard
 *     input closes or 60 s pass. Prints "busy <core> <result>" and exits 3 if one is taken.
 *
 *   trn-test-holder --cycle ITERATIONS OCCUPANCY_FILE CORE...
 *     repeatedly acquires and releases the cores (at most ITERATIONS rounds, at most 10 s).
 *     While it owns a core it marks the core in OCCUPANCY_FILE (one int per core, shared by all
 *     cycling processes); finding the mark of another process there is an exclusivity
 *     violation. Prints "cycles <acquired> <busy> <violations>". */
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

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--cycle") == 0) return cycle(argc, argv);
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
