/*
 * trn — userspace runtime for Trainium-class NeuronCores: the C API.
 *
 * Conventions (see docs/ARCHITECTURE.md):
 *  - Every function returns trn_result_t unless documented otherwise. On failure the thread-local
 *    trn_last_error() holds a sentence saying what was wrong and what to do; it is only changed by
 *    calls that fail, and by waits whose deadline passed (TRN_TIMEOUT: what was not reached).
 *  - Handles are opaque and validated: a stale, wrong-kind or garbage handle gives
 *    TRN_ERROR_INVALID_HANDLE, never a crash. Device and core handles stay valid until
 *    trn_runtime_shutdown().
 *  - Enumeration is two-call: pass a NULL array to learn the count in *count, then an array of
 *    *count elements. A shorter array receives the first *count elements and *count says how
 *    many were written.
 *  - Output structs carry a type tag and size first; set them with the matching *_INIT macro so
 *    that later, larger versions of a struct stay compatible.
 *  - The runtime initialises itself on first use from the environment (TRN_DRIVER, TRN_SIM_*,
 *    TRN_VISIBLE_CORES, TRN_LNC, TRN_LOG_LEVEL). Every function is safe to call from several
 *    threads at once unless its documentation says otherwise.
 */
#ifndef TRN_TRN_H
#define TRN_TRN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(TRN_BUILDING_LIBRARY)
#define TRN_API __attribute__((visibility("default")))
#else
#define TRN_API
#endif

/* A cast that is clean in C and in C++ builds with -Wold-style-cast. */
#ifdef __cplusplus
#define TRN_CAST_(type, value) static_cast<type>(value)
#else
#define TRN_CAST_(type, value) ((type)(value))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------------
 * Versions
 * --------------------------------------------------------------------------------------------- */

/*
 * Versioning. TRN_API_VERSION is major.minor. Within a major version the API and the ABI only
 * grow: functions are added, never changed or removed, and every exported symbol carries the
 * version node of the release that added it (TRN_0.1, TRN_0.2, ...; libtrn.map), so a program
 * built against 0.1 runs on any later 0.x library. Structs grow by appending members; their
 * header.size tells the library which members the caller knows. Declarations below say
 * "since 0.N" when they came after 0.1. The library's file name (libtrn.so.0.1) changes only
 * with an incompatible ABI; compare trn_get_version() with TRN_API_VERSION at run time to know
 * whether the functions a program needs are there.
 */
#define TRN_MAKE_VERSION(major, minor) TRN_CAST_(uint32_t, ((major) << 16) | (minor))
#define TRN_VERSION_MAJOR(version) (TRN_CAST_(uint32_t, version) >> 16)
#define TRN_VERSION_MINOR(version) (TRN_CAST_(uint32_t, version) & 0xffffu)
/** The API version this header describes. */
#define TRN_API_VERSION TRN_MAKE_VERSION(0, 5)

/** The API version the loaded library implements (compare with TRN_API_VERSION). */
TRN_API uint32_t trn_get_version(void);
/** The library's release string, e.g. "0.2.0". Static storage; never NULL. */
TRN_API const char *trn_get_version_string(void);

/* ------------------------------------------------------------------------------------------------
 * Results
 * Values are append-only. Ranges: 0-99 success and non-errors, 100-199 argument and handle
 * validation, 200-299 resources, 300-399 device and driver, 400-499 kernel faults,
 * 500-599 collectives, 900+ internal.
 * --------------------------------------------------------------------------------------------- */

typedef enum trn_result {
  TRN_SUCCESS = 0,
  TRN_NOT_READY = 1, /**< polled operation has not completed yet */
  TRN_TIMEOUT = 2,   /**< the deadline passed; nothing failed */

  TRN_ERROR_INVALID_ARGUMENT = 100,   /**< an argument value is not allowed */
  TRN_ERROR_INVALID_HANDLE = 101,     /**< NULL, stale, garbage or wrong-kind handle */
  TRN_ERROR_NULL_POINTER = 102,       /**< a required pointer argument is NULL */
  TRN_ERROR_INVALID_ENUM = 103,       /**< an enum argument is out of its range */
  TRN_ERROR_OUT_OF_RANGE = 104,       /**< an index or count is too large */
  TRN_ERROR_INVALID_STRUCT = 105,     /**< struct tag or size not set with its *_INIT macro */
  TRN_ERROR_INVALID_CONFIG = 106,     /**< malformed environment variable or configuration */
  TRN_ERROR_UNSUPPORTED = 107,        /**< valid request this driver or device cannot do */
  TRN_ERROR_INVALID_KERNEL_ARG = 108, /**< a launch's binding does not fit the kernel argument */
  TRN_ERROR_NOT_FOUND = 109,          /**< nothing matches what was looked up. Since 0.2 */

  TRN_ERROR_OUT_OF_HOST_MEMORY = 200,
  TRN_ERROR_OUT_OF_DEVICE_MEMORY = 201,
  TRN_ERROR_CORE_BUSY = 202,          /**< the core is owned by another process */
  TRN_ERROR_NOT_OWNER = 203,          /**< this process does not own the core */
  TRN_ERROR_QUEUE_FULL = 204,         /**< submission would block: wait for completions */
  TRN_ERROR_TOO_MANY_PROCESSES = 205, /**< every process slot of the device is taken */
  TRN_ERROR_HANDLE_IN_USE = 206,      /**< the object is still used by the device */
  TRN_ERROR_FILE = 207, /**< a file the caller named or passed cannot be created, read or written */

  TRN_ERROR_NO_DEVICE = 300,              /**< the device does not exist or was removed */
  TRN_ERROR_PERMISSION_DENIED = 301,      /**< device state not accessible to this user */
  TRN_ERROR_STATE_VERSION_MISMATCH = 302, /**< device state written by another layout version */
  TRN_ERROR_STATE_CORRUPT = 303,          /**< device state is damaged or truncated */
  TRN_ERROR_DRIVER = 304,                 /**< the driver failed (system call error) */
  TRN_ERROR_DEVICE_LOST = 305,            /**< the device stopped responding */
  TRN_ERROR_DEVICE_FAULTED = 306,         /**< the device reported a fault */
  TRN_ERROR_DRIVER_NOT_FOUND = 307,       /**< no driver where TRN_DRIVER or discovery looked */
  TRN_ERROR_DRIVER_INCOMPATIBLE = 308,    /**< not a driver, or one for another interface */

  TRN_ERROR_INVALID_KERNEL = 400,
  TRN_ERROR_KERNEL_FAULT = 401,
  TRN_ERROR_KERNEL_DEADLOCK = 402,
  TRN_ERROR_CANCELLED = 403,
  TRN_ERROR_INVALID_PROGRAM = 404, /**< the program image is malformed. Since 0.3 */

  TRN_ERROR_COLLECTIVE = 500,

  TRN_ERROR_INTERNAL = 900,

  TRN_RESULT_FORCE_INT32 = 0x7fffffff
} trn_result_t;

/** "TRN_ERROR_CORE_BUSY" for a result; "TRN_RESULT_UNKNOWN" for a value not in the enum. */
TRN_API const char *trn_result_name(trn_result_t result);
/** A one-line description of what a result means in general. Static storage; never NULL. */
TRN_API const char *trn_result_string(trn_result_t result);
/**
 * The detail of the last call on this thread that failed: the function, what was wrong and what
 * to do, e.g. "trn_core_acquire: NeuronCore 2 on device 0 (core id 2) is in use by pid 4121
 * (python train.py) since 2026-11-29 12:03:11 +0100: wait for it to release the core, end it,
 * or pick another core with TRN_VISIBLE_CORES (trn-ls -w shows who owns what)". Empty string
 * when no call failed yet.
 * Thread-local storage, valid until the next failing call on the same thread; never NULL.
 */
TRN_API const char *trn_last_error(void);
/**
 * Makes `message` what trn_last_error() returns on this thread (Since 0.5): for the libraries
 * layered on libtrn (libtrn_ops and libtrn_comm call it whenever one of their calls fails, so
 * trn_last_error() after any trn call of any layer says what went wrong) and for a framework's
 * backend that wants its own failures in the same channel. The text is copied; NULL or "" clears
 * it. Out of host memory, the message is cleared rather than left stale. Never fails.
 */
TRN_API void trn_set_last_error(const char *message);

/* ------------------------------------------------------------------------------------------------
 * Struct tags: the first member of every versioned struct.
 * --------------------------------------------------------------------------------------------- */

typedef enum trn_struct_type {
  TRN_STRUCT_DRIVER_PROPERTIES = 1,
  TRN_STRUCT_DEVICE_PROPERTIES = 2,
  TRN_STRUCT_CORE_PROPERTIES = 3,
  TRN_STRUCT_PROCESS_INFO = 4,
  TRN_STRUCT_POOL_DESC = 5,
  TRN_STRUCT_MEM_STATS = 6,
  TRN_STRUCT_MEM_INFO = 7,
  TRN_STRUCT_SEM_DESC = 8,
  TRN_STRUCT_QUEUE_DESC = 9,
  TRN_STRUCT_QUEUE_FAULT = 10,
  TRN_STRUCT_CORE_ACTIVITY = 11,
  TRN_STRUCT_KERNEL_PROPERTIES = 12,
  TRN_STRUCT_KERNEL_ARG = 13,
  TRN_STRUCT_LAUNCH_DESC = 14,
  TRN_STRUCT_PROFILE_SUMMARY = 15,
  TRN_STRUCT_PROGRAM_TENSOR = 16,     /**< since 0.3 */
  TRN_STRUCT_PROGRAM_PROPERTIES = 17, /**< since 0.3 */
  TRN_STRUCT_OPS_CONFIG = 18,         /**< trn_ops.h */
  TRN_STRUCT_OPS_CACHE_STATS = 19,    /**< trn_ops.h */
  TRN_STRUCT_OPS_FALLBACK = 20,       /**< trn_ops.h */
  TRN_STRUCT_COMM_DESC = 21,          /**< trn_comm.h */
  TRN_STRUCT_COMM_INFO = 22,          /**< trn_comm.h */
  TRN_STRUCT_FORCE_INT32 = 0x7fffffff
} trn_struct_type_t;

