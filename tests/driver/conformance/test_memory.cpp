// Memory: reservations in chunks, zeros where nothing was written, host copies and mappings,
// release discarding contents, refusals of bad addresses and sizes, host registration (and its
// refusals), export and import within the process, and addresses of memory the process does not
// hold (free, released, unexported, another process's) refused by host copies, mappings and
// submissions alike.
#include <sys/mman.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "loader_support.hpp"

using namespace conformance;

TEST_CASE("memory: reserve and release whole chunks", "[memory]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const auto p = device_properties(inst, 0);
  const uint64_t chunk = device_info(inst, 0).chunk_bytes;
  Err err;
  for (uint32_t bank = 0; bank < p.hbm_bank_count; ++bank) {
    INFO("bank " << bank);
    uint64_t a = 0, b = 0;
    HAL_REQUIRE_OK(ops().mem_reserve(inst, 0, bank, chunk, &a, &err), err);
    HAL_REQUIRE_OK(ops().mem_reserve(inst, 0, bank, 2 * chunk, &b, &err), err);
    CHECK(a != 0);
    CHECK(b != 0);
    // The ranges do not overlap.
    CHECK((a + chunk <= b || b + 2 * chunk <= a));
    uint64_t bank_bytes = 0, held = 0, largest = 0;
    HAL_REQUIRE_OK(ops().mem_bank_usage(inst, 0, bank, &bank_bytes, &held, &largest, &err), err);
    CHECK(bank_bytes == p.hbm_bank_bytes[bank]);
    CHECK(held >= 3 * chunk);
    CHECK(largest <= bank_bytes - 3 * chunk);
    HAL_CHECK_OK(ops().mem_release(inst, 0, a, chunk, &err), err);
    HAL_CHECK_OK(ops().mem_release(inst, 0, b, 2 * chunk, &err), err);
  }
}

TEST_CASE("memory: sizes that are not whole chunks, or too large, are refused", "[memory]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const auto p = device_properties(inst, 0);
  const uint64_t chunk = device_info(inst, 0).chunk_bytes;
  Err err;
  uint64_t a = 0;
  HAL_CHECK_FAILS(ops().mem_reserve(inst, 0, 0, 0, &a, &err), err);
  HAL_CHECK_RESULT(TRN_ERROR_OUT_OF_DEVICE_MEMORY,
                   ops().mem_reserve(inst, 0, 0, p.hbm_bank_bytes[0] + chunk, &a, &err), err);
  HAL_CHECK_FAILS(ops().mem_reserve(inst, 0, p.hbm_bank_count, chunk, &a, &err), err);
}

TEST_CASE("memory: a size that is not a multiple of chunk_bytes is refused", "[memory]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const uint64_t chunk = device_info(inst, 0).chunk_bytes;
  if (chunk == 1) {
    WARN("skipped: chunk_bytes is 1");
    return;
  }
  Err err;
  uint64_t a = 0;
  HAL_CHECK_FAILS(ops().mem_reserve(inst, 0, 0, chunk + 1, &a, &err), err);
  HAL_CHECK_FAILS(ops().mem_reserve(inst, 0, 0, chunk / 2, &a, &err), err);
}

TEST_CASE("memory: never-written memory reads as zeros and writes read back", "[memory]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Range r(inst, 0, 3 << 20);
  const uint64_t n = std::min<uint64_t>(r.bytes(), 4 << 20);
  CHECK(first_difference(read_device(inst, 0, r.address(), n), std::vector<uint8_t>(n, 0)) == -1);

  const auto data = pattern(1 << 20, 7);
  const uint64_t offset = 12345;
  write_device(inst, 0, r.address() + offset, data);
  CHECK(first_difference(read_device(inst, 0, r.address() + offset, data.size()), data) == -1);
  // Around it, still zeros.
  const auto before = read_device(inst, 0, r.address(), offset);
  CHECK(first_difference(before, std::vector<uint8_t>(offset, 0)) == -1);
  const auto after = read_device(inst, 0, r.address() + offset + data.size(), 4096);
  CHECK(first_difference(after, std::vector<uint8_t>(4096, 0)) == -1);
}

