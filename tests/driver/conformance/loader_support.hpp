// Driver conformance support: loads the driver under test (TRN_CONFORMANCE_DRIVER, else the sim
// driver of this build), checks its table, and gives each test case an open instance with a
// private state directory, plus small RAII holders (claims, ranges, semaphores, queues, host
// registrations) and command makers. Only drivers/hal.h and trn/trn.h: no driver internals.
#pragma once

#include <sys/types.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "drivers/hal.h"
#include "trn/trn.h"

namespace Catch {
template <>
struct StringMaker<trn_result_t> {
  static std::string convert(trn_result_t result);
};
}  // namespace Catch

namespace conformance {

// "TRN_ERROR_CORE_BUSY" (without linking libtrn).
const char *result_name(trn_result_t result);

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kSecond = 1'000 * kMs;
// What a test treats as "forever": a broken driver fails the test instead of hanging it.
constexpr uint64_t kLong = 10 * kSecond;

// The path of the driver under test.
const std::string &driver_path();
// Its table as the entry point returned it (loaded once per process; REQUIREs that the entry
// point exists and returns a table).
const trn_hal_ops_t &table();
// The table, REQUIRE-ing first that it can be called: major version 2, at least this
// interface's size, every operation present (so that no test calls a missing operation).
const trn_hal_ops_t &ops();
// Every function pointer of a table, by name.
std::vector<std::pair<const char *, const void *>> operations(const trn_hal_ops_t &t);

// An error buffer that starts empty.
struct Err : trn_hal_error_t {
  Err() { clear(); }
  void clear() { std::memset(message, 0, sizeof message); }
  bool empty() const { return message[0] == '\0'; }
};

uint64_t monotonic_ns();

// A private state directory (TRN_SIM_ROOT for the sim; harmless for other drivers), removed at
// the end of the test.
class PrivateRoot {
 public:
  PrivateRoot();
  ~PrivateRoot();
  PrivateRoot(const PrivateRoot &) = delete;
  PrivateRoot &operator=(const PrivateRoot &) = delete;

 private:
  std::string path_;
};

// One open instance for a test case.
class Instance {
 public:
  Instance();
  ~Instance();
  Instance(const Instance &) = delete;
  Instance &operator=(const Instance &) = delete;

  trn_hal_instance_t *get() const { return instance_; }
  operator trn_hal_instance_t *() const { return instance_; }
  uint32_t device_count() const;

 private:
  PrivateRoot root_;
  trn_hal_instance_t *instance_ = nullptr;
};

// Physical cores [first, first+count) of a device claimed for the test.
class Claim {
 public:
  Claim(trn_hal_instance_t *instance, uint32_t device, uint32_t first, uint32_t count);
  ~Claim();
  Claim(const Claim &) = delete;
  Claim &operator=(const Claim &) = delete;

 private:
  trn_hal_instance_t *instance_;
  uint32_t device_, first_, count_;
};

// A reserved range of `bytes` rounded up to the device's chunk.
class Range {
 public:
  Range(trn_hal_instance_t *instance, uint32_t device, uint64_t bytes, uint32_t bank = 0);
  ~Range();
  Range(const Range &) = delete;
  Range &operator=(const Range &) = delete;

  uint64_t address() const { return address_; }
  uint64_t bytes() const { return bytes_; }
  // Releases now (the destructor then does nothing).
  void release();

 private:
  trn_hal_instance_t *instance_;
  uint32_t device_;
  uint64_t address_ = 0, bytes_ = 0;
};

// Page-aligned host memory registered with a device.
class HostBuffer {
 public:
  HostBuffer(trn_hal_instance_t *instance, uint32_t device, uint64_t bytes);
  ~HostBuffer();
  HostBuffer(const HostBuffer &) = delete;
  HostBuffer &operator=(const HostBuffer &) = delete;

  uint8_t *data() const { return data_; }
  uint64_t bytes() const { return bytes_; }
  uint64_t address() const { return address_; }

