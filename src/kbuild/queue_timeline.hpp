// The builder's estimate of when one DMA queue is busy. Transfers are planned in program order,
// but a queue serves them in the order they are issued in time: a load issued early by the sync
// engine goes before a store that gpsimd issues later, even if the store was written first. So
// the estimate keeps the queue's busy intervals and puts a transfer in the first gap after it is
// issued.
#pragma once

#include <map>

namespace trn::kbuild::detail {

class QueueTimeline {
 public:
  // When a transfer of `duration` issued at `issued` would start.
  double start_time(double issued, double duration) const;
  void reserve(double start, double end);
  // Intervals that end before `t` can no longer matter (nothing is issued before then).
  void forget_before(double t);

 private:
  std::map<double, double> busy_;  // start -> end, disjoint
};

}  // namespace trn::kbuild::detail
