// What the Python package calls (torch.ops.torch_trn.*): devices, memory statistics, streams,
// events, the fallback record. Plain ops with no tensors, so the extension needs no Python
// binding library of its own.
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "allocator.hpp"
#include "check.hpp"
#include "devices.hpp"
#include "events.hpp"
#include "fallback.hpp"
#include "generator.hpp"
#include "trn/trn_ops.h"

namespace torch_trn {
namespace {

int resolve(int64_t device_index) {
  return device_index < 0 ? current_device() : static_cast<int>(device_index);
}

// Events by id: Python holds ids, the Event objects live here until destroyed.
class EventTable {
 public:
  int64_t create(bool timing) {
    std::lock_guard lock(mutex_);
    auto e = std::make_unique<Event>();
    e->timed = timing;
    events_[++last_id_] = std::move(e);
    return last_id_;
  }
  Event &get(int64_t id) {
    std::lock_guard lock(mutex_);
    const auto it = events_.find(id);
    TORCH_CHECK(it != events_.end(), "torch_trn event ", id, " does not exist (destroyed?)");
    return *it->second;
  }
  void destroy(int64_t id) {
    std::unique_ptr<Event> event;
    {
      std::lock_guard lock(mutex_);
      const auto it = events_.find(id);
      if (it == events_.end()) return;
      event = std::move(it->second);
      events_.erase(it);
    }
    event_retire(*event);  // outside the lock: it may wait for the queue
  }

