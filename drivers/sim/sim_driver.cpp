// The simulated device's entry point: fills the HAL table and keeps one instance per runtime
// initialisation (the configuration, the state directory and the open devices).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "drivers/hal.h"
#include "sim/config.hpp"
#include "sim/device_state.hpp"
#include "sim/kernel_runner.hpp"
#include "sim/ofd_lock.hpp"
#include "sim/state_check.hpp"
#include "sim/topology.hpp"

struct trn_hal_instance_s {
  trn::sim::SimConfig config;
  trn_hal_process_identity_t identity{};
  std::string command;
  std::string runtime_version;
  std::vector<std::unique_ptr<trn::sim::DeviceState>> devices;
  trn_result_t status = TRN_SUCCESS;
  std::string status_detail;
  std::mutex executors_mu;  // guards executors (one set per device, made on first launch)
  std::map<uint32_t, std::unique_ptr<trn::sim::CoreExecutors>> executors;
};

namespace trn::sim {
namespace {

// Opening a device set holds the directory lock only for file creation and validation
// (microseconds); ten seconds means a holder is stopped, not slow.
constexpr uint64_t kDirectoryLockTimeoutNs = 10'000'000'000ull;

trn_result_t fail(trn_hal_error_t *err, trn_result_t result, const std::string &why) {
  if (err) std::snprintf(err->message, sizeof err->message, "%s", why.c_str());
  return result;
}

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

trn_result_t sim_open(const trn_hal_process_identity_t *identity, trn_hal_instance_t **out,
                      trn_hal_error_t *err) {
  if (identity == nullptr || out == nullptr)
    return fail(err, TRN_ERROR_NULL_POINTER, "sim driver: open needs an identity and an output");
  auto instance = std::unique_ptr<trn_hal_instance_t>(new (std::nothrow) trn_hal_instance_t);
  if (!instance) return fail(err, TRN_ERROR_OUT_OF_HOST_MEMORY, "sim driver: out of memory");
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

void sim_close(trn_hal_instance_t *instance) {
  delete instance;
}

uint32_t sim_device_count(const trn_hal_instance_t *instance) {
  return instance ? static_cast<uint32_t>(instance->devices.size()) : 0;
}

trn_result_t sim_status(const trn_hal_instance_t *instance, char *detail, uint32_t detail_size) {
  if (detail && detail_size)
    std::snprintf(detail, detail_size, "%s", instance->status_detail.c_str());
  return instance->status;
}

DeviceState *device_of(trn_hal_instance_t *instance, uint32_t device, trn_hal_error_t *err) {
  if (instance == nullptr || device >= instance->devices.size()) {
    fail(err, TRN_ERROR_OUT_OF_RANGE, "sim driver: no device " + std::to_string(device));
    return nullptr;
  }
  return instance->devices[device].get();
}

trn_result_t check_cores(const DeviceState &state, uint32_t first, uint32_t count,
                         trn_hal_error_t *err) {
  if (count == 0 || first >= state.header().physical_cores ||
      count > state.header().physical_cores - first)
    return fail(err, TRN_ERROR_OUT_OF_RANGE,
                "sim driver: cores " + std::to_string(first) + "+" + std::to_string(count) +
                    " are outside device " + std::to_string(state.header().device_index));
  return TRN_SUCCESS;
}

trn_result_t sim_device_properties(trn_hal_instance_t *instance, uint32_t device,
                                   trn_device_properties_t *p, trn_hal_error_t *err) {
  DeviceState *state = device_of(instance, device, err);
  if (!state) return TRN_ERROR_OUT_OF_RANGE;
  const StateHeader &h = state->header();
  const GenerationSpec &spec = generation_spec(static_cast<trn_generation_t>(h.generation));
  p->generation = spec.generation;
  std::snprintf(p->name, sizeof p->name, "%s (simulated)", spec.chip_name);
  std::snprintf(p->driver, sizeof p->driver, "sim");
  std::snprintf(p->pci_bdf, sizeof p->pci_bdf, "0000:%02x:00.0", 0x10 + device);
  p->physical_core_count = h.physical_cores;
  p->hbm_bytes = h.hbm_bytes;
  p->hbm_bank_count = spec.hbm_banks;
  for (uint32_t bank = 0; bank < TRN_MAX_HBM_BANKS; ++bank)
    p->hbm_bank_bytes[bank] = bank < spec.hbm_banks ? h.hbm_bytes / spec.hbm_banks : 0;
  p->hbm_bandwidth_bytes_per_s = spec.hbm_bandwidth_bytes_per_s;
  p->dma_engines_per_core = spec.dma_engines_per_core;
  p->semaphores_per_core = spec.semaphores_per_core;
  p->sbuf_partitions = spec.sbuf_partitions;
  p->sbuf_bytes_per_partition = spec.sbuf_bytes_per_partition;
  p->sbuf_usable_bytes_per_partition = spec.sbuf_usable_bytes_per_partition;
  p->psum_bytes_per_partition = spec.psum_bytes_per_partition;
  p->psum_banks = spec.psum_banks;
  p->tensor_clock_hz = spec.tensor_clock_hz;
  p->vector_clock_hz = spec.vector_clock_hz;
  p->scalar_clock_hz = spec.scalar_clock_hz;
  p->gpsimd_clock_hz = spec.gpsimd_clock_hz;
  p->peak_bf16_flops_per_core = spec.tensor_clock_hz * kBf16FlopsPerTensorCycle;
  p->peak_fp32_flops_per_core = spec.tensor_clock_hz * kFp32FlopsPerTensorCycle;
  p->dma_engine_bytes_per_s = spec.dma_engine_bytes_per_s;
  p->neighbor_count = static_cast<uint32_t>(
      torus_neighbors(device, static_cast<uint32_t>(instance->devices.size())).size());
  return TRN_SUCCESS;
}

trn_result_t sim_device_neighbors(trn_hal_instance_t *instance, uint32_t device, uint32_t *count,
                                  uint32_t *neighbors, trn_hal_error_t *err) {
  if (!device_of(instance, device, err)) return TRN_ERROR_OUT_OF_RANGE;
  const auto all = torus_neighbors(device, static_cast<uint32_t>(instance->devices.size()));
  if (neighbors == nullptr) {
    *count = static_cast<uint32_t>(all.size());
  } else {
    *count = std::min<uint32_t>(*count, static_cast<uint32_t>(all.size()));
    std::copy_n(all.begin(), *count, neighbors);
  }
  return TRN_SUCCESS;
}

trn_result_t sim_core_claim(trn_hal_instance_t *instance, uint32_t device, uint32_t first,
                            uint32_t count, uint32_t *busy_core, trn_hal_error_t *err) {
  DeviceState *state = device_of(instance, device, err);
  if (!state) return TRN_ERROR_OUT_OF_RANGE;
  if (trn_result_t r = check_cores(*state, first, count, err); r != TRN_SUCCESS) return r;
  std::string why;
  trn_result_t r = state->claim(instance->identity, first, count, busy_core, &why);
  return r == TRN_SUCCESS ? r : fail(err, r, why);
}

trn_result_t sim_core_unclaim(trn_hal_instance_t *instance, uint32_t device, uint32_t first,
                              uint32_t count, trn_hal_error_t *err) {
  DeviceState *state = device_of(instance, device, err);
  if (!state) return TRN_ERROR_OUT_OF_RANGE;
  if (trn_result_t r = check_cores(*state, first, count, err); r != TRN_SUCCESS) return r;
  std::string why;
  trn_result_t r = state->unclaim(first, count, &why);
  return r == TRN_SUCCESS ? r : fail(err, r, why);
}

trn_result_t sim_core_owner(trn_hal_instance_t *instance, uint32_t device, uint32_t core,
                            trn_hal_process_t *owner, trn_hal_error_t *err) {
  DeviceState *state = device_of(instance, device, err);
  if (!state) return TRN_ERROR_OUT_OF_RANGE;
  if (trn_result_t r = check_cores(*state, core, 1, err); r != TRN_SUCCESS) return r;
  std::string why;
  trn_result_t r = state->owner(core, owner, &why);
  return r == TRN_SUCCESS ? r : fail(err, r, why);
}

trn_result_t sim_process_list(trn_hal_instance_t *instance, uint32_t device, uint32_t *count,
                              trn_hal_process_t *processes, trn_hal_error_t *err) {
  DeviceState *state = device_of(instance, device, err);
  if (!state) return TRN_ERROR_OUT_OF_RANGE;
  std::string why;
  trn_result_t r = state->processes(count, processes, &why);
  return r == TRN_SUCCESS ? r : fail(err, r, why);
}

// Device addresses: (device + 1) << 56 | bank << 48 | offset in the bank (see trn.h).
uint64_t to_device_address(const DeviceState &state, uint32_t device, uint64_t offset) {
  const uint64_t bank = offset / state.bank_bytes();
  return (uint64_t{device + 1} << 56) | (bank << 48) | (offset % state.bank_bytes());
}

bool to_offset(const DeviceState &state, uint32_t device, uint64_t address, uint64_t bytes,
               uint64_t *offset) {
  const uint64_t bank = (address >> 48) & 0xffu;
  const uint64_t in_bank = address & ((uint64_t{1} << 48) - 1);
  if ((address >> 56) != device + 1u || in_bank >= state.bank_bytes() ||
      bank >= state.header().hbm_bytes / state.bank_bytes())
    return false;
  *offset = bank * state.bank_bytes() + in_bank;
  return bytes <= state.header().hbm_bytes - *offset;
}

template <typename Body>
trn_result_t with_device(trn_hal_instance_t *instance, uint32_t device, trn_hal_error_t *err,
                         Body body) {
  DeviceState *state = device_of(instance, device, err);
  if (!state) return TRN_ERROR_OUT_OF_RANGE;
  std::string why;
  trn_result_t r = body(*state, &why);
  return r == TRN_SUCCESS ? r : fail(err, r, why);
}

trn_result_t bad_address(uint64_t address, std::string *why) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(address));
  *why = std::string("device address ") + text + " is not device memory of this device";
  return TRN_ERROR_INVALID_ARGUMENT;
}

trn_result_t sim_hbm_reserve(trn_hal_instance_t *instance, uint32_t device, uint32_t bank,
                             uint64_t bytes, uint64_t *address, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceState &state, std::string *why) {
    if (bank >= state.header().hbm_bytes / state.bank_bytes()) {
      *why = "device " + std::to_string(device) + " has no HBM bank " + std::to_string(bank);
      return TRN_ERROR_OUT_OF_RANGE;
    }
    uint64_t offset = 0;
    trn_result_t r = state.hbm_reserve(instance->identity, bank, bytes, &offset, why);
    if (r == TRN_SUCCESS) *address = to_device_address(state, device, offset);
    return r;
  });
}

