// Semaphores: creation, holds on shared ones, host signals, waits and watches.
#include <memory>

#include "sim/ops_support.hpp"
#include "sim/ops_table.hpp"
#include "sim/semaphore.hpp"

namespace trn::sim {
namespace {

// A hold on the process's SemCore for a shared cell, made when it has none. The state file
// records one hold per process (a bit), so a second import of this process adds nothing there.
trn_result_t hold_shared(trn_hal_instance_t *instance, DeviceRuntime &runtime, uint32_t record,
                         uint64_t id, SharedSemCell *cell, trn_hal_sem_t **sem) {
  auto core = runtime.find_shared_sem(record, id);
  if (!core) {
    core = std::make_shared<SemCore>(runtime, cell, record, id, instance->config.spin_ns);
    runtime.remember_shared_sem(record, id, core);
  }
  *sem = new trn_hal_sem{std::move(core)};
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
      *sem = new trn_hal_sem{std::move(core)};
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
    std::unique_ptr<trn_hal_sem> made;
    try {
      auto core = std::make_shared<SemCore>(runtime, cell, r_index, r_id, instance->config.spin_ns);
      runtime.remember_shared_sem(r_index, r_id, core);
      made.reset(new trn_hal_sem{std::move(core)});
    } catch (...) {
      std::string ignored;
      (void)runtime.state().sem_release(r_index, r_id, &ignored);
      throw;
    }
    *sem = made.release();
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
    if (auto core = runtime.find_shared_sem(record, id)) {
      *sem = new trn_hal_sem{std::move(core)};  // another hold of this process
      return TRN_SUCCESS;
    }
    SharedSemCell *cell = nullptr;
    if (trn_result_t r = runtime.state().sem_import(instance->identity, record, id, &cell, why);
        r != TRN_SUCCESS)
      return r;
    return hold_shared(instance, runtime, record, id, cell, sem);
  });
}

void sim_sem_destroy(trn_hal_instance_t *, trn_hal_sem_t *sem) {
  if (!sem) return;
  sem->core->close_watches(sem);
  delete sem;  // the last hold of the process lets go of the semaphore (~SemCore)
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
  return sem->core->wait(value, timeout_ns, nullptr);
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
  ops->sem_fail = sim_sem_fail;
  ops->sem_wait = sim_sem_wait;
  ops->sem_watch = sim_sem_watch;
  ops->sem_close_watches = sim_sem_close_watches;
}

}  // namespace trn::sim
