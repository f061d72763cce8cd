// Advanced indexing (x[idx], x[mask], x[i, j]) on the CPU. The generic fallback moves `self` to
// the host but not the optional index tensors, which PyTorch then refuses as being on another
// device: they move here too, and the result comes back to self's device.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "fallback.hpp"
#include "op_support.hpp"

namespace torch_trn {
namespace {

at::Tensor index(const at::Tensor &self, const c10::List<c10::optional<at::Tensor>> &indices) {
  record_cpu_run("aten::index.Tensor");
  c10::List<c10::optional<at::Tensor>> on_cpu;
  for (size_t k = 0; k < indices.size(); ++k) {
    const c10::optional<at::Tensor> i = indices.get(k);
    if (i) check_same_device("index", {self, *i});
    on_cpu.push_back(i && i->defined() ? c10::optional<at::Tensor>(i->cpu()) : c10::nullopt);
  }
  return at::index(self.cpu(), on_cpu).to(self.device());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index.Tensor", TORCH_FN(index));
}

}  // namespace torch_trn
