/*
 * trn_ops.h — eager tensor operations on NeuronCores (libtrn_ops), the layer a framework's eager
 * mode stands on: each call is one op (add, matmul, softmax, an Adam step, ...) on tensors in
 * device memory, enqueued on a trn queue and asynchronous like every queue command.
 *
 * How an op runs (docs/ops.md):
 * - On the device, when it can: a kernel for the op's signature (op, dtypes, shapes, layout,
 *   the core's generation) is built with the kernel builder on first use and cached, in memory
 *   (least recently used out first, bounded in bytes) and on disk (TRN_CACHE_DIR, by default
 *   $XDG_CACHE_HOME/trn or ~/.cache/trn). Scalars (alpha, a learning rate, ...) are launch
 *   arguments, so one kernel serves every value.
 * - On the host otherwise (float64 and int64 tensors, layouts or ops the device has no kernel
 *   for): the inputs are copied out, the op is computed in float64 (in int64, exactly, where
 *   every tensor is an integer one), the outputs are copied in, all in queue order. Each such op
 *   warns once and is recorded (trn_ops_get_fallbacks).
 *
 * Tensors are views of device memory: an allocation, a byte offset, a dtype, a shape and strides
 * in elements (0 broadcasts). Outputs must not overlap each other, nor partly overlap an input:
 * an output may be exactly an
 * input (in place, as PyTorch's add_ or relu_) for the elementwise ops, and the optimizer steps
 * update their tensors in place. An op's commands run on `queue` (a compute
 * queue of the core that runs the kernels) between the waits and signals of `sync`, which belong
 * to the op as a whole: waits before its first command, signals after its last.
 *
 * Results: the trn_result_t of trn.h. A bad argument is TRN_ERROR_INVALID_ARGUMENT and nothing
 * is queued; trn_last_error() says what was wrong, as after any trn call (since 0.5: this
 * library's failures set it through trn_set_last_error; trn_ops_last_error() keeps the same text
 * for this library's calls only). Thread safety: every function may be
 * called from any thread; the kernel cache and the fallback record are shared by the process.
 */
#ifndef TRN_TRN_OPS_H
#define TRN_TRN_OPS_H

#include "trn/trn.h"

#if defined(TRN_OPS_BUILDING_LIBRARY)
#define TRN_OPS_API __attribute__((visibility("default")))
#else
#define TRN_OPS_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The release's version, as libtrn's (trn.h, "Versioning"): a program built against 0.x runs on
 * any later 0.x libtrn_ops. Its symbols carry the node of the release that added them
 * (TRN_OPS_0.1 for everything released up to 0.4; a function added since goes into the
 * node of its release), checked against abi/libtrn_ops.abi. */
#define TRN_OPS_API_VERSION TRN_MAKE_VERSION(0, 5)

/** The version libtrn_ops implements. */
TRN_OPS_API uint32_t trn_ops_get_version(void);
/** What the last failing call of this library on this thread said ("" if none). Since 0.5 the
 * same text is trn_last_error()'s too, which serves every layer. */
TRN_OPS_API const char *trn_ops_last_error(void);

/* ---------------------------------------------------------------------------------------------
 * Tensors
 * ------------------------------------------------------------------------------------------ */

#define TRN_OPS_MAX_DIMS 8

/**
 * A view of device memory. Element (i0, ..., in-1) is at byte `offset + sum(ik * strides[k]) *
 * dtype size` of `mem`. Rank 0 is one element. Strides may be 0 (a broadcast dim, read only) but
 * not negative. Values, not objects: nothing to create or destroy.
 */
typedef struct trn_ops_tensor {
  trn_mem_t mem;
  uint64_t offset; /**< bytes from the allocation's start to the first element */
  trn_dtype_t dtype;
  uint32_t rank;
  int64_t shape[TRN_OPS_MAX_DIMS];
  int64_t strides[TRN_OPS_MAX_DIMS]; /**< in elements */
} trn_ops_tensor_t;

