// Putting an op's commands on its queue: the op's sync belongs to the op as a whole, so its waits
// go on the first command and its signals on the last. Commands are collected first and
// submitted together; a full queue is waited out (bounded), a kernel or device handle found stale
// (the runtime was restarted) before anything was submitted is reported as StaleHandle so that
// the op can look its kernels up again and retry once.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ops/kernel_cache.hpp"
#include "trn/trn.h"

namespace trn::ops {

// An op's sync checked before any of its commands is queued: its lists and semaphore handles (a
// NULL or destroyed one), so that a bad sync fails the op with nothing queued rather than at its
// last command, after the others went in. A failed semaphore passes: waiting on it fails the op
// when it runs, as for any command.
void check_sync(const trn_sync_t *sync);

class Commands {
 public:
  Commands(trn_queue_t queue, const trn_sync_t *sync) : queue_(queue), sync_(sync) {
    check_sync(sync);
  }

  void launch(const KernelPtr &kernel, std::vector<trn_kernel_binding_t> args);
  void read(void *destination, trn_mem_t source, uint64_t offset, uint64_t size);
  void write(trn_mem_t destination, uint64_t offset, const void *source, uint64_t size);
  void host_call(trn_host_fn_t fn, void *user);
  void copy(trn_mem_t destination, uint64_t destination_offset, trn_mem_t source,
            uint64_t source_offset, uint64_t size);
  void barrier();  // only the sync: an op with nothing to compute
  bool empty() const { return commands_.empty(); }
  size_t submitted() const { return submitted_; }
  // Submits everything in order. On a failure after some commands went in, the error says so.
  void submit();

 private:
  using Command = std::function<trn_result_t(const trn_sync_t *sync)>;
  trn_queue_t queue_;
  const trn_sync_t *sync_;
  std::vector<Command> commands_;
  void drop_stale_kernels() const;

  size_t submitted_ = 0;
  std::vector<KernelPtr> kernels_;  // kept alive until submitted (the queue keeps them after)
};

// Scalar bindings.
trn_kernel_binding_t scalar_f32(float value);
trn_kernel_binding_t tensor_binding(trn_mem_t mem, uint64_t offset);

}  // namespace trn::ops
