#include "runtime/session.hpp"

#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <thread>

#include "common/log.hpp"
#include "common/parse.hpp"
#include "runtime/asymmetric_fence.hpp"
#include "runtime/driver_error.hpp"
#include "runtime/driver_loader.hpp"
#include "runtime/error.hpp"
#include "runtime/memory.hpp"
#include "runtime/program.hpp"
#include "runtime/queue.hpp"
#include "runtime/sem.hpp"
#include "runtime/visibility.hpp"

namespace trn::rt {

namespace {

// The command line as other processes and tools will show it.
std::string own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!raw.empty() && raw.back() == '\0') raw.pop_back();
  for (char &c : raw)
    if (c == '\0') c = ' ';
  if (raw.size() >= TRN_COMMAND_MAX) raw.resize(TRN_COMMAND_MAX - 1);
  return raw;
}

// Opens a loaded driver. One that could not be loaded is kept with no devices and the reason.
trn_result_t open_driver(DriverTable &&table, const trn_hal_process_identity_t &identity,
                         std::unique_ptr<Driver> *out, std::string *why) {
  auto driver = std::make_unique<Driver>();
  driver->name = table.name;
  driver->ops = table.ops;
  if (table.result != TRN_SUCCESS) {
    common::logger("runtime")->warn("{}", table.why);
    driver->status = table.result;
    driver->status_detail = std::move(table.why);
    *out = std::move(driver);
    return TRN_SUCCESS;
  }
  DriverError err;
  if (trn_result_t r = driver->ops.open(&identity, &driver->instance, &err); r != TRN_SUCCESS) {
    *why = table.name + " driver: " + err.message;
    return r;
  }
  char detail[TRN_DETAIL_MAX] = {};
  driver->status = driver->ops.status(driver->instance, detail, sizeof detail);
  driver->status_detail = detail;
  driver->device_count = driver->ops.device_count(driver->instance);
  if (const char *missing = driver->device_count ? missing_operation(driver->ops) : nullptr) {
    // A driver that finds devices must be able to do everything with them: never call a hole.
    driver->status = TRN_ERROR_DRIVER_INCOMPATIBLE;
    driver->status_detail = "driver " + table.name + " has devices but its table has no '" +
                            missing + "' operation: use a driver built for this release";
    common::logger("runtime")->warn("{}", driver->status_detail);
    driver->device_count = 0;
  }
  *out = std::move(driver);
  return TRN_SUCCESS;
}

}  // namespace

Session::~Session() {
  // Memory objects point into devices, devices and cores into drivers: drop them in that order.
  // Nothing is returned to the driver here (see release_all): closing the driver is enough.
  // Queue workers must stop before the memory and semaphores their commands use go away.
  for (auto &queue : queues.all()) {
    queue->shutdown();
    queues.remove_object(queue.get());
  }
  // Programs hold kernels, pools and memory of their own (left to the driver's closing, as the
  // allocations below are).
  for (auto &program : programs.all()) {
    program->abandon();
    programs.remove_object(program.get());
  }
  for (auto &set : tensor_sets.all()) tensor_sets.remove_object(set.get());
  for (auto &kernel : kernels.all()) kernels.remove_object(kernel.get());  // unload first
  for (auto &profile : profiles.all()) profiles.remove_object(profile.get());
  for (auto &sem : sems.all()) sems.remove_object(sem.get());
  for (auto &mem : mems.all()) mems.remove_object(mem.get());
  for (auto &pool : pools.all()) pools.remove_object(pool.get());
  cores_.clear();
  devices_.clear();
  drivers_.clear();
}

void Session::abandon_drivers() {
  for (auto &driver : drivers_) {
    if (driver->instance && driver->ops.abandon) driver->ops.abandon(driver->instance);
    driver->instance = nullptr;  // never closed: it is the parent's
  }
}

void Session::release_all() {
  for (auto &queue : queues.all()) {
    queue->shutdown();
    queues.remove_object(queue.get());
  }
  for (auto &program : programs.all()) programs.remove_object(program.get());
  for (auto &set : tensor_sets.all()) tensor_sets.remove_object(set.get());
  for (auto &kernel : kernels.all()) kernels.remove_object(kernel.get());
  for (auto &profile : profiles.all()) profiles.remove_object(profile.get());
  for (auto &sem : sems.all()) {
    sem->close_watchers();
    sems.remove_object(sem.get());
  }
  for (auto &mem : mems.all()) {
    release_memory(*mem);
    mems.remove_object(mem.get());
  }
  for (auto &pool : pools.all()) {
    pool->release_all();
    pools.remove_object(pool.get());
  }
  for (auto &device : devices_) {
    std::lock_guard lock(device->mu);
    device->shut_down = true;  // a call in flight on another thread claims nothing more
    for (Core *core : device->cores) {
      if (!core->owned) continue;
      DriverError err;
      if (device->driver->ops.core_unclaim(device->driver->instance, device->driver_index,
                                           core->layout.first_physical_core,
                                           core->layout.physical_core_count, &err) != TRN_SUCCESS)
        common::logger("runtime")->warn("releasing core {} of device {}: {}", core->index,
                                        device->index, err.message);
      core->owned = false;
    }
  }
}