 private:
  trn_hal_instance_t *instance_;
  uint32_t device_;
  uint8_t *data_ = nullptr;
  uint64_t bytes_ = 0, address_ = 0;
};

class Sem {
 public:
  Sem(trn_hal_instance_t *instance, uint32_t device, uint64_t initial, uint32_t flags = 0);
  ~Sem();
  Sem(const Sem &) = delete;
  Sem &operator=(const Sem &) = delete;

  trn_hal_sem_t *get() const { return sem_; }
  operator trn_hal_sem_t *() const { return sem_; }
  uint32_t record() const { return record_; }
  uint64_t id() const { return id_; }
  uint64_t value() const { return ops().sem_value(sem_); }
  trn_hal_sem_state_t state() const;

 private:
  trn_hal_instance_t *instance_;
  trn_hal_sem_t *sem_ = nullptr;
  uint32_t record_ = 0;
  uint64_t id_ = 0;
};

class Queue {
 public:
  // A queue on physical cores [first, first+count) using `dma_engines` of the core's DMA
  // engines (0: all); the cores must be claimed.
  Queue(trn_hal_instance_t *instance, uint32_t device, trn_hal_queue_kind_t kind,
        uint32_t capacity = 64, uint32_t first = 0, uint32_t count = 1, uint32_t dma_engines = 0);
  ~Queue();
  Queue(const Queue &) = delete;
  Queue &operator=(const Queue &) = delete;

  trn_hal_queue_t *get() const { return queue_; }
  operator trn_hal_queue_t *() const { return queue_; }
  trn_hal_queue_status_t status() const;
  // Submits one buffer labelled `label` (a string in static storage; NULL reads as "buffer"),
  // REQUIRE-ing success.
  void submit(const std::vector<trn_hal_command_t> &commands, const char *label = nullptr,
              uint64_t tag = 0);
  // Submits one buffer and returns the result (err filled on failure).
  trn_result_t try_submit(const std::vector<trn_hal_command_t> &commands, Err &err,
                          const char *label = nullptr, uint64_t tag = 0);
  // Polls queue_status until `retired` buffers have retired or kLong passes; true if they did.
  bool wait_retired(uint64_t retired, uint64_t timeout_ns = kLong) const;
  // Runs one buffer ending in a signal of a fresh semaphore of the queue's device and waits for
  // it (bounded), REQUIRE-ing that it ran without a fault.
  void run(std::vector<trn_hal_command_t> commands, const char *label = nullptr);
  // Destroys now (the destructor then does nothing).
  void destroy();

 private:
  trn_hal_instance_t *instance_;
  uint32_t device_;
  trn_hal_queue_t *queue_ = nullptr;
};

// Records the calls of HOST_CALL commands: which call (its index), with which status, in order.
class HostCalls {
 public:
  struct Call {
    uint32_t index;
    trn_result_t status;
  };
  // A command calling back with `index`; the call returns `result` (with `message`) when
  // reached with TRN_SUCCESS.
  trn_hal_command_t command(uint32_t index, trn_result_t result = TRN_SUCCESS,
                            const char *message = "");
  std::vector<Call> calls() const;
  size_t count() const;
  // Polls until `n` calls were made or kLong passes.
  bool wait_count(size_t n, uint64_t timeout_ns = kLong) const;

 private:
  struct Slot {
    HostCalls *owner;
    uint32_t index;
    trn_result_t result;
    std::string message;
  };
  static trn_result_t trampoline(void *user, trn_result_t status, trn_hal_error_t *err);
  mutable std::mutex mutex_;
  std::vector<Call> calls_;
  std::vector<std::unique_ptr<Slot>> slots_;
};

// Another process (forked, same environment) running `body` with the driver: it reports
// body's status character, then stays alive until release() (or destruction) and exits without
// cleaning up, as a process that dies would.
class ChildProcess {
 public:
  explicit ChildProcess(const std::function<char()> &body);
  ~ChildProcess();
  ChildProcess(const ChildProcess &) = delete;
  ChildProcess &operator=(const ChildProcess &) = delete;

  pid_t pid() const { return pid_; }
  // The body's status character, or 0 when the child reported nothing within 10 s.
  char status();
  // Lets the child exit and reaps it; true if it exited normally.
  bool release();