/** Tag and size first: the library reads and writes only the first `size` bytes. */
typedef struct trn_struct_header {
  trn_struct_type_t type;
  uint32_t size;
} trn_struct_header_t;

/* Defines `<struct_type>_make()`: a zeroed struct with its tag and size set. The *_INIT macros call
 * it, so `trn_device_properties_t p = TRN_DEVICE_PROPERTIES_INIT;` works in C and C++ without
 * missing-initializer warnings in callers' builds. */
#define TRN_DEFINE_STRUCT_MAKE(struct_type, tag)           \
  static inline struct_type struct_type##_make(void) {     \
    struct_type value;                                     \
    memset(&value, 0, sizeof value);                       \
    value.header.type = (tag);                             \
    value.header.size = TRN_CAST_(uint32_t, sizeof value); \
    return value;                                          \
  }

/* ------------------------------------------------------------------------------------------------
 * Handles
 * --------------------------------------------------------------------------------------------- */

typedef struct trn_driver_s *trn_driver_t;
typedef struct trn_device_s *trn_device_t;
typedef struct trn_core_s *trn_core_t;
typedef struct trn_pool_s *trn_pool_t;
typedef struct trn_mem_s *trn_mem_t;
typedef struct trn_sem_s *trn_sem_t;
typedef struct trn_queue_s *trn_queue_t;
typedef struct trn_kernel_s *trn_kernel_t;
typedef struct trn_profile_s *trn_profile_t;
typedef struct trn_program_s *trn_program_t;       /**< since 0.3 */
typedef struct trn_tensor_set_s *trn_tensor_set_t; /**< since 0.3 */

/* ------------------------------------------------------------------------------------------------
 * Runtime
 * --------------------------------------------------------------------------------------------- */

/**
 * Releases every core and all memory this process owns, closes the drivers and invalidates every
 * handle of every thread (later use gives TRN_ERROR_INVALID_HANDLE). The next call, on any
 * thread, re-initialises from the environment, so a process can pick up a changed
 * configuration.
 *
 * Thread safety: safe to call at any time from any thread but a queue's host function
 * (trn_queue_host_call), where it fails with TRN_ERROR_INVALID_ARGUMENT: it waits for every
 * queue, the function's own too. Calls racing with it on other
 * threads either complete on the old runtime or fail with TRN_ERROR_INVALID_HANDLE; a call that
 * started before it keeps the objects it uses until it returns (queued commands are cancelled,
 * so waits on what they would have signalled end with TRN_ERROR_CANCELLED; other waits end by
 * their own deadline or signal). When no call is in flight on another thread, the drivers are
 * closed before this returns: the process holds no core and no process slot of any device (other
 * processes and trn-ls see none). Otherwise they close when the last of those calls returns.
 */
TRN_API trn_result_t trn_runtime_shutdown(void);

/* ------------------------------------------------------------------------------------------------
 * Drivers: where devices come from (TRN_DRIVER names one; default: every driver beside libtrn).
 * --------------------------------------------------------------------------------------------- */

#define TRN_NAME_MAX 64
#define TRN_DETAIL_MAX 512

typedef struct trn_driver_properties {
  trn_struct_header_t header;
  char name[TRN_NAME_MAX];            /**< "sim" */
  uint32_t hal_version;               /**< driver interface version the driver implements */
  uint32_t device_count;              /**< devices this driver found */
  trn_result_t status;                /**< TRN_SUCCESS, or why it found no devices */
  char status_detail[TRN_DETAIL_MAX]; /**< one line: what the driver found or why not */
} trn_driver_properties_t;

TRN_DEFINE_STRUCT_MAKE(trn_driver_properties_t, TRN_STRUCT_DRIVER_PROPERTIES)
#define TRN_DRIVER_PROPERTIES_INIT trn_driver_properties_t_make()

/**
 * Lists the drivers the runtime loaded (two-call enumeration). A driver that found no devices,
 * one found beside libtrn that could not be loaded, or one that reports devices without every
 * operation the runtime calls on them, is listed with the reason in its properties. Fails only
 * if initialisation failed (bad configuration, a driver TRN_DRIVER names that cannot be loaded:
 * no such file, not a driver, another interface version; inaccessible or incompatible device
 * state); trn_last_error() says why.
 */
TRN_API trn_result_t trn_driver_get(uint32_t *count, trn_driver_t *drivers);
TRN_API trn_result_t trn_driver_get_properties(trn_driver_t driver,
                                               trn_driver_properties_t *properties);

/* ------------------------------------------------------------------------------------------------
 * Devices: one accelerator chip each.
 * --------------------------------------------------------------------------------------------- */

typedef enum trn_generation {
  TRN_GENERATION_TRN1 = 1, /**< Trainium1, NeuronCore-v2 */
  TRN_GENERATION_TRN2 = 2, /**< Trainium2, NeuronCore-v3 */
  TRN_GENERATION_TRN3 = 3, /**< Trainium3, NeuronCore-v4 */
  TRN_GENERATION_FORCE_INT32 = 0x7fffffff
} trn_generation_t;

/** "trn1", "trn2", "trn3"; "unknown" otherwise. */
TRN_API const char *trn_generation_name(trn_generation_t generation);

#define TRN_MAX_HBM_BANKS 8

typedef struct trn_device_properties {
  trn_struct_header_t header;
  uint32_t index; /**< device index, 0..count-1, as trn-ls shows it */
  trn_generation_t generation;
  char name[TRN_NAME_MAX];      /**< "Trainium2 (simulated)" */
  char driver[TRN_NAME_MAX];    /**< "sim" */
  char pci_bdf[16];             /**< PCI-style bus id, "0000:10:00.0" */
  uint32_t logical_core_config; /**< LNC: physical cores per logical core (1 or 2) */
  uint32_t physical_core_count; /**< NeuronCores on the chip */
  uint32_t core_count;          /**< logical cores = physical_core_count / LNC */
  uint32_t first_core_id;       /**< global id of core 0 (ids as TRN_VISIBLE_CORES takes) */
  uint32_t visible_core_count;  /**< cores of this device this process may use */
  uint64_t hbm_bytes;           /**< total device memory */
  uint32_t hbm_bank_count;
  uint64_t hbm_bank_bytes[TRN_MAX_HBM_BANKS];
  uint64_t hbm_bandwidth_bytes_per_s;
  uint32_t dma_engines_per_core;
  uint32_t semaphores_per_core;
  uint32_t sbuf_partitions;          /**< 128 */
  uint32_t sbuf_bytes_per_partition; /**< 192/224/256 KiB by generation */
  uint32_t sbuf_usable_bytes_per_partition;
  uint32_t psum_bytes_per_partition; /**< 16 KiB */
  uint32_t psum_banks;               /**< 8 */
  uint64_t tensor_clock_hz;
  uint64_t vector_clock_hz;
  uint64_t scalar_clock_hz;
  uint64_t gpsimd_clock_hz;
  uint64_t peak_bf16_flops_per_core; /**< dense, from clock × datapath */
  uint64_t peak_fp32_flops_per_core;
  uint32_t neighbor_count;         /**< see trn_device_get_neighbors */
  uint64_t dma_engine_bytes_per_s; /**< achievable rate of one DMA engine */
} trn_device_properties_t;

TRN_DEFINE_STRUCT_MAKE(trn_device_properties_t, TRN_STRUCT_DEVICE_PROPERTIES)
#define TRN_DEVICE_PROPERTIES_INIT trn_device_properties_t_make()

/**
 * Lists the devices of every loaded driver (two-call enumeration). Zero devices is not an error;
 * trn_driver_get_properties() says why each driver found none. Fails only if initialisation
 * failed; trn_last_error() says why and what to do.
 */
TRN_API trn_result_t trn_device_get(uint32_t *count, trn_device_t *devices);
TRN_API trn_result_t trn_device_get_properties(trn_device_t device,
                                               trn_device_properties_t *properties);
/** Indices of the devices directly linked to this one (NeuronLink), two-call enumeration. */
TRN_API trn_result_t trn_device_get_neighbors(trn_device_t device, uint32_t *count,
                                              uint32_t *device_indices);

/** What an allocation is for: drives the statistics, the tools and the OOM report. */
typedef enum trn_mem_category {
  TRN_MEM_CATEGORY_TENSORS = 0,
  TRN_MEM_CATEGORY_CONSTANTS = 1,
  TRN_MEM_CATEGORY_CODE = 2,
  TRN_MEM_CATEGORY_SCRATCH = 3,
  TRN_MEM_CATEGORY_DMA_RINGS = 4,
  TRN_MEM_CATEGORY_COLLECTIVES = 5,
  TRN_MEM_CATEGORY_COUNT = 6, /**< number of categories, not a category */
  TRN_MEM_CATEGORY_FORCE_INT32 = 0x7fffffff
} trn_mem_category_t;

/** "tensors", "constants", "code", "scratch", "dma-rings", "collectives"; "unknown" otherwise. */
TRN_API const char *trn_mem_category_name(trn_mem_category_t category);

