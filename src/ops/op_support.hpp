// What every op's entry point shares: the wrapper that checks the queue, turns failures into
// results and retries once on handles from before a runtime restart; the signature text that
// names an op's dtypes and shapes (cache keys, fallback records); and the decision to run on the
// host, which either says why or lets the device path go ahead.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ops/config.hpp"
#include "ops/error.hpp"
#include "ops/tensor.hpp"

namespace trn::ops {

template <typename Body>
trn_result_t run_op(const char *function, trn_queue_t queue, Body &&body) noexcept {
  return api_call(function, [&] {
    if (!queue) fail(TRN_ERROR_INVALID_HANDLE, "queue is NULL; pass a compute queue");
    try {
      body();
    } catch (const StaleHandle &) {
      body();  // looked up again; a second stale handle is a real error
    }
  });
}

// "f32[4, 8] bf16[8] -> f32[4, 8]": inputs, then outputs (absent ones left out).
std::string signature_of(const std::vector<const Tensor *> &inputs,
                         const std::vector<const Tensor *> &outputs);

// Why `tensors` cannot go to the device's kernels, if they cannot: host-only dtypes, the
// configuration, layouts other than contiguous (broadcast dims allowed when `broadcast_ok`).
std::optional<std::string> host_reason(const std::vector<const Tensor *> &tensors,
                                       bool broadcast_ok = true);

// An op with no elements: nothing to compute, but its sync still waits and signals.
void queue_empty_op(trn_queue_t queue, const trn_sync_t *sync);

}  // namespace trn::ops