trn_result_t Session::create(std::shared_ptr<Session> *out, std::string *why) {
  // The loggers read TRN_LOG_LEVEL when the first is made: at start, so that a malformed level
  // is reported then, not at the first message (which may never come).
  common::logger("runtime");
  VisibilityConfig visibility;
  if (trn_result_t r = load_visibility(&visibility, why); r != TRN_SUCCESS) return r;
  std::vector<DriverTable> tables;
  if (trn_result_t r = load_drivers(&tables, why); r != TRN_SUCCESS) return r;

  auto session = std::shared_ptr<Session>(new Session());
  const std::string command = own_command_line();
  const trn_hal_process_identity_t identity{command.c_str(), TRN_RELEASE_STRING};

  uint32_t next_core_id = 0;
  for (DriverTable &table : tables) {
    std::unique_ptr<Driver> driver;
    if (trn_result_t r = open_driver(std::move(table), identity, &driver, why); r != TRN_SUCCESS)
      return r;
    driver->first_device = static_cast<uint32_t>(session->devices_.size());
    for (uint32_t i = 0; i < driver->device_count; ++i) {
      auto device = std::make_unique<Device>();
      device->driver = driver.get();
      device->driver_index = i;
      device->index = static_cast<uint32_t>(session->devices_.size());
      trn_device_properties_t &p = device->properties;
      p = TRN_DEVICE_PROPERTIES_INIT;
      DriverError err;
      if (trn_result_t r =
              driver->ops.device_properties(driver->instance, i, &p, &device->info, &err);
          r != TRN_SUCCESS) {
        *why = driver->name + " driver: " + err.message;
        return r;
      }
      p.index = device->index;
      if (!(device->info.lnc_mask & (1u << visibility.lnc))) {
        std::string supported;
        for (uint32_t lnc = 1; lnc < 32; ++lnc)
          if (device->info.lnc_mask & (1u << lnc))
            supported += (supported.empty() ? "" : " or ") + std::to_string(lnc);
        *why = visibility.lnc_variable + "=" + std::to_string(visibility.lnc) +
               " does not fit device " + std::to_string(device->index) + " (" +
               trn_generation_name(p.generation) + ", " + std::to_string(p.physical_core_count) +
               " physical cores): it supports LNC=" + supported + ", so unset it or set it to " +
               supported;
        return TRN_ERROR_INVALID_CONFIG;
      }
      p.logical_core_config = visibility.lnc;
      p.core_count = p.physical_core_count / visibility.lnc;
      p.first_core_id = next_core_id;
      next_core_id += p.core_count;
      session->devices_.push_back(std::move(device));
    }
    session->drivers_.push_back(std::move(driver));
  }

  if (visibility.visible_cores && !visibility.visible_cores->empty() &&
      visibility.visible_cores->back() >= next_core_id) {
    *why = visibility.visible_cores_variable + "='" + visibility.visible_cores_text +
           "' names core " + std::to_string(visibility.visible_cores->back()) + ", but there " +
           (next_core_id == 1 ? "is only 1 core"
                              : "are only " + std::to_string(next_core_id) + " cores") +
           (next_core_id ? " (ids 0-" + std::to_string(next_core_id - 1) + ")" : "") + " on " +
           std::to_string(session->devices_.size()) +
           " device(s) with LNC=" + std::to_string(visibility.lnc);
    return TRN_ERROR_INVALID_CONFIG;
  }

  for (auto &device : session->devices_) {
    trn_device_properties_t &p = device->properties;
    for (uint32_t c = 0; c < p.core_count; ++c) {
      auto core = std::make_unique<Core>();
      core->device = device.get();
      DriverError err;
      if (trn_result_t r =
              device->driver->ops.core_info(device->driver->instance, device->driver_index,
                                            p.logical_core_config, c, &core->layout, &err);
          r != TRN_SUCCESS) {
        *why = device->driver->name + " driver: " + err.message;
        return r;
      }
      core->index = c;
      core->global_id = p.first_core_id + c;
      core->slot = static_cast<uint32_t>(session->cores_.size());
      core->visible = !visibility.visible_cores ||
                      std::binary_search(visibility.visible_cores->begin(),
                                         visibility.visible_cores->end(), core->global_id);
      p.visible_core_count += core->visible ? 1 : 0;
      device->cores.push_back(core.get());
      session->cores_.push_back(std::move(core));
    }
  }
  *out = std::move(session);
  return TRN_SUCCESS;
}

