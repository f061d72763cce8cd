// The order of operations: each one after the previous (on whichever queue), its record until
// it completes, the closing agreement's gate, and waiting for everything enqueued.

#include <algorithm>

#include "comm/communicator.hpp"
#include "comm/communicator_parts.hpp"
#include "comm/error.hpp"
#include "common/clock.hpp"

namespace trn::comm {

std::unique_lock<std::mutex> Comm::begin_operation() {
  std::unique_lock lock(op_mutex_);
  if (closed_)
    fail(TRN_ERROR_INVALID_HANDLE,
         "the communicator was destroyed or aborted by another call while this one began");
  if (std::string why = error(); !why.empty())
    fail(TRN_ERROR_COLLECTIVE,
         "the communicator failed: " + why + " (destroy it and make a new one)");
  return lock;
}

std::string OpName::text() const {
  std::string out = kind;
  if (data) out += " of " + std::to_string(count) + " x " + trn_dtype_name(dtype);
  return out + " #" + std::to_string(number);
}

void Comm::open_operation(trn_queue_t queue, const trn_sync_t *sync) {
  op_sequence_ = 0;
  gate_sequence_ = 0;
  in_place_.clear();  // an operation that failed part-way may have left some
  mapped_.clear();
  trn_sem_t timeline = nullptr;
  check(trn_queue_get_semaphore(queue, &timeline), "queue");
  op_queue_sem_ = timeline;
  std::vector<trn_sem_point_t> waits;
  if (sync) {
    if (sync->wait_count && !sync->waits) fail(TRN_ERROR_NULL_POINTER, "sync->waits is NULL");
    if (sync->signal_count && !sync->signals) fail(TRN_ERROR_NULL_POINTER, "sync->signals is NULL");
    waits.assign(sync->waits, sync->waits + sync->wait_count);
    for (uint32_t i = 0; i < sync->signal_count; ++i) {
      uint64_t value = 0;
      const trn_result_t r = trn_sem_query(sync->signals[i].sem, &value);
      if (r != TRN_SUCCESS && r != TRN_ERROR_CANCELLED)
        check(r, "sync->signals[" + std::to_string(i) + "]");
    }
  }
  // The previous operation of this communicator on another queue comes first: peers count
  // chunks in operation order. A queue destroyed since has nothing left to wait for (see
  // synchronize).
  if (last_queue_sem_ && last_queue_sem_ != timeline) {
    uint64_t done = 0;
    const trn_result_t r = trn_sem_query(last_queue_sem_, &done);
    if (r != TRN_ERROR_INVALID_HANDLE && done < last_sequence_)
      waits.push_back({last_queue_sem_, last_sequence_});
  }
  if (waits.empty()) return;
  const trn_sync_t before{waits.data(), static_cast<uint32_t>(waits.size()), nullptr, 0};
  // Through submit: a full queue is waited out, as for the operation's other commands.
  submit(queue, [&] { return trn_queue_barrier(queue, &before, &op_sequence_); },
         {"ordering the operation (sync->waits)"});
}

uint64_t Comm::close_operation(trn_queue_t queue, const OpName &name, const trn_sync_t *sync,
                               const PeerList &peers_in, const PeerList &peers_out) {
  // The operation ends with its last command, unless the caller's semaphores are to be signalled
  // (or that command's number is not known): then with a barrier that does.
  uint64_t sequence = op_sequence_;
  if (sequence == 0 || (sync && sync->signal_count > 0)) {
    const trn_sync_t after{nullptr, 0, sync ? sync->signals : nullptr,
                           sync ? sync->signal_count : 0};
    submit(queue, [&] { return trn_queue_barrier(queue, &after, &sequence); },
           {"completing the operation (sync->signals)"});
  }
  OpRecord op;
  op.name = name;
  op.queue_sem = op_queue_sem_;  // open_operation's
  op.last_sequence = sequence;
  op.deadline_ns = 0;  // the monitor's first look sets it (check_deadlines)
  for (uint32_t p : peers_in) op.expect_ready.push_back({p, links_[p].rx_count});
  for (uint32_t p : peers_out)
    if (links_[p].tx_count > slots_) op.expect_free.push_back({p, links_[p].tx_count - slots_});
  last_queue_sem_ = op.queue_sem;
  last_sequence_ = sequence;
  std::lock_guard lock(state_mutex_);
  // The monitor drops finished records only every few milliseconds: thousands of small
  // operations come in between, and dropping them here keeps the buffer from growing for them.
  if (records_.full()) drop_finished_locked();
  if (records_.full()) records_.set_capacity(std::max<size_t>(16, records_.capacity() * 2));
  records_.push_back(std::move(op));
  return sequence;
}

void Comm::open_gate(const CallSignature &call) {
  if (gate_sequence_ == 0) return;  // none shut (one rank, a send or a receive)
  const uint64_t number = gate_value_;
  if (calls_) {
    if (number > calls_->entries()) wait_for_gate(number - calls_->entries());
    const CallTable::Outcome outcome = calls_->publish(number, call);
    if (outcome.verdict == CallTable::Verdict::differs) {
      const std::string why =
          "collective #" + std::to_string(number) + " differs between ranks: rank " +
          std::to_string(rank_) + " called " + call.text() + ", rank " +
          std::to_string(outcome.other) + " called " + outcome.theirs.text() +
          " (every rank must make the same collective calls in the same order, with the same "
          "count, dtype, op and root)";
      fail_comm(why, true);
      fail(TRN_ERROR_COLLECTIVE, why);
    }
    if (outcome.verdict == CallTable::Verdict::pending) {
      gate_sequence_ = 0;  // the last rank to make the call opens the gate
      return;
    }
  }
  std::lock_guard lock(resources_mutex_);  // against fail_semaphores: a failed gate stays failed
  gate_sequence_ = 0;
  if (released_ || failed_.load(std::memory_order_acquire)) return;
  // Two ranks that made the call at once may both see every rank's: the gate opens once.
  uint64_t value = 0;
  if (trn_sem_query(gate_, &value) == TRN_SUCCESS && value >= number) return;
  check(trn_sem_signal(gate_, number), "opening the collective's gate");
}

void Comm::wait_for_gate(uint64_t value) {
  const trn_result_t r = trn_sem_wait(gate_, value, timeout_ns_);
  if (r == TRN_SUCCESS) return;
  if (std::string why = error(); !why.empty()) fail(TRN_ERROR_COLLECTIVE, why);
  fail(TRN_ERROR_COLLECTIVE, "collective #" + std::to_string(value + calls_->entries()) +
                                 " on rank " + std::to_string(rank_) + " is " +
                                 std::to_string(calls_->entries()) +
                                 " collectives ahead of collective #" + std::to_string(value) +
                                 ", which not every rank made within " +
                                 duration_text(timeout_ns_) + " (" + trn_last_error() + ")");
}

trn_result_t Comm::synchronize(uint64_t timeout_ns) {
  trn_sem_t sem = nullptr;
  uint64_t sequence = 0;
  {
    std::lock_guard lock(op_mutex_);
    sem = last_queue_sem_;
    sequence = last_sequence_;
  }
  // The clock is read only once a slice ran out (a read costs as much as a small hand-off, and
  // most waits end within their first slice): that slice began no later than a slice before.
  uint64_t deadline = 0, slice = std::min<uint64_t>(kSliceNs, timeout_ns);
  auto deadline_from = [&](uint64_t now) {
    if (deadline == 0) deadline = common::deadline_after(timeout_ns, now > slice ? now - slice : 0);
    return deadline;
  };
  for (;;) {
    if (std::string why = error(); !why.empty()) fail(TRN_ERROR_COLLECTIVE, why);
    if (!sem) return TRN_SUCCESS;
    const trn_result_t r = trn_sem_wait(sem, sequence, slice);
    // A queue destroyed since (its semaphore with it) ran or cancelled its commands: nothing is
    // left to wait for, and a cancellation reaches the peers through the chunks' semaphores (as
    // check_deadlines reasons). Not this rank's failure: a rank may end its queue first.
    if (r == TRN_SUCCESS || r == TRN_ERROR_INVALID_HANDLE) return TRN_SUCCESS;
    const uint64_t now = now_ns();
    if (r == TRN_TIMEOUT) {
      if (now >= deadline_from(now)) return TRN_TIMEOUT;
      slice = std::min<uint64_t>(kSliceNs, deadline - now);
      continue;
    }
    // The queue failed (or went away): the communicator is out of step with its peers.
    fail_naming_cause(std::string("rank ") + std::to_string(rank_) +
                          ": the queue of its last operation failed (" + trn_last_error() + ")",
                      deadline_from(now));
  }
}

}  // namespace trn::comm
