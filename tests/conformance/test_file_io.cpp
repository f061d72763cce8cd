// Conformance: file loads (trn_queue_read_file, trn_queue_write_file) — exact bytes at aligned
// and unaligned offsets and sizes, files larger than one read, queue order with other commands,
// and every failure as a fault naming the file offset (a short file, a file truncated while the
// read waits, a closed descriptor), never a partial silent result; every argument refused.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "support/api_helpers.hpp"
#include "support/device_files.hpp"
#include "support/result_printing.hpp"
#include "support/sim_env.hpp"
#include "support/temp_files.hpp"
#include "trn/trn.h"

namespace {

using trn::test::fault_of;

using trn::test::alloc;
using trn::test::core_at;
using trn::test::create_file;
using trn::test::DeviceFiles;
using trn::test::drop_cached_pages;
using trn::test::error_contains;
using trn::test::Fd;
using trn::test::file_contents;
using trn::test::first_device;
using trn::test::last_error;
using trn::test::make_pool;
using trn::test::make_queue;
using trn::test::make_sem;
using trn::test::SimEnv;
using trn::test::TempDir;

constexpr uint64_t kLong = 10'000'000'000;  // "forever" in a test: a hang fails, never blocks
constexpr uint64_t kMiB = 1 << 20;

std::vector<uint8_t> pattern(size_t bytes, uint8_t seed) {
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(seed + i * 13 + (i >> 11));
  return data;
}

std::vector<uint8_t> slice(const std::vector<uint8_t> &v, uint64_t at, uint64_t n) {
  return std::vector<uint8_t>(v.begin() + static_cast<ptrdiff_t>(at),
                              v.begin() + static_cast<ptrdiff_t>(at + n));
}

std::vector<uint8_t> read_back(trn_queue_t queue, trn_mem_t mem, uint64_t at, uint64_t n) {
  std::vector<uint8_t> out(n, 0xee);
  INFO(last_error());
  REQUIRE(trn_queue_read(queue, out.data(), mem, at, n, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_finish(queue, kLong) == TRN_SUCCESS);
  return out;
}

// A semaphore that holds back the commands waiting on it until opened.
struct Gate {
  explicit Gate(trn_device_t device) : sem(make_sem(device)) {}
  ~Gate() { trn_sem_destroy(sem); }
  Gate(const Gate &) = delete;
  Gate &operator=(const Gate &) = delete;
  trn_result_t open() const { return trn_sem_signal(sem, 1); }
  trn_sem_t sem;
  const trn_sem_point_t point{sem, 1};
  const trn_sync_t sync{&point, 1, nullptr, 0};
};

bool says(const trn_queue_fault_t &fault, const std::string &part) {
  return std::string(fault.reason).find(part) != std::string::npos;
}

}  // namespace

TEST_CASE_METHOD(DeviceFiles,
                 "trn_queue_read_file loads exact bytes at aligned and unaligned offsets and sizes",
                 "[files]") {
  const uint64_t file_bytes = 20 * kMiB + 333;  // larger than many reads, not page-sized
  const auto model = pattern(file_bytes, 1);
  Fd fd(create_file(dir.file("weights"), model));
  struct Case {
    uint64_t device, file, size;
  };
  const Case cases[] = {
      {0, 0, file_bytes},             // the whole file
      {0, 0, 16 * kMiB},              // aligned everything
      {4096, 8192, 4 * kMiB},         // aligned, not at 0
      {3, 5, 7 * kMiB + 1},           // each odd, aligned to each other nowhere
      {4099, 3, 1 * kMiB + 13},       // same misalignment both sides: direct in the middle
      {1, 20 * kMiB, 333},            // the tail of the file
      {0, 0, 1},                      // one byte
      {77, 4096 * 3 + 77, 4096 * 2},  // aligned in the middle, two partial pages
  };
  for (trn_pool_t p : {pool, make_pool(device, TRN_POOL_KIND_HOST)}) {
    trn_mem_t mem = alloc(p, file_bytes + 8192);
    // From the page cache (the file was just written), and from storage (O_DIRECT where
    // aligned) with its pages dropped.
    for (const Case &c : cases)
      for (const bool cold : {false, true}) {
        INFO("device +" << c.device << ", file +" << c.file << ", " << c.size << " bytes"
                        << (cold ? ", pages dropped" : ""));
        if (cold) drop_cached_pages(fd.get());
        uint64_t seq = 0;
        INFO(last_error());
        REQUIRE(trn_queue_read_file(queue, mem, c.device, fd.get(), c.file, c.size, nullptr,
                                    &seq) == TRN_SUCCESS);
        CHECK(seq > 0);
        INFO(fault_of(queue).reason);
        REQUIRE(trn_queue_finish(queue, kLong) == TRN_SUCCESS);
        CHECK(read_back(queue, mem, c.device, c.size) == slice(model, c.file, c.size));
      }
    REQUIRE(trn_mem_free(mem) == TRN_SUCCESS);
  }
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
}

TEST_CASE_METHOD(DeviceFiles, "trn_queue_write_file writes exact bytes a read brings back",
                 "[files]") {
  const uint64_t bytes = 9 * kMiB + 4101;
  const auto data = pattern(bytes, 7);
  trn_mem_t mem = alloc(pool, bytes + 64);
  REQUIRE(trn_queue_write(queue, mem, 64, data.data(), bytes, nullptr, nullptr) == TRN_SUCCESS);
  Fd fd(create_file(dir.file("checkpoint"), {}));
  // Out to the file at 0 and at an odd offset; never-written memory is written as zeros.
  REQUIRE(trn_queue_write_file(queue, fd.get(), 0, mem, 64, bytes, nullptr, nullptr) ==
          TRN_SUCCESS);
  REQUIRE(trn_queue_write_file(queue, fd.get(), bytes + 3, mem, 0, 64, nullptr, nullptr) ==
          TRN_SUCCESS);
  INFO(last_error());
  REQUIRE(trn_queue_finish(queue, kLong) == TRN_SUCCESS);
  const auto written = file_contents(fd.get());
  REQUIRE(written.size() == bytes + 3 + 64);
  CHECK(slice(written, 0, bytes) == data);
  CHECK(slice(written, bytes, 3 + 64) == std::vector<uint8_t>(3 + 64, 0));
  // And back into another allocation.
  trn_mem_t copy = alloc(pool, bytes);
  REQUIRE(trn_queue_read_file(queue, copy, 0, fd.get(), 0, bytes, nullptr, nullptr) == TRN_SUCCESS);
  CHECK(read_back(queue, copy, 0, bytes) == data);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
}

TEST_CASE_METHOD(DeviceFiles,
                 "trn_queue_write_file refuses an O_APPEND descriptor, which ignores the offset",
                 "[files][negative]") {
  // O_APPEND puts every write at the end of the file: the bytes would not land at file_offset.
  const auto data = pattern(8192, 11);
  trn_mem_t mem = alloc(pool, data.size());
  REQUIRE(trn_queue_write(queue, mem, 0, data.data(), data.size(), nullptr, nullptr) ==
          TRN_SUCCESS);
  const std::vector<uint8_t> header = {'l', 'o', 'g', '\n'};
  const std::string path = dir.file("appended");
  { Fd created(create_file(path, header)); }
  Fd fd(::open(path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC));
  REQUIRE(fd.get() >= 0);
  CHECK(trn_queue_write_file(queue, fd.get(), 0, mem, 0, data.size(), nullptr, nullptr) ==
        TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("O_APPEND"));
  CHECK(error_contains("open it without O_APPEND"));
  // Reads ignore O_APPEND: the same descriptor reads at its offsets.
  trn_mem_t back = alloc(pool, 4096);
  REQUIRE(trn_queue_read_file(queue, back, 0, fd.get(), 0, header.size(), nullptr, nullptr) ==
          TRN_SUCCESS);
  INFO(last_error());
  REQUIRE(trn_queue_finish(queue, kLong) == TRN_SUCCESS);
  CHECK(read_back(queue, back, 0, header.size()) == header);
  Fd in(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  CHECK(file_contents(in.get()) == header);  // nothing was written
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
}

TEST_CASE_METHOD(DeviceFiles,
                 "file reads and writes refuse an eventfd, a timerfd and a terminal up front",
                 "[files][negative]") {
  // None has offsets, and a read of one blocks until something comes: the driver's thread, the
  // queue's finish and its destruction would wait for ever.
  trn_mem_t mem = alloc(pool, 4096);
  std::vector<std::pair<int, std::string>> fds = {
      {::eventfd(0, EFD_CLOEXEC), "not a file (an eventfd"},
      {::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC), "not a file (an eventfd"},
      {::open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC), "a character device"},
      {::open("/dev/zero", O_RDWR | O_CLOEXEC), "a character device"}};
  for (const auto &[fd, kind] : fds) {
    INFO(kind);
    REQUIRE(fd >= 0);
    const auto start = std::chrono::steady_clock::now();
    CHECK(trn_queue_read_file(queue, mem, 0, fd, 0, 8, nullptr, nullptr) ==
          TRN_ERROR_INVALID_ARGUMENT);
    CHECK(error_contains(kind));
    CHECK(error_contains("which has no file offsets"));
    CHECK(trn_queue_write_file(queue, fd, 0, mem, 0, 8, nullptr, nullptr) ==
          TRN_ERROR_INVALID_ARGUMENT);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
    ::close(fd);
  }
  // Nothing was queued: the queue finishes and goes at once.
  CHECK(trn_queue_finish(queue, kLong) == TRN_SUCCESS);
  CHECK(trn_queue_destroy(queue) == TRN_SUCCESS);
}

