// A queue: a ring of command buffers on a logical core's engines, executed in order by one
// worker thread. The ring is a bounded queue of `capacity` slots with per-slot sequence numbers:
// submitters (serialised on a lock the worker never takes) fill the next slot and publish it;
// the worker spins on that slot for the spin budget when idle, then sleeps on a doorbell futex
// that submitters ring only while it sleeps. Failure semantics are hal.h's
// (trn_hal_queue_fault_t).
//
// A host thread that waits for the queue's timeline may run its buffers itself (assist): the
// worker is a second thread that must be scheduled for every hand-off, and with more busy
// threads than cores (ranks' hosts and queues on a small machine) each hand-off waits for the
// scheduler. Whoever holds the token runs the ring; the worker lets a waiting host thread have it
// at its next wait or buffer boundary, and takes it back when that thread leaves.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.hpp"
#include "sim/launch.hpp"
#include "sim/ops_support.hpp"
#include "sim/spin_lock.hpp"
#include "sim/wait_primitives.hpp"

namespace trn::sim {

class SemCore;

struct QueueShape {
  uint32_t first_core = 0;  // physical
  uint32_t core_count = 1;
  trn_hal_queue_kind_t kind = TRN_HAL_QUEUE_COMPUTE;
  uint32_t capacity = 1;
  uint32_t dma_engines = 1;
  uint64_t dma_engine_bytes_per_s = 0;
  uint64_t link_bytes_per_s = 0;           // one NeuronLink link, to another device
  uint32_t dma_reduce_rate_percent = 100;  // reductions' share of the DMA engines' rate
};

// TRN_SIM_JITTER_NS (config.hpp): a random pause of up to `max_ns`, a yield, or nothing; before
// each command a queue runs and after each submission.
void jitter(uint64_t max_ns);

class SimQueue {
 public:
  SimQueue(trn_hal_instance_t &instance, DeviceRuntime &device, const QueueShape &shape);
  ~SimQueue();  // stop()
  SimQueue(const SimQueue &) = delete;
  SimQueue &operator=(const SimQueue &) = delete;

  trn_result_t submit(const trn_hal_submission_t &submission, std::string *why);
  void status(trn_hal_queue_status_t *status);
  trn_result_t reset(std::string *why);
  // TRN_HAL_QUEUE_PRIORITY_*: the order in which launches of queues on the core take its engines.
  trn_result_t set_priority(uint32_t priority, std::string *why);
  // Completes the running buffer (a wait in it ends as cancelled), cancels the rest, joins.
  void stop();
  // Called by a host thread waiting for `sem` (which this queue's buffers signal) to reach
  // `value`: runs the queue's buffers on this thread while that stays quick (copies, reductions
  // and memsets up to kAssistBytes, semaphore commands, timestamps, brief host calls; until the
  // deadline), then gives the rest back to the worker. True once the value is reached. `start`:
  // the clock when the wait began (the caller's read, not another).
  bool assist(SemCore &sem, uint64_t value, uint64_t start, uint64_t deadline_ns);
  static constexpr uint64_t kAssistBytes = 1u << 20;
  static constexpr uint64_t kAssistAfterNs = 1'000;
  // The first nap of a worker whose waiters run its ring (sim_queue_runner.cpp).
  static constexpr uint64_t kLentSliceNs = 200'000;

