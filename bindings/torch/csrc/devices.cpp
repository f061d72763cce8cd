#include "devices.hpp"

#include <c10/util/Exception.h>

#include <algorithm>
#include <memory>
#include <string>

#include "check.hpp"
#include "events.hpp"

namespace torch_trn {
namespace {

// The visible cores, enumerated once: trn keeps device and core handles valid until
// trn_runtime_shutdown(), which this extension never calls.
class Registry {
 public:
  static Registry &get() {
    static Registry registry;
    return registry;
  }
  int count() const { return static_cast<int>(devices_.size()); }
  Device &at(int index) {
    TORCH_CHECK(index >= 0 && index < count(), "trn:", index,
                " is not a trn device: this process sees ", count(),
                " (one per NeuronCore; TRN_VISIBLE_CORES chooses them)");
    return *devices_[static_cast<size_t>(index)];
  }

 private:
  Registry() {
    uint32_t device_count = 0;
    if (trn_device_get(&device_count, nullptr) != TRN_SUCCESS) return;
    std::vector<trn_device_t> handles(device_count);
    if (trn_device_get(&device_count, handles.data()) != TRN_SUCCESS) return;
    for (trn_device_t handle : handles) {
      uint32_t core_count = 0;
      if (trn_core_get_all(handle, &core_count, nullptr) != TRN_SUCCESS) continue;
      std::vector<trn_core_t> cores(core_count);
      if (trn_core_get_all(handle, &core_count, cores.data()) != TRN_SUCCESS) continue;
      for (trn_core_t core : cores) {
        trn_core_properties_t props = TRN_CORE_PROPERTIES_INIT;
        if (trn_core_get_properties(core, &props) != TRN_SUCCESS || !props.visible) continue;
        devices_.push_back(std::make_unique<Device>(static_cast<int>(devices_.size()), handle, core,
                                                    props.hbm_bank));
      }
    }
  }
  std::vector<std::unique_ptr<Device>> devices_;
};

thread_local int tls_current_device = 0;
thread_local std::vector<int64_t> tls_current_streams;

}  // namespace

trn_pool_t Device::pool() {
  std::lock_guard lock(mutex_);
  if (!pool_) {
    trn_pool_desc_t desc = TRN_POOL_DESC_INIT;
    desc.kind = TRN_POOL_KIND_DEVICE;
    desc.hbm_bank = hbm_bank_;
    check(trn_pool_create(device_, &desc, &pool_), "trn_pool_create");
  }
  return pool_;
}

trn_queue_t Device::make_queue(int priority) {
  trn_queue_desc_t desc = TRN_QUEUE_DESC_INIT;
  desc.kind = TRN_QUEUE_KIND_COMPUTE;
  desc.core = core_;
  desc.priority = priority < 0 ? TRN_QUEUE_PRIORITY_HIGH : TRN_QUEUE_PRIORITY_NORMAL;
  trn_queue_t queue = nullptr;
  check(trn_queue_create(&desc, &queue), "trn_queue_create");
  return queue;
}

void Device::check_usable_locked() const {
  TORCH_CHECK(fault_.empty(), "trn:", index_, " is unusable after a device fault (", fault_,
              "). Values written on it from the fault on are undefined: call "
              "torch.trn.reset_device(",
              index_,
              "), then reload what it held (parameters, optimizer state) from the CPU or a "
              "checkpoint");
}

trn_queue_t Device::queue(int64_t stream_id) {
  std::lock_guard lock(mutex_);
  check_usable_locked();
  TORCH_CHECK(stream_id >= 0 && static_cast<size_t>(stream_id) < queues_.size(), "stream ",
              stream_id, " does not exist on trn:", index_);
  trn_queue_t &queue = queues_[static_cast<size_t>(stream_id)];
  if (!queue) queue = make_queue(0);
  return queue;
}

int64_t Device::create_stream(int priority) {
  trn_queue_t queue = make_queue(priority);
  std::lock_guard lock(mutex_);
  queues_.push_back(queue);
  return static_cast<int64_t>(queues_.size() - 1);
}

std::vector<trn_queue_t> Device::queues() {
  std::lock_guard lock(mutex_);
  std::vector<trn_queue_t> made;
  for (trn_queue_t q : queues_)
    if (q) made.push_back(q);
  return made;
}

void Device::synchronize() {
  {
    std::lock_guard lock(mutex_);
    check_usable_locked();
  }
  for (trn_queue_t q : queues()) queue_finish(q);
}

void Device::mark_faulted(const std::string &fault) {
  std::lock_guard lock(mutex_);
  if (fault_.empty()) fault_ = fault;
}

bool Device::faulted() {
  std::lock_guard lock(mutex_);
  return !fault_.empty();
}

void Device::reset() {
  for (trn_queue_t q : queues()) {
    // Cancelled commands drain first; then the queue's error state is cleared.
    trn_queue_finish(q, wait_timeout_ns());
    check(trn_queue_reset(q), "trn_queue_reset");
  }
  std::lock_guard lock(mutex_);
  fault_.clear();
}

bool Device::has_queue(trn_queue_t queue) {
  std::lock_guard lock(mutex_);
  return std::find(queues_.begin(), queues_.end(), queue) != queues_.end();
}

int device_count() noexcept {
  try {
    return Registry::get().count();
  } catch (...) {
    return 0;
  }
}

Device *device_of_queue(trn_queue_t queue) noexcept {
  if (!queue) return nullptr;
  try {
    const int count = Registry::get().count();
    for (int i = 0; i < count; ++i)
      if (Device &d = Registry::get().at(i); d.has_queue(queue)) return &d;
  } catch (...) {
  }
  return nullptr;
}

Device &device_at(int index) {
  return Registry::get().at(index);
}

Device &device_at(const c10::Device &d) {
  TORCH_CHECK(d.type() == c10::DeviceType::PrivateUse1, "not a trn device: ", d.str());
  return device_at(d.has_index() ? d.index() : current_device());
}

int current_device() noexcept {
  return tls_current_device;
}

void set_current_device(int index) {
  device_at(index);  // checks the range
  tls_current_device = index;
}

int64_t current_stream_id(int device_index) noexcept {
  const auto i = static_cast<size_t>(device_index);
  return i < tls_current_streams.size() ? tls_current_streams[i] : 0;
}

void set_current_stream_id(int device_index, int64_t stream_id) {
  device_at(device_index).queue(stream_id);  // checks that it exists
  const auto i = static_cast<size_t>(device_index);
  if (tls_current_streams.size() <= i) tls_current_streams.resize(i + 1, 0);
  tls_current_streams[i] = stream_id;
}

trn_queue_t current_queue(int device_index) {
  return device_at(device_index).queue(current_stream_id(device_index));
}

}  // namespace torch_trn