TEST_CASE("memory: a writable mapping's stores are what mem_read sees", "[memory]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Range r(inst, 0, 1 << 20);
  void *host = nullptr;
  Err err;
  HAL_REQUIRE_OK(ops().mem_map(inst, 0, r.address() + 4096, 8192,
                               TRN_HAL_MAP_READ | TRN_HAL_MAP_WRITE, &host, &err),
                 err);
  REQUIRE(host != nullptr);
  const auto data = pattern(8192, 3);
  std::memcpy(host, data.data(), data.size());
  CHECK(first_difference(read_device(inst, 0, r.address() + 4096, 8192), data) == -1);

  // mem_write is visible through a read mapping.
  const auto more = pattern(100, 4);
  write_device(inst, 0, r.address() + 4096, more);
  void *reader = nullptr;
  HAL_REQUIRE_OK(ops().mem_map(inst, 0, r.address() + 4096, 100, TRN_HAL_MAP_READ, &reader, &err),
                 err);
  REQUIRE(reader != nullptr);
  CHECK(std::memcmp(reader, more.data(), more.size()) == 0);
}

TEST_CASE("memory: a released range reads as zeros when reserved again", "[memory]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const uint64_t chunk = device_info(inst, 0).chunk_bytes;
  Err err;
  uint64_t a = 0;
  HAL_REQUIRE_OK(ops().mem_reserve(inst, 0, 0, chunk, &a, &err), err);
  const uint64_t n = std::min<uint64_t>(chunk, 1 << 20);
  write_device(inst, 0, a, pattern(n, 9));
  HAL_REQUIRE_OK(ops().mem_release(inst, 0, a, chunk, &err), err);
  // Reserve until the same range comes back (bounded), and check every range we get.
  std::vector<uint64_t> got;
  bool reused = false;
  for (int i = 0; i < 16 && !reused; ++i) {
    uint64_t b = 0;
    HAL_REQUIRE_OK(ops().mem_reserve(inst, 0, 0, chunk, &b, &err), err);
    got.push_back(b);
    CHECK(first_difference(read_device(inst, 0, b, n), std::vector<uint8_t>(n, 0)) == -1);
    reused = b == a;
  }
  for (uint64_t b : got) HAL_CHECK_OK(ops().mem_release(inst, 0, b, chunk, &err), err);
}

TEST_CASE("memory: bad addresses and sizes are refused", "[memory]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Range r(inst, 0, 1 << 20);
  const uint64_t end = r.address() + r.bytes();
  std::vector<uint8_t> buf(8192);
  Err err;
  HAL_CHECK_FAILS(ops().mem_read(inst, 0, 0, buf.data(), 16, &err), err);
  HAL_CHECK_FAILS(ops().mem_write(inst, 0, 16, buf.data(), 16, &err), err);
  HAL_CHECK_FAILS(ops().mem_read(inst, 0, r.address(), buf.data(), UINT64_MAX, &err), err);
  HAL_CHECK_FAILS(ops().mem_write(inst, 0, UINT64_MAX - 8, buf.data(), 16, &err), err);
  void *host = nullptr;
  HAL_CHECK_FAILS(ops().mem_map(inst, 0, 0, 16, TRN_HAL_MAP_READ, &host, &err), err);
  // Releasing what was not reserved, or part of a range with a wrong size.
  HAL_CHECK_FAILS(ops().mem_release(inst, 0, end, r.bytes(), &err), err);
  HAL_CHECK_FAILS(ops().mem_release(inst, 0, r.address(), r.bytes() * 2, &err), err);
  // The range is still intact.
  write_device(inst, 0, r.address(), pattern(64, 1));
  CHECK(first_difference(read_device(inst, 0, r.address(), 64), pattern(64, 1)) == -1);
}

TEST_CASE("memory: access past the end of a reserved range is refused", "[memory]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Range r(inst, 0, 1 << 20);
  const uint64_t end = r.address() + r.bytes();
  std::vector<uint8_t> buf(64);
  Err err;
  HAL_CHECK_FAILS(ops().mem_read(inst, 0, end - 16, buf.data(), 32, &err), err);
  HAL_CHECK_FAILS(ops().mem_write(inst, 0, end - 16, buf.data(), 32, &err), err);
  HAL_CHECK_FAILS(ops().mem_read(inst, 0, end, buf.data(), 1, &err), err);
  // mem_map: "a host pointer to part of a reserved or imported range".
  void *host = nullptr;
  HAL_CHECK_FAILS(ops().mem_map(inst, 0, end - 16, 32, TRN_HAL_MAP_WRITE, &host, &err), err);
  HAL_CHECK_FAILS(ops().mem_map(inst, 0, end, 16, TRN_HAL_MAP_READ, &host, &err), err);
}