 private:
  static constexpr uint32_t kInlineCommands = 6;
  static constexpr uint32_t kChunkSlots = 64;
  // One buffer's place in the ring. `seq` is one more than the position of the buffer it last
  // held: the buffer is published when it equals its position + 1. The slot is free for the
  // next lap once that buffer retired (`retired_`, which only the runner writes).
  struct alignas(64) Slot {
    std::atomic<uint64_t> seq{0};
    uint32_t count = 0;
    trn_hal_command_t inline_commands[kInlineCommands];
    SemCore *inline_sems[kInlineCommands]{};  // per command: its semaphore, if any
    std::vector<trn_hal_command_t> more;      // the commands when more than kInlineCommands
    std::vector<SemCore *> more_sems;
    std::vector<trn_hal_binding_t> args;  // every launch's arguments, in order
    // Holds on the semaphores the queue has not pinned (see pins_), let go when it retires.
    std::vector<std::shared_ptr<SemCore>> refs;
    // Read by the worker only when the buffer fails: a line of their own, which the submitter
    // rewrites without taking it from the worker.
    alignas(64) const char *label = nullptr;  // static storage (hal.h)
    uint64_t tag = 0;
    trn_hal_command_t *commands() {
      return count <= kInlineCommands ? inline_commands : more.data();
    }
    const trn_hal_command_t *commands() const {
      return count <= kInlineCommands ? inline_commands : more.data();
    }
    SemCore **sems() { return count <= kInlineCommands ? inline_sems : more_sems.data(); }
    SemCore *const *sems() const {
      return count <= kInlineCommands ? inline_sems : more_sems.data();
    }
  };
  // A trailing signal, taken out of its slot before the slot is freed.
  struct TailSignal {
    SemCore *sem;
    uint64_t value;
  };
  // Where the token holder is in the buffer at tail_: a buffer handed over between the worker and
  // a helper resumes at the command it stopped before.
  struct Cursor {
    bool active = false;
    size_t index = 0;  // the next command to run
    size_t end = 0;    // where its trailing signals begin
    uint64_t start_ns = 0;
    trn_hal_core_activity_t activity{};
  };
  // A helper's errand: the value it waits for, and until when.
  struct Errand {
    SemCore *sem;
    uint64_t value;
    uint64_t deadline_ns;
    bool done() const;
  };
  enum class Drained { empty, paused, yielded };
  // The host clock of a runner going through buffers back to back: the read that ends one
  // buffer's busy time starts the next one's and serves a helper's deadline check (a read costs
  // about as much as a small copy). Buffers without work read nothing, so after kLooksPerRead
  // looks without a read the next one reads afresh: a deadline is never judged on a stale time.
  class RunClock {
   public:
    RunClock() = default;
    // Starts from a read the caller made a moment ago (a helper's, as its wait began).
    explicit RunClock(uint64_t read_ns) : ns_(read_ns), unclocked_(0) {}
    uint64_t now() {
      if (unclocked_ >= kLooksPerRead) return read();
      ++unclocked_;
      return ns_;
    }
    uint64_t read() {
      ns_ = common::monotonic_ns();
      unclocked_ = 0;
      return ns_;
    }

   private:
    static constexpr uint32_t kLooksPerRead = 16;
    uint64_t ns_ = 0;
    uint32_t unclocked_ = kLooksPerRead;  // looks since the last read; nothing read yet
  };
  // "copy #12": what failure texts call a buffer.
  static std::string name_of(const Slot &buffer);
  // " (a queue of device 0, physical core 2)": ends what a semaphore the queue fails says to its
  // waiters, who may wait on queues of several cores and processes.
  std::string where() const;
  // Why a command failed, for the fault record.
  struct Failure {
    trn_result_t result = TRN_SUCCESS;
    std::string reason;
    uint64_t destination = 0, source = 0, bytes = 0;
    const trn_hal_kernel_t *kernel = nullptr;  // a kernel fault or deadlock
    LaunchOutcome launch;
  };

  Slot *slot_for_producer(uint64_t position);  // makes its chunk on first use
  // Whether the queue holds `core` itself (pinning it if it is local and a pin is free); one it
  // signals learns this queue as its feeder (SemCore::set_feeder).
  bool pin(const std::shared_ptr<SemCore> &core, bool signals);
  // The slot if it holds that position's buffer.
  Slot *published(uint64_t position, std::memory_order order);
  void run();
  // Until the worker holds the token with a buffer to run (false: stopping, nothing left),
  // spinning for the budget first or sleeping at once.
  bool await_work(bool spin_first);
  bool claim();  // takes the token if a buffer waits and no helper wants it
  // Runs buffers with the token held (`errand`: as a helper) until none is published, a command
  // paused, or (the worker) a helper waits for the token. `clock_ns`: a clock read the caller made
  // just before, if it has one (0: none).
  Drained drain(const Errand *errand, uint64_t clock_ns = 0);
  // Executes or cancels the buffer at tail_ from the cursor on, and retires it; false if it
  // paused (the cursor keeps its place).
  bool process(Slot &buffer, const Errand *errand, RunClock &clock);
  // Where the signals that end a buffer begin (its size if it does not end with one).
  static size_t trailing_signals(const Slot &buffer);
  enum class Ran { completed, failed, paused };
  // Runs commands from the cursor to its end (the rest are abandoned if one fails).
  Ran execute(Slot &buffer, const Errand *errand);
  // TRN_TIMEOUT: paused before the command (a wait handed over, or past a helper's reach).
  trn_result_t execute_command(const trn_hal_command_t &command, SemCore *sem, const Errand *errand,
                               trn_hal_core_activity_t *activity, Failure *failure);
  // Whether a helper may run the command (short enough to keep within its caller's deadline).
  static bool helper_may_run(const trn_hal_command_t &command);
  // Whether a helper may run every command of the buffer (`at_once`: without waiting); never
  // one with a wait after a host call.
  static bool helper_may_run(const Slot &buffer, bool at_once);
  // A semaphore wait in a buffer: the worker's, ended early when a helper wants the token; a
  // helper's, ended (TRN_TIMEOUT) at its deadline or when its errand is done.
  trn_result_t wait_command(SemCore &sem, uint64_t value, const Errand *errand);
  // A transfer of `bytes` on the queue's DMA engines: its simulated time and its activity.
  void charge_dma(uint64_t bytes, trn_hal_core_activity_t *activity);
  // A copy between two devices' HBM, over NeuronLink.
  void charge_link(uint64_t bytes, uint32_t hops, trn_hal_core_activity_t *activity);
  // A reduction of operands of `bytes` each, at the DMA engines' rate for reductions.
  void charge_reduce(uint64_t bytes, trn_hal_core_activity_t *activity);
  void record_fault(const Slot &buffer, uint32_t index, const Failure &failure);
  // Commands [from, end) of a buffer that will not run: signals fail with `text`, host calls
  // are called with `status`.
  void abandon(Slot &buffer, size_t from, trn_result_t status, const std::string &text);
  void cancel(Slot &buffer, const std::string &reason);
  void retire(Slot &buffer);  // frees its slot, counts it retired
  void ring_doorbell();
  void tick(uint64_t ns);

