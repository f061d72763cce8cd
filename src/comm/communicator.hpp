// One rank of a communicator: its staging buffer and semaphores, the peers' imported ones, the
// chunk protocol every operation is made of, the record of operations in flight, and the
// monitor thread that turns a peer's death, an abort or a timeout into the communicator's
// failure. Its parts: communicator.cpp (making and ending it), peers.cpp (the rendezvous' table
// and the imports), chunks.cpp (the chunk protocol), operation_order.cpp (the operations' order,
// records and gate), failure.cpp (the monitor and failing).
#pragma once

#include <atomic>
#include <boost/circular_buffer.hpp>
#include <boost/container/small_vector.hpp>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/bootstrap.hpp"
#include "comm/call_table.hpp"
#include "comm/function_ref.hpp"
#include "comm/proxy.hpp"
#include "trn/trn_comm.h"
#include "trn/trn_ops.h"

namespace trn::comm {

struct CommConfig {
  trn_core_t core = nullptr;
  uint32_t rank = 0;
  uint32_t size = 1;
  uint64_t timeout_ns = 0;
  uint64_t chunk_bytes = 0;
};

// What every rank tells the others at the rendezvous.
struct RankInfo {
  uint32_t pid = 0;
  uint32_t device_index = 0;
  uint32_t core_index = 0;
  uint64_t process_token = 0;           // tells processes apart (pids may repeat across hosts)
  std::string host;                     // host and device set: ranks on one share memory
  trn_ipc_handle_t staging{};           // this rank's staging buffer
  trn_ipc_handle_t gate{};              // rank 0's: the closing agreement's gate on one host
  std::vector<trn_ipc_handle_t> ready;  // per sender: the sender signals it after a write
  std::vector<trn_ipc_handle_t> freed;  // per sender: this rank signals it after reading
};

class Comm;

// How the ranks sit on hosts, when every host has the same number of them (more than one) and
// there is more than one host: this rank's host's ranks and one rank of each host (the ones at
// this rank's place on theirs), both in rank order, and this rank's place in each.
struct HostGroups {
  std::vector<uint32_t> local, cross;
  uint32_t local_pos = 0, cross_pos = 0;
};

// Both directions between this rank and one peer.
struct PeerLink {
  // Receiving from the peer: this rank's semaphores (exported) and its count of chunks.
  trn_sem_t rx_ready = nullptr;
  trn_sem_t rx_free = nullptr;
  uint64_t rx_count = 0;
  // Sending to the peer: its staging buffer and semaphores, imported.
  trn_mem_t tx_staging = nullptr;
  trn_sem_t tx_ready = nullptr;
  trn_sem_t tx_free = nullptr;
  uint64_t tx_count = 0;
  // Where this rank's slots start in tx_staging: its region of the peer's staging buffer, or
  // for a peer on another host the outbox the proxy sends from (remote).
  uint64_t tx_base = 0;
  bool remote = false;
  // A peer on another host: chunks the proxy sent from where they were (not the outbox), in
  // order (the proxy signals it).
  trn_sem_t tx_sent = nullptr;
};

// A chunk of the operation being built that the proxy sends from where it is: nothing may
// write over its bytes before `tx_sent` of its peer reaches `k`.
struct SendInPlace {
  trn_mem_t mem = nullptr;
  uint64_t offset = 0, bytes = 0;
  uint32_t peer = 0;
  uint64_t k = 0;
};

// Waits a command adds to its own (a few).
using WaitList = boost::container::small_vector<trn_sem_point_t, 4>;

// What an operation is, for messages ("all_reduce of 4096 x f32 #3"), formatted only when one
// is needed (most operations never need their name).
struct OpName {
  const char *kind = "operation";
  bool data = false;  // it moves elements: "of <count> x <dtype>"
  uint64_t count = 0;
  trn_dtype_t dtype = TRN_DTYPE_F32;
  uint64_t number = 0;  // its place in the communicator's order (1, 2, ...)
  std::string text() const;
};

// The peers an operation exchanges with, in order, each once (a few, in any algorithm's step).
using PeerList = boost::container::small_vector<uint32_t, 4>;

// An operation in flight: where it ends, its deadline, and the counts it expects of each peer.
struct OpRecord {
  OpName name;
  trn_sem_t queue_sem = nullptr;
  uint64_t last_sequence = 0;
  uint64_t deadline_ns = 0;  // 0 until the monitor first sees the operation
  boost::container::small_vector<std::pair<uint32_t, uint64_t>, 4> expect_ready;  // rx_ready
  boost::container::small_vector<std::pair<uint32_t, uint64_t>, 4> expect_free;   // tx_free
};

class Comm : public std::enable_shared_from_this<Comm> {
 public:
  // Joins the communicator the id names (blocks until every rank arrived).
  static std::shared_ptr<Comm> create(const RendezvousId &id, const CommConfig &config);
  ~Comm();