TEST_CASE("memory: host registration and its refusals", "[memory]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const size_t page = 4096;
  auto *host = static_cast<uint8_t *>(std::aligned_alloc(page, 4 * page));
  REQUIRE(host != nullptr);
  Err err;
  uint64_t a = 0, b = 0;
  HAL_REQUIRE_OK(ops().mem_register_host(inst, 0, host, 2 * page, &a, &err), err);
  CHECK(a != 0);
  // Overlapping the first registration.
  HAL_CHECK_FAILS(ops().mem_register_host(inst, 0, host + page, 2 * page, &b, &err), err);
  HAL_CHECK_FAILS(ops().mem_register_host(inst, 0, host, 2 * page, &b, &err), err);
  // Beside it is fine.
  HAL_CHECK_OK(ops().mem_register_host(inst, 0, host + 2 * page, 2 * page, &b, &err), err);
  HAL_CHECK_OK(ops().mem_unregister_host(inst, 0, b, &err), err);
  // Unknown addresses.
  HAL_CHECK_FAILS(ops().mem_unregister_host(inst, 0, a + 1, &err), err);
  HAL_CHECK_FAILS(ops().mem_unregister_host(inst, 0, 0, &err), err);
  HAL_CHECK_FAILS(ops().mem_register_host(inst, 0, nullptr, page, &b, &err), err);
  HAL_CHECK_FAILS(ops().mem_register_host(inst, 0, host, 0, &b, &err), err);
  HAL_CHECK_OK(ops().mem_unregister_host(inst, 0, a, &err), err);
  // Twice.
  HAL_CHECK_FAILS(ops().mem_unregister_host(inst, 0, a, &err), err);
  std::free(host);
}

TEST_CASE("memory: export and import within the process", "[memory]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const auto p = device_properties(inst, 0);
  const uint32_t bank = p.hbm_bank_count - 1;
  Range r(inst, 0, 1 << 20, bank);
  const auto data = pattern(4096, 11);
  write_device(inst, 0, r.address(), data);
  Err err;
  uint32_t record = 0;
  uint64_t id = 0;
  HAL_REQUIRE_OK(ops().mem_export(inst, 0, r.address(), r.bytes(), &record, &id, &err), err);
  uint64_t address = 0, bytes = 0;
  uint32_t got_bank = UINT32_MAX;
  HAL_REQUIRE_OK(ops().mem_import(inst, 0, record, id, &address, &bytes, &got_bank, &err), err);
  CHECK(bytes == r.bytes());
  CHECK(got_bank == bank);
  CHECK(address != 0);
  // The same memory through the imported address.
  CHECK(first_difference(read_device(inst, 0, address, data.size()), data) == -1);
  const auto back = pattern(64, 12);
  write_device(inst, 0, address + 8192, back);
  CHECK(first_difference(read_device(inst, 0, r.address() + 8192, 64), back) == -1);
  // Unknown records are refused.
  HAL_CHECK_FAILS(ops().mem_import(inst, 0, record, id + 12345, &address, &bytes, &got_bank, &err),
                  err);
  HAL_CHECK_FAILS(ops().mem_unexport(inst, 0, record, id + 12345, &err), err);
  // The process holds the export once (as exporter and importer): one unexport lets go.
  HAL_CHECK_OK(ops().mem_unexport(inst, 0, record, id, &err), err);
  HAL_CHECK_FAILS(ops().mem_unexport(inst, 0, record, id, &err), err);
}

TEST_CASE("memory: another process imports an exported range and sees its bytes",
          "[memory][processes]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Range r(inst, 0, 1 << 20);
  const auto data = pattern(4096, 13);
  write_device(inst, 0, r.address(), data);
  Err err;
  uint32_t record = 0;
  uint64_t id = 0;
  HAL_REQUIRE_OK(ops().mem_export(inst, 0, r.address(), r.bytes(), &record, &id, &err), err);
  const uint64_t expected_bytes = r.bytes();
  const auto reply = pattern(64, 14);
  ChildProcess child([&]() -> char {
    const trn_hal_process_identity_t identity{"conformance-importer", "0.2.0"};
    trn_hal_error_t e{};
    trn_hal_instance_t *other = nullptr;
    if (table().open(&identity, &other, &e) != TRN_SUCCESS) return 'O';
    uint64_t address = 0, bytes = 0;
    uint32_t bank = 0;
    if (table().mem_import(other, 0, record, id, &address, &bytes, &bank, &e) != TRN_SUCCESS)
      return 'I';
    if (bytes != expected_bytes) return 'B';
    std::vector<uint8_t> got(data.size());
    if (table().mem_read(other, 0, address, got.data(), got.size(), &e) != TRN_SUCCESS) return 'R';
    if (got != data) return 'D';
    void *host = nullptr;
    if (table().mem_map(other, 0, address + 8192, reply.size(), TRN_HAL_MAP_WRITE, &host, &e) !=
        TRN_SUCCESS)
      return 'M';
    std::memcpy(host, reply.data(), reply.size());
    return 'K';
  });
  const char status = child.status();
  INFO("child status " << status
                       << " (O open, I import, B size, R read, D data differs, M map failed)");
  REQUIRE(status == 'K');
  CHECK(first_difference(read_device(inst, 0, r.address() + 8192, reply.size()), reply) == -1);
  CHECK(child.release());
  HAL_CHECK_OK(ops().mem_unexport(inst, 0, record, id, &err), err);
}

