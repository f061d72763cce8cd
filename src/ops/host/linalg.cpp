// Matrix products (mm, bmm) with optional transposes, and addmm.
#include <string>

#include "ops/host/internal.hpp"
#include "ops/host/reference.hpp"

namespace trn::ops::host {

using namespace detail;

namespace {

// One operand of a (batched) product: element (r, c) of op(x) in batch `batch`.
struct Operand {
  const Array *x;
  bool trans;
  int64_t rows, cols, batch_stride, row_stride, col_stride;
  double at(int64_t batch, int64_t r, int64_t c) const {
    return x->data[batch * batch_stride + r * row_stride + c * col_stride];
  }
};

Operand operand(const Array &x, bool trans) {
  const size_t rank = x.shape.size();
  const int64_t r = x.shape[rank - 2], c = x.shape[rank - 1];
  Operand o{&x, trans, trans ? c : r, trans ? r : c, r * c, trans ? 1 : c, trans ? c : 1};
  return o;
}

std::string describe(const char *name, const Array &x, bool trans) {
  return std::string(name) + " is " + shape_str(x.shape) + (trans ? " (transposed)" : "");
}

// Checks the operands and gives [B, M, N] (B = 1 for 2D) of the product.
Array product(const std::string &op, const Array &a, const Array &b, bool trans_a, bool trans_b,
              bool allow_batched) {
  check_array(op, "a", a);
  check_array(op, "b", b);
  const size_t rank = a.shape.size();
  if (rank != b.shape.size()) {
    fail(op, describe("a", a, trans_a) + " and " + describe("b", b, trans_b) +
                 "; both must have the same rank");
  }
  if (rank != 2 && !(allow_batched && rank == 3)) {
    fail(op,
         describe("a", a, trans_a) + "; operands must be " + (allow_batched ? "2D or 3D" : "2D"));
  }
  const Operand oa = operand(a, trans_a), ob = operand(b, trans_b);
  const std::string pa = trans_a ? "a^T" : "a", pb = trans_b ? "b^T" : "b";
  if (oa.cols != ob.rows) {
    fail(op, describe("a", a, trans_a) + " and " + describe("b", b, trans_b) + "; " + pa +
                 "'s columns (" + std::to_string(oa.cols) + ") must equal " + pb + "'s rows (" +
                 std::to_string(ob.rows) + ")");
  }
  const int64_t batch = rank == 3 ? a.shape[0] : 1;
  if (rank == 3 && b.shape[0] != batch) {
    fail(op, describe("a", a, trans_a) + " and " + describe("b", b, trans_b) +
                 "; batch sizes differ (" + std::to_string(batch) + " vs " +
                 std::to_string(b.shape[0]) + ")");
  }
  Array out = Array::zeros(rank == 3 ? Shape{batch, oa.rows, ob.cols} : Shape{oa.rows, ob.cols});
  double *o = out.data.data();
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t i = 0; i < oa.rows; ++i) {
      for (int64_t j = 0; j < ob.cols; ++j) {
        double s = 0;
        for (int64_t k = 0; k < oa.cols; ++k) s += oa.at(n, i, k) * ob.at(n, k, j);
        *o++ = s;
      }
    }
  }
  return out;
}

}  // namespace

Array matmul(const Array &a, const Array &b, bool trans_a, bool trans_b) {
  return product("matmul", a, b, trans_a, trans_b, true);
}

Array addmm(const Array &bias, const Array &a, const Array &b, double alpha, double beta,
            bool trans_a, bool trans_b) {
  check_array("addmm", "bias", bias);
  Array out = product("addmm", a, b, trans_a, trans_b, false);
  const Shape &shape = out.shape;
  if (!broadcasts_to(bias.shape, shape)) {
    fail("addmm", "bias is " + shape_str(bias.shape) + " and cannot broadcast to the product's " +
                      shape_str(shape));
  }
  const std::vector<int64_t> strides = broadcast_strides(bias.shape, shape);
  for_each_index(shape, [&](const std::vector<int64_t> &idx, int64_t flat) {
    const double prod = alpha * out.data[flat];
    out.data[flat] = beta == 0 ? prod : beta * bias.data[dot(idx, strides)] + prod;
  });
  return out;
}

}  // namespace trn::ops::host