/** A process using a device: what trn-ls -w shows. */
#define TRN_COMMAND_MAX 256
#define TRN_MAX_CORES_PER_DEVICE 64

typedef struct trn_process_info {
  trn_struct_header_t header;
  int32_t pid; /**< 0 when nobody */
  uint32_t uid;
  uint64_t attached_unix_ns;     /**< when the process attached to the device */
  uint64_t since_unix_ns;        /**< for a core owner: when it acquired the core */
  char command[TRN_COMMAND_MAX]; /**< command line, arguments separated by spaces */
  char runtime_version[32];      /**< the trn release the process runs */
  uint64_t core_mask;            /**< logical cores of this device it owns (bit i = core i) */
  uint64_t hbm_reserved_bytes;   /**< device memory it holds (whole chunks, cached included) */
  uint64_t hbm_allocated_bytes;  /**< of which handed out by allocations */
  uint64_t hbm_allocated_by_category[TRN_MEM_CATEGORY_COUNT];
} trn_process_info_t;

TRN_DEFINE_STRUCT_MAKE(trn_process_info_t, TRN_STRUCT_PROCESS_INFO)
#define TRN_PROCESS_INFO_INIT trn_process_info_t_make()

/**
 * Lists the live processes attached to a device (two-call enumeration). Each element must be
 * initialised with TRN_PROCESS_INFO_INIT. Reads the device state only: it claims nothing and
 * does not disturb the processes listed. Dead processes never appear.
 */
TRN_API trn_result_t trn_device_get_processes(trn_device_t device, uint32_t *count,
                                              trn_process_info_t *processes);

/* ------------------------------------------------------------------------------------------------
 * Cores: NeuronCores (logical cores when LNC = 2).
 * --------------------------------------------------------------------------------------------- */

typedef struct trn_core_properties {
  trn_struct_header_t header;
  uint32_t device_index;
  uint32_t index;               /**< logical core index within the device */
  uint32_t global_id;           /**< id across devices, as TRN_VISIBLE_CORES takes it */
  uint32_t first_physical_core; /**< physical cores index..index+physical_core_count-1 */
  uint32_t physical_core_count; /**< = LNC */
  uint32_t hbm_bank;            /**< the HBM bank nearest this core */
  uint32_t dma_engines;
  uint32_t owned;   /**< 1 if this process owns the core */
  uint32_t visible; /**< 1 if this process may use it (trn_core_get lists it); since 0.2 */
} trn_core_properties_t;

TRN_DEFINE_STRUCT_MAKE(trn_core_properties_t, TRN_STRUCT_CORE_PROPERTIES)
#define TRN_CORE_PROPERTIES_INIT trn_core_properties_t_make()

/**
 * Lists the cores of a device that this process may use (TRN_VISIBLE_CORES or
 * NEURON_RT_VISIBLE_CORES restrict them), two-call enumeration, in index order. Listing claims
 * nothing. As with CUDA_VISIBLE_DEVICES, the visible cores are renumbered: element 0 is this
 * process's core 0, the first visible one (with TRN_VISIBLE_CORES=3, core id 3). The core's
 * properties keep the physical numbering (index within the device, global_id).
 */
TRN_API trn_result_t trn_core_get(trn_device_t device, uint32_t *count, trn_core_t *cores);
/**
 * Lists every core of a device, visible to this process or not, in index order (two-call
 * enumeration; element i has index i): for monitoring tools, which watch the whole device.
 * Properties, activity and owner can be read on any of them; acquiring a core that is not
 * visible (or creating a queue on it) fails with TRN_ERROR_INVALID_ARGUMENT. Since 0.2.
 */
TRN_API trn_result_t trn_core_get_all(trn_device_t device, uint32_t *count, trn_core_t *cores);
TRN_API trn_result_t trn_core_get_properties(trn_core_t core, trn_core_properties_t *properties);

/**
 * Activity counters of a core, summed over the live processes that used it; they only grow
 * while those processes live (tools turn them into rates). Reads the device state only.
 */
typedef struct trn_core_activity {
  trn_struct_header_t header;
  uint64_t commands_completed;
  uint64_t commands_failed;
  uint64_t dma_bytes;
  uint64_t dma_busy_ns;  /**< simulated time the core's DMA engines were busy */
  uint64_t busy_host_ns; /**< host time spent executing the core's commands */
  /* Kernels. Engines in trn_engine_t order. */
  uint64_t kernels_completed;
  uint64_t kernels_faulted;
  uint64_t kernel_ns;              /**< simulated time of the core's kernels, start to end */
  uint64_t engine_instructions[5]; /**< per engine */
  uint64_t engine_busy_ns[5];      /**< simulated busy time per engine */
  uint64_t tensor_flops;           /**< Tensor-engine flops (2 per multiply-add) */
} trn_core_activity_t;

TRN_DEFINE_STRUCT_MAKE(trn_core_activity_t, TRN_STRUCT_CORE_ACTIVITY)
#define TRN_CORE_ACTIVITY_INIT trn_core_activity_t_make()

TRN_API trn_result_t trn_core_get_activity(trn_core_t core, trn_core_activity_t *activity);

/**
 * Takes exclusive ownership of a core for this process; creating a compute queue on the core does
 * the same (copy queues take nothing, see trn_queue_create). Never blocks: it waits for no other
 * process, not even one stopped while it holds a lock of the device. Acquiring a core this
 * process already owns succeeds. Ownership ends with trn_core_release(), trn_runtime_shutdown()
 * or the end of the process, however it ends (kill -9 included): the claim cannot go stale.
 * @returns TRN_ERROR_CORE_BUSY when another process owns it; trn_last_error() names that
 *          process (pid, command, since when). TRN_ERROR_INVALID_ARGUMENT for a core that is
 *          not visible to this process (see trn_core_get_all).
 */
TRN_API trn_result_t trn_core_acquire(trn_core_t core);
/** Gives up ownership. @returns TRN_ERROR_NOT_OWNER if this process does not own the core. */
TRN_API trn_result_t trn_core_release(trn_core_t core);
/**
 * Who owns a core now. `owner` must be initialised with TRN_PROCESS_INFO_INIT. Its pid is 0 when
 * the core is free, and -1 in the instant between another process's claim and its registration.
 * Reads the device state only.
 */
TRN_API trn_result_t trn_core_get_owner(trn_core_t core, trn_process_info_t *owner);

/* ------------------------------------------------------------------------------------------------
 * Memory: pools and allocations.
 *
 * Device memory (HBM) is split into banks (trn2: 4 banks of 24 GiB, each nearest 2 cores). A
 * pool draws from one bank of one device (or from host memory that DMA can reach) and caches
 * what it takes: freed allocations are reused without a system call, and cached memory goes
 * back to the device on trn_pool_trim(), or by itself before an allocation reports
 * TRN_ERROR_OUT_OF_DEVICE_MEMORY. Device memory is virtual until written: reserving it costs no
 * host memory; writing commits it. Host pool memory stands for pinned memory and is committed
 * when the pool takes it from the system: a request that would leave less than 256 MiB of the
 * system's available memory (MemAvailable) fails up front with TRN_ERROR_OUT_OF_HOST_MEMORY,
 * never later through the OOM killer.
 *
 * Addresses: a device address is 64 bits, (device + 1) << 56 | bank << 48 | offset in the bank;
 * host pool memory is addressed by its host virtual address. Kernels and DMA use these.
 * --------------------------------------------------------------------------------------------- */

typedef enum trn_pool_kind {
  TRN_POOL_KIND_DEVICE = 1, /**< HBM of one bank of the device */
  TRN_POOL_KIND_HOST = 2,   /**< host memory the device's DMA engines can reach */
  TRN_POOL_KIND_FORCE_INT32 = 0x7fffffff
} trn_pool_kind_t;

typedef struct trn_pool_desc {
  trn_struct_header_t header;
  trn_pool_kind_t kind; /**< default (0) = TRN_POOL_KIND_DEVICE */
  uint32_t hbm_bank;    /**< device pools: the bank (trn_core_properties_t.hbm_bank) */
  uint64_t byte_limit;  /**< most bytes the pool may hold at once; 0 = the bank's size */
} trn_pool_desc_t;

TRN_DEFINE_STRUCT_MAKE(trn_pool_desc_t, TRN_STRUCT_POOL_DESC)
#define TRN_POOL_DESC_INIT trn_pool_desc_t_make()

/** Allocation statistics: per pool, or per device across processes. */
typedef struct trn_mem_usage {
  uint64_t current_bytes;
  uint64_t peak_bytes;
  uint64_t allocation_count; /**< live allocations */
} trn_mem_usage_t;

typedef struct trn_mem_stats {
  trn_struct_header_t header;
  uint64_t limit_bytes;    /**< the pool limit, else the bank (device) size; 0 = none (host) */
  uint64_t reserved_bytes; /**< taken from the device: allocated + cached */
  uint64_t peak_reserved_bytes;
  uint64_t allocated_bytes; /**< handed out by live allocations (rounded sizes) */
  uint64_t peak_allocated_bytes;
  uint64_t allocation_count;
  uint64_t largest_free_bytes; /**< pools: largest cached free block */
  uint64_t oom_retries;        /**< pools: allocations that needed a trim to succeed */
  uint32_t process_count;      /**< device stats: live processes holding memory */
  trn_mem_usage_t by_category[TRN_MEM_CATEGORY_COUNT];
} trn_mem_stats_t;

TRN_DEFINE_STRUCT_MAKE(trn_mem_stats_t, TRN_STRUCT_MEM_STATS)
#define TRN_MEM_STATS_INIT trn_mem_stats_t_make()

