// Semaphores: creation, holds on shared ones, host signals, waits and watches.
#include <memory>

#include "sim/ops_support.hpp"
#include "sim/ops_table.hpp"
#include "sim/semaphore.hpp"

namespace trn::sim {
namespace {

// A new hold on a semaphore, owned by the instance until sem_destroy (or close).
trn_hal_sem_t *hand_out(trn_hal_instance_t *instance, std::shared_ptr<SemCore> core) {
  return instance->sems.adopt(std::make_unique<trn_hal_sem>(trn_hal_sem{std::move(core)}));
}

// A SemCore for a shared cell this process now holds in the state file; if it cannot be made,
// the hold is let go again.
trn_result_t make_core(DeviceRuntime &runtime, SharedSemCell *cell, uint32_t record, uint64_t id,
                       std::shared_ptr<SemCore> *made) {
  try {
    *made =
        std::make_shared<SemCore>(runtime, cell, record, id, runtime.instance()->config.spin_ns);
  } catch (...) {
    std::string ignored;
    (void)runtime.state().sem_release(record, id, &ignored);
    throw;
  }
  return TRN_SUCCESS;
}

trn_result_t sim_sem_create(trn_hal_instance_t *instance, uint32_t device, uint64_t initial,
                            uint32_t flags, trn_hal_sem_t **sem, uint32_t *record, uint64_t *id,
                            trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceRuntime &runtime, std::string *why) {
    if (sem == nullptr) {
      *why = "sem_create needs somewhere to put the semaphore (NULL)";
      return TRN_ERROR_NULL_POINTER;
    }
    if (flags & ~TRN_HAL_SEM_SHAREABLE) {
      *why = "unknown sem_create flags " + std::to_string(flags) + ": use TRN_HAL_SEM_SHAREABLE";
      return TRN_ERROR_INVALID_ARGUMENT;
    }
    if (!(flags & TRN_HAL_SEM_SHAREABLE)) {
      auto core = std::make_shared<SemCore>(runtime, initial, instance->config.spin_ns);
      *sem = hand_out(instance, std::move(core));
      if (record) *record = 0;
      if (id) *id = 0;
      return TRN_SUCCESS;
    }
    uint32_t r_index = 0;
    uint64_t r_id = 0;
    SharedSemCell *cell = nullptr;
    if (trn_result_t r =
            runtime.state().sem_create(instance->identity, &r_index, &r_id, &cell, why);
        r != TRN_SUCCESS)
      return r;
    // Nobody else knows (record, id) yet: set it up before handing it out.
    cell->device_ns.store(runtime.time_ns(), std::memory_order_relaxed);
    cell->value.store(initial, std::memory_order_release);
    std::shared_ptr<SemCore> core;
    trn_result_t r = runtime.shared_sem(
        r_index, r_id,
        [&](std::shared_ptr<SemCore> *made) {
          return make_core(runtime, cell, r_index, r_id, made);
        },
        &core);
    if (r != TRN_SUCCESS) return r;
    // From here the SemCore lets go of the cell if anything fails.
    *sem = hand_out(instance, std::move(core));
    if (record) *record = r_index;
    if (id) *id = r_id;
    return TRN_SUCCESS;
  });
}

trn_result_t sim_sem_import(trn_hal_instance_t *instance, uint32_t device, uint32_t record,
                            uint64_t id, trn_hal_sem_t **sem, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceRuntime &runtime, std::string *why) {
    if (sem == nullptr) {
      *why = "sem_import needs somewhere to put the semaphore (NULL)";
      return TRN_ERROR_NULL_POINTER;
    }
    std::shared_ptr<SemCore> core;
    trn_result_t r = runtime.shared_sem(
        record, id,
        [&](std::shared_ptr<SemCore> *made) {
          SharedSemCell *cell = nullptr;
          if (trn_result_t r2 =
                  runtime.state().sem_import(instance->identity, record, id, &cell, why);
              r2 != TRN_SUCCESS)
            return r2;
          return make_core(runtime, cell, record, id, made);
        },
        &core);
    if (r != TRN_SUCCESS) return r;
    *sem = hand_out(instance, std::move(core));  // each import is its own hold
    return TRN_SUCCESS;
  });
}

void sim_sem_destroy(trn_hal_instance_t *instance, trn_hal_sem_t *sem) {
  if (!instance || !sem) return;
  sem->core->close_watches(sem);
  // The last hold of the process lets go of the semaphore (~SemCore).
  instance->sems.destroy(sem);
}

void sim_sem_close_watches(trn_hal_sem_t *sem) {
  if (sem) sem->core->close_watches(sem);
}

void sim_sem_query(const trn_hal_sem_t *sem, trn_hal_sem_state_t *state) {
  if (sem && state) sem->core->query(state);
}

uint64_t sim_sem_value(const trn_hal_sem_t *sem) {
  return sem ? sem->core->value() : 0;
}

void sim_sem_signal(trn_hal_sem_t *sem, uint64_t value, uint32_t clear_failure) {
  if (sem) sem->core->signal(value, sem->core->device().time_ns(), clear_failure != 0);
}

trn_result_t sim_sem_raise(trn_hal_sem_t *sem, uint64_t value, uint32_t clear_failure,
                           uint64_t *current) {
  if (!sem || !current) return TRN_ERROR_NULL_POINTER;
  return sem->core->raise(value, sem->core->device().time_ns(), clear_failure != 0, current)
             ? TRN_SUCCESS
             : TRN_ERROR_INVALID_ARGUMENT;
}

void sim_sem_fail(trn_hal_sem_t *sem, const char *reason) {
  if (!sem) return;
  try {
    sem->core->fail(reason && *reason ? reason : "failed by the host");
  } catch (const std::bad_alloc &) {
    sem->core->fail(std::string());  // marked failed all the same, with the generic reason
  }
}

trn_result_t sim_sem_wait(trn_hal_sem_t *sem, uint64_t value, uint64_t timeout_ns) {
  if (!sem) return TRN_ERROR_NULL_POINTER;
  return sem->core->host_wait(value, timeout_ns);
}

trn_result_t sim_sem_watch(trn_hal_sem_t *sem, uint64_t value, int *fd, trn_hal_error_t *err) {
  return guarded(err, [&] {
    if (!sem || !fd) return fail(err, TRN_ERROR_NULL_POINTER, "sem_watch needs a semaphore and fd");
    std::string why;
    if (trn_result_t r = sem->core->watch(value, sem, fd, &why); r != TRN_SUCCESS)
      return fail(err, r, why);
    if (sem->core->shared()) {
      // Other processes may signal it: poll it while it has watches.
      trn_hal_instance_t *instance = sem->core->device().instance();
      instance->poller->add(sem->core);
    }
    return TRN_SUCCESS;
  });
}

}  // namespace

void fill_semaphore_ops(trn_hal_ops_t *ops) {
  ops->sem_create = sim_sem_create;
  ops->sem_import = sim_sem_import;
  ops->sem_destroy = sim_sem_destroy;
  ops->sem_query = sim_sem_query;
  ops->sem_value = sim_sem_value;
  ops->sem_signal = sim_sem_signal;
  ops->sem_raise = sim_sem_raise;
  ops->sem_fail = sim_sem_fail;
  ops->sem_wait = sim_sem_wait;
  ops->sem_watch = sim_sem_watch;
  ops->sem_close_watches = sim_sem_close_watches;
}

}  // namespace trn::sim
