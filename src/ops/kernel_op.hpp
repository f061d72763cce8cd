// Queueing launches of kernels that are not expressions (the builder's softmax, norms,
// reductions, the matmul): each launch names its kernel by signature and how to build it.
#pragma once

#include <string>
#include <vector>

#include "ops/kernel_cache.hpp"
#include "ops/submit.hpp"
#include "ops/tensor.hpp"

namespace trn::ops {

struct KernelLaunch {
  std::string signature;
  BuildFn build;
  std::vector<trn_kernel_binding_t> args;
};

// Adds `launches` to `commands`, in order, for the device of `device_index`.
void add_kernels(Commands &commands, uint32_t device_index,
                 const std::vector<KernelLaunch> &launches);
// Queues `launches` in order under one sync, on the device of `device_index`.
void launch_kernels(trn_queue_t queue, const trn_sync_t *sync, uint32_t device_index,
                    const std::vector<KernelLaunch> &launches);

inline trn_kernel_binding_t bind(const Tensor &t, uint64_t element = 0) {
  return tensor_binding(t.mem, t.offset + element * t.element_size());
}

}  // namespace trn::ops
