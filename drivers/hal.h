/*
 * The driver interface: a versioned C table of operations that each driver returns from its one
 * exported entry point, `trn_hal_get_ops`. A driver is a shared object, `libtrn-driver-<name>.so`,
 * that the runtime finds beside libtrn or where TRN_DRIVER points (docs/ARCHITECTURE.md, "Driver
 * discovery").
 *
 * The seam is where hardware puts it. The driver owns the devices: their figures, memory ranges
 * and commit policy, semaphores, queues (rings that execute command buffers on the device's
 * engines), loaded kernels, clocks and telemetry. The runtime keeps the API's bookkeeping
 * (handles, validation, sequence numbers, fault records, sub-allocation, visibility, errors)
 * and builds command buffers.
 *
 * Device memory, where an operation or a command takes an address, means memory this process
 * holds: a range it reserved or imported, or host memory it registered. Any other address (free
 * memory, another process's, past the end of a range) is TRN_ERROR_INVALID_ARGUMENT: no data
 * passes between processes except through exports.
 *
 * Device and core numbers here are physical unless a parameter says logical. Every operation
 * that can fail returns a trn_result_t and, on failure, writes one line into `err` saying what
 * was wrong and what to do. Operations are thread-safe unless noted. tests/driver/conformance
 * states the contract as tests that run against any driver's shared object.
 */
#ifndef TRN_DRIVERS_HAL_H
#define TRN_DRIVERS_HAL_H

#include <stddef.h>
#include <stdint.h>

#include "trn/trn.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Interface versions are major.minor. A runtime loads a driver whose major version equals its own,
 * whose minor version is its own or later and whose table is at least as large as its own. It
 * refuses an older minor version whatever the table's size: that driver lacks what came since.
 * Minor versions only append operations, so a later minor version's larger table is accepted and
 * the runtime copies the part it knows.
 *
 * 2.1 appends kernel_source_file (the file of an instruction's source line, for kernels built
 * from several source files). 2.2 adds the REDUCE command. 2.3 appends sem_raise (a host signal
 * that refuses to go back, in one step).
 */
#define TRN_HAL_MAKE_VERSION(major, minor) TRN_CAST_(uint32_t, ((major) << 16) | (minor))
#define TRN_HAL_VERSION_MAJOR(version) (TRN_CAST_(uint32_t, version) >> 16)
#define TRN_HAL_VERSION_MINOR(version) (TRN_CAST_(uint32_t, version) & 0xffffu)
#define TRN_HAL_VERSION TRN_HAL_MAKE_VERSION(2u, 3u)

typedef struct trn_hal_error {
  char message[TRN_DETAIL_MAX];
} trn_hal_error_t;

/** One driver instance: opened once per runtime initialisation. */
typedef struct trn_hal_instance_s trn_hal_instance_t;

/** Who this process is, as other processes and tools will see it. */
typedef struct trn_hal_process_identity {
  const char *command;         /**< command line, spaces between arguments */
  const char *runtime_version; /**< e.g. "0.2.0" */
} trn_hal_process_identity_t;

/* ---------------------------------------------------------------------------------------------
 * Devices and cores: every figure comes from here; the runtime derives none.
 */

/** What the runtime needs to know about a device beyond its public properties. */
typedef struct trn_hal_device_info {
  /** Bit n set: a logical core of n physical cores (LNC=n) is supported. Bit 1 is always set. */
  uint32_t lnc_mask;
  uint32_t reserved;
  /** Granule of memory reservations (mem_reserve sizes are multiples of it). */
  uint64_t chunk_bytes;
} trn_hal_device_info_t;

/** A logical core as the driver lays it out for one LNC. */
typedef struct trn_hal_core_info {
  uint32_t first_physical_core; /**< the logical core is physical cores first..first+count-1 */
  uint32_t physical_core_count; /**< = LNC */
  uint32_t hbm_bank;            /**< the bank nearest it: where its memory should come from */
  uint32_t dma_engines;         /**< DMA engines its queues can use */
  uint64_t physical_core_mask;  /**< bit per physical core (devices of up to 64 cores) */
} trn_hal_core_info_t;

/* ---------------------------------------------------------------------------------------------
 * Telemetry: what the driver counts, per process and physical core, as tools show it.
 */

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

