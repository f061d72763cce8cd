// Who runs a queue's ring: its worker thread, or a host thread waiting for the queue's timeline
// (assist), and how the ring passes between them (sim_queue.hpp).
#include <algorithm>

#include "isa/dtype.hpp"
#include "sim/semaphore.hpp"
#include "sim/sim_instance.hpp"
#include "sim/sim_queue.hpp"
#include "sim/wait_primitives.hpp"

namespace trn::sim {

namespace {

// An idle worker sleeps in slices this long (a missed doorbell costs at most one).
constexpr uint64_t kIdleSliceNs = 100'000'000;
// While host threads run the ring (assist), submitters do not ring the doorbell (each ring is a
// system call and a wasted wake-up: the waiter runs the buffer itself); the worker looks for
// buffers nobody waits for after each nap (SimQueue::kLentSliceNs) instead, and submitters ring
// again once it finds no helper came since its last look. Each look that finds nothing (the
// waiters ran it all) doubles the next nap, up to kLongestNapNs: each look is a context switch,
// which several ranks on a small machine pay every few operations. A look that finds a buffer
// nobody ran makes naps short again.
constexpr uint64_t kLongestNapNs = 8 * SimQueue::kLentSliceNs;

}  // namespace

void SimQueue::run() {
  // After handing the ring to a waiting host thread the worker sleeps at once: its spinning
  // would take a core from that thread, and that thread wakes it for anything it leaves.
  for (bool spin = true; await_work(spin);) {
    spin = drain(nullptr) == Drained::empty;
    token_.store(0, std::memory_order_seq_cst);
  }
}

bool SimQueue::claim() {
  // A helper waiting for the token gets it, unless stopping (the worker cancels what is left).
  const uint32_t yield = yield_.load(std::memory_order_seq_cst);
  if ((yield & kYieldToHelper) != 0 && (yield & kYieldStopping) == 0) return false;
  if (published(tail_.load(std::memory_order_relaxed), std::memory_order_seq_cst) == nullptr)
    return false;
  if (token_.exchange(1, std::memory_order_acquire) != 0) return false;
  // A helper may have run that buffer in between.
  if (published(tail_.load(std::memory_order_relaxed), std::memory_order_acquire) != nullptr)
    return true;
  token_.store(0, std::memory_order_seq_cst);
  return false;
}

bool SimQueue::await_work(bool spin_first) {
  // Spin for the budget (a submission is then picked up in well under a microsecond), then
  // sleep until the doorbell rings, in bounded slices. Submissions are refused once stopping,
  // so once the token is free after the stop, nothing published means nothing is left.
  auto finished = [&] {
    return stop_.load(std::memory_order_acquire) != 0 &&
           token_.load(std::memory_order_seq_cst) == 0 &&
           published(tail_.load(std::memory_order_relaxed), std::memory_order_acquire) == nullptr;
  };
  const uint64_t budget = spin_first ? instance_.config.spin_ns : 0;
  for (SpinPhase spin(monotonic_ns(), budget);;) {
    if (claim()) return true;
    if (finished()) return false;
    // A helper has the ring: it wakes the worker if it leaves work behind.
    if ((yield_.load(std::memory_order_relaxed) & kYieldToHelper) != 0 || !spin.next()) break;
  }
  uint64_t assists = assists_.load(std::memory_order_relaxed);
  for (;;) {
    // Lent (waiters run the ring): naps, which submitters need not ring for.
    const bool lent = lent_.load(std::memory_order_seq_cst);
    if (!lent) nap_ns_ = kLentSliceNs;
    asleep_.store(lent ? kNapping : kAsleep, std::memory_order_seq_cst);
    const uint32_t seen = doorbell_.load(std::memory_order_seq_cst);
    // Sequentially consistent with submitters and leaving helpers: either they see us asleep
    // and ring, or we see their buffer (or the free token) here.
    if (claim()) {
      asleep_.store(kAwake, std::memory_order_relaxed);
      return true;
    }
    bool rung = false;
    if (!finished()) {
      futex_wait(&doorbell_, seen, lent ? nap_ns_ : kIdleSliceNs, FutexScope::process_private);
      rung = doorbell_.load(std::memory_order_relaxed) != seen;
      const uint64_t now_assists = assists_.load(std::memory_order_relaxed);
      if (lent && now_assists == assists) lent_.store(false, std::memory_order_seq_cst);
      assists = now_assists;
    }
    asleep_.store(kAwake, std::memory_order_relaxed);
    if (claim()) {
      // A nap that ran its course and found a buffer: nobody waited for it, and it waited.
      if (lent && !rung) nap_ns_ = kLentSliceNs;
      return true;
    }
    if (lent && !rung) nap_ns_ = std::min(nap_ns_ * 2, kLongestNapNs);
    if (finished()) return false;
  }
}

bool SimQueue::helper_may_run(const Slot &buffer, bool at_once) {
  const trn_hal_command_t *commands = buffer.commands();
  SemCore *const *sems = buffer.sems();
  bool called = false;
  for (size_t i = 0; i < buffer.count; ++i) {
    const trn_hal_command_t &c = commands[i];
    if (!helper_may_run(c)) return false;
    called = called || c.kind == TRN_HAL_COMMAND_HOST_CALL;
    // The ring changes hands only at waits: one after a host call would let a call's pair (the
    // runtime's hold on memory and its release) run on two threads.
    if (c.kind == TRN_HAL_COMMAND_SEM_WAIT &&
        (called || (at_once && !sems[i]->reached(c.u.sem.value))))
      return false;
  }
  return true;
}

SimQueue::Drained SimQueue::drain(const Errand *errand, uint64_t clock_ns) {
  // Buffers a helper runs past its errand: the ones that follow at once (a timestamp after the
  // awaited work, the bookkeeping after it), so that the worker need not wake for them.
  constexpr uint32_t kAfterErrand = 8;
  uint32_t after = 0;
  RunClock clock = clock_ns != 0 ? RunClock(clock_ns) : RunClock();
  for (;;) {
    if (errand) {
      if (errand->done()) {
        if (cursor_.active || after++ == kAfterErrand) return Drained::yielded;
        const Slot *next =
            published(tail_.load(std::memory_order_relaxed), std::memory_order_acquire);
        if (next == nullptr || !helper_may_run(*next, true)) return Drained::yielded;
      } else if (clock.now() >= errand->deadline_ns) {
        return Drained::paused;
      }
    }
    const uint64_t position = tail_.load(std::memory_order_relaxed);
    Slot *slot = published(position, std::memory_order_acquire);
    if (slot == nullptr) return Drained::empty;
    // The worker hands a waiting helper the next buffer it may run (with nothing left, it goes
    // idle as usual: the helper's value was in what it just ran).
    if (!errand && !cursor_.active &&
        (yield_.load(std::memory_order_acquire) & kYieldToHelper) != 0 &&
        stop_.load(std::memory_order_acquire) == 0 && helper_may_run(*slot, false))
      return Drained::yielded;
    // A helper takes whole buffers it may run (a failure abandons the rest of a buffer, calling
    // its host calls: an application's run on the worker only).
    if (errand && !helper_may_run(*slot, false)) return Drained::paused;
    try {
      if (!process(*slot, errand, clock)) return Drained::paused;
    } catch (const std::exception &) {
      // Out of memory building a reason: the buffer retires all the same, the runner goes on.
      cursor_.active = false;
    }
    if (tail_.load(std::memory_order_relaxed) == position) retire(*slot);
    tail_refs_.clear();  // empty unless something was thrown
  }
}

bool SimQueue::Errand::done() const {
  return sem->value() >= value;
}

bool SimQueue::assist(SemCore &sem, uint64_t value, uint64_t start, uint64_t deadline_ns) {
  const uint64_t budget = instance_.config.spin_ns;
  if (budget == 0) return sem.value() >= value;  // TRN_SPIN_NS=0: sleep at once, as documented
  bool expected = false;
  if (!helping_.compare_exchange_strong(expected, true, std::memory_order_acquire)) return false;
  const Errand errand{&sem, value, deadline_ns};
  // A worker that is running gets a moment to finish first (an empty buffer completes in a few
  // hundred nanoseconds): taking the ring from it would put it to sleep for nothing. A sleeping
  // one would take longer to wake than the whole buffer takes here.
  // The clock only every few checks: a read costs as much as an empty buffer's hand-off.
  const bool worker_asleep = asleep_.load(std::memory_order_relaxed) != kAwake;
  for (uint32_t check = 1; !worker_asleep; ++check) {
    if (errand.done()) {
      helping_.store(false, std::memory_order_release);
      return true;
    }
    if (check % 16 == 0 && monotonic_ns() - start >= kAssistAfterNs) break;
    cpu_relax();
  }
  yield_.fetch_or(kYieldToHelper, std::memory_order_seq_cst);
  bool reached = false, ran = false;
  // The first drain, at once, goes on from the wait's own clock read (no second read for the
  // first buffer's busy time); a later one after spinning reads afresh.
  bool first = true;
  // Until the token is free (the worker lets go at its next wait or buffer), for the spin budget.
  for (SpinPhase spin(start, std::min(budget, deadline_ns > start ? deadline_ns - start : 0));;
       first = false) {
    if (errand.done()) {
      reached = true;
      break;
    }
    if (stop_.load(std::memory_order_acquire) != 0) break;
    if (token_.load(std::memory_order_relaxed) == 0 &&
        token_.exchange(1, std::memory_order_acquire) == 0) {
      const uint64_t position = tail_.load(std::memory_order_relaxed);
      const size_t index = cursor_.index;
      const Drained why = drain(&errand, first && worker_asleep ? start : 0);
      // Only a helper that ran something keeps submitters from ringing (a kernel launch, say, is
      // the worker's: the next one should wake it at once).
      ran = ran || tail_.load(std::memory_order_relaxed) != position || cursor_.index != index;
      token_.store(0, std::memory_order_seq_cst);
      if (why == Drained::yielded) {
        reached = true;
        break;
      }
      // Paused: past a helper's reach, or at the deadline. Empty: the value is for buffers not
      // submitted yet (or another signaller): wait as usual.
      if (why == Drained::paused || errand.done()) {
        reached = errand.done();
        break;
      }
    }
    if (!spin.next()) break;
  }
  if (ran) {
    assists_.fetch_add(1, std::memory_order_relaxed);
    lent_.store(true, std::memory_order_seq_cst);
  }
  yield_.fetch_and(~kYieldToHelper, std::memory_order_seq_cst);
  helping_.store(false, std::memory_order_release);
  // The worker sleeps while a helper waits: wake it for what is left. Sequentially consistent
  // with its going to sleep (await_work).
  if (asleep_.load(std::memory_order_seq_cst) != kAwake &&
      published(tail_.load(std::memory_order_relaxed), std::memory_order_seq_cst) != nullptr)
    ring_doorbell();
  return reached;
}

bool SimQueue::helper_may_run(const trn_hal_command_t &c) {
  switch (c.kind) {
    case TRN_HAL_COMMAND_COPY: return c.u.copy.bytes <= kAssistBytes;
    case TRN_HAL_COMMAND_MEMSET: return c.u.memset.bytes <= kAssistBytes;
    case TRN_HAL_COMMAND_REDUCE:
      return uint64_t{c.u.reduce.count} *
                 isa::dtype_size(static_cast<isa::DType>(c.u.reduce.dtype)) <=
             kAssistBytes;
    case TRN_HAL_COMMAND_SEM_WAIT:
    case TRN_HAL_COMMAND_SEM_SIGNAL:
    case TRN_HAL_COMMAND_TIMESTAMP: return true;
    case TRN_HAL_COMMAND_HOST_CALL: return (c.u.host_call.flags & TRN_HAL_HOST_CALL_BRIEF) != 0;
    // Kernels run for as long as they run and files wait on storage: the worker's.
    default: return false;
  }
}

trn_result_t SimQueue::wait_command(SemCore &sem, uint64_t value, const Errand *errand) {
  if (errand == nullptr) {
    // Only a buffer a helper may run (the one at tail_) is handed over, at a wait that blocks.
    const Slot *buffer =
        published(tail_.load(std::memory_order_relaxed), std::memory_order_acquire);
    const bool handed = !sem.reached(value) && buffer != nullptr && helper_may_run(*buffer, false);
    const trn_result_t r = sem.wait(value, UINT64_MAX, handed ? &yield_ : &stop_);
    // Cancelled without a failure or a stop: a helper wants the token; resume here later.
    if (r == TRN_ERROR_CANCELLED && !sem.failed() && stop_.load(std::memory_order_acquire) == 0)
      return TRN_TIMEOUT;
    return r;
  }
  // A helper waits in slices, looking at its own errand between them (and at the clock only
  // when it has to wait: a read costs as much as the rest of a small command).
  if (sem.reached(value)) return TRN_SUCCESS;
  constexpr uint64_t kHelperSliceNs = 1'000'000;
  for (;;) {
    const uint64_t now = monotonic_ns();
    if (errand->done() || now >= errand->deadline_ns) return TRN_TIMEOUT;
    const trn_result_t r = sem.wait(value, std::min(errand->deadline_ns - now, kHelperSliceNs),
                                    &stop_, SpinStyle::yielding, &helper_yields_);
    if (r != TRN_TIMEOUT) return r;
  }
}

}  // namespace trn::sim