// ---- the process-wide current session ----------------------------------------------------------

namespace {

struct Current {
  std::mutex mu;  // guards session; held only to swap or copy the pointer, or to create it
  std::shared_ptr<Session> session;
};

// Never destroyed: calls from other threads or atexit handlers may still run while static
// destructors do.
Current &current() {
  static Current *instance = new Current;
  return *instance;
}

// What a thread keeps of the runtime between its calls: the session it last used (revalidated
// against g_epoch on every call, so calls on different threads share no lock) and its lookup
// caches. Both hold references, so trn_runtime_shutdown must be able to empty them on threads
// that make no call after it; every thread's state is therefore listed here.
//
// Who may touch the rest: its thread while `in_call` is set, a shutdown while `emptying` is set;
// each flag is written by one side only. A call sets in_call, fences, and backs off while it
// finds emptying set; a shutdown changes the epoch, sets every thread's emptying, fences, empties
// the threads it finds out of a call, and clears the flags. The fences are asymmetric (the call
// side's costs nothing, see asymmetric_fence.hpp), and at least one side sees the other's flag:
// a thread in a call empties its own state when the call ends and finds the epoch changed.
struct ThreadState;

struct Registry {
  std::mutex mu;  // guards threads, and the emptying of their states
  std::vector<ThreadState *> threads;
};
Registry &registry() {
  static Registry *instance = new Registry;  // never destroyed, as current()
  return *instance;
}

struct ThreadState {
  ThreadState() {
    std::lock_guard lock(registry().mu);
    registry().threads.push_back(this);
  }
  ~ThreadState();
  ThreadState(const ThreadState &) = delete;
  ThreadState &operator=(const ThreadState &) = delete;

  // The references it held, for the caller to drop without locks held (no allocation).
  struct Held {
    std::shared_ptr<Session> session;
    ThreadObjectCache objects;
  };
  Held take() noexcept {
    Held out{std::move(session), std::move(objects)};
    session.reset();
    objects = ThreadObjectCache{};
    epoch = 0;
    return out;
  }

  std::atomic<bool> in_call{false};   // written by its thread only
  std::atomic<bool> emptying{false};  // written by a shutdown only, under registry().mu
  uint64_t epoch = 0;
  std::shared_ptr<Session> session;
  ThreadObjectCache objects;
};
thread_local ThreadState t_state;
// The same object through a trivially initialised variable: reaching t_state itself runs its
// lazy-initialisation check on every access, which costs more than the rest of a lookup.
thread_local ThreadState *t_self = nullptr;

ThreadState::~ThreadState() {
  t_self = nullptr;
  std::lock_guard lock(registry().mu);
  std::erase(registry().threads, this);
}

ThreadState &self_state() {
  ThreadState *self = t_self;
  if (__builtin_expect(self == nullptr, 0)) self = t_self = &t_state;
  return *self;
}

// Set in a forked child: the inherited session's locks belong to the parent, so the child must
// start over without touching them.
std::atomic<bool> g_forked{false};

void before_fork() {
  current().mu.lock();
  registry().mu.lock();
}
void after_fork_parent() {
  registry().mu.unlock();
  current().mu.unlock();
}
void after_fork_child() {
  g_forked.store(true, std::memory_order_relaxed);
  registry().mu.unlock();
  current().mu.unlock();
}

void install_fork_handlers() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(before_fork, after_fork_parent, after_fork_child); });
}

// Bumped whenever the current session changes; a thread's cached session is valid while the
// epoch it saw is current. Readers only load it, so calls on several threads share no written
// cache line here.
std::atomic<uint64_t> g_epoch{1};

// Set while a shutdown releases the old session under current().mu (see current_session).
std::atomic<bool> g_shutting_down{false};

// In a forked child everything the inherited session holds is the parent's (its claims, memory,
// semaphores; its queues' threads exist only there): the session is kept, never destroyed, and
// its drivers give up their instances, closing their descriptors so that the parent's claims end
// with the parent.
// Every handle generation below this one was handed out before the last fork this process came
// from (sessions and objects draw theirs from one counter): a handle of one, used in the child, is
// named for what happened (invalid_handle). 0: no fork.
std::atomic<uint32_t> g_fork_boundary{0};

