#include "ops/device.hpp"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <vector>

#include "ops/error.hpp"

namespace trn::ops {

namespace {

std::mutex g_mutex;
std::map<uint32_t, Device> g_devices;  // guarded by g_mutex

Device look_up(uint32_t index) {
  uint32_t count = 0;
  check(trn_device_get(&count, nullptr), "counting devices");
  std::vector<trn_device_t> handles(count);
  check(trn_device_get(&count, handles.data()), "listing devices");
  if (index >= count)
    fail(TRN_ERROR_NO_DEVICE, fmt::format("device {} is not visible ({} devices)", index, count));
  Device d;
  d.handle = handles[index];
  d.index = index;
  d.properties = TRN_DEVICE_PROPERTIES_INIT;
  check(trn_device_get_properties(d.handle, &d.properties), "reading the device's properties");
  d.target = kbuild::build_target(d.properties);
  // Everything of the target a built kernel depends on: the limits it is valid for, and the
  // clocks and DMA rate its engine and queue choices were estimated with.
  const isa::CoreSpec &t = d.target.core;
  d.target_key =
      fmt::format("{} nc{} p{} sb{}/{} ps{}x{} sem{} q{} hz{}/{}/{}/{} dma{}",
                  trn_generation_name(d.properties.generation), t.core_version, t.partitions,
                  t.sbuf_bytes_per_partition, d.target.sbuf_bytes(), t.psum_bytes_per_partition,
                  t.psum_banks, t.semaphores, t.dma_queues, t.tensor_hz, t.vector_hz, t.scalar_hz,
                  t.gpsimd_hz, t.dma_engine_bytes_per_s);
  return d;
}

}  // namespace

Device device(uint32_t device_index) {
  {
    std::lock_guard lock(g_mutex);
    auto it = g_devices.find(device_index);
    if (it != g_devices.end()) return it->second;
  }
  Device d = look_up(device_index);
  std::lock_guard lock(g_mutex);
  return g_devices.insert_or_assign(device_index, d).first->second;
}

void forget_device(uint32_t device_index) {
  std::lock_guard lock(g_mutex);
  g_devices.erase(device_index);
}

}  // namespace trn::ops