/**
 * Creates a pool. Device pools need no core ownership: memory belongs to the process.
 * @returns TRN_ERROR_OUT_OF_RANGE for a bank the device does not have.
 */
TRN_API trn_result_t trn_pool_create(trn_device_t device, const trn_pool_desc_t *desc,
                                     trn_pool_t *pool);
/**
 * Destroys a pool and returns its memory to the device. Accepts NULL.
 * @returns TRN_ERROR_HANDLE_IN_USE while allocations of the pool are live (nothing is freed).
 * Thread safety: a trn_mem_alloc racing with it either allocates first (and this returns
 * TRN_ERROR_HANDLE_IN_USE) or fails with TRN_ERROR_INVALID_HANDLE; it never returns memory of a
 * destroyed pool.
 */
TRN_API trn_result_t trn_pool_destroy(trn_pool_t pool);
/** Returns the pool's cached free memory to the device. */
TRN_API trn_result_t trn_pool_trim(trn_pool_t pool);
TRN_API trn_result_t trn_pool_get_stats(trn_pool_t pool, trn_mem_stats_t *stats);

/**
 * Memory of a device (or one bank, or UINT32_MAX for all) across every live process: what
 * trn-ls shows. Reads the device state only.
 */
TRN_API trn_result_t trn_device_get_memory_stats(trn_device_t device, uint32_t hbm_bank,
                                                 trn_mem_stats_t *stats);

/** The allocation may be exported to other processes (it gets whole chunks of its own). */
#define TRN_MEM_FLAG_EXPORTABLE 0x1u

/**
 * Allocates `size` bytes (rounded up to 512) aligned to `alignment` (0 = 512; a power of two up
 * to 2 MiB). Memory new to the process reads as zeros (no data passes between processes);
 * memory this process freed and allocates again may hold what it wrote before, as with malloc.
 * @returns TRN_ERROR_OUT_OF_DEVICE_MEMORY when the bank (or the pool's limit, or the host
 *          backing store) cannot hold it even after trimming the process's pools;
 *          trn_last_error() then states the request and a table of who holds the bank.
 *          TRN_ERROR_OUT_OF_HOST_MEMORY when a host pool cannot get committed memory for it.
 */
TRN_API trn_result_t trn_mem_alloc(trn_pool_t pool, uint64_t size, uint64_t alignment,
                                   trn_mem_category_t category, uint32_t flags, trn_mem_t *mem);
/**
 * Frees an allocation, releases an imported one, or unregisters host memory (which stays the
 * caller's). Accepts NULL.
 */
TRN_API trn_result_t trn_mem_free(trn_mem_t mem);

/**
 * trn_mem_register_host: the device only reads the memory: a queued command that writes it (a
 * copy, memset, read or file read into it) fails. The host's own writes stay the caller's
 * business (trn_mem_write, trn_mem_set and a mapping write it, as they write any host memory).
 */
#define TRN_MEM_REGISTER_READ_ONLY 0x1u

/**
 * Wraps caller memory as an allocation that copies, memsets, timestamps and trn_mem_lookup
 * take, like cuMemHostRegister (Since 0.2): its device address is the host pointer. `ptr` and
 * `size` need no alignment; the range must not overlap memory already registered for the
 * device. The memory stays the caller's: it must stay valid until trn_mem_free, which
 * unregisters it and does not free it. trn_mem_get_info reports kind TRN_POOL_KIND_HOST and
 * `registered` 1. `flags`: 0 or TRN_MEM_REGISTER_READ_ONLY.
 */
TRN_API trn_result_t trn_mem_register_host(trn_device_t device, void *ptr, uint64_t size,
                                           uint32_t flags, trn_mem_t *mem);
/**
 * Finds the live allocation of this process that holds a device address (Since 0.2): device
 * and host pool allocations, imports and registered host memory of the device. `*mem` is the
 * allocation's handle (the same one trn_mem_alloc returned; not a new reference) and `*offset`
 * (may be NULL) the address's offset in it. For allocators that keep addresses, not handles.
 * @returns TRN_ERROR_NOT_FOUND when no live allocation of the device holds the address.
 */
TRN_API trn_result_t trn_mem_lookup(trn_device_t device, uint64_t device_address, trn_mem_t *mem,
                                    uint64_t *offset);

typedef struct trn_mem_info {
  trn_struct_header_t header;
  uint64_t device_address;
  uint64_t size; /**< the size asked for */
  trn_mem_category_t category;
  trn_pool_kind_t kind;
  uint32_t device_index;
  uint32_t hbm_bank;
  uint32_t imported; /**< 1 if it came from trn_mem_import */
  uint32_t flags;
  uint32_t registered; /**< 1 if it is caller memory (trn_mem_register_host). Since 0.2 */
} trn_mem_info_t;

TRN_DEFINE_STRUCT_MAKE(trn_mem_info_t, TRN_STRUCT_MEM_INFO)
#define TRN_MEM_INFO_INIT trn_mem_info_t_make()

TRN_API trn_result_t trn_mem_get_info(trn_mem_t mem, trn_mem_info_t *info);
/**
 * A host pointer to the memory's contents, valid until the allocation is freed. Mapping commits
 * the whole allocation, so a full backing store fails here (TRN_ERROR_OUT_OF_DEVICE_MEMORY),
 * never as a signal on a later write. Writes through the pointer are seen by the device.
 */
TRN_API trn_result_t trn_mem_map(trn_mem_t mem, void **host_pointer);
/** Synchronous copies into and out of an allocation, bounds-checked. */
TRN_API trn_result_t trn_mem_write(trn_mem_t mem, uint64_t offset, const void *source,
                                   uint64_t size);
TRN_API trn_result_t trn_mem_read(trn_mem_t mem, uint64_t offset, void *destination, uint64_t size);
/** Sets `size` bytes at `offset` to the byte `value`. */
TRN_API trn_result_t trn_mem_set(trn_mem_t mem, uint64_t offset, uint8_t value, uint64_t size);

/** An exported allocation, to pass to another process of the same user (bytes, copyable). */
typedef struct trn_ipc_handle {
  uint8_t bytes[64];
} trn_ipc_handle_t;

/**
 * Exports an allocation made with TRN_MEM_FLAG_EXPORTABLE. Lifetime: the memory stays valid
 * for every process holding it — the exporter until it frees it, each importer until it frees
 * its import — and returns to the device when the last holder frees it or exits, however it
 * exits. No holder ever sees memory reused for something else.
 */
TRN_API trn_result_t trn_mem_export(trn_mem_t mem, trn_ipc_handle_t *handle);
/**
 * Imports an exported allocation into this process (any pool of the device; the result counts
 * as imported). @returns TRN_ERROR_INVALID_ARGUMENT for a handle of another device, a handle
 * whose memory was already returned, or bytes that are not a handle.
 */
TRN_API trn_result_t trn_mem_import(trn_device_t device, const trn_ipc_handle_t *handle,
                                    trn_mem_t *mem);

/* ------------------------------------------------------------------------------------------------
 * Semaphores: the one completion primitive. A 64-bit timeline value that only grows; waiters
 * wait for it to reach a value. Queues wait on and signal them; each queue owns one whose value
 * is its last completed sequence number, so an "event" is a (semaphore, value) pair.
 *
 * A semaphore whose pending signal can no longer happen (its queue faulted, or the queue was
 * destroyed) is marked failed: waits for values it has not reached return TRN_ERROR_CANCELLED at
 * once instead of hanging. The next host signal clears the mark.
 *
 * Waiting spins for a bounded budget (TRN_SPIN_NS, default 20000 ns), then sleeps on a futex
 * until the value, the failure or the deadline.
 * --------------------------------------------------------------------------------------------- */

/** The semaphore lives in the device state and can be exported to other processes. */
#define TRN_SEM_FLAG_EXPORTABLE 0x1u

typedef struct trn_sem_desc {
  trn_struct_header_t header;
  uint64_t initial_value;
  uint32_t flags; /**< TRN_SEM_FLAG_* */
} trn_sem_desc_t;

TRN_DEFINE_STRUCT_MAKE(trn_sem_desc_t, TRN_STRUCT_SEM_DESC)
#define TRN_SEM_DESC_INIT trn_sem_desc_t_make()

TRN_API trn_result_t trn_sem_create(trn_device_t device, const trn_sem_desc_t *desc,
                                    trn_sem_t *sem);
/**
 * Destroys a semaphore (or this process's import of it). Accepts NULL.
 * @returns TRN_ERROR_HANDLE_IN_USE while a queue command still waits on or signals it.
 * Thread safety: a submission (trn_queue_copy, _memset, _barrier, _launch) racing with it whose
 * sync names the semaphore either is queued first (and this returns TRN_ERROR_HANDLE_IN_USE) or
 * fails with TRN_ERROR_INVALID_HANDLE; no command runs on a destroyed semaphore.
 */
TRN_API trn_result_t trn_sem_destroy(trn_sem_t sem);
/**
 * Sets the value from the host and wakes the waiters it satisfies.
 * @returns TRN_ERROR_INVALID_ARGUMENT for a value below the current one (values only grow);
 *          a queue's own timeline semaphore cannot be signalled from the host.
 */
TRN_API trn_result_t trn_sem_signal(trn_sem_t sem, uint64_t value);
/**
 * Waits until the value is at least `value`. `timeout_ns` 0 polls, UINT64_MAX waits forever.
 * @returns TRN_SUCCESS, TRN_TIMEOUT (nothing failed; the deadline passed: trn_last_error() says
 *          where the value stood, except after a poll), or TRN_ERROR_CANCELLED when the semaphore
 *          is marked failed (trn_last_error() says which queue failed and why).
 */