/* ---------------------------------------------------------------------------------------------
 * Semaphores: driver-owned 64-bit timelines that only grow. Queues wait on and signal them on
 * the device; the host signals and waits through the driver. Each value remembers the simulated
 * device time at which it was reached (causal time: a command waiting on it starts no earlier).
 * A queue of any device of the instance may wait on or signal a semaphore of any other device of
 * the same instance: no host thread stands between them.
 */

typedef struct trn_hal_sem trn_hal_sem_t;

/** sem_create flags: other processes can import it (record, id name it). */
#define TRN_HAL_SEM_SHAREABLE 0x1u

typedef struct trn_hal_sem_state {
  uint64_t value;
  uint64_t device_ns; /**< simulated time at which `value` was reached */
  uint32_t failed;    /**< nonzero: a signal it waited for will not happen */
  uint32_t reserved;
  char reason[TRN_DETAIL_MAX]; /**< why it failed; empty otherwise */
} trn_hal_sem_state_t;

/* ---------------------------------------------------------------------------------------------
 * Kernels: the driver parses and validates a binary once and reports what the runtime shows.
 */

typedef struct trn_hal_kernel trn_hal_kernel_t;

/**
 * One kernel argument bound at launch. A tensor argument: device memory, `bytes` from
 * `device_address` on. A scalar argument (the driver's kernel_arg reports TRN_ARG_KIND_SCALAR):
 * `scalar_bits` holds the value (trn_scalar_t's `bits`: an f32 or i32 in the low 32 bits) and
 * `bytes` is 0. Same layout as before scalar arguments existed (no interface version change: only
 * a driver that reports scalar arguments is given one).
 */
typedef struct trn_hal_binding {
  union {
    uint64_t device_address; /**< tensor arguments */
    uint64_t scalar_bits;    /**< scalar arguments */
  };
  uint64_t bytes; /**< tensor arguments: bytes from device_address; scalar arguments: 0 */
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

/** The most DMA queues a core has: the length of per-queue arrays (a device reports its own count,
 * trn_device_properties_t.dma_engines_per_core, which is never more). */
#define TRN_HAL_DMA_QUEUES 16
#define TRN_HAL_RUN_OK 0
#define TRN_HAL_RUN_FAULT 1
#define TRN_HAL_RUN_DEADLOCK 2

/** What a kernel run did. The submitter provides it and the trace buffer (may be NULL). */
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
  uint64_t host_ns;  /**< host time the run took */
  trn_hal_trace_record_t *trace;
  uint64_t trace_capacity;
  uint64_t trace_count; /**< records produced (may exceed capacity: the rest were dropped) */
} trn_hal_run_result_t;

/* ---------------------------------------------------------------------------------------------
 * Submission: a driver queue is a ring on a logical core's engines (compute) or its DMA engines
 * (copy). It takes command buffers and executes them in order; a buffer is the unit of
 * completion and of failure.
 */

typedef struct trn_hal_queue trn_hal_queue_t;

typedef enum trn_hal_queue_kind {
  TRN_HAL_QUEUE_COMPUTE = 0, /**< every command, kernel launches included */
  TRN_HAL_QUEUE_COPY = 1     /**< everything but launches */
} trn_hal_queue_kind_t;

/**
 * A host call that returns at once and takes no lock a thread waiting for its queue may hold (the
 * runtime's own bookkeeping around a command): a driver may run it on a host thread that waits
 * for the queue's semaphore while running the queue's commands itself, rather than on the
 * queue's own thread. Calls without it (an application's) run on the queue's thread only.
 */
#define TRN_HAL_HOST_CALL_BRIEF 1u

