#include "comm/communicator.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <type_traits>

#include "comm/bytes.hpp"
#include "comm/config.hpp"
#include "comm/error.hpp"
#include "comm/fabric_library.hpp"
#include "comm/host.hpp"
#include "common/clock.hpp"
#include "common/thread_name.hpp"

namespace trn::comm {

namespace {

constexpr uint32_t kMaxRanks = 64;
constexpr uint64_t kSliceNs = 5'000'000;  // how often a blocked wait looks at the failure state
// Sends in place: from chunks of this size (copying a smaller one into the outbox costs less
// than waiting for its send before the operation ends), from allocations up to this size
// (mapping one commits all of it).
constexpr uint64_t kInPlaceMinBytes = 64 << 10;
constexpr uint64_t kInPlaceMaxAllocation = 1ull << 30;

// One random number per process: tells processes apart where pids might repeat (other hosts).
uint64_t process_token() {
  static const uint64_t token = [] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device() ^ static_cast<uint64_t>(getpid());
  }();
  return token;
}

// kAbort's payload: the operation's number (0: none), then the reason.
std::vector<uint8_t> abort_payload(uint64_t operation, const std::string &why) {
  std::vector<uint8_t> payload(sizeof operation + why.size());
  std::memcpy(payload.data(), &operation, sizeof operation);
  std::memcpy(payload.data() + sizeof operation, why.data(), why.size());
  return payload;
}

trn_device_t device_by_index(uint32_t index) {
  uint32_t count = 0;
  check(trn_device_get(&count, nullptr), "trn_device_get");
  std::vector<trn_device_t> devices(count);
  check(trn_device_get(&count, devices.data()), "trn_device_get");
  for (trn_device_t device : devices) {
    trn_device_properties_t properties = TRN_DEVICE_PROPERTIES_INIT;
    check(trn_device_get_properties(device, &properties), "trn_device_get_properties");
    if (properties.index == index) return device;
  }
  fail(TRN_ERROR_COLLECTIVE, "a peer's device " + std::to_string(index) +
                                 " is not one of this process's devices (set TRN_SIM_DEVICES "
                                 "alike for every rank)");
}

}  // namespace

std::shared_ptr<Comm> Comm::create(const RendezvousId &id, const CommConfig &config) {
  if (!config.core) fail(TRN_ERROR_NULL_POINTER, "desc->core is NULL: give the rank's NeuronCore");
  if (config.size == 0 || config.size > kMaxRanks)
    fail(TRN_ERROR_INVALID_ARGUMENT, "desc->size is " + std::to_string(config.size) +
                                         ": a communicator has 1 to " + std::to_string(kMaxRanks) +
                                         " ranks");
  if (config.rank >= config.size)
    fail(TRN_ERROR_INVALID_ARGUMENT, "desc->rank " + std::to_string(config.rank) +
                                         " is not below desc->size " + std::to_string(config.size));
  std::shared_ptr<Comm> comm(new Comm());
  try {
    comm->join(id, config);
  } catch (...) {
    comm->stop_monitor();
    comm->bootstrap_.close(false);
    comm->release_resources();
    throw;
  }
  return comm;
}

Comm::~Comm() {
  stop_monitor();
}

void Comm::start_monitor() {
  stop_event_ = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_event_)
    fail(TRN_ERROR_OUT_OF_HOST_MEMORY,
         std::string("cannot make an eventfd for the communicator's monitor: ") +
             std::strerror(errno));
  monitor_thread_ = std::thread([this] { monitor(); });
  common::name_thread(monitor_thread_, "trn-comm-mon" + std::to_string(rank_));
}

void Comm::stop_monitor() {
  stop_ = true;
  if (stop_event_) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(stop_event_.get(), &one, sizeof one);
  }
  if (monitor_thread_.joinable()) monitor_thread_.join();
}