trn_result_t sim_hbm_release(trn_hal_instance_t *instance, uint32_t device, uint64_t address,
                             uint64_t bytes, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceState &state, std::string *why) {
    uint64_t offset = 0;
    if (!to_offset(state, device, address, bytes, &offset)) return bad_address(address, why);
    return state.hbm_release(offset, bytes, why);
  });
}

trn_result_t sim_hbm_map(trn_hal_instance_t *instance, uint32_t device, uint64_t address,
                         uint64_t bytes, void **host, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceState &state, std::string *why) {
    uint64_t offset = 0;
    if (!to_offset(state, device, address, bytes, &offset)) return bad_address(address, why);
    return state.hbm_map(offset, bytes, host, why);
  });
}

trn_result_t sim_hbm_commit(trn_hal_instance_t *instance, uint32_t device, uint64_t address,
                            uint64_t bytes, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceState &state, std::string *why) {
    uint64_t offset = 0;
    if (!to_offset(state, device, address, bytes, &offset)) return bad_address(address, why);
    return state.hbm_commit(offset, bytes, why);
  });
}

void sim_mem_account(trn_hal_instance_t *instance, uint32_t device, uint32_t bank,
                     trn_mem_category_t category, int64_t bytes, int64_t count) {
  if (instance && device < instance->devices.size())
    instance->devices[device]->account(bank, static_cast<uint32_t>(category), bytes, count);
}

