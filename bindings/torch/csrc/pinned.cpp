#include "pinned.hpp"

#include <c10/util/Exception.h>
#include <sys/mman.h>

#include <set>
#include <vector>

#include "address_map.hpp"
#include "check.hpp"
#include "devices.hpp"

namespace torch_trn {
namespace {

struct Pinned {
  void *data = nullptr;
  size_t bytes = 0;
  std::vector<trn_mem_t> registrations;  // one per trn device
};

AddressMap<Pinned> &live_pinned() {
  static auto *pinned = new AddressMap<Pinned>;  // outlives tensors freed at exit
  return *pinned;
}

void release(void *context) {
  auto *p = static_cast<Pinned *>(context);
  live_pinned().remove(reinterpret_cast<uintptr_t>(p->data));
  // No queued copy uses it now: a copy holds its host tensor (this storage) until its queue
  // passed it (copy_ops.cpp's pending host buffers).
  for (trn_mem_t mem : p->registrations) trn_mem_free(mem);
  munmap(p->data, p->bytes);
  delete p;
}

class PinnedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (n == 0) return {nullptr, nullptr, &c10::detail::deleteNothing, cpu};
    void *data = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    TORCH_CHECK(data != MAP_FAILED, "trn: cannot map ", n, " bytes of pinned host memory");
    auto *p = new Pinned{data, n, {}};
    try {
      // Each trn device once (its cores are torch devices of their own).
      std::set<trn_device_t> seen;
      for (int i = 0; i < device_count(); ++i) {
        const trn_device_t device = device_at(i).trn_device();
        if (!seen.insert(device).second) continue;
        trn_mem_t mem = nullptr;
        check(trn_mem_register_host(device, data, n, 0, &mem), "trn_mem_register_host");
        p->registrations.push_back(mem);
      }
    } catch (...) {
      release(p);
      throw;
    }
    live_pinned().add(reinterpret_cast<uintptr_t>(data), p);
    return {data, p, &release, cpu};
  }
  void copy_data(void *dest, const void *src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

}  // namespace

c10::Allocator *pinned_allocator() {
  static PinnedAllocator instance;
  return &instance;
}

bool is_pinned(const void *data) {
  return live_pinned().find(data, [](const Pinned &p) { return p.bytes; }).first != nullptr;
}

}  // namespace torch_trn
