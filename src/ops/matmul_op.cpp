#include "ops/matmul_op.hpp"

#include <fmt/format.h>

#include "ops/kernel_op.hpp"
#include "ops/kernels/matmul.hpp"
#include "ops/op_support.hpp"

namespace trn::ops {

namespace {

bool matmul_input_dtype(trn_dtype_t t) {
  return t == TRN_DTYPE_F32 || t == TRN_DTYPE_BF16 || t == TRN_DTYPE_F16;
}

}  // namespace

std::optional<std::string> matmul_on_device(trn_queue_t queue, const trn_sync_t *sync,
                                            const MatmulShape &s, const Tensor &out,
                                            const Tensor &a, const Tensor &b, const Tensor &bias,
                                            double alpha, double beta) {
  if (auto r = host_reason({&out, &a, &b}, false)) return r;
  if (s.k == 0) return "an empty inner dimension (the product is zeros or beta * bias)";
  if (a.dtype != b.dtype || !matmul_input_dtype(a.dtype))
    return fmt::format("inputs {} and {}: the tensor engine takes two f32, bf16 or f16 inputs",
                       a.describe(), b.describe());
  if (!dtype_is_float(out.dtype)) return "an integer output";
  kernels::MatmulOpConfig c;
  c.m = static_cast<uint64_t>(s.m);
  c.n = static_cast<uint64_t>(s.n);
  c.k = static_cast<uint64_t>(s.k);
  c.batch = static_cast<uint64_t>(s.batch);
  c.trans_a = s.trans_a;
  c.trans_b = s.trans_b;
  c.b_batched = s.b_batched;
  c.in_dtype = static_cast<isa::DType>(a.dtype);
  c.out_dtype = static_cast<isa::DType>(out.dtype);
  if (bias.present()) {
    // The kernel adds a bias of [N] or [M, N] (of the output's dtype or f32); others (a column,
    // a scalar, a strided view) go through the host.
    if (auto r = host_reason({&bias}, false)) return r;
    const Shape row = {s.n}, matrix = {s.m, s.n};
    const bool row_like = bias.shape == row || bias.shape == Shape{1, s.n};
    if (!row_like && bias.shape != matrix)
      return fmt::format("a bias of {} (the kernel adds [N] or [M, N])", bias.describe());
    if (bias.dtype != out.dtype && bias.dtype != TRN_DTYPE_F32)
      return fmt::format("a bias of {} for an output of {}", bias.describe(), out.describe());
    c.bias = row_like ? kernels::MatmulBias::kRow : kernels::MatmulBias::kMatrix;
    c.bias_dtype = static_cast<isa::DType>(bias.dtype);
  }
  std::vector<trn_kernel_binding_t> args = {bind(a), bind(b)};
  if (bias.present()) args.push_back(bind(bias));
  args.push_back(bind(out));
  args.push_back(scalar_f32(static_cast<float>(alpha)));
  if (bias.present()) args.push_back(scalar_f32(static_cast<float>(beta)));
  const std::string signature =
      fmt::format("matmul b{} [{}x{}x{}] ta{} tb{} bb{} {}>{} bias{} {}", c.batch, c.m, c.k, c.n,
                  c.trans_a ? 1 : 0, c.trans_b ? 1 : 0, c.b_batched ? 1 : 0, dtype_name(a.dtype),
                  dtype_name(out.dtype), static_cast<int>(c.bias), isa::dtype_name(c.bias_dtype));
  return try_device([&] {
    launch_kernels(queue, sync, out.device_index,
                   {{signature,
                     [c](const kbuild::BuildTarget &t) mutable {
                       c.target = t;
                       return kernels::build_matmul(c);
                     },
                     args}});
  });
}

}  // namespace trn::ops
