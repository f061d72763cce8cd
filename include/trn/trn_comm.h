/*
 * trn_comm.h — collectives between NeuronCores (libtrn_comm), the layer data-parallel and
 * sharded training stand on: all-reduce, all-gather, reduce-scatter, broadcast, reduce,
 * all-to-all, send/recv and barrier over communicators of ranks, each rank one core in one
 * process, enqueued on trn queues like any command (docs/collectives.md).
 *
 * How it works:
 * - A communicator is made by every rank with the same unique id (passed between the processes
 *   by any means, as NCCL's is) or from the environment torchrun sets (RANK, WORLD_SIZE,
 *   MASTER_ADDR, MASTER_PORT): the ranks meet over TCP, and each exports a staging buffer in its
 *   core's HBM and a pair of semaphores per peer, which the others import. Several ranks may
 *   live in one process (one per core, one thread each; trn_comm_init_all makes them at once).
 * - An operation is a sequence of queue commands on the rank's queue and nothing else: DMA copies
 *   into a peer's staging buffer, which signal the peer's semaphore; the peer's queue waits for
 *   it and combines the chunk into its buffer with a DMA reduce command (trn_queue_reduce, which
 *   every driver that loads implements) or a copy, then signals that the slot is free again.
 *   The host only enqueues; the data moves and is reduced on the devices, within a device
 *   through HBM, between devices over the (simulated) NeuronLink, across processes through
 *   exported memory and semaphores. Large all-reduces run as a ring, small ones by recursive
 *   doubling.
 * - Failure: a rank whose process dies, or that does not take part in an operation within the
 *   communicator's timeout, makes the others fail with TRN_ERROR_COLLECTIVE naming the missing
 *   ranks and the operation (trn_comm_synchronize, trn_comm_get_error); the waits of the queue
 *   commands involved fail (TRN_ERROR_CANCELLED, the reason in the queue's fault record) so no
 *   queue hangs. A failed communicator can only be destroyed.
 *
 * Operations on one communicator must be called in the same order on every rank, as with NCCL.
 * On one host ranks whose collectives differ (kind, count, dtype, op or root) all fail with
 * TRN_ERROR_COLLECTIVE naming both calls, before any of them completes the collective.
 * Counts are elements; buffers are (allocation, byte offset) pairs of device or host pool
 * memory, aligned to the element size. Results: the trn_result_t of trn.h;
 * trn_last_error() says what was wrong, as after any trn call (since 0.5; trn_comm_last_error()
 * keeps the same text for this library's calls only). Thread safety: every function may be called
 * from any thread; the operations of one communicator are serialised (calls on one communicator
 * from several threads run one after the other).
 */
#ifndef TRN_TRN_COMM_H
#define TRN_TRN_COMM_H

#include "trn/trn.h"

#if defined(TRN_COMM_BUILDING_LIBRARY)
#define TRN_COMM_API __attribute__((visibility("default")))
#else
#define TRN_COMM_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The release's version, as libtrn's (trn.h, "Versioning"): a program built against 0.x runs on
 * any later 0.x libtrn_comm. Its symbols carry the node of the release that added them
 * (TRN_COMM_0.1 for everything released up to 0.4; a function added since goes into the
 * node of its release), checked against abi/libtrn_comm.abi. */
#define TRN_COMM_API_VERSION TRN_MAKE_VERSION(0, 5)

/** The version libtrn_comm implements. */
TRN_COMM_API uint32_t trn_comm_get_version(void);
/** What the last failing call of this library on this thread said ("" if none). Since 0.5 the
 * same text is trn_last_error()'s too, which serves every layer. */
TRN_COMM_API const char *trn_comm_last_error(void);

typedef struct trn_comm_s *trn_comm_t;

/** Where the ranks of one communicator meet: bytes to pass to every rank (copyable). */
typedef struct trn_comm_unique_id {
  char internal[128];
} trn_comm_unique_id_t;

/**
 * Makes a unique id, like ncclGetUniqueId: this process listens on an ephemeral TCP port of
 * TRN_COMM_SOCKET_ADDR (default 127.0.0.1; another host's ranks need an address they can reach)
 * and serves the rendezvous of the communicator the id makes, on a thread of its own, until
 * every rank has arrived or the timeout passes. Call it once per communicator, in one process.
 * @returns TRN_ERROR_INVALID_CONFIG when TRN_COMM_SOCKET_ADDR is not an address;
 * TRN_ERROR_COLLECTIVE when no socket can listen on it (trn_comm_last_error() says why).
 */
TRN_COMM_API trn_result_t trn_comm_get_unique_id(trn_comm_unique_id_t *id);

