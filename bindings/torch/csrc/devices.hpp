// The torch devices: `trn:N` (PyTorch's PrivateUse1, renamed) is the N-th NeuronCore visible to the
// process (over all trn devices, in enumeration order), as TorchNeuron maps one device to one core.
// Each has a device-memory pool on the core's HBM bank and streams: stream 0 is the default queue,
// others are queues made by torch_trn.Stream. The current device and the current stream per device
// are per thread, as CUDA's are. Everything is created on first use; thread-safe.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "trn/trn.h"

namespace torch_trn {

class Device {
 public:
  Device(int index, trn_device_t device, trn_core_t core, uint32_t hbm_bank)
      : index_(index), device_(device), core_(core), hbm_bank_(hbm_bank) {}
  // Queues and the pool go with the runtime at exit; nothing is waited for.
  ~Device() = default;
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;

  int index() const { return index_; }
  trn_device_t trn_device() const { return device_; }
  trn_core_t core() const { return core_; }
  // The pool tensors are allocated from (made on first use).
  trn_pool_t pool();
  // The queue of a stream id (0: the default queue, made on first use).
  trn_queue_t queue(int64_t stream_id);
  // A new stream: a compute queue of its own. Returns its id.
  int64_t create_stream(int priority);
  // Every stream's queue, for a device-wide synchronize.
  std::vector<trn_queue_t> queues();
  // Waits for every queue of the device (raises on a queue fault or the deadline).
  void synchronize();

  // After a device fault the device is unusable, as a CUDA device is after an asynchronous error:
  // its tensors' values are undefined from the fault on, so every later use of its streams (an
  // op, a copy, an allocation) raises, naming the fault, until reset() (torch.trn.reset_device).
  void mark_faulted(const std::string &fault);
  bool faulted();
  // Waits for every queue to drain (bounded by TRN_TORCH_TIMEOUT), clears their error states and
  // lets work run again; raises when a queue cannot be reset.
  void reset();
  bool has_queue(trn_queue_t queue);

 private:
  trn_queue_t make_queue(int priority);
  void check_usable_locked() const;  // raises after a fault (mutex_ held)

  const int index_;
  const trn_device_t device_;
  const trn_core_t core_;
  const uint32_t hbm_bank_;
  std::mutex mutex_;  // guards pool_, queues_ and fault_
  trn_pool_t pool_ = nullptr;
  std::vector<trn_queue_t> queues_{nullptr};  // by stream id; [0] the default (null until used)
  std::string fault_;                         // the first fault since the last reset()
};

// Number of torch devices (visible cores); 0 when trn has none (is_available() is then false).
int device_count() noexcept;
// The device of an index; raises for an index out of range.
Device &device_at(int index);
Device &device_at(const c10::Device &d);

int current_device() noexcept;
void set_current_device(int index);

int64_t current_stream_id(int device_index) noexcept;
void set_current_stream_id(int device_index, int64_t stream_id);
// The device a queue belongs to; nullptr for a queue of none (one made through the C API).
Device *device_of_queue(trn_queue_t queue) noexcept;
// The current stream's queue of a device.
trn_queue_t current_queue(int device_index);

}  // namespace torch_trn