TEST_CASE("memory: unexported or unknown records cannot be imported", "[memory]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Range r(inst, 0, 1 << 20);
  Err err;
  uint32_t record = 0;
  uint64_t id = 0;
  HAL_REQUIRE_OK(ops().mem_export(inst, 0, r.address(), r.bytes(), &record, &id, &err), err);
  HAL_REQUIRE_OK(ops().mem_unexport(inst, 0, record, id, &err), err);
  uint64_t address = 0, bytes = 0;
  uint32_t bank = 0;
  HAL_CHECK_FAILS(ops().mem_import(inst, 0, record, id, &address, &bytes, &bank, &err), err);
  HAL_CHECK_FAILS(ops().mem_import(inst, 0, UINT32_MAX, id, &address, &bytes, &bank, &err), err);
  // Exporting what is not a reserved range.
  HAL_CHECK_FAILS(ops().mem_export(inst, 0, 16, 4096, &record, &id, &err), err);
}

namespace {

// Every way of naming [address, address+bytes) of device 0 that hal.h lets a process use only on
// memory it holds: host copies, mappings, and copy, memset and timestamp commands (refused at
// submission, with nothing run). `r` is a range the process holds (reserved before, so that
// it cannot take the place of the memory checked).
void check_not_held(trn_hal_instance_t *inst, const Range &r, uint64_t address, uint64_t bytes) {
  Claim claim(inst, 0, 0, 1);
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  std::vector<uint8_t> buf(bytes, 0x5a);
  Err err;
  HAL_CHECK_RESULT(TRN_ERROR_INVALID_ARGUMENT,
                   ops().mem_read(inst, 0, address, buf.data(), bytes, &err), err);
  CHECK(std::string(err.message).find("0x") != std::string::npos);  // names the address
  HAL_CHECK_RESULT(TRN_ERROR_INVALID_ARGUMENT,
                   ops().mem_write(inst, 0, address, buf.data(), bytes, &err), err);
  void *host = nullptr;
  HAL_CHECK_RESULT(TRN_ERROR_INVALID_ARGUMENT,
                   ops().mem_map(inst, 0, address, bytes, TRN_HAL_MAP_READ, &host, &err), err);
  HAL_CHECK_RESULT(TRN_ERROR_INVALID_ARGUMENT,
                   ops().mem_map(inst, 0, address, bytes, TRN_HAL_MAP_WRITE, &host, &err), err);
  const std::vector<trn_hal_command_t> commands[] = {
      {copy_command(address, r.address(), bytes)},
      {copy_command(r.address(), address, bytes)},
      {memset_command(address, bytes, 1)},
      {timestamp_command(address + bytes - sizeof(trn_hal_timestamp_t))},  // its last bytes
  };
  for (const auto &c : commands) {
    INFO("command kind " << c[0].kind);
    HAL_CHECK_RESULT(TRN_ERROR_INVALID_ARGUMENT,
                     q.try_submit({memset_command(r.address(), 16, 0x77), c[0]}, err), err);
  }
  CHECK(q.status().submitted == 0);
  CHECK(read_device(inst, 0, r.address(), 1)[0] == 0);
}

}  // namespace

TEST_CASE("memory: a released range is no longer this process's to use", "[memory]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Range r(inst, 0, 1 << 20);
  uint64_t released = 0, bytes = 0;
  {
    Range gone(inst, 0, 1 << 20);
    released = gone.address();
    bytes = gone.bytes();
    write_device(inst, 0, released, pattern(64, 3));
  }
  check_not_held(inst, r, released, 64);
  check_not_held(inst, r, released + bytes - 64, 64);
}