TRN_API trn_result_t trn_sem_wait(trn_sem_t sem, uint64_t value, uint64_t timeout_ns);
/** The current value (even when failed: then the result is TRN_ERROR_CANCELLED). */
TRN_API trn_result_t trn_sem_query(trn_sem_t sem, uint64_t *value);
/**
 * A file descriptor that becomes readable (POLLIN) when the value reaches `value` or the
 * semaphore fails: for epoll, poll and io_uring event loops. It then reads like an eventfd (8
 * bytes, a count of 1); once the semaphore is destroyed (or the runtime shut down) before that,
 * it reads end-of-file instead. The caller owns it and closes it; closing it early ends the
 * watch, and the runtime frees what the watch held by the next call for that semaphore.
 * @returns TRN_ERROR_OUT_OF_HOST_MEMORY when the process has no descriptors left.
 */
TRN_API trn_result_t trn_sem_get_fd(trn_sem_t sem, uint64_t value, int *fd);
/**
 * Marks the semaphore failed from the host (Since 0.4), as a queue's failure marks the
 * semaphores it was to signal: waits for values it has not reached, on the host and in queue
 * commands of any process, end with TRN_ERROR_CANCELLED and `reason` (a queue command's in its
 * queue's fault record), for a semaphore whose signaller is known to be gone (a collective's
 * peer died). The next trn_sem_signal clears the mark. `reason` may be NULL. A queue's own
 * semaphore is refused (TRN_ERROR_INVALID_ARGUMENT): it fails with its queue.
 */
TRN_API trn_result_t trn_sem_fail(trn_sem_t sem, const char *reason);
/** Exports a TRN_SEM_FLAG_EXPORTABLE semaphore so another process can wait on or signal it. */
TRN_API trn_result_t trn_sem_export(trn_sem_t sem, trn_ipc_handle_t *handle);
TRN_API trn_result_t trn_sem_import(trn_device_t device, const trn_ipc_handle_t *handle,
                                    trn_sem_t *sem);

/* ------------------------------------------------------------------------------------------------
 * Queues: in-order streams of commands on a core (compute) or on a core's DMA engines (copy).
 * Every submission returns a sequence number (1, 2, 3, ...); the queue's timeline semaphore
 * reaches it when the command completes. Each command may wait on and signal semaphores.
 *
 * Submission never blocks: with `capacity` commands in flight the next one returns
 * TRN_ERROR_QUEUE_FULL; wait for completions (trn_sem_wait on the queue's semaphore or
 * trn_queue_finish) and submit again. A command that fails puts the queue in an error state with
 * a fault record; later commands are cancelled and every semaphore they would have signalled is
 * marked failed, so no waiter hangs. trn_queue_reset() clears the error state.
 * --------------------------------------------------------------------------------------------- */

typedef enum trn_queue_kind {
  TRN_QUEUE_KIND_COMPUTE = 1, /**< kernels (and every other command) on an owned core */
  TRN_QUEUE_KIND_COPY = 2,    /**< copies and memsets on the DMA engines of a core */
  TRN_QUEUE_KIND_FORCE_INT32 = 0x7fffffff
} trn_queue_kind_t;

/**
 * Scheduling priority of a queue (Since 0.2). Launches of the queues on one core take the core's
 * engines one at a time; when several are waiting, the highest priority goes first (in order of
 * arrival within a priority). A priority never pre-empts a launch that runs.
 */
typedef enum trn_queue_priority {
  TRN_QUEUE_PRIORITY_LOW = 1,
  TRN_QUEUE_PRIORITY_NORMAL = 2,
  TRN_QUEUE_PRIORITY_HIGH = 3,
  TRN_QUEUE_PRIORITY_FORCE_INT32 = 0x7fffffff
} trn_queue_priority_t;

typedef struct trn_queue_desc {
  trn_struct_header_t header;
  trn_queue_kind_t kind; /**< default (0) = TRN_QUEUE_KIND_COPY */
  trn_core_t core;       /**< compute queues: acquired for this process if it is not already */
  uint32_t capacity;     /**< commands in flight before TRN_ERROR_QUEUE_FULL; 0 = 1024 */
  uint32_t dma_engines;  /**< DMA engines a copy is split across; 0 = all of the core's */
  trn_queue_priority_t priority; /**< default (0) = TRN_QUEUE_PRIORITY_NORMAL. Since 0.2 */
} trn_queue_desc_t;

TRN_DEFINE_STRUCT_MAKE(trn_queue_desc_t, TRN_STRUCT_QUEUE_DESC)
#define TRN_QUEUE_DESC_INIT trn_queue_desc_t_make()

/** A (semaphore, value) pair: what a command waits for or signals. */
typedef struct trn_sem_point {
  trn_sem_t sem;
  uint64_t value;
} trn_sem_point_t;

/** What a command waits for before it starts and signals when it completes. */
typedef struct trn_sync {
  const trn_sem_point_t *waits;
  uint32_t wait_count;
  const trn_sem_point_t *signals;
  uint32_t signal_count;
} trn_sync_t;

/**
 * Creates a queue on a core. When a process takes a core: a compute queue needs the core's
 * engines, so creating one acquires the core for this process (as trn_core_acquire does, and
 * fails with TRN_ERROR_CORE_BUSY when another process owns it); a copy queue only uses the core's
 * DMA engines, which processes share, and takes no ownership: any process may make copy queues
 * on any core visible to it. trn_core_release is refused while compute queues live on the core.
 */
TRN_API trn_result_t trn_queue_create(const trn_queue_desc_t *desc, trn_queue_t *queue);
/**
 * Destroys a queue. Work in flight: the command running completes, commands not started are
 * cancelled (their semaphores marked failed), then the queue is freed; this never waits for a
 * semaphore. Accepts NULL.
 */
TRN_API trn_result_t trn_queue_destroy(trn_queue_t queue);

/**
 * Copies `size` bytes between allocations: host pool to device, device to host, within or
 * across cores and devices. `sync` may be NULL; `sequence` (may be NULL) receives the command's
 * sequence number. Both ranges are checked at submission; overlapping ranges copy as memmove
 * does; memory freed before the copy runs is a fault of the queue with the result
 * TRN_ERROR_INVALID_HANDLE (a use after free on the host side, not a device fault; the reason
 * names the freed source or destination).
 */
TRN_API trn_result_t trn_queue_copy(trn_queue_t queue, trn_mem_t destination,
                                    uint64_t destination_offset, trn_mem_t source,
                                    uint64_t source_offset, uint64_t size, const trn_sync_t *sync,
                                    uint64_t *sequence);
TRN_API trn_result_t trn_queue_memset(trn_queue_t queue, trn_mem_t destination, uint64_t offset,
                                      uint8_t value, uint64_t size, const trn_sync_t *sync,
                                      uint64_t *sequence);
/**
 * Copies `size` bytes from plain host memory to device memory in queue order (Since 0.2). The
 * host memory need not be registered; it must stay valid and unchanged until the command
 * completes (its sequence number is reached), as with cuMemcpyHtoDAsync. `destination` may be
 * any allocation (device or host pool, or registered host memory).
 */
TRN_API trn_result_t trn_queue_write(trn_queue_t queue, trn_mem_t destination,
                                     uint64_t destination_offset, const void *source, uint64_t size,
                                     const trn_sync_t *sync, uint64_t *sequence);
/**
 * Copies `size` bytes from an allocation to plain host memory in queue order (Since 0.2). The
 * host memory must stay valid until the command completes; read it only after that.
 */
TRN_API trn_result_t trn_queue_read(trn_queue_t queue, void *destination, trn_mem_t source,
                                    uint64_t source_offset, uint64_t size, const trn_sync_t *sync,
                                    uint64_t *sequence);
/**
 * Reads `size` bytes of an open file at `file_offset` into an allocation in queue order (Since
 * 0.2), as cuFileReadAsync does: the driver moves the bytes from the file straight into the
 * device memory, several reads in flight, with O_DIRECT where the file system allows it and the
 * file offset and the memory's address agree on 4096-byte alignment (the rest through the page
 * cache). Any descriptor of a file open for reading works (`O_DIRECT` is not needed: the driver
 * reopens the file with it); only a regular file or a block device has offsets: anything else (a
 * pipe, a socket, a directory, an eventfd, a timerfd, a terminal) is refused with
 * TRN_ERROR_INVALID_ARGUMENT, never waited on. `fd` must stay open until the command completes, as
 * host memory must for trn_queue_write; what happens in between (a truncation, a closed descriptor)
 * is the command's fault, never a crash.
 *
 * A file shorter than `file_offset + size`, an I/O error or a descriptor that is not open when
 * the command runs fails the command with TRN_ERROR_FILE: the fault record's reason names the
 * file offset where it failed and the bytes before it ("file read: end of file at offset 1048576
 * after 1048576 of 2097152 bytes (fd 7)"); the record's destination_address is the device
 * address, its source_address the file offset. The destination's contents are then undefined.
 * @returns TRN_ERROR_INVALID_ARGUMENT if fd < 0 or is not a regular file or block device;
 * TRN_ERROR_OUT_OF_RANGE if the range is outside
 * the allocation or past the largest file offset. Thread-safe, like every queue submission.
 */
TRN_API trn_result_t trn_queue_read_file(trn_queue_t queue, trn_mem_t destination,
                                         uint64_t destination_offset, int fd, uint64_t file_offset,
                                         uint64_t size, const trn_sync_t *sync, uint64_t *sequence);