void Comm::join(const RendezvousId &id, const CommConfig &config) {
  rank_ = config.rank;
  size_ = config.size;
  all_ranks_.resize(size_);
  for (uint32_t r = 0; r < size_; ++r) all_ranks_[r] = r;
  core_ = config.core;
  timeout_ns_ = config.timeout_ns ? config.timeout_ns : default_timeout_ns();
  const std::optional<uint64_t> env_chunk = env_chunk_bytes();
  chunk_chosen_ = config.chunk_bytes != 0 || env_chunk.has_value();
  // Without a choice, the larger default until the table shows whether any host's ranks use
  // two devices (read_table takes the smaller one when none do).
  chunk_bytes_ =
      config.chunk_bytes ? config.chunk_bytes : env_chunk.value_or(larger_default_chunk_bytes());
  ring_min_bytes_ = default_ring_min_bytes();
  send_in_place_ = send_in_place_enabled();
  if (chunk_bytes_ % 4096 != 0 || chunk_bytes_ < 4096 || chunk_bytes_ > (64ull << 20))
    fail(TRN_ERROR_INVALID_ARGUMENT, "chunk_bytes " + std::to_string(chunk_bytes_) +
                                         " is not a multiple of 4096 from 4096 to 64 MiB");
  trn_core_properties_t core = TRN_CORE_PROPERTIES_INIT;
  check(trn_core_get_properties(core_, &core), "desc->core");
  device_index_ = core.device_index;
  core_index_ = core.index;
  device_ = device_by_index(device_index_);
  trn_pool_desc_t pool = TRN_POOL_DESC_INIT;
  pool.hbm_bank = core.hbm_bank;
  check(trn_pool_create(device_, &pool, &pool_), "creating the communicator's pool");
  links_.resize(size_);
  if (size_ > 1) {
    trn_sem_desc_t sem = TRN_SEM_DESC_INIT;
    sem.flags = TRN_SEM_FLAG_EXPORTABLE;
    for (uint32_t p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      check(trn_sem_create(device_, &sem, &links_[p].rx_ready), "creating a semaphore");
      check(trn_sem_create(device_, &sem, &links_[p].rx_free), "creating a semaphore");
    }
    // Rank 0's is the gate of every rank on its host (open_gate).
    trn_sem_desc_t gate = TRN_SEM_DESC_INIT;
    if (rank_ == 0) gate.flags = TRN_SEM_FLAG_EXPORTABLE;
    check(trn_sem_create(device_, &gate, &gate_), "creating a semaphore");
  }
  read_table(bootstrap_.join(id, rank_, size_, host_label(), make_blob(), timeout_ns_));
  start_monitor();
  if (size_ > 1) {
    share_staging();
    // No rank may return (and perhaps end the communicator, taking its exports with it) before
    // every rank imported what it needs of the others: one more round, after the imports. Across
    // hosts the fabric's round is that round.
    if (hosts_ > 1)
      connect_remote_peers();
    else
      gather({}, "the rendezvous' last round (every rank has imported its peers' buffers)");
  }
  // A rank that failed or left meanwhile (its word was in the last table) fails the join too.
  if (std::string why = error(); !why.empty()) fail(TRN_ERROR_COLLECTIVE, why);
}

std::vector<uint8_t> Comm::make_blob() {
  std::vector<uint8_t> out;
  put(&out, static_cast<uint32_t>(getpid()));
  put(&out, device_index_);
  put(&out, core_index_);
  put(&out, process_token());
  const std::string host = host_key();
  put(&out, static_cast<uint32_t>(host.size()));
  out.insert(out.end(), host.begin(), host.end());
  trn_ipc_handle_t none{};
  trn_ipc_handle_t handle{};
  for (uint32_t p = 0; p < size_; ++p) {
    for (trn_sem_t sem : {links_[p].rx_ready, links_[p].rx_free}) {
      if (!sem) {
        put(&out, none);
        continue;
      }
      check(trn_sem_export(sem, &handle), "exporting a semaphore");
      put(&out, handle);
    }
  }
  if (rank_ == 0 && gate_) check(trn_sem_export(gate_, &handle), "exporting a semaphore");
  put(&out, rank_ == 0 && gate_ ? handle : none);
  return out;
}