typedef struct trn_comm_desc {
  trn_struct_header_t header;
  trn_core_t core;      /**< this rank's NeuronCore; its operations' queue is usually on it */
  uint32_t rank;        /**< 0 .. size-1 */
  uint32_t size;        /**< ranks in the communicator, 1 .. 64 */
  uint64_t timeout_ns;  /**< rendezvous and per-operation deadline; 0 = TRN_COMM_TIMEOUT_MS or
                           300 s; UINT64_MAX = no limit */
  uint64_t chunk_bytes; /**< staging slot size (the pipelining unit); 0 = TRN_COMM_CHUNK_BYTES
                           or 1 MiB when ranks on one host use two or more devices, else
                           512 KiB; a multiple of 4096 from 4096 to 64 MiB */
} trn_comm_desc_t;

TRN_DEFINE_STRUCT_MAKE(trn_comm_desc_t, TRN_STRUCT_COMM_DESC)
#define TRN_COMM_DESC_INIT trn_comm_desc_t_make()

/**
 * Joins a communicator as `desc->rank` of `desc->size`, like ncclCommInitRank. Blocks until
 * every rank has joined (they exchange addresses, staging buffers and semaphores) or the timeout
 * passes. @returns TRN_ERROR_COLLECTIVE naming the ranks that never arrived, or when ranks
 * disagree (sizes, a rank joined twice); TRN_ERROR_INVALID_ARGUMENT for a bad descriptor or id;
 * the runtime's result when the staging memory or semaphores cannot be made;
 * TRN_ERROR_INVALID_CONFIG naming a malformed TRN_COMM_* or FI_OFI_RXM_EAGER_LIMIT variable, or
 * when ranks on different hosts use different libfabric providers or, over ofi_rxm, different
 * FI_OFI_RXM_EAGER_LIMITs (docs/collectives.md);
 * TRN_ERROR_OUT_OF_HOST_MEMORY when the communicator's threads cannot start (the process is at
 * its limit of threads or memory).
 */
TRN_COMM_API trn_result_t trn_comm_init_rank(const trn_comm_unique_id_t *id,
                                             const trn_comm_desc_t *desc, trn_comm_t *comm);
/**
 * Joins the communicator torchrun's environment describes: RANK, WORLD_SIZE, MASTER_ADDR and
 * MASTER_PORT (LOCAL_RANK picks the core when `desc->core` is NULL: the LOCAL_RANK-th visible
 * core of the first device with that many, counting across devices). Rank 0 serves the
 * rendezvous on MASTER_ADDR:MASTER_PORT, or on MASTER_PORT + 1 (65534 for 65535) under torchrun
 * itself (TORCHELASTIC_RUN_ID set), whose own store holds MASTER_PORT; TRN_COMM_PORT overrides
 * both. The port stays taken while the communicator lives: another job on it fails at init with
 * TRN_ERROR_COLLECTIVE saying whose it is, and never joins (docs/collectives.md). `desc` may be
 * NULL; its rank and size are ignored. @returns TRN_ERROR_INVALID_CONFIG naming a missing or
 * malformed variable.
 */
TRN_COMM_API trn_result_t trn_comm_init_from_env(const trn_comm_desc_t *desc, trn_comm_t *comm);
/**
 * Makes `count` communicators in this process, rank i on cores[i], like ncclCommInitAll. Each
 * rank's operations must then be called from its own thread (a rank's call may wait for queue
 * space its peers' calls free). `desc` may be NULL; its core, rank and size are ignored. Every
 * rank's thread starts before any joins: one the process cannot start fails the call at once
 * with TRN_ERROR_OUT_OF_HOST_MEMORY naming the rank, and no communicator is made.
 * @returns TRN_ERROR_INVALID_ARGUMENT, before any rank starts, when two entries of `cores` are
 * the same core.
 */
TRN_COMM_API trn_result_t trn_comm_init_all(uint32_t count, const trn_core_t *cores,
                                            const trn_comm_desc_t *desc, trn_comm_t *comms);
/**
 * Splits a communicator, like ncclCommSplit: every rank calls it; ranks with the same `color`
 * form a new communicator, ordered by `key` then by their rank in `comm`. A negative color
 * (TRN_COMM_SPLIT_NOCOLOR) takes no part and gets NULL. The new communicator keeps `comm`'s
 * timeout and chunk size.
 */
#define TRN_COMM_SPLIT_NOCOLOR (-1)
TRN_COMM_API trn_result_t trn_comm_split(trn_comm_t comm, int32_t color, int32_t key,
                                         trn_comm_t *new_comm);
