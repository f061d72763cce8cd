#include "comm/operations.hpp"

#include <algorithm>
#include <cstdlib>
#include <span>
#include <vector>

#include "comm/error.hpp"

namespace trn::comm {

const char *op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::all_reduce: return "all_reduce";
    case OpKind::all_gather: return "all_gather";
    case OpKind::reduce_scatter: return "reduce_scatter";
    case OpKind::broadcast: return "broadcast";
    case OpKind::reduce: return "reduce";
    case OpKind::all_to_all: return "all_to_all";
    case OpKind::send: return "send";
    case OpKind::recv: return "recv";
    case OpKind::barrier: return "barrier";
  }
  return "operation";
}

namespace {

// The DMA engines' op for a collective's: AVG reduces by a sum, divided at the end.
trn_reduce_op_t reduce_of(trn_comm_red_op_t op) {
  return op == TRN_REDUCE_AVG ? TRN_REDUCE_SUM : op;
}

// A place in memory: an allocation and a byte offset.
struct Place {
  trn_mem_t mem = nullptr;
  uint64_t offset = 0;
  Place at(uint64_t bytes) const { return {mem, offset + bytes}; }
  bool operator==(const Place &other) const = default;
};

// Builds one operation's commands on the rank's queue: transfers split into staging-slot
// chunks, and the chunk protocol's receive actions (a copy, or a DMA reduction).
class Builder {
 public:
  Builder(Comm &comm, const OpArgs &args)
      : comm_(comm),
        args_(args),
        queue_(args.queue),
        es_(trn_dtype_size(args.dtype)),
        chunk_(comm.chunk_bytes()) {}

  uint32_t rank() const { return comm_.rank(); }
  uint32_t size() const { return comm_.size(); }
  const std::vector<uint32_t> &all_ranks() const { return comm_.all_ranks(); }
  uint64_t es() const { return es_; }
  uint64_t ring_min_bytes() const { return comm_.ring_min_bytes(); }
  const PeerList &peers_in() const { return in_; }
  const PeerList &peers_out() const { return out_; }

  // Elements [begin, end) of block i of `count` split n ways.
  static uint64_t block_start(uint64_t count, uint32_t i, uint32_t n) {
    // count * i / n without overflow: (q * n + rem) * i / n = q * i + rem * i / n.
    const uint64_t q = count / n, rem = count % n;
    return q * i + rem * i / n;
  }

  uint64_t chunks(uint64_t bytes) const { return (bytes + chunk_ - 1) / chunk_; }
  uint64_t chunk_len(uint64_t bytes, uint64_t j) const {
    return std::min(chunk_, bytes - j * chunk_);
  }

  void local_copy(Place to, Place from, uint64_t bytes) {
    if (bytes == 0 || to == from) return;
    const WaitList waits = comm_.before_writing(to.mem, to.offset, bytes);
    const trn_sync_t sync{waits.data(), static_cast<uint32_t>(waits.size()), nullptr, 0};
    comm_.submit(queue_,
                 [&] {
                   return trn_queue_copy(queue_, to.mem, to.offset, from.mem, from.offset, bytes,
                                         waits.empty() ? nullptr : &sync, comm_.op_sequence());
                 },
                 {"copying within the rank"});
  }

  void send_chunk(uint32_t peer, Place from, uint64_t bytes, uint64_t j) {
    const uint64_t len = chunk_len(bytes, j);
    comm_.send_chunk(queue_, peer, from.mem, from.offset + j * chunk_, len);
    note(out_, peer);
  }