 private:
  pid_t pid_ = -1;
  int up_ = -1, down_ = -1;
  char status_ = 0;
  bool have_status_ = false;
};

// Command makers.
trn_hal_command_t copy_command(uint64_t destination, uint64_t source, uint64_t bytes);
trn_hal_command_t memset_command(uint64_t destination, uint64_t bytes, uint32_t value);
trn_hal_command_t wait_command(trn_hal_sem_t *sem, uint64_t value);
trn_hal_command_t signal_command(trn_hal_sem_t *sem, uint64_t value);
trn_hal_command_t timestamp_command(uint64_t destination);
// REDUCE (interface 2.2): destination = a op b over `count` elements.
trn_hal_command_t reduce_command(uint64_t destination, uint64_t a, uint64_t b, uint32_t count,
                                 uint32_t dtype, uint32_t op);
// FILE_READ (file -> device memory) or FILE_WRITE.
trn_hal_command_t file_command(uint32_t kind, int fd, uint64_t file_offset, uint64_t device_address,
                               uint64_t bytes);
trn_hal_command_t launch_command(trn_hal_kernel_t *kernel, const trn_hal_binding_t *args,
                                 uint32_t arg_count, trn_hal_run_result_t *result);

// The device's first logical core with LNC=1 (REQUIREs core_info success).
trn_hal_core_info_t first_core(trn_hal_instance_t *instance, uint32_t device);
trn_hal_device_info_t device_info(trn_hal_instance_t *instance, uint32_t device);
trn_device_properties_t device_properties(trn_hal_instance_t *instance, uint32_t device);
uint64_t round_up(uint64_t bytes, uint64_t granule);

std::vector<uint8_t> pattern(size_t bytes, uint32_t seed);
std::vector<uint8_t> read_device(trn_hal_instance_t *instance, uint32_t device, uint64_t address,
                                 uint64_t bytes);
void write_device(trn_hal_instance_t *instance, uint32_t device, uint64_t address,
                  const std::vector<uint8_t> &bytes);
// Index of the first differing byte, or -1.
int64_t first_difference(const std::vector<uint8_t> &a, const std::vector<uint8_t> &b);

}  // namespace conformance

// `call` must return trn_result_t and write into `err` (an Err). Each clears `err` first and
// reports the driver's message with the failure.
#define HAL_REQUIRE_OK(call, err)                     \
  do {                                                \
    (err).clear();                                    \
    const trn_result_t hal_got_ = (call);             \
    INFO(#call "\n  driver said: " << (err).message); \
    REQUIRE(hal_got_ == TRN_SUCCESS);                 \
  } while (0)
#define HAL_CHECK_OK(call, err)                       \
  do {                                                \
    (err).clear();                                    \
    const trn_result_t hal_got_ = (call);             \
    INFO(#call "\n  driver said: " << (err).message); \
    CHECK(hal_got_ == TRN_SUCCESS);                   \
  } while (0)
// Fails with exactly `expected`, with a message.
#define HAL_CHECK_RESULT(expected, call, err)                \
  do {                                                       \
    (err).clear();                                           \
    const trn_result_t hal_got_ = (call);                    \
    INFO(#call "\n  driver said: " << (err).message);        \
    CHECK(hal_got_ == (expected));                           \
    if (hal_got_ != TRN_SUCCESS) CHECK_FALSE((err).empty()); \
  } while (0)
// Fails with some error, with a message.
#define HAL_CHECK_FAILS(call, err)                           \
  do {                                                       \
    (err).clear();                                           \
    const trn_result_t hal_got_ = (call);                    \
    INFO(#call "\n  driver said: " << (err).message);        \
    CHECK(hal_got_ != TRN_SUCCESS);                          \
    if (hal_got_ != TRN_SUCCESS) CHECK_FALSE((err).empty()); \
  } while (0)

// Skips the rest of a test case (visibly) when the driver has fewer devices.
#define CONFORMANCE_NEED_DEVICES(instance, n)                            \
  do {                                                                   \
    if ((instance).device_count() < (n)) {                               \
      WARN("skipped: needs " << (n) << " device(s), the driver reports " \
                             << (instance).device_count());              \
      return;                                                            \
    }                                                                    \
  } while (0)
