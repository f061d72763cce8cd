#include "ops/op_support.hpp"

#include <fmt/format.h>

#include "ops/submit.hpp"

namespace trn::ops {

std::string signature_of(const std::vector<const Tensor *> &inputs,
                         const std::vector<const Tensor *> &outputs) {
  std::string s;
  auto add = [&](const Tensor *t) {
    if (!t || !t->present()) return;
    if (!s.empty() && s.back() != ' ') s += ' ';
    s += t->describe();
  };
  for (const Tensor *t : inputs) add(t);
  s += s.empty() ? "->" : " ->";  // "-> f32[3]" for an op without inputs (fill, arange)
  for (const Tensor *t : outputs) add(t);
  return s;
}

std::optional<std::string> host_reason(const std::vector<const Tensor *> &tensors,
                                       bool broadcast_ok) {
  if (config().host_only) return "TRN_OPS_HOST_ONLY is set";
  for (const Tensor *t : tensors) {
    if (!t || !t->present()) continue;
    if (!dtype_on_device(t->dtype))
      return fmt::format("{} has no device dtype (the device has no {} arithmetic)", t->describe(),
                         dtype_name(t->dtype));
    if (!(broadcast_ok ? t->contiguous_but_broadcast() : t->contiguous()))
      return fmt::format(
          "{} is a strided view the device kernels do not read (trn_ops_copy makes "
          "it contiguous on the device)",
          t->describe());
  }
  return std::nullopt;
}

void queue_empty_op(trn_queue_t queue, const trn_sync_t *sync) {
  Commands commands(queue, sync);
  commands.barrier();
  commands.submit();
}

}  // namespace trn::ops
