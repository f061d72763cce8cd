// The simulated device's entry point: opens and closes instances (the configuration, the state
// directory and the open devices) and fills the HAL table from the adapters of each group.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "drivers/hal.h"
#include "sim/ofd_lock.hpp"
#include "sim/ops_support.hpp"
#include "sim/ops_table.hpp"
#include "sim/semaphore.hpp"
#include "sim/sim_queue.hpp"
#include "sim/state_check.hpp"

trn_hal_instance_s::trn_hal_instance_s()
    : dma(std::min(4u, std::thread::hardware_concurrency())),
      poller(std::make_unique<trn::sim::SemPoller>()) {}

trn_hal_instance_s::~trn_hal_instance_s() {
  // Queues first (their workers use everything else), then the watcher thread.
  for (;;) {
    trn_hal_queue_t *queue = nullptr;
    {
      std::lock_guard lock(queues_mu);
      if (queues.empty()) break;
      queue = *queues.begin();
    }
    trn::sim::destroy_queue(this, queue);
  }
  sems.destroy_all();  // shared ones let go of their cells while the devices are open
  kernels.destroy_all();
  poller.reset();
}

namespace trn::sim {
namespace {

// Opening a device set holds the directory lock only for file creation and validation
// (microseconds); ten seconds means a holder is stopped, not slow.
constexpr uint64_t kDirectoryLockTimeoutNs = 10'000'000'000ull;

// The directory a path names, spelled so that its last component is a name: "link/", "link/."
// and "link//./" are "link", which lstat then sees as the symbolic link it is.
std::string without_trailing_dots(std::string path) {
  for (;;) {
    if (path.size() > 1 && path.back() == '/') {
      path.pop_back();
    } else if (path.size() > 2 && path.compare(path.size() - 2, 2, "/.") == 0) {
      path.resize(path.size() - 2);
    } else {
      return path;
    }
  }
}

trn_result_t prepare_root(const std::string &configured, std::string *why) {
  const std::string root = without_trailing_dots(configured);
  if (mkdir(root.c_str(), 0700) != 0 && errno != EEXIST) {
    const int error = errno;
    *why = "cannot create the simulated device directory " + root +
           " (TRN_SIM_ROOT): " + std::strerror(error) +
           (error == ENOENT ? "; create its parent directory or set TRN_SIM_ROOT elsewhere"
                            : "; set TRN_SIM_ROOT to a directory you can write");
    return error == EACCES ? TRN_ERROR_PERMISSION_DENIED : TRN_ERROR_DRIVER;
  }
  struct stat st {};
  if (lstat(root.c_str(), &st) != 0) {
    *why = "cannot inspect " + root + " (TRN_SIM_ROOT): " + std::strerror(errno);
    return TRN_ERROR_DRIVER;
  }
  if (S_ISLNK(st.st_mode)) {
    *why = root +
           " (TRN_SIM_ROOT) is a symbolic link; trn refuses one (whoever can change it "
           "could point the devices elsewhere): set TRN_SIM_ROOT to the directory itself";
    return TRN_ERROR_INVALID_CONFIG;
  }
  if (!S_ISDIR(st.st_mode)) {
    *why = root + " (TRN_SIM_ROOT) is not a directory: remove it or set TRN_SIM_ROOT elsewhere";
    return TRN_ERROR_INVALID_CONFIG;
  }
  if (st.st_uid != geteuid()) {
    *why = root + " (TRN_SIM_ROOT) belongs to uid " + std::to_string(st.st_uid) +
           ", not to this user (uid " + std::to_string(geteuid()) +
           "): simulated devices are private to their user; set TRN_SIM_ROOT to a directory of "
           "your own";
    return TRN_ERROR_PERMISSION_DENIED;
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
    *why = root + " (TRN_SIM_ROOT) has mode " + mode +
           " but must be 0700 so other users cannot see or touch the devices: run chmod 700 " +
           root;
    return TRN_ERROR_PERMISSION_DENIED;
  }
  if (access(root.c_str(), R_OK | W_OK | X_OK) != 0) {
    *why = "cannot use " + root + " (TRN_SIM_ROOT): " + std::strerror(errno) +
           "; it must be readable, writable and searchable by you: run chmod 700 " + root;
    return TRN_ERROR_PERMISSION_DENIED;
  }
  return TRN_SUCCESS;
}

DeviceWish wish_for(const SimConfig &config, uint32_t index, uint32_t device_count) {
  const GenerationSpec &spec = generation_spec(config.generation);
  DeviceWish wish;
  wish.index = index;
  wish.device_count = device_count;
  wish.generation = config.generation;
  wish.physical_cores = spec.physical_cores;
  wish.hbm_bytes = config.effective_hbm_bytes();
  wish.explicit_device_count = config.device_count_explicit;
  wish.explicit_generation = config.generation_explicit;
  wish.explicit_hbm = config.hbm_explicit;
  return wish;
}

trn_result_t open_devices(trn_hal_instance_t *instance, std::string *why) {
  const SimConfig &config = instance->config;
  const std::string lock_path = config.root + "/.lock";
  bool missing = false;
  trn_result_t result = TRN_SUCCESS;
  const int lock_fd = open_private_file(
      lock_path, O_RDWR | O_CREAT, "remove it when no process uses the devices (trn re-creates it)",
      &missing, &result, why);
  if (lock_fd < 0) return result;
  if (int rc = ofd_lock_with_deadline(lock_fd, 0, LockKind::exclusive, kDirectoryLockTimeoutNs);
      rc != 0) {
    *why = rc == ETIMEDOUT ? "timed out after 10 s waiting for " + lock_path +
                                 ": another process holds it while opening the devices (is one "
                                 "stopped in a debugger?)"
                           : "cannot lock " + lock_path + ": " + std::strerror(rc);
    result = rc == ETIMEDOUT ? TRN_TIMEOUT : TRN_ERROR_DRIVER;
  }
  uint32_t device_count = config.device_count;
  for (uint32_t index = 0; result == TRN_SUCCESS && index < device_count; ++index) {
    std::unique_ptr<DeviceState> device;
    result = DeviceState::open(config.root, wish_for(config, index, device_count), &device, why);
    if (result != TRN_SUCCESS) break;
    // Without an explicit TRN_SIM_DEVICES, join the device set the running processes use.
    if (index == 0 && !config.device_count_explicit) device_count = device->header().device_count;
    instance->devices.push_back(std::move(device));
  }
  close(lock_fd);
  if (result != TRN_SUCCESS) instance->devices.clear();
  return result;
}

trn_result_t open_instance(const trn_hal_process_identity_t *identity, trn_hal_instance_t **out,
                           trn_hal_error_t *err) {
  if (identity == nullptr || out == nullptr)
    return fail(err, TRN_ERROR_NULL_POINTER, "sim driver: open needs an identity and an output");
  auto instance = std::make_unique<trn_hal_instance_t>();
  instance->command = identity->command ? identity->command : "";
  instance->runtime_version = identity->runtime_version ? identity->runtime_version : "";
  instance->identity = {instance->command.c_str(), instance->runtime_version.c_str()};

  std::string why;
  if (trn_result_t r = load_config(&instance->config, &why); r != TRN_SUCCESS)
    return fail(err, r, why);
  if (instance->config.device_count == 0) {
    instance->status = TRN_ERROR_NO_DEVICE;
    instance->status_detail = "TRN_SIM_DEVICES=0 configures no simulated devices";
  } else {
    if (trn_result_t r = prepare_root(instance->config.root, &why); r != TRN_SUCCESS)
      return fail(err, r, why);
    if (trn_result_t r = open_devices(instance.get(), &why); r != TRN_SUCCESS)
      return fail(err, r, why);
    for (uint32_t index = 0; index < instance->devices.size(); ++index)
      instance->runtimes.push_back(
          std::make_unique<DeviceRuntime>(*instance, *instance->devices[index], index));
    const StateHeader &h = instance->devices.front()->header();
    instance->status_detail = std::to_string(instance->devices.size()) + " simulated " +
                              describe_device_config(static_cast<trn_generation_t>(h.generation),
                                                     h.physical_cores, h.hbm_bytes) +
                              (instance->devices.size() == 1 ? " device" : " devices") + " in " +
                              instance->config.root;
  }
  *out = instance.release();
  return TRN_SUCCESS;
}

trn_result_t sim_open(const trn_hal_process_identity_t *identity, trn_hal_instance_t **out,
                      trn_hal_error_t *err) {
  return guarded(err, [&] { return open_instance(identity, out, err); });
}

void sim_close(trn_hal_instance_t *instance) {
  delete instance;
}

// The instance's queue workers and pollers exist only in the parent, and what it holds in the
// devices' shared state is the parent's: close the descriptors, leave everything else.
void sim_abandon(trn_hal_instance_t *instance) {
  if (!instance) return;
  for (auto &device : instance->devices) device->abandon_after_fork();
}

trn_hal_ops_t make_ops() {
  trn_hal_ops_t ops{};
  ops.version = TRN_HAL_VERSION;
  ops.size = sizeof(trn_hal_ops_t);
  ops.name = "sim";
  ops.open = sim_open;
  ops.close = sim_close;
  ops.abandon = sim_abandon;
  fill_device_ops(&ops);
  fill_memory_ops(&ops);
  fill_semaphore_ops(&ops);
  fill_kernel_ops(&ops);
  fill_queue_ops(&ops);
  return ops;
}

}  // namespace
}  // namespace trn::sim

// The runtime checks the table's version against its own; the sim serves only its one table.
extern "C" TRN_HAL_EXPORT const trn_hal_ops_t *trn_hal_get_ops(uint32_t /*runtime_version*/) {
  static const trn_hal_ops_t ops = trn::sim::make_ops();
  return &ops;
}
