// One driver instance: the configuration, the devices it opened, and per device what this
// process keeps beside the shared state (commit map, held ranges, host registrations, simulated
// clock, kernel executors, semaphores it holds).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "drivers/hal.h"
#include "sim/commit_map.hpp"
#include "sim/config.hpp"
#include "sim/core_arbiter.hpp"
#include "sim/device_state.hpp"
#include "sim/dma_helpers.hpp"
#include "sim/held_ranges.hpp"
#include "sim/host_registry.hpp"
#include "sim/kernel_runner.hpp"

namespace trn::sim {

class SemCore;
class SemPoller;

class DeviceRuntime {
 public:
  DeviceRuntime(trn_hal_instance_t &instance, DeviceState &state, uint32_t index);
  DeviceRuntime(const DeviceRuntime &) = delete;
  DeviceRuntime &operator=(const DeviceRuntime &) = delete;

  trn_hal_instance_t *instance() const { return &instance_; }
  DeviceState &state() { return state_; }
  uint32_t index() const { return index_; }
  CommitMap &commits() { return commits_; }
  // The ranges of the device's memory this process holds (reserved or imported).
  HeldRanges &held() { return held_; }
  // Held across a change of who owns the device's chunks and this process's record of it (held
  // ranges, commits): a range released on one thread is free in the shared state before it is
  // forgotten here, and another thread's reservation of the same chunks in between would
  // otherwise be forgotten with it.
  [[nodiscard]] std::unique_lock<std::mutex> lock_ownership() {
    return std::unique_lock(ownership_mu_);
  }
  HostRegistry &hosts() { return hosts_; }
  trn_generation_t generation() const {
    return static_cast<trn_generation_t>(state_.header().generation);
  }

  // The device memory mapped into this process (mapped once, then read without a lock).
  trn_result_t hbm_base(char **base, std::string *why);
  // Executors of the device's cores, made on first launch.
  CoreExecutors &executors();
  // Who runs a launch next on a physical core (queues of one core take turns for its engines).
  CoreArbiter &arbiter(uint32_t physical_core) { return *arbiters_[physical_core]; }

  // The device's simulated time: the latest of its queues' clocks.
  uint64_t time_ns() const { return time_ns_.load(std::memory_order_acquire); }
  void advance_time(uint64_t ns);

  // Adds to this process's counters of a physical core (atomic adds: any thread may).
  void account(uint32_t physical_core, const trn_hal_core_activity_t &delta);

  // This process's shared semaphores, one SemCore per (record, id) however many holds it has.
  // shared_sem finds it or has `make(&core)` make it, serialised so that concurrent imports
  // share one.
  template <typename Make>
  trn_result_t shared_sem(uint32_t record, uint64_t id, Make make, std::shared_ptr<SemCore> *out) {
    std::shared_ptr<SemCore> made;  // outlives the lock: a SemCore going takes it (below)
    std::lock_guard lock(sems_mu_);
    auto it = shared_sems_.find({record, id});
    if (it != shared_sems_.end())
      if (auto known = it->second.lock()) {
        *out = std::move(known);
        return TRN_SUCCESS;
      }
    if (trn_result_t r = make(&made); r != TRN_SUCCESS) return r;
    std::erase_if(shared_sems_, [](const auto &entry) { return entry.second.expired(); });
    shared_sems_[{record, id}] = made;
    *out = std::move(made);
    return TRN_SUCCESS;
  }
  // The SemCore of shared semaphore (record, id) is going: lets go of the process's hold in the
  // device's state, unless an import made a new SemCore meanwhile (it found the old one
  // expiring, and shares the process's one hold, which it now keeps).
  trn_result_t let_go_shared_sem(uint32_t record, uint64_t id, std::string *why);

 private:
  trn_hal_instance_t &instance_;
  DeviceState &state_;
  const uint32_t index_;
  CommitMap commits_;
  std::mutex ownership_mu_;  // see lock_ownership()
  HeldRanges held_;
  HostRegistry hosts_;
  std::atomic<char *> hbm_base_{nullptr};
  std::atomic<uint64_t> time_ns_{0};
  std::once_flag executors_made_;
  std::unique_ptr<CoreExecutors> executors_;
  std::vector<std::unique_ptr<CoreArbiter>> arbiters_;  // one per physical core
  std::mutex sems_mu_;                                  // guards shared_sems_
  std::map<std::pair<uint32_t, uint64_t>, std::weak_ptr<SemCore>> shared_sems_;
};

// Objects an instance hands out (semaphore holds, kernels): close frees those the caller did not.
template <typename T>
class Handouts {
 public:
  T *adopt(std::unique_ptr<T> object) {
    std::lock_guard lock(mu_);
    live_.insert(object.get());
    return object.release();
  }
  // Frees it; an object this instance does not hold (already freed) is left alone.
  void destroy(T *object) {
    {
      std::lock_guard lock(mu_);
      if (live_.erase(object) == 0) return;
    }
    delete object;
  }
  void destroy_all() {
    std::set<T *> left;
    {
      std::lock_guard lock(mu_);
      left.swap(live_);
    }
    for (T *object : left) delete object;
  }

 private:
  std::mutex mu_;  // guards live_
  std::set<T *> live_;
};

}  // namespace trn::sim

struct trn_hal_instance_s {
  trn_hal_instance_s();
  ~trn_hal_instance_s();
  trn::sim::SimConfig config;
  // Before everything that moves bytes with them (queues, devices): destroyed after them.
  trn::sim::DmaHelpers dma;
  trn_hal_process_identity_t identity{};
  std::string command;
  std::string runtime_version;
  std::vector<std::unique_ptr<trn::sim::DeviceState>> devices;
  std::vector<std::unique_ptr<trn::sim::DeviceRuntime>> runtimes;  // one per device
  trn_result_t status = TRN_SUCCESS;
  std::string status_detail;
  std::unique_ptr<trn::sim::SemPoller> poller;  // watches shared semaphores for sem_watch
  std::mutex queues_mu;                         // guards queues
  std::set<trn_hal_queue_t *> queues;           // open queues, destroyed by close
  trn::sim::Handouts<trn_hal_sem_t> sems;       // semaphore holds
  trn::sim::Handouts<trn_hal_kernel_t> kernels;
};