  // Chunk j of a transfer: copied to `to`, or, with `a`, reduced: to = a op incoming.
  void receive_chunk(uint32_t peer, Place to, const Place *a, uint64_t bytes, uint64_t j) {
    const uint64_t len = chunk_len(bytes, j);
    const Place dst = to.at(j * chunk_);
    const trn_comm_buffer_t writes{dst.mem, dst.offset};
    note(in_, peer);
    if (!a) {
      comm_.receive_chunk(
          queue_, peer, len,
          [&](trn_mem_t staging, uint64_t at, const trn_sync_t *sync) {
            return trn_queue_copy(queue_, dst.mem, dst.offset, staging, at, len, sync,
                                  comm_.op_sequence());
          },
          "receiving", &writes);
      return;
    }
    const Place src = a->at(j * chunk_);
    comm_.receive_chunk(
        queue_, peer, len,
        [&](trn_mem_t staging, uint64_t at, const trn_sync_t *sync) {
          // The DMA engines reduce as the chunk moves (the collective engines' way); every
          // driver the runtime loads has that command (trn_queue_reduce).
          return trn_queue_reduce(queue_, dst.mem, dst.offset, src.mem, src.offset, staging, at,
                                  len / es_, args_.dtype, reduce_of(args_.op), sync,
                                  comm_.op_sequence());
        },
        "reducing", &writes);
  }

  // One step of a schedule: a transfer out and one in, chunk by chunk. Sends run a chunk ahead
  // of the receives: the peer never waits on this rank's receive to make room, and chunk j + 1
  // is on its way while chunk j is reduced. The queue runs its commands in order, so with each
  // send after the receive before it, every chunk's transfer waited for the previous one to
  // land and be used: across two hosts, an all-reduce of 4 MiB took about 9% longer, one of
  // 16 MiB within a host about 5%. Never further ahead than the staging slots, so that no send
  // waits for a slot that only a later receive of this rank frees.
  void exchange(uint32_t to_peer, Place from, uint64_t send_bytes, uint32_t from_peer, Place to,
                const Place *a, uint64_t recv_bytes) {
    const uint64_t n = std::max(chunks(send_bytes), chunks(recv_bytes));
    const uint64_t ahead = std::min<uint64_t>(2, comm_.slots());
    uint64_t sent = 0;
    for (uint64_t j = 0; j < n; ++j) {
      for (; sent < std::min(n, j + ahead); ++sent)
        if (sent * chunk_ < send_bytes) send_chunk(to_peer, from, send_bytes, sent);
      if (j * chunk_ < recv_bytes) receive_chunk(from_peer, to, a, recv_bytes, j);
    }
  }
  void send(uint32_t peer, Place from, uint64_t bytes) {
    for (uint64_t j = 0; j < chunks(bytes); ++j) send_chunk(peer, from, bytes, j);
  }
  void receive(uint32_t peer, Place to, const Place *a, uint64_t bytes) {
    for (uint64_t j = 0; j < chunks(bytes); ++j) receive_chunk(peer, to, a, bytes, j);
  }
  // Receives chunk by chunk and passes each on (chains).
  void forward(uint32_t from_peer, Place to, const Place *a, uint32_t to_peer, uint64_t bytes) {
    for (uint64_t j = 0; j < chunks(bytes); ++j) {
      receive_chunk(from_peer, to, a, bytes, j);
      send_chunk(to_peer, to, bytes, j);
    }
  }
  // The closing agreement (Comm::open_gate): a dissemination barrier over every rank, of
  // messages with no data. In round k each rank tells the rank 2^k places on and waits for the
  // one 2^k places back; after the last round every rank has heard, directly or through others,
  // from every rank, and a rank's first message leaves only behind its gate, once its queue ran
  // the whole operation. A rank that fails part-way thus holds every rank's operation back until
  // the failure reaches it (through the failed semaphores, then the service's word of why).
  void agree() {
    const uint32_t n = size(), r = rank();
    for (uint32_t k = 1; k < n; k <<= 1) {
      const uint32_t to = (r + k) % n, from = (r + n - k) % n;
      comm_.send_chunk(queue_, to, nullptr, 0, 0, /*gated=*/k == 1);
      note(out_, to);
      comm_.receive_chunk(queue_, from, 0, nullptr, "agreeing that the operation completed");
      note(in_, from);
    }
  }

