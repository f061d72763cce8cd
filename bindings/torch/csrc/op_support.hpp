// What the compute kernels share: the device and queue an op runs on, trn views of its tensors,
// outputs resized as PyTorch's .out convention wants, scalars.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include <array>
#include <initializer_list>
#include <vector>

#include "check.hpp"
#include "devices.hpp"
#include "profiler.hpp"
#include "tensor_view.hpp"
#include "trn/trn_ops.h"

namespace torch_trn {

// An op's device (that of its first trn tensor) made current while it runs, and its queue.
class OpScope {
 public:
  explicit OpScope(const at::Tensor &on)
      : guard_(on.device()), queue_(queue_of(on)), profiled_(queue_, on.device().index()) {}
  trn_queue_t queue() const { return queue_; }

 private:
  c10::DeviceGuard guard_;
  trn_queue_t queue_;
  DeviceRange profiled_;  // the op's device time, while torch.profiler records (profiler.hpp)
};

// Resizes an .out argument to `sizes` (a no-op when it has them already), as at::native's
// resize_output does, warning about non-empty outputs of another size the same way.
void resize_out(const at::Tensor &out, at::IntArrayRef sizes);

// An .out argument the user gave (torch.add(a, b, out=o)), which no meta function has shaped:
// sized to the operands' broadcast shape, and, for `result_type` (the op's result dtype), refused
// as the CPU refuses it when its dtype cannot hold that type (a float result into an int64 out).
void prepare_out(const at::Tensor &out, const std::vector<at::Tensor> &operands,
                 c10::optional<at::ScalarType> result_type);

// Whether a scalar passes to libtrn_ops as a double unchanged: an integer beyond 2^53 would
// round (2^53 + 1 becomes 2^53), and goes as an int64 tensor instead.
bool exact_as_double(const at::Scalar &s);

// Every trn tensor among `tensors` (undefined and CPU ones aside) on one device, as CUDA requires:
// an op runs on one core's queue, and a tensor of another core or trn device would be read
// unordered with the work of its own. Raises PyTorch's message otherwise.
void check_same_device(const char *op, std::initializer_list<at::Tensor> tensors);

// A scalar argument as a double (booleans as 0 or 1).
double scalar_of(const at::Scalar &s);

// A CPU tensor of one element (a wrapped Python number: `x * 2.0`, optimizer constants) read
// as a double; raises for other CPU tensors, which the op cannot read on the device.
double cpu_scalar_of(const at::Tensor &t);

// An elementwise op's operands in the order of dims its output is contiguous in. Torch gives an
// op on `x.t()` an output strided like x, which the device kernels do not write; permuting every
// operand alike (each expanded to the output's sizes first) makes the output contiguous and
// leaves the op what it was. CPU scalars stay as they are; an output no permutation makes
// contiguous (overlapping, with gaps) is left too, for libtrn_ops to handle.
struct OutputOrder {
  at::Tensor out;
  std::vector<at::Tensor> inputs;
};
OutputOrder in_output_order(const at::Tensor &out, std::vector<at::Tensor> inputs);

// libtrn_ops calls on at::Tensors, so that compositions of ops read as the math they compute.
// The views of an elementwise op's output and inputs (trn tensors): as they are, or past 8 dims,
// the inputs expanded to the output's sizes and the dims they all can merge merged (raises when
// they do not merge to 8).
std::vector<trn_ops_tensor_t> elementwise_views(const at::Tensor &out,
                                                std::initializer_list<at::Tensor> inputs);

void t_copy(trn_queue_t q, const at::Tensor &out, const at::Tensor &x);
void t_unary(trn_queue_t q, trn_ops_unary_op_t op, const at::Tensor &out, const at::Tensor &x);
void t_binary(trn_queue_t q, trn_ops_binary_op_t op, const at::Tensor &out, const at::Tensor &a,
              const at::Tensor &b);
void t_binary_scalar(trn_queue_t q, trn_ops_binary_op_t op, const at::Tensor &out,
                     const at::Tensor &a, double s);
void t_where(trn_queue_t q, const at::Tensor &out, const at::Tensor &cond, const at::Tensor &a,
             const at::Tensor &b);
// Reduces every dim of x to the 0-dim `out`.
void t_reduce_all(trn_queue_t q, trn_ops_reduce_op_t op, const at::Tensor &out,
                  const at::Tensor &x);

// The kernels write contiguous outputs: an output that is a strided view gets the result
// through a contiguous temporary, copied into it by finish().
class OutTarget {
 public:
  OutTarget(const at::Tensor &out, trn_queue_t q)
      : out_(out),
        q_(q),
        target_(out.is_contiguous() ? out : at::empty(out.sizes(), out.options())) {}
  const at::Tensor &get() const { return target_; }
  void finish() const {
    if (!target_.is_same(out_)) t_copy(q_, out_, target_);
  }

 private:
  const at::Tensor &out_;
  trn_queue_t q_;
  at::Tensor target_;
};

// A pair parameter (kernel size, stride, ...) given as one value or two; `if_empty` for none.
std::array<int64_t, 2> pair_of(at::IntArrayRef v, const char *name, int64_t if_empty);

// The floating dtypes the engines compute in (float64 is not one of them).
inline bool is_float_type(c10::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf;
}

// A new trn tensor on `like`'s device.
at::Tensor empty_on(const at::Tensor &like, at::IntArrayRef sizes, c10::ScalarType type);

}  // namespace torch_trn
