// Queues as the runtime keeps them: the API entry points validate a command; a Queue numbers it,
// builds its command buffer for the driver's queue (the driver executes it) and keeps what the
// command references alive and unfreed until it retires. Its timeline semaphore, which the
// driver's queue raises to each command's sequence number, is the completion primitive.
#pragma once

#include <atomic>
#include <boost/container/small_vector.hpp>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
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
struct ProgramRun;
struct Program;
class Capture;

struct SemRef {
  std::shared_ptr<Sem> sem;
  uint64_t value = 0;
};
// A command's waits or signals: room for two without allocating (a collective's chunk waits for
// one and signals one).
using SemRefs = boost::container::small_vector<SemRef, 2>;

// One API command, as the entry points fill it in. Freeing memory while a command that uses it
// is queued is allowed: the command then fails when it is reached (the allocation's use gate is
// closed). Its operands are referenced strongly (the bookkeeping object outlives the free until
// the command retires, the memory itself does not); a launch's and an execution's lists weakly.
struct Command {
  enum class Kind {
    copy,
    memset,
    barrier,
    launch,
    write,
    read,
    timestamp,
    host_call,
    free,
    read_file,
    write_file,
    execute,
    reduce
  };
  Kind kind = Kind::barrier;
  SemRefs waits;
  SemRefs signals;
  std::shared_ptr<Mem> destination;
  std::shared_ptr<Mem> source;
  uint64_t destination_offset = 0;
  uint64_t source_offset = 0;
  uint64_t destination_address = 0;  // device addresses, read while the memory was held
  uint64_t source_address = 0;
  uint64_t size = 0;
  uint8_t value = 0;
  // reduce: destination = source op second (size = count * the dtype's bytes)
  std::shared_ptr<Mem> second;
  uint64_t second_address = 0;
  trn_dtype_t dtype = TRN_DTYPE_F32;
  trn_reduce_op_t reduce_op = TRN_REDUCE_SUM;
  // write (source), read (destination), timestamp (destination): the caller's host memory
  void *host = nullptr;
  // read_file (into destination), write_file (from source): the caller's descriptor and offset
  int fd = -1;
  uint64_t file_offset = 0;
  // host_call
  trn_host_fn_t host_fn = nullptr;
  void *host_user = nullptr;
  // free: the allocation, whose handle is gone already
  std::shared_ptr<Mem> freed;
  // launch
  std::shared_ptr<Kernel> kernel;
  std::vector<std::weak_ptr<Mem>> args;
  std::vector<trn_hal_binding_t> bindings;  // each argument's device range
  std::shared_ptr<Profile> profile;
  // execute: the program and this execution's bindings
  std::shared_ptr<ProgramRun> run;
};

const char *command_name(Command::Kind kind);
// Whether the command uses allocations the call before its operation must hold.
bool uses_memory(Command::Kind kind);

class Queue {
 public:
  // A queue of `priority` (TRN_QUEUE_PRIORITY_*, 0 = normal); nothing is left when it fails.
  static trn_result_t create(Device &device, Core &core, trn_queue_kind_t kind, uint32_t capacity,
                             uint32_t dma_engines, uint32_t priority, std::shared_ptr<Queue> *out);
  Queue(Device &device, Core &core, trn_queue_kind_t kind, uint32_t capacity,
        std::shared_ptr<Sem> timeline, trn_hal_queue_t *hal);  // see create()
  ~Queue();                                                    // shutdown()
  Queue(const Queue &) = delete;
  Queue &operator=(const Queue &) = delete;

  trn_result_t submit(Command &&command, uint64_t *sequence);
  trn_result_t finish(uint64_t timeout_ns);
  trn_result_t reset();
  void fault(trn_queue_fault_t *out);
  const std::shared_ptr<Sem> &timeline() const { return timeline_; }
  Core &core() const { return core_; }
  bool is_compute() const { return kind_ == TRN_QUEUE_KIND_COMPUTE; }
  // The queue whose host function the calling thread runs, if any: it must not wait for itself.
  static const Queue *running_host_call();
  uint64_t timeline_handle = 0;  // the handle trn_queue_get_semaphore returns

  // Capture (trn_queue_begin_capture): while on, `record` takes what `submit` would run.
  bool capturing() const { return capturing_.load(std::memory_order_acquire); }
  trn_result_t begin_capture();
  trn_result_t record(const Command &command);
  trn_result_t end_capture(std::shared_ptr<Program> *out);
  // Stops the driver's queue: the command running completes, the rest are cancelled. Never
  // waits on a semaphore. Idempotent.
  void shutdown();

  struct Work;  // a submitted command's references, until it retires (queue_work.cpp)
  // What the fault record takes from the runtime's side: the failed command's operands.
  struct FaultOperands {
    uint64_t sequence = 0;
    uint64_t destination_address = 0, source_address = 0, size = 0;
    std::string kernel;
    // execute: the program (not kept alive for the record) and the buffer's command index of
    // its first step, to name the step and kernel that faulted
    std::weak_ptr<Program> program;
    std::string program_name;
    uint32_t first_step_command = 0;
  };
  // A command retired with `status` (not success): the first one since the last reset is the
  // one that failed, the rest were cancelled after it.
  void note_failure(const Work &work, trn_result_t status);

 private:
  void status(trn_hal_queue_status_t *out) const;
  trn_result_t set_priority(uint32_t priority);
  // The semaphore uses a submission took (take_sem_uses): given back when it ends, unless the
  // submitted work keeps them.
  struct SemUses {
    const std::unique_ptr<Work> &work;
    const Command &command;  // while no work holds it
    bool held = true;
    void keep() { held = false; }
    ~SemUses();
  };
  trn_result_t submit_locked(const trn_hal_command_t *commands, uint32_t count, Command::Kind kind,
                             uint64_t sequence);
  trn_result_t faulted_error(const trn_hal_queue_fault_t &fault) const;

  Device &device_;
  Core &core_;
  const trn_queue_kind_t kind_;
  const uint32_t capacity_;
  std::shared_ptr<Sem> timeline_;
  // Destroyed by shutdown() under the exclusive lock; calls that read the driver queue's status
  // hold it shared, so a call racing trn_queue_destroy never reads a destroyed queue.
  mutable std::shared_mutex hal_mu_;
  trn_hal_queue_t *hal_;

  std::mutex mu_;  // serialises submissions (sequence numbers follow the driver's order)
  uint64_t submitted_ = 0;
  std::atomic<bool> stopped_{false};
  mutable std::mutex fault_mu_;  // guards operands_
  FaultOperands operands_;
  std::mutex shutdown_mu_;  // serialises shutdown()
  std::mutex capture_mu_;   // guards capture_
  std::unique_ptr<Capture> capture_;
  std::atomic<bool> capturing_{false};
};

}  // namespace trn::rt
