// The shapes of a matrix product and its device path (the op library's matmul kernel).
#pragma once

#include <optional>
#include <string>

#include "ops/tensor.hpp"

namespace trn::ops {

struct MatmulShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false, b_batched = false;
  Shape out;
};

// a and b's product shape under `flags`, or an error naming both.
MatmulShape matmul_shape(const Tensor &a, const Tensor &b, uint32_t flags, const char *op);

// Queues out = alpha * op(a) @ op(b) (+ beta * bias when bias is present) on the device, or says
// why it cannot.
std::optional<std::string> matmul_on_device(trn_queue_t queue, const trn_sync_t *sync,
                                            const MatmulShape &s, const Tensor &out,
                                            const Tensor &a, const Tensor &b, const Tensor &bias,
                                            double alpha, double beta);

}  // namespace trn::ops
