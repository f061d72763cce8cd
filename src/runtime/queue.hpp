// Queues: an in-order stream of commands executed by the queue's worker thread. Submission
// appends to a bounded list and rings a doorbell (the worker spins briefly, then sleeps on a
// futex); completion raises the queue's timeline semaphore to the command's sequence number.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "drivers/hal.h"
#include "runtime/sem.hpp"
#include "trn/trn.h"

namespace trn::rt {

struct Device;
struct Core;
struct Mem;
struct Kernel;
class Profile;

struct SemRef {
  std::shared_ptr<Sem> sem;
  uint64_t value = 0;
};

struct Command {
  enum class Kind { copy, memset, barrier, launch };
  Kind kind = Kind::barrier;
  uint64_t sequence = 0;
  std::vector<SemRef> waits;
  std::vector<SemRef> signals;
  std::weak_ptr<Mem> destination;
  std::weak_ptr<Mem> source;
  uint64_t destination_offset = 0;
  uint64_t source_offset = 0;
  uint64_t destination_address = 0;  // for fault records
  uint64_t source_address = 0;
  uint64_t size = 0;
  uint8_t value = 0;
  // launch
  std::shared_ptr<Kernel> kernel;
  std::vector<std::weak_ptr<Mem>> args;
  std::vector<uint64_t> arg_offsets;
  std::shared_ptr<Profile> profile;
  // Where a kernel faulted (filled by the worker for the fault record).
  std::string fault_engine, fault_opcode;
  uint32_t fault_instruction = 0, fault_line = 0;
};

const char *command_name(Command::Kind kind);

class Queue {
 public:
  Queue(Device &device, Core &core, trn_queue_kind_t kind, uint32_t capacity, uint32_t dma_engines);
  ~Queue();  // stops the worker: see shutdown()
  Queue(const Queue &) = delete;
  Queue &operator=(const Queue &) = delete;

  trn_result_t submit(Command command, uint64_t *sequence);
  trn_result_t finish(uint64_t timeout_ns);
  trn_result_t reset();
  void fault(trn_queue_fault_t *out);
  const std::shared_ptr<Sem> &timeline() const { return timeline_; }
  Core &core() const { return core_; }
  bool is_compute() const { return kind_ == TRN_QUEUE_KIND_COMPUTE; }
  uint64_t timeline_handle = 0;  // the handle trn_queue_get_semaphore returns
  // Completes the command running, cancels the rest, joins the worker. Never waits on a
  // semaphore. Idempotent.
  void shutdown();

 private:
  void run();
  bool next(Command *command);
  void execute(Command &command);
  trn_result_t copy(Command &command, std::string *why);
  trn_result_t memset(Command &command, std::string *why);
  trn_result_t launch(Command &command, std::string *why, trn_hal_core_activity_t *activity);
  // Takes a use of every semaphore of the command's sync (all or none: a destroyed one fails
  // the submission with TRN_ERROR_INVALID_HANDLE); the worker ends them when the command is
  // done with its semaphores.
  static trn_result_t take_uses(const Command &command);
  static void end_uses(const Command &command);
  void retire(Command &command);
  void cancel(Command &command, const std::string &reason);
  void record_fault(const Command &command, trn_result_t result, const std::string &reason);
  uint64_t simulated_dma_ns(uint64_t bytes) const;

  Device &device_;
  Core &core_;
  const trn_queue_kind_t kind_;
  const uint32_t capacity_;
  const uint32_t dma_engines_;
  std::shared_ptr<Sem> timeline_;

  std::mutex mu_;  // guards pending_, submitted_, fault_
  std::deque<Command> pending_;
  uint64_t submitted_ = 0;
  trn_queue_fault_t fault_;
  std::atomic<uint64_t> retired_{0};  // commands completed or cancelled, in order
  std::atomic<bool> in_error_{false};
  std::atomic<bool> stop_{false};
  std::atomic<uint32_t> doorbell_{0};  // futex word: bumped on every submission and on stop
  std::atomic<uint32_t> worker_asleep_{0};
  std::mutex shutdown_mu_;  // serialises shutdown()
  std::thread worker_;
};

}  // namespace trn::rt