/**
 * Writes `size` bytes of an allocation to an open file at `file_offset` in queue order (Since
 * 0.2), like cuFileWriteAsync; the file grows as pwrite makes it. Rules and failures as for
 * trn_queue_read_file (`fd` open for writing; the fault record's destination_address is the file
 * offset, its source_address the device address). Memory never written is written as zeros.
 * A descriptor opened with O_APPEND (which writes at the end whatever the offset) is refused with
 * TRN_ERROR_INVALID_ARGUMENT.
 */
TRN_API trn_result_t trn_queue_write_file(trn_queue_t queue, int fd, uint64_t file_offset,
                                          trn_mem_t source, uint64_t source_offset, uint64_t size,
                                          const trn_sync_t *sync, uint64_t *sequence);

/** When a command was reached: the queue's simulated device time and the host's clock. */
typedef struct trn_timestamp {
  uint64_t device_ns; /**< the queue's simulated time (the device's clock) */
  uint64_t host_ns;   /**< CLOCK_MONOTONIC when the queue reached the command */
} trn_timestamp_t;

/**
 * Writes a timestamp into host memory when the queue reaches this command, after every command
 * before it completed (Since 0.2). `destination` must stay valid until the command completes.
 * Two timestamps of one queue time the work between them in device time (an event's
 * elapsed_time); trn_device_get_timestamps relates device time to host time.
 */
TRN_API trn_result_t trn_queue_write_timestamp(trn_queue_t queue, trn_timestamp_t *destination,
                                               const trn_sync_t *sync, uint64_t *sequence);
/**
 * The device's clock now (its simulated time: the latest any of its queues reached) and the
 * host's CLOCK_MONOTONIC, read together (Since 0.2).
 */
TRN_API trn_result_t trn_device_get_timestamps(trn_device_t device, uint64_t *device_ns,
                                               uint64_t *host_ns);

/**
 * Frees an allocation in queue order, like cuMemFreeAsync (Since 0.2): the handle is invalid
 * from this call on, and the memory goes back to its pool when the queue reaches the command, so
 * commands submitted to this queue before it may still use it. Work on other queues that uses
 * the memory must be ordered before it through semaphores (sync). If the queue faults or is
 * destroyed first, the memory is freed all the same.
 */
TRN_API trn_result_t trn_queue_free(trn_queue_t queue, trn_mem_t mem, const trn_sync_t *sync,
                                    uint64_t *sequence);

/**
 * A host function run in queue order (trn_queue_host_call). `status` is TRN_SUCCESS when the
 * queue reached it after every command before it completed; when the queue faulted or was
 * destroyed before it, it is still called, once, with TRN_ERROR_CANCELLED or the fault's result,
 * so that what `user` holds can be let go.
 */
typedef void (*trn_host_fn_t)(void *user, trn_result_t status);

/**
 * Runs `fn(user, status)` when the queue reaches this command, like cuLaunchHostFunc
 * (Since 0.2); commands after it wait until it returns. It runs on a thread of the driver: keep
 * it short. It may call the API, submit to other queues and signal semaphores, but must not
 * wait for its own queue: trn_queue_finish, trn_queue_destroy or trn_device_synchronize of its
 * own queue's device called from it fail with TRN_ERROR_INVALID_ARGUMENT.
 */
TRN_API trn_result_t trn_queue_host_call(trn_queue_t queue, trn_host_fn_t fn, void *user,
                                         const trn_sync_t *sync, uint64_t *sequence);

/** A command that only waits and signals (a semaphore wait, a signal, or both). */
TRN_API trn_result_t trn_queue_barrier(trn_queue_t queue, const trn_sync_t *sync,
                                       uint64_t *sequence);
/**
 * Waits until every command submitted so far has completed.
 * @returns TRN_SUCCESS; TRN_TIMEOUT (the queue may be blocked on a semaphore nobody signals);
 *          or the fault's result when the queue is in an error state (see trn_queue_get_fault).
 */
TRN_API trn_result_t trn_queue_finish(trn_queue_t queue, uint64_t timeout_ns);
/**
 * Waits until every command submitted so far to this process's queues on the device has
 * completed, like cuCtxSynchronize (Since 0.2). Commands submitted while it waits are not waited
 * for. @returns TRN_SUCCESS; TRN_TIMEOUT; or, once all have drained, the fault's result of the
 * first queue found in an error state (trn_last_error() names the queue's core and the command).
 */
TRN_API trn_result_t trn_device_synchronize(trn_device_t device, uint64_t timeout_ns);
/** The queue's timeline semaphore (owned by the queue: do not destroy it). */
TRN_API trn_result_t trn_queue_get_semaphore(trn_queue_t queue, trn_sem_t *sem);

typedef struct trn_queue_fault {
  trn_struct_header_t header;
  trn_result_t result; /**< TRN_SUCCESS when the queue has no fault */
  uint64_t sequence;   /**< the command that failed */
  char command[32];    /**< "copy", "memset", "barrier", ... */
  char reason[TRN_DETAIL_MAX];
  uint64_t destination_address;
  uint64_t source_address;
  uint64_t size;
  uint64_t cancelled; /**< commands cancelled after it */
  /* Kernel faults; empty / 0 for other commands. */
  char kernel[TRN_NAME_MAX]; /**< the kernel's name */
  char engine[16];           /**< "tensor", "vector", "scalar", "gpsimd", "sync" */
  uint32_t instruction;      /**< index in that engine's stream */
  uint32_t source_line;      /**< line in the kernel's source when known, else 0 */
  char opcode[32];
} trn_queue_fault_t;

TRN_DEFINE_STRUCT_MAKE(trn_queue_fault_t, TRN_STRUCT_QUEUE_FAULT)
#define TRN_QUEUE_FAULT_INIT trn_queue_fault_t_make()

TRN_API trn_result_t trn_queue_get_fault(trn_queue_t queue, trn_queue_fault_t *fault);
/**
 * Leaves the error state: the fault record is cleared and the queue accepts commands again
 * (sequence numbers continue). @returns TRN_ERROR_HANDLE_IN_USE while cancelled commands are
 * still draining; call again after trn_queue_finish.
 */
TRN_API trn_result_t trn_queue_reset(trn_queue_t queue);

/* ------------------------------------------------------------------------------------------------
 * Kernels: validated kernel binaries (trn's ELF container, written by trn-as or the kernel
 * builder; docs/ISA.md). Loading checks every header field, offset, index and instruction; a
 * malformed or invalid binary is TRN_ERROR_INVALID_KERNEL with the reason in trn_last_error().
 * A kernel is loaded for one device and launched on compute queues of that device's cores.
 * Thread safety: all functions may be called from any thread; a kernel may be launched on many
 * queues at once; destroying it while launches are in flight is safe (they keep it alive).
 * --------------------------------------------------------------------------------------------- */

typedef enum trn_dtype {
  TRN_DTYPE_F32 = 1,
  TRN_DTYPE_BF16 = 2,
  TRN_DTYPE_F16 = 3,
  TRN_DTYPE_FP8_E4M3 = 4, /**< OCP e4m3fn */
  TRN_DTYPE_FP8_E5M2 = 5,
  TRN_DTYPE_I32 = 6,
  TRN_DTYPE_I16 = 7,
  TRN_DTYPE_I8 = 8,
  TRN_DTYPE_U8 = 9,
  /* Host-only types (no kernel takes them; trn_ops.h runs their ops on the host). Since 0.3. */
  TRN_DTYPE_F64 = 64,
  TRN_DTYPE_I64 = 65,
  TRN_DTYPE_FORCE_INT32 = 0x7fffffff
} trn_dtype_t;

typedef enum trn_arg_direction {
  TRN_ARG_IN = 1,
  TRN_ARG_OUT = 2,
  TRN_ARG_INOUT = 3,
  TRN_ARG_DIRECTION_FORCE_INT32 = 0x7fffffff
} trn_arg_direction_t;

/**
 * What a kernel argument is. A tensor is memory the kernel addresses (bound with `mem` and
 * `offset`); a scalar is one value passed by value at launch (bound with `value`) that
 * instructions read where they would read an immediate, so one binary serves every value
 * (`y = alpha * x`). A scalar has rank 0, direction TRN_ARG_IN, dtype TRN_DTYPE_F32 or
 * TRN_DTYPE_I32, and `bytes` the dtype's size. Since 0.2.
 */
typedef enum trn_arg_kind {
  TRN_ARG_KIND_TENSOR = 1,
  TRN_ARG_KIND_SCALAR = 2,
  TRN_ARG_KIND_FORCE_INT32 = 0x7fffffff
} trn_arg_kind_t;

typedef enum trn_engine {
  TRN_ENGINE_TENSOR = 0,
  TRN_ENGINE_VECTOR = 1,
  TRN_ENGINE_SCALAR = 2,
  TRN_ENGINE_GPSIMD = 3,
  TRN_ENGINE_SYNC = 4,
  TRN_ENGINE_COUNT = 5,
  TRN_ENGINE_FORCE_INT32 = 0x7fffffff
} trn_engine_t;

/**
 * "f32", "bf16", "f16", "fp8e4m3", "fp8e5m2", "i32", "i16", "i8", "u8" (the names the assembly
 * and trn-run use), "f64", "i64"; "unknown" for a value not in the enum. Static storage. Since 0.2.
 */
TRN_API const char *trn_dtype_name(trn_dtype_t dtype);
/**
 * Bytes per element (4, 2, 2, 1, 1, 4, 2, 1, 1, 8, 8); 0 for a value not in the enum. Since 0.2.
 */
TRN_API uint32_t trn_dtype_size(trn_dtype_t dtype);
/**
 * "tensor", "vector", "scalar", "gpsimd", "sync"; "unknown" for a value not in the enum.
 * Static storage. Since 0.2.
 */
TRN_API const char *trn_engine_name(trn_engine_t engine);

