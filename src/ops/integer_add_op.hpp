// int32 and int64 add and sub on the device, exact at any magnitude (kernels/integer_add.hpp):
// what trn_ops_binary and trn_ops_binary_scalar take for integer tensors of one shape, before the
// host's int64 path. BatchNorm's num_batches_tracked += 1 and index arithmetic stay on the device.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ops/tensor.hpp"
#include "trn/trn_ops.h"

namespace trn::ops {

// out = a + b (or a - b), or out = a + scalar when b is null (a - s is a + (-s)). nullopt when it
// was queued; otherwise why the device does not take it (the caller's path runs the op).
std::optional<std::string> integer_add_on_device(trn_queue_t queue, const trn_sync_t *sync,
                                                 const Tensor &out, const Tensor &a,
                                                 const Tensor *b, int64_t scalar, bool subtract);

}  // namespace trn::ops
