#include "sim/core_arbiter.hpp"

#include <algorithm>
#include <chrono>

namespace trn::sim {

namespace {

// How often a waiter looks at its queue's stop flag: a queue being destroyed behind a long
// launch of another queue gives up within this.
constexpr auto kStopCheck = std::chrono::milliseconds(2);

}  // namespace

bool CoreArbiter::is_next(uint32_t priority, uint64_t ticket) const {
  for (uint32_t p = kPriorities; p-- > 0;)
    if (!waiting_[p].empty()) return p == priority && waiting_[p].front() == ticket;
  return false;
}

bool CoreArbiter::acquire(uint32_t priority, const std::atomic<uint32_t> &stop,
                          uint64_t *clock_ns) {
  priority = std::min(priority, kPriorities - 1);
  std::unique_lock lock(mu_);
  const uint64_t ticket = next_ticket_++;
  std::deque<uint64_t> &line = waiting_[priority];
  line.push_back(ticket);
  while (busy_ || !is_next(priority, ticket)) {
    if (stop.load(std::memory_order_acquire)) {
      line.erase(std::find(line.begin(), line.end(), ticket));
      lock.unlock();
      free_.notify_all();  // the waiter behind it may be next now
      return false;
    }
    free_.wait_for(lock, kStopCheck);
  }
  line.pop_front();
  busy_ = true;
  *clock_ns = std::max(*clock_ns, free_at_ns_);
  return true;
}

void CoreArbiter::release(uint64_t clock_ns) {
  {
    std::lock_guard lock(mu_);
    busy_ = false;
    free_at_ns_ = std::max(free_at_ns_, clock_ns);
  }
  free_.notify_all();
}

}  // namespace trn::sim
