// sum / mean / max / min / argmax / argmin over dims.
#include <cmath>
#include <string>

#include "ops/host/internal.hpp"
#include "ops/host/reference.hpp"

namespace trn::ops::host {

using namespace detail;

namespace {

const char *name_of(Reduce op) {
  switch (op) {
    case Reduce::kSum: return "sum";
    case Reduce::kMean: return "mean";
    case Reduce::kMax: return "max";
    case Reduce::kMin: return "min";
    case Reduce::kArgmax: return "argmax";
    case Reduce::kArgmin: return "argmin";
  }
  return "reduce";
}

// Position in the group of the first extreme, a NaN winning over everything as torch does.
int64_t extreme_index(const double *x, const std::vector<int64_t> &inner, bool want_max) {
  int64_t best = 0;
  double best_v = x[inner[0]];
  for (int64_t k = 1; k < static_cast<int64_t>(inner.size()) && !std::isnan(best_v); ++k) {
    const double v = x[inner[k]];
    if (std::isnan(v) || (want_max ? v > best_v : v < best_v)) {
      best = k;
      best_v = v;
    }
  }
  return best;
}

}  // namespace

Array reduce(Reduce op, const Array &x, const std::vector<int64_t> &dims, bool keepdim) {
  const std::string name = std::string("reduce(") + name_of(op) + ")";
  check_array(name, "x", x);
  const bool is_arg = op == Reduce::kArgmax || op == Reduce::kArgmin;
  if (is_arg && dims.size() > 1) {
    fail(name, "takes at most one dim, got " + std::to_string(dims.size()));
  }
  const ReduceLayout layout = reduce_layout(x.shape, dims_mask(name, x.shape, dims));
  const bool extreme = op != Reduce::kSum && op != Reduce::kMean;
  if (extreme && layout.group_size() == 0 && layout.groups() > 0) {
    fail(name, "cannot reduce over zero elements (x is " + shape_str(x.shape) + ")");
  }
  Array out = Array::zeros(keepdim ? layout.kept_shape : layout.squeezed_shape);
  for (int64_t g = 0; g < layout.groups(); ++g) {
    const double *base = x.data.data() + layout.base[g];
    double r = 0;
    switch (op) {
      case Reduce::kSum:
      case Reduce::kMean:
        for (int64_t off : layout.inner) r += base[off];
        if (op == Reduce::kMean) r /= static_cast<double>(layout.group_size());
        break;
      case Reduce::kMax:
      case Reduce::kMin:
        r = base[layout.inner[extreme_index(base, layout.inner, op == Reduce::kMax)]];
        break;
      case Reduce::kArgmax:
      case Reduce::kArgmin:
        r = static_cast<double>(extreme_index(base, layout.inner, op == Reduce::kArgmax));
        break;
    }
    out.data[g] = r;
  }
  return out;
}

}  // namespace trn::ops::host
