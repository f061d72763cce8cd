// The chunk protocol: submissions that wait out a full queue, chunks into a peer's staging slots
// (or sent in place by the proxy) and out of this rank's, and scratch memory freed in queue
// order.

#include <algorithm>

#include "comm/communicator.hpp"
#include "comm/communicator_parts.hpp"
#include "comm/error.hpp"
#include "common/clock.hpp"

namespace trn::comm {

std::string Comm::Doing::text() const {
  std::string out = what;
  if (towards) out += std::string(" ") + towards + " rank " + std::to_string(peer);
  return out;
}

void Comm::submit(trn_queue_t queue, FunctionRef<trn_result_t()> submit_fn, const Doing &doing) {
  uint64_t deadline = 0;
  trn_sem_t timeline = nullptr;
  for (;;) {
    const trn_result_t r = submit_fn();
    if (r == TRN_SUCCESS) return;
    if (r != TRN_ERROR_QUEUE_FULL) check(r, doing.text());
    if (!timeline) {
      deadline = common::deadline_after(timeout_ns_, now_ns());
      check(trn_queue_get_semaphore(queue, &timeline), "trn_queue_get_semaphore");
    }
    uint64_t done = 0;
    trn_sem_query(timeline, &done);
    // Everything before the shut gate ran, and the queue is full of what comes after it: no room
    // comes before the gate opens, and it opens only once this command is in.
    if (gate_sequence_ != 0 && done + 1 >= gate_sequence_)
      fail(TRN_ERROR_QUEUE_FULL,
           doing.text() +
               ": the queue is too small for the operation's closing commands, which wait for "
               "each other (give a queue that carries collectives a capacity of at least 16)");
    const trn_result_t w = trn_sem_wait(timeline, done + 1, kSliceNs);
    if (w != TRN_SUCCESS && w != TRN_TIMEOUT)
      fail_naming_cause(doing.text() + ": the queue failed (" + trn_last_error() + ")", deadline);
    if (std::string why = error(); !why.empty()) fail(TRN_ERROR_COLLECTIVE, why);
    if (now_ns() >= deadline)
      fail(TRN_ERROR_COLLECTIVE, doing.text() + ": the queue stayed full for " +
                                     duration_text(timeout_ns_) +
                                     " (its peers are not taking part?)");
  }
}

uint64_t Comm::slot_offset(uint32_t sender, uint64_t count) const {
  return (static_cast<uint64_t>(sender) * slots_ + (count - 1) % slots_) * chunk_bytes_;
}

std::byte *Comm::map_for_sending(trn_mem_t mem) {
  for (const auto &[m, p] : mapped_)
    if (m == mem) return p;
  // Mapping commits the whole allocation: not for one much larger than a transfer needs. Device
  // memory only: the device's mapping outlives its allocations, so a caller who frees a buffer
  // before its operation completes (its own error) sends stale bytes rather than crashing the
  // proxy; host memory may be unmapped by then.
  trn_mem_info_t info = TRN_MEM_INFO_INIT;
  void *p = nullptr;
  if (trn_mem_get_info(mem, &info) != TRN_SUCCESS || info.kind != TRN_POOL_KIND_DEVICE ||
      info.size > kInPlaceMaxAllocation || trn_mem_map(mem, &p) != TRN_SUCCESS)
    p = nullptr;
  mapped_.emplace_back(mem, static_cast<std::byte *>(p));
  return static_cast<std::byte *>(p);
}

void Comm::send_chunk(trn_queue_t queue, uint32_t peer, trn_mem_t source, uint64_t offset,
                      uint64_t bytes, bool gated) {
  PeerLink &link = links_[peer];
  const uint64_t k = link.tx_count + 1;
  if (link.remote && source && bytes >= in_place_min_bytes_) {
    if (std::byte *from = map_for_sending(source)) {
      // Ready once the queue reaches it (the commands before it wrote the bytes); the proxy
      // sends them from there, and the writes after it wait for the send (before_writing).
      const trn_sem_point_t ready{link.tx_ready, k};
      const trn_sync_t sync{nullptr, 0, &ready, 1};
      in_place_.push_back({source, offset, bytes, peer, k});
      proxy_->expect_send(peer, k, bytes, from + offset);
      submit(queue, [&] { return trn_queue_barrier(queue, &sync, &op_sequence_); },
             {"sending", "to", peer});
      link.tx_count = k;
      return;
    }
  }
  WaitList waits;
  if (k > slots_) waits.push_back({link.tx_free, k - slots_});
  if (gated) waits.push_back({gate_, gate_value_ + 1});
  const trn_sem_point_t signal{link.tx_ready, k};
  const trn_sync_t sync{waits.data(), static_cast<uint32_t>(waits.size()), &signal, 1};
  const uint64_t at = link.tx_base + (k - 1) % slots_ * chunk_bytes_;
  if (link.remote) proxy_->expect_send(peer, k, bytes);
  submit(queue,
         [&] {
           return bytes == 0 ? trn_queue_barrier(queue, &sync, &op_sequence_)
                             : trn_queue_copy(queue, link.tx_staging, at, source, offset, bytes,
                                              &sync, &op_sequence_);
         },
         {"sending", "to", peer});
  link.tx_count = k;
  if (gated) {
    ++gate_value_;
    gate_sequence_ = op_sequence_;
  }
}

void Comm::wait_for_send(WaitList &waits, const SendInPlace &send) const {
  // The peer's sends complete in order: one wait, for the latest, covers the earlier ones.
  const trn_sem_t sent = links_[send.peer].tx_sent;
  auto w = std::find_if(waits.begin(), waits.end(), [&](auto &p) { return p.sem == sent; });
  if (w == waits.end())
    waits.push_back({sent, send.k});
  else
    w->value = std::max(w->value, send.k);
}

WaitList Comm::before_writing(trn_mem_t mem, uint64_t offset, uint64_t bytes) {
  WaitList waits;
  for (auto it = in_place_.begin(); it != in_place_.end();) {
    if (it->mem != mem || it->offset >= offset + bytes || offset >= it->offset + it->bytes) {
      ++it;
      continue;
    }
    wait_for_send(waits, *it);
    it = in_place_.erase(it);
  }
  return waits;
}

void Comm::settle_sends(trn_queue_t queue) {
  WaitList waits;
  for (const SendInPlace &send : in_place_) wait_for_send(waits, send);
  in_place_.clear();
  mapped_.clear();
  if (waits.empty()) return;
  const trn_sync_t sync{waits.data(), static_cast<uint32_t>(waits.size()), nullptr, 0};
  submit(queue, [&] { return trn_queue_barrier(queue, &sync, &op_sequence_); },
         {"waiting for the fabric to send"});
}

void Comm::receive_chunk(trn_queue_t queue, uint32_t peer, uint64_t bytes, const ChunkUse &use,
                         const char *doing, const trn_comm_buffer_t *writes) {
  PeerLink &link = links_[peer];
  const uint64_t k = link.rx_count + 1;
  WaitList waits;
  if (writes && !in_place_.empty()) waits = before_writing(writes->mem, writes->offset, bytes);
  waits.push_back({link.rx_ready, k});
  const trn_sem_point_t signal{link.rx_free, k};
  const trn_sync_t sync{waits.data(), static_cast<uint32_t>(waits.size()), &signal, 1};
  const uint64_t at = slot_offset(peer, k);
  if (link.remote) proxy_->expect_receive(peer, k);
  submit(queue,
         [&] {
           return bytes == 0 || !use ? trn_queue_barrier(queue, &sync, &op_sequence_)
                                     : use(staging_, at, &sync);
         },
         {doing, "from", peer});
  link.rx_count = k;
}

trn_mem_t Comm::scratch(uint64_t bytes) {
  trn_mem_t mem = nullptr;
  check(trn_mem_alloc(pool_, std::max<uint64_t>(bytes, 512), 4096, TRN_MEM_CATEGORY_COLLECTIVES, 0,
                      &mem),
        "allocating " + std::to_string(bytes) + " bytes of scratch for a collective");
  return mem;
}

void Comm::free_later(trn_mem_t mem) {
  leftover_scratch_.push_back(mem);
}

void Comm::free_in_queue(trn_queue_t queue, trn_mem_t mem) {
  submit(queue, [&] { return trn_queue_free(queue, mem, nullptr, &op_sequence_); },
         {"trn_queue_free"});
}

}  // namespace trn::comm