  // The operation's sends from its own memory are done (before anything else writes it).
  void settle_sends() { comm_.settle_sends(queue_); }

  void divide(Place where, uint64_t count) {
    if (count == 0) return;
    settle_sends();
    const int64_t n = static_cast<int64_t>(count);
    trn_ops_tensor_t t{};
    check_ops(trn_ops_tensor_init(&t, where.mem, where.offset, args_.dtype, 1, &n), "avg");
    check_ops(trn_ops_binary_scalar(queue_, TRN_OPS_DIV, &t, &t, size(), 0, nullptr),
              "dividing by the rank count (avg)");
    comm_.forget_op_sequence();
  }

 private:
  Comm &comm_;
  const OpArgs &args_;
  trn_queue_t queue_;
  uint64_t es_;
  uint64_t chunk_;
  static void note(PeerList &peers, uint32_t peer) {
    const auto at = std::lower_bound(peers.begin(), peers.end(), peer);
    if (at == peers.end() || *at != peer) peers.insert(at, peer);
  }
  PeerList in_, out_;
};

// Ranks taking part in one phase of an algorithm, in ring order, and this rank's place among
// them: the whole communicator, the ranks of this rank's host, or one rank of each host.
struct Group {
  std::span<const uint32_t> ranks;  // the communicator's or its host groups' lists
  uint32_t pos = 0;
  uint32_t size() const { return static_cast<uint32_t>(ranks.size()); }
  // The rank `step` places after this one (negative: before), around the ring.
  uint32_t at(int64_t step) const {
    const int64_t n = size();
    return ranks[static_cast<size_t>(((pos + step) % n + n) % n)];
  }
};

Group whole(const Builder &b) {
  return {b.all_ranks(), b.rank()};
}

// Block i of `count` elements split over the group, and its bytes.
struct Blocks {
  uint64_t count, es;
  uint32_t n;
  Place of(Place base, uint32_t i) const { return base.at(Builder::block_start(count, i, n) * es); }
  uint64_t bytes(uint32_t i) const {
    return (Builder::block_start(count, i + 1, n) - Builder::block_start(count, i, n)) * es;
  }
};

// The ring's reduce-scatter: afterwards this rank holds block (pos + 1) % n of R reduced over
// the group.
void ring_reduce_scatter_phase(Builder &b, const Group &g, Place S, Place R, uint64_t count) {
  const uint32_t n = g.size(), r = g.pos;
  const Blocks blk{count, b.es(), n};
  for (uint32_t s = 0; s + 1 < n; ++s) {
    const uint32_t out = (r + n - s) % n, in = (r + 2 * n - s - 1) % n;
    const Place a = blk.of(S, in);
    b.exchange(g.at(1), blk.of(s == 0 ? S : R, out), blk.bytes(out), g.at(-1), blk.of(R, in), &a,
               blk.bytes(in));
  }
}

// The ring's all-gather of the reduced blocks.
void ring_all_gather_phase(Builder &b, const Group &g, Place R, uint64_t count) {
  const uint32_t n = g.size(), r = g.pos;
  const Blocks blk{count, b.es(), n};
  for (uint32_t s = 0; s + 1 < n; ++s) {
    const uint32_t out = (r + 1 + n - s) % n, in = (r + n - s) % n;
    b.exchange(g.at(1), blk.of(R, out), blk.bytes(out), g.at(-1), blk.of(R, in), nullptr,
               blk.bytes(in));
  }
}

void ring_all_reduce(Builder &b, const Group &g, Place S, Place R, uint64_t count) {
  ring_reduce_scatter_phase(b, g, S, R, count);
  ring_all_gather_phase(b, g, R, count);
}

void recursive_doubling_all_reduce(Builder &b, const Group &g, Place S, Place R, uint64_t count) {
  const uint32_t n = g.size(), r = g.pos;
  const uint64_t bytes = count * b.es();
  uint32_t p2 = 1;
  while (p2 * 2 <= n) p2 *= 2;
  const uint32_t extra = n - p2;
  if (r >= p2) {  // folded into the rank p2 places before, then told the result
    b.send(g.ranks[r - p2], S, bytes);
    b.receive(g.ranks[r - p2], R, nullptr, bytes);
    return;
  }
  // This rank's partial result: S until the first reduction writes it to R (no copy first).
  Place partial = S;
  if (r < extra) {
    b.receive(g.ranks[r + p2], R, &partial, bytes);
    partial = R;
  }
  for (uint32_t mask = 1; mask < p2; mask <<= 1) {
    const uint32_t partner = g.ranks[r ^ mask];
    b.exchange(partner, partial, bytes, partner, R, &partial, bytes);
    partial = R;
  }
  b.local_copy(R, partial, bytes);  // a group of one
  if (r < extra) b.send(g.ranks[r + p2], R, bytes);
}

// By size: recursive doubling for small messages (latency), a ring for large (bandwidth). Two
// ranks on different hosts take recursive doubling at every size: it moves as many bytes as the
// ring (the whole buffer each way), in one step rather than the ring's two, and each step across
// hosts waits for a proxy's hand-offs. Between two hosts over TCP, 4 MiB took about 12% less
// time. Within a host the ring stays: there the copies and reductions are the cost, and the
// ring reduces half the bytes per rank (recursive doubling took 5-15% longer from 1 MiB).
void flat_all_reduce(Builder &b, const Group &g, Place S, Place R, uint64_t count,
                     bool across_hosts) {
  if (count * b.es() <= b.ring_min_bytes() || count < g.size() || (across_hosts && g.size() == 2))
    recursive_doubling_all_reduce(b, g, S, R, count);
  else
    ring_all_reduce(b, g, S, R, count);
}

// Across hosts with the same number of ranks each: a reduce-scatter within the host (HBM,
// NeuronLink), an all-reduce of each rank's block with its counterparts on the other hosts (the
// fabric carries 1/m of the data per rank), and an all-gather within the host.
void hierarchical_all_reduce(Builder &b, const Group &local, const Group &cross, Place S, Place R,
                             uint64_t count) {
  ring_reduce_scatter_phase(b, local, S, R, count);
  const Blocks blk{count, b.es(), local.size()};
  const uint32_t mine = (local.pos + 1) % local.size();
  const Place block = blk.of(R, mine);
  flat_all_reduce(b, cross, block, block, blk.bytes(mine) / b.es(), true);
  ring_all_gather_phase(b, local, R, count);
}

void all_gather(Builder &b, Place S, Place R, uint64_t count) {
  const uint32_t n = b.size(), r = b.rank();
  const uint64_t bytes = count * b.es();
  b.local_copy(R.at(r * bytes), S, bytes);
  for (uint32_t s = 0; s + 1 < n; ++s) {
    const uint32_t out = (r + n - s) % n, in = (r + 2 * n - s - 1) % n;
    b.exchange((r + 1) % n, R.at(out * bytes), bytes, (r + n - 1) % n, R.at(in * bytes), nullptr,
               bytes);
  }
}

void reduce_scatter(Builder &b, Place S, Place R, Place scratch, uint64_t count) {
  const uint32_t n = b.size(), r = b.rank();
  const uint64_t bytes = count * b.es();
  if (n == 1) return b.local_copy(R, S, bytes);
  for (uint32_t s = 0; s + 1 < n; ++s) {
    const uint32_t out = (r + 2 * n - s - 1) % n, in = (r + 2 * n - s - 2) % n;
    const Place a = S.at(in * bytes);
    b.exchange((r + 1) % n, s == 0 ? S.at(out * bytes) : scratch, bytes, (r + n - 1) % n,
               s + 2 == n ? R : scratch, &a, bytes);
  }
}

void broadcast(Builder &b, Place S, Place R, uint64_t count, uint32_t root) {
  const uint32_t n = b.size(), r = b.rank();
  const uint64_t bytes = count * b.es();
  const uint32_t v = (r + n - root) % n, next = (r + 1) % n, prev = (r + n - 1) % n;
  if (v == 0) {
    b.local_copy(R, S, bytes);
    if (n > 1) b.send(next, S, bytes);
  } else if (v + 1 < n) {
    b.forward(prev, R, nullptr, next, bytes);
  } else {
    b.receive(prev, R, nullptr, bytes);
  }
}

void reduce(Builder &b, Place S, Place R, Place scratch, uint64_t count, uint32_t root) {
  const uint32_t n = b.size(), r = b.rank();
  const uint64_t bytes = count * b.es();
  const uint32_t v = (r + n - root) % n, toward = (r + n - 1) % n, from = (r + 1) % n;
  if (n == 1) return b.local_copy(R, S, bytes);
  if (v + 1 == n) return b.send(toward, S, bytes);
  if (v == 0) return b.receive(from, R, &S, bytes);
  b.forward(from, scratch, &S, toward, bytes);
}

void all_to_all(Builder &b, Place S, Place R, uint64_t count) {
  const uint32_t n = b.size(), r = b.rank();
  const uint64_t bytes = count * b.es();
  b.local_copy(R.at(r * bytes), S.at(r * bytes), bytes);
  for (uint32_t s = 1; s < n; ++s) {
    const uint32_t to = (r + s) % n, from = (r + n - s) % n;
    b.exchange(to, S.at(to * bytes), bytes, from, R.at(from * bytes), nullptr, bytes);
  }
}

// The buffer's allocation must hold `bytes` from its offset, aligned to the element size.
void check_buffer(const char *name, const trn_comm_buffer_t &buffer, uint64_t bytes, uint64_t es) {
  if (!buffer.mem) fail(TRN_ERROR_INVALID_HANDLE, std::string(name) + ".mem is NULL");
  trn_mem_info_t info = TRN_MEM_INFO_INIT;
  check(trn_mem_get_info(buffer.mem, &info), name);
  if (buffer.offset % es != 0)
    fail(TRN_ERROR_INVALID_ARGUMENT,
         std::string(name) + ".offset " + std::to_string(buffer.offset) +
             " is not a multiple of the element size " + std::to_string(es));
  if (buffer.offset > info.size || bytes > info.size - buffer.offset)
    fail(TRN_ERROR_INVALID_ARGUMENT, std::string(name) + ": " + std::to_string(bytes) +
                                         " bytes at offset " + std::to_string(buffer.offset) +
                                         " do not fit the allocation of " +
                                         std::to_string(info.size) + " bytes");
}

bool overlaps(const trn_comm_buffer_t &a, uint64_t a_bytes, const trn_comm_buffer_t &b,
              uint64_t b_bytes) {
  return a.mem == b.mem && a.offset < b.offset + b_bytes && b.offset < a.offset + a_bytes;
}

}  // namespace