/**
 * Ends the communicator after the operations it enqueued complete (up to its timeout), and lets
 * go of its staging memory and semaphores. A call on the communicator running on another thread
 * finishes first; one that starts after fails with TRN_ERROR_INVALID_HANDLE. When the operations
 * do not complete within the timeout, the communicator fails (its queued commands are cancelled
 * and the other ranks learn it) before it goes. Accepts NULL.
 */
TRN_COMM_API trn_result_t trn_comm_destroy(trn_comm_t comm);
/**
 * Fails the communicator now, like ncclCommAbort: the commands of its operations that still wait
 * on peers fail (TRN_ERROR_CANCELLED on their queue), the other ranks learn it and fail too,
 * and the communicator is destroyed. A call waiting on another thread (for queue space, in a
 * split) ends with the failure first. Accepts NULL.
 */
TRN_COMM_API trn_result_t trn_comm_abort(trn_comm_t comm);

typedef struct trn_comm_info {
  trn_struct_header_t header;
  uint32_t rank;
  uint32_t size;
  uint32_t device_index; /**< this rank's device */
  uint32_t core_index;   /**< this rank's core on it */
  uint32_t local_ranks;  /**< ranks in this process */
  uint32_t devices;      /**< distinct devices among the ranks */
  uint32_t processes;    /**< distinct processes among the ranks */
  uint64_t chunk_bytes;
  uint64_t timeout_ns;
  uint64_t operations; /**< operations enqueued so far */
  char transport[32];  /**< "device" (HBM, NeuronLink, exported memory), or "fabric (<libfabric
                          provider>)" when some ranks are on other hosts */
} trn_comm_info_t;

TRN_DEFINE_STRUCT_MAKE(trn_comm_info_t, TRN_STRUCT_COMM_INFO)
#define TRN_COMM_INFO_INIT trn_comm_info_t_make()

TRN_COMM_API trn_result_t trn_comm_get_info(trn_comm_t comm, trn_comm_info_t *info);

/**
 * TRN_SUCCESS, or TRN_ERROR_COLLECTIVE once the communicator failed (a peer died, timed out or
 * aborted): trn_comm_last_error() names the operation and the ranks. Never blocks.
 */
TRN_COMM_API trn_result_t trn_comm_get_error(trn_comm_t comm);
/**
 * Waits until every operation this rank enqueued on the communicator completed. A queue
 * destroyed since leaves nothing to wait for (its commands ran, or were cancelled: the peers
 * see that in their own operations). @returns TRN_SUCCESS; TRN_TIMEOUT when `timeout_ns` passed
 * first (the operations go on); TRN_ERROR_COLLECTIVE when the communicator failed, naming the
 * operation and the missing ranks.
 */
TRN_COMM_API trn_result_t trn_comm_synchronize(trn_comm_t comm, uint64_t timeout_ns);

/* ---------------------------------------------------------------------------------------------
 * Operations. Each is enqueued on `queue` (any queue of this process; a compute queue on the
 * rank's core runs them on that core's DMA engines, as on hardware) between the
 * waits and the signals of `sync` (may be NULL), and returns at once; `sequence` (may be NULL)
 * receives the sequence number of its last command, whose completion means the operation's
 * result is in place on this rank. Out of place or in place (the same allocation and offset for
 * input and output). dtypes: f32, bf16, f16, i32 (i32 sums and products wrap, as the DMA engines
 * compute them; avg of i32 divides on libtrn_ops' exact host path, recorded in
 * trn_ops_get_fallbacks, whose first use logs a warning as every op's first fallback does).
 * @returns TRN_ERROR_INVALID_ARGUMENT for bad buffers, counts or dtypes (nothing is enqueued);
 * TRN_ERROR_INVALID_HANDLE for a NULL or stale queue or buffer memory; TRN_ERROR_INVALID_ENUM for
 * an op other than TRN_REDUCE_SUM, _PROD, _MAX, _MIN and _AVG; TRN_ERROR_COLLECTIVE on a failed
 * communicator. A failure once part of the operation is enqueued (out of host memory included)
 * returns its own result and fails the communicator, as its peers' counts of chunks are no longer
 * this rank's.
 * ------------------------------------------------------------------------------------------ */

/* The reduction op of a collective: trn.h's trn_reduce_op_t (since 0.5; the values are those of
 * 0.4's own enum). Collectives compute SUM, PROD, MAX, MIN and AVG (the sum divided by the rank
 * count; integers truncated toward zero); ARGMAX, ARGMIN and values outside the enum are
 * TRN_ERROR_INVALID_ENUM. The TRN_COMM_* names stay for source compatibility. */
