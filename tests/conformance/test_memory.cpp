// Conformance: device memory through the public API — pools, allocations, statistics, the OOM
// report, host access, IPC handles and every documented failure. Device memory is sparse (the
// whole 96 GiB of a trn2 device can be reserved without host memory) and backed by storage
// only when written; a full backing store is an allocation error, never a signal.
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "support/api_helpers.hpp"
#include "support/result_printing.hpp"
#include "support/sim_env.hpp"
#include "trn/trn.h"

namespace {

using trn::test::first_device;
using trn::test::last_error;
using trn::test::mem_info;

using trn::test::error_contains;

using trn::test::SimEnv;

constexpr uint64_t KiB = 1ull << 10;
constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t GiB = 1ull << 30;
using Sizes = std::initializer_list<uint64_t>;

trn_pool_t make_pool(trn_device_t device, uint32_t bank, uint64_t limit = 0,
                     trn_pool_kind_t kind = TRN_POOL_KIND_DEVICE) {
  trn_pool_desc_t desc = TRN_POOL_DESC_INIT;
  desc.kind = kind;
  desc.hbm_bank = bank;
  desc.byte_limit = limit;
  trn_pool_t pool = nullptr;
  INFO(trn_last_error());
  REQUIRE(trn_pool_create(device, &desc, &pool) == TRN_SUCCESS);
  REQUIRE(pool != nullptr);
  return pool;
}

trn_mem_t alloc(trn_pool_t pool, uint64_t size, uint64_t alignment = 0,
                trn_mem_category_t category = TRN_MEM_CATEGORY_TENSORS, uint32_t flags = 0) {
  trn_mem_t mem = nullptr;
  const trn_result_t result = trn_mem_alloc(pool, size, alignment, category, flags, &mem);
  INFO("size " << size << " alignment " << alignment << ": " << trn_last_error());
  REQUIRE(result == TRN_SUCCESS);
  REQUIRE(mem != nullptr);
  return mem;
}

trn_mem_stats_t pool_stats(trn_pool_t pool) {
  trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
  INFO(trn_last_error());
  REQUIRE(trn_pool_get_stats(pool, &stats) == TRN_SUCCESS);
  return stats;
}

trn_mem_stats_t device_stats(trn_device_t device, uint32_t bank = UINT32_MAX) {
  trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
  INFO(trn_last_error());
  REQUIRE(trn_device_get_memory_stats(device, bank, &stats) == TRN_SUCCESS);
  return stats;
}

// Resident set size of this process (anonymous and shared pages).
uint64_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  REQUIRE(statm);
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// Storage allocated to the device's sparse memory file.
uint64_t hbm_file_bytes(const SimEnv &env) {
  struct stat st {};
  const std::string path = env.root() + "/device0.hbm";
  INFO(path);
  REQUIRE(stat(path.c_str(), &st) == 0);
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

// Whether `size` bytes at `offset` of the allocation all hold `value` (read in 1 MiB pieces).
bool reads_as(trn_mem_t mem, uint64_t offset, uint64_t size, uint8_t value) {
  std::vector<uint8_t> buffer(std::min<uint64_t>(size, MiB));
  const std::vector<uint8_t> expected(buffer.size(), value);
  for (uint64_t done = 0; done < size;) {
    const uint64_t n = std::min<uint64_t>(buffer.size(), size - done);
    if (trn_mem_read(mem, offset + done, buffer.data(), n) != TRN_SUCCESS) return false;
    if (std::memcmp(buffer.data(), expected.data(), n) != 0) return false;
    done += n;
  }
  return true;
}

const trn_process_info_t *find_pid(const std::vector<trn_process_info_t> &list, pid_t pid) {
  for (const auto &p : list)
    if (p.pid == pid) return &p;
  return nullptr;
}

std::vector<trn_process_info_t> processes_of(trn_device_t device) {
  uint32_t n = 0;
  REQUIRE(trn_device_get_processes(device, &n, nullptr) == TRN_SUCCESS);
  std::vector<trn_process_info_t> out(n + 2, TRN_PROCESS_INFO_INIT);
  n = static_cast<uint32_t>(out.size());
  REQUIRE(trn_device_get_processes(device, &n, out.data()) == TRN_SUCCESS);
  out.resize(n);
  return out;
}

template <typename To, typename From>
To recast(From handle) {
  return reinterpret_cast<To>(handle);
}

template <typename Handle>
Handle handle_from(uintptr_t value) {
  return reinterpret_cast<Handle>(value);
}

// One call and what it must give: the result, and trn_last_error() naming the function and
// containing each of `parts`.
struct Expect {
  const char *function;
  std::function<trn_result_t()> call;
  trn_result_t result;
  std::vector<std::string> parts;
};

void check_expectations(const std::vector<Expect> &expectations) {
  for (const Expect &e : expectations) {
    INFO(e.function << " expecting " << trn_result_name(e.result));
    const trn_result_t result = e.call();
    INFO("trn_last_error: " << trn_last_error());
    CHECK(result == e.result);
    if (result == TRN_SUCCESS || e.result == TRN_SUCCESS) continue;
    CHECK(error_contains(e.function));
    for (const std::string &part : e.parts) CHECK(error_contains(part));
  }
}

}  // namespace

// ---- sparse device memory ----------------------------------------------------------------------

TEST_CASE("the whole 96 GiB of a trn2 device can be reserved without host memory", "[memory]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_device_properties_t p = TRN_DEVICE_PROPERTIES_INIT;
  REQUIRE(trn_device_get_properties(device, &p) == TRN_SUCCESS);
  REQUIRE(p.generation == TRN_GENERATION_TRN2);
  REQUIRE(p.hbm_bytes == 96 * GiB);
  REQUIRE(p.hbm_bank_count == 4);
  for (uint32_t bank = 0; bank < 4; ++bank) CHECK(p.hbm_bank_bytes[bank] == 24 * GiB);

  const uint64_t rss_before = rss_bytes();
  std::vector<trn_pool_t> pools;
  std::vector<trn_mem_t> mems;
  for (uint32_t bank = 0; bank < 4; ++bank) {
    pools.push_back(make_pool(device, bank));
    uint32_t in_bank = 0;
    for (int i = 0; i < 30; ++i) {
      trn_mem_t mem = nullptr;
      const trn_result_t result =
          trn_mem_alloc(pools.back(), GiB, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem);
      if (result != TRN_SUCCESS) {
        INFO(trn_last_error());
        CHECK(result == TRN_ERROR_OUT_OF_DEVICE_MEMORY);
        break;
      }
      mems.push_back(mem);
      ++in_bank;
    }
    INFO("bank " << bank);
    CHECK(in_bank == 24);
  }
  CHECK(mems.size() == 96);
  const uint64_t rss_reserved = rss_bytes();
  INFO("RSS before " << rss_before << ", after reserving 96 GiB " << rss_reserved);
  CHECK(rss_reserved < rss_before + 64 * MiB);
  CHECK(hbm_file_bytes(env) < 4 * MiB);

  const trn_mem_stats_t full = device_stats(device);
  CHECK(full.limit_bytes == 96 * GiB);
  CHECK(full.reserved_bytes == 96 * GiB);
  CHECK(full.allocated_bytes == 96 * GiB);
  CHECK(full.allocation_count == 96);
  CHECK(full.largest_free_bytes == 0);
  CHECK(full.process_count == 1);

  // Writing commits storage: the file's blocks and this process's resident pages grow.
  trn_mem_t target = mems[37];
  const uint64_t blocks_before = hbm_file_bytes(env);
  REQUIRE(trn_mem_set(target, 8 * MiB, 0x5c, 64 * MiB) == TRN_SUCCESS);
  const std::vector<uint8_t> tail(4096, 0xe1);
  REQUIRE(trn_mem_write(target, GiB - tail.size(), tail.data(), tail.size()) == TRN_SUCCESS);
  const uint64_t blocks_after = hbm_file_bytes(env);
  INFO("hbm file blocks before " << blocks_before << ", after writing " << blocks_after);
  CHECK(blocks_after >= blocks_before + 64 * MiB);
  CHECK(blocks_after < blocks_before + 64 * MiB + 16 * MiB);  // only what was written
  CHECK(rss_bytes() >= rss_reserved + 64 * MiB);
  CHECK(reads_as(target, 8 * MiB, 64 * MiB, 0x5c));
  CHECK(reads_as(target, 0, 8 * MiB, 0));
  CHECK(reads_as(target, 72 * MiB, 8 * MiB, 0));
  std::vector<uint8_t> back(tail.size());
  REQUIRE(trn_mem_read(target, GiB - back.size(), back.data(), back.size()) == TRN_SUCCESS);
  CHECK(back == tail);

  for (trn_mem_t mem : mems) REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  // Freed memory stays cached in the pools until trimmed; trimming punches it out of the file.
  for (trn_pool_t pool : pools) {
    CHECK(pool_stats(pool).reserved_bytes == 24 * GiB);
    CHECK(pool_stats(pool).allocated_bytes == 0);
    REQUIRE(trn_pool_trim(pool) == TRN_SUCCESS);
    CHECK(pool_stats(pool).reserved_bytes == 0);
  }
  CHECK(hbm_file_bytes(env) < 4 * MiB);
  const trn_mem_stats_t empty = device_stats(device);
  CHECK(empty.reserved_bytes == 0);
  CHECK(empty.allocated_bytes == 0);
  CHECK(empty.allocation_count == 0);
  CHECK(empty.largest_free_bytes == 24 * GiB);
  CHECK(empty.process_count == 0);
  for (trn_pool_t pool : pools) REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

// ---- out of memory -----------------------------------------------------------------------------

TEST_CASE("a full bank gives TRN_ERROR_OUT_OF_DEVICE_MEMORY with a report, and the process goes on",
          "[memory][oom]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  std::vector<trn_mem_t> mems;
  for (int i = 0; i < 24; ++i) mems.push_back(alloc(pool, GiB));

  trn_mem_t mem = nullptr;
  REQUIRE(trn_mem_alloc(pool, GiB, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem) ==
          TRN_ERROR_OUT_OF_DEVICE_MEMORY);
  CHECK(mem == nullptr);
  const std::string report = last_error();
  INFO("report:\n" << report);
  CHECK_THAT(report, Catch::Contains("trn_mem_alloc"));
  CHECK_THAT(report, Catch::Contains("1 GiB"));
  CHECK_THAT(report, Catch::Contains("tensors"));
  CHECK_THAT(report, Catch::Contains("bank 0"));
  CHECK_THAT(report, Catch::Contains("RESERVED"));
  CHECK_THAT(report, Catch::Contains("ALLOCATED"));
  CHECK_THAT(report, Catch::Contains(std::to_string(getpid())));
  CHECK_THAT(report, Catch::Contains("(this process)"));
  CHECK_THAT(report, Catch::Contains("24 GiB"));  // what this process holds

  // Another category is named as asked.
  REQUIRE(trn_mem_alloc(pool, 3 * GiB, 0, TRN_MEM_CATEGORY_SCRATCH, 0, &mem) ==
          TRN_ERROR_OUT_OF_DEVICE_MEMORY);
  CHECK(error_contains("3 GiB"));
  CHECK(error_contains("scratch"));

  // Other banks are unaffected.
  trn_pool_t other = make_pool(device, 1);
  trn_mem_t small = alloc(other, 4 * MiB);
  CHECK(mem_info(small).hbm_bank == 1);

  // Freeing one piece lets the next 1 GiB in bank 0 succeed.
  REQUIRE(trn_mem_free(mems.back()) == TRN_SUCCESS);
  mems.back() = alloc(pool, GiB);
  CHECK(reads_as(mems.back(), 0, MiB, 0));  // still readable; the piece was never written

  const trn_mem_stats_t stats = pool_stats(pool);
  CHECK(stats.reserved_bytes == 24 * GiB);
  CHECK(stats.allocated_bytes == 24 * GiB);
  CHECK(stats.allocation_count == 24);

  for (trn_mem_t m : mems) REQUIRE(trn_mem_free(m) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(small) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(other) == TRN_SUCCESS);
  CHECK(device_stats(device).reserved_bytes == 0);
}

TEST_CASE("another pool's cached memory is given back before an allocation fails",
          "[memory][oom]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t first = make_pool(device, 2);
  trn_pool_t second = make_pool(device, 2);
  std::vector<trn_mem_t> mems;
  for (int i = 0; i < 24; ++i) mems.push_back(alloc(first, GiB));
  for (trn_mem_t m : mems) REQUIRE(trn_mem_free(m) == TRN_SUCCESS);
  CHECK(pool_stats(first).reserved_bytes == 24 * GiB);  // cached

  // The bank is held by `first`'s cache; `second` gets it after `first` is trimmed for it.
  trn_mem_t big = alloc(second, 20 * GiB);
  CHECK(pool_stats(first).reserved_bytes <= 4 * GiB);
  const trn_mem_stats_t stats = pool_stats(second);
  CHECK(stats.reserved_bytes == 20 * GiB);
  CHECK(stats.oom_retries == 1);
  REQUIRE(trn_mem_free(big) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(first) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(second) == TRN_SUCCESS);
}

TEST_CASE("a pool's byte limit bounds it", "[memory][oom]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0, 8 * MiB);
  CHECK(pool_stats(pool).limit_bytes == 8 * MiB);

  std::vector<trn_mem_t> mems;
  for (int i = 0; i < 8; ++i) mems.push_back(alloc(pool, MiB));
  CHECK(pool_stats(pool).reserved_bytes == 8 * MiB);
  trn_mem_t mem = nullptr;
  REQUIRE(trn_mem_alloc(pool, MiB, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem) ==
          TRN_ERROR_OUT_OF_DEVICE_MEMORY);
  CHECK(mem == nullptr);
  {
    INFO(trn_last_error());
    CHECK(error_contains("limit"));
    CHECK(error_contains("8 MiB"));
  }
  // The bank itself has plenty: another pool is not limited.
  trn_pool_t unlimited = make_pool(device, 0);
  trn_mem_t elsewhere = alloc(unlimited, 64 * MiB);

  // Freed memory is cached (still counted against the limit) and reused.
  for (trn_mem_t m : mems) REQUIRE(trn_mem_free(m) == TRN_SUCCESS);
  mems.clear();
  CHECK(pool_stats(pool).reserved_bytes == 8 * MiB);
  REQUIRE(trn_pool_trim(pool) == TRN_SUCCESS);
  CHECK(pool_stats(pool).reserved_bytes == 0);
  for (int i = 0; i < 8; ++i) mems.push_back(alloc(pool, MiB, 0, TRN_MEM_CATEGORY_CONSTANTS));
  CHECK(pool_stats(pool).reserved_bytes == 8 * MiB);
  CHECK(pool_stats(pool).by_category[TRN_MEM_CATEGORY_CONSTANTS].allocation_count == 8);
  for (trn_mem_t m : mems) REQUIRE(trn_mem_free(m) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(elsewhere) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(unlimited) == TRN_SUCCESS);
}

TEST_CASE("a pool's byte limit admits every allocation that fits in it", "[memory][oom]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0, 8 * MiB);
  // 4 x 2 MiB and one 8 MiB allocation each fit an 8 MiB limit exactly.
  std::vector<trn_mem_t> mems;
  for (int i = 0; i < 4; ++i) {
    trn_mem_t mem = nullptr;
    const trn_result_t result = trn_mem_alloc(pool, 2 * MiB, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem);
    INFO("2 MiB allocation " << i << ": " << trn_last_error());
    CHECK(result == TRN_SUCCESS);
    if (result == TRN_SUCCESS) mems.push_back(mem);
  }
  for (trn_mem_t m : mems) REQUIRE(trn_mem_free(m) == TRN_SUCCESS);
  REQUIRE(trn_pool_trim(pool) == TRN_SUCCESS);
  trn_mem_t whole = nullptr;
  const trn_result_t result = trn_mem_alloc(pool, 8 * MiB, 0, TRN_MEM_CATEGORY_TENSORS, 0, &whole);
  INFO("8 MiB allocation: " << trn_last_error());
  CHECK(result == TRN_SUCCESS);
  CHECK(trn_mem_free(whole) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("an allocation that fits the bank's free range succeeds whatever its size class",
          "[memory][oom]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  std::vector<trn_mem_t> mems;
  for (int i = 0; i < 23; ++i) mems.push_back(alloc(pool, GiB));
  mems.push_back(alloc(pool, GiB - 18 * MiB));
  REQUIRE(device_stats(device, 0).largest_free_bytes == 18 * MiB);
  // 18 MiB are free in one range: 1, 2, 8 and 18 MiB requests all fit it.
  for (uint64_t size : Sizes{MiB, 2 * MiB, 8 * MiB, 18 * MiB}) {
    trn_pool_t fresh = make_pool(device, 0);
    trn_mem_t mem = nullptr;
    const trn_result_t result = trn_mem_alloc(fresh, size, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem);
    INFO("size " << size << ": " << trn_last_error());
    CHECK(result == TRN_SUCCESS);
    REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
    REQUIRE(trn_pool_destroy(fresh) == TRN_SUCCESS);
  }
  for (trn_mem_t m : mems) REQUIRE(trn_mem_free(m) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

// ---- sub-allocation and statistics -------------------------------------------------------------

TEST_CASE("small allocations share chunks, never overlap, and are counted exactly", "[memory]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  constexpr int kCount = 1000;
  constexpr uint64_t kSize = 4 * KiB;
  std::vector<trn_mem_t> mems;
  for (int i = 0; i < kCount; ++i)
    mems.push_back(alloc(pool, kSize, 0, static_cast<trn_mem_category_t>(i % 3)));

  trn_mem_stats_t stats = pool_stats(pool);
  CHECK(stats.reserved_bytes <= 4 * MiB);
  CHECK(stats.reserved_bytes > 0);
  CHECK(stats.reserved_bytes % (2 * MiB) == 0);
  CHECK(stats.allocation_count == kCount);
  CHECK(stats.allocated_bytes == kCount * kSize);
  CHECK(stats.peak_allocated_bytes == kCount * kSize);
  CHECK(stats.peak_reserved_bytes == stats.reserved_bytes);
  CHECK(stats.limit_bytes == 24 * GiB);
  CHECK(stats.by_category[TRN_MEM_CATEGORY_TENSORS].allocation_count == 334);
  CHECK(stats.by_category[TRN_MEM_CATEGORY_CONSTANTS].allocation_count == 333);
  CHECK(stats.by_category[TRN_MEM_CATEGORY_CODE].allocation_count == 333);
  CHECK(stats.by_category[TRN_MEM_CATEGORY_TENSORS].current_bytes == 334 * kSize);
  CHECK(stats.by_category[TRN_MEM_CATEGORY_CODE].current_bytes == 333 * kSize);
  CHECK(stats.by_category[TRN_MEM_CATEGORY_SCRATCH].allocation_count == 0);
  CHECK(stats.by_category[TRN_MEM_CATEGORY_SCRATCH].current_bytes == 0);

  // Distinct, non-overlapping, and each holds its own data.
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (trn_mem_t mem : mems) {
    const trn_mem_info_t info = mem_info(mem);
    CHECK(info.size == kSize);
    CHECK(info.device_address % 512 == 0);
    ranges.emplace_back(info.device_address, info.size);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    CHECK(ranges[i - 1].first + ranges[i - 1].second <= ranges[i].first);
  for (int i = 0; i < kCount; ++i) {
    std::vector<uint8_t> data(kSize);
    for (uint64_t b = 0; b < kSize; ++b) data[b] = static_cast<uint8_t>(i * 7 + b);
    REQUIRE(trn_mem_write(mems[i], 0, data.data(), kSize) == TRN_SUCCESS);
  }
  int wrong = 0;
  for (int i = 0; i < kCount; ++i) {
    std::vector<uint8_t> data(kSize);
    REQUIRE(trn_mem_read(mems[i], 0, data.data(), kSize) == TRN_SUCCESS);
    for (uint64_t b = 0; b < kSize; ++b)
      if (data[b] != static_cast<uint8_t>(i * 7 + b)) {
        ++wrong;
        break;
      }
  }
  CHECK(wrong == 0);

  // Free every other one.
  const uint64_t reserved = stats.reserved_bytes;
  for (int i = 0; i < kCount; i += 2) REQUIRE(trn_mem_free(mems[i]) == TRN_SUCCESS);
  stats = pool_stats(pool);
  CHECK(stats.allocation_count == kCount / 2);
  CHECK(stats.allocated_bytes == kCount / 2 * kSize);
  CHECK(stats.peak_allocated_bytes == kCount * kSize);
  CHECK(stats.reserved_bytes == reserved);
  CHECK(stats.by_category[TRN_MEM_CATEGORY_TENSORS].allocation_count == 167);
  CHECK(stats.by_category[TRN_MEM_CATEGORY_TENSORS].peak_bytes == 334 * kSize);
  CHECK(stats.by_category[TRN_MEM_CATEGORY_CONSTANTS].allocation_count == 167);
  CHECK(stats.by_category[TRN_MEM_CATEGORY_CODE].allocation_count == 166);
  // The survivors are intact.
  for (int i = 1; i < kCount; i += 2) {
    std::vector<uint8_t> data(kSize);
    REQUIRE(trn_mem_read(mems[i], 0, data.data(), kSize) == TRN_SUCCESS);
    CHECK(data[0] == static_cast<uint8_t>(i * 7));
    CHECK(data[kSize - 1] == static_cast<uint8_t>(i * 7 + kSize - 1));
  }
  // The holes are reused without reserving more.
  for (int i = 0; i < kCount; i += 2) mems[i] = alloc(pool, kSize);
  CHECK(pool_stats(pool).reserved_bytes == reserved);

  // Trimming with live allocations returns nothing they use.
  REQUIRE(trn_pool_trim(pool) == TRN_SUCCESS);
  CHECK(pool_stats(pool).reserved_bytes == reserved);
  for (trn_mem_t mem : mems) REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  stats = pool_stats(pool);
  CHECK(stats.allocation_count == 0);
  CHECK(stats.allocated_bytes == 0);
  CHECK(stats.largest_free_bytes >= 2 * MiB);
  REQUIRE(trn_pool_trim(pool) == TRN_SUCCESS);
  stats = pool_stats(pool);
  CHECK(stats.reserved_bytes == 0);
  CHECK(stats.peak_reserved_bytes == reserved);
  CHECK(stats.largest_free_bytes == 0);
  CHECK(device_stats(device).reserved_bytes == 0);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("freed memory is reused without reserving more", "[memory]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 3);
  for (uint64_t size : Sizes{512, 4 * KiB, 700 * KiB, 3 * MiB, 64 * MiB}) {
    INFO("size " << size);
    trn_mem_t first = alloc(pool, size);
    const uint64_t address = mem_info(first).device_address;
    const uint64_t reserved = pool_stats(pool).reserved_bytes;
    REQUIRE(trn_mem_free(first) == TRN_SUCCESS);
    CHECK(pool_stats(pool).reserved_bytes == reserved);
    trn_mem_t second = alloc(pool, size);
    CHECK(pool_stats(pool).reserved_bytes == reserved);
    CHECK(mem_info(second).device_address == address);
    REQUIRE(trn_mem_free(second) == TRN_SUCCESS);
  }
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  CHECK(device_stats(device).reserved_bytes == 0);
}

TEST_CASE("allocations honour their alignment", "[memory]") {
  SimEnv env;
  const trn_device_t device = first_device();
  for (trn_pool_kind_t kind : {TRN_POOL_KIND_DEVICE, TRN_POOL_KIND_HOST}) {
    INFO("pool kind " << kind);
    trn_pool_t pool = make_pool(device, 1, 0, kind);
    std::vector<trn_mem_t> mems;
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (uint64_t alignment : Sizes{0, 1, 64, 512, 4096, 65536, 2 * MiB}) {
      for (uint64_t size : Sizes{1, 1000, 4 * KiB, 100 * KiB, 3 * MiB}) {
        INFO("alignment " << alignment << " size " << size);
        trn_mem_t mem = alloc(pool, size, alignment);
        const trn_mem_info_t info = mem_info(mem);
        CHECK(info.size == size);
        CHECK(info.device_address % std::max<uint64_t>(alignment, 512) == 0);
        // The whole range is usable.
        const uint8_t value = static_cast<uint8_t>(mems.size() + 1);
        REQUIRE(trn_mem_set(mem, 0, value, size) == TRN_SUCCESS);
        ranges.emplace_back(info.device_address, size);
        mems.push_back(mem);
      }
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
      CHECK(ranges[i - 1].first + ranges[i - 1].second <= ranges[i].first);
    for (size_t i = 0; i < mems.size(); ++i) {
      INFO("allocation " << i);
      CHECK(reads_as(mems[i], 0, mem_info(mems[i]).size, static_cast<uint8_t>(i + 1)));
    }
    for (trn_mem_t mem : mems) REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
    REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  }
}

// ---- contents ----------------------------------------------------------------------------------

TEST_CASE("new memory reads as zeros", "[memory]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_pool_t host = make_pool(device, 0, 0, TRN_POOL_KIND_HOST);
  for (trn_pool_t p : {pool, host}) {
    for (uint64_t size : Sizes{512, 5000, 3 * MiB, 40 * MiB}) {
      INFO("size " << size);
      trn_mem_t mem = alloc(p, size);
      CHECK(reads_as(mem, 0, size, 0));
      void *host_pointer = nullptr;
      REQUIRE(trn_mem_map(mem, &host_pointer) == TRN_SUCCESS);
      const std::vector<uint8_t> zeros(size, 0);
      CHECK(std::memcmp(host_pointer, zeros.data(), size) == 0);
      REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
    }
  }
  // Memory trimmed back to the device and taken again is zero too (the chunks were punched).
  trn_mem_t dirty = alloc(pool, 64 * MiB);
  REQUIRE(trn_mem_set(dirty, 0, 0xee, 64 * MiB) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(dirty) == TRN_SUCCESS);
  REQUIRE(trn_pool_trim(pool) == TRN_SUCCESS);
  REQUIRE(trn_pool_trim(host) == TRN_SUCCESS);
  CHECK(pool_stats(pool).reserved_bytes == 0);
  trn_mem_t again = alloc(pool, 64 * MiB);
  CHECK(reads_as(again, 0, 64 * MiB, 0));
  REQUIRE(trn_mem_free(again) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(host) == TRN_SUCCESS);
}

TEST_CASE("trn_mem_get_info describes device, host and exportable allocations", "[memory]") {
  SimEnv env;
  const trn_device_t device = first_device();
  for (uint32_t bank = 0; bank < 4; ++bank) {
    INFO("bank " << bank);
    trn_pool_t pool = make_pool(device, bank);
    trn_mem_t mem = alloc(pool, 12345, 4096, TRN_MEM_CATEGORY_DMA_RINGS);
    const trn_mem_info_t info = mem_info(mem);
    CHECK(info.device_address >> 56 == 1);  // device 0 + 1
    CHECK(((info.device_address >> 48) & 0xff) == bank);
    CHECK((info.device_address & ((1ull << 48) - 1)) < 24 * GiB);
    CHECK(info.device_address % 4096 == 0);
    CHECK(info.size == 12345);
    CHECK(info.category == TRN_MEM_CATEGORY_DMA_RINGS);
    CHECK(info.kind == TRN_POOL_KIND_DEVICE);
    CHECK(info.device_index == 0);
    CHECK(info.hbm_bank == bank);
    CHECK(info.imported == 0);
    CHECK(info.flags == 0);

    trn_mem_t exportable =
        alloc(pool, 3 * MiB, 0, TRN_MEM_CATEGORY_COLLECTIVES, TRN_MEM_FLAG_EXPORTABLE);
    const trn_mem_info_t e = mem_info(exportable);
    CHECK(e.flags == TRN_MEM_FLAG_EXPORTABLE);
    CHECK(e.size == 3 * MiB);
    CHECK(e.category == TRN_MEM_CATEGORY_COLLECTIVES);
    CHECK(((e.device_address >> 48) & 0xff) == bank);
    CHECK(e.device_address % (2 * MiB) == 0);  // whole chunks of its own
    REQUIRE(trn_mem_free(exportable) == TRN_SUCCESS);
    REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
    REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  }

  // A struct from an older header (only the fields up to `size`) is filled that far.
  trn_pool_t pool = make_pool(device, 2);
  trn_mem_t mem = alloc(pool, 1000);
  trn_mem_info_t partial = TRN_MEM_INFO_INIT;
  partial.header.size = offsetof(trn_mem_info_t, size);
  partial.size = 77;
  REQUIRE(trn_mem_get_info(mem, &partial) == TRN_SUCCESS);
  CHECK(partial.header.type == TRN_STRUCT_MEM_INFO);
  CHECK(partial.device_address >> 56 == 1);
  CHECK(partial.size == 77);  // beyond `size`: untouched
  REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("host pool memory is addressed by its host pointer", "[memory]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t host = make_pool(device, 0, 0, TRN_POOL_KIND_HOST);
  trn_mem_t mem = alloc(host, 10000, 0, TRN_MEM_CATEGORY_SCRATCH);
  const trn_mem_info_t info = mem_info(mem);
  CHECK(info.kind == TRN_POOL_KIND_HOST);
  CHECK(info.size == 10000);
  CHECK(info.category == TRN_MEM_CATEGORY_SCRATCH);
  void *pointer = nullptr;
  REQUIRE(trn_mem_map(mem, &pointer) == TRN_SUCCESS);
  REQUIRE(pointer != nullptr);
  CHECK(info.device_address == reinterpret_cast<uintptr_t>(pointer));

  std::vector<uint8_t> data(10000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 13);
  REQUIRE(trn_mem_write(mem, 0, data.data(), data.size()) == TRN_SUCCESS);
  CHECK(std::memcmp(pointer, data.data(), data.size()) == 0);
  static_cast<uint8_t *>(pointer)[9999] = 0x42;
  uint8_t last = 0;
  REQUIRE(trn_mem_read(mem, 9999, &last, 1) == TRN_SUCCESS);
  CHECK(last == 0x42);
  REQUIRE(trn_mem_set(mem, 100, 0x99, 50) == TRN_SUCCESS);
  CHECK(static_cast<uint8_t *>(pointer)[99] == static_cast<uint8_t>(99 * 13));
  CHECK(static_cast<uint8_t *>(pointer)[100] == 0x99);
  CHECK(static_cast<uint8_t *>(pointer)[149] == 0x99);
  CHECK(static_cast<uint8_t *>(pointer)[150] == static_cast<uint8_t>(150 * 13));

  // Host memory is not device memory: the device statistics do not count it.
  const trn_mem_stats_t stats = pool_stats(host);
  CHECK(stats.allocated_bytes == 10240);
  CHECK(stats.allocation_count == 1);
  CHECK(stats.limit_bytes == 0);
  CHECK(device_stats(device).reserved_bytes == 0);
  CHECK(device_stats(device).allocated_bytes == 0);
  REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(host) == TRN_SUCCESS);
}

TEST_CASE("writes through trn_mem_map and trn_mem_write see each other", "[memory]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 1);
  for (uint64_t size : Sizes{4 * KiB, 6 * MiB + 512}) {
    INFO("size " << size);
    trn_mem_t mem = alloc(pool, size);
    void *pointer = nullptr;
    REQUIRE(trn_mem_map(mem, &pointer) == TRN_SUCCESS);
    REQUIRE(pointer != nullptr);
    void *again = nullptr;
    REQUIRE(trn_mem_map(mem, &again) == TRN_SUCCESS);
    CHECK(again == pointer);
    auto *bytes = static_cast<uint8_t *>(pointer);
    std::memset(bytes, 0x3c, size);
    CHECK(reads_as(mem, 0, size, 0x3c));
    std::vector<uint8_t> data(size);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i ^ (i >> 8));
    REQUIRE(trn_mem_write(mem, 0, data.data(), data.size()) == TRN_SUCCESS);
    CHECK(std::memcmp(bytes, data.data(), size) == 0);
    REQUIRE(trn_mem_set(mem, size - 100, 0xfe, 100) == TRN_SUCCESS);
    CHECK(bytes[size - 101] == data[size - 101]);
    CHECK(bytes[size - 100] == 0xfe);
    CHECK(bytes[size - 1] == 0xfe);
    REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  }
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

// ---- device-wide statistics --------------------------------------------------------------------

TEST_CASE("device statistics and the process list show this process's memory", "[memory]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t bank0 = make_pool(device, 0);
  trn_pool_t bank2 = make_pool(device, 2);
  trn_mem_t a = alloc(bank0, 100 * MiB, 0, TRN_MEM_CATEGORY_TENSORS);
  trn_mem_t b = alloc(bank0, 4 * KiB, 0, TRN_MEM_CATEGORY_CODE);
  trn_mem_t c = alloc(bank2, 30 * MiB, 0, TRN_MEM_CATEGORY_COLLECTIVES);
  const uint64_t reserved0 = pool_stats(bank0).reserved_bytes;
  const uint64_t reserved2 = pool_stats(bank2).reserved_bytes;
  CHECK(reserved0 == 100 * MiB + 2 * MiB);  // a large segment, a small one
  CHECK(reserved2 == 30 * MiB);

  trn_mem_stats_t all = device_stats(device);
  CHECK(all.limit_bytes == 96 * GiB);
  CHECK(all.reserved_bytes == reserved0 + reserved2);
  CHECK(all.peak_reserved_bytes >= all.reserved_bytes);
  CHECK(all.allocated_bytes == 100 * MiB + 4 * KiB + 30 * MiB);
  CHECK(all.allocation_count == 3);
  CHECK(all.process_count == 1);
  CHECK(all.by_category[TRN_MEM_CATEGORY_TENSORS].current_bytes == 100 * MiB);
  CHECK(all.by_category[TRN_MEM_CATEGORY_TENSORS].allocation_count == 1);
  CHECK(all.by_category[TRN_MEM_CATEGORY_CODE].current_bytes == 4 * KiB);
  CHECK(all.by_category[TRN_MEM_CATEGORY_COLLECTIVES].current_bytes == 30 * MiB);
  CHECK(all.by_category[TRN_MEM_CATEGORY_SCRATCH].allocation_count == 0);

  trn_mem_stats_t one = device_stats(device, 0);
  CHECK(one.limit_bytes == 24 * GiB);
  CHECK(one.reserved_bytes == reserved0);
  CHECK(one.allocated_bytes == 100 * MiB + 4 * KiB);
  CHECK(one.allocation_count == 2);
  CHECK(one.process_count == 1);
  CHECK(one.by_category[TRN_MEM_CATEGORY_COLLECTIVES].current_bytes == 0);
  CHECK(one.largest_free_bytes == 24 * GiB - reserved0);
  trn_mem_stats_t unused = device_stats(device, 3);
  CHECK(unused.reserved_bytes == 0);
  CHECK(unused.allocated_bytes == 0);
  CHECK(unused.process_count == 0);
  CHECK(unused.largest_free_bytes == 24 * GiB);

  const auto processes = processes_of(device);
  const trn_process_info_t *self = find_pid(processes, getpid());
  REQUIRE(self != nullptr);
  CHECK(self->hbm_reserved_bytes == reserved0 + reserved2);
  CHECK(self->hbm_allocated_bytes == 100 * MiB + 4 * KiB + 30 * MiB);
  CHECK(self->hbm_allocated_by_category[TRN_MEM_CATEGORY_TENSORS] == 100 * MiB);
  CHECK(self->hbm_allocated_by_category[TRN_MEM_CATEGORY_CODE] == 4 * KiB);
  CHECK(self->hbm_allocated_by_category[TRN_MEM_CATEGORY_COLLECTIVES] == 30 * MiB);
  CHECK(self->hbm_allocated_by_category[TRN_MEM_CATEGORY_CONSTANTS] == 0);
  CHECK(self->core_mask == 0);

  // Freed allocations leave the counts; cached chunks stay reserved until trimmed.
  REQUIRE(trn_mem_free(a) == TRN_SUCCESS);
  all = device_stats(device);
  CHECK(all.allocated_bytes == 4 * KiB + 30 * MiB);
  CHECK(all.allocation_count == 2);
  CHECK(all.reserved_bytes == reserved0 + reserved2);
  CHECK(all.by_category[TRN_MEM_CATEGORY_TENSORS].peak_bytes == 100 * MiB);
  REQUIRE(trn_pool_trim(bank0) == TRN_SUCCESS);
  CHECK(device_stats(device).reserved_bytes == 2 * MiB + reserved2);
  REQUIRE(trn_mem_free(b) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(c) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(bank0) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(bank2) == TRN_SUCCESS);
  all = device_stats(device);
  CHECK(all.reserved_bytes == 0);
  CHECK(all.allocated_bytes == 0);
  CHECK(all.process_count == 0);
  const auto listed = processes_of(device);
  const trn_process_info_t *after = find_pid(listed, getpid());
  if (after) {
    CHECK(after->hbm_reserved_bytes == 0);
    CHECK(after->hbm_allocated_bytes == 0);
  }
}

TEST_CASE("trn_runtime_shutdown returns every pool's memory", "[memory]") {
  SimEnv env;
  trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_mem_t mem = alloc(pool, 40 * MiB);
  REQUIRE(trn_mem_set(mem, 0, 1, 40 * MiB) == TRN_SUCCESS);
  trn_mem_t exportable = alloc(pool, 4 * MiB, 0, TRN_MEM_CATEGORY_TENSORS, TRN_MEM_FLAG_EXPORTABLE);
  trn_ipc_handle_t handle;
  REQUIRE(trn_mem_export(exportable, &handle) == TRN_SUCCESS);
  CHECK(hbm_file_bytes(env) >= 40 * MiB);
  REQUIRE(trn_runtime_shutdown() == TRN_SUCCESS);
  CHECK(hbm_file_bytes(env) < 4 * MiB);
  device = first_device();
  const trn_mem_stats_t stats = device_stats(device);
  CHECK(stats.reserved_bytes == 0);
  CHECK(stats.allocated_bytes == 0);
  trn_mem_t imported = nullptr;
  CHECK(trn_mem_import(device, &handle, &imported) == TRN_ERROR_INVALID_ARGUMENT);
}

// ---- negative cases ----------------------------------------------------------------------------

TEST_CASE("memory functions refuse NULL pointers", "[memory][negative][null]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_mem_t mem = alloc(pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, TRN_MEM_FLAG_EXPORTABLE);
  trn_ipc_handle_t handle{};
  REQUIRE(trn_mem_export(mem, &handle) == TRN_SUCCESS);
  const trn_pool_desc_t desc = TRN_POOL_DESC_INIT;
  trn_pool_t new_pool = nullptr;
  trn_mem_t new_mem = nullptr;

  check_expectations({
      {"trn_pool_create",
       [&] { return trn_pool_create(device, nullptr, &new_pool); },
       TRN_ERROR_NULL_POINTER,
       {"desc"}},
      {"trn_pool_create",
       [&] { return trn_pool_create(device, &desc, nullptr); },
       TRN_ERROR_NULL_POINTER,
       {"pool"}},
      {"trn_pool_get_stats",
       [&] { return trn_pool_get_stats(pool, nullptr); },
       TRN_ERROR_NULL_POINTER,
       {"stats"}},
      {"trn_device_get_memory_stats",
       [&] { return trn_device_get_memory_stats(device, 0, nullptr); },
       TRN_ERROR_NULL_POINTER,
       {"stats"}},
      {"trn_device_get_memory_stats",
       [&] { return trn_device_get_memory_stats(device, UINT32_MAX, nullptr); },
       TRN_ERROR_NULL_POINTER,
       {"stats"}},
      {"trn_mem_alloc",
       [&] { return trn_mem_alloc(pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, nullptr); },
       TRN_ERROR_NULL_POINTER,
       {"mem"}},
      {"trn_mem_get_info",
       [&] { return trn_mem_get_info(mem, nullptr); },
       TRN_ERROR_NULL_POINTER,
       {"info"}},
      {"trn_mem_map",
       [&] { return trn_mem_map(mem, nullptr); },
       TRN_ERROR_NULL_POINTER,
       {"host_pointer"}},
      {"trn_mem_write",
       [&] { return trn_mem_write(mem, 0, nullptr, 1); },
       TRN_ERROR_NULL_POINTER,
       {"source"}},
      {"trn_mem_read",
       [&] { return trn_mem_read(mem, 0, nullptr, 1); },
       TRN_ERROR_NULL_POINTER,
       {"destination"}},
      {"trn_mem_export",
       [&] { return trn_mem_export(mem, nullptr); },
       TRN_ERROR_NULL_POINTER,
       {"handle"}},
      {"trn_mem_import",
       [&] { return trn_mem_import(device, nullptr, &new_mem); },
       TRN_ERROR_NULL_POINTER,
       {"handle"}},
      {"trn_mem_import",
       [&] { return trn_mem_import(device, &handle, nullptr); },
       TRN_ERROR_NULL_POINTER,
       {"mem"}},
      // No bytes to copy: no pointer needed.
      {"trn_mem_write", [&] { return trn_mem_write(mem, 0, nullptr, 0); }, TRN_SUCCESS, {}},
      {"trn_mem_read", [&] { return trn_mem_read(mem, 4096, nullptr, 0); }, TRN_SUCCESS, {}},
      {"trn_mem_set", [&] { return trn_mem_set(mem, 0, 0, 0); }, TRN_SUCCESS, {}},
  });
  CHECK(new_pool == nullptr);
  CHECK(new_mem == nullptr);
  // Nothing was created by the failed calls.
  CHECK(pool_stats(pool).allocation_count == 1);
  REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  CHECK(device_stats(device).reserved_bytes == 0);
}

namespace {

// Every memory function that takes a pool handle, with otherwise valid arguments.
std::vector<Expect> pool_calls(trn_pool_t pool, trn_result_t result, const std::string &detail,
                               bool with_destroy) {
  std::vector<Expect> calls = {
      {"trn_pool_trim", [=] { return trn_pool_trim(pool); }, result, {detail}},
      {"trn_pool_get_stats",
       [=] {
         trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
         return trn_pool_get_stats(pool, &stats);
       },
       result,
       {detail}},
      {"trn_mem_alloc",
       [=] {
         trn_mem_t mem = nullptr;
         return trn_mem_alloc(pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem);
       },
       result,
       {detail}},
  };
  if (with_destroy)
    calls.push_back({"trn_pool_destroy", [=] { return trn_pool_destroy(pool); }, result, {detail}});
  return calls;
}

// Every memory function that takes a mem handle, with otherwise valid arguments.
std::vector<Expect> mem_calls(trn_mem_t mem, trn_result_t result, const std::string &detail,
                              bool with_free) {
  std::vector<Expect> calls = {
      {"trn_mem_get_info",
       [=] {
         trn_mem_info_t info = TRN_MEM_INFO_INIT;
         return trn_mem_get_info(mem, &info);
       },
       result,
       {detail}},
      {"trn_mem_map",
       [=] {
         void *pointer = nullptr;
         return trn_mem_map(mem, &pointer);
       },
       result,
       {detail}},
      {"trn_mem_write",
       [=] {
         uint8_t byte = 1;
         return trn_mem_write(mem, 0, &byte, 1);
       },
       result,
       {detail}},
      {"trn_mem_read",
       [=] {
         uint8_t byte = 1;
         return trn_mem_read(mem, 0, &byte, 1);
       },
       result,
       {detail}},
      {"trn_mem_set", [=] { return trn_mem_set(mem, 0, 1, 1); }, result, {detail}},
      {"trn_mem_export",
       [=] {
         trn_ipc_handle_t handle;
         return trn_mem_export(mem, &handle);
       },
       result,
       {detail}},
  };
  if (with_free)
    calls.push_back({"trn_mem_free", [=] { return trn_mem_free(mem); }, result, {detail}});
  return calls;
}

// The memory functions that take a device handle.
std::vector<Expect> device_memory_calls(trn_device_t device, const trn_ipc_handle_t &handle,
                                        trn_result_t result, const std::string &detail) {
  return {
      {"trn_pool_create",
       [=] {
         const trn_pool_desc_t desc = TRN_POOL_DESC_INIT;
         trn_pool_t pool = nullptr;
         return trn_pool_create(device, &desc, &pool);
       },
       result,
       {detail}},
      {"trn_device_get_memory_stats",
       [=] {
         trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
         return trn_device_get_memory_stats(device, UINT32_MAX, &stats);
       },
       result,
       {detail}},
      {"trn_mem_import",
       [=] {
         trn_mem_t mem = nullptr;
         return trn_mem_import(device, &handle, &mem);
       },
       result,
       {detail}},
  };
}

}  // namespace

TEST_CASE("memory functions refuse NULL, stale, wrong-kind and garbage handles",
          "[memory][negative][handle]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_mem_t mem = alloc(pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, TRN_MEM_FLAG_EXPORTABLE);
  REQUIRE(trn_mem_set(mem, 0, 0x17, 4096) == TRN_SUCCESS);
  trn_ipc_handle_t handle;
  REQUIRE(trn_mem_export(mem, &handle) == TRN_SUCCESS);

  SECTION("NULL") {
    check_expectations(pool_calls(nullptr, TRN_ERROR_INVALID_HANDLE, "NULL", false));
    check_expectations(mem_calls(nullptr, TRN_ERROR_INVALID_HANDLE, "NULL", false));
    check_expectations(device_memory_calls(nullptr, handle, TRN_ERROR_INVALID_HANDLE, "NULL"));
    // Freeing and destroying nothing is allowed.
    CHECK(trn_mem_free(nullptr) == TRN_SUCCESS);
    CHECK(trn_pool_destroy(nullptr) == TRN_SUCCESS);
  }
  SECTION("stale: freed allocations and destroyed pools") {
    trn_pool_t gone_pool = make_pool(device, 1);
    trn_mem_t gone_mem = alloc(gone_pool, 4096);
    REQUIRE(trn_mem_free(gone_mem) == TRN_SUCCESS);
    REQUIRE(trn_pool_destroy(gone_pool) == TRN_SUCCESS);
    check_expectations(pool_calls(gone_pool, TRN_ERROR_INVALID_HANDLE, "stale", true));
    check_expectations(mem_calls(gone_mem, TRN_ERROR_INVALID_HANDLE, "stale", true));
    // A new object in the same slot does not revive the old handle.
    trn_pool_t fresh_pool = make_pool(device, 1);
    trn_mem_t fresh_mem = alloc(fresh_pool, 4096);
    CHECK(fresh_pool != gone_pool);
    CHECK(fresh_mem != gone_mem);
    check_expectations(mem_calls(gone_mem, TRN_ERROR_INVALID_HANDLE, "stale", true));
    check_expectations(pool_calls(gone_pool, TRN_ERROR_INVALID_HANDLE, "stale", true));
    CHECK(pool_stats(fresh_pool).allocation_count == 1);  // untouched by the stale calls
    REQUIRE(trn_mem_free(fresh_mem) == TRN_SUCCESS);
    REQUIRE(trn_pool_destroy(fresh_pool) == TRN_SUCCESS);
  }
  SECTION("wrong kind") {
    check_expectations(mem_calls(recast<trn_mem_t>(pool), TRN_ERROR_INVALID_HANDLE,
                                 "expected a memory handle but got a pool handle", true));
    check_expectations(pool_calls(recast<trn_pool_t>(mem), TRN_ERROR_INVALID_HANDLE,
                                  "expected a pool handle but got a memory handle", true));
    check_expectations(pool_calls(recast<trn_pool_t>(device), TRN_ERROR_INVALID_HANDLE,
                                  "got a device handle", true));
    check_expectations(mem_calls(recast<trn_mem_t>(device), TRN_ERROR_INVALID_HANDLE,
                                 "got a device handle", true));
    check_expectations(device_memory_calls(recast<trn_device_t>(pool), handle,
                                           TRN_ERROR_INVALID_HANDLE, "got a pool handle"));
    check_expectations(device_memory_calls(recast<trn_device_t>(mem), handle,
                                           TRN_ERROR_INVALID_HANDLE, "got a memory handle"));
  }
  SECTION("garbage") {
    const uintptr_t pool_value = reinterpret_cast<uintptr_t>(pool);
    const uintptr_t mem_value = reinterpret_cast<uintptr_t>(mem);
    const std::vector<uintptr_t> garbage = {
        0x1,
        0x1234,
        static_cast<uintptr_t>(-1),
        static_cast<uintptr_t>(0xdeadbeefcafef00dull),
        reinterpret_cast<uintptr_t>(&env),
        pool_value + 1,                       // a slot that does not exist
        mem_value + 0xffffff,                 // the largest slot
        mem_value ^ (uintptr_t{1} << 40),     // another generation
        pool_value ^ (uintptr_t{0x80} << 24)  // an unknown kind
    };
    for (uintptr_t value : garbage) {
      INFO("handle value " << std::hex << value);
      check_expectations(
          pool_calls(handle_from<trn_pool_t>(value), TRN_ERROR_INVALID_HANDLE, "handle", true));
      check_expectations(
          mem_calls(handle_from<trn_mem_t>(value), TRN_ERROR_INVALID_HANDLE, "handle", true));
    }
  }
  // The real handles are unharmed.
  CHECK(reads_as(mem, 0, 4096, 0x17));
  CHECK(pool_stats(pool).allocation_count == 1);
  REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("trn_mem_alloc refuses bad sizes, alignments, categories and flags",
          "[memory][negative]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_pool_t host = make_pool(device, 0, 0, TRN_POOL_KIND_HOST);
  trn_mem_t mem = nullptr;
  auto call = [&](trn_pool_t p, uint64_t size, uint64_t alignment, int category, uint32_t flags) {
    return [&mem, p, size, alignment, category, flags] {
      return trn_mem_alloc(p, size, alignment, static_cast<trn_mem_category_t>(category), flags,
                           &mem);
    };
  };
  check_expectations({
      {"trn_mem_alloc", call(pool, 0, 0, 0, 0), TRN_ERROR_INVALID_ARGUMENT, {"size"}},
      {"trn_mem_alloc", call(host, 0, 0, 0, 0), TRN_ERROR_INVALID_ARGUMENT, {"size"}},
      {"trn_mem_alloc", call(pool, 4096, 3, 0, 0), TRN_ERROR_INVALID_ARGUMENT, {"alignment 3"}},
      {"trn_mem_alloc", call(pool, 4096, 768, 0, 0), TRN_ERROR_INVALID_ARGUMENT, {"alignment"}},
      {"trn_mem_alloc", call(pool, 4096, 4 * MiB, 0, 0), TRN_ERROR_INVALID_ARGUMENT, {"alignment"}},
      {"trn_mem_alloc",
       call(pool, 4096, 1ull << 40, 0, 0),
       TRN_ERROR_INVALID_ARGUMENT,
       {"alignment"}},
      {"trn_mem_alloc",
       call(pool, 4096, UINT64_MAX, 0, 0),
       TRN_ERROR_INVALID_ARGUMENT,
       {"alignment"}},
      {"trn_mem_alloc",
       call(pool, 4096, 0, TRN_MEM_CATEGORY_COUNT, 0),
       TRN_ERROR_INVALID_ENUM,
       {"category"}},
      {"trn_mem_alloc", call(pool, 4096, 0, 99, 0), TRN_ERROR_INVALID_ENUM, {"category 99"}},
      {"trn_mem_alloc", call(pool, 4096, 0, 0x7fffffff, 0), TRN_ERROR_INVALID_ENUM, {"category"}},
      {"trn_mem_alloc", call(pool, 4096, 0, 0, 0x2), TRN_ERROR_INVALID_ARGUMENT, {"flags"}},
      {"trn_mem_alloc", call(pool, 4096, 0, 0, 0x80000001u), TRN_ERROR_INVALID_ARGUMENT, {"flags"}},
      {"trn_mem_alloc",
       call(host, 4096, 0, 0, TRN_MEM_FLAG_EXPORTABLE),
       TRN_ERROR_UNSUPPORTED,
       {"export"}},
      {"trn_mem_alloc", call(pool, 1ull << 50, 0, 0, 0), TRN_ERROR_OUT_OF_DEVICE_MEMORY, {}},
      {"trn_mem_alloc", call(pool, UINT64_MAX, 0, 0, 0), TRN_ERROR_OUT_OF_DEVICE_MEMORY, {}},
      {"trn_mem_alloc",
       call(pool, UINT64_MAX - 100, 4096, 0, 0),
       TRN_ERROR_OUT_OF_DEVICE_MEMORY,
       {}},
      {"trn_mem_alloc",
       call(pool, 1ull << 50, 0, 0, TRN_MEM_FLAG_EXPORTABLE),
       TRN_ERROR_OUT_OF_DEVICE_MEMORY,
       {}},
      // Larger than the bank but not absurd: the report says so.
      {"trn_mem_alloc",
       call(pool, 25 * GiB, 0, 0, 0),
       TRN_ERROR_OUT_OF_DEVICE_MEMORY,
       {"25 GiB", "bank 0"}},
      {"trn_mem_alloc",
       call(pool, 25 * GiB, 0, 0, TRN_MEM_FLAG_EXPORTABLE),
       TRN_ERROR_OUT_OF_DEVICE_MEMORY,
       {"25 GiB"}},
  });
  CHECK(mem == nullptr);
  // The smallest allocations, and alignments 1..2 MiB, are fine.
  for (uint64_t alignment = 1; alignment <= 2 * MiB; alignment *= 2) {
    INFO("alignment " << alignment);
    trn_mem_t m = alloc(pool, 1, alignment);
    CHECK(mem_info(m).device_address % alignment == 0);
    REQUIRE(trn_mem_free(m) == TRN_SUCCESS);
  }
  CHECK(pool_stats(pool).allocation_count == 0);
  CHECK(pool_stats(host).allocation_count == 0);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(host) == TRN_SUCCESS);
}

TEST_CASE("pool and stats functions refuse bad descriptors, banks and structs",
          "[memory][negative][struct]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_mem_t mem = alloc(pool, 4096);
  trn_pool_t created = nullptr;

  auto create = [&](trn_pool_desc_t desc) {
    return [&created, device, desc] { return trn_pool_create(device, &desc, &created); };
  };
  trn_pool_desc_t bad_bank = TRN_POOL_DESC_INIT;
  bad_bank.hbm_bank = 4;
  trn_pool_desc_t huge_bank = TRN_POOL_DESC_INIT;
  huge_bank.hbm_bank = UINT32_MAX;
  trn_pool_desc_t bad_kind = TRN_POOL_DESC_INIT;
  bad_kind.kind = static_cast<trn_pool_kind_t>(7);
  trn_pool_desc_t negative_kind = TRN_POOL_DESC_INIT;
  negative_kind.kind = static_cast<trn_pool_kind_t>(0x7ffffffe);
  trn_pool_desc_t zeroed{};
  trn_pool_desc_t wrong_tag = TRN_POOL_DESC_INIT;
  wrong_tag.header.type = TRN_STRUCT_MEM_STATS;
  trn_pool_desc_t tiny = TRN_POOL_DESC_INIT;
  tiny.header.size = sizeof(trn_struct_header_t) - 1;

  check_expectations({
      {"trn_pool_create", create(bad_bank), TRN_ERROR_OUT_OF_RANGE, {"bank 4", "0-3"}},
      {"trn_pool_create", create(huge_bank), TRN_ERROR_OUT_OF_RANGE, {"bank"}},
      {"trn_pool_create", create(bad_kind), TRN_ERROR_INVALID_ENUM, {"kind"}},
      {"trn_pool_create", create(negative_kind), TRN_ERROR_INVALID_ENUM, {"kind"}},
      {"trn_pool_create", create(zeroed), TRN_ERROR_INVALID_STRUCT, {"TRN_POOL_DESC_INIT"}},
      {"trn_pool_create", create(wrong_tag), TRN_ERROR_INVALID_STRUCT, {"TRN_POOL_DESC_INIT"}},
      {"trn_pool_create", create(tiny), TRN_ERROR_INVALID_STRUCT, {"TRN_POOL_DESC_INIT"}},
      {"trn_device_get_memory_stats",
       [&] {
         trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
         return trn_device_get_memory_stats(device, 4, &stats);
       },
       TRN_ERROR_OUT_OF_RANGE,
       {"4"}},
      {"trn_device_get_memory_stats",
       [&] {
         trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
         return trn_device_get_memory_stats(device, UINT32_MAX - 1, &stats);
       },
       TRN_ERROR_OUT_OF_RANGE,
       {}},
      {"trn_device_get_memory_stats",
       [&] {
         trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
         stats.header.type = TRN_STRUCT_POOL_DESC;
         return trn_device_get_memory_stats(device, 0, &stats);
       },
       TRN_ERROR_INVALID_STRUCT,
       {"TRN_MEM_STATS_INIT"}},
      {"trn_pool_get_stats",
       [&] {
         trn_mem_stats_t stats{};
         return trn_pool_get_stats(pool, &stats);
       },
       TRN_ERROR_INVALID_STRUCT,
       {"TRN_MEM_STATS_INIT"}},
      {"trn_pool_get_stats",
       [&] {
         trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
         stats.header.size = 0;
         return trn_pool_get_stats(pool, &stats);
       },
       TRN_ERROR_INVALID_STRUCT,
       {"TRN_MEM_STATS_INIT"}},
      {"trn_mem_get_info",
       [&] {
         trn_mem_info_t info = TRN_MEM_INFO_INIT;
         info.header.type = TRN_STRUCT_PROCESS_INFO;
         return trn_mem_get_info(mem, &info);
       },
       TRN_ERROR_INVALID_STRUCT,
       {"TRN_MEM_INFO_INIT"}},
      {"trn_mem_get_info",
       [&] {
         trn_mem_info_t info{};
         return trn_mem_get_info(mem, &info);
       },
       TRN_ERROR_INVALID_STRUCT,
       {"TRN_MEM_INFO_INIT"}},
  });
  CHECK(created == nullptr);

  // A failed struct check writes nothing.
  trn_mem_info_t info{};
  info.size = 1234;
  CHECK(trn_mem_get_info(mem, &info) == TRN_ERROR_INVALID_STRUCT);
  CHECK(info.size == 1234);
  CHECK(info.device_address == 0);

  // Kind 0 means a device pool; an explicit host pool ignores the bank.
  trn_pool_desc_t defaults = TRN_POOL_DESC_INIT;
  defaults.hbm_bank = 3;
  REQUIRE(trn_pool_create(device, &defaults, &created) == TRN_SUCCESS);
  trn_mem_t in_bank3 = alloc(created, 4096);
  CHECK(mem_info(in_bank3).kind == TRN_POOL_KIND_DEVICE);
  CHECK(mem_info(in_bank3).hbm_bank == 3);
  REQUIRE(trn_mem_free(in_bank3) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(created) == TRN_SUCCESS);
  trn_pool_desc_t host_desc = TRN_POOL_DESC_INIT;
  host_desc.kind = TRN_POOL_KIND_HOST;
  host_desc.hbm_bank = 99;
  REQUIRE(trn_pool_create(device, &host_desc, &created) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(created) == TRN_SUCCESS);

  REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("double free, destroying a pool in use, and destroying twice", "[memory][negative]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_mem_t keep = alloc(pool, 8 * KiB);
  REQUIRE(trn_mem_set(keep, 0, 0x6d, 8 * KiB) == TRN_SUCCESS);
  trn_mem_t twice = alloc(pool, 8 * KiB);
  REQUIRE(trn_mem_free(twice) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(twice) == TRN_ERROR_INVALID_HANDLE);
  CHECK(error_contains("trn_mem_free"));
  CHECK(error_contains("stale"));
  CHECK(pool_stats(pool).allocation_count == 1);
  CHECK(pool_stats(pool).allocated_bytes == 8 * KiB);

  // An exportable (dedicated) allocation freed twice.
  trn_mem_t dedicated = alloc(pool, 4 * MiB, 0, TRN_MEM_CATEGORY_TENSORS, TRN_MEM_FLAG_EXPORTABLE);
  REQUIRE(trn_mem_free(dedicated) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(dedicated) == TRN_ERROR_INVALID_HANDLE);
  CHECK(pool_stats(pool).allocation_count == 1);

  REQUIRE(trn_pool_destroy(pool) == TRN_ERROR_HANDLE_IN_USE);
  CHECK(error_contains("trn_pool_destroy"));
  CHECK(error_contains("1 live allocation"));
  // Nothing was freed: the pool and its allocation still work.
  CHECK(reads_as(keep, 0, 8 * KiB, 0x6d));
  trn_mem_t more = alloc(pool, 8 * KiB);
  REQUIRE(trn_pool_destroy(pool) == TRN_ERROR_HANDLE_IN_USE);
  CHECK(error_contains("2 live allocations"));
  REQUIRE(trn_mem_free(more) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(keep) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_ERROR_INVALID_HANDLE);
  CHECK(error_contains("stale"));
  CHECK(device_stats(device).reserved_bytes == 0);
}

TEST_CASE("reads, writes and sets outside the allocation give TRN_ERROR_OUT_OF_RANGE",
          "[memory][negative]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_pool_t host = make_pool(device, 0, 0, TRN_POOL_KIND_HOST);
  for (trn_pool_t p : {pool, host}) {
    constexpr uint64_t kSize = 1000;  // not a multiple of 512: the rounding is not addressable
    trn_mem_t mem = alloc(p, kSize);
    REQUIRE(trn_mem_set(mem, 0, 0x21, kSize) == TRN_SUCCESS);
    std::vector<uint8_t> buffer(4096, 0x77);
    struct Range {
      uint64_t offset, size;
    };
    const Range bad[] = {
        {0, kSize + 1},
        {1, kSize},
        {kSize, 1},
        {kSize + 1, 0},
        {UINT64_MAX, 1},
        {UINT64_MAX, 0},
        {1, UINT64_MAX},
        {UINT64_MAX - 10, 20},
        {kSize - 1, 2},
        {512, 512},
        {1ull << 63, 1ull << 63},
    };
    for (const Range &r : bad) {
      INFO("offset " << r.offset << " size " << r.size);
      const uint64_t n = std::min<uint64_t>(r.size, buffer.size());
      (void)n;
      CHECK(trn_mem_write(mem, r.offset, buffer.data(), r.size) == TRN_ERROR_OUT_OF_RANGE);
      CHECK(error_contains("trn_mem_write"));
      CHECK(error_contains("outside"));
      CHECK(trn_mem_read(mem, r.offset, buffer.data(), r.size) == TRN_ERROR_OUT_OF_RANGE);
      CHECK(error_contains("trn_mem_read"));
      CHECK(trn_mem_set(mem, r.offset, 0x99, r.size) == TRN_ERROR_OUT_OF_RANGE);
      CHECK(error_contains("trn_mem_set"));
    }
    // Nothing was written by the refused calls, nothing read into the buffer.
    CHECK(reads_as(mem, 0, kSize, 0x21));
    CHECK(std::all_of(buffer.begin(), buffer.end(), [](uint8_t b) { return b == 0x77; }));
    // The edges themselves are fine.
    CHECK(trn_mem_write(mem, kSize - 1, buffer.data(), 1) == TRN_SUCCESS);
    CHECK(trn_mem_read(mem, 0, buffer.data(), kSize) == TRN_SUCCESS);
    CHECK(trn_mem_set(mem, kSize, 0, 0) == TRN_SUCCESS);
    REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  }
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(host) == TRN_SUCCESS);
}

TEST_CASE("export and import refuse what is not shareable", "[memory][negative][ipc]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_pool_t host = make_pool(device, 0, 0, TRN_POOL_KIND_HOST);
  trn_mem_t plain = alloc(pool, 4 * MiB);
  trn_mem_t host_mem = alloc(host, 4 * MiB);
  trn_ipc_handle_t handle;
  std::memset(&handle, 0xcd, sizeof handle);
  const trn_ipc_handle_t untouched = handle;

  REQUIRE(trn_mem_export(plain, &handle) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("trn_mem_export"));
  CHECK(error_contains("TRN_MEM_FLAG_EXPORTABLE"));
  REQUIRE(trn_mem_export(host_mem, &handle) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(std::memcmp(&handle, &untouched, sizeof handle) == 0);

  trn_mem_t imported = nullptr;
  trn_ipc_handle_t zeros{};
  REQUIRE(trn_mem_import(device, &zeros, &imported) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("trn_mem_import"));
  CHECK(error_contains("not a trn IPC handle"));
  REQUIRE(trn_mem_import(device, &untouched, &imported) == TRN_ERROR_INVALID_ARGUMENT);
  trn_ipc_handle_t random;
  uint32_t state = 12345;
  for (auto &b : random.bytes) b = static_cast<uint8_t>((state = state * 1103515245 + 12345) >> 16);
  REQUIRE(trn_mem_import(device, &random, &imported) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(imported == nullptr);

  // Imported memory cannot be exported again.
  trn_mem_t exportable = alloc(pool, 4 * MiB, 0, TRN_MEM_CATEGORY_TENSORS, TRN_MEM_FLAG_EXPORTABLE);
  trn_ipc_handle_t good;
  REQUIRE(trn_mem_export(exportable, &good) == TRN_SUCCESS);
  trn_ipc_handle_t again;
  REQUIRE(trn_mem_export(exportable, &again) == TRN_SUCCESS);  // exporting twice is fine
  CHECK(std::memcmp(&good, &again, sizeof good) == 0);
  trn_mem_t import = nullptr;
  REQUIRE(trn_mem_import(device, &good, &import) == TRN_SUCCESS);
  CHECK(mem_info(import).imported == 1);
  trn_ipc_handle_t re;
  CHECK(trn_mem_export(import, &re) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("imported"));
  REQUIRE(trn_mem_free(import) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(exportable) == TRN_SUCCESS);

  // Once the last holder freed it, the handle names nothing.
  REQUIRE(trn_mem_import(device, &good, &import) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("gone"));

  REQUIRE(trn_mem_free(plain) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(host_mem) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(host) == TRN_SUCCESS);
  CHECK(device_stats(device).reserved_bytes == 0);
}

TEST_CASE("an export imported in its own process lives until both let go", "[memory][ipc]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_mem_t exportable = alloc(pool, 4 * MiB, 0, TRN_MEM_CATEGORY_TENSORS, TRN_MEM_FLAG_EXPORTABLE);
  REQUIRE(trn_mem_set(exportable, 0, 0x4e, 4 * MiB) == TRN_SUCCESS);
  trn_ipc_handle_t handle;
  REQUIRE(trn_mem_export(exportable, &handle) == TRN_SUCCESS);
  const uint64_t reserved = device_stats(device, 0).reserved_bytes;
  CHECK(reserved == 4 * MiB);

  // Importing into the exporting process either is refused or gives a second view of the same
  // memory; freeing that view must not free the original under it.
  trn_mem_t import = nullptr;
  const trn_result_t result = trn_mem_import(device, &handle, &import);
  INFO("import: " << trn_result_name(result) << " " << (result ? trn_last_error() : ""));
  CHECK((result == TRN_SUCCESS || result == TRN_ERROR_INVALID_ARGUMENT));
  if (result == TRN_SUCCESS) {
    CHECK(mem_info(import).device_address == mem_info(exportable).device_address);
    CHECK(reads_as(import, 0, 4 * MiB, 0x4e));
    trn_mem_t second = nullptr;
    REQUIRE(trn_mem_import(device, &handle, &second) == TRN_SUCCESS);
    REQUIRE(trn_mem_free(import) == TRN_SUCCESS);
    REQUIRE(trn_mem_free(second) == TRN_SUCCESS);
  }
  CHECK(device_stats(device, 0).reserved_bytes == reserved);
  CHECK(reads_as(exportable, 0, 4 * MiB, 0x4e));
  // New allocations get other memory.
  trn_pool_t other_pool = make_pool(device, 0);
  trn_mem_t other =
      alloc(other_pool, 4 * MiB, 0, TRN_MEM_CATEGORY_TENSORS, TRN_MEM_FLAG_EXPORTABLE);
  REQUIRE(trn_mem_set(other, 0, 0x11, 4 * MiB) == TRN_SUCCESS);
  CHECK(mem_info(other).device_address != mem_info(exportable).device_address);
  CHECK(reads_as(exportable, 0, 4 * MiB, 0x4e));
  // The handle still names the memory while the exporter holds it.
  trn_mem_t late = nullptr;
  CHECK(trn_mem_import(device, &handle, &late) != TRN_ERROR_INVALID_HANDLE);
  if (late) REQUIRE(trn_mem_free(late) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(other) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(exportable) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(other_pool) == TRN_SUCCESS);
  CHECK(device_stats(device).reserved_bytes == 0);
}

TEST_CASE("memory that was exported and let go is backed again when reserved again",
          "[memory][ipc][backing]") {
  // Letting go of the last hold of an export frees its chunks and their storage. A reservation
  // that gets the same chunks must back them again before it is written, or a full backing store
  // would be a SIGBUS instead of TRN_ERROR_OUT_OF_DEVICE_MEMORY.
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_mem_t first = alloc(pool, 4 * MiB, 0, TRN_MEM_CATEGORY_TENSORS, TRN_MEM_FLAG_EXPORTABLE);
  const uint64_t address = mem_info(first).device_address;
  const uint64_t empty = hbm_file_bytes(env);
  REQUIRE(trn_mem_set(first, 0, 0x4e, 4 * MiB) == TRN_SUCCESS);
  CHECK(hbm_file_bytes(env) >= empty + 4 * MiB);
  trn_ipc_handle_t handle;
  REQUIRE(trn_mem_export(first, &handle) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(first) == TRN_SUCCESS);  // the only hold: the export goes
  CHECK(hbm_file_bytes(env) < empty + 4 * MiB);

  trn_mem_t again = alloc(pool, 4 * MiB, 0, TRN_MEM_CATEGORY_TENSORS, TRN_MEM_FLAG_EXPORTABLE);
  REQUIRE(mem_info(again).device_address == address);  // the same chunks
  void *pointer = nullptr;
  REQUIRE(trn_mem_map(again, &pointer) == TRN_SUCCESS);  // backs the whole allocation
  CHECK(hbm_file_bytes(env) >= empty + 4 * MiB);
  CHECK(reads_as(again, 0, 4 * MiB, 0));  // (reading through a mapping may back it too)
  REQUIRE(trn_mem_free(again) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("exported memory stays counted for the process that holds it", "[memory][ipc]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 1);
  trn_mem_t exportable =
      alloc(pool, 6 * MiB, 0, TRN_MEM_CATEGORY_COLLECTIVES, TRN_MEM_FLAG_EXPORTABLE);
  trn_ipc_handle_t handle;
  REQUIRE(trn_mem_export(exportable, &handle) == TRN_SUCCESS);
  const trn_mem_stats_t stats = device_stats(device, 1);
  CHECK(stats.reserved_bytes == 6 * MiB);
  CHECK(stats.allocated_bytes == 6 * MiB);
  CHECK(stats.process_count == 1);
  CHECK(pool_stats(pool).reserved_bytes == 6 * MiB);
  const auto processes = processes_of(device);
  const trn_process_info_t *self = find_pid(processes, getpid());
  REQUIRE(self != nullptr);
  // "hbm_allocated_bytes: of which handed out by allocations": never more than reserved.
  CHECK(self->hbm_allocated_bytes == 6 * MiB);
  CHECK(self->hbm_reserved_bytes == 6 * MiB);
  CHECK(self->hbm_allocated_by_category[TRN_MEM_CATEGORY_COLLECTIVES] == 6 * MiB);
  REQUIRE(trn_mem_free(exportable) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  CHECK(device_stats(device).reserved_bytes == 0);
}

TEST_CASE("a handle of another device is refused", "[memory][negative][ipc]") {
  SimEnv env;
  env.set("TRN_SIM_DEVICES", "2");
  trn_device_t devices[2] = {};
  uint32_t count = 2;
  REQUIRE(trn_device_get(&count, devices) == TRN_SUCCESS);
  REQUIRE(count == 2);
  trn_pool_t pool = make_pool(devices[0], 0);
  trn_mem_t mem = alloc(pool, 2 * MiB, 0, TRN_MEM_CATEGORY_TENSORS, TRN_MEM_FLAG_EXPORTABLE);
  CHECK(mem_info(mem).device_address >> 56 == 1);
  trn_ipc_handle_t handle;
  REQUIRE(trn_mem_export(mem, &handle) == TRN_SUCCESS);
  trn_mem_t imported = nullptr;
  REQUIRE(trn_mem_import(devices[1], &handle, &imported) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("device 0"));
  CHECK(imported == nullptr);
  trn_pool_t pool1 = make_pool(devices[1], 2);
  trn_mem_t on1 = alloc(pool1, 4096);
  CHECK(mem_info(on1).device_address >> 56 == 2);
  CHECK(mem_info(on1).device_index == 1);
  CHECK(((mem_info(on1).device_address >> 48) & 0xff) == 2);
  REQUIRE(trn_mem_free(on1) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool1) == TRN_SUCCESS);
}

TEST_CASE("trn_mem_category_name names every category", "[memory]") {
  SimEnv env;
  CHECK(std::string(trn_mem_category_name(TRN_MEM_CATEGORY_TENSORS)) == "tensors");
  CHECK(std::string(trn_mem_category_name(TRN_MEM_CATEGORY_CONSTANTS)) == "constants");
  CHECK(std::string(trn_mem_category_name(TRN_MEM_CATEGORY_CODE)) == "code");
  CHECK(std::string(trn_mem_category_name(TRN_MEM_CATEGORY_SCRATCH)) == "scratch");
  CHECK(std::string(trn_mem_category_name(TRN_MEM_CATEGORY_DMA_RINGS)) == "dma-rings");
  CHECK(std::string(trn_mem_category_name(TRN_MEM_CATEGORY_COLLECTIVES)) == "collectives");
  for (int bad : {static_cast<int>(TRN_MEM_CATEGORY_COUNT), 7, 99, 0x7fffffff}) {
    INFO("category " << bad);
    const char *name = trn_mem_category_name(static_cast<trn_mem_category_t>(bad));
    REQUIRE(name != nullptr);
    CHECK(std::string(name) == "unknown");
  }
}

TEST_CASE("pool and memory handles are stale after trn_runtime_shutdown",
          "[memory][negative][handle]") {
  SimEnv env;
  trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_pool_t host = make_pool(device, 0, 0, TRN_POOL_KIND_HOST);
  trn_mem_t mem = alloc(pool, 4096);
  trn_mem_t host_mem = alloc(host, 4096);
  REQUIRE(trn_runtime_shutdown() == TRN_SUCCESS);
  trn_ipc_handle_t handle{};
  check_expectations(pool_calls(pool, TRN_ERROR_INVALID_HANDLE, "stale", true));
  check_expectations(pool_calls(host, TRN_ERROR_INVALID_HANDLE, "stale", true));
  check_expectations(mem_calls(mem, TRN_ERROR_INVALID_HANDLE, "stale", true));
  check_expectations(mem_calls(host_mem, TRN_ERROR_INVALID_HANDLE, "stale", true));
  check_expectations(device_memory_calls(device, handle, TRN_ERROR_INVALID_HANDLE, "stale"));
  // The new session's objects work, and the old handles stay stale beside them.
  device = first_device();
  trn_pool_t fresh = make_pool(device, 0);
  trn_mem_t fresh_mem = alloc(fresh, 4096);
  check_expectations(mem_calls(mem, TRN_ERROR_INVALID_HANDLE, "stale", true));
  check_expectations(pool_calls(pool, TRN_ERROR_INVALID_HANDLE, "stale", true));
  REQUIRE(trn_mem_free(fresh_mem) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(fresh) == TRN_SUCCESS);
}

// ---- backing store -----------------------------------------------------------------------------

namespace {

// A tmpfs of `size` mounted on a new directory under `parent` for the test's duration.
class SmallTmpfs {
 public:
  SmallTmpfs(const std::string &parent, const char *size) : dir_(parent + "/small-tmpfs") {
    if (mkdir(dir_.c_str(), 0700) != 0) {
      error_ = "mkdir " + dir_ + ": " + std::strerror(errno);
      return;
    }
    const std::string options = std::string("size=") + size + ",mode=0700";
    if (mount("tmpfs", dir_.c_str(), "tmpfs", 0, options.c_str()) != 0) {
      error_ = "mount -t tmpfs -o " + options + " tmpfs " + dir_ + ": " + std::strerror(errno);
      rmdir(dir_.c_str());
      return;
    }
    mounted_ = true;
  }
  ~SmallTmpfs() {
    trn_runtime_shutdown();  // close the files on it first
    if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
    rmdir(dir_.c_str());
  }
  SmallTmpfs(const SmallTmpfs &) = delete;
  SmallTmpfs &operator=(const SmallTmpfs &) = delete;

  bool mounted() const { return mounted_; }
  const std::string &dir() const { return dir_; }
  const std::string &error() const { return error_; }

 private:
  std::string dir_;
  std::string error_;
  bool mounted_ = false;
};

// Mounts a 64 MiB tmpfs and points the runtime at it with an 8 GiB device; false (with a WARN)
// where mounting is not allowed.
bool use_small_store(SimEnv &env, const SmallTmpfs &tmpfs) {
  if (!tmpfs.mounted()) {
    WARN("not run: this test needs to mount a 64 MiB tmpfs (root or CAP_SYS_ADMIN): "
         << tmpfs.error());
    return false;
  }
  env.set("TRN_SIM_ROOT", tmpfs.dir().c_str());
  env.set("TRN_SIM_HBM_BYTES", "8GiB");
  trn_device_properties_t p = TRN_DEVICE_PROPERTIES_INIT;
  REQUIRE(trn_device_get_properties(first_device(), &p) == TRN_SUCCESS);
  REQUIRE(p.hbm_bytes == 8 * GiB);
  return true;
}

// Forks a child that fills the backing store (writing 1 MiB at a time into 1 GiB of bank 2
// until a write fails), then, with `read_after`, reads 32 MiB it never wrote. It exits without
// freeing anything, as a crashing process would. Returns its wait status. Exit codes: 0 done
// (the read gave zeros or TRN_ERROR_OUT_OF_DEVICE_MEMORY), 10+ something else went wrong.
int fill_store_in_child(bool read_after) {
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The child's runtime starts a session of its own; no Catch2 macros here.
    trn_device_t device = nullptr;
    uint32_t count = 1;
    if (trn_device_get(&count, &device) != TRN_SUCCESS) _exit(10);
    trn_pool_desc_t desc = TRN_POOL_DESC_INIT;
    desc.hbm_bank = 2;
    trn_pool_t pool = nullptr;
    trn_mem_t mem = nullptr;
    if (trn_pool_create(device, &desc, &pool) != TRN_SUCCESS ||
        trn_mem_alloc(pool, GiB, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem) != TRN_SUCCESS)
      _exit(11);
    uint64_t filled = 0;
    while (filled < 256 * MiB && trn_mem_set(mem, filled, 7, MiB) == TRN_SUCCESS) filled += MiB;
    if (filled == 256 * MiB) _exit(12);  // the store never filled up
    if (!read_after) _exit(0);
    std::vector<uint8_t> buffer(32 * MiB, 0xff);
    const trn_result_t r = trn_mem_read(mem, 512 * MiB, buffer.data(), buffer.size());
    if (r == TRN_ERROR_OUT_OF_DEVICE_MEMORY) _exit(0);
    if (r != TRN_SUCCESS) _exit(13);
    const std::vector<uint8_t> zeros(buffer.size(), 0);
    _exit(std::memcmp(buffer.data(), zeros.data(), buffer.size()) == 0 ? 0 : 14);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  return status;
}

std::string describe_status(int status) {
  return WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                             : "exit " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

TEST_CASE("a full backing store is TRN_ERROR_OUT_OF_DEVICE_MEMORY, never a signal",
          "[memory][backing]") {
  SimEnv env;
  SmallTmpfs tmpfs(env.root(), "64m");
  if (!use_small_store(env, tmpfs)) return;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);

  // Reserving is free: 1 GiB on a 64 MiB filesystem.
  trn_mem_t big = alloc(pool, GiB);
  CHECK(reads_as(big, 0, MiB, 0));

  std::vector<uint8_t> data(128 * MiB, 0xa5);
  REQUIRE(trn_mem_write(big, 0, data.data(), data.size()) == TRN_ERROR_OUT_OF_DEVICE_MEMORY);
  {
    INFO("trn_last_error: " << trn_last_error());
    CHECK(error_contains("trn_mem_write"));
    CHECK(error_contains("backing store"));
    CHECK(error_contains(tmpfs.dir()));
    CHECK(error_contains("TRN_SIM_ROOT"));
  }
  REQUIRE(trn_mem_set(big, 0, 0xa5, 128 * MiB) == TRN_ERROR_OUT_OF_DEVICE_MEMORY);
  CHECK(error_contains("trn_mem_set"));
  CHECK(error_contains("backing store"));
  void *pointer = nullptr;
  REQUIRE(trn_mem_map(big, &pointer) == TRN_ERROR_OUT_OF_DEVICE_MEMORY);  // commits 1 GiB
  CHECK(error_contains("trn_mem_map"));
  CHECK(error_contains("backing store"));
  CHECK(pointer == nullptr);

  // The failed commits left the filesystem usable: smaller writes work.
  trn_pool_t other = make_pool(device, 1);
  trn_mem_t small = alloc(other, MiB);
  REQUIRE(trn_mem_write(small, 0, data.data(), MiB) == TRN_SUCCESS);
  CHECK(reads_as(small, 0, MiB, 0xa5));
  REQUIRE(trn_mem_write(big, 0, data.data(), 4 * MiB) == TRN_SUCCESS);
  CHECK(reads_as(big, 0, 4 * MiB, 0xa5));
  REQUIRE(trn_mem_map(small, &pointer) == TRN_SUCCESS);
  CHECK(static_cast<uint8_t *>(pointer)[MiB - 1] == 0xa5);

  // Freeing and trimming returns the storage: a 32 MiB write fits again.
  REQUIRE(trn_mem_free(big) == TRN_SUCCESS);
  REQUIRE(trn_pool_trim(pool) == TRN_SUCCESS);
  trn_mem_t again = alloc(pool, 32 * MiB);
  REQUIRE(trn_mem_write(again, 0, data.data(), 32 * MiB) == TRN_SUCCESS);
  CHECK(reads_as(again, 0, 32 * MiB, 0xa5));
  REQUIRE(trn_mem_free(again) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(small) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(other) == TRN_SUCCESS);
}

TEST_CASE("reading unwritten memory with a full backing store is not a signal",
          "[memory][backing]") {
  SimEnv env;
  SmallTmpfs tmpfs(env.root(), "64m");
  if (!use_small_store(env, tmpfs)) return;
  // Uncommitted memory reads as zeros and needs no storage: a read of it with the store full
  // gives zeros or an error. (In a child: a signal would end the test process.)
  const int status = fill_store_in_child(true);
  INFO("child " << describe_status(status));
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("storage written by a dead process is returned when the backing store runs out",
          "[memory][backing]") {
  SimEnv env;
  SmallTmpfs tmpfs(env.root(), "64m");
  if (!use_small_store(env, tmpfs)) return;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  // Reserved before the other process runs, so writing it needs storage and no reservation.
  trn_mem_t mem = alloc(pool, 32 * MiB);
  const int status = fill_store_in_child(false);
  INFO("child " << describe_status(status));
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  // The child is dead; what it wrote holds the store. Writing must not fail because of it.
  const trn_result_t result = trn_mem_set(mem, 0, 0x5e, 32 * MiB);
  INFO("trn_last_error: " << (result ? trn_last_error() : ""));
  CHECK(result == TRN_SUCCESS);
  if (result == TRN_SUCCESS) CHECK(reads_as(mem, 0, 32 * MiB, 0x5e));
  REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

namespace {

uint64_t resident_bytes() {
  std::FILE *statm = std::fopen("/proc/self/statm", "r");
  REQUIRE(statm != nullptr);
  unsigned long long size = 0, resident = 0;
  REQUIRE(std::fscanf(statm, "%llu %llu", &size, &resident) == 2);
  std::fclose(statm);
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

uint64_t available_host_bytes() {
  std::FILE *meminfo = std::fopen("/proc/meminfo", "r");
  REQUIRE(meminfo != nullptr);
  char line[256];
  unsigned long long kib = 0;
  while (std::fgets(line, sizeof line, meminfo))
    if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
  std::fclose(meminfo);
  REQUIRE(kib > 0);
  return kib * 1024;
}

}  // namespace

TEST_CASE("host memory that the system cannot back fails up front", "[memory][host]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t host = make_pool(device, 0, 0, TRN_POOL_KIND_HOST);
  // Twice 1 TiB used to succeed (never committed), leaving exhaustion to the OOM killer.
  for (int i = 0; i < 2; ++i) {
    trn_mem_t mem = nullptr;
    CHECK(trn_mem_alloc(host, 1ull << 40, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem) ==
          TRN_ERROR_OUT_OF_HOST_MEMORY);
    CHECK(mem == nullptr);
    CHECK(error_contains("host memory"));
    CHECK(error_contains("available"));
  }
  // More than the system has available right now, and more than 1 TiB.
  trn_mem_t mem = nullptr;
  CHECK(trn_mem_alloc(host, available_host_bytes() + GiB, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem) ==
        TRN_ERROR_OUT_OF_HOST_MEMORY);
  CHECK(trn_mem_alloc(host, (1ull << 40) + 1, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem) ==
        TRN_ERROR_OUT_OF_HOST_MEMORY);
  CHECK(error_contains("1 TiB"));
  CHECK(pool_stats(host).reserved_bytes == 0);

  // What succeeds is committed at once: the process's resident memory grows by it.
  const uint64_t before = resident_bytes();
  mem = alloc(host, 64 * MiB);
  CHECK(resident_bytes() >= before + 60 * MiB);
  CHECK(reads_as(mem, 0, 64 * MiB, 0));
  REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(host) == TRN_SUCCESS);
}