TEST_CASE_METHOD(DeviceFiles, "trn_queue_read_file runs in queue order with the commands around it",
                 "[files]") {
  const auto model = pattern(3 * kMiB, 5);
  Fd fd(create_file(dir.file("weights"), model));
  trn_mem_t mem = alloc(pool, model.size());
  REQUIRE(trn_queue_memset(queue, mem, 0, 0x5a, model.size(), nullptr, nullptr) == TRN_SUCCESS);
  Gate gate(device);
  REQUIRE(trn_queue_read_file(queue, mem, 0, fd.get(), 0, model.size(), &gate.sync, nullptr) ==
          TRN_SUCCESS);
  std::vector<uint8_t> out(model.size(), 0);
  uint64_t seq = 0;
  REQUIRE(trn_queue_read(queue, out.data(), mem, 0, out.size(), nullptr, &seq) == TRN_SUCCESS);
  trn_sem_t timeline = nullptr;
  REQUIRE(trn_queue_get_semaphore(queue, &timeline) == TRN_SUCCESS);
  // Nothing past the gate has run.
  CHECK(trn_sem_wait(timeline, seq, 20'000'000) == TRN_TIMEOUT);
  REQUIRE(gate.open() == TRN_SUCCESS);
  REQUIRE(trn_queue_finish(queue, kLong) == TRN_SUCCESS);
  CHECK(out == model);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
}

