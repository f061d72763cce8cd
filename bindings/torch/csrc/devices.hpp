// The torch devices: `privateuseone:N` is the N-th NeuronCore visible to the process (over all
// trn devices, in enumeration order), as TorchNeuron maps one device to one core. Each has a
// device-memory pool on the core's HBM bank and streams: stream 0 is the default queue, others
// are queues made by torch_trn.Stream. The current device and the current stream per device are
// per thread, as CUDA's are. Everything is created on first use; thread-safe.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <mutex>
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

 private:
  trn_queue_t make_queue(int priority);

  const int index_;
  const trn_device_t device_;
  const trn_core_t core_;
  const uint32_t hbm_bank_;
  std::mutex mutex_;  // guards pool_ and queues_
  trn_pool_t pool_ = nullptr;
  std::vector<trn_queue_t> queues_{nullptr};  // by stream id; [0] the default (null until used)
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
// The current stream's queue of a device.
trn_queue_t current_queue(int device_index);

}  // namespace torch_trn