uint64_t run_operation(Comm &comm, OpKind kind, const OpArgs &args) {
  // Arguments first: nothing is enqueued for a bad call.
  if (!args.queue) fail(TRN_ERROR_INVALID_HANDLE, "queue is NULL");
  const bool data = kind != OpKind::barrier;
  if (data && args.dtype != TRN_DTYPE_F32 && args.dtype != TRN_DTYPE_BF16 &&
      args.dtype != TRN_DTYPE_F16 && args.dtype != TRN_DTYPE_I32)
    fail(TRN_ERROR_INVALID_ARGUMENT, std::string("dtype ") + trn_dtype_name(args.dtype) +
                                         ": collectives take f32, bf16, f16 or i32");
  const bool reduces =
      kind == OpKind::all_reduce || kind == OpKind::reduce_scatter || kind == OpKind::reduce;
  // trn_reduce_op_t also holds ops a collective does not compute (ARGMAX, ARGMIN).
  if (reduces && (args.op < TRN_REDUCE_SUM || args.op > TRN_REDUCE_AVG))
    fail(TRN_ERROR_INVALID_ENUM, "op " + std::to_string(args.op) + " (" +
                                     trn_reduce_op_name(args.op) +
                                     ") is not one collectives compute: use TRN_REDUCE_SUM, "
                                     "_PROD, _MAX, _MIN or _AVG");
  const uint32_t n = comm.size(), r = comm.rank();
  if ((kind == OpKind::broadcast || kind == OpKind::reduce) && args.root >= n)
    fail(TRN_ERROR_INVALID_ARGUMENT, "root " + std::to_string(args.root) +
                                         " is not a rank of this communicator of " +
                                         std::to_string(n));
  if ((kind == OpKind::send || kind == OpKind::recv) && (args.root >= n || args.root == r))
    fail(TRN_ERROR_INVALID_ARGUMENT,
         "peer " + std::to_string(args.root) +
             (args.root == r ? " is this rank itself" : " is not a rank of this communicator"));
  const uint64_t es = trn_dtype_size(args.dtype);
  if (data && args.count > (UINT64_MAX / es) / n)
    fail(TRN_ERROR_INVALID_ARGUMENT, "count " + std::to_string(args.count) + " is too large");
  const uint64_t bytes = args.count * es;
  uint64_t send_bytes = bytes, recv_bytes = bytes;
  switch (kind) {
    case OpKind::all_gather: recv_bytes = bytes * n; break;
    case OpKind::reduce_scatter: send_bytes = bytes * n; break;
    case OpKind::all_to_all: send_bytes = recv_bytes = bytes * n; break;
    default: break;
  }
  const bool reads_send = kind != OpKind::recv && kind != OpKind::barrier &&
                          (kind != OpKind::broadcast || args.root == r);
  const bool writes_recv =
      kind != OpKind::send && kind != OpKind::barrier && (kind != OpKind::reduce || args.root == r);
  if (reads_send) check_buffer("send", args.send, send_bytes, es);
  if (writes_recv) check_buffer("recv", args.recv, recv_bytes, es);
  // In place means exactly NCCL's layouts; other overlaps would read what they just wrote.
  bool in_place = false;
  if (reads_send && writes_recv && overlaps(args.send, send_bytes, args.recv, recv_bytes)) {
    const uint64_t at = args.recv.offset, from = args.send.offset;
    switch (kind) {
      case OpKind::all_gather: in_place = from == at + r * bytes; break;
      case OpKind::reduce_scatter: in_place = at == from + r * bytes; break;
      default: in_place = from == at; break;
    }
    if (!in_place)
      fail(TRN_ERROR_INVALID_ARGUMENT,
           "send and recv overlap without being in place (the same offset; all_gather: send at "
           "recv + rank * count; reduce_scatter: recv at send + rank * count)");
  }

  std::unique_lock lock = comm.begin_operation();
  // Scratch before any command: a failure here leaves the peers in step.
  trn_mem_t scratch = nullptr;
  if ((kind == OpKind::reduce_scatter && n > 2) ||
      (kind == OpKind::reduce && n > 2 && args.root != r) ||
      (kind == OpKind::all_to_all && in_place && n > 1))
    scratch = comm.scratch(kind == OpKind::all_to_all ? send_bytes : bytes);
  const Place S{args.send.mem, args.send.offset}, R{args.recv.mem, args.recv.offset};
  const Place T{scratch, 0};
  // What every rank must have called alike, compared before any rank's collective completes.
  CallSignature call;
  call.kind = static_cast<uint32_t>(kind);
  if (data) {
    call.dtype = static_cast<uint32_t>(args.dtype);
    call.count = args.count;
  }
  if (reduces) call.op = static_cast<uint32_t>(args.op);
  if (kind == OpKind::broadcast || kind == OpKind::reduce) call.root = args.root;
  Builder b(comm, args);
  uint64_t sequence = 0;
  try {
    comm.open_operation(args.queue, args.sync);
  } catch (...) {
    if (scratch) trn_mem_free(scratch);
    throw;
  }
  // Numbered once nothing can stop it short of its commands: the peers number theirs alike.
  const OpName name{op_kind_name(kind), data, args.count, args.dtype, comm.next_operation_number()};
  try {
    switch (kind) {
      case OpKind::all_reduce:
        if (n == 1)
          b.local_copy(R, S, bytes);
        else if (const auto hosts = comm.host_groups(); hosts && args.count >= n)
          hierarchical_all_reduce(b, {hosts->local, hosts->local_pos},
                                  {hosts->cross, hosts->cross_pos}, S, R, args.count);
        else
          flat_all_reduce(b, whole(b), S, R, args.count, comm.hosts() > 1);
        if (args.op == TRN_COMM_AVG) b.divide(R, args.count);
        break;
      case OpKind::all_gather: all_gather(b, S, R, args.count); break;
      case OpKind::reduce_scatter:
        reduce_scatter(b, S, R, T, args.count);
        if (args.op == TRN_COMM_AVG) b.divide(R, args.count);
        break;
      case OpKind::broadcast: broadcast(b, S, R, args.count, args.root); break;
      case OpKind::reduce:
        reduce(b, S, R, T, args.count, args.root);
        if (args.op == TRN_COMM_AVG && r == args.root) b.divide(R, args.count);
        break;
      case OpKind::all_to_all:
        if (in_place && scratch) {  // one rank in place: nothing moves
          b.local_copy(T, S, send_bytes);
          all_to_all(b, T, R, args.count);
        } else {
          all_to_all(b, S, R, args.count);
        }
        break;
      case OpKind::send: b.send(args.root, S, bytes); break;
      case OpKind::recv: b.receive(args.root, R, nullptr, bytes); break;
      case OpKind::barrier: break;  // the closing agreement is the whole of it
    }
    b.settle_sends();
    if (scratch) comm.free_in_queue(args.queue, scratch);
    scratch = nullptr;  // the queue frees it
    // Every rank takes part in a collective: none completes unless all of them did. A send and
    // its receive do not wait for each other's end: a send completes once its data is in the
    // peer's staging buffer, whether or not the receive was posted yet (docs/collectives.md).
    if (kind != OpKind::send && kind != OpKind::recv) b.agree();
    sequence = comm.close_operation(args.queue, name, args.sync, b.peers_in(), b.peers_out());
    // A failure here (calls that differ) has failed the communicator with its own reason.
    comm.open_gate(call);
  } catch (...) {
    // Part of it is queued (or all of it, and its record was not made): the peers count chunks
    // this rank will never send, or an operation the caller will make again.
    try {
      comm.fail_comm(name.text() + " could be enqueued only in part on rank " + std::to_string(r) +
                         ": " + current_reason(),
                     true);
    } catch (...) {
      // Memory stays short: a reason short enough to need none (the peers learn it, or their
      // timeout ends the wait).
      try {
        comm.fail_comm("out of memory", true);
      } catch (...) {
      }
    }
    // Its queued commands are cancelled by the failure: the scratch goes after them, or with the
    // communicator, never with the process.
    if (scratch && trn_queue_free(args.queue, scratch, nullptr, nullptr) != TRN_SUCCESS) {
      try {
        comm.free_later(scratch);
      } catch (...) {
        // No room to remember it: it stays allocated in the communicator's pool, which its
        // destruction frees.
      }
    }
    throw;
  }
  return sequence;
}

}  // namespace trn::comm