trn_result_t sim_hbm_export(trn_hal_instance_t *instance, uint32_t device, uint64_t address,
                            uint64_t bytes, uint32_t *record, uint64_t *id, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceState &state, std::string *why) {
    uint64_t offset = 0;
    if (!to_offset(state, device, address, bytes, &offset)) return bad_address(address, why);
    return state.hbm_export(offset, bytes, record, id, why);
  });
}

trn_result_t sim_hbm_import(trn_hal_instance_t *instance, uint32_t device, uint32_t record,
                            uint64_t id, uint64_t *address, uint64_t *bytes, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceState &state, std::string *why) {
    uint64_t offset = 0;
    trn_result_t r = state.hbm_import(instance->identity, record, id, &offset, bytes, why);
    if (r == TRN_SUCCESS) *address = to_device_address(state, device, offset);
    return r;
  });
}

trn_result_t sim_hbm_unexport(trn_hal_instance_t *instance, uint32_t device, uint32_t record,
                              uint64_t id, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceState &state, std::string *why) {
    return state.hbm_unexport(record, id, why);
  });
}

trn_result_t sim_hbm_bank_usage(trn_hal_instance_t *instance, uint32_t device, uint32_t bank,
                                uint64_t *bank_bytes, uint64_t *held, uint64_t *largest_free,
                                trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceState &state, std::string *why) {
    if (bank >= state.header().hbm_bytes / state.bank_bytes()) {
      *why = "device " + std::to_string(device) + " has no HBM bank " + std::to_string(bank);
      return TRN_ERROR_OUT_OF_RANGE;
    }
    *bank_bytes = state.bank_bytes();
    return state.bank_usage(bank, held, largest_free, why);
  });
}

trn_result_t sim_sem_create(trn_hal_instance_t *instance, uint32_t device, uint32_t *record,
                            uint64_t *id, trn_hal_sem_cell_t **cell, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceState &state, std::string *why) {
    return state.sem_create(instance->identity, record, id, cell, why);
  });
}