void abandon_after_fork(std::shared_ptr<Session> session) {
  if (!session) return;
  static auto *kept = new std::vector<std::shared_ptr<Session>>;
  session->abandon_drivers();
  g_fork_boundary.store(next_handle_generation(), std::memory_order_relaxed);
  kept->push_back(std::move(session));
}

bool made_before_fork(uint32_t generation) {
  return generation < g_fork_boundary.load(std::memory_order_relaxed);
}

// Starts a call on this thread: waits (for microseconds) while a shutdown empties its state.
void enter_call(ThreadState &self) {
  if (self.in_call.load(std::memory_order_relaxed)) return;  // a nested call
  for (;;) {
    self.in_call.store(true, std::memory_order_relaxed);
    light_fence();
    if (!self.emptying.load(std::memory_order_acquire)) return;
    self.in_call.store(false, std::memory_order_release);
    while (self.emptying.load(std::memory_order_acquire)) std::this_thread::yield();
  }
}

// Empties the state of every thread not in a call (the caller's own included). Called after the
// epoch changed.
void empty_idle_threads() {
  ThreadState &self = self_state();  // before the lock: creating it takes the lock
  std::vector<ThreadState::Held> dropped;
  {
    std::lock_guard lock(registry().mu);
    dropped.reserve(registry().threads.size());  // the only allocation: before anything changes
    for (ThreadState *state : registry().threads)
      if (state != &self) state->emptying.store(true, std::memory_order_relaxed);
    heavy_fence();
    for (ThreadState *state : registry().threads)
      if (state == &self || !state->in_call.load(std::memory_order_acquire))
        dropped.push_back(state->take());  // else it empties itself
    for (ThreadState *state : registry().threads)
      state->emptying.store(false, std::memory_order_release);
  }
  // Dropped here, without locks: the last reference to the session closes its drivers.
}

}  // namespace

ThreadObjectCache &thread_object_cache() {
  return self_state().objects;
}

Session *current_session(trn_result_t *result) {
  ThreadState &self = self_state();
  enter_call(self);
  if (!g_forked.load(std::memory_order_relaxed) && self.session &&
      self.epoch == g_epoch.load(std::memory_order_relaxed)) {
    *result = TRN_SUCCESS;
    return self.session.get();
  }
  install_fork_handlers();
  ThreadState::Held dropped;  // after the lock
  Current &state = current();
  std::unique_lock lock(state.mu, std::defer_lock);
  if (Queue::running_host_call() == nullptr) {
    lock.lock();
  } else {
    // A shutdown holds the lock while it waits for the queues' threads, this one included (it
    // runs the functions it cancels): wait only for anything else.
    while (!lock.try_lock()) {
      if (g_shutting_down.load(std::memory_order_acquire)) {
        *result = fail(TRN_ERROR_INVALID_HANDLE,
                       "the runtime is being shut down (trn_runtime_shutdown on another thread), "
                       "so this call from a host function it cancelled has no runtime to use");
        return nullptr;
      }
      std::this_thread::yield();
    }
  }
  if (g_forked.exchange(false, std::memory_order_relaxed)) {
    abandon_after_fork(state.session);
    if (self.session != state.session) abandon_after_fork(self.session);
    state.session.reset();
    g_epoch.fetch_add(1, std::memory_order_seq_cst);
  }
  if (!state.session) {
    std::string why;
    std::shared_ptr<Session> session;
    *result = Session::create(&session, &why);
    if (*result != TRN_SUCCESS) {
      fail(*result, why);
      return nullptr;
    }
    state.session = std::move(session);
    g_epoch.fetch_add(1, std::memory_order_seq_cst);
  }
  if (self.session != state.session) dropped = self.take();
  self.session = state.session;
  self.epoch = g_epoch.load(std::memory_order_seq_cst);
  *result = TRN_SUCCESS;
  return self.session.get();
}

void end_api_call() noexcept {
  ThreadState &self = self_state();
  if (!self.in_call.load(std::memory_order_relaxed)) return;
  const uint64_t seen = self.epoch;
  self.in_call.store(false, std::memory_order_release);
  light_fence();
  if (seen == 0 || seen == g_epoch.load(std::memory_order_relaxed)) return;
  // The session changed during the call: let go of the old one (a shutdown may have done it
  // meanwhile; taking an empty state again does nothing).
  enter_call(self);
  ThreadState::Held dropped = self.take();
  self.in_call.store(false, std::memory_order_release);
}

