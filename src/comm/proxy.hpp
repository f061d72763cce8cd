// The host side of transfers to and from ranks on other hosts, like NCCL's proxy thread. The
// queues keep the chunk protocol they use with local peers, against stand-ins on this device:
// a sending queue copies a chunk into the peer's outbox slot and signals `out_ready`; the proxy
// sends the slot over the fabric straight from device memory (mapped, as GPUDirect RDMA sends
// from GPU memory), and signals `out_free` once the receiver reports the chunk consumed (a
// credit). On the receiving side the fabric lands a chunk straight in the rank's staging slot;
// the proxy signals `rx_ready`, the queue reduces or copies it and signals `rx_free`, which the
// proxy returns to the sender as a credit. A receive is posted into a slot before the slot is
// free, which is safe: the sender sends into it only after the credit for the slot's last
// chunk. Chunks are signalled in order even if the fabric completes them out of order.
//
// A large chunk skips the outbox where the provider sends from unregistered memory (tcp): the
// queue signals `out_ready` once the chunk's bytes are final where they are, the proxy sends
// them from there and signals `out_sent` (chunks whose sends completed, in order), which the
// queue waits for before anything writes over those bytes or the operation ends.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/fabric.hpp"
#include "trn/trn.h"

namespace trn::comm {

struct RemotePeer {
  uint32_t rank = 0;
  std::string host;              // its host, as messages name it
  std::vector<uint8_t> address;  // its fabric endpoint's name
  std::byte *outbox = nullptr;   // this rank's slots for it (device memory, mapped)
  trn_sem_t out_ready = nullptr, out_free = nullptr;
  trn_sem_t out_sent = nullptr;  // chunks sent, for those sent from where they were
  std::byte *inbox = nullptr;    // the peer's slots in this rank's staging buffer (mapped)
  trn_sem_t rx_ready = nullptr, rx_free = nullptr;
};

class Proxy {
 public:
  // `on_failure` runs on the proxy's thread when a transfer fails; the proxy then stops.
  Proxy(uint32_t rank, uint32_t slots, uint64_t chunk_bytes,
        std::function<void(const std::string &)> on_failure);
  ~Proxy();  // stop()
  Proxy(const Proxy &) = delete;
  Proxy &operator=(const Proxy &) = delete;

  // The endpoint's provider and address (to give the other ranks before add_peer).
  const std::string &provider() const { return fabric_.provider(); }
  const std::vector<uint8_t> &address() const { return fabric_.name(); }

  void add_peer(const RemotePeer &peer);
  void start();
  // Stops the thread. With a deadline, it first sends (until then) the chunks the queues left
  // in the outboxes: a clean departure after the last operation completed here, whose last
  // chunks the peers may still be waiting for.
  void stop(uint64_t drain_deadline_ns = 0);
  // The queue will signal chunk `k` (of `bytes`) to `peer` ready in the outbox, or, with
  // `from` (mapped device memory), ready there.
  void expect_send(uint32_t peer, uint64_t k, uint64_t bytes, const std::byte *from = nullptr);
  // Whether expect_send may name where a chunk is (see above).
  bool sends_in_place() const { return fabric_.sends_unregistered(); }
  // The queue will wait for chunk `k` from `peer` (and free it after).
  void expect_receive(uint32_t peer, uint64_t k);
  // The communicator failed and is failing its semaphores: a signal of the proxy's that comes
  // after (trn_sem_signal clears a failure) fails its semaphore again, so that no queue waits
  // on for a chunk that will not come.
  void mark_failed(const std::string &reason);

 private:
  struct Context;
  struct Outgoing;
  struct Peer;
  void run();
  bool post_receives(Peer &p);
  // Sends the hello that opens the connection to a higher rank (see Peer::may_send).
  bool greet(Peer &p);
  bool progress_sends(Peer &p);
  bool progress_credits(Peer &p);
  void complete(const Fabric::Completion &c);
  // Chunk `k`'s send completed: counts it (in order) on `out_sent`.
  void count_sent(Peer &p, uint64_t k);
  // A credit that could not be sent: true (the failure is the peer's clean departure, see
  // proxy.cpp) when that is what `e` reports, its slot then free again.
  bool credit_lost(const FabricTransferError &e);
  // What a transfer was, for messages: "sending to rank 3 (staging slot 1)".
  std::string transfer_name(const Context &ctx) const;
  // trn_sem_signal, then the failure again if the communicator failed meanwhile.
  trn_result_t signal(trn_sem_t sem, uint64_t value);
  // Whether a transfer is under way or expected: the proxy then polls without sleeping.
  bool busy();
  // Chunks handed to it to send that have not gone out yet (its thread only).
  bool sending();
  Peer *peer_of(uint32_t rank);
  // A new expectation: an idle proxy wakes for it.
  void wake();

  // Before the fabric, so that they go after it: receives stay posted into their buffers and
  // contexts until the fabric closes, and a peer's late message (a credit) lands there.
  std::vector<std::unique_ptr<Peer>> peers_;
  Fabric fabric_;
  uint32_t rank_;
  uint32_t slots_;
  uint64_t chunk_bytes_;
  std::function<void(const std::string &)> on_failure_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> drain_until_ns_{0};  // see stop()
  std::atomic<bool> failed_{false};
  std::mutex failed_mutex_;
  std::string failed_reason_;  // guarded by failed_mutex_
  // An idle proxy sleeps until an operation expects transfers (or a short timeout passes).
  std::mutex wake_mutex_;
  std::condition_variable wake_;
  uint64_t expectations_ = 0;  // guarded by wake_mutex_
};

}  // namespace trn::comm