  uint32_t rank() const { return rank_; }
  uint32_t size() const { return size_; }
  trn_device_t device() const { return device_; }
  trn_core_t core() const { return core_; }
  uint64_t chunk_bytes() const { return chunk_bytes_; }
  uint32_t slots() const { return slots_; }
  uint64_t ring_min_bytes() const { return ring_min_bytes_; }
  uint64_t timeout_ns() const { return timeout_ns_; }
  void fill_info(trn_comm_info_t *info) const;

  // The failure, if any (empty: healthy).
  std::string error() const;
  // Fails the communicator: the commands still waiting on peers fail, and (if `tell_others`)
  // the other ranks learn it through the rendezvous host.
  void fail_comm(const std::string &why, bool tell_others, uint64_t operation = 0);
  // Waits for every operation enqueued so far.
  trn_result_t synchronize(uint64_t timeout_ns);
  // Ends the communicator: waits for its operations (up to its timeout), then lets go of
  // everything. `abort` fails it first.
  void shutdown(bool abort);
  // Every rank's payload of one round, by rank (trn_comm_split, fabric addresses); `what` names
  // the round in the timeout's message.
  std::vector<std::vector<uint8_t>> gather(const std::vector<uint8_t> &payload, const char *what);

  // --- building operations (operations.cpp) ---
  // Serialises operations (and trn_comm_split); throws TRN_ERROR_COLLECTIVE on a failed
  // communicator and TRN_ERROR_INVALID_HANDLE on one another thread destroys.
  std::unique_lock<std::mutex> begin_operation();
  uint64_t next_operation_number() { return ++operations_; }
  // What a submission does, for messages (built only when one is needed): `what`, then
  // " <towards> rank <peer>" when it concerns a peer.
  struct Doing {
    const char *what;
    const char *towards = nullptr;  // "to" or "from"
    uint32_t peer = 0;
    std::string text() const;
  };
  // Submits one command, waiting out a full queue (bounded by the timeout).
  void submit(trn_queue_t queue, FunctionRef<trn_result_t()> submit_fn, const Doing &doing);
  // Chunk protocol, see operations.cpp. `gated` (the closing agreement's first send only): the
  // command also waits behind the gate that open_gate opens.
  void send_chunk(trn_queue_t queue, uint32_t peer, trn_mem_t source, uint64_t offset,
                  uint64_t bytes, bool gated = false);
  // Waits for the peer's next chunk and hands its (staging memory, offset) to `use`, whose
  // command must carry the sync it is given (the wait for the data, the signal of the slot).
  using ChunkUse =
      FunctionRef<trn_result_t(trn_mem_t staging, uint64_t offset, const trn_sync_t *sync)>;
  // `writes` (may be null): the memory `use`'s command writes, `bytes` from its offset.
  void receive_chunk(trn_queue_t queue, uint32_t peer, uint64_t bytes, const ChunkUse &use,
                     const char *doing, const trn_comm_buffer_t *writes = nullptr);
  // The waits a command writing `bytes` at `offset` of `mem` needs first: for the sends from
  // those bytes still in flight (sends in place, see SendInPlace).
  WaitList before_writing(trn_mem_t mem, uint64_t offset, uint64_t bytes);
  // Waits for every send in place of the operation (before it ends or frees its scratch).
  void settle_sends(trn_queue_t queue);
  uint64_t slot_offset(uint32_t sender, uint64_t count) const;
  trn_mem_t staging() const { return staging_; }
  // Where each command of the operation being built leaves its queue sequence number: the last
  // one marks the operation's end (no closing command needed), unless a command whose number is
  // not known (an ops kernel) came after it, which forget_op_sequence says.
  uint64_t *op_sequence() { return &op_sequence_; }
  void forget_op_sequence() { op_sequence_ = 0; }
  // Scratch memory for one operation, freed in queue order.
  trn_mem_t scratch(uint64_t bytes);
  // Scratch of an operation that failed part-way, which the queue could not take to free:
  // freed when the communicator lets go of its memory.
  void free_later(trn_mem_t mem);
  void free_in_queue(trn_queue_t queue, trn_mem_t mem);
  // Orders the operation after the previous one (which may have run on another queue) and
  // after the caller's waits; records it when done.
  void open_operation(trn_queue_t queue, const trn_sync_t *sync);
  uint64_t close_operation(trn_queue_t queue, const OpName &name, const trn_sync_t *sync,
                           const PeerList &peers_in, const PeerList &peers_out);
  // Opens the gate of the collective just enqueued, unless the communicator failed meanwhile. The
  // closing agreement (docs/collectives.md, "Failure"): a collective's last commands are a
  // dissemination barrier over every rank, whose first signal waits behind the gate, opened only
  // once the whole collective is enqueued: a rank that fails part-way never lets its signal go,
  // so no rank's collective completes unless every rank enqueued and ran all of its own. On one
  // host the ranks share rank 0's gate, opened once every rank enqueued the collective and all
  // called it alike (`call`, see CallTable); ranks that did not fail the communicator here,
  // naming both calls (TRN_ERROR_COLLECTIVE). Across hosts each rank opens a gate of its own.
  void open_gate(const CallSignature &call);
  PeerLink &link(uint32_t peer) { return links_[peer]; }
  // For hierarchical algorithms; empty unless the ranks spread evenly over several hosts.
  const std::optional<HostGroups> &host_groups() const { return host_groups_; }
  // 0 .. size-1: the whole communicator as a group of ranks (made once, not per operation).
  const std::vector<uint32_t> &all_ranks() const { return all_ranks_; }
  uint32_t hosts() const { return hosts_; }

