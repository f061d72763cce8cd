// The device's index of live allocations by address, behind trn_mem_lookup.
#include "runtime/memory.hpp"
#include "runtime/session.hpp"

namespace trn::rt {

void index_memory(const std::shared_ptr<Mem> &mem) {
  Device &device = *mem->device;
  std::lock_guard lock(device.index_mu);
  device.by_address.emplace(mem->address, mem);
}

void unindex_memory(Mem &mem) {
  Device &device = *mem.device;
  std::lock_guard lock(device.index_mu);
  auto [first, last] = device.by_address.equal_range(mem.address);
  for (auto it = first; it != last; ++it)
    if (auto known = it->second.lock(); !known || known.get() == &mem) {
      device.by_address.erase(it);
      return;
    }
}

std::shared_ptr<Mem> find_memory(Device &device, uint64_t address) {
  std::lock_guard lock(device.index_mu);
  // Allocations do not overlap (an import of this process's own export shares the exporter's
  // range exactly): the nearest live one starting at or below the address holds it, or none.
  for (auto it = device.by_address.upper_bound(address); it != device.by_address.begin();) {
    --it;
    if (auto mem = it->second.lock()) return address - mem->address < mem->size ? mem : nullptr;
  }
  return nullptr;
}

}  // namespace trn::rt
