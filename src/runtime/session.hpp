// A runtime session: everything the runtime knows between initialisation and shutdown — the
// drivers it opened, their devices and cores. API calls hold a shared_ptr to the session they
// run on, so a concurrent trn_runtime_shutdown() never frees an object under a running call.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "drivers/hal.h"
#include "runtime/handle.hpp"
#include "runtime/object_table.hpp"
#include "trn/trn.h"

namespace trn::rt {

struct Driver {
  Driver() = default;
  Driver(const Driver &) = delete;
  Driver &operator=(const Driver &) = delete;
  ~Driver() {
    if (instance) ops.close(instance);
  }

  std::string name;     // "sim"; a driver that could not be loaded keeps its file's name
  trn_hal_ops_t ops{};  // zero for a driver that could not be loaded (it has no devices)
  trn_hal_instance_t *instance = nullptr;
  trn_result_t status = TRN_SUCCESS;
  std::string status_detail;
  uint32_t first_device = 0;  // index of its first device in the session
  uint32_t device_count = 0;
};

struct Device;

struct Core {
  Device *device = nullptr;
  trn_hal_core_info_t layout{};  // its physical cores, bank and DMA engines, from the driver
  uint32_t index = 0;            // logical index within the device
  uint32_t global_id = 0;        // as TRN_VISIBLE_CORES names it
  uint32_t slot = 0;             // handle slot in the session's core list
  bool visible = false;
  bool owned = false;   // guarded by device->mu
  uint32_t queues = 0;  // live queues on the core; guarded by device->mu
};

class Pool;
struct Mem;
class Sem;
class Queue;
struct Kernel;
class Profile;
struct Program;
struct TensorSet;

struct Device {
  Driver *driver = nullptr;
  uint32_t driver_index = 0;  // the device's number inside its driver
  uint32_t index = 0;
  trn_device_properties_t properties{};  // complete, process view
  trn_hal_device_info_t info{};          // what the driver adds (LNC rules, chunk size)
  std::vector<Core *> cores;             // all logical cores, by index
  std::mutex mu;                         // serialises ownership changes of its cores
  bool shut_down = false;  // guarded by mu: the session was shut down, no core is claimed again
  std::mutex memory_mu;    // guards pools and commit/export state of its memory
  std::vector<std::weak_ptr<Pool>> pools;  // this process's pools of the device
  // How many of this process's allocations hold each export (record, id): the driver knows one
  // hold per process, so it is let go only when the last of them is freed.
  std::map<std::pair<uint32_t, uint64_t>, uint32_t> export_holds;  // guarded by memory_mu
  // Live allocations by address (imports of this process's own exports may share one).
  std::mutex index_mu;
  std::multimap<uint64_t, std::weak_ptr<Mem>> by_address;  // guarded by index_mu
};

class Session {
 public:
  ~Session();  // closes the drivers (dropping their claims without writing records)

  // Opens the drivers and builds the device and core lists from the environment.
  static trn_result_t create(std::shared_ptr<Session> *out, std::string *why);

  uint32_t generation() const { return generation_; }
  const std::vector<std::unique_ptr<Driver>> &drivers() const { return drivers_; }
  const std::vector<std::unique_ptr<Device>> &devices() const { return devices_; }
  const std::vector<std::unique_ptr<Core>> &cores() const { return cores_; }

  // Gives up every allocation, pool and core this process owns (explicit shutdown; never after
  // fork in the child, where they belong to the parent).
  void release_all();
  // In a forked child: the drivers give up the instances inherited from the parent; the session
  // must then never be destroyed.
  void abandon_drivers();

  ObjectTable<Pool> pools{HandleKind::pool};
  ObjectTable<Mem> mems{HandleKind::mem};
  ObjectTable<Sem> sems{HandleKind::sem};
  ObjectTable<Queue> queues{HandleKind::queue};
  ObjectTable<Kernel> kernels{HandleKind::kernel};
  ObjectTable<Profile> profiles{HandleKind::profile};
  ObjectTable<Program> programs{HandleKind::program};
  ObjectTable<TensorSet> tensor_sets{HandleKind::tensor_set};

 private:
  uint32_t generation_ = next_handle_generation();
  std::vector<std::unique_ptr<Driver>> drivers_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<std::unique_ptr<Core>> cores_;
};

// The current session, created on first use. On failure returns null and sets *result and
// trn_last_error(); the next call tries again (the environment may have been fixed).
// The pointer stays valid until the calling API call ends (the thread keeps a reference; a
// concurrent shutdown only makes the next call start a new session).
Session *current_session(trn_result_t *result);
// At the end of every outermost API call (ApiScope): if the session changed during the call,
// the thread lets go of the old one and of the objects its lookup caches hold.
void end_api_call() noexcept;
// Ends the current session: releases owned cores and memory, invalidates handles, and empties
// every thread's cached references so that the drivers close now, or, if calls are in flight on
// other threads, when the last of them returns.
void shutdown_session();

// Handle lookups against a session: null (and the error recorded) when the handle is not a
// live handle of that kind.
Driver *lookup_driver(const Session &session, trn_driver_t handle, trn_result_t *result);
Device *lookup_device(const Session &session, trn_device_t handle, trn_result_t *result);
Core *lookup_core(const Session &session, trn_core_t handle, trn_result_t *result);

// Takes a core for this process (idempotent); the work of trn_core_acquire.
trn_result_t acquire_core(Core &core);
// The same with core.device->mu held, for a visible core.
trn_result_t acquire_core_locked(Core &core);
// TRN_ERROR_INVALID_HANDLE (and the error recorded) once a shutdown released the device's cores;
// device.mu held.
trn_result_t check_not_shut_down(const Device &device);
// TRN_ERROR_INVALID_ARGUMENT (and the error recorded) for a core this process may not use.
trn_result_t check_visible(const Core &core);

trn_driver_t handle_of(const Session &session, uint32_t driver_slot);
trn_device_t handle_of(const Session &session, const Device &device);
trn_core_t handle_of(const Session &session, const Core &core);

}  // namespace trn::rt
