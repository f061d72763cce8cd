#include "comm/communicator.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <random>

#include "comm/communicator_parts.hpp"
#include "comm/config.hpp"
#include "comm/error.hpp"
#include "comm/fabric_library.hpp"
#include "comm/host.hpp"
#include "common/clock.hpp"
#include "common/thread_name.hpp"

namespace trn::comm {

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

}  // namespace trn::comm