TEST_CASE_METHOD(DeviceFiles,
                 "a short file fails trn_queue_read_file with a fault naming the offset",
                 "[files]") {
  Fd fd(create_file(dir.file("short"), pattern(kMiB, 2)));
  trn_mem_t mem = alloc(pool, 2 * kMiB);
  uint64_t seq = 0;
  REQUIRE(trn_queue_read_file(queue, mem, 0, fd.get(), 0, 2 * kMiB, nullptr, &seq) == TRN_SUCCESS);
  CHECK(trn_queue_finish(queue, kLong) == TRN_ERROR_FILE);
  CHECK(error_contains("end of file at offset 1048576 after 1048576 of 2097152 bytes"));
  const auto fault = fault_of(queue);
  INFO(fault.reason);
  CHECK(fault.result == TRN_ERROR_FILE);
  CHECK(fault.sequence == seq);
  CHECK(std::string(fault.command) == "read file");
  CHECK(says(fault, "file read: end of file at offset 1048576 after 1048576 of 2097152 bytes (fd " +
                        std::to_string(fd.get()) + ")"));
  CHECK(fault.destination_address == trn::test::mem_info(mem).device_address);
  CHECK(fault.source_address == 0);
  CHECK(fault.size == 2 * kMiB);
  // Starting past the end is an end of file at once.
  REQUIRE(trn_queue_reset(queue) == TRN_SUCCESS);
  REQUIRE(trn_queue_read_file(queue, mem, 0, fd.get(), kMiB + 5, 10, nullptr, nullptr) ==
          TRN_SUCCESS);
  CHECK(trn_queue_finish(queue, kLong) == TRN_ERROR_FILE);
  CHECK(says(fault_of(queue), "end of file at offset 1048581 after 0 of 10 bytes"));
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
}