  trn_hal_instance_t &instance_;
  DeviceRuntime &device_;
  const QueueShape shape_;
  const uint64_t capacity_;
  std::unique_ptr<std::atomic<Slot *>[]> chunks_;  // ceil(capacity / kChunkSlots), made lazily
  std::mutex stop_mu_;                             // one stop at a time
  std::thread worker_;

  // The submitters' memo of the memory ranges their commands name (check_submission), for
  // whichever submitter finds it free.
  alignas(64) SpinLock submit_memo_mu_;
  HeldRangesMemo submit_memo_;

  // Submitters' line: the worker never touches it.
  alignas(64) SpinLock producer_mu_;  // guards head_ and the chunks' making
  uint64_t head_ = 0;                 // buffers accepted (the next position)
  uint64_t retired_seen_ = 0;         // retired_ as submitters last read it
  // The queue's own holds on the first local semaphores its buffers use (a runtime's timeline,
  // signalled by every buffer): their commands take no hold of their own, so a steady state
  // moves no reference count. Kept until the queue goes (a local semaphore has one hold, whose
  // watches its destroy ends: keeping the object a while longer shows nowhere).
  static constexpr uint32_t kPins = 4;
  std::shared_ptr<SemCore> pins_[kPins];
  bool feeds_[kPins]{};  // this queue is the pinned semaphore's feeder

  // Read on every buffer, written rarely.
  alignas(64) std::atomic<uint32_t> stop_{0};
  std::atomic<bool> in_error_{false};
  std::atomic<uint32_t> priority_{TRN_HAL_QUEUE_PRIORITY_NORMAL};

  // The sleeping worker's doorbell: submitters ring it only while the worker is kAsleep. While
  // `lent_` (host threads have been running the ring) it is kNapping instead: it looks for work
  // on its own after each nap (kLentSliceNs, longer while its looks find nothing), and leaving
  // helpers ring it for what they leave.
  static constexpr uint32_t kAwake = 0, kAsleep = 1, kNapping = 2;
  alignas(64) std::atomic<uint32_t> asleep_{kAwake};
  std::atomic<uint32_t> doorbell_{0};
  std::atomic<bool> lent_{false};
  std::atomic<uint64_t> assists_{0};  // helpers that ran buffers, to end `lent_`
  uint64_t nap_ns_ = kLentSliceNs;    // the worker's next nap while lent (its own)

  // Who runs the ring. The token's holder alone touches the execution state below.
  alignas(64) std::atomic<uint32_t> token_{0};
  // Ends the worker's semaphore waits early: stopping, or a helper waits for the token.
  static constexpr uint32_t kYieldStopping = 1, kYieldToHelper = 2;
  std::atomic<uint32_t> yield_{0};

  // One helper at a time. A line of its own: the worker takes the token's line for every
  // buffer, and a waiter arriving would otherwise take it away first.
  alignas(64) std::atomic<bool> helping_{false};
  YieldHistory helper_yields_;  // the helper's (whichever thread it is): one at a time

  // The execution state: the token holder's.
  alignas(64) std::atomic<uint64_t> tail_{0};  // the next position to run; read as a hint
  std::atomic<uint64_t> retired_{0};
  Cursor cursor_;
  uint64_t clock_ns_ = 0;    // the queue's simulated time
  HeldRangesMemo run_memo_;  // of the memory ranges its commands use
  std::vector<TailSignal> tail_signals_;
  std::vector<std::shared_ptr<SemCore>> tail_refs_;

  // Faults: the worker writes them only when a buffer fails or is cancelled.
  alignas(64) mutable SpinLock fault_mu_;  // guards fault_
  trn_hal_queue_fault_t fault_{};
};

}  // namespace trn::sim

struct trn_hal_queue : trn::sim::SimQueue {
  using trn::sim::SimQueue::SimQueue;
};
