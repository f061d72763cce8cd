// Queues: creation on claimed cores, submission, status, reset, destruction.
#include <algorithm>
#include <memory>

#include "sim/generation.hpp"
#include "sim/ops_support.hpp"
#include "sim/ops_table.hpp"
#include "sim/sim_queue.hpp"

namespace trn::sim {

namespace {

constexpr uint32_t kMaxCapacity = 1u << 20;

trn_result_t sim_queue_create(trn_hal_instance_t *instance, uint32_t device, uint32_t first,
                              uint32_t count, trn_hal_queue_kind_t kind, uint32_t capacity,
                              uint32_t dma_engines, trn_hal_queue_t **queue, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceRuntime &runtime, std::string *why) {
    if (queue == nullptr) {
      *why = "queue_create needs somewhere to put the queue (NULL)";
      return TRN_ERROR_NULL_POINTER;
    }
    const uint32_t cores = runtime.state().header().physical_cores;
    if (count == 0 || first >= cores || count > cores - first) {
      *why = "physical cores " + std::to_string(first) + "+" + std::to_string(count) +
             " are outside device " + std::to_string(device) + " (it has " + std::to_string(cores) +
             ")";
      return TRN_ERROR_OUT_OF_RANGE;
    }
    if (kind != TRN_HAL_QUEUE_COMPUTE && kind != TRN_HAL_QUEUE_COPY) {
      *why = "unknown queue kind " + std::to_string(static_cast<int>(kind)) +
             ": use TRN_HAL_QUEUE_COMPUTE or TRN_HAL_QUEUE_COPY";
      return TRN_ERROR_INVALID_ARGUMENT;
    }
    if (capacity == 0 || capacity > kMaxCapacity) {
      *why = "a queue's capacity must be 1 to " + std::to_string(kMaxCapacity) + " buffers, not " +
             std::to_string(capacity);
      return TRN_ERROR_INVALID_ARGUMENT;
    }
    if (kind == TRN_HAL_QUEUE_COMPUTE && !runtime.state().holds_cores(first, count)) {
      *why = "this process has not claimed physical cores " + std::to_string(first) + "+" +
             std::to_string(count) + " of device " + std::to_string(device) +
             ": claim them (core_claim) before creating a compute queue on them";
      return TRN_ERROR_INVALID_ARGUMENT;
    }
    const GenerationSpec &spec = generation_spec(runtime.generation());
    const uint32_t engines = spec.core().dma_queues * count;
    if (dma_engines > engines) {
      *why = "the logical core has " + std::to_string(engines) + " DMA engines, not " +
             std::to_string(dma_engines) + " (0 uses them all)";
      return TRN_ERROR_OUT_OF_RANGE;
    }
    QueueShape shape;
    shape.first_core = first;
    shape.core_count = count;
    shape.kind = kind;
    shape.capacity = capacity;
    shape.dma_engines = dma_engines == 0 ? engines : dma_engines;
    shape.dma_engine_bytes_per_s = spec.core().dma_engine_bytes_per_s;
    shape.link_bytes_per_s = spec.neuronlink_bytes_per_s / std::max(1u, spec.neuronlink_links);
    shape.dma_reduce_rate_percent = spec.dma_reduce_rate_percent;
    auto made = std::make_unique<trn_hal_queue>(*instance, runtime, shape);
    std::lock_guard lock(instance->queues_mu);
    instance->queues.insert(made.get());
    *queue = made.release();
    return TRN_SUCCESS;
  });
}

void sim_queue_destroy(trn_hal_instance_t *instance, trn_hal_queue_t *queue) {
  destroy_queue(instance, queue);
}

trn_result_t sim_queue_submit(trn_hal_queue_t *queue, const trn_hal_submission_t *submission,
                              trn_hal_error_t *err) {
  return guarded(err, [&] {
    if (!queue || !submission)
      return fail(err, TRN_ERROR_NULL_POINTER, "queue_submit needs a queue and a submission");
    std::string why;
    trn_result_t r = queue->submit(*submission, &why);
    return r == TRN_SUCCESS ? r : fail(err, r, why);
  });
}

void sim_queue_status(trn_hal_queue_t *queue, trn_hal_queue_status_t *status) {
  if (queue && status) queue->status(status);
}

trn_result_t sim_queue_reset(trn_hal_queue_t *queue, trn_hal_error_t *err) {
  return guarded(err, [&] {
    if (!queue) return fail(err, TRN_ERROR_NULL_POINTER, "queue_reset needs a queue");
    std::string why;
    trn_result_t r = queue->reset(&why);
    return r == TRN_SUCCESS ? r : fail(err, r, why);
  });
}

trn_result_t sim_queue_set_priority(trn_hal_queue_t *queue, uint32_t priority,
                                    trn_hal_error_t *err) {
  return guarded(err, [&] {
    if (!queue) return fail(err, TRN_ERROR_NULL_POINTER, "queue_set_priority needs a queue");
    std::string why;
    trn_result_t r = queue->set_priority(priority, &why);
    return r == TRN_SUCCESS ? r : fail(err, r, why);
  });
}

}  // namespace

void destroy_queue(trn_hal_instance_t *instance, trn_hal_queue_t *queue) {
  if (!queue) return;
  if (instance) {
    std::lock_guard lock(instance->queues_mu);
    instance->queues.erase(queue);
  }
  delete queue;  // stops it: the running buffer completes, the rest are cancelled
}

void fill_queue_ops(trn_hal_ops_t *ops) {
  ops->queue_create = sim_queue_create;
  ops->queue_destroy = sim_queue_destroy;
  ops->queue_submit = sim_queue_submit;
  ops->queue_status = sim_queue_status;
  ops->queue_reset = sim_queue_reset;
  ops->queue_set_priority = sim_queue_set_priority;
}

}  // namespace trn::sim