void Comm::read_table(const std::vector<std::vector<uint8_t>> &blobs) {
  ranks_.resize(size_);
  std::set<uint64_t> processes;
  local_ranks_ = 0;
  for (uint32_t r = 0; r < size_; ++r) {
    size_t at = 0;
    RankInfo &info = ranks_[r];
    info.pid = take<uint32_t>(blobs[r], &at, "a rank\'s description");
    info.device_index = take<uint32_t>(blobs[r], &at, "a rank\'s description");
    info.core_index = take<uint32_t>(blobs[r], &at, "a rank\'s description");
    info.process_token = take<uint64_t>(blobs[r], &at, "a rank\'s description");
    const auto host_bytes = take<uint32_t>(blobs[r], &at, "a rank\'s description");
    if (at + host_bytes > blobs[r].size())
      fail(TRN_ERROR_COLLECTIVE, "rendezvous: a rank's description is truncated");
    info.host.assign(blobs[r].begin() + static_cast<long>(at),
                     blobs[r].begin() + static_cast<long>(at + host_bytes));
    at += host_bytes;
    info.ready.resize(size_);
    info.freed.resize(size_);
    for (uint32_t p = 0; p < size_; ++p) {
      info.ready[p] = take<trn_ipc_handle_t>(blobs[r], &at, "a rank\'s description");
      info.freed[p] = take<trn_ipc_handle_t>(blobs[r], &at, "a rank\'s description");
    }
    info.gate = take<trn_ipc_handle_t>(blobs[r], &at, "a rank\'s description");
    if (at != blobs[r].size())
      fail(TRN_ERROR_COLLECTIVE, "rendezvous: rank " + std::to_string(r) + "'s description has " +
                                     std::to_string(blobs[r].size() - at) +
                                     " bytes more than this release's (ranks of different trn "
                                     "releases?)");
    processes.insert(info.process_token);
    if (info.process_token == process_token()) ++local_ranks_;
  }
  processes_ = static_cast<uint32_t>(processes.size());
  std::set<std::string> hosts;
  for (const RankInfo &info : ranks_) hosts.insert(info.host);
  hosts_ = static_cast<uint32_t>(hosts.size());
  find_host_groups();
  // Devices are told apart by host too: another host's device 0 is another device.
  std::set<std::pair<std::string, uint32_t>> host_devices;
  for (const RankInfo &info : ranks_) host_devices.emplace(info.host, info.device_index);
  devices_ = static_cast<uint32_t>(host_devices.size());
  // Every rank sees the same table, so all choose alike (before any slot offset is taken).
  std::set<std::string> hosts_of_devices;
  for (const auto &[host, device] : host_devices) hosts_of_devices.insert(host);
  const bool device_links = hosts_of_devices.size() < host_devices.size();
  if (!chunk_chosen_ && !device_links) chunk_bytes_ = default_chunk_bytes(false);
  // Every pair, before anything is imported: every rank sees the same table and fails alike,
  // before a peer that failed first lets go of what this rank would import.
  for (uint32_t r = 0; r < size_; ++r)
    for (uint32_t q = r + 1; q < size_; ++q)
      if (ranks_[q].device_index == ranks_[r].device_index &&
          ranks_[q].core_index == ranks_[r].core_index && ranks_[q].pid == ranks_[r].pid &&
          ranks_[q].process_token == ranks_[r].process_token)
        fail(TRN_ERROR_COLLECTIVE, "ranks " + std::to_string(r) + " and " + std::to_string(q) +
                                       " are the same core of the same process");
}

