// PyTorch's questions about the trn device that are not ops (PrivateUse1HooksInterface): whether
// it is there, how many, which is current, whose memory a pointer is, its generators. The autograd
// engine, torch.accelerator and the generic device code ask them.
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/util/Exception.h>

#include "allocator.hpp"
#include "devices.hpp"
#include "generator.hpp"
#include "pinned.hpp"

namespace torch_trn {
namespace {

struct TrnHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  // A device is ready once the process sees it: its queues and pool are made on first use.
  bool hasPrimaryContext(c10::DeviceIndex index) const override {
    return index >= 0 && index < device_count();
  }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(device_count());
  }
  void setCurrentDevice(c10::DeviceIndex index) const override { set_current_device(index); }
  c10::DeviceIndex getCurrentDevice() const override {
    return static_cast<c10::DeviceIndex>(current_device());
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex index) const override {
    const auto previous = getCurrentDevice();
    if (index != previous) set_current_device(index);
    return previous;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex index) const override {
    return exchangeDevice(index);
  }
  at::Device getDeviceFromPtr(void *data) const override {
    const int index = device_of_pointer(data);
    TORCH_CHECK(index >= 0, "trn: ", data, " is not the memory of a trn tensor");
    return {c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index)};
  }
  bool isPinnedPtr(const void *data) const override { return is_pinned(data); }
  const at::Generator &getDefaultGenerator(c10::DeviceIndex index) const override {
    return default_generator(index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    return at::make_generator<TrnGenerator>(
        index < 0 ? static_cast<c10::DeviceIndex>(current_device()) : index);
  }
  c10::Allocator *getPinnedMemoryAllocator() const override { return pinned_allocator(); }
};

const bool registered = [] {
  static TrnHooks hooks;
  at::RegisterPrivateUse1HooksInterface(&hooks);
  return true;
}();

}  // namespace
}  // namespace torch_trn
