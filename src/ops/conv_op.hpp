// conv2d's device path: the op library's conv2d kernels (src/ops/kernels/conv2d.hpp) for
// contiguous tensors of the dtypes they take.
#pragma once

#include <optional>
#include <string>

#include "ops/host/reference.hpp"
#include "ops/tensor.hpp"

namespace trn::ops {

// Queues out = conv2d(x, w) (+ bias when present) on the device, or says why it cannot.
std::optional<std::string> conv2d_on_device(trn_queue_t queue, const trn_sync_t *sync,
                                            const host::Conv2dParams &p, const Tensor &out,
                                            const Tensor &x, const Tensor &w, const Tensor &bias);

// Queues the wanted (present) gradients of conv2d on the device, or says why it cannot.
std::optional<std::string> conv2d_backward_on_device(trn_queue_t queue, const trn_sync_t *sync,
                                                     const host::Conv2dParams &p,
                                                     const Tensor &grad_x, const Tensor &grad_w,
                                                     const Tensor &grad_bias,
                                                     const Tensor &grad_out, const Tensor &x,
                                                     const Tensor &w);

}  // namespace trn::ops
