#include "gather.hpp"

#include <limits>

#include "op_support.hpp"

namespace torch_trn {
namespace {

constexpr int64_t kExactInFloat = int64_t{1} << 24;
constexpr int64_t kMaxMatchElements = int64_t{1} << 24;
constexpr double kInf = std::numeric_limits<double>::infinity();

at::Tensor scalar_like(const at::Tensor &x, double value) {
  return at::full({}, value, x.options());
}

}  // namespace

bool gather_fits(c10::ScalarType type, const at::Tensor &index, int64_t size,
                 int64_t match_elements) {
  const auto t = index.scalar_type();
  return is_float_type(type) && (t == at::kLong || t == at::kInt) && size > 0 &&
         size < kExactInFloat && match_elements > 0 && match_elements <= kMaxMatchElements;
}

at::Tensor index_positions(const at::Tensor &index_anywhere, const at::Tensor &like, int64_t size,
                           bool wrap) {
  const at::Tensor index = index_anywhere.to(like.device());
  at::Tensor positions;
  if (index.scalar_type() == at::kInt) {
    positions = index.to(at::kFloat);
  } else {
    // An int64 as its two 32-bit words (little endian), read in place as strided int32 views
    // (the device has no int64 arithmetic to copy it with) and converted to float: the value is
    // (high + [low < 0]) * 2^32 + low, so high + [low < 0] is 0 exactly when it fits an int32,
    // and otherwise the position is at least 2^31 away from every position.
    const at::Tensor flat = index.dim() > TRN_OPS_MAX_DIMS ? index.reshape({-1}) : index;
    const auto word = [&](uint64_t which) {
      trn_ops_tensor_t words = view_of(flat);
      words.dtype = TRN_DTYPE_I32;
      words.offset += 4 * which;
      for (uint32_t d = 0; d < words.rank; ++d) words.strides[d] *= 2;
      at::Tensor out = empty_on(flat, flat.sizes(), at::kFloat);
      const auto vo = view_of(out);
      check_ops(trn_ops_copy(queue_of(flat), &vo, &words, nullptr), "copy");
      return out;
    };
    const at::Tensor low = word(0), high = word(1);
    positions = ((high + (low < 0).to(at::kFloat)) * 4294967296.0 + low).view(index.sizes());
  }
  if (wrap) positions = at::where(positions < 0, positions + static_cast<double>(size), positions);
  return positions;
}

at::Tensor match_positions(const at::Tensor &positions, int64_t k) {
  return positions.unsqueeze(-1) == at::arange(k, positions.options());
}

at::Tensor last_matches(const at::Tensor &match) {
  // The matches after each row: the column's total less the inclusive running count (small
  // integers, exact in float32).
  const at::Tensor count = match.to(at::kFloat);
  const at::Tensor later = count.sum(-2, /*keepdim=*/true) - count.cumsum(-2);
  return at::logical_and(match, later == 0);
}

at::Tensor pick(const at::Tensor &values, const at::Tensor &match) {
  const at::Tensor picked = at::where(match, values.unsqueeze(-2), scalar_like(values, -kInf));
  const at::Tensor hit = match.any(-1);
  return at::where(hit, picked.amax(-1),
                   scalar_like(values, std::numeric_limits<double>::quiet_NaN()));
}

at::Tensor spread(const at::Tensor &values, const at::Tensor &match) {
  return at::where(match, values.unsqueeze(-1), scalar_like(values, -0.0)).sum(-2);
}

at::Tensor place(const at::Tensor &values, const at::Tensor &match) {
  return at::where(match, values.unsqueeze(-1), scalar_like(values, -kInf)).amax(-2);
}

at::Tensor any_unmatched(const at::Tensor &match) {
  return at::logical_not(match.any(-1)).any();
}

at::Tensor poison_if(const at::Tensor &x, const at::Tensor &poisoned) {
  return at::where(poisoned, scalar_like(x, std::numeric_limits<double>::quiet_NaN()), x);
}

}  // namespace torch_trn
