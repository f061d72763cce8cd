#include "ops/integer_add_op.hpp"

#include <fmt/format.h>

#include "ops/config.hpp"
#include "ops/elementwise_plan.hpp"
#include "ops/error.hpp"
#include "ops/kernel_op.hpp"
#include "ops/kernels/integer_add.hpp"
#include "ops/submit.hpp"

namespace trn::ops {

std::optional<std::string> integer_add_on_device(trn_queue_t queue, const trn_sync_t *sync,
                                                 const Tensor &out, const Tensor &a,
                                                 const Tensor *b, int64_t scalar, bool subtract) {
  if (config().host_only) return "TRN_OPS_HOST_ONLY is set";
  if (out.dtype != TRN_DTYPE_I32 && out.dtype != TRN_DTYPE_I64)
    return "only int32 and int64 add exactly on the device";
  for (const Tensor *t : {&a, b}) {
    if (!t) continue;
    if (t->dtype != out.dtype) return fmt::format("{} is not {}", t->describe(), out.describe());
    if (t->shape != out.shape) return fmt::format("{} broadcasts", t->describe());
    if (!t->contiguous()) return fmt::format("{} is a strided view", t->describe());
  }
  if (!out.contiguous()) return fmt::format("the output {} is not contiguous", out.describe());
  const std::optional<ElementwisePlan> plan =
      plan_elementwise(out.shape, b ? std::vector<const Tensor *>{&a, b} : std::vector{&a});
  if (!plan) return fmt::format("{} does not split into [rows, cols] pieces", out.describe());
  kernels::IntegerAddConfig c;
  c.limbs = out.dtype == TRN_DTYPE_I64 ? 4 : 2;
  c.tensor_b = b != nullptr;
  c.subtract = b && subtract;
  // The scalar's limbs, unsigned, lowest first: its two's complement, negated for a - s (both
  // modulo 2^(16 limbs), as the result wraps).
  const uint64_t s =
      subtract && !b ? uint64_t{0} - static_cast<uint64_t>(scalar) : static_cast<uint64_t>(scalar);
  std::vector<KernelLaunch> launches;
  for (const Piece &piece : plan->pieces) {
    c.rows = piece.rows;
    c.cols = piece.cols;
    std::vector<trn_kernel_binding_t> args = {bind(a, piece.first_element)};
    if (b) args.push_back(bind(*b, piece.first_element));
    args.push_back(bind(out, piece.first_element));
    if (!b)
      for (uint32_t k = 0; k < c.limbs; ++k)
        args.push_back(scalar_f32(static_cast<float>((s >> (16 * k)) & 0xffff)));
    launches.push_back({kernels::integer_add_signature(c),
                        [c](const kbuild::BuildTarget &target) mutable {
                          c.target = target;
                          return kernels::build_integer_add(c);
                        },
                        std::move(args)});
  }
  return try_device([&] { launch_kernels(queue, sync, out.device_index, launches); });
}

}  // namespace trn::ops
