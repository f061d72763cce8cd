#include "sim/sim_instance.hpp"

namespace trn::sim {

DeviceRuntime::DeviceRuntime(trn_hal_instance_t &instance, DeviceState &state, uint32_t index)
    : instance_(instance), state_(state), index_(index), commits_(state), hosts_(index) {
  for (uint32_t core = 0; core < state.header().physical_cores; ++core)
    arbiters_.push_back(std::make_unique<CoreArbiter>());
}

trn_result_t DeviceRuntime::hbm_base(char **base, std::string *why) {
  char *known = hbm_base_.load(std::memory_order_acquire);
  if (known == nullptr) {
    void *host = nullptr;
    if (trn_result_t r = state_.hbm_map(0, 0, &host, why); r != TRN_SUCCESS) return r;
    known = static_cast<char *>(host);
    hbm_base_.store(known, std::memory_order_release);
  }
  *base = known;
  return TRN_SUCCESS;
}

CoreExecutors &DeviceRuntime::executors() {
  std::call_once(executors_made_, [&] {
    executors_ = std::make_unique<CoreExecutors>(generation(), instance_.config.race_check);
  });
  return *executors_;
}

void DeviceRuntime::advance_time(uint64_t ns) {
  uint64_t seen = time_ns_.load(std::memory_order_relaxed);
  while (seen < ns && !time_ns_.compare_exchange_weak(seen, ns, std::memory_order_acq_rel,
                                                      std::memory_order_relaxed)) {
  }
}

void DeviceRuntime::account(uint32_t physical_core, const trn_hal_core_activity_t &delta) {
  state_.core_account(physical_core, delta);
}

trn_result_t DeviceRuntime::let_go_shared_sem(uint32_t record, uint64_t id, std::string *why) {
  std::lock_guard lock(sems_mu_);
  auto it = shared_sems_.find({record, id});
  if (it != shared_sems_.end()) {
    if (!it->second.expired()) return TRN_SUCCESS;  // taken over by a new SemCore
    shared_sems_.erase(it);
  }
  return state_.sem_release(record, id, why);
}

}  // namespace trn::sim