typedef enum trn_hal_command_kind {
  /** Copies `bytes` between device addresses (HBM or registered host memory); may overlap. With
   *  a TRN_HAL_COPY_HOST_* flag one side is instead a plain pointer into this process's memory,
   *  registered nowhere: the driver pins it for the command (as a driver for hardware pins the
   *  pages of an unregistered buffer between submission and completion). */
  TRN_HAL_COMMAND_COPY = 1,
  /** Fills `bytes` at a device address with a byte value. */
  TRN_HAL_COMMAND_MEMSET = 2,
  /** Runs a kernel on the queue's core with its arguments bound (compute queues only). */
  TRN_HAL_COMMAND_LAUNCH = 3,
  /** Waits until a semaphore reaches a value; a failed semaphore fails the command. */
  TRN_HAL_COMMAND_SEM_WAIT = 4,
  /** Raises a semaphore to a value, carrying the queue's simulated time. */
  TRN_HAL_COMMAND_SEM_SIGNAL = 5,
  /** Writes a trn_hal_timestamp_t when reached: at a device address, or through a host pointer. */
  TRN_HAL_COMMAND_TIMESTAMP = 6,
  /** Calls a host function from the queue's thread when reached (and when cancelled); with
   *  TRN_HAL_HOST_CALL_BRIEF, possibly from a host thread that waits for the queue. */
  TRN_HAL_COMMAND_HOST_CALL = 7,
  /** Reads `bytes` of an open file at `file_offset` into device memory (HBM or registered host
   *  memory), as storage DMAs into device memory under GPUDirect Storage. The descriptor must
   *  stay open until the command completes; one that is not open (EBADF), an I/O error or an
   *  end of file before `bytes` fails the command with TRN_ERROR_FILE, its reason naming the
   *  file offset where it failed and the bytes before it. Never a partial silent result. */
  TRN_HAL_COMMAND_FILE_READ = 8,
  /** Writes `bytes` of device memory to an open file at `file_offset`; failures as FILE_READ. */
  TRN_HAL_COMMAND_FILE_WRITE = 9,
  /** Since 2.2: destination[i] = a[i] op b[i] over `count` elements, computed by the DMA engines
   *  as the data moves (the collective engines' reduction). `dtype` is a trn_dtype_t (F32, BF16,
   *  F16: computed in fp32, rounded to nearest even; I32: exact, wrapping), `op` a
   *  trn_reduce_op_t of SUM, PROD, MAX or MIN (MAX and MIN propagate NaN). The destination
   *  may equal an operand exactly but not overlap one otherwise. Device addresses (HBM or
   *  registered host memory). */
  TRN_HAL_COMMAND_REDUCE = 10
} trn_hal_command_kind_t;

/** COPY flags: which side is a plain host pointer (`source`/`destination` hold its value). */
#define TRN_HAL_COPY_HOST_SOURCE 0x1u
#define TRN_HAL_COPY_HOST_DESTINATION 0x2u

/** What a TIMESTAMP command writes. */
typedef struct trn_hal_timestamp {
  uint64_t device_ns; /**< the queue's simulated time */
  uint64_t host_ns;   /**< CLOCK_MONOTONIC */
} trn_hal_timestamp_t;

/**
 * A host call. `status` is TRN_SUCCESS when the call is reached in order; the function may then
 * fail the buffer by returning an error (with `err` filled). When the buffer failed or was
 * cancelled before it, the function is still called, once, with that status, so that whatever it
 * holds can be let go; its return is then ignored. It runs on a driver thread: it must not
 * submit to or destroy its own queue, and should be short.
 */
typedef trn_result_t (*trn_hal_host_fn)(void *user, trn_result_t status, trn_hal_error_t *err);

typedef struct trn_hal_command {
  uint32_t kind; /**< trn_hal_command_kind_t */
  uint32_t reserved;
  union {
    struct {
      uint64_t destination, source, bytes;
      uint32_t flags; /**< TRN_HAL_COPY_HOST_SOURCE or TRN_HAL_COPY_HOST_DESTINATION, or 0 */
    } copy;
    struct {
      uint64_t destination, bytes;
      uint32_t value; /**< the byte, 0-255 */
    } memset;
    struct {
      trn_hal_kernel_t *kernel;
      const trn_hal_binding_t *args; /**< copied at submission */
      uint32_t arg_count;
      /** Filled when the launch ends (also when the kernel faults); may be NULL. The submitter
       *  keeps it (and its trace buffer) valid until the buffer has completed or failed. */
      trn_hal_run_result_t *result;
    } launch;
    struct {
      trn_hal_sem_t *sem;
      uint64_t value;
    } sem; /**< SEM_WAIT, SEM_SIGNAL */
    struct {
      uint64_t destination; /**< device address of a trn_hal_timestamp_t (when `host` is NULL) */
      void *host;           /**< else: this process's memory, pinned for the command */
    } timestamp;
    struct {
      trn_hal_host_fn fn;
      void *user;
      /** TRN_HAL_HOST_CALL_BRIEF or 0. A hint a driver may ignore (0 in every earlier runtime). */
      uint32_t flags;
    } host_call;
    struct {
      int32_t fd; /**< this process's descriptor, open for reading (FILE_READ) or writing */
      uint64_t file_offset;
      uint64_t device_address; /**< the destination (FILE_READ) or the source (FILE_WRITE) */
      uint64_t bytes;
    } file; /**< FILE_READ, FILE_WRITE */
    struct {
      uint64_t destination, a, b;
      uint32_t count; /**< elements */
      uint16_t dtype; /**< trn_dtype_t */
      uint16_t op;    /**< trn_reduce_op_t */
    } reduce;         /**< REDUCE (the union's size is unchanged: 32 bytes) */
  } u;
} trn_hal_command_t;