typedef trn_reduce_op_t trn_comm_red_op_t;
#define TRN_COMM_SUM TRN_REDUCE_SUM
#define TRN_COMM_PROD TRN_REDUCE_PROD
#define TRN_COMM_MAX TRN_REDUCE_MAX
#define TRN_COMM_MIN TRN_REDUCE_MIN
#define TRN_COMM_AVG TRN_REDUCE_AVG
#define TRN_COMM_RED_OP_FORCE_INT32 TRN_REDUCE_OP_FORCE_INT32

/** trn_reduce_op_name(op): "sum", "prod", "max", "min", "avg", ...; "unknown" otherwise. */
TRN_COMM_API const char *trn_comm_red_op_name(trn_comm_red_op_t op);

/** A buffer of a collective: an allocation and a byte offset in it. */
typedef struct trn_comm_buffer {
  trn_mem_t mem;
  uint64_t offset;
} trn_comm_buffer_t;

/** recv[i] = op over ranks of send[i], `count` elements on every rank. */
TRN_COMM_API trn_result_t trn_comm_all_reduce(trn_comm_t comm, trn_queue_t queue,
                                              trn_comm_buffer_t send, trn_comm_buffer_t recv,
                                              uint64_t count, trn_dtype_t dtype,
                                              trn_comm_red_op_t op, const trn_sync_t *sync,
                                              uint64_t *sequence);
/** recv[r * count + i] = send of rank r [i]: `count` elements in, size * count out. */
TRN_COMM_API trn_result_t trn_comm_all_gather(trn_comm_t comm, trn_queue_t queue,
                                              trn_comm_buffer_t send, trn_comm_buffer_t recv,
                                              uint64_t count, trn_dtype_t dtype,
                                              const trn_sync_t *sync, uint64_t *sequence);
/** recv[i] = op over ranks of send[rank * count + i]: size * count in, `count` out. */
TRN_COMM_API trn_result_t trn_comm_reduce_scatter(trn_comm_t comm, trn_queue_t queue,
                                                  trn_comm_buffer_t send, trn_comm_buffer_t recv,
                                                  uint64_t count, trn_dtype_t dtype,
                                                  trn_comm_red_op_t op, const trn_sync_t *sync,
                                                  uint64_t *sequence);
/** recv = send of `root` on every rank (`send` is read on the root only). */
TRN_COMM_API trn_result_t trn_comm_broadcast(trn_comm_t comm, trn_queue_t queue,
                                             trn_comm_buffer_t send, trn_comm_buffer_t recv,
                                             uint64_t count, trn_dtype_t dtype, uint32_t root,
                                             const trn_sync_t *sync, uint64_t *sequence);
/** recv of `root` = op over ranks of send (`recv` is written on the root only). */
TRN_COMM_API trn_result_t trn_comm_reduce(trn_comm_t comm, trn_queue_t queue,
                                          trn_comm_buffer_t send, trn_comm_buffer_t recv,
                                          uint64_t count, trn_dtype_t dtype, trn_comm_red_op_t op,
                                          uint32_t root, const trn_sync_t *sync,
                                          uint64_t *sequence);
/** recv[r * count + i] = send of rank r [rank * count + i]: size * count in and out. */
TRN_COMM_API trn_result_t trn_comm_all_to_all(trn_comm_t comm, trn_queue_t queue,
                                              trn_comm_buffer_t send, trn_comm_buffer_t recv,
                                              uint64_t count, trn_dtype_t dtype,
                                              const trn_sync_t *sync, uint64_t *sequence);
/** Sends `count` elements to `peer`, which receives them with trn_comm_recv. */
TRN_COMM_API trn_result_t trn_comm_send(trn_comm_t comm, trn_queue_t queue, trn_comm_buffer_t send,
                                        uint64_t count, trn_dtype_t dtype, uint32_t peer,
                                        const trn_sync_t *sync, uint64_t *sequence);
TRN_COMM_API trn_result_t trn_comm_recv(trn_comm_t comm, trn_queue_t queue, trn_comm_buffer_t recv,
                                        uint64_t count, trn_dtype_t dtype, uint32_t peer,
                                        const trn_sync_t *sync, uint64_t *sequence);
/** Completes on every rank's queue once every rank's queue reached it. */
TRN_COMM_API trn_result_t trn_comm_barrier(trn_comm_t comm, trn_queue_t queue,
                                           const trn_sync_t *sync, uint64_t *sequence);

#ifdef __cplusplus
}
#endif

#endif /* TRN_TRN_COMM_H */
