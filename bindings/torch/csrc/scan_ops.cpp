// cumsum on the device as matrix products: along the last dim, x @ U with U the upper-triangular
// matrix of ones, in blocks of 128 whose sums are carried by the same method one level up (the
// Tensor engine's products by 1 are exact and it accumulates in fp32, as PyTorch's CPU kernel
// accumulates a float cumsum in a wider type). A product would turn an infinity times 0 into NaN
// for every earlier position, so the finite values are scanned with the non-finite ones as 0, and
// where the +inf, -inf and NaN counts before a position are not all 0 the result is what IEEE
// addition makes of them (NaN where a NaN or both infinities came before). Integer and float64
// cumsums run on the CPU (recorded): the engines' fp32 would round them.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <limits>
#include <vector>

#include "fallback.hpp"
#include "op_support.hpp"

namespace torch_trn {
namespace {

constexpr int64_t kBlock = 128;

// The inclusive scan of each row of a float32 [rows, n] matrix of finite values.
at::Tensor scan_rows(const at::Tensor &x) {
  const int64_t rows = x.size(0), n = x.size(1);
  const int64_t b = std::min(n, kBlock);
  const at::Tensor upper = at::triu(at::ones({b, b}, x.options()));
  if (n <= kBlock) return at::matmul(x, upper);
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  at::Tensor padded = x;
  if (blocks * kBlock != n) {
    padded = at::zeros({rows, blocks * kBlock}, x.options());
    padded.narrow(1, 0, n).copy_(x);
  }
  const at::Tensor within = at::matmul(padded.view({rows, blocks, kBlock}), upper);
  const at::Tensor sums = within.select(2, kBlock - 1).contiguous();  // each block's total
  const at::Tensor before = scan_rows(sums) - sums;                   // the blocks' carries
  return (within + before.unsqueeze(2)).view({rows, blocks * kBlock}).narrow(1, 0, n);
}

at::Tensor &cumsum_out(const at::Tensor &self, int64_t dim, c10::optional<at::ScalarType> dtype,
                       at::Tensor &out) {
  resize_out(out, self.sizes());
  if (out.numel() == 0) return out;
  const at::ScalarType type = out.scalar_type();
  const bool device = type == at::kFloat || type == at::kBFloat16 || type == at::kHalf;
  const int64_t d = c10::maybe_wrap_dim(dim, self.dim());
  if (!device) {
    record_cpu_run("aten::cumsum.out");
    return out.copy_(at::cumsum(self.cpu(), d, dtype));
  }
  if (self.dim() == 0) return out.copy_(self);
  // Float32 throughout, the result rounded once to out's dtype.
  const at::Tensor x = self.to(at::kFloat).movedim(d, -1).contiguous();
  const int64_t n = x.size(-1);
  const at::Tensor rows = x.view({-1, n});
  const double inf = std::numeric_limits<double>::infinity();
  const at::Tensor zero = at::zeros({}, rows.options());
  // |x| < inf is false for infinities and NaN alike (one compare on the device).
  at::Tensor sum = scan_rows(at::where(rows.abs() < inf, rows, zero));
  // How many +inf, -inf and NaN came up to each position: the three indicator matrices stacked
  // and scanned as one.
  const at::Tensor hits = at::cat({rows == inf, rows == -inf, rows != rows}, 0);
  const std::vector<at::Tensor> counts =
      scan_rows(at::where(hits, at::ones({}, rows.options()), zero)).chunk(3, 0);
  const at::Tensor &pos = counts[0], &neg = counts[1], &nan = counts[2];
  sum = at::where(pos > 0, at::full({}, inf, rows.options()), sum);
  sum = at::where(neg > 0, at::full({}, -inf, rows.options()), sum);
  const at::Tensor undefined = (nan + pos * neg) > 0;  // a NaN, or both infinities, came before
  sum = at::where(undefined, at::full({}, std::numeric_limits<double>::quiet_NaN(), rows.options()),
                  sum);
  return out.copy_(sum.view(x.sizes()).movedim(-1, d));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cumsum.out", TORCH_FN(cumsum_out));
}

}  // namespace torch_trn
