// The PrivateUse1 device guard: current device and stream per thread (devices.hpp), events
// (events.hpp) for torch's stream machinery, and the device count.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "allocator.hpp"
#include "check.hpp"
#include "devices.hpp"
#include "events.hpp"

namespace torch_trn {
namespace {

constexpr auto kType = c10::DeviceType::PrivateUse1;

c10::Stream make_stream(int device_index, int64_t id) {
  return c10::Stream(c10::Stream::UNSAFE,
                     c10::Device(kType, static_cast<c10::DeviceIndex>(device_index)), id);
}

struct TrnGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kType; }
  c10::Device exchangeDevice(c10::Device d) const override {
    const c10::Device old = getDevice();
    if (d.index() != old.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override {
    return c10::Device(kType, static_cast<c10::DeviceIndex>(current_device()));
  }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kType, "not a trn device: ", d.str());
    if (d.has_index()) set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    try {
      if (d.has_index()) set_current_device(d.index());
    } catch (...) {
    }
  }
  c10::Stream getStream(c10::Device d) const noexcept override {
    const int index = d.has_index() ? d.index() : current_device();
    return make_stream(index, current_stream_id(index));
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return make_stream(d.has_index() ? d.index() : current_device(), 0);
  }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    const int index = s.device_index();
    const c10::Stream old = make_stream(index, current_stream_id(index));
    try {
      set_current_stream_id(index, s.id());
    } catch (...) {
    }
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(device_count());
  }
  void record(void **event, const c10::Stream &stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "an event recorded on trn:", stream.device_index(),
                " was made for trn:", device_index);
    auto *e = static_cast<Event *>(*event);
    if (!e) *event = e = new Event();
    event_record(*e, stream.device_index(), stream.id(), flag != c10::EventFlag::PYTORCH_DEFAULT);
  }
  void block(void *event, const c10::Stream &stream) const override {
    if (event) event_block(*static_cast<Event *>(event), stream.device_index(), stream.id());
  }
  bool queryEvent(void *event) const override {
    return !event || event_query(*static_cast<Event *>(event));
  }
  void destroyEvent(void *event, const c10::DeviceIndex) const noexcept override {
    if (event) event_retire(*static_cast<Event *>(event));
    delete static_cast<Event *>(event);
  }
  bool queryStream(const c10::Stream &stream) const override {
    return stream_query(stream.device_index(), stream.id());
  }
  void synchronizeStream(const c10::Stream &stream) const override {
    stream_synchronize(stream.device_index(), stream.id());
  }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    const int index = d.has_index() ? d.index() : current_device();
    return make_stream(index, device_at(index).create_stream(priority));
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority) const override {
    return getNewStream(d, high_priority ? -1 : 0);
  }
  void synchronizeEvent(void *event) const override {
    if (event) event_synchronize(*static_cast<Event *>(event));
  }
  void synchronizeDevice(const c10::DeviceIndex index) const override {
    device_at(index < 0 ? current_device() : index).synchronize();
  }
  double elapsedTime(void *start, void *end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start && end, "trn: elapsed_time needs two recorded events");
    return event_elapsed_ms(*static_cast<Event *>(start), *static_cast<Event *>(end));
  }
  void recordDataPtrOnStream(const c10::DataPtr &data, const c10::Stream &stream) const override {
    record_stream(data, device_at(stream.device_index()).queue(stream.id()));
  }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, TrnGuardImpl);

}  // namespace torch_trn