void shutdown_session() {
  std::shared_ptr<Session> session;
  {
    Current &state = current();
    std::lock_guard lock(state.mu);
    if (g_forked.exchange(false, std::memory_order_relaxed)) {
      abandon_after_fork(state.session);
      if (self_state().session != state.session) abandon_after_fork(self_state().session);
      state.session.reset();
      g_epoch.fetch_add(1, std::memory_order_seq_cst);
      empty_idle_threads();
      return;
    }
    session = std::move(state.session);
    g_epoch.fetch_add(1, std::memory_order_seq_cst);
    // Under the lock: a session that other threads start meanwhile finds the cores released.
    g_shutting_down.store(true, std::memory_order_release);
    if (session) session->release_all();
    g_shutting_down.store(false, std::memory_order_release);
  }
  // Other threads' references: idle ones go now, those of calls in flight when the calls end.
  empty_idle_threads();
}

// ---- handles ------------------------------------------------------------------------------------

namespace {

template <typename T, typename Handle>
T *lookup(const Session &session, Handle handle, HandleKind kind,
          const std::vector<std::unique_ptr<T>> &objects, trn_result_t *result) {
  const DecodedHandle decoded = decode_handle(from_handle(handle));
  if (handle == nullptr || decoded.kind != kind || decoded.generation != session.generation() ||
      decoded.slot >= objects.size()) {
    *result = invalid_handle(kind, from_handle(handle));
    return nullptr;
  }
  *result = TRN_SUCCESS;
  return objects[decoded.slot].get();
}

}  // namespace

trn_result_t invalid_handle(HandleKind expected, uint64_t value) {
  const char *what = handle_kind_name(expected);
  if (value == 0)
    return fail(TRN_ERROR_INVALID_HANDLE, std::string("the ") + what + " handle is NULL");
  const DecodedHandle decoded = decode_handle(value);
  if (decoded.kind != expected) {
    const bool known = decoded.kind >= HandleKind::driver && decoded.kind <= HandleKind::tensor_set;
    return fail(TRN_ERROR_INVALID_HANDLE,
                known ? std::string("expected a ") + what + " handle but got a " +
                            handle_kind_name(decoded.kind) + " handle"
                      : std::string("the value passed as a ") + what + " handle is not a handle");
  }
  if (made_before_fork(decoded.generation))
    return fail(TRN_ERROR_INVALID_HANDLE,
                std::string("the ") + what +
                    " handle was made before this process forked: a child has none of its "
                    "parent's devices, memory, queues or other objects (they stay the parent's). "
                    "Get the devices again in the child (trn_device_get) and make what it needs "
                    "there, or start the child before using trn");
  const bool dynamic = expected >= HandleKind::pool;
  return fail(TRN_ERROR_INVALID_HANDLE,
              std::string("the ") + what + " handle is stale: " +
                  (dynamic ? std::string("it was destroyed or freed, or its runtime session was "
                                         "shut down")
                           : "it belongs to a runtime session that was shut down "
                             "(trn_runtime_shutdown); get the " +
                                 std::string(what) + " again"));
}

const char *handle_kind_name(HandleKind kind) {
  switch (kind) {
    case HandleKind::driver: return "driver";
    case HandleKind::device: return "device";
    case HandleKind::core: return "core";
    case HandleKind::pool: return "pool";
    case HandleKind::mem: return "memory";
    case HandleKind::sem: return "semaphore";
    case HandleKind::queue: return "queue";
    case HandleKind::kernel: return "kernel";
    case HandleKind::profile: return "profile";
    case HandleKind::program: return "program";
    case HandleKind::tensor_set: return "tensor set";
  }
  return "unknown";
}

Driver *lookup_driver(const Session &session, trn_driver_t handle, trn_result_t *result) {
  return lookup(session, handle, HandleKind::driver, session.drivers(), result);
}
Device *lookup_device(const Session &session, trn_device_t handle, trn_result_t *result) {
  return lookup(session, handle, HandleKind::device, session.devices(), result);
}
Core *lookup_core(const Session &session, trn_core_t handle, trn_result_t *result) {
  return lookup(session, handle, HandleKind::core, session.cores(), result);
}

trn_driver_t handle_of(const Session &session, uint32_t driver_slot) {
  return to_handle<trn_driver_t>(
      encode_handle(session.generation(), HandleKind::driver, driver_slot));
}
trn_device_t handle_of(const Session &session, const Device &device) {
  return to_handle<trn_device_t>(
      encode_handle(session.generation(), HandleKind::device, device.index));
}
trn_core_t handle_of(const Session &session, const Core &core) {
  return to_handle<trn_core_t>(encode_handle(session.generation(), HandleKind::core, core.slot));
}

}  // namespace trn::rt