void Comm::share_staging() {
  // Every rank takes part in the round, also one that could not make its buffer: it sends its
  // reason instead of a handle, so that all fail alike rather than wait.
  std::vector<uint8_t> word;
  try {
    check(trn_mem_alloc(pool_, static_cast<uint64_t>(size_) * slots_ * chunk_bytes_, 4096,
                        TRN_MEM_CATEGORY_COLLECTIVES, TRN_MEM_FLAG_EXPORTABLE, &staging_),
          "allocating the staging buffer (" + std::to_string(size_) + " ranks x " +
              std::to_string(slots_) + " slots x " + std::to_string(chunk_bytes_) + " bytes)");
    trn_ipc_handle_t handle{};
    check(trn_mem_export(staging_, &handle), "exporting the staging buffer");
    put(&word, uint32_t{TRN_SUCCESS});
    put(&word, handle);
  } catch (const CommError &e) {
    word.clear();
    put(&word, static_cast<uint32_t>(e.result()));
    const std::string why = e.what();
    word.insert(word.end(), why.begin(), why.end());
  }
  const auto all = gather(word, "exchanging the staging buffers");
  // This rank's own failure first, with its own result; a peer's is a collective failure here.
  for (uint32_t i = 0; i < size_; ++i) {
    const uint32_t r = (rank_ + i) % size_;
    size_t at = 0;
    const auto result = static_cast<trn_result_t>(take<uint32_t>(all[r], &at, "a staging word"));
    if (result != TRN_SUCCESS)
      fail(r == rank_ ? result : TRN_ERROR_COLLECTIVE,
           "rank " + std::to_string(r) + " on " + host_label(ranks_[r].host) + ": " +
               std::string(all[r].begin() + static_cast<long>(at), all[r].end()));
    ranks_[r].staging = take<trn_ipc_handle_t>(all[r], &at, "a staging word");
  }
  for (uint32_t r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    PeerLink &link = links_[r];
    if (ranks_[r].host != ranks_[rank_].host) {
      link.remote = true;  // connect_remote_peers
      continue;
    }
    link.tx_base = slot_offset(rank_, 1);
    const trn_device_t peer_device = device_by_index(ranks_[r].device_index);
    auto import = [&](auto import_fn, const auto &handle, auto *into, const char *what) {
      std::remove_pointer_t<decltype(into)> imported = nullptr;
      try {
        check(import_fn(peer_device, &handle, &imported),
              "importing rank " + std::to_string(r) + "'s " + what);
      } catch (const CommError &e) {
        // Most likely the peer failed (a timeout of its own) and let go of what it exported:
        // its failure, which the service reports, is the cause to name.
        fail_naming_cause("rank " + std::to_string(rank_) + ": " + e.what());
      }
      publish(into, imported);
    };
    import(trn_mem_import, ranks_[r].staging, &link.tx_staging, "staging buffer");
    import(trn_sem_import, ranks_[r].ready[rank_], &link.tx_ready, "semaphore");
    import(trn_sem_import, ranks_[r].freed[rank_], &link.tx_free, "semaphore");
  }
  if (hosts_ == 1) share_calls();
}

void Comm::share_calls() {
  if (rank_ != 0) {
    trn_sem_t shared = nullptr;
    try {
      check(trn_sem_import(device_by_index(ranks_[0].device_index), &ranks_[0].gate, &shared),
            "importing rank 0's gate");
    } catch (const CommError &e) {
      fail_naming_cause("rank " + std::to_string(rank_) + ": " + e.what());
    }
    trn_sem_t own = gate_;
    publish(&gate_, shared);
    trn_sem_destroy(own);
  }
  // The table lies in rank 0's own slots of its staging buffer, which no rank sends to (a rank
  // never sends to itself, and chunks for other hosts leave from outboxes of their own).
  void *staging = nullptr;
  check(trn_mem_map(rank_ == 0 ? staging_ : links_[0].tx_staging, &staging),
        "mapping rank 0's staging buffer");
  calls_ = std::make_unique<CallTable>(static_cast<std::byte *>(staging) + slot_offset(0, 1),
                                       slots_ * chunk_bytes_, size_, rank_);
}

void Comm::find_host_groups() {
  // Hosts in order of their first rank; each host's ranks in rank order.
  std::vector<std::string> order;
  std::vector<std::vector<uint32_t>> members;
  for (uint32_t r = 0; r < size_; ++r) {
    auto it = std::find(order.begin(), order.end(), ranks_[r].host);
    if (it == order.end()) {
      order.push_back(ranks_[r].host);
      members.emplace_back();
      it = order.end() - 1;
    }
    members[static_cast<size_t>(it - order.begin())].push_back(r);
  }
  if (members.size() < 2 || members[0].size() < 2) return;
  for (const auto &m : members)
    if (m.size() != members[0].size()) return;
  HostGroups g;
  for (size_t h = 0; h < members.size(); ++h) {
    const auto at = std::find(members[h].begin(), members[h].end(), rank_);
    if (at == members[h].end()) continue;
    g.local = members[h];
    g.local_pos = static_cast<uint32_t>(at - members[h].begin());
    g.cross_pos = static_cast<uint32_t>(h);
  }
  for (const auto &m : members) g.cross.push_back(m[g.local_pos]);
  host_groups_ = std::move(g);
}

