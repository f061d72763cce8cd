// at::Tensor ↔ libtrn_ops: a trn tensor's view (allocation, byte offset, dtype, sizes, strides)
// found from its data pointer with trn_mem_lookup, and the queue an op on it runs on.
#pragma once

#include <ATen/Tensor.h>

#include <optional>
#include <vector>

#include "trn/trn_ops.h"

namespace torch_trn {

// trn's dtype for a torch dtype; nullopt for those trn has none for (complex, ...).
std::optional<trn_dtype_t> to_trn_dtype(c10::ScalarType type);
bool is_trn_dtype(c10::ScalarType type);

// The view of a trn tensor (raises for a CPU tensor, an unsupported dtype or a rank over 8).
// A 0-dim tensor is rank 0; an empty tensor's allocation may be null.
trn_ops_tensor_t view_of(const at::Tensor &t);

// A trn tensor's dtype, allocation and byte offset, its dims left out (rank 0): for byte copies
// of contiguous tensors of any rank.
trn_ops_tensor_t location_of(const at::Tensor &t);

// Views of tensors of one shape (inputs expanded to an output's) as an elementwise op or a copy
// sees them: the dims every one of them can merge merged, dims of size 1 dropped. For tensors of
// more than 8 dims; raises when they do not merge to 8.
std::vector<trn_ops_tensor_t> merged_views(const std::vector<at::Tensor> &tensors);

// The view of a tensor that may be undefined (an optional bias, a gradient not asked for), for
// the libtrn_ops arguments that take NULL.
class OptionalView {
 public:
  explicit OptionalView(const at::Tensor &t) : present_(t.defined()) {
    if (present_) view_ = view_of(t);
  }
  const trn_ops_tensor_t *get() const { return present_ ? &view_ : nullptr; }

 private:
  bool present_;
  trn_ops_tensor_t view_{};
};

// The current stream's queue of the tensor's device.
trn_queue_t queue_of(const at::Tensor &t);

// A CPU 0-dim tensor (a wrapped Python number, what `x * 2.0` passes) or any 1-element tensor
// read as a double.
bool is_cpu_scalar(const at::Tensor &t);

}  // namespace torch_trn