/**
 * Fills `tensor` with a contiguous (row-major) view of `mem` from `offset`.
 * @returns TRN_ERROR_INVALID_ARGUMENT for a rank over TRN_OPS_MAX_DIMS, a negative dim or a view
 * that does not fit the allocation; TRN_ERROR_INVALID_ENUM for an unknown dtype;
 * TRN_ERROR_INVALID_HANDLE for a NULL or freed `mem`.
 */
TRN_OPS_API trn_result_t trn_ops_tensor_init(trn_ops_tensor_t *tensor, trn_mem_t mem,
                                             uint64_t offset, trn_dtype_t dtype, uint32_t rank,
                                             const int64_t *shape);
/** Elements of the tensor (the product of its shape; 1 for rank 0). */
TRN_OPS_API uint64_t trn_ops_tensor_numel(const trn_ops_tensor_t *tensor);
/** 1 if the tensor is row-major contiguous. */
TRN_OPS_API int trn_ops_tensor_is_contiguous(const trn_ops_tensor_t *tensor);

/* ---------------------------------------------------------------------------------------------
 * Elementwise ops. Shapes broadcast as numpy's do; `out` has the broadcast shape (a dtype of its
 * own: the result is converted, rounding to nearest even, integers saturating). Arithmetic is in
 * fp32 on the device and float64 on the host; comparisons give 1 or 0. Ops whose tensors are all
 * integers (neg, abs, relu, square, add, sub, mul, pow, maximum, minimum, the comparisons, where,
 * integer casts, and sum, max, min, argmax and argmin) compute in int64 on the host, exact at any
 * magnitude, wrapping on overflow and into a narrower output as PyTorch's integer kernels do;
 * add and sub of int32 or int64 tensors of one dtype and shape (or with an integer scalar) run on
 * the device, as exactly (16-bit limbs with a carry). An int64 output of fill or arange whose
 * values fp32 holds exactly (|v| <= 2^24) is written on the device.
 * ------------------------------------------------------------------------------------------ */

typedef enum trn_ops_unary_op {
  TRN_OPS_NEG = 1,
  TRN_OPS_ABS = 2,
  TRN_OPS_EXP = 3,
  TRN_OPS_LOG = 4,
  TRN_OPS_SQRT = 5,
  TRN_OPS_RSQRT = 6,
  TRN_OPS_TANH = 7,
  TRN_OPS_SIGMOID = 8,
  TRN_OPS_RELU = 9,
  TRN_OPS_GELU = 10,      /**< erf form: 0.5 x (1 + erf(x / sqrt 2)) */
  TRN_OPS_GELU_TANH = 11, /**< tanh approximation */
  TRN_OPS_SILU = 12,
  TRN_OPS_RECIPROCAL = 13,
  TRN_OPS_SQUARE = 14,
  TRN_OPS_SIN = 15, /**< radians */
  TRN_OPS_COS = 16,
  TRN_OPS_UNARY_FORCE_INT32 = 0x7fffffff
} trn_ops_unary_op_t;

typedef enum trn_ops_binary_op {
  TRN_OPS_ADD = 1,
  TRN_OPS_SUB = 2,
  TRN_OPS_MUL = 3,
  TRN_OPS_DIV = 4,
  TRN_OPS_MAXIMUM = 5,
  TRN_OPS_MINIMUM = 6,
  TRN_OPS_POW = 7,
  TRN_OPS_EQ = 8,
  TRN_OPS_NE = 9,
  TRN_OPS_LT = 10,
  TRN_OPS_LE = 11,
  TRN_OPS_GT = 12,
  TRN_OPS_GE = 13,
  TRN_OPS_BINARY_FORCE_INT32 = 0x7fffffff
} trn_ops_binary_op_t;

/** "neg", "exp", ...; "add", "lt", ...; "unknown" otherwise. */
TRN_OPS_API const char *trn_ops_unary_op_name(trn_ops_unary_op_t op);
TRN_OPS_API const char *trn_ops_binary_op_name(trn_ops_binary_op_t op);

/** out = op(x); x broadcasts to out. */
TRN_OPS_API trn_result_t trn_ops_unary(trn_queue_t queue, trn_ops_unary_op_t op,
                                       const trn_ops_tensor_t *out, const trn_ops_tensor_t *x,
                                       const trn_sync_t *sync);
