// Device memory across processes: every live process is counted, a dead process's memory comes
// back at once and reads as zeros for the next holder, and exported memory lives exactly as
// long as some process holds it.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "support/api_helpers.hpp"
#include "support/result_printing.hpp"
#include "support/sim_env.hpp"
#include "support/subprocess.hpp"
#include "trn/trn.h"

using trn::test::Child;
using trn::test::run_command;
using trn::test::SimEnv;

namespace {

using trn::test::first_device;
using trn::test::last_error;
using trn::test::mem_info;

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t GiB = 1ull << 30;

trn_pool_t make_pool(trn_device_t device, uint32_t bank) {
  trn_pool_desc_t desc = TRN_POOL_DESC_INIT;
  desc.hbm_bank = bank;
  trn_pool_t pool = nullptr;
  INFO(trn_last_error());
  REQUIRE(trn_pool_create(device, &desc, &pool) == TRN_SUCCESS);
  return pool;
}

trn_mem_t alloc(trn_pool_t pool, uint64_t size, uint32_t flags = 0) {
  trn_mem_t mem = nullptr;
  const trn_result_t result = trn_mem_alloc(pool, size, 0, TRN_MEM_CATEGORY_TENSORS, flags, &mem);
  INFO("size " << size << ": " << trn_last_error());
  REQUIRE(result == TRN_SUCCESS);
  return mem;
}

// Allocates `size` pieces until the pool's bank is full; the first failure must be OOM.
std::vector<trn_mem_t> fill(trn_pool_t pool, uint64_t size, size_t at_most) {
  std::vector<trn_mem_t> mems;
  while (mems.size() < at_most) {
    trn_mem_t mem = nullptr;
    const trn_result_t result = trn_mem_alloc(pool, size, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem);
    if (result != TRN_SUCCESS) {
      INFO(trn_last_error());
      CHECK(result == TRN_ERROR_OUT_OF_DEVICE_MEMORY);
      break;
    }
    mems.push_back(mem);
  }
  return mems;
}

trn_mem_stats_t device_stats(trn_device_t device, uint32_t bank = UINT32_MAX) {
  trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
  INFO(trn_last_error());
  REQUIRE(trn_device_get_memory_stats(device, bank, &stats) == TRN_SUCCESS);
  return stats;
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

const trn_process_info_t *find_pid(const std::vector<trn_process_info_t> &list, pid_t pid) {
  for (const auto &p : list)
    if (p.pid == pid) return &p;
  return nullptr;
}

// Whether `size` bytes at `offset` all hold `value`.
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

// Whether `text` has `number` as a whole number (not as part of a longer one).
bool has_number(const std::string &text, long number) {
  const std::string word = std::to_string(number);
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const bool starts = at == 0 || !std::isdigit(static_cast<unsigned char>(text[at - 1]));
    const size_t end = at + word.size();
    const bool ends = end == text.size() || !std::isdigit(static_cast<unsigned char>(text[end]));
    if (starts && ends) return true;
  }
  return false;
}

// A holder's "allocated <pid> <bytes> <address>" line.
struct Allocated {
  int pid = 0;
  unsigned long long bytes = 0, address = 0;
};

Allocated parse_allocated(const std::string &line) {
  Allocated a;
  INFO("holder said: '" << line << "'");
  REQUIRE(std::sscanf(line.c_str(), "allocated %d %llu %llx", &a.pid, &a.bytes, &a.address) == 3);
  return a;
}

std::string to_hex(const trn_ipc_handle_t &handle) {
  std::string hex;
  char two[3];
  for (uint8_t b : handle.bytes) {
    std::snprintf(two, sizeof two, "%02x", b);
    hex += two;
  }
  return hex;
}

trn_ipc_handle_t from_hex(const std::string &hex) {
  trn_ipc_handle_t handle{};
  REQUIRE(hex.size() == 2 * sizeof handle.bytes);
  for (size_t i = 0; i < sizeof handle.bytes; ++i)
    handle.bytes[i] = static_cast<uint8_t>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  return handle;
}

// The holder's "exported <hex>" line as a handle.
trn_ipc_handle_t read_exported(Child &exporter) {
  const std::string line = exporter.read_line(20000);
  INFO("exporter said: '" << line << "'");
  REQUIRE(line.rfind("exported ", 0) == 0);
  return from_hex(line.substr(9));
}

// Writes a line to a child's standard input (Child has no writer: open the pipe through /proc).
void send_line(const Child &child, const std::string &line) {
  const std::string path = "/proc/" + std::to_string(child.pid()) + "/fd/0";
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  const std::string text = line + "\n";
  const ssize_t written = write(fd, text.data(), text.size());
  close(fd);
  REQUIRE(written == static_cast<ssize_t>(text.size()));
}

}  // namespace