/** One command buffer. */
typedef struct trn_hal_submission {
  const trn_hal_command_t *commands; /**< copied at submission */
  uint32_t command_count;
  uint32_t reserved;
  /** What the buffer is, in messages and the fault record: "copy", "launch". A string in static
   *  storage; NULL reads as "buffer". Failure texts name it with its tag: "copy #12 failed: ..."
   *  for the buffer that failed, "memset #13 was cancelled: an earlier command of the queue
   *  failed" for the ones after it. */
  const char *label;
  uint64_t tag; /**< the submitter's number for it (the runtime's sequence number) */
} trn_hal_submission_t;

/**
 * A queue's fault: the first buffer that failed. Its later commands were skipped, except that
 * its SEM_SIGNALs failed their semaphores (with `reason`) and its HOST_CALLs were called with
 * `result`; every buffer after it is cancelled alike (TRN_ERROR_CANCELLED) until queue_reset.
 */
typedef struct trn_hal_queue_fault {
  trn_result_t result; /**< TRN_SUCCESS: no fault */
  uint32_t reserved0;
  const char *label; /**< the failed buffer's */
  uint64_t tag;
  uint32_t command_index; /**< in its buffer */
  uint32_t command_kind;  /**< trn_hal_command_kind_t */
  char reason[TRN_DETAIL_MAX];
  /** copy / memset; FILE_READ: the device address and the file offset, FILE_WRITE: the file
   *  offset and the device address */
  uint64_t destination_address, source_address, bytes;
  uint64_t cancelled; /**< buffers cancelled after it */
  /* Kernel faults (command_kind LAUNCH with a kernel fault or deadlock). */
  trn_hal_kernel_t *kernel;
  uint32_t engine;
  uint32_t instruction;
  uint32_t source_line;
  uint32_t reserved;
  char opcode[32];
} trn_hal_queue_fault_t;

typedef struct trn_hal_queue_status {
  uint64_t submitted; /**< buffers accepted */
  uint64_t retired;   /**< buffers completed, failed or cancelled (in order) */
  trn_hal_queue_fault_t fault;
} trn_hal_queue_status_t;

/* ---------------------------------------------------------------------------------------------
 * The table.
 */