/**
 * grad_x = grad_out * op'(x) (the backward of trn_ops_unary); all three of one shape. `x` is the
 * forward's input, for every op: PyTorch's tanh_backward and sigmoid_backward take the forward's
 * output instead, so a backend passes its saved input here, not its saved result.
 */
TRN_OPS_API trn_result_t trn_ops_unary_backward(trn_queue_t queue, trn_ops_unary_op_t op,
                                                const trn_ops_tensor_t *grad_x,
                                                const trn_ops_tensor_t *grad_out,
                                                const trn_ops_tensor_t *x, const trn_sync_t *sync);
/** out = a op b. */
TRN_OPS_API trn_result_t trn_ops_binary(trn_queue_t queue, trn_ops_binary_op_t op,
                                        const trn_ops_tensor_t *out, const trn_ops_tensor_t *a,
                                        const trn_ops_tensor_t *b, const trn_sync_t *sync);
/**
 * out = a op scalar, or scalar op a when `scalar_first` (rsub, rdiv, rpow). The scalar is a
 * launch argument: every value uses the same kernel.
 */
TRN_OPS_API trn_result_t trn_ops_binary_scalar(trn_queue_t queue, trn_ops_binary_op_t op,
                                               const trn_ops_tensor_t *out,
                                               const trn_ops_tensor_t *a, double scalar,
                                               int scalar_first, const trn_sync_t *sync);
/** out = cond != 0 ? a : b, the three broadcast. */
TRN_OPS_API trn_result_t trn_ops_where(trn_queue_t queue, const trn_ops_tensor_t *out,
                                       const trn_ops_tensor_t *cond, const trn_ops_tensor_t *a,
                                       const trn_ops_tensor_t *b, const trn_sync_t *sync);
/**
 * out = x converted to out's dtype and layout (x broadcasts): cast, contiguous(), expand, and
 * copies into a strided out (a slice of a larger tensor), on the DMA engines where both views
 * fit a DMA pattern.
 */
TRN_OPS_API trn_result_t trn_ops_copy(trn_queue_t queue, const trn_ops_tensor_t *out,
                                      const trn_ops_tensor_t *x, const trn_sync_t *sync);
/** Every element of out = value (converted to out's dtype). */
TRN_OPS_API trn_result_t trn_ops_fill(trn_queue_t queue, const trn_ops_tensor_t *out, double value,
                                      const trn_sync_t *sync);
/** out[i] = start + i * step, out of rank 1. */
TRN_OPS_API trn_result_t trn_ops_arange(trn_queue_t queue, const trn_ops_tensor_t *out,
                                        double start, double step, const trn_sync_t *sync);

/* ---------------------------------------------------------------------------------------------
 * Matrix products: f32, bf16 and f16 inputs (fp32 accumulation), any float output.
 * ------------------------------------------------------------------------------------------ */

#define TRN_OPS_TRANSPOSE_A 1u /**< a is stored [K, M] (per batch) */
#define TRN_OPS_TRANSPOSE_B 2u /**< b is stored [N, K] (per batch) */

/**
 * out = op(a) @ op(b): a [M,K], b [K,N] -> out [M,N]; or batched (bmm): a [B,M,K], b [B,K,N] ->
 * out [B,M,N]; a [B,M,K] with b [K,N] shares b across the batch.
 */
TRN_OPS_API trn_result_t trn_ops_matmul(trn_queue_t queue, const trn_ops_tensor_t *out,
                                        const trn_ops_tensor_t *a, const trn_ops_tensor_t *b,
                                        uint32_t flags, const trn_sync_t *sync);
/** out = beta * bias + alpha * (op(a) @ op(b)), 2-D; bias broadcasts to [M, N]. */
TRN_OPS_API trn_result_t trn_ops_addmm(trn_queue_t queue, const trn_ops_tensor_t *out,
                                       const trn_ops_tensor_t *bias, const trn_ops_tensor_t *a,
                                       const trn_ops_tensor_t *b, double beta, double alpha,
                                       uint32_t flags, const trn_sync_t *sync);

/* ---------------------------------------------------------------------------------------------
 * Reductions
 * ------------------------------------------------------------------------------------------ */

