#include "runtime/sem.hpp"

#include <unistd.h>

#include "runtime/driver_error.hpp"
#include "runtime/error.hpp"
#include "runtime/session.hpp"

namespace trn::rt {

namespace {

const trn_hal_ops_t &ops(const Device &device) {
  return device.driver->ops;
}

}  // namespace

Sem::Sem(Device &device, trn_hal_sem_t *hal, bool shared, Role role, uint32_t record, uint64_t id)
    : device_(device), hal_(hal), shared_(shared), role_(role), record_(record), id_(id) {}

trn_result_t Sem::create(Device &device, uint64_t initial, bool shareable, Role role,
                         std::shared_ptr<Sem> *out) {
  trn_hal_sem_t *hal = nullptr;
  uint32_t record = 0;
  uint64_t id = 0;
  DriverError err;
  if (trn_result_t r =
          ops(device).sem_create(device.driver->instance, device.driver_index, initial,
                                 shareable ? TRN_HAL_SEM_SHAREABLE : 0, &hal, &record, &id, &err);
      r != TRN_SUCCESS)
    return fail(r, err.message);
  *out = std::make_shared<Sem>(device, hal, shareable, role, record, id);
  return TRN_SUCCESS;
}

trn_result_t Sem::import(Device &device, uint32_t record, uint64_t id, std::shared_ptr<Sem> *out,
                         std::string *why) {
  trn_hal_sem_t *hal = nullptr;
  DriverError err;
  if (trn_result_t r = ops(device).sem_import(device.driver->instance, device.driver_index, record,
                                              id, &hal, &err);
      r != TRN_SUCCESS) {
    *why = err.message;
    return r;
  }
  *out = std::make_shared<Sem>(device, hal, true, Role::user, record, id);
  return TRN_SUCCESS;
}

Sem::~Sem() {
  ops(device_).sem_destroy(device_.driver->instance, hal_);
}

bool Sem::try_use() {
  uint32_t seen = uses_.load(std::memory_order_relaxed);
  do {
    if (seen & kDestroyed) return false;
  } while (!uses_.compare_exchange_weak(seen, seen + 1, std::memory_order_acquire,
                                        std::memory_order_relaxed));
  return true;
}

void Sem::end_use() {
  uses_.fetch_sub(1, std::memory_order_release);
}

trn_result_t Sem::destroy() {
  uint32_t seen = 0;
  if (uses_.compare_exchange_strong(seen, kDestroyed, std::memory_order_acq_rel))
    return TRN_SUCCESS;
  if (seen & kDestroyed)
    return ::trn::rt::fail(TRN_ERROR_INVALID_HANDLE, "the semaphore was destroyed by another call");
  return ::trn::rt::fail(
      TRN_ERROR_HANDLE_IN_USE,
      std::to_string(seen) +
          " queued commands still wait on or signal the semaphore: finish them first");
}

uint64_t Sem::value() const {
  return ops(device_).sem_value(hal_);
}

bool Sem::failed() const {
  return query_value(nullptr);
}

void Sem::read_state(trn_hal_sem_state_t *state) const {
  // Not zeroed: the driver writes every field but the reason's tail, and clearing its 512 bytes
  // would cost more than the whole query.
  state->failed = 0;
  state->reason[0] = '\0';
  ops(device_).sem_query(hal_, state);
}

bool Sem::query_value(uint64_t *value) const {
  trn_hal_sem_state_t state;
  read_state(&state);
  if (value) *value = state.value;
  return state.failed != 0;
}

std::string Sem::failure_reason() const {
  trn_hal_sem_state_t state;
  read_state(&state);
  return state.reason[0] ? state.reason : "the queue that was to signal it failed";
}

void Sem::signal(uint64_t value, bool clear_failure) {
  ops(device_).sem_signal(hal_, value, clear_failure ? 1 : 0);
}

trn_result_t Sem::raise(uint64_t value, bool clear_failure, uint64_t *current) {
  return ops(device_).sem_raise(hal_, value, clear_failure ? 1 : 0, current);
}

void Sem::mark_failed(const std::string &reason) {
  ops(device_).sem_fail(hal_, reason.c_str());
}

trn_result_t Sem::wait(uint64_t value, uint64_t timeout_ns) {
  return ops(device_).sem_wait(hal_, value, timeout_ns);
}

trn_result_t Sem::watch(uint64_t value, int *fd) {
  DriverError err;
  int watch_fd = -1;
  if (trn_result_t r = ops(device_).sem_watch(hal_, value, &watch_fd, &err); r != TRN_SUCCESS)
    return ::trn::rt::fail(r, err.message);
  // A destroy on another thread ends the watches it finds; one made after that would never read
  // end-of-file (the lookup caches may keep the semaphore alive). The destroy marks it first and
  // ends the watches under the driver's lock, which the watch took too: one of the two sees the
  // other.
  if (uses_.load(std::memory_order_acquire) & kDestroyed) {
    close_watchers();
    close(watch_fd);
    return ::trn::rt::fail(TRN_ERROR_INVALID_HANDLE,
                           "the semaphore was destroyed by another call while this one ran");
  }
  *fd = watch_fd;
  return TRN_SUCCESS;
}

void Sem::close_watchers() {
  ops(device_).sem_close_watches(hal_);
}

}  // namespace trn::rt