TEST_CASE("every live process's memory is counted, and a killed process's comes back at once",
          "[memory]") {
  SimEnv env;
  const trn_device_t device = first_device();
  Child holder({TRN_TEST_HOLDER, "--alloc", "0", "256", "0xab"});
  const Allocated held = parse_allocated(holder.read_line(20000));
  REQUIRE(held.pid == holder.pid());
  CHECK(held.bytes == 256 * MiB);
  CHECK(held.address >> 56 == 1);
  CHECK(((held.address >> 48) & 0xff) == 0);

  trn_pool_t pool = make_pool(device, 0);
  std::vector<trn_mem_t> mine = {alloc(pool, GiB)};

  trn_mem_stats_t bank = device_stats(device, 0);
  CHECK(bank.process_count == 2);
  CHECK(bank.reserved_bytes == GiB + 256 * MiB);
  CHECK(bank.allocated_bytes == GiB + 256 * MiB);
  CHECK(bank.allocation_count == 2);
  CHECK(bank.by_category[TRN_MEM_CATEGORY_TENSORS].current_bytes == GiB + 256 * MiB);
  trn_mem_stats_t all = device_stats(device);
  CHECK(all.process_count == 2);
  CHECK(all.reserved_bytes == GiB + 256 * MiB);
  CHECK(device_stats(device, 1).process_count == 0);

  auto processes = processes_of(device);
  const trn_process_info_t *other = find_pid(processes, holder.pid());
  REQUIRE(other != nullptr);
  CHECK(other->hbm_reserved_bytes == 256 * MiB);
  CHECK(other->hbm_allocated_bytes == 256 * MiB);
  CHECK(other->hbm_allocated_by_category[TRN_MEM_CATEGORY_TENSORS] == 256 * MiB);
  CHECK_THAT(std::string(other->command), Catch::Contains("--alloc 0 256 0xab"));
  const trn_process_info_t *self = find_pid(processes, getpid());
  REQUIRE(self != nullptr);
  CHECK(self->hbm_reserved_bytes == GiB);

  int status = 0;
  const std::string wide = run_command({TRN_LS_PATH, "-w"}, 20000, &status);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(has_number(wide, holder.pid()));
  std::string json = run_command({TRN_LS_PATH, "--json"}, 20000, &status);
  CHECK(WEXITSTATUS(status) == 0);
  CHECK_THAT(json, Catch::Contains("\"pid\": " + std::to_string(holder.pid()) + ","));
  CHECK_THAT(json, Catch::Contains("\"memory_reserved\": " + std::to_string(256 * MiB) + ","));

  // Fill the bank: the report names the other process and what it holds.
  for (trn_mem_t mem : fill(pool, GiB, 30)) mine.push_back(mem);
  CHECK(mine.size() == 23);  // 24 GiB less the holder's 256 MiB, in whole GiB
  trn_mem_t mem = nullptr;
  REQUIRE(trn_mem_alloc(pool, GiB, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem) ==
          TRN_ERROR_OUT_OF_DEVICE_MEMORY);
  const std::string report = last_error();
  INFO("report:\n" << report);
  CHECK_THAT(report, Catch::Contains(std::to_string(holder.pid())));
  CHECK_THAT(report, Catch::Contains("256 MiB"));
  CHECK_THAT(report, Catch::Contains(std::to_string(getpid())));
  CHECK_THAT(report, Catch::Contains("23 GiB"));
  CHECK_THAT(report, Catch::Contains("(this process)"));

  holder.kill(SIGKILL);
  REQUIRE(holder.wait(10000) != -1);

  // At once: dead processes are not counted, listed or shown.
  bank = device_stats(device, 0);
  CHECK(bank.process_count == 1);
  CHECK(bank.reserved_bytes == 23 * GiB);
  CHECK(bank.allocated_bytes == 23 * GiB);
  CHECK(bank.allocation_count == 23);
  CHECK(bank.largest_free_bytes == 768 * MiB);  // the tail; the dead range is free but apart
  CHECK(find_pid(processes_of(device), holder.pid()) == nullptr);
  const std::string after = run_command({TRN_LS_PATH, "-w"}, 20000, &status);
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(!has_number(after, holder.pid()));
  CHECK(has_number(after, getpid()));
  json = run_command({TRN_LS_PATH, "--json"}, 20000, &status);
  CHECK_THAT(json, !Catch::Contains("\"pid\": " + std::to_string(holder.pid()) + ","));
  CHECK_THAT(json, Catch::Contains("\"pid\": " + std::to_string(getpid()) + ","));

  // Its chunks are this process's for the taking: the whole bank.
  const std::vector<trn_mem_t> rest = fill(pool, 256 * MiB, 10);
  CHECK(rest.size() == 4);
  bank = device_stats(device, 0);
  CHECK(bank.reserved_bytes == 24 * GiB);
  CHECK(bank.largest_free_bytes == 0);
  // The piece that took the dead process's range reads as zeros, not as its 0xab.
  bool covered = false;
  for (trn_mem_t piece : rest) {
    const trn_mem_info_t info = mem_info(piece);
    if (info.device_address != held.address) continue;
    covered = true;
    CHECK(reads_as(piece, 0, 256 * MiB, 0));
  }
  CHECK(covered);

  for (trn_mem_t m : mine) REQUIRE(trn_mem_free(m) == TRN_SUCCESS);
  for (trn_mem_t m : rest) REQUIRE(trn_mem_free(m) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  CHECK(device_stats(device).reserved_bytes == 0);
}

TEST_CASE("memory another process freed or left behind reads as zeros", "[memory]") {
  SimEnv env;
  const trn_device_t device = first_device();
  // Attached before the holder: its memory comes back through the chunk table, not through
  // this process reusing its slot.
  trn_pool_t elsewhere = make_pool(device, 1);
  trn_mem_t small = alloc(elsewhere, 4096);
  Child holder({TRN_TEST_HOLDER, "--alloc", "0", "64", "0xab"});
  const Allocated held = parse_allocated(holder.read_line(20000));
  REQUIRE(held.pid == holder.pid());
  CHECK(device_stats(device, 0).reserved_bytes == 64 * MiB);

  SECTION("it exits normally (frees and destroys its pool)") {
    holder.close_stdin();
    const int status = holder.wait(10000);
    REQUIRE(status != -1);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  SECTION("it is killed with its memory allocated") {
    holder.kill(SIGKILL);
    REQUIRE(holder.wait(10000) != -1);
  }
  CHECK(device_stats(device, 0).reserved_bytes == 0);

  // Take the whole bank (1 GiB pieces, then 64 MiB ones for whatever is left): one of them
  // covers the holder's range.
  trn_pool_t pool = make_pool(device, 0);
  std::vector<trn_mem_t> pieces = fill(pool, GiB, 30);
  for (trn_mem_t mem : fill(pool, 64 * MiB, 400)) pieces.push_back(mem);
  CHECK(device_stats(device, 0).reserved_bytes == 24 * GiB);
  bool covered = false;
  for (trn_mem_t piece : pieces) {
    const trn_mem_info_t info = mem_info(piece);
    if (held.address < info.device_address || held.address >= info.device_address + info.size)
      continue;
    covered = true;
    const uint64_t offset = held.address - info.device_address;
    REQUIRE(offset + 64 * MiB <= info.size);
    CHECK(reads_as(piece, offset, 64 * MiB, 0));
  }
  CHECK(covered);
  for (trn_mem_t m : pieces) REQUIRE(trn_mem_free(m) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(small) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(elsewhere) == TRN_SUCCESS);
}

TEST_CASE("a dead process's memory is free for placement, not only after a failed search",
          "[memory]") {
  SimEnv env;
  const trn_device_t device = first_device();
  // This process attaches first, so the holder's slot is not one it could reuse (reusing a dead
  // process's slot returns that process's memory anyway).
  trn_pool_t elsewhere = make_pool(device, 1);
  trn_mem_t small = alloc(elsewhere, 4096);
  Child holder({TRN_TEST_HOLDER, "--alloc", "0", "64", "0xab"});
  parse_allocated(holder.read_line(20000));
  holder.kill(SIGKILL);
  REQUIRE(holder.wait(10000) != -1);
  const trn_mem_stats_t bank = device_stats(device, 0);
  CHECK(bank.reserved_bytes == 0);
  CHECK(bank.largest_free_bytes == 24 * GiB);

  // The bank is free as the statistics say: 24 pieces of 1 GiB fit it.
  trn_pool_t pool = make_pool(device, 0);
  const std::vector<trn_mem_t> pieces = fill(pool, GiB, 30);
  CHECK(pieces.size() == 24);
  for (trn_mem_t m : pieces) REQUIRE(trn_mem_free(m) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(small) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(elsewhere) == TRN_SUCCESS);
}

TEST_CASE("exported memory lives while any process holds it", "[memory][ipc]") {
  SimEnv env;
  const trn_device_t device = first_device();
  Child exporter({TRN_TEST_HOLDER, "--export", "4", "0x5a"});
  const trn_ipc_handle_t handle = read_exported(exporter);
  CHECK(device_stats(device, 0).reserved_bytes == 4 * MiB);

  trn_mem_t imported = nullptr;
  {
    INFO(trn_last_error());
    REQUIRE(trn_mem_import(device, &handle, &imported) == TRN_SUCCESS);
  }
  trn_mem_info_t info = mem_info(imported);
  CHECK(info.imported == 1);
  CHECK(info.size == 4 * MiB);
  CHECK(info.kind == TRN_POOL_KIND_DEVICE);
  CHECK(info.hbm_bank == 0);
  CHECK(info.device_index == 0);
  CHECK(info.category == TRN_MEM_CATEGORY_TENSORS);
  CHECK(info.device_address >> 56 == 1);
  CHECK(reads_as(imported, 0, 4 * MiB, 0x5a));
  // This process's writes land in the shared memory.
  REQUIRE(trn_mem_set(imported, MiB, 0x77, MiB) == TRN_SUCCESS);
  void *pointer = nullptr;
  REQUIRE(trn_mem_map(imported, &pointer) == TRN_SUCCESS);
  CHECK(static_cast<uint8_t *>(pointer)[MiB] == 0x77);
  CHECK(static_cast<uint8_t *>(pointer)[0] == 0x5a);

  // The exporter frees its allocation: the import stays valid and keeps the data.
  send_line(exporter, "free");
  CHECK(exporter.read_line(20000) == "freed");
  CHECK(device_stats(device, 0).reserved_bytes == 4 * MiB);
  CHECK(reads_as(imported, 0, MiB, 0x5a));
  CHECK(reads_as(imported, MiB, MiB, 0x77));
  CHECK(reads_as(imported, 2 * MiB, 2 * MiB, 0x5a));

  // The exporter dies: still valid, and nobody else can be given the memory.
  exporter.kill(SIGKILL);
  REQUIRE(exporter.wait(10000) != -1);
  const trn_mem_stats_t held = device_stats(device, 0);
  CHECK(held.reserved_bytes == 4 * MiB);
  CHECK(held.process_count == 1);  // this process holds it
  trn_pool_t pool = make_pool(device, 0);
  std::vector<trn_mem_t> rest = fill(pool, GiB, 30);
  CHECK(rest.size() == 23);
  for (trn_mem_t mem : fill(pool, 12 * MiB, 200)) rest.push_back(mem);
  CHECK(rest.size() == 23 + 85);  // 24 GiB less the shared 4 MiB
  CHECK(device_stats(device, 0).reserved_bytes == 24 * GiB);
  for (trn_mem_t mem : rest) {
    const trn_mem_info_t piece = mem_info(mem);
    CHECK((piece.device_address >= info.device_address + 4 * MiB ||
           piece.device_address + piece.size <= info.device_address));
  }
  for (trn_mem_t mem : rest) REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  REQUIRE(trn_pool_trim(pool) == TRN_SUCCESS);
  CHECK(reads_as(imported, 0, MiB, 0x5a));
  CHECK(reads_as(imported, MiB, MiB, 0x77));
  CHECK(static_cast<uint8_t *>(pointer)[4 * MiB - 1] == 0x5a);

  // The last holder lets go: the bytes return to the device and the handle names nothing.
  REQUIRE(trn_mem_free(imported) == TRN_SUCCESS);
  const trn_mem_stats_t returned = device_stats(device, 0);
  CHECK(returned.reserved_bytes == 0);
  CHECK(returned.largest_free_bytes == 24 * GiB);
  trn_mem_t again = nullptr;
  REQUIRE(trn_mem_import(device, &handle, &again) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("gone"));
  CHECK(again == nullptr);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("an export whose only holder freed it or exited cannot be imported", "[memory][ipc]") {
  SimEnv env;
  const trn_device_t device = first_device();
  Child exporter({TRN_TEST_HOLDER, "--export", "2", "0x33"});
  const trn_ipc_handle_t handle = read_exported(exporter);
  trn_mem_t mem = nullptr;

  SECTION("freed") {
    send_line(exporter, "free");
    REQUIRE(exporter.read_line(20000) == "freed");
    REQUIRE(trn_mem_import(device, &handle, &mem) == TRN_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(last_error(), Catch::Contains("trn_mem_import"));
    CHECK_THAT(last_error(), Catch::Contains("gone"));
    CHECK_THAT(last_error(), Catch::Contains("exported by pid " + std::to_string(exporter.pid())));
    exporter.close_stdin();
    const int status = exporter.wait(10000);
    REQUIRE(status != -1);
    CHECK(WEXITSTATUS(status) == 0);
  }
  SECTION("exited normally") {
    exporter.close_stdin();
    const int status = exporter.wait(10000);
    REQUIRE(status != -1);
    CHECK(WEXITSTATUS(status) == 0);
    REQUIRE(trn_mem_import(device, &handle, &mem) == TRN_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(last_error(), Catch::Contains("gone"));
  }
  SECTION("killed") {
    exporter.kill(SIGKILL);
    REQUIRE(exporter.wait(10000) != -1);
    REQUIRE(trn_mem_import(device, &handle, &mem) == TRN_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(last_error(), Catch::Contains("gone"));
  }
  CHECK(mem == nullptr);
  CHECK(device_stats(device, 0).reserved_bytes == 0);
}

TEST_CASE("another process imports this process's export and sees its data", "[memory][ipc]") {
  SimEnv env;
  const trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device, 0);
  trn_mem_t mem = alloc(pool, 3 * MiB + 512, TRN_MEM_FLAG_EXPORTABLE);
  REQUIRE(trn_mem_set(mem, 0, 0xc3, 3 * MiB + 512) == TRN_SUCCESS);
  trn_ipc_handle_t handle;
  REQUIRE(trn_mem_export(mem, &handle) == TRN_SUCCESS);

  Child importer({TRN_TEST_HOLDER, "--import", to_hex(handle), "0xc3"});
  REQUIRE(importer.read_line(20000) == "imported ok");
  CHECK(device_stats(device, 0).reserved_bytes == 4 * MiB);

  // A second importer checking for the wrong pattern is told so (the check can fail).
  {
    Child wrong({TRN_TEST_HOLDER, "--import", to_hex(handle), "0x00"});
    const std::string line = wrong.read_line(20000);
    CHECK(line.rfind("imported bad", 0) == 0);
    wrong.close_stdin();
    REQUIRE(wrong.wait(10000) != -1);
  }

  // This process frees its allocation: the importer still holds the memory.
  REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  CHECK(device_stats(device, 0).reserved_bytes == 4 * MiB);
  trn_mem_t reimport = nullptr;
  {
    INFO(trn_last_error());
    REQUIRE(trn_mem_import(device, &handle, &reimport) == TRN_SUCCESS);
  }
  CHECK(reads_as(reimport, 0, 3 * MiB + 512, 0xc3));
  REQUIRE(trn_mem_free(reimport) == TRN_SUCCESS);
  CHECK(device_stats(device, 0).reserved_bytes == 4 * MiB);

  // The importer exits: nobody holds it any more.
  importer.close_stdin();
  const int status = importer.wait(10000);
  REQUIRE(status != -1);
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(device_stats(device, 0).reserved_bytes == 0);
  trn_mem_t gone = nullptr;
  REQUIRE(trn_mem_import(device, &handle, &gone) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("gone"));

  // A killed importer lets go too.
  mem = alloc(pool, 2 * MiB, TRN_MEM_FLAG_EXPORTABLE);
  REQUIRE(trn_mem_set(mem, 0, 0x3c, 2 * MiB) == TRN_SUCCESS);
  REQUIRE(trn_mem_export(mem, &handle) == TRN_SUCCESS);
  Child killed({TRN_TEST_HOLDER, "--import", to_hex(handle), "0x3c"});
  REQUIRE(killed.read_line(20000) == "imported ok");
  REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  CHECK(device_stats(device, 0).reserved_bytes == 2 * MiB);
  killed.kill(SIGKILL);
  REQUIRE(killed.wait(10000) != -1);
  CHECK(device_stats(device, 0).reserved_bytes == 0);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}

TEST_CASE("importing the same export twice: freeing one import keeps the other valid",
          "[memory][ipc]") {
  SimEnv env;
  const trn_device_t device = first_device();
  Child exporter({TRN_TEST_HOLDER, "--export", "4", "0x5a"});
  const trn_ipc_handle_t handle = read_exported(exporter);
  trn_mem_t first = nullptr, second = nullptr;
  REQUIRE(trn_mem_import(device, &handle, &first) == TRN_SUCCESS);
  REQUIRE(trn_mem_import(device, &handle, &second) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(first) == TRN_SUCCESS);
  // The exporter lets go; `second` still holds the memory.
  send_line(exporter, "free");
  REQUIRE(exporter.read_line(20000) == "freed");
  exporter.kill(SIGKILL);
  REQUIRE(exporter.wait(10000) != -1);
  CHECK(device_stats(device, 0).reserved_bytes == 4 * MiB);
  CHECK(reads_as(second, 0, 4 * MiB, 0x5a));
  // Nobody else gets it meanwhile.
  trn_pool_t pool = make_pool(device, 0);
  trn_mem_t other = alloc(pool, 4 * MiB, TRN_MEM_FLAG_EXPORTABLE);
  REQUIRE(trn_mem_set(other, 0, 0x01, 4 * MiB) == TRN_SUCCESS);
  CHECK(mem_info(other).device_address != mem_info(second).device_address);
  CHECK(reads_as(second, 0, 4 * MiB, 0x5a));
  REQUIRE(trn_mem_free(other) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(second) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
  CHECK(device_stats(device, 0).reserved_bytes == 0);
}