/* The op of trn_ops_reduce: trn.h's trn_reduce_op_t. Since 0.5 the TRN_OPS_* names below are
 * its values: SUM 0, AVG (MEAN) 4, MAX 2, MIN 3, ARGMAX 5, ARGMIN 6, where 0.4's own enum
 * numbered them 1 to 6. They are the same in source, but a binary built against an earlier
 * trn_ops.h passes the old numbers: rebuild it. */
typedef trn_reduce_op_t trn_ops_reduce_op_t;
#define TRN_OPS_SUM TRN_REDUCE_SUM
#define TRN_OPS_MEAN TRN_REDUCE_AVG
#define TRN_OPS_MAX TRN_REDUCE_MAX
#define TRN_OPS_MIN TRN_REDUCE_MIN
#define TRN_OPS_ARGMAX TRN_REDUCE_ARGMAX
#define TRN_OPS_ARGMIN TRN_REDUCE_ARGMIN
#define TRN_OPS_REDUCE_FORCE_INT32 TRN_REDUCE_OP_FORCE_INT32

/** trn_reduce_op_name(op): "sum", "avg" (the mean), "max", ...; "unknown" otherwise. */
TRN_OPS_API const char *trn_ops_reduce_op_name(trn_ops_reduce_op_t op);

/**
 * out = op over `dims` of x (dim_count 0: every dim, to a scalar; negative dims count from the
 * end). out keeps reduced dims as size 1 when `keepdim`, else drops them. `op`: TRN_REDUCE_SUM,
 * _AVG (the mean), _MAX, _MIN, _ARGMAX and _ARGMIN (the index of the first maximum or minimum,
 * over one dim or all, flattened, into an integer out); TRN_REDUCE_PROD and values outside the
 * enum are TRN_ERROR_INVALID_ENUM. Messages and fallback records name the ops as PyTorch does
 * ("sum", "mean", "max", "min", "argmax", "argmin").
 */
TRN_OPS_API trn_result_t trn_ops_reduce(trn_queue_t queue, trn_ops_reduce_op_t op,
                                        const trn_ops_tensor_t *out, const trn_ops_tensor_t *x,
                                        const int64_t *dims, uint32_t dim_count, int keepdim,
                                        const trn_sync_t *sync);

/* ---------------------------------------------------------------------------------------------
 * Neural-network ops and their backward ops (PyTorch's semantics)
 * ------------------------------------------------------------------------------------------ */

/** softmax (or log_softmax when `log`) of x along `dim`. */
TRN_OPS_API trn_result_t trn_ops_softmax(trn_queue_t queue, const trn_ops_tensor_t *out,
                                         const trn_ops_tensor_t *x, int64_t dim, int log,
                                         const trn_sync_t *sync);
/** grad_x from grad_out and the forward's `out`. */
TRN_OPS_API trn_result_t trn_ops_softmax_backward(trn_queue_t queue, const trn_ops_tensor_t *grad_x,
                                                  const trn_ops_tensor_t *grad_out,
                                                  const trn_ops_tensor_t *out, int64_t dim, int log,
                                                  const trn_sync_t *sync);
/**
 * Layer norm over the last `normalized_ndim` dims. weight, bias, mean and rstd may be NULL; mean
 * and rstd (the statistics backward takes) have x's shape with the normalized dims of size 1.
 */
TRN_OPS_API trn_result_t trn_ops_layer_norm(trn_queue_t queue, const trn_ops_tensor_t *out,
                                            const trn_ops_tensor_t *mean,
                                            const trn_ops_tensor_t *rstd, const trn_ops_tensor_t *x,
                                            const trn_ops_tensor_t *weight,
                                            const trn_ops_tensor_t *bias, uint32_t normalized_ndim,
                                            double eps, const trn_sync_t *sync);
/** Any of grad_x, grad_weight, grad_bias may be NULL (not computed). */
TRN_OPS_API trn_result_t trn_ops_layer_norm_backward(
    trn_queue_t queue, const trn_ops_tensor_t *grad_x, const trn_ops_tensor_t *grad_weight,
    const trn_ops_tensor_t *grad_bias, const trn_ops_tensor_t *grad_out, const trn_ops_tensor_t *x,
    const trn_ops_tensor_t *mean, const trn_ops_tensor_t *rstd, const trn_ops_tensor_t *weight,
    uint32_t normalized_ndim, const trn_sync_t *sync);
