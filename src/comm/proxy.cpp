#include "comm/proxy.hpp"

#include <sched.h>

#include <chrono>
#include <set>

#include "comm/error.hpp"
#include "comm/socket.hpp"
#include "common/thread_name.hpp"

namespace trn::comm {

namespace {

enum Kind : uint64_t { kData = 1, kCredit = 2, kHello = 3 };
constexpr uint64_t kCountBits = 48;
constexpr uint64_t kCountMask = (uint64_t{1} << kCountBits) - 1;
constexpr uint32_t kCreditSends = 8;  // credits in flight per peer

// The message's kind, its sender and (data) the chunk's number.
uint64_t tag_of(uint64_t kind, uint32_t sender, uint64_t count) {
  return (kind << 62) | (uint64_t{sender} << kCountBits) | (count & kCountMask);
}

// Chunk `k` is done (landed, or sent): `*count` moves past every chunk done without a gap,
// `early` keeps those after a gap. True when `*count` moved.
bool count_in_order(std::set<uint64_t> *early, uint64_t *count, uint64_t k) {
  early->insert(k);
  const uint64_t before = *count;
  while (!early->empty() && *early->begin() == *count + 1) {
    early->erase(early->begin());
    ++*count;
  }
  return *count > before;
}

}  // namespace

// Where a completion belongs: the provider's room first, as FI_CONTEXT requires.
struct Proxy::Context {
  alignas(16) unsigned char provider[Fabric::kContextBytes] = {};
  Kind kind = kData;
  bool sending = false;
  uint32_t peer = 0;  // index in peers_
  uint32_t slot = 0;
  uint64_t chunk = 0;  // data sends: the chunk's number
};

// A chunk the queue will signal ready: in the outbox (`from` null) or where it is.
struct Proxy::Outgoing {
  uint64_t chunk = 0, bytes = 0;
  const std::byte *from = nullptr;
};

struct Proxy::Peer {
  RemotePeer remote;
  uint64_t address = 0;
  // The one connection between two ranks is opened by the lower rank's hello; the higher rank
  // sends nothing to it before the hello arrived. Were both to connect at once, the provider
  // (tcp;ofi_rxm) could close the connection a message was already on, failing the transfer
  // with "Transport endpoint is not connected".
  bool may_send = false;
  bool hello_to_send = false;  // lower rank: the hello has not been handed to the fabric
  bool hello_posted = false;   // higher rank: the hello's receive is posted
  uint64_t hello = 0;          // its payload (none that matters), registered
  Context hello_context;
  // Sending: the chunks the queue will signal, the sends in flight, the receiver's credits.
  std::mutex pending_mutex;
  std::deque<Outgoing> pending;
  std::vector<bool> tx_busy;  // per slot
  std::vector<Context> tx_context;
  uint64_t credit = 0;         // chunks the receiver consumed
  std::set<uint64_t> tx_done;  // sends completed out of order, not yet counted in `sent`
  uint64_t sent = 0;           // chunks 1..sent completed their sends
  // Receiving: chunks arrived out of order, what the queue was told.
  std::vector<Context> rx_context;
  std::set<uint64_t> arrived;  // chunks landed, not yet signalled
  uint64_t signalled = 0;
  std::atomic<uint64_t> expected{0};  // chunks the queue will wait for
  uint64_t posted = 0;                // data receives posted (chunks 1..posted)
  uint64_t credit_sent = 0;
  // Credits: receives (their payload is the count) and sends.
  std::vector<uint64_t> credit_rx;
  std::vector<Context> credit_rx_context;
  std::vector<bool> credit_rx_posted;
  std::vector<uint64_t> credit_tx;
  std::vector<Context> credit_tx_context;
  std::vector<bool> credit_tx_busy;
};

Proxy::Proxy(uint32_t rank, uint32_t slots, uint64_t chunk_bytes,
             std::function<void(const std::string &)> on_failure)
    : rank_(rank), slots_(slots), chunk_bytes_(chunk_bytes), on_failure_(std::move(on_failure)) {}

Proxy::~Proxy() {
  stop();
}

void Proxy::add_peer(const RemotePeer &remote) {
  auto p = std::make_unique<Peer>();
  p->remote = remote;
  p->address = fabric_.add_peer(remote.address);
  const uint32_t index = static_cast<uint32_t>(peers_.size());
  auto contexts = [&](std::vector<Context> *c, Kind kind, bool sending, size_t count) {
    *c = std::vector<Context>(count);
    for (uint32_t s = 0; s < count; ++s) {
      (*c)[s].kind = kind;
      (*c)[s].sending = sending;
      (*c)[s].peer = index;
      (*c)[s].slot = s;
    }
  };
  contexts(&p->tx_context, kData, true, slots_);
  contexts(&p->rx_context, kData, false, slots_);
  contexts(&p->credit_rx_context, kCredit, false, slots_);
  contexts(&p->credit_tx_context, kCredit, true, kCreditSends);
  p->hello_context.kind = kHello;
  p->hello_context.peer = index;
  p->hello_context.sending = rank_ < remote.rank;
  p->may_send = p->hello_to_send = rank_ < remote.rank;
  p->tx_busy.assign(slots_, false);
  fabric_.register_buffer(remote.outbox, slots_ * chunk_bytes_);
  fabric_.register_buffer(remote.inbox, slots_ * chunk_bytes_);
  p->credit_rx.assign(slots_, 0);
  p->credit_rx_posted.assign(slots_, false);
  p->credit_tx.assign(kCreditSends, 0);
  p->credit_tx_busy.assign(kCreditSends, false);
  fabric_.register_buffer(p->credit_rx.data(), p->credit_rx.size() * sizeof(uint64_t));
  fabric_.register_buffer(p->credit_tx.data(), p->credit_tx.size() * sizeof(uint64_t));
  fabric_.register_buffer(&p->hello, sizeof p->hello);
  peers_.push_back(std::move(p));
}

void Proxy::start() {
  if (peers_.empty()) return;
  for (auto &p : peers_) post_receives(*p);
  thread_ = std::thread([this] { run(); });
  common::name_thread(thread_, "trn-proxy" + std::to_string(rank_));
}

void Proxy::stop(uint64_t drain_deadline_ns) {
  {
    std::lock_guard lock(wake_mutex_);
    drain_until_ns_.store(drain_deadline_ns, std::memory_order_relaxed);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Proxy::Peer *Proxy::peer_of(uint32_t rank) {
  for (auto &p : peers_)
    if (p->remote.rank == rank) return p.get();
  return nullptr;
}

void Proxy::expect_send(uint32_t peer, uint64_t k, uint64_t bytes, const std::byte *from) {
  if (Peer *p = peer_of(peer)) {
    std::lock_guard lock(p->pending_mutex);
    p->pending.push_back({k, bytes, from});
  }
  wake();
}

void Proxy::expect_receive(uint32_t peer, uint64_t k) {
  if (Peer *p = peer_of(peer)) p->expected.store(k, std::memory_order_release);
  wake();
}

void Proxy::wake() {
  {
    std::lock_guard lock(wake_mutex_);
    ++expectations_;
  }
  wake_.notify_one();
}

bool Proxy::busy() {
  for (auto &p : peers_) {
    const uint64_t expected = p->expected.load(std::memory_order_acquire);
    if (p->signalled < expected || p->credit_sent < expected) return true;
  }
  return sending();
}

bool Proxy::sending() {
  for (auto &p : peers_) {
    for (bool b : p->tx_busy)
      if (b) return true;
    std::lock_guard lock(p->pending_mutex);
    if (!p->pending.empty()) return true;
  }
  return false;
}

bool Proxy::post_receives(Peer &p) {
  bool any = false;
  if (!p.may_send && !p.hello_posted) {
    if (!fabric_.receive(p.address, tag_of(kHello, p.remote.rank, 0), 0, &p.hello, sizeof p.hello,
                         &p.hello_context))
      return false;
    p.hello_posted = any = true;
  }
  // Data: chunk k lands in staging slot (k - 1) % slots; chunk k + slots is posted into it once
  // chunk k landed, and the sender sends it only after the credit for chunk k.
  const uint64_t landed = p.signalled + p.arrived.size();
  while (p.posted < landed + slots_) {
    const uint64_t k = p.posted + 1;
    const uint32_t slot = static_cast<uint32_t>((k - 1) % slots_);
    if (!fabric_.receive(p.address, tag_of(kData, p.remote.rank, k), 0,
                         p.remote.inbox + slot * chunk_bytes_, chunk_bytes_, &p.rx_context[slot]))
      break;
    p.posted = k;
    any = true;
  }
  for (uint32_t s = 0; s < slots_; ++s) {
    if (p.credit_rx_posted[s]) continue;
    if (!fabric_.receive(p.address, tag_of(kCredit, p.remote.rank, 0), kCountMask, &p.credit_rx[s],
                         sizeof(uint64_t), &p.credit_rx_context[s]))
      break;
    p.credit_rx_posted[s] = true;
    any = true;
  }
  return any;
}

bool Proxy::greet(Peer &p) {
  if (!p.hello_to_send) return false;
  if (!fabric_.send(p.address, tag_of(kHello, rank_, 0), &p.hello, sizeof p.hello,
                    &p.hello_context))
    return false;
  p.hello_to_send = false;
  return true;
}

bool Proxy::progress_sends(Peer &p) {
  bool any = false;
  if (!p.may_send) return false;
  for (;;) {
    Outgoing next;
    {
      std::lock_guard lock(p.pending_mutex);
      if (p.pending.empty()) return any;
      next = p.pending.front();
    }
    const uint64_t k = next.chunk;
    const uint32_t slot = static_cast<uint32_t>((k - 1) % slots_);
    if (k > p.credit + slots_ || p.tx_busy[slot]) return any;  // the receiver's slot is in use
    uint64_t ready = 0;
    if (trn_sem_query(p.remote.out_ready, &ready) != TRN_SUCCESS || ready < k) return any;
    const std::byte *from = next.from ? next.from : p.remote.outbox + slot * chunk_bytes_;
    p.tx_context[slot].chunk = k;
    if (!fabric_.send(p.address, tag_of(kData, rank_, k), from, next.bytes, &p.tx_context[slot]))
      return any;
    p.tx_busy[slot] = true;
    std::lock_guard lock(p.pending_mutex);
    p.pending.pop_front();
    any = true;
  }
}

bool Proxy::progress_credits(Peer &p) {
  uint64_t freed = 0;
  if (!p.may_send) return false;
  if (trn_sem_query(p.remote.rx_free, &freed) != TRN_SUCCESS || freed <= p.credit_sent)
    return false;
  for (uint32_t s = 0; s < kCreditSends; ++s) {
    if (p.credit_tx_busy[s]) continue;
    p.credit_tx[s] = freed;
    if (!fabric_.send(p.address, tag_of(kCredit, rank_, 0), &p.credit_tx[s], sizeof(uint64_t),
                      &p.credit_tx_context[s]))
      return false;
    p.credit_tx_busy[s] = true;
    p.credit_sent = freed;
    return true;
  }
  return false;
}

void Proxy::mark_failed(const std::string &reason) {
  std::lock_guard lock(failed_mutex_);
  if (failed_.load()) return;
  failed_reason_ = reason;
  failed_.store(true, std::memory_order_seq_cst);
}

trn_result_t Proxy::signal(trn_sem_t sem, uint64_t value) {
  const trn_result_t r = trn_sem_signal(sem, value);
  // Sequentially consistent with mark_failed, which comes before the communicator fails its
  // semaphores: either that failure came after this signal, or this sees the flag.
  if (failed_.load(std::memory_order_seq_cst)) {
    std::lock_guard lock(failed_mutex_);
    trn_sem_fail(sem, failed_reason_.c_str());
  }
  return r;
}

void Proxy::complete(const Fabric::Completion &c) {
  auto *ctx = static_cast<Context *>(c.context);
  Peer &p = *peers_[ctx->peer];
  if (ctx->kind == kHello) {
    if (!ctx->sending) p.may_send = true;
    return;
  }
  if (ctx->sending) {
    (ctx->kind == kData ? p.tx_busy : p.credit_tx_busy)[ctx->slot] = false;
    if (ctx->kind == kData) count_sent(p, ctx->chunk);
    return;
  }
  if (ctx->kind == kCredit) {
    p.credit_rx_posted[ctx->slot] = false;
    const uint64_t credit = p.credit_rx[ctx->slot];
    if (credit > p.credit) {
      p.credit = credit;
      if (signal(p.remote.out_free, credit) != TRN_SUCCESS)
        fail(TRN_ERROR_COLLECTIVE, "marking the outbox for rank " + std::to_string(p.remote.rank) +
                                       " free: " + trn_last_error());
    }
    return;
  }
  // In order: the queue may only see chunk k once every chunk before it is in place.
  if (count_in_order(&p.arrived, &p.signalled, c.tag & kCountMask) &&
      signal(p.remote.rx_ready, p.signalled) != TRN_SUCCESS)
    fail(TRN_ERROR_COLLECTIVE, "signalling chunk " + std::to_string(p.signalled) + " from rank " +
                                   std::to_string(p.remote.rank) + " ready: " + trn_last_error());
}

void Proxy::count_sent(Peer &p, uint64_t k) {
  // In order, as for arrivals: a queue waiting for chunk k's send waits for every one before it.
  if (count_in_order(&p.tx_done, &p.sent, k) && signal(p.remote.out_sent, p.sent) != TRN_SUCCESS)
    fail(TRN_ERROR_COLLECTIVE, "signalling chunk " + std::to_string(p.sent) + " to rank " +
                                   std::to_string(p.remote.rank) + " sent: " + trn_last_error());
}

bool Proxy::credit_lost(const FabricTransferError &e) {
  const auto *ctx = static_cast<const Context *>(e.context());
  if (!ctx || ctx->peer >= peers_.size() || ctx->kind != kCredit || !ctx->sending) return false;
  // A credit tells the peer it may reuse a slot. A peer whose operations are over needs none
  // more, and leaves as soon as its own transfers are done: a credit still on its way then meets
  // the closed connection ("Transport endpoint is not connected"). A peer that died or lost its
  // link is found by the transfers it takes part in (and the communicator's timeout), never by
  // a credit alone.
  peers_[ctx->peer]->credit_tx_busy[ctx->slot] = false;
  return true;
}

std::string Proxy::transfer_name(const Context &ctx) const {
  const std::string peer = std::to_string(peers_[ctx.peer]->remote.rank);
  switch (ctx.kind) {
    case kHello:
      return ctx.sending ? "greeting rank " + peer : "awaiting rank " + peer + "'s hello";
    case kCredit:
      return ctx.sending ? "crediting rank " + peer : "awaiting rank " + peer + "'s credit";
    default:
      return (ctx.sending ? "sending to rank " : "receiving from rank ") + peer +
             " (staging slot " + std::to_string(ctx.slot) + ")";
  }
}

void Proxy::run() {
  uint64_t seen = 0;
  try {
    while (!stop_.load(std::memory_order_relaxed) ||
           (drain_until_ns_.load(std::memory_order_relaxed) > now_ns() && sending())) {
      bool any = false;
      Fabric::Completion done[16];
      size_t n = 0;
      try {
        n = fabric_.poll(done, 16);
      } catch (const FabricTransferError &e) {
        if (!credit_lost(e)) throw;
        continue;
      }
      for (size_t i = 0; i < n; ++i) complete(done[i]);
      any = n > 0;
      for (auto &p : peers_) {
        any = greet(*p) || any;
        any = progress_sends(*p) || any;
        any = progress_credits(*p) || any;
        any = post_receives(*p) || any;
      }
      if (any) continue;
      // While transfers are under way the provider needs progress calls (its segments and
      // acknowledgements): poll, yielding the core between polls to whatever else may run
      // (the queues that copy and reduce). Not a sleep: the shortest, usleep(1), lasts ~55 us
      // with the default timer slack, and each step of a transfer would wait that long to be
      // seen. Otherwise sleep until an operation expects a transfer, waking now and then for
      // the provider's traffic.
      if (busy()) {
        sched_yield();
        continue;
      }
      std::unique_lock lock(wake_mutex_);
      wake_.wait_for(lock, std::chrono::milliseconds(2),
                     [&] { return expectations_ != seen || stop_.load(); });
      seen = expectations_;
    }
  } catch (const FabricTransferError &e) {
    // Name the peer: a host that died shows here first, before the rendezvous service's word.
    const auto *ctx = static_cast<const Context *>(e.context());
    if (ctx && ctx->peer < peers_.size()) {
      const RemotePeer &peer = peers_[ctx->peer]->remote;
      on_failure_("the fabric lost rank " + std::to_string(peer.rank) + " on " + peer.host +
                  " (its process or host died, or the link dropped) while " + transfer_name(*ctx) +
                  ": " + e.what());
    } else {
      on_failure_(e.what());
    }
  } catch (const CommError &e) {
    on_failure_(e.what());
  }
}

}  // namespace trn::comm
