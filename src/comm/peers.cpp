// A rank's part of the rendezvous: what it tells the others (its place and exported
// semaphores), the table of every rank it reads back, and the imports of its peers' staging
// buffers, semaphores and table of calls, or the fabric endpoints for peers on other hosts.
#include <unistd.h>

#include <algorithm>
#include <set>
#include <type_traits>

#include "comm/bytes.hpp"
#include "comm/communicator.hpp"
#include "comm/communicator_parts.hpp"
#include "comm/config.hpp"
#include "comm/error.hpp"
#include "comm/fabric_library.hpp"
#include "comm/host.hpp"

namespace trn::comm {

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

}  // namespace trn::comm