/** RMS norm (torch.nn.functional.rms_norm); rstd may be NULL. */
TRN_OPS_API trn_result_t trn_ops_rms_norm(trn_queue_t queue, const trn_ops_tensor_t *out,
                                          const trn_ops_tensor_t *rstd, const trn_ops_tensor_t *x,
                                          const trn_ops_tensor_t *weight, uint32_t normalized_ndim,
                                          double eps, const trn_sync_t *sync);
TRN_OPS_API trn_result_t trn_ops_rms_norm_backward(
    trn_queue_t queue, const trn_ops_tensor_t *grad_x, const trn_ops_tensor_t *grad_weight,
    const trn_ops_tensor_t *grad_out, const trn_ops_tensor_t *x, const trn_ops_tensor_t *rstd,
    const trn_ops_tensor_t *weight, uint32_t normalized_ndim, const trn_sync_t *sync);

typedef enum trn_ops_reduction {
  TRN_OPS_REDUCTION_NONE = 0,
  TRN_OPS_REDUCTION_MEAN = 1,
  TRN_OPS_REDUCTION_SUM = 2,
  TRN_OPS_REDUCTION_FORCE_INT32 = 0x7fffffff
} trn_ops_reduction_t;

/**
 * Negative log likelihood: log_probs [N, C] (or [C]), target [N] (or a scalar) of class indices
 * (any integer dtype), weight [C] or NULL. total_weight (a scalar, may be NULL) is what backward
 * takes for a weighted mean.
 */
TRN_OPS_API trn_result_t trn_ops_nll_loss(trn_queue_t queue, const trn_ops_tensor_t *out,
                                          const trn_ops_tensor_t *total_weight,
                                          const trn_ops_tensor_t *log_probs,
                                          const trn_ops_tensor_t *target,
                                          const trn_ops_tensor_t *weight,
                                          trn_ops_reduction_t reduction, int64_t ignore_index,
                                          const trn_sync_t *sync);
TRN_OPS_API trn_result_t trn_ops_nll_loss_backward(
    trn_queue_t queue, const trn_ops_tensor_t *grad_log_probs, const trn_ops_tensor_t *grad_out,
    const trn_ops_tensor_t *log_probs, const trn_ops_tensor_t *target,
    const trn_ops_tensor_t *weight, trn_ops_reduction_t reduction, int64_t ignore_index,
    const trn_ops_tensor_t *total_weight, const trn_sync_t *sync);

/** out = weight[indices]: weight [V, D], indices of any shape -> indices' shape + [D]. */
TRN_OPS_API trn_result_t trn_ops_embedding(trn_queue_t queue, const trn_ops_tensor_t *out,
                                           const trn_ops_tensor_t *weight,
                                           const trn_ops_tensor_t *indices, const trn_sync_t *sync);
/** grad_weight [V, D] = the rows of grad_out summed by index; padding_idx < 0: none. */
TRN_OPS_API trn_result_t trn_ops_embedding_backward(trn_queue_t queue,
                                                    const trn_ops_tensor_t *grad_weight,
                                                    const trn_ops_tensor_t *grad_out,
                                                    const trn_ops_tensor_t *indices,
                                                    int64_t padding_idx, const trn_sync_t *sync);

typedef struct trn_ops_conv2d_params {
  int64_t stride[2]; /**< 0 means 1 */
  int64_t padding[2];
  int64_t dilation[2]; /**< 0 means 1 */
  int64_t groups;      /**< 0 means 1 */
} trn_ops_conv2d_params_t;

/** x [N, C, H, W], weight [O, C / groups, kh, kw], bias [O] or NULL -> out [N, O, Ho, Wo]. */
TRN_OPS_API trn_result_t trn_ops_conv2d(trn_queue_t queue, const trn_ops_tensor_t *out,
                                        const trn_ops_tensor_t *x, const trn_ops_tensor_t *weight,
                                        const trn_ops_tensor_t *bias,
                                        const trn_ops_conv2d_params_t *params,
                                        const trn_sync_t *sync);