TEST_CASE_METHOD(DeviceFiles,
                 "a file truncated while its read waits faults, never loads part silently",
                 "[files]") {
  const uint64_t bytes = 24 * kMiB;
  Fd fd(create_file(dir.file("weights"), pattern(bytes, 8)));
  trn_mem_t mem = alloc(pool, bytes);
  Gate gate(device);
  REQUIRE(trn_queue_read_file(queue, mem, 0, fd.get(), 0, bytes, &gate.sync, nullptr) ==
          TRN_SUCCESS);
  std::thread truncater([&] {
    CHECK(::ftruncate(fd.get(), static_cast<off_t>(10 * kMiB + 100)) == 0);
    CHECK(gate.open() == TRN_SUCCESS);
  });
  truncater.join();
  CHECK(trn_queue_finish(queue, kLong) == TRN_ERROR_FILE);
  const auto fault = fault_of(queue);
  INFO(fault.reason);
  CHECK(says(fault, "end of file at offset 10485860 after 10485860 of 25165824 bytes"));
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
}

TEST_CASE_METHOD(DeviceFiles, "a closed descriptor is a fault when the command runs, never a crash",
                 "[files]") {
  trn_mem_t mem = alloc(pool, kMiB);
  Fd file(create_file(dir.file("weights"), pattern(kMiB, 3)));
  // A number far above what opens take next, so that nothing reuses it once closed.
  Fd fd(::fcntl(file.get(), F_DUPFD_CLOEXEC, 900));
  const int number = fd.get();
  REQUIRE(number >= 900);
  Gate gate(device);
  REQUIRE(trn_queue_read_file(queue, mem, 0, number, 0, kMiB, &gate.sync, nullptr) == TRN_SUCCESS);
  // Before the command runs the caller breaks the rule.
  SECTION("closed") {
    fd.close();
    REQUIRE(gate.open() == TRN_SUCCESS);
    CHECK(trn_queue_finish(queue, kLong) == TRN_ERROR_FILE);
    const auto fault = fault_of(queue);
    INFO(fault.reason);
    CHECK(says(fault, "file read: "));
    CHECK(says(fault, "(errno 9) at offset 0"));
    // A descriptor open only for reading cannot be written through.
    REQUIRE(trn_queue_reset(queue) == TRN_SUCCESS);
    Fd read_only(::open(dir.file("weights").c_str(), O_RDONLY | O_CLOEXEC));
    REQUIRE(read_only.get() >= 0);
    REQUIRE(trn_queue_write_file(queue, read_only.get(), 0, mem, 0, 4096, nullptr, nullptr) ==
            TRN_SUCCESS);
    CHECK(trn_queue_finish(queue, kLong) == TRN_ERROR_FILE);
    CHECK(says(fault_of(queue), "file write: "));
    CHECK(std::string(fault_of(queue).command) == "write file");
    // An O_PATH descriptor reads nothing, aligned or not (its access mode reads as read-only).
    Fd path_only(::open(dir.file("weights").c_str(), O_PATH | O_CLOEXEC));
    REQUIRE(path_only.get() >= 0);
    for (const uint64_t offset : {uint64_t{0}, uint64_t{1}}) {
      REQUIRE(trn_queue_reset(queue) == TRN_SUCCESS);
      REQUIRE(trn_queue_read_file(queue, mem, offset, path_only.get(), offset, 8192, nullptr,
                                  nullptr) == TRN_SUCCESS);
      CHECK(trn_queue_finish(queue, kLong) == TRN_ERROR_FILE);
      INFO(fault_of(queue).reason);
      CHECK(says(fault_of(queue), "(errno 9) at offset " + std::to_string(offset)));
    }
  }
  SECTION("closed, and the number reused for a pipe nobody writes to") {
    // The command fails instead of blocking the queue's thread on the pipe.
    int ends[2];
    REQUIRE(::pipe2(ends, O_CLOEXEC) == 0);
    REQUIRE(::dup3(ends[0], number, O_CLOEXEC) == number);  // closes the file's descriptor
    REQUIRE(gate.open() == TRN_SUCCESS);
    CHECK(trn_queue_finish(queue, kLong) == TRN_ERROR_FILE);
    INFO(fault_of(queue).reason);
    CHECK(says(fault_of(queue), "file read: "));
    for (int end : ends) ::close(end);
  }
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
}