#define TRN_KERNEL_MAX_RANK 8

typedef struct trn_kernel_properties {
  trn_struct_header_t header;
  char name[TRN_NAME_MAX];
  uint32_t arg_count;
  uint32_t reserved;
  uint64_t instructions[TRN_ENGINE_COUNT]; /**< per engine stream */
  uint64_t constants_bytes;
} trn_kernel_properties_t;

TRN_DEFINE_STRUCT_MAKE(trn_kernel_properties_t, TRN_STRUCT_KERNEL_PROPERTIES)
#define TRN_KERNEL_PROPERTIES_INIT trn_kernel_properties_t_make()

typedef struct trn_kernel_arg {
  trn_struct_header_t header;
  char name[TRN_NAME_MAX];
  trn_dtype_t dtype;
  trn_arg_direction_t direction;
  uint32_t rank;
  uint32_t reserved;
  uint64_t shape[TRN_KERNEL_MAX_RANK];
  uint64_t bytes;      /**< elements x dtype size: what a launch binds at least */
  trn_arg_kind_t kind; /**< tensor or scalar (Since 0.2; a smaller header.size omits it) */
  uint32_t reserved2;
} trn_kernel_arg_t;

TRN_DEFINE_STRUCT_MAKE(trn_kernel_arg_t, TRN_STRUCT_KERNEL_ARG)
#define TRN_KERNEL_ARG_INIT trn_kernel_arg_t_make()

/** Loads a kernel binary from memory (copied: the image may be freed after the call). */
TRN_API trn_result_t trn_kernel_load(trn_device_t device, const void *image, size_t size,
                                     trn_kernel_t *kernel);
/**
 * Loads a kernel binary from a regular file (at most 1 GiB). @returns TRN_ERROR_INVALID_KERNEL
 * for a file that is not a kernel binary; TRN_ERROR_INVALID_ARGUMENT for one that does not exist
 * or cannot be read (a directory, a FIFO), as since 0.1 (loads added later, such as
 * trn_program_load_file, say TRN_ERROR_FILE).
 */
TRN_API trn_result_t trn_kernel_load_file(trn_device_t device, const char *path,
                                          trn_kernel_t *kernel);
/** Accepts NULL. Launches in flight keep the kernel alive until they complete. */
TRN_API trn_result_t trn_kernel_destroy(trn_kernel_t kernel);
TRN_API trn_result_t trn_kernel_get_properties(trn_kernel_t kernel,
                                               trn_kernel_properties_t *properties);
/** The kernel's arguments in launch order, two-call enumeration (each TRN_KERNEL_ARG_INIT). */
TRN_API trn_result_t trn_kernel_get_args(trn_kernel_t kernel, uint32_t *count,
                                         trn_kernel_arg_t *args);

/**
 * A scalar kernel argument's value, by the argument's dtype: `f32` for TRN_DTYPE_F32, `i32` for
 * TRN_DTYPE_I32. Only its first 4 bytes are read (the rest of `bits` is ignored). Every f32 is a
 * value, NaN and infinities included; nothing about it is checked. Since 0.2.
 */
typedef union trn_scalar {
  float f32;
  int32_t i32;
  uint32_t u32;
  uint64_t bits;
} trn_scalar_t;

/**
 * Binds one kernel argument. A tensor argument: device memory, `mem` from `offset` on. A scalar
 * argument (TRN_ARG_KIND_SCALAR): `mem` is NULL and `value` holds the value. The size and layout
 * are those of API 0.1 (`offset` at byte 8), so arrays of bindings stay compatible.
 */
typedef struct trn_kernel_binding {
  trn_mem_t mem; /**< tensor arguments: the memory; scalar arguments: NULL */
  union {
    uint64_t offset;    /**< tensor arguments: where in `mem` the argument starts */
    trn_scalar_t value; /**< scalar arguments: the value passed (Since 0.2) */
  };
} trn_kernel_binding_t;

typedef struct trn_launch_desc {
  trn_struct_header_t header;
  trn_kernel_t kernel;
  const trn_kernel_binding_t *args; /**< one per kernel argument, in order */
  uint32_t arg_count;
  uint32_t reserved;
  trn_profile_t profile; /**< optional: receives this launch's counters (and trace) */
} trn_launch_desc_t;

TRN_DEFINE_STRUCT_MAKE(trn_launch_desc_t, TRN_STRUCT_LAUNCH_DESC)
#define TRN_LAUNCH_DESC_INIT trn_launch_desc_t_make()

/**
 * Launches a kernel on a compute queue (of a core of the kernel's device). Each tensor binding
 * must cover the argument's bytes (checked at submission); each scalar binding has a NULL `mem`
 * and its value in `value` (a non-NULL `mem` for a scalar is TRN_ERROR_INVALID_KERNEL_ARG, a
 * NULL or stale one for a tensor TRN_ERROR_INVALID_HANDLE, each naming the argument). A fault
 * while the kernel runs (an access
 * outside its memory, a deadlock between its engines) becomes the queue's fault record: kernel,
 * engine, instruction index, source line when the kernel carries one.
 */
TRN_API trn_result_t trn_queue_launch(trn_queue_t queue, const trn_launch_desc_t *desc,
                                      const trn_sync_t *sync, uint64_t *sequence);

/* ------------------------------------------------------------------------------------------------
 * Reduction ops: one enum for every layer's reductions (since 0.5 it is the type of libtrn_comm's
 * and libtrn_ops' ops too: trn_comm_red_op_t and trn_ops_reduce_op_t are typedefs of it). Each
 * function that takes one says which ops it computes and refuses the others with
 * TRN_ERROR_INVALID_ENUM: trn_queue_reduce SUM, PROD, MAX and MIN; the collectives SUM to AVG;
 * trn_ops_reduce SUM, AVG, MAX, MIN, ARGMAX and ARGMIN. Values are append-only.
 * --------------------------------------------------------------------------------------------- */

typedef enum trn_reduce_op {
  TRN_REDUCE_SUM = 0,
  TRN_REDUCE_PROD = 1,
  TRN_REDUCE_MAX = 2,
  TRN_REDUCE_MIN = 3,
  TRN_REDUCE_AVG = 4,    /**< the mean: the sum divided by the number of elements (or ranks) */
  TRN_REDUCE_ARGMAX = 5, /**< the index of the first maximum (trn_ops_reduce only) */
  TRN_REDUCE_ARGMIN = 6, /**< the index of the first minimum (trn_ops_reduce only) */
  TRN_REDUCE_OP_FORCE_INT32 = 0x7fffffff
} trn_reduce_op_t;

/**
 * "sum", "prod", "max", "min", "avg", "argmax", "argmin" (the enumerator's name in lower case);
 * "unknown" for a value not in the enum. Static storage. Since 0.5.
 */
TRN_API const char *trn_reduce_op_name(trn_reduce_op_t op);

/* ------------------------------------------------------------------------------------------------
 * Reductions by the DMA engines (since 0.4): elementwise `destination = a op b` computed while
 * the data moves, as Trainium's collective engines and its DMA engines' compute (NKI's
 * dma_compute) reduce without a kernel. What collectives use to combine a peer's chunk with
 * their own; any queue (compute or copy) takes it, in order with copies and launches.
 * --------------------------------------------------------------------------------------------- */

/**
 * Reduces `count` elements of `dtype` elementwise: destination[i] = a[i] op b[i] (Since 0.4).
 * dtype: TRN_DTYPE_F32, TRN_DTYPE_BF16 and TRN_DTYPE_F16 compute in fp32 and round to nearest
 * even (as the DMA engines' cast does); TRN_DTYPE_I32 is exact with wrap-around. MAX and MIN
 * return NaN when either operand is NaN. The destination may be `a` or `b` exactly (in place);
 * a destination that partly overlaps an operand is TRN_ERROR_INVALID_ARGUMENT, as are another
 * dtype and a count of 2^32 elements or more (split larger reductions). `op` is TRN_REDUCE_SUM,
 * _PROD, _MAX or _MIN: another op (AVG, ARGMAX, ARGMIN, which the DMA engines do not compute) or a
 * `dtype` that is no value of its enum is TRN_ERROR_INVALID_ENUM. All three ranges are checked at
 * submission, in any pool (device memory or host memory the DMA engines reach); memory freed before
 * the command runs is a fault of the queue with TRN_ERROR_INVALID_HANDLE. A program cannot capture
 * it. Every driver the runtime loads implements the reduction command (driver interface 2.2
 * added it, and the runtime refuses a driver of an older minor version than its own). Simulated
 * time: the DMA engines' rate for one operand's bytes, halved on generations whose reductions go
 * through the collective engines (trn1, trn2).
 */
TRN_API trn_result_t trn_queue_reduce(trn_queue_t queue, trn_mem_t destination,
                                      uint64_t destination_offset, trn_mem_t a, uint64_t a_offset,
                                      trn_mem_t b, uint64_t b_offset, uint64_t count,
                                      trn_dtype_t dtype, trn_reduce_op_t op, const trn_sync_t *sync,
                                      uint64_t *sequence);

/* ------------------------------------------------------------------------------------------------
 * Profiles: what a launch did, in simulated time. Pass a profile in trn_launch_desc_t; once the
 * launch completes it holds the launch's counters and, if created with TRN_PROFILE_FLAG_TRACE,
 * one record per instruction and DMA transfer. A profile holds the most recent launch it was
 * given; a launch that faults is recorded too (its counters up to the fault). Thread safety: do
 * not read a profile while a launch that fills it is in flight.
 * --------------------------------------------------------------------------------------------- */

#define TRN_PROFILE_FLAG_TRACE 0x1u