/** Any of grad_x, grad_weight, grad_bias may be NULL. */
TRN_OPS_API trn_result_t trn_ops_conv2d_backward(
    trn_queue_t queue, const trn_ops_tensor_t *grad_x, const trn_ops_tensor_t *grad_weight,
    const trn_ops_tensor_t *grad_bias, const trn_ops_tensor_t *grad_out, const trn_ops_tensor_t *x,
    const trn_ops_tensor_t *weight, const trn_ops_conv2d_params_t *params, const trn_sync_t *sync);

typedef struct trn_ops_pool2d_params {
  int64_t kernel[2];
  int64_t stride[2]; /**< 0 means the kernel size */
  int64_t padding[2];
  int64_t dilation[2]; /**< 0 means 1 */
  int32_t ceil_mode;
  int32_t reserved;
} trn_ops_pool2d_params_t;

/**
 * x [N, C, H, W] or [C, H, W]. indices (may be NULL; any integer dtype) receives each maximum's
 * flat index in its input plane, as torch's max_pool2d_with_indices.
 */
TRN_OPS_API trn_result_t trn_ops_max_pool2d(trn_queue_t queue, const trn_ops_tensor_t *out,
                                            const trn_ops_tensor_t *indices,
                                            const trn_ops_tensor_t *x,
                                            const trn_ops_pool2d_params_t *params,
                                            const trn_sync_t *sync);
TRN_OPS_API trn_result_t trn_ops_max_pool2d_backward(trn_queue_t queue,
                                                     const trn_ops_tensor_t *grad_x,
                                                     const trn_ops_tensor_t *grad_out,
                                                     const trn_ops_tensor_t *indices,
                                                     const trn_sync_t *sync);

/* ---------------------------------------------------------------------------------------------
 * Optimizer steps, fused per parameter, in place (torch.optim's update rules)
 * ------------------------------------------------------------------------------------------ */

typedef struct trn_ops_sgd_params {
  double lr;
  double momentum;
  double dampening;
  double weight_decay;
  int32_t nesterov;
  int32_t maximize;
} trn_ops_sgd_params_t;

/**
 * param -= lr * update. momentum_buf (param's shape) is needed when momentum != 0; on the
 * `first_step` it is set to the gradient, as torch.optim.SGD does.
 */
TRN_OPS_API trn_result_t trn_ops_sgd_step(trn_queue_t queue, const trn_ops_tensor_t *param,
                                          const trn_ops_tensor_t *grad,
                                          const trn_ops_tensor_t *momentum_buf, int first_step,
                                          const trn_ops_sgd_params_t *params,
                                          const trn_sync_t *sync);

typedef struct trn_ops_adam_params {
  double lr;
  double beta1;
  double beta2;
  double eps;
  double weight_decay;
  int32_t decoupled_weight_decay; /**< 1: AdamW */
  int32_t amsgrad;                /**< needs max_exp_avg_sq */
  int32_t maximize;
  int32_t reserved;
} trn_ops_adam_params_t;

/** One Adam (or AdamW) step; `step` counts from 1 (this step included). */
TRN_OPS_API trn_result_t trn_ops_adam_step(trn_queue_t queue, const trn_ops_tensor_t *param,
                                           const trn_ops_tensor_t *grad,
                                           const trn_ops_tensor_t *exp_avg,
                                           const trn_ops_tensor_t *exp_avg_sq,
                                           const trn_ops_tensor_t *max_exp_avg_sq, int64_t step,
                                           const trn_ops_adam_params_t *params,
                                           const trn_sync_t *sync);

/* ---------------------------------------------------------------------------------------------
 * Configuration, the kernel cache and the fallback record
 * ------------------------------------------------------------------------------------------ */

#define TRN_OPS_CONFIG_NO_DISK_CACHE 1u   /**< build on first use, keep in memory only */
#define TRN_OPS_CONFIG_NO_MEMORY_CACHE 2u /**< keep no kernel: every op builds (or reads disk) */
#define TRN_OPS_CONFIG_HOST_ONLY 4u       /**< run every op on the host (a reference mode) */