namespace {

// What ranks on different hosts must agree on to talk over the fabric: the provider and, over
// rxm, its eager limit (fabric_library.hpp).
std::string fabric_settings(const std::string &provider) {
  if (provider.find("ofi_rxm") == std::string::npos) return provider;
  const std::string &limit = rxm_eager_limit();
  return provider + ", " + kEagerLimitVariable + "=" + (limit.empty() ? "unset" : limit);
}

// A rank's word in the round that connects the fabric endpoints. Its first byte says which
// layout follows: kEndpointReady, the settings' length (two bytes), the settings and the
// endpoint's address; or kEndpointFailed, the result (four bytes) and why the endpoint could not
// be opened. A rank of an earlier release sent 1 and its address alone.
constexpr uint8_t kEndpointFailed = 0, kEndpointReady = 2;
struct EndpointWord {
  bool ok = false;
  trn_result_t result = TRN_ERROR_COLLECTIVE;  // a failure's
  std::string settings_or_why;
  std::vector<uint8_t> address;
};

std::vector<uint8_t> encode(const EndpointWord &w) {
  std::vector<uint8_t> out{w.ok ? kEndpointReady : kEndpointFailed};
  const size_t n = std::min<size_t>(w.settings_or_why.size(), UINT16_MAX);
  if (w.ok)
    put(&out, static_cast<uint16_t>(n));
  else
    put(&out, static_cast<int32_t>(w.result));
  out.insert(out.end(), w.settings_or_why.begin(), w.settings_or_why.begin() + n);
  out.insert(out.end(), w.address.begin(), w.address.end());
  return out;
}

EndpointWord decode(const std::vector<uint8_t> &bytes) {
  EndpointWord w;
  if (bytes.empty()) {
    w.settings_or_why = "no answer";
  } else if (bytes[0] == kEndpointReady && bytes.size() >= 3) {
    size_t at = 1;
    const size_t n = std::min<size_t>(take<uint16_t>(bytes, &at, "an endpoint"), bytes.size() - 3);
    w.ok = true;
    w.settings_or_why.assign(bytes.begin() + 3, bytes.begin() + 3 + static_cast<ptrdiff_t>(n));
    w.address.assign(bytes.begin() + 3 + static_cast<ptrdiff_t>(n), bytes.end());
  } else if (bytes[0] == kEndpointFailed && bytes.size() >= 5) {
    size_t at = 1;
    w.result = static_cast<trn_result_t>(take<int32_t>(bytes, &at, "an endpoint"));
    w.settings_or_why.assign(bytes.begin() + 5, bytes.end());
  } else {
    w.settings_or_why =
        "its word has another layout (a rank of another release of libtrn_comm: every rank "
        "needs the same one)";
  }
  return w;
}

}  // namespace

