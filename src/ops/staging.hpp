// Making strided inputs contiguous on the device before an op reads them: a view the kernels do
// not read (a transpose, a slice with gaps) is copied by the DMA engines (the strided copy) into
// scratch memory, which is freed in queue order after the op (trn_queue_free). The copies take
// the op's waits; the op's own commands then take only its signals (`op_sync`), so the op as a
// whole still waits before its first command and signals after its last.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ops/submit.hpp"
#include "ops/tensor.hpp"

namespace trn::ops {

class Staging {
 public:
  Staging(trn_queue_t queue, const trn_sync_t *sync) : queue_(queue), sync_(sync) {
    check_sync(sync);
  }
  ~Staging();  // queues the frees of the scratch memory
  Staging(const Staging &) = delete;
  Staging &operator=(const Staging &) = delete;

  // `t` itself when the kernels read it as it is (contiguous, or broadcast dims only), or when it
  // cannot be copied on the device (a host dtype, more dims than a DMA pattern has); else a
  // contiguous copy of it, queued now.
  Tensor contiguous(const Tensor &t);
  // `t` broadcast to `shape` as a contiguous copy of its own (for broadcasts the kernels' plans
  // do not express, such as one in a middle dim), or `t` itself when the device cannot copy it.
  Tensor expanded(const Tensor &t, const Shape &shape);
  // The sync for the op's own commands.
  const trn_sync_t *op_sync() const { return staged_ ? &signals_only_ : sync_; }

 private:
  Tensor copy_to_scratch(const Tensor &t, const Shape &shape);

  trn_queue_t queue_;
  const trn_sync_t *sync_;
  trn_sync_t signals_only_{};
  bool staged_ = false;
  std::vector<trn_mem_t> scratch_;
};

// Copies `x` (any view, broadcast to out's shape) into `out` (contiguous) on the DMA engines;
// nullopt when queued, else why it cannot be.
std::optional<std::string> strided_copy_on_device(trn_queue_t queue, const trn_sync_t *sync,
                                                  const Tensor &out, const Tensor &x);

}  // namespace trn::ops
