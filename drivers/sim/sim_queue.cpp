#include "sim/sim_queue.hpp"

#include <algorithm>
#include <cstring>

#include "common/thread_name.hpp"
#include "sim/command_check.hpp"
#include "sim/semaphore.hpp"
#include "sim/sim_instance.hpp"
#include "sim/wait_primitives.hpp"

namespace trn::sim {

namespace {

// Trailing signals a buffer can have before their list allocates.
constexpr size_t kKeptSignals = 16;

}  // namespace

SimQueue::SimQueue(trn_hal_instance_t &instance, DeviceRuntime &device, const QueueShape &shape)
    : instance_(instance),
      device_(device),
      shape_(shape),
      capacity_(shape.capacity),
      chunks_(new std::atomic<Slot *>[(shape.capacity + kChunkSlots - 1) / kChunkSlots]),
      clock_ns_(device.time_ns()) {
  const uint64_t chunks = (capacity_ + kChunkSlots - 1) / kChunkSlots;
  for (uint64_t i = 0; i < chunks; ++i) chunks_[i].store(nullptr, std::memory_order_relaxed);
  tail_signals_.reserve(kKeptSignals);  // a steady state never allocates
  tail_refs_.reserve(kKeptSignals);
  worker_ = std::thread([this] { run(); });
  // "trn-q0.3": device 0, first physical core 3.
  common::name_thread(
      worker_, "trn-q" + std::to_string(device.index()) + "." + std::to_string(shape.first_core));
}

SimQueue::~SimQueue() {
  stop();
  const uint64_t chunks = (capacity_ + kChunkSlots - 1) / kChunkSlots;
  for (uint64_t i = 0; i < chunks; ++i) delete[] chunks_[i].load(std::memory_order_relaxed);
}

SimQueue::Slot *SimQueue::slot_for_producer(uint64_t position) {
  const uint64_t index = position % capacity_;
  std::atomic<Slot *> &chunk = chunks_[index / kChunkSlots];
  Slot *base = chunk.load(std::memory_order_relaxed);  // made only under producer_mu_
  if (base == nullptr) {
    // A chunk is made when its first slot is first reached: on the ring's first lap, where a
    // slot's position is its index.
    const uint64_t first = index / kChunkSlots * kChunkSlots;
    const uint64_t count = std::min<uint64_t>(kChunkSlots, capacity_ - first);
    base = new Slot[count];
    for (uint64_t i = 0; i < count; ++i) base[i].seq.store(first + i, std::memory_order_relaxed);
    chunk.store(base, std::memory_order_release);
  }
  return base + index % kChunkSlots;
}

SimQueue::Slot *SimQueue::published(uint64_t position, std::memory_order order) {
  const uint64_t index = position % capacity_;
  Slot *base = chunks_[index / kChunkSlots].load(order);
  if (base == nullptr) return nullptr;
  Slot *slot = base + index % kChunkSlots;
  return slot->seq.load(order) == position + 1 ? slot : nullptr;
}

bool SimQueue::pin(const std::shared_ptr<SemCore> &core, bool signals) {
  for (uint32_t i = 0; i < kPins; ++i) {
    std::shared_ptr<SemCore> &pinned = pins_[i];
    if (pinned == nullptr) {
      if (core->shared()) return false;
      pinned = core;  // the one reference count this semaphore's commands move here
    } else if (pinned.get() != core.get()) {
      continue;
    }
    // A waiter busy running another queue's buffers keeps the feeder as it is: try next time.
    if (signals && !feeds_[i]) feeds_[i] = pinned->set_feeder(this);
    return true;
  }
  return false;
}

trn_result_t SimQueue::submit(const trn_hal_submission_t &submission, std::string *why) {
  {
    std::unique_lock memo(submit_memo_mu_, std::try_to_lock);
    if (trn_result_t r = check_submission(instance_, device_, shape_.kind, submission, why,
                                          memo.owns_lock() ? &submit_memo_ : nullptr);
        r != TRN_SUCCESS)
      return r;
  }
  {
    std::lock_guard lock(producer_mu_);
    if (stop_.load(std::memory_order_acquire) != 0) {
      *why = "the queue is being destroyed";
      return TRN_ERROR_INVALID_HANDLE;
    }
    const uint64_t position = head_;
    // The ring is full only if the count of retired buffers seen last says so and a fresh look
    // agrees: a look is a read of the line the runner writes on every buffer, which a steady
    // stream of submissions then makes once per lap rather than once per buffer.
    if (position - retired_seen_ >= capacity_)
      retired_seen_ = retired_.load(std::memory_order_acquire);
    if (position - retired_seen_ >= capacity_) {
      *why = "the queue has " + std::to_string(shape_.capacity) +
             " buffers in flight (its capacity): wait for some to retire, then submit again";
      return TRN_ERROR_QUEUE_FULL;
    }
    // The slot is ours until published: fill it in place (its storage is kept lap to lap).
    Slot &slot = *slot_for_producer(position);
    const uint32_t count = submission.command_count;
    slot.refs.clear();  // a fill that failed half-way may have left some
    if (count > kInlineCommands) {
      slot.more.assign(submission.commands, submission.commands + count);
      slot.more_sems.resize(count);
    }
    slot.count = count;
    trn_hal_command_t *commands = slot.commands();
    if (count <= kInlineCommands && count > 0)
      std::memcpy(commands, submission.commands, count * sizeof(trn_hal_command_t));
    // Each semaphore command's object, held by the queue (pinned) or by the buffer: a waiter
    // that saw a signal's value may let go of its hold while the signal is still returning.
    SemCore **sems = slot.sems();
    for (uint32_t i = 0; i < count; ++i) {
      const trn_hal_command_t &c = commands[i];
      const bool sem = c.kind == TRN_HAL_COMMAND_SEM_WAIT || c.kind == TRN_HAL_COMMAND_SEM_SIGNAL;
      SemCore *core = sem ? c.u.sem.sem->core.get() : nullptr;
      // Written only when it changes: a line the worker reads stays in its cache lap to lap.
      if (sems[i] != core) sems[i] = core;
      if (sem && !pin(c.u.sem.sem->core, c.kind == TRN_HAL_COMMAND_SEM_SIGNAL))
        slot.refs.push_back(c.u.sem.sem->core);
    }
    size_t arg_total = 0;
    for (uint32_t i = 0; i < count; ++i)
      if (commands[i].kind == TRN_HAL_COMMAND_LAUNCH) arg_total += commands[i].u.launch.arg_count;
    slot.args.clear();
    if (arg_total > 0) {
      slot.args.reserve(arg_total);  // no reallocation below: the pointers stay valid
      for (uint32_t i = 0; i < count; ++i) {
        trn_hal_command_t &c = commands[i];
        if (c.kind != TRN_HAL_COMMAND_LAUNCH) continue;
        const size_t at = slot.args.size();
        slot.args.insert(slot.args.end(), c.u.launch.args, c.u.launch.args + c.u.launch.arg_count);
        c.u.launch.args = slot.args.data() + at;
      }
    }
    slot.label = submission.label;
    slot.tag = submission.tag;
    // Sequentially consistent with the worker's going to sleep: either it sees the buffer, or
    // we see it asleep and ring.
    slot.seq.store(position + 1, std::memory_order_seq_cst);
    head_ = position + 1;
  }
  if (asleep_.load(std::memory_order_seq_cst) == kAsleep) ring_doorbell();
  // The submitter stalls with its command visible, as a host thread the scheduler preempted.
  if (instance_.config.jitter_ns != 0) jitter(instance_.config.jitter_ns);
  return TRN_SUCCESS;
}

void SimQueue::ring_doorbell() {
  doorbell_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(&doorbell_, 1, FutexScope::process_private);
}

void SimQueue::status(trn_hal_queue_status_t *out) {
  std::lock_guard lock(producer_mu_);
  out->submitted = head_;
  out->retired = retired_.load(std::memory_order_acquire);
  std::lock_guard faults(fault_mu_);
  out->fault = fault_;
}

trn_result_t SimQueue::reset(std::string *why) {
  std::lock_guard lock(producer_mu_);
  if (!in_error_.load(std::memory_order_acquire)) return TRN_SUCCESS;
  const uint64_t retired = retired_.load(std::memory_order_acquire);
  if (retired < head_) {
    *why = std::to_string(head_ - retired) +
           " buffers after the fault have not retired yet (cancelled buffers drain in "
           "microseconds): wait until queue_status reports them retired, then reset again";
    return TRN_ERROR_HANDLE_IN_USE;
  }
  {
    std::lock_guard faults(fault_mu_);
    fault_ = trn_hal_queue_fault_t{};
  }
  in_error_.store(false, std::memory_order_release);
  return TRN_SUCCESS;
}

trn_result_t SimQueue::set_priority(uint32_t priority, std::string *why) {
  if (priority > TRN_HAL_QUEUE_PRIORITY_HIGH) {
    *why = "queue priority " + std::to_string(priority) +
           " is not TRN_HAL_QUEUE_PRIORITY_LOW, _NORMAL or _HIGH";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  priority_.store(priority, std::memory_order_relaxed);
  return TRN_SUCCESS;
}

void SimQueue::stop() {
  std::lock_guard guard(stop_mu_);
  if (!worker_.joinable()) return;
  {
    std::lock_guard lock(producer_mu_);
    stop_.store(1, std::memory_order_seq_cst);
  }
  yield_.fetch_or(kYieldStopping, std::memory_order_seq_cst);
  ring_doorbell();
  // No waiter may come to run the ring once it is gone; one running it now sees the stop.
  for (uint32_t i = 0; i < kPins; ++i)
    if (feeds_[i]) pins_[i]->clear_feeder(this);
  worker_.join();
}

}  // namespace trn::sim
