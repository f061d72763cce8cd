#include "kbuild/queue_timeline.hpp"

#include <algorithm>

namespace trn::kbuild::detail {

double QueueTimeline::start_time(double issued, double duration) const {
  double at = issued;
  // The interval that may contain `issued`, then the gaps after it.
  auto it = busy_.upper_bound(issued);
  if (it != busy_.begin()) {
    auto prev = std::prev(it);
    at = std::max(at, prev->second);
  }
  for (; it != busy_.end(); ++it) {
    if (it->first >= at + duration) break;
    at = std::max(at, it->second);
  }
  return at;
}

void QueueTimeline::reserve(double start, double end) {
  if (end > start) busy_.emplace(start, end);
}

void QueueTimeline::forget_before(double t) {
  while (!busy_.empty() && busy_.begin()->second < t) busy_.erase(busy_.begin());
}

}  // namespace trn::kbuild::detail