 private:
  Comm() = default;
  void join(const RendezvousId &id, const CommConfig &config);
  // This rank's description at the rendezvous: where it is and its exported semaphores.
  std::vector<uint8_t> make_blob();
  // Every rank's description: hosts, devices, the chunk size all ranks then use.
  void read_table(const std::vector<std::vector<uint8_t>> &blobs);
  // The staging buffer, made for the chunk the table chose, exported and exchanged in a round
  // of its own; then the peers' buffers and semaphores on this host are imported.
  void share_staging();
  // On one host: maps the table of calls and takes rank 0's gate as this rank's.
  void share_calls();
  // Ranks on other hosts: an outbox and stand-in semaphores each, and the proxy's fabric
  // endpoint, whose addresses every rank exchanges in one more round.
  void connect_remote_peers();
  void find_host_groups();
  // A host pointer to `mem` for sends in place, or null when it cannot (or should not) be mapped.
  std::byte *map_for_sending(trn_mem_t mem);
  // Adds (or raises) the wait for `send` to its peer's tx_sent.
  void wait_for_send(WaitList &waits, const SendInPlace &send) const;
  // A failure that a peer's most likely caused (this rank's queue failed on a peer's semaphore,
  // or a peer's export was gone): fails the communicator, naming the service's word of the cause
  // if it comes within kReasonWaitNs (and the deadline), else `why`.
  static constexpr uint64_t kReasonWaitNs = 1'500'000'000;
  [[noreturn]] void fail_naming_cause(const std::string &why, uint64_t deadline_ns = UINT64_MAX);
  void monitor();
  void check_deadlines();
  // Drops the records of operations that are over, oldest first, up to one still in flight:
  // completed, or their queue destroyed (which drains it first). TRN_ERROR_CANCELLED, with that
  // record left first, when its queue failed instead. Needs state_mutex_.
  trn_result_t drop_finished_locked();
  void fail_semaphores(const std::string &why);
  void release_resources();
  bool operations_done();