TEST_CASE("memory: ranges reserved and released on several threads at once stay usable",
          "[memory][threads]") {
  // A release frees chunks that another thread may reserve at once: the driver's record of what
  // the process holds must never lose the new reservation with the old one.
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const uint64_t chunk = device_info(inst, 0).chunk_bytes;
  const trn_hal_ops_t &hal = ops();  // here: Catch's checks in ops() are not for threads
  constexpr int kThreads = 4;
  constexpr int kRounds = 400;
  const uint64_t deadline = monotonic_ns() + 3 * kSecond;
  std::atomic<int> failures{0};
  std::mutex mu;
  std::string first_failure;
  auto failed = [&](const std::string &what) {
    if (failures.fetch_add(1) == 0) {
      std::lock_guard lock(mu);
      first_failure = what;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds && monotonic_ns() < deadline && failures == 0; ++round) {
        Err err;
        uint64_t address = 0;
        if (hal.mem_reserve(inst, 0, 0, chunk, &address, &err) != TRN_SUCCESS) {
          failed(std::string("mem_reserve: ") + err.message);
          return;
        }
        const uint64_t value = (uint64_t{static_cast<uint32_t>(t)} << 32) | round,
                       offset = chunk / 2;
        uint64_t back = 0;
        if (hal.mem_write(inst, 0, address + offset, &value, sizeof value, &err) != TRN_SUCCESS)
          failed(std::string("mem_write to a range just reserved: ") + err.message);
        else if (hal.mem_read(inst, 0, address + offset, &back, sizeof back, &err) != TRN_SUCCESS)
          failed(std::string("mem_read of a range just written: ") + err.message);
        else if (back != value)
          failed("mem_read returned another thread's bytes");
        if (hal.mem_release(inst, 0, address, chunk, &err) != TRN_SUCCESS)
          failed(std::string("mem_release of a range this thread reserved: ") + err.message);
      }
    });
  for (auto &thread : threads) thread.join();
  INFO(first_failure);
  CHECK(failures.load() == 0);
}

TEST_CASE("memory: access that spans past the end of a range into free memory is refused",
          "[memory]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Range r(inst, 0, 1 << 20);
  check_not_held(inst, r, r.address() + r.bytes() - 32, 64);
  check_not_held(inst, r, r.address() + r.bytes(), 64);
  // The range itself is still whole and usable.
  write_device(inst, 0, r.address() + r.bytes() - 64, pattern(64, 4));
  CHECK(first_difference(read_device(inst, 0, r.address() + r.bytes() - 64, 64), pattern(64, 4)) ==
        -1);
}

TEST_CASE("memory: an export this process let go of is no longer its to use", "[memory]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const uint64_t chunk = device_info(inst, 0).chunk_bytes;
  Range r(inst, 0, 1 << 20);
  Err err;
  uint64_t a = 0;
  HAL_REQUIRE_OK(ops().mem_reserve(inst, 0, 0, chunk, &a, &err), err);
  uint32_t record = 0;
  uint64_t id = 0;
  HAL_REQUIRE_OK(ops().mem_export(inst, 0, a, chunk, &record, &id, &err), err);
  // Imported by its exporter: still one hold, usable.
  uint64_t b = 0, bytes = 0;
  uint32_t bank = 0;
  HAL_REQUIRE_OK(ops().mem_import(inst, 0, record, id, &b, &bytes, &bank, &err), err);
  CHECK(b == a);
  write_device(inst, 0, b, pattern(64, 5));
  HAL_REQUIRE_OK(ops().mem_unexport(inst, 0, record, id, &err), err);
  check_not_held(inst, r, a, 64);
}

TEST_CASE("memory: another process's range is not this process's to use", "[memory][processes]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  // The other process's address comes back through a shared page.
  void *page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(page != MAP_FAILED);
  auto *shared = static_cast<volatile uint64_t *>(page);
  shared[0] = 0;
  const uint64_t chunk = device_info(inst, 0).chunk_bytes;
  ChildProcess child([&]() -> char {
    const trn_hal_process_identity_t identity{"conformance-holder", "0.2.0"};
    trn_hal_error_t e{};
    trn_hal_instance_t *other = nullptr;
    if (table().open(&identity, &other, &e) != TRN_SUCCESS) return 'O';
    uint64_t address = 0;
    if (table().mem_reserve(other, 0, 0, chunk, &address, &e) != TRN_SUCCESS) return 'R';
    const auto data = pattern(64, 6);
    if (table().mem_write(other, 0, address, data.data(), data.size(), &e) != TRN_SUCCESS)
      return 'W';
    shared[0] = address;
    return 'K';
  });
  const char status = child.status();
  INFO("child status " << status << " (O open, R reserve, W write failed)");
  REQUIRE(status == 'K');
  const uint64_t theirs = shared[0];
  REQUIRE(theirs != 0);
  Range r(inst, 0, 1 << 20);
  check_not_held(inst, r, theirs, 64);
  CHECK(child.release());
  munmap(page, 4096);
}