 private:
  std::mutex mutex_;
  std::map<int64_t, std::unique_ptr<Event>> events_;
  int64_t last_id_ = 0;
};

EventTable &events() {
  static EventTable table;
  return table;
}

int64_t op_device_count() {
  return device_count();
}
int64_t op_current_device() {
  return current_device();
}
void op_set_device(int64_t index) {
  set_current_device(static_cast<int>(index));
}
std::string op_device_name(int64_t index) {
  const Device &dev = device_at(resolve(index));
  trn_core_properties_t core = TRN_CORE_PROPERTIES_INIT;
  check(trn_core_get_properties(dev.core(), &core), "trn_core_get_properties");
  trn_device_properties_t props = TRN_DEVICE_PROPERTIES_INIT;
  check(trn_device_get_properties(dev.trn_device(), &props), "trn_device_get_properties");
  return std::string(trn_generation_name(props.generation)) + " NeuronCore " +
         std::to_string(core.index) + " of trn device " + std::to_string(core.device_index);
}
// What get_device_properties reports: (generation name, chip name, HBM bank bytes, DMA engines,
// peak bf16 flop/s, peak fp32 flop/s, trn device index, core index, global core id).
std::tuple<std::string, std::string, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>
op_device_properties(int64_t index) {
  const Device &dev = device_at(resolve(index));
  trn_core_properties_t core = TRN_CORE_PROPERTIES_INIT;
  check(trn_core_get_properties(dev.core(), &core), "trn_core_get_properties");
  trn_device_properties_t props = TRN_DEVICE_PROPERTIES_INIT;
  check(trn_device_get_properties(dev.trn_device(), &props), "trn_device_get_properties");
  const uint64_t bank_bytes =
      core.hbm_bank < props.hbm_bank_count ? props.hbm_bank_bytes[core.hbm_bank] : 0;
  return {trn_generation_name(props.generation),
          props.name,
          static_cast<int64_t>(bank_bytes),
          static_cast<int64_t>(core.dma_engines),
          static_cast<int64_t>(props.peak_bf16_flops_per_core),
          static_cast<int64_t>(props.peak_fp32_flops_per_core),
          static_cast<int64_t>(core.device_index),
          static_cast<int64_t>(core.index),
          static_cast<int64_t>(core.global_id)};
}
// What mem_get_info reports: (free, total) bytes of the core's HBM bank, every process's
// reservations counted (trn_device_get_memory_stats, what trn-ls shows).
std::tuple<int64_t, int64_t> op_mem_get_info(int64_t index) {
  const Device &dev = device_at(resolve(index));
  trn_core_properties_t core = TRN_CORE_PROPERTIES_INIT;
  check(trn_core_get_properties(dev.core(), &core), "trn_core_get_properties");
  trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
  check(trn_device_get_memory_stats(dev.trn_device(), core.hbm_bank, &stats),
        "trn_device_get_memory_stats");
  const uint64_t total = stats.limit_bytes;
  const uint64_t free = total > stats.reserved_bytes ? total - stats.reserved_bytes : 0;
  return {static_cast<int64_t>(free), static_cast<int64_t>(total)};
}
void op_synchronize(int64_t index) {
  device_at(resolve(index)).synchronize();
}
void op_reset_device(int64_t index) {
  device_at(resolve(index)).reset();
}

// The device's default generator (seeds cross as int64: the Python side maps them to uint64).
TrnGenerator &rng_of(int64_t index) {
  return *at::check_generator<TrnGenerator>(default_generator(resolve(index)));
}
void op_rng_manual_seed(int64_t index, int64_t seed) {
  TrnGenerator &gen = rng_of(index);
  std::lock_guard lock(gen.mutex_);
  gen.set_current_seed(static_cast<uint64_t>(seed));
}
int64_t op_rng_seed(int64_t index) {
  TrnGenerator &gen = rng_of(index);
  std::lock_guard lock(gen.mutex_);
  return static_cast<int64_t>(gen.seed());
}
int64_t op_rng_initial_seed(int64_t index) {
  TrnGenerator &gen = rng_of(index);
  std::lock_guard lock(gen.mutex_);
  return static_cast<int64_t>(gen.current_seed());
}
at::Tensor op_rng_get_state(int64_t index) {
  TrnGenerator &gen = rng_of(index);
  std::lock_guard lock(gen.mutex_);
  return at::Tensor(gen.get_state());
}
void op_rng_set_state(int64_t index, const at::Tensor &state) {
  TrnGenerator &gen = rng_of(index);
  std::lock_guard lock(gen.mutex_);
  gen.set_state(*state.unsafeGetTensorImpl());
}
std::vector<int64_t> op_memory_stats(int64_t index) {
  const MemoryStats s = memory_stats(resolve(index));
  return {static_cast<int64_t>(s.allocated), static_cast<int64_t>(s.peak_allocated),
          static_cast<int64_t>(s.reserved), static_cast<int64_t>(s.peak_reserved)};
}
void op_reset_peak_memory_stats(int64_t index) {
  reset_peak_memory_stats(resolve(index));
}
void op_empty_cache(int64_t index) {
  empty_cache(resolve(index));
}
int64_t op_device_time_ns(int64_t index) {
  uint64_t device_ns = 0, host_ns = 0;
  check(trn_device_get_timestamps(device_at(resolve(index)).trn_device(), &device_ns, &host_ns),
        "trn_device_get_timestamps");
  return static_cast<int64_t>(device_ns);
}
std::tuple<std::vector<std::string>, std::vector<int64_t>> op_fallback_ops() {
  std::vector<std::string> names;
  std::vector<int64_t> counts;
  for (const auto &[name, count] : fallback_ops()) {
    names.push_back(name);
    counts.push_back(static_cast<int64_t>(count));
  }
  return {names, counts};
}
void op_reset_fallback_ops() {
  reset_fallback_ops();
}

// Raw handles for C code that works beside torch (its own kernels launched on torch's stream,
// on tensors found with trn_mem_lookup from data_ptr()), as torch.cuda.Stream.cuda_stream.
int64_t op_stream_handle(int64_t index, int64_t stream) {
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(device_at(resolve(index)).queue(stream)));
}
int64_t op_device_handle(int64_t index) {
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(device_at(resolve(index)).trn_device()));
}

