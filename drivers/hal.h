/*
 * The driver interface: a versioned C table of operations that each driver returns from its one
 * exported entry point, `trn_hal_get_ops`. A driver is a shared object, `libtrn-driver-<name>.so`,
 * that the runtime finds beside libtrn or where TRN_DRIVER points (docs/ARCHITECTURE.md, "Driver
 * discovery"). The runtime keeps the API's bookkeeping (handles, validation, visibility, errors);
 * the driver owns the devices.
 *
 * Device and core numbers here are physical: the runtime maps logical cores (LNC) onto them.
 * Every operation returns a trn_result_t and, on failure, writes one line into `err` saying what
 * was wrong and what to do. Operations are thread-safe unless noted.
 */
#ifndef TRN_DRIVERS_HAL_H
#define TRN_DRIVERS_HAL_H

#include <stdint.h>

#include "trn/trn.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Interface versions are major.minor. A runtime uses a driver whose major version equals its own
 * and whose table is at least as large as the runtime's: minor versions only append operations.
 */
#define TRN_HAL_MAKE_VERSION(major, minor) TRN_CAST_(uint32_t, ((major) << 16) | (minor))
#define TRN_HAL_VERSION_MAJOR(version) (TRN_CAST_(uint32_t, version) >> 16)
#define TRN_HAL_VERSION_MINOR(version) (TRN_CAST_(uint32_t, version) & 0xffffu)
#define TRN_HAL_VERSION TRN_HAL_MAKE_VERSION(1u, 0u)

typedef struct trn_hal_error {
  char message[TRN_DETAIL_MAX];
} trn_hal_error_t;

/** One driver instance: opened once per runtime initialisation. */
typedef struct trn_hal_instance_s trn_hal_instance_t;

/** Who this process is, as other processes and tools will see it. */
typedef struct trn_hal_process_identity {
  const char *command;         /**< command line, spaces between arguments */
  const char *runtime_version; /**< e.g. "0.1.0" */
} trn_hal_process_identity_t;

/**
 * A semaphore's shared words. The runtime accesses them with atomic operations and sleeps on
 * `wake` with a futex; a driver places cells where every process that uses the semaphore can
 * map them (the sim: its device state file).
 */
typedef struct trn_hal_sem_cell {
  uint64_t value;    /**< the timeline value */
  uint32_t wake;     /**< futex word: changes on every signal or failure */
  uint32_t failed;   /**< nonzero: a pending signal will not happen */
  uint32_t sleepers; /**< waiters asleep on `wake` */
  uint32_t reserved;
} trn_hal_sem_cell_t;

/** Per-core activity counters this process publishes (what tools show as utilisation). */
typedef struct trn_hal_core_activity {
  uint64_t commands_completed;
  uint64_t commands_failed;
  uint64_t dma_bytes;
  uint64_t dma_busy_ns;  /**< simulated DMA engine time */
  uint64_t busy_host_ns; /**< host time spent executing the core's commands */
  uint64_t kernels_completed;
  uint64_t kernels_faulted;
  uint64_t kernel_ns; /**< simulated time of kernels */
  uint64_t engine_instructions[TRN_ENGINE_COUNT];
  uint64_t engine_busy_ns[TRN_ENGINE_COUNT]; /**< simulated */
  uint64_t tensor_flops;
} trn_hal_core_activity_t;

/** A kernel the driver has loaded (opaque). */
typedef struct trn_hal_kernel trn_hal_kernel_t;

/** One kernel argument bound to device memory. */
typedef struct trn_hal_binding {
  uint64_t device_address;
  uint64_t bytes;
} trn_hal_binding_t;

/** One instruction (track < TRN_ENGINE_COUNT) or DMA transfer (track = 5 + queue) of a run. */
typedef struct trn_hal_trace_record {
  uint8_t track;
  uint8_t engine; /**< the engine that issued it */
  uint8_t opcode;
  uint8_t reserved;
  uint32_t index; /**< in the engine's stream */
  uint64_t start_ps, end_ps, wait_ps;
  uint64_t bytes, flops;
} trn_hal_trace_record_t;

#define TRN_HAL_DMA_QUEUES 16
#define TRN_HAL_RUN_OK 0
#define TRN_HAL_RUN_FAULT 1
#define TRN_HAL_RUN_DEADLOCK 2

/** What a kernel run did. The caller provides the trace buffer (may be NULL). */
typedef struct trn_hal_run_result {
  uint32_t status; /**< TRN_HAL_RUN_* */
  uint32_t engine; /**< fault / deadlock: where */
  uint32_t index;
  uint32_t source_line;
  char opcode[32];
  char message[TRN_DETAIL_MAX];
  uint64_t engine_instructions[TRN_ENGINE_COUNT];
  uint64_t engine_busy_ps[TRN_ENGINE_COUNT];
  uint64_t engine_wait_ps[TRN_ENGINE_COUNT];
  uint64_t dma_busy_ps[TRN_HAL_DMA_QUEUES];
  uint64_t dma_transfers, dma_bytes, flops, total_ps;
  double peak_flops; /**< the core's bf16 Tensor-engine peak */
  trn_hal_trace_record_t *trace;
  uint64_t trace_capacity;
  uint64_t trace_count; /**< records produced (may exceed capacity: the rest were dropped) */
} trn_hal_run_result_t;