void Comm::connect_remote_peers() {
  // Every rank takes part in the round, also one whose endpoint failed to open: it sends its
  // reason instead of an address, so that all fail alike rather than wait.
  EndpointWord word;
  try {
    auto proxy =
        std::make_unique<Proxy>(rank_, slots_, chunk_bytes_, [this](const std::string &why) {
          fail_comm("rank " + std::to_string(rank_) + ": " + why, true);
        });
    {
      std::lock_guard lock(resources_mutex_);  // the monitor's fail_semaphores reads it
      proxy_ = std::move(proxy);
    }
    word.settings_or_why = fabric_settings(proxy_->provider());
    word.address = proxy_->address();
    word.ok = true;
  } catch (const CommError &e) {
    word.result = e.result();
    word.settings_or_why = e.what();
  }
  const auto gathered = gather(encode(word), "connecting the hosts' fabric endpoints");
  std::vector<EndpointWord> all;
  for (const auto &bytes : gathered) all.push_back(decode(bytes));
  for (uint32_t r = 0; r < size_; ++r) {
    if (all[r].ok) continue;
    // A setting refused is the same refusal on every rank; anything else leaves it unreachable.
    const bool config = all[r].result == TRN_ERROR_INVALID_CONFIG;
    fail(config ? TRN_ERROR_INVALID_CONFIG : TRN_ERROR_COLLECTIVE,
         "rank " + std::to_string(r) + " on " + host_label(ranks_[r].host) +
             (config ? ": " : " cannot reach other hosts: ") + all[r].settings_or_why);
  }
  for (uint32_t r = 1; r < size_; ++r)
    if (all[r].settings_or_why != all[0].settings_or_why)
      fail(TRN_ERROR_INVALID_CONFIG,
           "rank 0 on " + host_label(ranks_[0].host) + " uses libfabric's " +
               all[0].settings_or_why + " but rank " + std::to_string(r) + " on " +
               host_label(ranks_[r].host) + " uses " + all[r].settings_or_why +
               ": ranks must use the same provider and, over ofi_rxm, the same " +
               kEagerLimitVariable + " (mixed limits stall transfers); set FI_PROVIDER and " +
               kEagerLimitVariable + " alike on every host (unset, trn picks the limit)");
  trn_sem_desc_t sem = TRN_SEM_DESC_INIT;
  void *staging = nullptr;
  check(trn_mem_map(staging_, &staging), "mapping the staging buffer for the fabric");
  for (uint32_t r = 0; r < size_; ++r) {
    PeerLink &link = links_[r];
    if (!link.remote) continue;
    check(trn_mem_alloc(pool_, uint64_t{slots_} * chunk_bytes_, 4096, TRN_MEM_CATEGORY_COLLECTIVES,
                        0, &link.tx_staging),
          "allocating the outbox for rank " + std::to_string(r) + " on another host");
    for (trn_sem_t *field : {&link.tx_ready, &link.tx_free, &link.tx_sent}) {
      trn_sem_t created = nullptr;  // made, then published (the monitor fails these)
      const trn_result_t result = trn_sem_create(device_, &sem, &created);
      publish(field, created);
      check(result, "creating a semaphore");
    }
    void *outbox = nullptr;
    check(trn_mem_map(link.tx_staging, &outbox), "mapping an outbox for the fabric");
    RemotePeer peer;
    peer.rank = r;
    peer.host = host_label(ranks_[r].host);
    peer.address = all[r].address;
    peer.outbox = static_cast<std::byte *>(outbox);
    peer.out_ready = link.tx_ready;
    peer.out_free = link.tx_free;
    peer.out_sent = link.tx_sent;
    peer.inbox = static_cast<std::byte *>(staging) + slot_offset(r, 1);
    peer.rx_ready = link.rx_ready;
    peer.rx_free = link.rx_free;
    proxy_->add_peer(peer);
  }
  if (proxy_->sends_in_place() && send_in_place_) in_place_min_bytes_ = kInPlaceMinBytes;
  proxy_->start();
}

void Comm::fill_info(trn_comm_info_t *info) const {
  info->rank = rank_;
  info->size = size_;
  info->device_index = device_index_;
  info->core_index = core_index_;
  info->local_ranks = local_ranks_;
  info->devices = devices_;
  info->processes = processes_;
  info->chunk_bytes = chunk_bytes_;
  info->timeout_ns = timeout_ns_;
  info->operations = operations_;
  std::lock_guard lock(resources_mutex_);
  const std::string transport = proxy_ ? "fabric (" + proxy_->provider() + ")" : "device";
  std::snprintf(info->transport, sizeof info->transport, "%s", transport.c_str());
}

std::string Comm::error() const {
  // Every operation and synchronize asks: a healthy communicator answers without the lock.
  if (!failed_.load(std::memory_order_acquire)) return {};
  std::lock_guard lock(state_mutex_);
  return error_;
}

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

