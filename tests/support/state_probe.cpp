// trn-test-state-probe: a small API program for the damaged-state tests. It uses the public
// header only, like any application.
//
//   trn-test-state-probe run
//     enumerates device 0, acquires core 0, allocates (one allocation exported), writes, reads
//     back, lists the processes, frees and releases. Prints "ok" and exits 0, or prints
//     "error <what>: <result name> <trn_last_error()>" and exits 2.
//
//   trn-test-state-probe hold-map
//     allocates 4 MiB, fills it, maps it and prints "ready <pid>"; when a line or the end of its
//     standard input comes, writes through trn_mem_write (prints "write <result name> <message>"),
//     then reads every page through the mapping (prints "touched <sum>"), lists the device's
//     processes (prints "processes <result name> <message>") and exits 0. Its standard error goes
//     to its standard output, so one pipe has everything it says.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "trn/trn.h"

namespace {

[[noreturn]] void die(const char *what, trn_result_t result) {
  std::printf("error %s: %s %s\n", what, trn_result_name(result), trn_last_error());
  std::fflush(stdout);
  std::exit(2);
}

void check(trn_result_t result, const char *what) {
  if (result != TRN_SUCCESS) die(what, result);
}

trn_device_t device0() {
  uint32_t count = 1;
  trn_device_t device = nullptr;
  check(trn_device_get(&count, &device), "device_get");
  if (count == 0) {
    std::printf("error device_get: no device\n");
    std::exit(2);
  }
  return device;
}

trn_pool_t device_pool(trn_device_t device) {
  trn_pool_desc_t desc = TRN_POOL_DESC_INIT;
  desc.kind = TRN_POOL_KIND_DEVICE;
  desc.hbm_bank = 0;
  trn_pool_t pool = nullptr;
  check(trn_pool_create(device, &desc, &pool), "pool_create");
  return pool;
}

int run() {
  trn_device_t device = device0();
  uint32_t cores = 0;
  check(trn_core_get(device, &cores, nullptr), "core_get");
  std::vector<trn_core_t> list(cores);
  check(trn_core_get(device, &cores, list.data()), "core_get");
  if (cores == 0) {
    std::printf("error core_get: no cores\n");
    return 2;
  }
  check(trn_core_acquire(list[0]), "core_acquire");
  trn_process_info_t owner = TRN_PROCESS_INFO_INIT;
  check(trn_core_get_owner(list[0], &owner), "core_get_owner");

  trn_pool_t pool = device_pool(device);
  trn_mem_t mem = nullptr, shared = nullptr;
  const uint64_t bytes = 1u << 20;
  check(trn_mem_alloc(pool, bytes, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem), "mem_alloc");
  check(trn_mem_alloc(pool, bytes, 0, TRN_MEM_CATEGORY_TENSORS, TRN_MEM_FLAG_EXPORTABLE, &shared),
        "mem_alloc exportable");
  trn_ipc_handle_t handle{};
  check(trn_mem_export(shared, &handle), "mem_export");
  std::vector<uint8_t> out(bytes, 0x5a), in(bytes, 0);
  check(trn_mem_write(mem, 0, out.data(), bytes), "mem_write");
  check(trn_mem_read(mem, 0, in.data(), bytes), "mem_read");
  if (in != out) {
    std::printf("error mem_read: read back other bytes than written\n");
    return 2;
  }
  uint32_t processes = 0;
  check(trn_device_get_processes(device, &processes, nullptr), "device_get_processes");
  trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
  check(trn_device_get_memory_stats(device, UINT32_MAX, &stats), "device_get_memory_stats");
  check(trn_mem_free(shared), "mem_free exportable");
  check(trn_mem_free(mem), "mem_free");
  check(trn_pool_destroy(pool), "pool_destroy");
  check(trn_core_release(list[0]), "core_release");
  check(trn_runtime_shutdown(), "runtime_shutdown");
  std::printf("ok\n");
  return 0;
}

int hold_map() {
  dup2(STDOUT_FILENO, STDERR_FILENO);
  trn_device_t device = device0();
  trn_pool_t pool = device_pool(device);
  const uint64_t bytes = 4u << 20;
  trn_mem_t mem = nullptr;
  check(trn_mem_alloc(pool, bytes, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem), "mem_alloc");
  check(trn_mem_set(mem, 0, 0x11, bytes), "mem_set");
  void *host = nullptr;
  check(trn_mem_map(mem, &host), "mem_map");
  std::printf("ready %d\n", static_cast<int>(getpid()));
  std::fflush(stdout);
  char line[64];
  if (std::fgets(line, sizeof line, stdin) == nullptr) line[0] = '\0';  // end of input: go on

  const std::vector<uint8_t> data(bytes, 0x22);
  const trn_result_t r = trn_mem_write(mem, 0, data.data(), bytes);
  std::printf("write %s %s\n", trn_result_name(r), r == TRN_SUCCESS ? "" : trn_last_error());
  std::fflush(stdout);
  const auto *pages = static_cast<const volatile uint8_t *>(host);
  uint64_t sum = 0;
  for (uint64_t offset = 0; offset < bytes; offset += 4096) sum += pages[offset];
  std::printf("touched %llu\n", static_cast<unsigned long long>(sum));
  uint32_t processes = 0;
  const trn_result_t listed = trn_device_get_processes(device, &processes, nullptr);
  std::printf("processes %s %s\n", trn_result_name(listed),
              listed == TRN_SUCCESS ? "" : trn_last_error());
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "run") return run();
  if (mode == "hold-map") return hold_map();
  std::fprintf(stderr, "usage: trn-test-state-probe run|hold-map\n");
  return 64;
}