/** A process attached to a device, as the driver records it. pid 0 = nobody. */
typedef struct trn_hal_process {
  int32_t pid;
  uint32_t uid;
  uint64_t attached_unix_ns;
  uint64_t since_unix_ns;      /**< core_owner: when the core was claimed; else 0 */
  uint64_t physical_core_mask; /**< physical cores it owns */
  uint64_t hbm_reserved_bytes[TRN_MAX_HBM_BANKS]; /**< chunks it holds, per bank */
  uint64_t hbm_allocated_bytes[TRN_MAX_HBM_BANKS][TRN_MEM_CATEGORY_COUNT];
  uint64_t hbm_peak_bytes[TRN_MAX_HBM_BANKS][TRN_MEM_CATEGORY_COUNT];
  uint64_t hbm_allocation_count[TRN_MAX_HBM_BANKS][TRN_MEM_CATEGORY_COUNT];
  trn_hal_core_activity_t core_activity[TRN_MAX_CORES_PER_DEVICE]; /**< per physical core */
  char command[TRN_COMMAND_MAX];
  char runtime_version[32];
} trn_hal_process_t;

typedef struct trn_hal_ops {
  uint32_t version; /**< the driver's TRN_HAL_VERSION */
  uint32_t size;    /**< the driver's sizeof(trn_hal_ops_t) */
  const char *name; /**< short driver name, "sim" */

  /**
   * Opens the driver. Finding no devices is not a failure: the instance reports 0 devices and
   * `status`/`status_detail` say why. A failure (bad configuration, inaccessible or incompatible
   * state) returns the error and no instance.
   */
  trn_result_t (*open)(const trn_hal_process_identity_t *identity, trn_hal_instance_t **instance,
                       trn_hal_error_t *err);
  /** Closes the instance; every claim it holds is dropped. Accepts NULL. */
  void (*close)(trn_hal_instance_t *instance);

  uint32_t (*device_count)(const trn_hal_instance_t *instance);
  /** Why there are no devices (TRN_SUCCESS when there are), and a one-line description. */
  trn_result_t (*status)(const trn_hal_instance_t *instance, char *detail, uint32_t detail_size);

  /**
   * Static properties of a device, physical view: the driver fills everything except the
   * fields that depend on the process (logical cores, visible cores, index).
   */
  trn_result_t (*device_properties)(trn_hal_instance_t *instance, uint32_t device,
                                    trn_device_properties_t *properties, trn_hal_error_t *err);
  /** Directly linked devices, two-call enumeration. */
  trn_result_t (*device_neighbors)(trn_hal_instance_t *instance, uint32_t device, uint32_t *count,
                                   uint32_t *neighbors, trn_hal_error_t *err);

  /**
   * Claims physical cores [first, first+count) for this process, all or none, without blocking.
   * TRN_ERROR_CORE_BUSY if any is held by another process; `busy_core` then says which.
   */
  trn_result_t (*core_claim)(trn_hal_instance_t *instance, uint32_t device, uint32_t first,
                             uint32_t count, uint32_t *busy_core, trn_hal_error_t *err);
  trn_result_t (*core_unclaim)(trn_hal_instance_t *instance, uint32_t device, uint32_t first,
                               uint32_t count, trn_hal_error_t *err);
  /** The live owner of a physical core (pid 0 when free). Never claims anything. */
  trn_result_t (*core_owner)(trn_hal_instance_t *instance, uint32_t device, uint32_t core,
                             trn_hal_process_t *owner, trn_hal_error_t *err);
  /**
   * Device memory. Reserves `bytes` (whole chunks of `chunk_bytes`) of one bank for this process
   * as one contiguous range; nothing is committed yet. TRN_ERROR_OUT_OF_DEVICE_MEMORY when the
   * bank has no such range (after reclaiming what dead processes held).
   */
  trn_result_t (*hbm_reserve)(trn_hal_instance_t *instance, uint32_t device, uint32_t bank,
                              uint64_t bytes, uint64_t *device_address, trn_hal_error_t *err);
  /** Returns a reserved range; its contents are discarded (it reads as zeros when reused). */
  trn_result_t (*hbm_release)(trn_hal_instance_t *instance, uint32_t device,
                              uint64_t device_address, uint64_t bytes, trn_hal_error_t *err);
  /** A host pointer to a reserved or imported range (no commit). */
  trn_result_t (*hbm_map)(trn_hal_instance_t *instance, uint32_t device, uint64_t device_address,
                          uint64_t bytes, void **host, trn_hal_error_t *err);
  /** Backs a range with storage before anything writes it: a full store fails here. */
  trn_result_t (*hbm_commit)(trn_hal_instance_t *instance, uint32_t device, uint64_t device_address,
                             uint64_t bytes, trn_hal_error_t *err);
  /** Adds to this process's published allocation statistics (what tools show). */
  void (*mem_account)(trn_hal_instance_t *instance, uint32_t device, uint32_t bank,
                      trn_mem_category_t category, int64_t bytes, int64_t count);
  /** Shares a reserved range with other processes; the range now lives while any holder does. */
  trn_result_t (*hbm_export)(trn_hal_instance_t *instance, uint32_t device, uint64_t device_address,
                             uint64_t bytes, uint32_t *record, uint64_t *id, trn_hal_error_t *err);
  trn_result_t (*hbm_import)(trn_hal_instance_t *instance, uint32_t device, uint32_t record,
                             uint64_t id, uint64_t *device_address, uint64_t *bytes,
                             trn_hal_error_t *err);
  /** Drops this process's hold on an export (exporter or importer). */
  trn_result_t (*hbm_unexport)(trn_hal_instance_t *instance, uint32_t device, uint32_t record,
                               uint64_t id, trn_hal_error_t *err);
  /** A bank's size, the bytes live processes hold in it, and its largest free range. */
  trn_result_t (*hbm_bank_usage)(trn_hal_instance_t *instance, uint32_t device, uint32_t bank,
                                 uint64_t *bank_bytes, uint64_t *held_bytes,
                                 uint64_t *largest_free_bytes, trn_hal_error_t *err);
  uint64_t chunk_bytes; /**< reservation granule */

  /** A semaphore cell other processes can import; freed when its last holder lets go or dies. */
  trn_result_t (*sem_create)(trn_hal_instance_t *instance, uint32_t device, uint32_t *record,
                             uint64_t *id, trn_hal_sem_cell_t **cell, trn_hal_error_t *err);
  trn_result_t (*sem_import)(trn_hal_instance_t *instance, uint32_t device, uint32_t record,
                             uint64_t id, trn_hal_sem_cell_t **cell, trn_hal_error_t *err);
  trn_result_t (*sem_release)(trn_hal_instance_t *instance, uint32_t device, uint32_t record,
                              uint64_t id, trn_hal_error_t *err);
  /** Adds to this process's activity counters of a physical core. */
  void (*core_account)(trn_hal_instance_t *instance, uint32_t device, uint32_t core,
                       const trn_hal_core_activity_t *delta);

  /**
   * Kernels. load validates the binary for the device (TRN_ERROR_INVALID_KERNEL with the reason);
   * run executes it on a physical core with its arguments bound, filling `result` (a fault or
   * deadlock of the kernel is a result, not an error; errors are bad bindings). The caller has
   * committed (hbm_commit) the ranges of the arguments the kernel may write.
   */
  trn_result_t (*kernel_load)(trn_hal_instance_t *instance, uint32_t device, const void *image,
                              size_t size, trn_hal_kernel_t **kernel, trn_hal_error_t *err);
  void (*kernel_unload)(trn_hal_instance_t *instance, trn_hal_kernel_t *kernel);
  trn_result_t (*kernel_run)(trn_hal_instance_t *instance, uint32_t device, uint32_t core,
                             trn_hal_kernel_t *kernel, const trn_hal_binding_t *args,
                             uint32_t arg_count, trn_hal_run_result_t *result,
                             trn_hal_error_t *err);

  /** Live processes attached to a device, two-call enumeration. Never claims anything. */
  trn_result_t (*process_list)(trn_hal_instance_t *instance, uint32_t device, uint32_t *count,
                               trn_hal_process_t *processes, trn_hal_error_t *err);
} trn_hal_ops_t;

/** The one symbol a driver's shared object exports. */
#define TRN_HAL_ENTRY_POINT "trn_hal_get_ops"

#if defined(__GNUC__)
#define TRN_HAL_EXPORT __attribute__((visibility("default")))
#else
#define TRN_HAL_EXPORT
#endif

/**
 * A driver's entry point: its table of operations, in static storage that lives as long as the
 * driver is loaded, or NULL if it has none for a runtime of `runtime_version` (the runtime's
 * TRN_HAL_VERSION). The runtime reads `version` and `size` first and refuses a table of another
 * major version or one smaller than its own trn_hal_ops_t.
 */
typedef const trn_hal_ops_t *(*trn_hal_get_ops_fn)(uint32_t runtime_version);
TRN_HAL_EXPORT const trn_hal_ops_t *trn_hal_get_ops(uint32_t runtime_version);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TRN_DRIVERS_HAL_H */