TEST_CASE_METHOD(DeviceFiles, "trn_queue_read_file and trn_queue_write_file refuse bad arguments",
                 "[files][negative]") {
  trn_mem_t mem = alloc(pool, 4096);
  Fd fd(create_file(dir.file("weights"), pattern(8192, 1)));
  const int f = fd.get();
  CHECK(trn_queue_read_file(queue, nullptr, 0, f, 0, 16, nullptr, nullptr) ==
        TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_queue_write_file(queue, f, 0, nullptr, 0, 16, nullptr, nullptr) ==
        TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_queue_read_file(queue, mem, 4090, f, 0, 16, nullptr, nullptr) ==
        TRN_ERROR_OUT_OF_RANGE);
  CHECK(error_contains("outside the allocation"));
  CHECK(trn_queue_write_file(queue, f, 0, mem, 0, 4097, nullptr, nullptr) ==
        TRN_ERROR_OUT_OF_RANGE);
  CHECK(trn_queue_read_file(queue, mem, 0, -1, 0, 16, nullptr, nullptr) ==
        TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("fd -1"));
  CHECK(trn_queue_write_file(queue, -3, 0, mem, 0, 16, nullptr, nullptr) ==
        TRN_ERROR_INVALID_ARGUMENT);
  // A pipe has no offsets: refused, not read from where it stands.
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  REQUIRE(::write(pipe_fds[1], "abcdefghijkl", 12) == 12);
  CHECK(trn_queue_read_file(queue, mem, 0, pipe_fds[0], 4, 8, nullptr, nullptr) ==
        TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("is a pipe, which has no file offsets"));
  CHECK(trn_queue_write_file(queue, pipe_fds[1], 0, mem, 0, 8, nullptr, nullptr) ==
        TRN_ERROR_INVALID_ARGUMENT);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  CHECK(trn_queue_read_file(queue, mem, 0, f, UINT64_MAX - 4, 16, nullptr, nullptr) ==
        TRN_ERROR_OUT_OF_RANGE);
  CHECK(error_contains("largest file offset"));
  CHECK(trn_queue_read_file(nullptr, mem, 0, f, 0, 16, nullptr, nullptr) ==
        TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_queue_write_file(reinterpret_cast<trn_queue_t>(mem), f, 0, mem, 0, 16, nullptr,
                             nullptr) == TRN_ERROR_INVALID_HANDLE);
  const trn_sync_t bad_sync{nullptr, 1, nullptr, 0};
  CHECK(trn_queue_read_file(queue, mem, 0, f, 0, 16, &bad_sync, nullptr) == TRN_ERROR_NULL_POINTER);
  // Nothing was queued, and the queue still works.
  uint64_t seq = 0;
  REQUIRE(trn_queue_read_file(queue, mem, 0, f, 0, 4096, nullptr, &seq) == TRN_SUCCESS);
  CHECK(seq == 1);
  REQUIRE(trn_queue_finish(queue, kLong) == TRN_SUCCESS);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
}
