// torch.profiler's view of trn: while a profile with trn's activities records
// (torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.TRN])), each op
// torch_trn queues is bracketed by two timestamps on its queue, and the profile gets one device
// activity per op: its name (the aten op), the device time between the timestamps, placed at
// the host time the queue reached it, linked to the CPU op that queued it. Registered with
// PyTorch's PrivateUse1 profiler registry (a kineto activity profiler), so the table's device
// columns and the Chrome trace (which opens in Perfetto) show trn's work.
#pragma once

#include <cstdint>

#include "trn/trn.h"

namespace torch_trn {

struct DeviceRecord;

// The device work of one op on `queue`, timed while a profile records (the outermost range of a
// thread only: an op made of ops is one activity). Otherwise nothing: one relaxed atomic load.
class DeviceRange {
 public:
  DeviceRange(trn_queue_t queue, int device_index);
  ~DeviceRange();
  DeviceRange(const DeviceRange &) = delete;
  DeviceRange &operator=(const DeviceRange &) = delete;

 private:
  DeviceRecord *record_ = nullptr;
  trn_queue_t queue_ = nullptr;  // set once the range counts as open (Recorder::open)
  bool nested_ = false;          // counted in the thread's depth
};

}  // namespace torch_trn
