// C entry points for semaphores.
#include <cstring>
#include <string>

#include "runtime/api_support.hpp"
#include "runtime/sem.hpp"
#include "runtime/session.hpp"

using namespace trn::rt;

namespace {

constexpr char kSemIpcMagic[8] = {'T', 'R', 'N', 'S', 'E', 'M', '1', '\0'};

struct SemIpcHandle {
  char magic[8];
  uint32_t device_index;
  uint32_t record;
  uint64_t id;
  uint32_t exporter_pid;
  uint8_t reserved[36];
};
static_assert(sizeof(SemIpcHandle) == sizeof(trn_ipc_handle_t), "handle layout");

trn_result_t cancelled(const Sem &sem) {
  return fail(TRN_ERROR_CANCELLED, "the semaphore is marked failed: " + sem.failure_reason());
}

}  // namespace

extern "C" {

TRN_API trn_result_t trn_sem_create(trn_device_t device_handle, const trn_sem_desc_t *desc,
                                    trn_sem_t *sem_out) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    Device *device = lookup_device(*session, device_handle, &result);
    if (!device) return result;
    trn_sem_desc_t d = TRN_SEM_DESC_INIT;
    if (trn_result_t r = read_desc(desc, TRN_STRUCT_SEM_DESC, "TRN_SEM_DESC_INIT", &d);
        r != TRN_SUCCESS)
      return r;
    if (!sem_out) return fail(TRN_ERROR_NULL_POINTER, "sem is NULL");
    if ((d.flags & ~TRN_SEM_FLAG_EXPORTABLE) != 0)
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  "desc.flags has bits other than TRN_SEM_FLAG_EXPORTABLE");
    std::shared_ptr<Sem> sem;
    if (trn_result_t r =
            Sem::create(*device, d.initial_value, (d.flags & TRN_SEM_FLAG_EXPORTABLE) != 0,
                        Sem::Role::user, &sem);
        r != TRN_SUCCESS)
      return r;
    *sem_out = to_handle<trn_sem_t>(session->sems.insert(std::move(sem)));
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_sem_destroy(trn_sem_t handle) {
  return TRN_API_CALL({
    if (handle == nullptr) return TRN_SUCCESS;
    TRN_GET_SESSION(session);
    auto sem = session->sems.find(handle, &result);
    if (!sem) return result;
    if (sem->queue_timeline())
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  "this is a queue's own semaphore: it goes with trn_queue_destroy");
    // Out of use first: from then on a submission that found it fails, and one that came first
    // holds a use that this reports.
    if (trn_result_t r = sem->destroy(); r != TRN_SUCCESS) return r;
    session->sems.remove(from_handle(handle));
    sem->close_watchers();  // the driver's hold goes with the last reference (`sem` here)
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_sem_signal(trn_sem_t handle, uint64_t value) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto *sem = session->sems.find_fast(handle, &result);
    if (!sem) return result;
    if (sem->queue_timeline())
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  "a queue's semaphore is signalled by its queue only: use a semaphore of your "
                  "own (trn_sem_create) and a barrier that waits on it");
    uint64_t current = 0;
    if (sem->raise(value, true, &current) != TRN_SUCCESS)
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  "value " + std::to_string(value) + " is below the current value " +
                      std::to_string(current) + ": semaphore values only grow");
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_sem_fail(trn_sem_t handle, const char *reason) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto *sem = session->sems.find_fast(handle, &result);
    if (!sem) return result;
    if (sem->queue_timeline())
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  "a queue's semaphore fails with its queue only: use a semaphore of your own");
    sem->mark_failed(reason && *reason ? reason : "trn_sem_fail was called on it");
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_sem_wait(trn_sem_t handle, uint64_t value, uint64_t timeout_ns) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto *sem = session->sems.find_fast(handle, &result);
    if (!sem) return result;
    const trn_result_t r = sem->wait(value, timeout_ns);
    if (r == TRN_ERROR_CANCELLED) return cancelled(*sem);
    // A deadline that passed says what was not reached, as trn_queue_finish's does (a poll, with
    // no time to wait, is the caller's loop and says nothing).
    if (r == TRN_TIMEOUT && timeout_ns > 0)
      return fail(TRN_TIMEOUT, "the semaphore was at " + std::to_string(sem->value()) +
                                   ", short of " + std::to_string(value) +
                                   ", at the deadline: what should signal it has not (a queue "
                                   "still working, or waiting on a semaphore nobody signals)");
    return r;
  });
}

TRN_API trn_result_t trn_sem_query(trn_sem_t handle, uint64_t *value) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto *sem = session->sems.find_fast(handle, &result);
    if (!sem) return result;
    if (!value) return fail(TRN_ERROR_NULL_POINTER, "value is NULL");
    return sem->query_value(value) ? cancelled(*sem) : TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_sem_get_fd(trn_sem_t handle, uint64_t value, int *fd) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto *sem = session->sems.find_fast(handle, &result);
    if (!sem) return result;
    if (!fd) return fail(TRN_ERROR_NULL_POINTER, "fd is NULL");
    return sem->watch(value, fd);
  });
}

TRN_API trn_result_t trn_sem_export(trn_sem_t handle, trn_ipc_handle_t *ipc) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto *sem = session->sems.find_fast(handle, &result);
    if (!sem) return result;
    if (!ipc) return fail(TRN_ERROR_NULL_POINTER, "handle is NULL");
    if (!sem->shared())
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  "the semaphore was not created with TRN_SEM_FLAG_EXPORTABLE");
    SemIpcHandle out{};
    std::memcpy(out.magic, kSemIpcMagic, sizeof kSemIpcMagic);
    out.device_index = sem->device().index;
    out.record = sem->record();
    out.id = sem->id();
    out.exporter_pid = static_cast<uint32_t>(getpid());
    std::memcpy(ipc->bytes, &out, sizeof out);
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_sem_import(trn_device_t device_handle, const trn_ipc_handle_t *ipc,
                                    trn_sem_t *sem_out) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    Device *device = lookup_device(*session, device_handle, &result);
    if (!device) return result;
    if (!ipc) return fail(TRN_ERROR_NULL_POINTER, "handle is NULL");
    if (!sem_out) return fail(TRN_ERROR_NULL_POINTER, "sem is NULL");
    SemIpcHandle in;
    std::memcpy(&in, ipc->bytes, sizeof in);
    if (std::memcmp(in.magic, kSemIpcMagic, sizeof kSemIpcMagic) != 0)
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  "the bytes are not a trn semaphore handle (made by trn_sem_export)");
    if (in.device_index != device->index)
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  "the handle is a semaphore of device " + std::to_string(in.device_index) +
                      ", not of device " + std::to_string(device->index));
    std::shared_ptr<Sem> sem;
    std::string why;
    if (trn_result_t r = Sem::import(*device, in.record, in.id, &sem, &why); r != TRN_SUCCESS)
      return fail(r, why + " (exported by pid " + std::to_string(in.exporter_pid) + ")");
    *sem_out = to_handle<trn_sem_t>(session->sems.insert(std::move(sem)));
    return TRN_SUCCESS;
  });
}

}  // extern "C"
