// Matrix products: matmul (2-D, batched, b shared across a batch) and addmm, with transposes.
#include <fmt/format.h>

#include "ops/host_path.hpp"
#include "ops/matmul_op.hpp"
#include "ops/op_support.hpp"
#include "ops/staging.hpp"

namespace trn::ops {

MatmulShape matmul_shape(const Tensor &a, const Tensor &b, uint32_t flags, const char *op) {
  if (flags & ~(TRN_OPS_TRANSPOSE_A | TRN_OPS_TRANSPOSE_B))
    invalid(fmt::format("{}: flags has unknown bits {:#x}", op,
                        flags & ~(TRN_OPS_TRANSPOSE_A | TRN_OPS_TRANSPOSE_B)));
  MatmulShape s;
  s.trans_a = flags & TRN_OPS_TRANSPOSE_A;
  s.trans_b = flags & TRN_OPS_TRANSPOSE_B;
  if (a.rank() != 2 && a.rank() != 3)
    invalid(fmt::format("{}: a is {}; it must be a matrix or a batch of them", op, a.describe()));
  if (b.rank() != 2 && b.rank() != 3)
    invalid(fmt::format("{}: b is {}; it must be a matrix or a batch of them", op, b.describe()));
  if (a.rank() == 2 && b.rank() == 3)
    invalid(fmt::format("{}: a is a matrix and b a batch ({} and {}); batch a instead", op,
                        a.describe(), b.describe()));
  const int64_t ar = a.rank() - 2, br = b.rank() - 2;
  s.batch = a.rank() == 3 ? a.shape[0] : 1;
  s.b_batched = b.rank() == 3;
  if (s.b_batched && b.shape[0] != s.batch)
    invalid(fmt::format("{}: a has {} matrices, b {}", op, s.batch, b.shape[0]));
  s.m = a.shape[ar + (s.trans_a ? 1 : 0)];
  s.k = a.shape[ar + (s.trans_a ? 0 : 1)];
  const int64_t bk = b.shape[br + (s.trans_b ? 1 : 0)];
  s.n = b.shape[br + (s.trans_b ? 0 : 1)];
  if (bk != s.k)
    invalid(fmt::format("{}: a is {}{} and b is {}{}; a's columns ({}) must equal b's rows ({})",
                        op, a.describe(), s.trans_a ? " (transposed)" : "", b.describe(),
                        s.trans_b ? " (transposed)" : "", s.k, bk));
  s.out = a.rank() == 3 ? Shape{s.batch, s.m, s.n} : Shape{s.m, s.n};
  return s;
}

}  // namespace trn::ops

using namespace trn;
using namespace trn::ops;

namespace {

// b shared by a batch: the host reference takes equal batches.
host::Array batched_like(const host::Array &b, const host::Array &a) {
  if (a.shape.size() == 3 && b.shape.size() == 2)
    return host::broadcast_to(b, {a.shape[0], b.shape[0], b.shape[1]});
  return b;
}

}  // namespace

extern "C" {

TRN_OPS_API trn_result_t trn_ops_matmul(trn_queue_t queue, const trn_ops_tensor_t *out,
                                        const trn_ops_tensor_t *a, const trn_ops_tensor_t *b,
                                        uint32_t flags, const trn_sync_t *sync) {
  return run_op("trn_ops_matmul", queue, [&] {
    const Tensor o = tensor_arg(out, "out"), ta = tensor_arg(a, "a"), tb = tensor_arg(b, "b");
    const MatmulShape s = matmul_shape(ta, tb, flags, "matmul");
    check_shape(o, s.out, "out", "matmul");
    check_same_device({&o, &ta, &tb}, "matmul");
    check_overlap({&o}, {&ta, &tb}, "matmul", false);
    if (o.numel() == 0) return queue_empty_op(queue, sync);
    const Tensor none;
    Staging staging(queue, sync);
    const bool may = !host_reason({&o}, false);
    const Tensor sa = may ? staging.contiguous(ta) : ta, sb = may ? staging.contiguous(tb) : tb;
    const trn_sync_t *op_sync = staging.op_sync();
    std::optional<std::string> reason =
        matmul_on_device(queue, op_sync, s, o, sa, sb, none, 1.0, 0.0);
    if (!reason) return;
    const bool t_a = s.trans_a, t_b = s.trans_b;
    const bool zero_k = s.k == 0;
    const Shape shape = s.out;
    run_on_host(queue, op_sync, "matmul", signature_of({&ta, &tb}, {&o}), *reason, {ta, tb}, {o},
                [=](const Arrays &v) {
                  if (zero_k) return Arrays{host::Array::zeros(shape)};
                  return Arrays{host::matmul(v[0], batched_like(v[1], v[0]), t_a, t_b)};
                });
  });
}

TRN_OPS_API trn_result_t trn_ops_addmm(trn_queue_t queue, const trn_ops_tensor_t *out,
                                       const trn_ops_tensor_t *bias, const trn_ops_tensor_t *a,
                                       const trn_ops_tensor_t *b, double beta, double alpha,
                                       uint32_t flags, const trn_sync_t *sync) {
  return run_op("trn_ops_addmm", queue, [&] {
    const Tensor o = tensor_arg(out, "out"), c = tensor_arg(bias, "bias"), ta = tensor_arg(a, "a"),
                 tb = tensor_arg(b, "b");
    if (ta.rank() != 2 || tb.rank() != 2)
      invalid(fmt::format("addmm: a {} and b {} must be matrices", ta.describe(), tb.describe()));
    const MatmulShape s = matmul_shape(ta, tb, flags, "addmm");
    check_shape(o, s.out, "out", "addmm");
    if (broadcast_shapes(c.shape, s.out, "addmm") != s.out)
      invalid(fmt::format("addmm: bias {} does not broadcast to the output {}", c.describe(),
                          shape_text(s.out)));
    check_same_device({&o, &c, &ta, &tb}, "addmm");
    check_overlap({&o}, {&ta, &tb}, "addmm", false);
    check_overlap({&o}, {&c}, "addmm", true);  // in place on the bias, as addmm_ does
    if (o.numel() == 0) return queue_empty_op(queue, sync);
    Staging staging(queue, sync);
    const bool may = !host_reason({&o}, false);
    const Tensor sa = may ? staging.contiguous(ta) : ta, sb = may ? staging.contiguous(tb) : tb,
                 sc = may ? staging.contiguous(c) : c;
    const trn_sync_t *op_sync = staging.op_sync();
    // beta = 0 ignores the bias, NaN and infinities included (torch.addmm): a plain product.
    const Tensor none;
    std::optional<std::string> reason =
        matmul_on_device(queue, op_sync, s, o, sa, sb, beta == 0.0 ? none : sc, alpha, beta);
    if (!reason) return;
    const bool t_a = s.trans_a, t_b = s.trans_b;
    run_on_host(queue, op_sync, "addmm", signature_of({&c, &ta, &tb}, {&o}), *reason, {c, ta, tb},
                {o}, [=](const Arrays &v) {
                  return Arrays{host::addmm(v[0], v[1], v[2], alpha, beta, t_a, t_b)};
                });
  });
}

}  // extern "C"