  uint32_t rank_ = 0;
  uint32_t size_ = 1;
  std::vector<uint32_t> all_ranks_;
  uint64_t timeout_ns_ = 0;
  uint64_t chunk_bytes_ = 0;
  uint64_t ring_min_bytes_ = 0;
  uint32_t slots_ = 4;
  // Chunks of at least this many bytes to a peer on another host go from where they are, not
  // through the outbox (TRN_COMM_SEND_IN_PLACE=0: never), where the provider allows it.
  bool send_in_place_ = true;
  uint64_t in_place_min_bytes_ = UINT64_MAX;
  std::vector<SendInPlace> in_place_;  // the operation's, guarded by op_mutex_
  // Host pointers of the operation's memory that chunks were sent from in place (its few
  // buffers), guarded by op_mutex_.
  boost::container::small_vector<std::pair<trn_mem_t, std::byte *>, 4> mapped_;
  bool chunk_chosen_ = false;  // by the descriptor or TRN_COMM_CHUNK_BYTES
  trn_core_t core_ = nullptr;
  trn_device_t device_ = nullptr;
  uint32_t device_index_ = 0;
  uint32_t core_index_ = 0;
  trn_pool_t pool_ = nullptr;
  trn_mem_t staging_ = nullptr;
  // The closing agreement's gate (see open_gate): a semaphore of this rank's alone, the value the
  // last gated send waits for, and while that gate is shut, the queue sequence of the command
  // behind it (a full queue stuck there cannot make room before the gate opens: submit() says so).
  trn_sem_t gate_ = nullptr;
  // The ranks' calls, when every rank is on this host (else null): see CallTable.
  std::unique_ptr<CallTable> calls_;
  // Waits until the gate reached `value` (the call that long ago was agreed), up to the timeout.
  void wait_for_gate(uint64_t value);
  uint64_t gate_value_ = 0;     // guarded by op_mutex_
  uint64_t gate_sequence_ = 0;  // guarded by op_mutex_; 0: no gate shut
  std::vector<PeerLink> links_;
  std::vector<RankInfo> ranks_;
  std::vector<trn_mem_t> imports_;
  std::vector<trn_mem_t> leftover_scratch_;  // see free_later(); guarded by op_mutex_
  uint32_t local_ranks_ = 1, devices_ = 1, processes_ = 1, hosts_ = 1;
  std::unique_ptr<Proxy> proxy_;  // only when the communicator spans hosts
  std::optional<HostGroups> host_groups_;

  BootstrapClient bootstrap_;
  std::thread monitor_thread_;
  std::atomic<bool> stop_{false};
  Fd stop_event_;  // an eventfd that wakes the monitor's poll when it is to stop
  // Sets a handle the monitor's fail_semaphores reads, under the lock it takes: the monitor
  // already runs while a rank connects its peers.
  template <typename T>
  void publish(T *field, T value) {
    std::lock_guard lock(resources_mutex_);
    *field = value;
  }
  // Starts the monitor thread; stop_monitor() ends it at once (not at its next 20 ms look).
  void start_monitor();
  void stop_monitor();

  std::mutex op_mutex_;  // one operation at a time
  bool closed_ = false;  // guarded by op_mutex_: shutdown began, no operation starts
  // Failing the semaphores (any thread) and letting them go (shutdown) exclude each other.
  mutable std::mutex resources_mutex_;
  bool released_ = false;  // guarded by resources_mutex_
  std::atomic<uint64_t> operations_{0};
  trn_sem_t last_queue_sem_ = nullptr;
  uint64_t last_sequence_ = 0;
  uint64_t op_sequence_ = 0;          // see op_sequence(); guarded by op_mutex_ as the above
  trn_sem_t op_queue_sem_ = nullptr;  // the operation's queue's semaphore (open_operation)

  mutable std::mutex state_mutex_;  // error_, records_, gather
  std::condition_variable state_cv_;
  std::string error_;
  std::atomic<bool> failed_{false};  // error_ is set (it is set once, never cleared)
  // Operations not known to be complete, oldest first (a ring: no allocation per operation once
  // it has grown to the number in flight).
  boost::circular_buffer<OpRecord> records_;
  std::optional<std::vector<std::vector<uint8_t>>> gathered_;
  // A timeout told to the service: its answer (naming who lags) is awaited until this time.
  uint64_t abort_wait_until_ = 0;
  std::string abort_reason_;
};

}  // namespace trn::comm
