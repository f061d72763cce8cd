// A queue: a ring of command buffers on a logical core's engines, executed in order by one
// worker thread. The worker spins for the spin budget when idle, then sleeps on a doorbell
// futex. Failure semantics are hal.h's (trn_hal_queue_fault_t).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sim/launch.hpp"
#include "sim/ops_support.hpp"
#include "sim/spin_lock.hpp"

namespace trn::sim {

class SemCore;

struct QueueShape {
  uint32_t first_core = 0;  // physical
  uint32_t core_count = 1;
  trn_hal_queue_kind_t kind = TRN_HAL_QUEUE_COMPUTE;
  uint32_t capacity = 1;
  uint32_t dma_engines = 1;
  uint64_t dma_engine_bytes_per_s = 0;
};

class SimQueue {
 public:
  SimQueue(trn_hal_instance_t &instance, DeviceRuntime &device, const QueueShape &shape);
  ~SimQueue();  // stop()
  SimQueue(const SimQueue &) = delete;
  SimQueue &operator=(const SimQueue &) = delete;

  trn_result_t submit(const trn_hal_submission_t &submission, std::string *why);
  void status(trn_hal_queue_status_t *status);
  trn_result_t reset(std::string *why);
  // Completes the running buffer (a wait in it ends as cancelled), cancels the rest, joins.
  void stop();

 private:
  struct Buffer {
    const char *label = nullptr;  // static storage (hal.h)
    uint64_t tag = 0;
    std::vector<trn_hal_command_t> commands;
    std::vector<trn_hal_binding_t> args;         // every launch's arguments, in order
    std::vector<std::shared_ptr<SemCore>> sems;  // per command: its semaphore, if any
    bool counted = false;                        // retired already (before its last signals)
  };
  // "copy #12": what failure texts call a buffer.
  static std::string name_of(const Buffer &buffer);
  // Why a command failed, for the fault record.
  struct Failure {
    trn_result_t result = TRN_SUCCESS;
    std::string reason;
    uint64_t destination = 0, source = 0, bytes = 0;
    const trn_hal_kernel_t *kernel = nullptr;  // a kernel fault or deadlock
    LaunchOutcome launch;
  };

  std::unique_ptr<Buffer> next();
  void run();
  void process(Buffer &buffer);  // executes or cancels it
  void idle(uint32_t seen);      // until the doorbell changes from `seen` (or a slice passes)
  // Where the signals that end a buffer begin (its size if it does not end with one).
  static size_t trailing_signals(const Buffer &buffer);
  // Runs commands [0, end); false if one failed (the rest are abandoned).
  bool execute(Buffer &buffer, size_t end, trn_hal_core_activity_t *activity);
  trn_result_t execute_command(const trn_hal_command_t &command, SemCore *sem,
                               trn_hal_core_activity_t *activity, Failure *failure);
  void record_fault(const Buffer &buffer, uint32_t index, const Failure &failure);
  // Commands [from, end) of a buffer that will not run: signals fail with `text`, host calls
  // are called with `status`.
  void abandon(Buffer &buffer, size_t from, trn_result_t status, const std::string &text);
  void cancel(Buffer &buffer, const std::string &reason);
  void retire(std::unique_ptr<Buffer> buffer);
  void count_retired(Buffer &buffer);  // ahead of its last signals
  void tick(uint64_t ns);

  trn_hal_instance_t &instance_;
  DeviceRuntime &device_;
  const QueueShape shape_;
  SpinLock mu_;  // guards pending_, free_, submitted_, fault_ (held for microseconds at most)
  std::deque<std::unique_ptr<Buffer>> pending_;
  std::vector<std::unique_ptr<Buffer>> free_;  // retired buffers kept for reuse
  uint64_t submitted_ = 0;
  trn_hal_queue_fault_t fault_{};
  std::atomic<uint64_t> retired_{0};
  std::atomic<bool> in_error_{false};
  std::atomic<bool> stop_{false};
  std::atomic<uint32_t> doorbell_{0};
  std::atomic<uint32_t> worker_asleep_{0};
  uint64_t clock_ns_ = 0;  // the queue's simulated time; the worker's alone
  std::mutex stop_mu_;     // one stop at a time
  std::thread worker_;
};

}  // namespace trn::sim

struct trn_hal_queue : trn::sim::SimQueue {
  using trn::sim::SimQueue::SimQueue;
};