typedef struct trn_ops_config {
  trn_struct_header_t header;
  const char *cache_dir;       /**< NULL: TRN_CACHE_DIR, else $XDG_CACHE_HOME/trn, ~/.cache/trn */
  uint64_t memory_cache_bytes; /**< 0: TRN_OPS_CACHE_BYTES, else 256 MiB */
  uint32_t flags;
  uint32_t reserved;
} trn_ops_config_t;

TRN_DEFINE_STRUCT_MAKE(trn_ops_config_t, TRN_STRUCT_OPS_CONFIG)
#define TRN_OPS_CONFIG_INIT trn_ops_config_t_make()

/**
 * Sets the configuration for ops issued from now on (NULL: the environment's, as at start:
 * TRN_CACHE_DIR; TRN_OPS_CACHE = on, memory or off; TRN_OPS_CACHE_BYTES; TRN_OPS_HOST_ONLY=1).
 * Kernels cached in memory beyond the new bound are let go.
 */
TRN_OPS_API trn_result_t trn_ops_configure(const trn_ops_config_t *config);

typedef struct trn_ops_cache_stats {
  trn_struct_header_t header;
  uint64_t memory_hits;     /**< ops whose kernel was loaded already */
  uint64_t disk_hits;       /**< kernels read from the disk cache */
  uint64_t builds;          /**< kernels built */
  uint64_t corrupt_entries; /**< disk entries found damaged (and rebuilt) */
  uint64_t disk_writes;     /**< kernels written to the disk cache */
  uint64_t evictions;       /**< kernels let go to stay within the memory bound */
  uint64_t memory_entries;  /**< kernels cached in memory now */
  uint64_t memory_bytes;    /**< their binaries' bytes */
  uint64_t build_ns;        /**< host time spent building, in total */
  uint64_t disk_load_ns;    /**< host time spent reading and loading disk entries */
} trn_ops_cache_stats_t;

TRN_DEFINE_STRUCT_MAKE(trn_ops_cache_stats_t, TRN_STRUCT_OPS_CACHE_STATS)
#define TRN_OPS_CACHE_STATS_INIT trn_ops_cache_stats_t_make()

/** Counters since the process started (or the last trn_ops_cache_clear). */
TRN_OPS_API trn_result_t trn_ops_get_cache_stats(trn_ops_cache_stats_t *stats);
/** Lets go of every kernel cached in memory and zeroes the counters; the disk cache stays. */
TRN_OPS_API trn_result_t trn_ops_cache_clear(void);

#define TRN_OPS_TEXT_MAX 256

/** An op that ran on the host instead of the device, by signature. */
typedef struct trn_ops_fallback {
  trn_struct_header_t header;
  char op[TRN_NAME_MAX];            /**< "conv2d", "add", ... */
  char signature[TRN_OPS_TEXT_MAX]; /**< dtypes and shapes, "f64[4,8] f64[4,8] -> f64[4,8]" */
  char reason[TRN_OPS_TEXT_MAX];    /**< why it could not run on the device */
  uint64_t count;                   /**< times it ran on the host */
} trn_ops_fallback_t;

TRN_DEFINE_STRUCT_MAKE(trn_ops_fallback_t, TRN_STRUCT_OPS_FALLBACK)
#define TRN_OPS_FALLBACK_INIT trn_ops_fallback_t_make()

/**
 * Two-call enumeration of the fallbacks so far, in the order first seen: with `fallbacks` NULL,
 * `*count` is set to the number there are; otherwise `*count` in is the room in `fallbacks`
 * (each TRN_OPS_FALLBACK_INIT) and out the number written, the first ones, as trn.h's
 * enumerations do.
 */
TRN_OPS_API trn_result_t trn_ops_get_fallbacks(uint32_t *count, trn_ops_fallback_t *fallbacks);
/** Forgets the fallbacks so far (the once-per-op warnings are given again). */
TRN_OPS_API trn_result_t trn_ops_reset_fallbacks(void);

#ifdef __cplusplus
}
#endif

#endif /* TRN_TRN_OPS_H */