int64_t op_stream_create(int64_t index, int64_t priority) {
  return device_at(resolve(index)).create_stream(static_cast<int>(priority));
}
int64_t op_current_stream(int64_t index) {
  return current_stream_id(resolve(index));
}
void op_set_stream(int64_t index, int64_t stream) {
  set_current_stream_id(resolve(index), stream);
}
void op_stream_synchronize(int64_t index, int64_t stream) {
  stream_synchronize(resolve(index), stream);
}
bool op_stream_query(int64_t index, int64_t stream) {
  return stream_query(resolve(index), stream);
}

int64_t op_event_create(bool timing) {
  return events().create(timing);
}
void op_event_record(int64_t id, int64_t index, int64_t stream) {
  Event &e = events().get(id);
  event_record(e, resolve(index), stream, e.timed);
}
void op_event_wait(int64_t id, int64_t index, int64_t stream) {
  event_block(events().get(id), resolve(index), stream);
}
bool op_event_query(int64_t id) {
  return event_query(events().get(id));
}
void op_event_synchronize(int64_t id) {
  event_synchronize(events().get(id));
}
double op_event_elapsed_ms(int64_t start, int64_t end) {
  return event_elapsed_ms(events().get(start), events().get(end));
}
void op_event_destroy(int64_t id) {
  events().destroy(id);
}

}  // namespace

TORCH_LIBRARY(torch_trn, m) {
  m.def("device_count() -> int", &op_device_count);
  m.def("current_device() -> int", &op_current_device);
  m.def("set_device(int device) -> ()", &op_set_device);
  m.def("device_name(int device) -> str", &op_device_name);
  m.def("device_properties(int device) -> (str, str, int, int, int, int, int, int, int)",
        &op_device_properties);
  m.def("synchronize(int device) -> ()", &op_synchronize);
  m.def("reset_device(int device) -> ()", &op_reset_device);
  m.def("rng_manual_seed(int device, int seed) -> ()", &op_rng_manual_seed);
  m.def("rng_seed(int device) -> int", &op_rng_seed);
  m.def("rng_initial_seed(int device) -> int", &op_rng_initial_seed);
  m.def("rng_get_state(int device) -> Tensor", &op_rng_get_state);
  m.def("rng_set_state(int device, Tensor state) -> ()", &op_rng_set_state);
  m.def("memory_stats(int device) -> int[]", &op_memory_stats);
  m.def("mem_get_info(int device) -> (int, int)", &op_mem_get_info);
  m.def("reset_peak_memory_stats(int device) -> ()", &op_reset_peak_memory_stats);
  m.def("empty_cache(int device) -> ()", &op_empty_cache);
  m.def("device_time_ns(int device) -> int", &op_device_time_ns);
  m.def("fallback_ops() -> (str[], int[])", &op_fallback_ops);
  m.def("reset_fallback_ops() -> ()", &op_reset_fallback_ops);
  m.def("stream_create(int device, int priority) -> int", &op_stream_create);
  m.def("stream_handle(int device, int stream) -> int", &op_stream_handle);
  m.def("device_handle(int device) -> int", &op_device_handle);
  m.def("current_stream(int device) -> int", &op_current_stream);
  m.def("set_stream(int device, int stream) -> ()", &op_set_stream);
  m.def("stream_synchronize(int device, int stream) -> ()", &op_stream_synchronize);
  m.def("stream_query(int device, int stream) -> bool", &op_stream_query);
  m.def("event_create(bool timing) -> int", &op_event_create);
  m.def("event_record(int event, int device, int stream) -> ()", &op_event_record);
  m.def("event_wait(int event, int device, int stream) -> ()", &op_event_wait);
  m.def("event_query(int event) -> bool", &op_event_query);
  m.def("event_synchronize(int event) -> ()", &op_event_synchronize);
  m.def("event_elapsed_ms(int start, int end) -> float", &op_event_elapsed_ms);
  m.def("event_destroy(int event) -> ()", &op_event_destroy);
}

}  // namespace torch_trn
