// How a communicator fails: the monitor thread that turns a peer's death, an abort or a timeout
// into the communicator's failure, and the failed semaphores that end every waiting command.
#include <poll.h>

#include <algorithm>
#include <cstring>

#include "comm/communicator.hpp"
#include "comm/communicator_parts.hpp"
#include "comm/error.hpp"
#include "common/clock.hpp"

namespace trn::comm {

void Comm::fail_comm(const std::string &why, bool tell_others, uint64_t operation) {
  {
    std::lock_guard lock(state_mutex_);
    if (!error_.empty()) return;
    error_ = why;
    failed_.store(true, std::memory_order_release);
  }
  state_cv_.notify_all();
  fail_semaphores(why);
  if (tell_others) {
    try {
      bootstrap_.send(kAbort, abort_payload(operation, why), now_ns() + 1'000'000'000ull);
    } catch (...) {
      // The others learn it from their own timeouts (or the failed semaphores).
    }
  }
}

void Comm::fail_semaphores(const std::string &why) {
  // Out of memory for the message, the semaphores still fail (every waiting command with them).
  std::string reason;
  try {
    reason = "collective failed: " + why;
  } catch (const std::bad_alloc &) {
  }
  const char *text = reason.empty() ? "collective failed (out of host memory)" : reason.c_str();
  std::lock_guard lock(resources_mutex_);
  if (released_) return;
  if (proxy_) {
    try {
      proxy_->mark_failed(text);
    } catch (const std::bad_alloc &) {
    }
  }
  for (PeerLink &link : links_)
    for (trn_sem_t sem : {link.rx_ready, link.rx_free, link.tx_ready, link.tx_free, link.tx_sent})
      if (sem) trn_sem_fail(sem, text);
  // A gate still shut stays shut: the operation's closing signal is cancelled, never sent.
  if (gate_) trn_sem_fail(gate_, text);
}

void Comm::monitor() {
  bool connected = true;
  // When the connection to the service dropped with operations in flight: the service's process
  // may have ended cleanly once its own part was done (rank 0 exits while this rank's last
  // operation still completes), which is no failure unless they do not complete soon.
  uint64_t lost_at = 0;
  while (!stop_.load()) {
    pollfd p[2] = {{connected ? bootstrap_.fd() : -1, POLLIN, 0}, {stop_event_.get(), POLLIN, 0}};
    const int ready = poll(p, 2, 20);
    if (ready > 0 && p[0].revents && connected && !stop_.load()) {
      Message message;
      bool open = false;
      try {
        open = receive_message(bootstrap_.fd(), &message, now_ns() + 5'000'000'000ull);
      } catch (const CommError &) {
      }
      if (!open) {
        connected = false;
        lost_at = now_ns();
      } else if (message.type == kStatus) {
        std::vector<uint8_t> payload(8);
        const uint64_t started = operations_.load();
        std::memcpy(payload.data(), &started, 8);
        try {
          bootstrap_.send(kStatus, payload, now_ns() + 1'000'000'000ull);
        } catch (const CommError &) {
        }
      } else if (message.type == kFailed) {
        fail_comm(std::string(message.payload.begin(), message.payload.end()), false);
      } else if (message.type == kGathered) {
        try {
          auto all = unpack_blobs(message.payload);
          std::lock_guard lock(state_mutex_);
          gathered_ = std::move(all);
        } catch (const CommError &e) {
          fail_comm(e.what(), true);
        }
        state_cv_.notify_all();
      }
    }
    if (lost_at && !stop_.load()) {
      bool in_flight = false;
      {
        std::lock_guard lock(state_mutex_);
        in_flight = drop_finished_locked() != TRN_SUCCESS || !records_.empty();
      }
      if (!in_flight) {
        lost_at = 0;  // nothing was lost; later operations still have their timeout
      } else if (now_ns() >= lost_at + kReasonWaitNs) {
        lost_at = 0;
        fail_comm("rank " + std::to_string(rank_) +
                      " lost its connection to the rendezvous host (the process that made the "
                      "unique id, pid " +
                      std::to_string(ranks_.empty() ? 0 : ranks_[0].pid) +
                      " for rank 0) with operations in flight: it died or ended before this rank",
                  false);
      }
    }
    check_deadlines();
  }
}

void Comm::check_deadlines() {
  if (abort_wait_until_) {
    // No answer from the service in time: fail with this rank's own account.
    if (now_ns() >= abort_wait_until_) fail_comm(abort_reason_, false);
    return;
  }
  std::string why;
  uint64_t operation = 0;
  {
    std::lock_guard lock(state_mutex_);
    if (!error_.empty()) return;
    if (drop_finished_locked() == TRN_ERROR_CANCELLED) {
      why = records_.front().name.text() + " did not complete: its queue failed (" +
            trn_last_error() + ")";
    } else if (!records_.empty()) {
      const uint64_t now = now_ns();
      // Operations enqueued since the last look get their deadlines now: late by at most one look
      // of this thread (every 20 ms or sooner), never early, and no clock read on the enqueue path.
      for (auto it = records_.rbegin(); it != records_.rend() && it->deadline_ns == 0; ++it)
        it->deadline_ns = common::deadline_after(timeout_ns_, now);
      const OpRecord &op = records_.front();
      if (now < op.deadline_ns) return;
      std::vector<uint32_t> silent, stalled;
      for (auto [peer, want] : op.expect_ready) {
        uint64_t have = 0;
        trn_sem_query(links_[peer].rx_ready, &have);
        if (have < want) silent.push_back(peer);
      }
      for (auto [peer, want] : op.expect_free) {
        uint64_t have = 0;
        trn_sem_query(links_[peer].tx_free, &have);
        if (have < want) stalled.push_back(peer);
      }
      auto names = [&](const std::vector<uint32_t> &ranks) {
        std::string text;
        for (uint32_t r2 : ranks)
          text += (text.empty() ? "" : ", ") + std::to_string(r2) + " (pid " +
                  std::to_string(ranks_[r2].pid) + ")";
        return text;
      };
      operation = op.name.number;
      why = op.name.text() + " on rank " + std::to_string(rank_) + " timed out after " +
            duration_text(timeout_ns_);
      if (!silent.empty()) why += ": no data from ranks " + names(silent);
      if (!stalled.empty())
        why += (silent.empty() ? ": " : "; ") + std::string("ranks ") + names(stalled) +
               " took no data";
      if (silent.empty() && stalled.empty())
        why += ": this rank's queue did not reach the operation (earlier work on it is stuck)";
      else
        why += " (they never joined the operation, or are stuck before it)";
    }
  }
  if (why.empty()) return;
  if (operation == 0) return fail_comm(why, true);
  // The service asks every rank how far it got and answers everyone, this rank too.
  try {
    bootstrap_.send(kAbort, abort_payload(operation, why), now_ns() + 1'000'000'000ull);
    abort_reason_ = why;
    abort_wait_until_ = now_ns() + 3'000'000'000ull;
  } catch (const CommError &) {
    fail_comm(why, false);
  }
}

trn_result_t Comm::drop_finished_locked() {
  while (!records_.empty()) {
    const OpRecord &op = records_.front();
    uint64_t value = 0;
    const trn_result_t r = trn_sem_query(op.queue_sem, &value);
    if (r == TRN_ERROR_CANCELLED) return r;
    if (r == TRN_SUCCESS && value < op.last_sequence) break;
    // Not TRN_SUCCESS: the queue was destroyed, which drains it first: the operation completed
    // (or its commands were cancelled, which the peers see in their own waits). Not a failure:
    // a rank may end its queue as soon as its last operation is done.
    records_.pop_front();
  }
  return TRN_SUCCESS;
}

void Comm::fail_naming_cause(const std::string &why, uint64_t deadline_ns) {
  // A peer that failed marks the shared semaphores at once, before the service's word of why
  // arrives: wait a moment for that word, which names the rank and the cause, but not past the
  // caller's deadline (trn_comm_synchronize(comm, 0) returns at once, with this rank's reason).
  const uint64_t now = now_ns();
  const uint64_t wait_ns =
      std::min<uint64_t>(kReasonWaitNs, deadline_ns > now ? deadline_ns - now : 0);
  {
    std::unique_lock lock(state_mutex_);
    state_cv_.wait_for(lock, std::chrono::nanoseconds(wait_ns), [&] { return !error_.empty(); });
  }
  fail_comm(why, true);
  fail(TRN_ERROR_COLLECTIVE, error());
}

}  // namespace trn::comm