typedef struct trn_profile_summary {
  trn_struct_header_t header;
  uint64_t launches; /**< launches recorded (0: nothing yet) */
  uint64_t total_ns; /**< simulated time of the last launch, start to end */
  uint64_t engine_instructions[TRN_ENGINE_COUNT];
  uint64_t engine_busy_ns[TRN_ENGINE_COUNT];
  uint64_t engine_wait_ns[TRN_ENGINE_COUNT]; /**< waiting on semaphores or barriers */
  double engine_active_percent[TRN_ENGINE_COUNT];
  uint64_t tensor_flops;
  double mfu_percent; /**< flops / (total time x the Tensor engine's bf16 peak) */
  uint64_t dma_transfers;
  uint64_t dma_bytes;
  double dma_utilization_percent; /**< the core's DMA queues' busy time / (their count x time) */
  double peak_flops;              /**< the core's bf16 Tensor-engine peak, flops/s */
  uint64_t host_ns;               /**< host time the simulation took */
} trn_profile_summary_t;

TRN_DEFINE_STRUCT_MAKE(trn_profile_summary_t, TRN_STRUCT_PROFILE_SUMMARY)
#define TRN_PROFILE_SUMMARY_INIT trn_profile_summary_t_make()

TRN_API trn_result_t trn_profile_create(uint32_t flags, trn_profile_t *profile);
TRN_API trn_result_t trn_profile_destroy(trn_profile_t profile);
TRN_API trn_result_t trn_profile_get_summary(trn_profile_t profile, trn_profile_summary_t *summary);
/**
 * Writes the trace as Chrome trace-event JSON (opens in Perfetto and chrome://tracing): one
 * track per engine and per DMA queue, times in simulated microseconds, and the summary in the
 * metadata. @returns TRN_ERROR_INVALID_ARGUMENT if the profile has no trace; TRN_ERROR_FILE if
 * `path` cannot be created or written (trn_last_error() names the path and the system's reason).
 */
TRN_API trn_result_t trn_profile_write_trace(trn_profile_t profile, const char *path);

/* ------------------------------------------------------------------------------------------------
 * Programs (since 0.3): what a compiler produces, loaded once and run many times, as libnrt's
 * nrt_load / nrt_execute. A program holds kernels, constant tensors (its weights), named
 * external tensors (inputs and outputs the caller binds at each execution), internal buffers,
 * and a schedule of launches, copies and memsets (docs/programs.md has the file format). It is
 * loaded for one device; each execution runs the whole schedule on the queue it is given, in
 * schedule order, as one command with one sequence number. Internal buffers come from the
 * program's own pool: the executions of one queue share a set (the queue runs them in order),
 * executions on several queues at once get one each, and a set is reused once its executions
 * retire; they are not cleared between executions.
 *
 * A queue can also record a program (as CUDA graphs do): between trn_queue_begin_capture and
 * trn_queue_end_capture its launches, copies and memsets are recorded instead of run, and each
 * allocation they name becomes an external tensor of the program.
 *
 * Thread safety: a program may be executed from several threads at once and on several queues;
 * destroying it while executions are queued is allowed (they keep it until they retire).
 * Tensor sets are not synchronised: do not change one while another thread uses it.
 * --------------------------------------------------------------------------------------------- */

typedef struct trn_program_tensor {
  trn_struct_header_t header;
  char name[TRN_NAME_MAX];
  trn_arg_direction_t direction; /**< TRN_ARG_IN, TRN_ARG_OUT or TRN_ARG_INOUT */
  trn_dtype_t dtype;
  uint32_t rank;
  uint32_t reserved;
  uint64_t shape[TRN_KERNEL_MAX_RANK];
  uint64_t bytes; /**< the size its binding must have from its offset */
} trn_program_tensor_t;

TRN_DEFINE_STRUCT_MAKE(trn_program_tensor_t, TRN_STRUCT_PROGRAM_TENSOR)
#define TRN_PROGRAM_TENSOR_INIT trn_program_tensor_t_make()

typedef struct trn_program_properties {
  trn_struct_header_t header;
  char name[TRN_NAME_MAX];
  uint32_t kernel_count;
  uint32_t tensor_count; /**< external tensors (trn_program_get_tensors) */
  uint32_t step_count;   /**< launches, copies and memsets of the schedule */
  uint32_t reserved;
  uint64_t constant_bytes; /**< the weights, on the device from load to destroy */
  uint64_t internal_bytes; /**< one execution's internal buffers */
} trn_program_properties_t;

TRN_DEFINE_STRUCT_MAKE(trn_program_properties_t, TRN_STRUCT_PROGRAM_PROPERTIES)
#define TRN_PROGRAM_PROPERTIES_INIT trn_program_properties_t_make()

/**
 * Loads a program image for `device`: checks every field of the container and of each kernel,
 * every binding of the schedule against its kernel's arguments and its tensor's size, loads the
 * kernels and copies the constants to the device. @returns TRN_ERROR_INVALID_PROGRAM for a
 * malformed image (trn_last_error() says what is wrong and where), TRN_ERROR_INVALID_KERNEL for
 * a kernel of it the device refuses, naming the kernel. The image may be freed on return.
 */
TRN_API trn_result_t trn_program_load(trn_device_t device, const void *image, size_t size,
                                      trn_program_t *program);
TRN_API trn_result_t trn_program_load_file(trn_device_t device, const char *path,
                                           trn_program_t *program);
/** NULL is a no-op. Queued executions keep what they use until they retire. */
TRN_API trn_result_t trn_program_destroy(trn_program_t program);
TRN_API trn_result_t trn_program_get_properties(trn_program_t program,
                                                trn_program_properties_t *properties);
/**
 * The external tensors, in the program's order (two-call enumeration; each entry needs
 * TRN_PROGRAM_TENSOR_INIT).
 */
TRN_API trn_result_t trn_program_get_tensors(trn_program_t program, uint32_t *count,
                                             trn_program_tensor_t *tensors);
/**
 * Writes the program to `path` (written to a temporary file beside it, then renamed, so the
 * path never holds half a program). A captured program saved and loaded again runs the same.
 * @returns TRN_ERROR_FILE naming the path and the system's reason.
 */
TRN_API trn_result_t trn_program_save(trn_program_t program, const char *path);

/** A set of named bindings for trn_queue_execute, as libnrt's nrt_tensor_set. */
TRN_API trn_result_t trn_tensor_set_create(trn_tensor_set_t *set);
/**
 * Binds `name` to `mem` from `offset` (checked against the program when executed). Adding a
 * name the set has already is TRN_ERROR_INVALID_ARGUMENT. The set references the allocation by
 * handle: a freed one is an error at execution, naming the tensor.
 */
TRN_API trn_result_t trn_tensor_set_add(trn_tensor_set_t set, const char *name, trn_mem_t mem,
                                        uint64_t offset);
TRN_API trn_result_t trn_tensor_set_destroy(trn_tensor_set_t set);

/**
 * Runs `program` on a compute queue of its device: input tensors are bound in `inputs`, output
 * tensors in `outputs`, in-out tensors in either (not both); one set passed as both binds
 * every tensor. A missing tensor, a name the program does not have, a binding smaller than the
 * tensor's bytes, memory that is not device memory of the program's device, an input bound in
 * `outputs` or an output in `inputs` is TRN_ERROR_INVALID_ARGUMENT naming the tensor; nothing is
 * queued then. Either set may be NULL when the program has no tensor that belongs in it.
 * Bindings may overlap: the steps run on the memory as bound. The whole schedule is one
 * command: `sync` waits before its first step and signals after its last, and `sequence` is its
 * number. A fault in a step fails the command; the queue's fault record names the command
 * "execute", the kernel, its engine, instruction and source line, and its reason ends with the
 * step and the program ("(step 3, a launch, in program 'mlp')"); for a copy or memset step its
 * addresses and size are the step's.
 */
TRN_API trn_result_t trn_queue_execute(trn_queue_t queue, trn_program_t program,
                                       trn_tensor_set_t inputs, trn_tensor_set_t outputs,
                                       const trn_sync_t *sync, uint64_t *sequence);

/**
 * Starts recording the queue's work into a program. Until trn_queue_end_capture, launches,
 * copies and memsets issued on the queue are checked as usual and recorded instead of run
 * (their `sequence` is set to 0; copies and memsets of 0 bytes are dropped); every other queue
 * command (executions, host copies, file transfers, host calls, frees, timestamps, barriers), a
 * sync list, a launch with a profile and work on host memory are refused with
 * TRN_ERROR_INVALID_ARGUMENT, leaving the recording as it was, and the capture goes on. Capturing a
 * queue that captures already is TRN_ERROR_INVALID_ARGUMENT.
 */
TRN_API trn_result_t trn_queue_begin_capture(trn_queue_t queue);
/**
 * Ends the capture and returns what was recorded as a program of the queue's device. Each
 * allocation the recorded work names becomes an external tensor from the allocation's start to
 * the last byte the work used (bind allocations at offset 0 to replay on the same bytes), in the
 * order the work first used them: a tensor only read is an input, only written an output, else
 * in-out; it is named after the
 * first kernel argument bound to it ("x", or "x_1" when that name is taken), or "mem<N>" when
 * only copies and memsets use it, and has the argument's dtype and shape when it is exactly one
 * argument's bytes (else u8 of its bytes). Launch scalars are recorded as given. Executing the
 * program with the same allocations bound does what the recorded work would have done.
 * @returns TRN_ERROR_INVALID_ARGUMENT if the queue is not capturing.
 */
TRN_API trn_result_t trn_queue_end_capture(trn_queue_t queue, trn_program_t *program);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TRN_TRN_H */