trn_result_t sim_sem_import(trn_hal_instance_t *instance, uint32_t device, uint32_t record,
                            uint64_t id, trn_hal_sem_cell_t **cell, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceState &state, std::string *why) {
    return state.sem_import(instance->identity, record, id, cell, why);
  });
}

trn_result_t sim_sem_release(trn_hal_instance_t *instance, uint32_t device, uint32_t record,
                             uint64_t id, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceState &state, std::string *why) {
    return state.sem_release(record, id, why);
  });
}

void sim_core_account(trn_hal_instance_t *instance, uint32_t device, uint32_t core,
                      const trn_hal_core_activity_t *delta) {
  if (instance && delta && device < instance->devices.size())
    instance->devices[device]->core_account(core, *delta);
}

trn_generation_t generation_of(const DeviceState &state) {
  return static_cast<trn_generation_t>(state.header().generation);
}

trn_result_t sim_kernel_load(trn_hal_instance_t *instance, uint32_t device, const void *image,
                             size_t size, trn_hal_kernel_t **kernel, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceState &state, std::string *why) {
    std::unique_ptr<trn_hal_kernel> loaded;
    trn_result_t r = load_kernel(image, size, generation_of(state), &loaded, why);
    if (r == TRN_SUCCESS) *kernel = loaded.release();
    return r;
  });
}

void sim_kernel_unload(trn_hal_instance_t *, trn_hal_kernel_t *kernel) {
  delete kernel;
}

trn_result_t sim_kernel_run(trn_hal_instance_t *instance, uint32_t device, uint32_t core,
                            trn_hal_kernel_t *kernel, const trn_hal_binding_t *args,
                            uint32_t arg_count, trn_hal_run_result_t *result,
                            trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceState &state, std::string *why) {
    const auto &program = kernel->program;
    if (arg_count != program.args.size()) {
      *why = "kernel '" + program.name + "' takes " + std::to_string(program.args.size()) +
             " arguments, " + std::to_string(arg_count) + " were bound";
      return TRN_ERROR_INVALID_ARGUMENT;
    }
    std::vector<exec::HbmBinding> bound(arg_count);
    for (uint32_t i = 0; i < arg_count; ++i) {
      uint64_t offset = 0;
      if (args[i].bytes == 0) continue;
      if (!to_offset(state, device, args[i].device_address, args[i].bytes, &offset))
        return bad_address(args[i].device_address, why);
      void *host = nullptr;
      if (trn_result_t r = state.hbm_map(offset, args[i].bytes, &host, why); r != TRN_SUCCESS)
        return r;
      bound[i] = {static_cast<std::byte *>(host), args[i].bytes};
    }
    CoreExecutors *executors = nullptr;
    {
      std::lock_guard lock(instance->executors_mu);
      auto &slot = instance->executors[device];
      if (!slot) slot = std::make_unique<CoreExecutors>(generation_of(state));
      executors = slot.get();
    }
    return executors->run(core, *kernel, bound, result, why);
  });
}

trn_hal_ops_t make_ops() {
  trn_hal_ops_t table{};
  trn_hal_ops_t *ops = &table;
  ops->version = TRN_HAL_VERSION;
  ops->size = sizeof(trn_hal_ops_t);
  ops->name = "sim";
  ops->open = sim_open;
  ops->close = sim_close;
  ops->device_count = sim_device_count;
  ops->status = sim_status;
  ops->device_properties = sim_device_properties;
  ops->device_neighbors = sim_device_neighbors;
  ops->core_claim = sim_core_claim;
  ops->core_unclaim = sim_core_unclaim;
  ops->core_owner = sim_core_owner;
  ops->process_list = sim_process_list;
  ops->hbm_reserve = sim_hbm_reserve;
  ops->hbm_release = sim_hbm_release;
  ops->hbm_map = sim_hbm_map;
  ops->hbm_commit = sim_hbm_commit;
  ops->mem_account = sim_mem_account;
  ops->hbm_export = sim_hbm_export;
  ops->hbm_import = sim_hbm_import;
  ops->hbm_unexport = sim_hbm_unexport;
  ops->hbm_bank_usage = sim_hbm_bank_usage;
  ops->chunk_bytes = kChunkBytes;
  ops->sem_create = sim_sem_create;
  ops->sem_import = sim_sem_import;
  ops->sem_release = sim_sem_release;
  ops->core_account = sim_core_account;
  ops->kernel_load = sim_kernel_load;
  ops->kernel_unload = sim_kernel_unload;
  ops->kernel_run = sim_kernel_run;
  return table;
}

}  // namespace
}  // namespace trn::sim

// The runtime checks the table's version against its own; the sim serves only its one table.
extern "C" TRN_HAL_EXPORT const trn_hal_ops_t *trn_hal_get_ops(uint32_t /*runtime_version*/) {
  static const trn_hal_ops_t ops = trn::sim::make_ops();
  return &ops;
}
