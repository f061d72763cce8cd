// The table's adapters, by group: each fills its part of the table.
#pragma once

#include "drivers/hal.h"

namespace trn::sim {

void fill_device_ops(trn_hal_ops_t *ops);     // ops_device.cpp
void fill_memory_ops(trn_hal_ops_t *ops);     // ops_memory.cpp
void fill_semaphore_ops(trn_hal_ops_t *ops);  // ops_semaphores.cpp
void fill_kernel_ops(trn_hal_ops_t *ops);     // ops_kernels.cpp
void fill_queue_ops(trn_hal_ops_t *ops);      // ops_queues.cpp

// Destroys a queue (close destroys those still open).
void destroy_queue(trn_hal_instance_t *instance, trn_hal_queue_t *queue);

}  // namespace trn::sim