typedef struct trn_hal_ops {
  uint32_t version; /**< the driver's TRN_HAL_VERSION */
  uint32_t size;    /**< the driver's sizeof(trn_hal_ops_t) */
  const char *name; /**< short driver name, "sim" */

  /**
   * Opens the driver. Finding no devices is not a failure: the instance reports 0 devices and
   * `status` says why. A failure (bad configuration, inaccessible or incompatible state) returns
   * the error and no instance.
   */
  trn_result_t (*open)(const trn_hal_process_identity_t *identity, trn_hal_instance_t **instance,
                       trn_hal_error_t *err);
  /**
   * Closes the instance: stops its queues (cancelling what has not started), and drops every
   * claim, range, semaphore and kernel it holds. Accepts NULL.
   */
  void (*close)(trn_hal_instance_t *instance);
  /**
   * In a forked child, gives up an instance inherited from the parent without touching what it
   * holds: its claims, memory, semaphores and queues are the parent's. Closes the instance's
   * descriptors (so that the parent's claims end with the parent), joins no thread, frees
   * nothing else; the instance must not be used again, not even closed.
   */
  void (*abandon)(trn_hal_instance_t *instance);

  uint32_t (*device_count)(const trn_hal_instance_t *instance);
  /** Why there are no devices (TRN_SUCCESS when there are), and a one-line description. */
  trn_result_t (*status)(const trn_hal_instance_t *instance, char *detail, uint32_t detail_size);

  /* Devices and cores ------------------------------------------------------------------------ */

  /**
   * A device's figures, physical view: the driver fills everything except the fields that
   * depend on the process (logical_core_config, core_count, first_core_id, visible_core_count,
   * index), and `info`.
   */
  trn_result_t (*device_properties)(trn_hal_instance_t *instance, uint32_t device,
                                    trn_device_properties_t *properties,
                                    trn_hal_device_info_t *info, trn_hal_error_t *err);
  /** Directly linked devices, two-call enumeration. */
  trn_result_t (*device_neighbors)(trn_hal_instance_t *instance, uint32_t device, uint32_t *count,
                                   uint32_t *neighbors, trn_hal_error_t *err);
  /** Logical core `core` of a device seen with LNC=`lnc` (TRN_ERROR_OUT_OF_RANGE if none). */
  trn_result_t (*core_info)(trn_hal_instance_t *instance, uint32_t device, uint32_t lnc,
                            uint32_t core, trn_hal_core_info_t *info, trn_hal_error_t *err);
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
  /** Live processes attached to a device, two-call enumeration. Never claims anything. */
  trn_result_t (*process_list)(trn_hal_instance_t *instance, uint32_t device, uint32_t *count,
                               trn_hal_process_t *processes, trn_hal_error_t *err);

  /* Memory ----------------------------------------------------------------------------------- */

  /**
   * Reserves `bytes` (a multiple of chunk_bytes: any other size is TRN_ERROR_INVALID_ARGUMENT) of
   * one bank for this process as one contiguous device range. Storage is the driver's business: it
   * backs what is written (by commands, by mem_write or through a writable mapping) and reads what
   * was never written as zeros. TRN_ERROR_OUT_OF_DEVICE_MEMORY when the bank has no such range.
   */
  trn_result_t (*mem_reserve)(trn_hal_instance_t *instance, uint32_t device, uint32_t bank,
                              uint64_t bytes, uint64_t *device_address, trn_hal_error_t *err);
  /** Returns a reserved range; its contents are discarded (it reads as zeros when reused). */
  trn_result_t (*mem_release)(trn_hal_instance_t *instance, uint32_t device,
                              uint64_t device_address, uint64_t bytes, trn_hal_error_t *err);
  /**
   * A host pointer to part of a reserved or imported range. With TRN_HAL_MAP_WRITE the part is
   * backed first, so that a full store fails here and never faults the writer.
   */
  trn_result_t (*mem_map)(trn_hal_instance_t *instance, uint32_t device, uint64_t device_address,
                          uint64_t bytes, uint32_t flags, void **host, trn_hal_error_t *err);
  /** Host-initiated copies into and out of device memory (synchronous). */
  trn_result_t (*mem_write)(trn_hal_instance_t *instance, uint32_t device, uint64_t device_address,
                            const void *source, uint64_t bytes, trn_hal_error_t *err);
  trn_result_t (*mem_read)(trn_hal_instance_t *instance, uint32_t device, uint64_t device_address,
                           void *destination, uint64_t bytes, trn_hal_error_t *err);
  /**
   * Makes host memory reachable by a device's DMA: [host, host+bytes) gets a device address that
   * copy, memset and timestamp commands take. The memory stays the caller's; it must stay valid
   * until mem_unregister_host. Registrations do not overlap.
   */
  trn_result_t (*mem_register_host)(trn_hal_instance_t *instance, uint32_t device, void *host,
                                    uint64_t bytes, uint64_t *device_address, trn_hal_error_t *err);
  trn_result_t (*mem_unregister_host)(trn_hal_instance_t *instance, uint32_t device,
                                      uint64_t device_address, trn_hal_error_t *err);
  /** Adds to this process's published allocation statistics (what tools show). */
  void (*mem_account)(trn_hal_instance_t *instance, uint32_t device, uint32_t bank,
                      trn_mem_category_t category, int64_t bytes, int64_t count);
  /** Shares a reserved range with other processes; the range now lives while any holder does. */
  trn_result_t (*mem_export)(trn_hal_instance_t *instance, uint32_t device, uint64_t device_address,
                             uint64_t bytes, uint32_t *record, uint64_t *id, trn_hal_error_t *err);
  trn_result_t (*mem_import)(trn_hal_instance_t *instance, uint32_t device, uint32_t record,
                             uint64_t id, uint64_t *device_address, uint64_t *bytes, uint32_t *bank,
                             trn_hal_error_t *err);
  /**
   * Drops this process's hold on an export (exporter or importer). A process holds an export
   * once, however many times it imports it (unlike semaphores, where each import is a hold).
   */
  trn_result_t (*mem_unexport)(trn_hal_instance_t *instance, uint32_t device, uint32_t record,
                               uint64_t id, trn_hal_error_t *err);
  /** A bank's size, the bytes live processes hold in it, and its largest free range. */
  trn_result_t (*mem_bank_usage)(trn_hal_instance_t *instance, uint32_t device, uint32_t bank,
                                 uint64_t *bank_bytes, uint64_t *held_bytes,
                                 uint64_t *largest_free_bytes, trn_hal_error_t *err);

  /* Semaphores ------------------------------------------------------------------------------- */

  /**
   * A semaphore of a device at `initial`. With TRN_HAL_SEM_SHAREABLE other processes can import
   * it by (record, id); it is freed when its last holder lets go or dies.
   */
  trn_result_t (*sem_create)(trn_hal_instance_t *instance, uint32_t device, uint64_t initial,
                             uint32_t flags, trn_hal_sem_t **sem, uint32_t *record, uint64_t *id,
                             trn_hal_error_t *err);
  /**
   * A hold on a shareable semaphore of this or another process. Each import (and the create) is
   * its own hold with its own object; the process lets go of the semaphore with its last hold.
   */
  trn_result_t (*sem_import)(trn_hal_instance_t *instance, uint32_t device, uint32_t record,
                             uint64_t id, trn_hal_sem_t **sem, trn_hal_error_t *err);
  /**
   * Lets go of this process's hold. The caller guarantees that no command still queued waits on
   * or signals it. Descriptors from sem_watch then read end-of-file. Accepts NULL.
   */
  void (*sem_destroy)(trn_hal_instance_t *instance, trn_hal_sem_t *sem);
  void (*sem_query)(const trn_hal_sem_t *sem, trn_hal_sem_state_t *state);
  /** The value alone, without a lock: the fast path of polling. */
  uint64_t (*sem_value)(const trn_hal_sem_t *sem);
  /**
   * Host signal: raises the value to at least `value` (never lowers it), at the device's current
   * simulated time; `clear_failure` also clears the failed mark (a queue reset).
   */
  void (*sem_signal)(trn_hal_sem_t *sem, uint64_t value, uint32_t clear_failure);
  /** Marks it failed: waiters for values not reached stop with TRN_ERROR_CANCELLED. */
  void (*sem_fail)(trn_hal_sem_t *sem, const char *reason);
  /**
   * Host wait: TRN_SUCCESS once the value is reached, TRN_TIMEOUT at the deadline (0 polls,
   * UINT64_MAX waits forever), TRN_ERROR_CANCELLED when it failed first.
   */
  trn_result_t (*sem_wait)(trn_hal_sem_t *sem, uint64_t value, uint64_t timeout_ns);
  /**
   * A descriptor the caller owns that becomes readable (8 bytes, as an eventfd reads) when the
   * value is reached or the semaphore fails, whoever signals it, in any process.
   */
  trn_result_t (*sem_watch)(trn_hal_sem_t *sem, uint64_t value, int *fd, trn_hal_error_t *err);
  /**
   * Ends every watch of this hold now: the callers' descriptors read end-of-file. The runtime
   * calls it when a handle is destroyed while calls in flight may still use the object, which
   * sem_destroy frees later.
   */
  void (*sem_close_watches)(trn_hal_sem_t *sem);

  /* Kernels ---------------------------------------------------------------------------------- */

  /** Parses and validates a binary for the device (TRN_ERROR_INVALID_KERNEL with the reason). */
  trn_result_t (*kernel_load)(trn_hal_instance_t *instance, uint32_t device, const void *image,
                              size_t size, trn_hal_kernel_t **kernel, trn_hal_error_t *err);
  /** The caller guarantees no queued launch still uses it. Accepts NULL. */
  void (*kernel_unload)(trn_hal_instance_t *instance, trn_hal_kernel_t *kernel);
  /** Name, argument count, instructions per engine, constants (header untouched). */
  void (*kernel_properties)(const trn_hal_kernel_t *kernel, trn_kernel_properties_t *properties);
  /**
   * Argument `index` in launch order (header untouched; nothing past header.size written);
   * TRN_ERROR_OUT_OF_RANGE past the end. `kind` says tensor or scalar; a driver that leaves it 0
   * (one that predates scalar arguments) has tensors only.
   */
  trn_result_t (*kernel_arg)(const trn_hal_kernel_t *kernel, uint32_t index, trn_kernel_arg_t *arg);
  /** The source line of an instruction, 0 when unknown. */
  uint32_t (*kernel_source_line)(const trn_hal_kernel_t *kernel, uint32_t engine, uint32_t index);

  /* Queues ----------------------------------------------------------------------------------- */

  /**
   * A ring on the logical core made of physical cores [first, first+count), holding up to
   * `capacity` buffers in flight, whose copies and memsets are split across `dma_engines` of the
   * core's DMA engines (0: all of them). A compute queue needs the process's claim on the
   * cores; a copy queue does not (DMA engines are shared between processes).
   */
  trn_result_t (*queue_create)(trn_hal_instance_t *instance, uint32_t device,
                               uint32_t first_physical_core, uint32_t physical_core_count,
                               trn_hal_queue_kind_t kind, uint32_t capacity, uint32_t dma_engines,
                               trn_hal_queue_t **queue, trn_hal_error_t *err);
  /**
   * Stops a queue: the buffer running completes (a wait in it ends as cancelled), the rest are
   * cancelled, and its threads are joined. Never waits on a semaphore. Accepts NULL.
   */
  void (*queue_destroy)(trn_hal_instance_t *instance, trn_hal_queue_t *queue);
  /**
   * Appends one buffer and returns without waiting. TRN_ERROR_QUEUE_FULL when `capacity` buffers
   * are in flight; TRN_ERROR_INVALID_ARGUMENT for a malformed command (a launch on a copy
   * queue, an address that is not device memory, a wrong argument count), before anything runs.
   */
  trn_result_t (*queue_submit)(trn_hal_queue_t *queue, const trn_hal_submission_t *submission,
                               trn_hal_error_t *err);
  void (*queue_status)(trn_hal_queue_t *queue, trn_hal_queue_status_t *status);
  /**
   * Leaves the error state once every buffer has retired (TRN_ERROR_HANDLE_IN_USE before). The
   * caller then signals (with clear_failure) the semaphores it wants usable again.
   */
  trn_result_t (*queue_reset)(trn_hal_queue_t *queue, trn_hal_error_t *err);
  /** The device's current simulated time (what host signals carry). */
  uint64_t (*device_time_ns)(trn_hal_instance_t *instance, uint32_t device);
  /**
   * The queue's scheduling priority (TRN_HAL_QUEUE_PRIORITY_*; queues start NORMAL). Launches of
   * queues on the same core take the core's engines one at a time; when several wait, the
   * highest priority goes first (in order of arrival within a priority). Takes effect for
   * buffers that have not started.
   */
  trn_result_t (*queue_set_priority)(trn_hal_queue_t *queue, uint32_t priority,
                                     trn_hal_error_t *err);

  /* Interface 2.1 ---------------------------------------------------------------------------- */

  /**
   * The source file of an instruction's source line (kernel_source_line), "" when unknown. A
   * kernel built from several files names each instruction's own. The string belongs to the
   * kernel: valid until kernel_unload.
   */
  const char *(*kernel_source_file)(const trn_hal_kernel_t *kernel, uint32_t engine,
                                    uint32_t index);

  /* Interface 2.3 ---------------------------------------------------------------------------- */

  /**
   * Host signal that never goes back: as sem_signal when `value` is at least the current value
   * (an equal one raises nothing), else TRN_ERROR_INVALID_ARGUMENT with the current value in
   * *current and nothing changed, the failed mark included. One step: a sem_value read followed
   * by sem_signal would take the semaphore's memory from its waiters twice.
   */
  trn_result_t (*sem_raise)(trn_hal_sem_t *sem, uint64_t value, uint32_t clear_failure,
                            uint64_t *current);
} trn_hal_ops_t;

/** queue_set_priority values. */
#define TRN_HAL_QUEUE_PRIORITY_LOW 0u
#define TRN_HAL_QUEUE_PRIORITY_NORMAL 1u
#define TRN_HAL_QUEUE_PRIORITY_HIGH 2u

/** mem_map flags. */
#define TRN_HAL_MAP_READ 0x1u
#define TRN_HAL_MAP_WRITE 0x2u

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
