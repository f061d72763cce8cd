#include "op_support.hpp"

#include <ATen/native/Resize.h>

namespace torch_trn {

void resize_out(const at::Tensor &out, at::IntArrayRef sizes) {
  at::native::resize_output(out, sizes);
}

double scalar_of(const at::Scalar &s) {
  if (s.isBoolean()) return s.toBool() ? 1.0 : 0.0;
  TORCH_CHECK(!s.isComplex(), "trn ops take no complex scalars");
  return s.toDouble();
}

double cpu_scalar_of(const at::Tensor &t) {
  TORCH_CHECK(is_cpu_scalar(t), "a CPU tensor of ", t.numel(),
              " elements passed to a trn op: move it to the device first");
  return scalar_of(t.item());
}

at::Tensor empty_on(const at::Tensor &like, at::IntArrayRef sizes, c10::ScalarType type) {
  return at::empty(sizes, like.options().dtype(type));
}

}  // namespace torch_trn