std::vector<std::vector<uint8_t>> Comm::gather(const std::vector<uint8_t> &payload,
                                               const char *what) {
  {
    std::lock_guard lock(state_mutex_);
    gathered_.reset();
  }
  const uint64_t deadline = common::deadline_after(timeout_ns_, now_ns());
  try {
    bootstrap_.send(kGather, payload, deadline);
  } catch (const CommError &e) {
    fail(TRN_ERROR_COLLECTIVE, std::string("rank ") + std::to_string(rank_) + ": " + e.what());
  }
  std::unique_lock lock(state_mutex_);
  while (!gathered_ && error_.empty()) {
    if (now_ns() >= deadline) {
      lock.unlock();
      fail_comm(std::string(what) + " on rank " + std::to_string(rank_) + " timed out after " +
                    duration_text(timeout_ns_) + ": not every rank took part",
                true);
      lock.lock();
      break;
    }
    state_cv_.wait_for(lock, std::chrono::milliseconds(5));
  }
  // A table that came is every rank's word, even when a failure came after it: a rank that
  // found a setting refused in it may leave before this one reads it, and the refusal, which
  // this rank finds in the same table, says more than that rank's departure.
  if (!gathered_) fail(TRN_ERROR_COLLECTIVE, error_);
  auto all = std::move(*gathered_);
  gathered_.reset();
  if (all.size() != size_) fail(TRN_ERROR_COLLECTIVE, std::string(what) + ": a short table");
  return all;
}

void Comm::shutdown(bool abort) {
  // An abort fails the communicator first: an operation waiting on another thread (for queue
  // space, in a split's gather) then ends within a slice.
  if (abort) fail_comm("rank " + std::to_string(rank_) + " aborted the communicator", true);
  {
    // An operation another thread is queuing finishes first; none starts after.
    std::lock_guard lock(op_mutex_);
    closed_ = true;
  }
  if (!abort) {
    trn_result_t waited = TRN_SUCCESS;
    try {
      waited = synchronize(timeout_ns_);
    } catch (const CommError &) {
      // Failed already: the resources go all the same.
    }
    // Its operations' commands must not wait forever on chunks that will never come, and the
    // peers must not take this for a clean departure.
    if (waited == TRN_TIMEOUT)
      fail_comm("rank " + std::to_string(rank_) + " was destroyed with operations unfinished " +
                    duration_text(timeout_ns_) + " after the call",
                true);
  }
  const bool clean = error().empty();
  // The last chunks may still be on their way to the peers: let them go out first. (Not under
  // resources_mutex_, which the proxy's failure report takes; only this thread changes proxy_.)
  if (clean && proxy_) proxy_->stop(common::deadline_after(timeout_ns_, now_ns()));
  stop_monitor();
  bootstrap_.close(clean);
  release_resources();
}

void Comm::release_resources() {
  std::unique_ptr<Proxy> proxy;
  {
    std::lock_guard lock(resources_mutex_);
    released_ = true;
    proxy = std::move(proxy_);
  }
  // Its thread uses the semaphores and memory let go below; stopped without the lock, which its
  // failure reports (fail_semaphores) would take.
  proxy.reset();
  // Commands that still wait or signal keep a semaphore in use for a moment after a failure:
  // the queue cancels them, then the semaphore can go.
  auto destroy = [](trn_sem_t sem) {
    if (!sem) return;
    for (int i = 0; i < 400; ++i) {
      if (trn_sem_destroy(sem) != TRN_ERROR_HANDLE_IN_USE) return;
      usleep(5000);
    }
  };
  for (PeerLink &link : links_) {
    for (trn_sem_t *sem :
         {&link.tx_ready, &link.tx_free, &link.tx_sent, &link.rx_ready, &link.rx_free}) {
      destroy(*sem);
      *sem = nullptr;
    }
    trn_mem_free(link.tx_staging);
    link.tx_staging = nullptr;
  }
  calls_.reset();  // it reads the memory let go below
  destroy(gate_);
  gate_ = nullptr;
  trn_mem_free(staging_);
  staging_ = nullptr;
  for (trn_mem_t mem : leftover_scratch_) trn_mem_free(mem);
  leftover_scratch_.clear();
  trn_pool_destroy(pool_);
  pool_ = nullptr;
}

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

}  // namespace trn::comm
