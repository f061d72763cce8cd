// The kernels written with the kernel builder, run on simulated cores of each generation and
// compared with host arithmetic: elementwise (with broadcasting), softmax, layer and RMS norm,
// reductions along either axis, transpose and vector add.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "kbuild/kernels/elementwise.hpp"
#include "kbuild/kernels/norms.hpp"
#include "kbuild/kernels/reduce.hpp"
#include "kbuild/kernels/softmax.hpp"
#include "kbuild/kernels/transpose.hpp"
#include "support/kbuild_helpers.hpp"

using namespace trn;
using namespace trn::kbuild;
using isa::DType;
using sim::exec::Executor;
using sim::exec::RunStatus;
using test::HostBuffer;

namespace {

// A matrix of fp32 values, with its bytes in some dtype.
struct Matrix {
  uint64_t rows, cols;
  DType dtype;
  std::vector<float> values;  // as the dtype holds them
  HostBuffer buffer;

  Matrix(uint64_t r, uint64_t c, DType t)
      : rows(r), cols(c), dtype(t), values(r * c), buffer(r * c * isa::dtype_size(t)) {}
  void fill(std::mt19937 &rng, float lo, float hi, bool integers = false) {
    std::uniform_real_distribution<float> d(lo, hi);
    for (float &v : values) v = integers ? std::round(d(rng)) : d(rng);
    isa::store_f32(dtype, values.data(), buffer.bytes.data(), values.size());
    isa::load_f32(dtype, buffer.bytes.data(), values.data(), values.size());
  }
  std::vector<float> read() const {
    std::vector<float> out(rows * cols);
    isa::load_f32(dtype, buffer.bytes.data(), out.data(), out.size());
    return out;
  }
  float at(uint64_t r, uint64_t c) const {
    return values[(rows == 1 ? 0 : r) * cols + (cols == 1 ? 0 : c)];
  }
};

void run(const isa::Program &p, trn_generation_t g, std::vector<Matrix *> args) {
  std::vector<sim::exec::HbmBinding> bindings;
  for (Matrix *m : args) bindings.push_back(m->buffer.binding());
  Executor ex(sim::core_spec(g));
  const auto r = test::run_checked(ex, p, bindings);
  INFO(r.report.message);
  REQUIRE(r.report.status == RunStatus::kOk);
}

const trn_generation_t kGenerations[] = {TRN_GENERATION_TRN1, TRN_GENERATION_TRN2,
                                         TRN_GENERATION_TRN3};

}  // namespace

TEST_CASE("kernels: binary elementwise with broadcasting along rows and columns", "[numerics]") {
  std::mt19937 rng(3);
  const uint64_t rows = 300, cols = 300;  // partial row tiles
  struct Shape {
    uint64_t ar, ac, br, bc;
  };
  const Shape shapes[] = {
      {rows, cols, rows, cols}, {rows, cols, 1, cols}, {rows, cols, rows, 1}, {rows, cols, 1, 1},
      {1, cols, rows, cols},    {rows, 1, rows, cols}, {rows, 1, 1, cols},    {rows, 1, rows, 1},
      {rows, 1, 1, 1},          {1, 1, 1, 1}};
  for (auto g : kGenerations)
    for (const Shape &s : shapes)
      for (AluOp op : {AluOp::kSubtract, AluOp::kMax, AluOp::kMultiply}) {
        CAPTURE(g, s.ar, s.ac, s.br, s.bc, isa::alu_op_name(op));
        BinaryConfig c{rows, cols,        s.ar,        s.ac, s.br,
                       s.bc, DType::kF32, DType::kF32, op,   test::build_target(g)};
        const isa::Program p = test::built(build_binary(c));
        Matrix a(s.ar, s.ac, DType::kF32), b(s.br, s.bc, DType::kF32), out(rows, cols, DType::kF32);
        a.fill(rng, -50, 50, true);
        b.fill(rng, -50, 50, true);
        run(p, g, {&a, &b, &out});
        const auto got = out.read();
        for (uint64_t r = 0; r < rows; ++r)
          for (uint64_t col = 0; col < cols; ++col) {
            const float x = a.at(r, col), y = b.at(r, col);
            const float want = op == AluOp::kSubtract ? x - y
                               : op == AluOp::kMax    ? std::max(x, y)
                                                      : x * y;
            REQUIRE(got[r * cols + col] == want);
          }
      }
}

TEST_CASE("kernels: vector add in bf16 and f32, and a unary op casting", "[numerics]") {
  std::mt19937 rng(4);
  for (DType t : {DType::kF32, DType::kBf16}) {
    const isa::Program p =
        test::built(build_vector_add(256, 4096 + 64, t, test::build_target(TRN_GENERATION_TRN2)));
    Matrix a(256, 4160, t), b(256, 4160, t), out(256, 4160, t);
    a.fill(rng, -100, 100, true);
    b.fill(rng, -100, 100, true);
    run(p, TRN_GENERATION_TRN2, {&a, &b, &out});
    const auto got = out.read();
    for (size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == a.values[i] + b.values[i]);
  }
  UnaryConfig u{200,
                1000,
                DType::kBf16,
                DType::kF32,
                UnaryOp::activation(ActFunc::kRelu, 2.0f, 1.0f),
                test::build_target(TRN_GENERATION_TRN1)};
  const isa::Program p = test::built(build_unary(u));
  Matrix x(200, 1000, DType::kBf16), y(200, 1000, DType::kF32);
  x.fill(rng, -10, 10, true);
  run(p, TRN_GENERATION_TRN1, {&x, &y});
  const auto got = y.read();
  for (size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == std::max(0.0f, x.values[i] * 2 + 1));
  UnaryConfig alu{130,
                  64,
                  DType::kF32,
                  DType::kF32,
                  UnaryOp::alu(AluOp::kMultiply, 3.0f, AluOp::kSubtract, 1.0f),
                  test::build_target(TRN_GENERATION_TRN2)};
  Matrix x2(130, 64, DType::kF32), y2(130, 64, DType::kF32);
  x2.fill(rng, -10, 10, true);
  run(test::built(build_unary(alu)), TRN_GENERATION_TRN2, {&x2, &y2});
  const auto got2 = y2.read();
  for (size_t i = 0; i < got2.size(); ++i) REQUIRE(got2[i] == x2.values[i] * 3 - 1);
}

TEST_CASE("kernels: row softmax is stable and sums to one") {
  std::mt19937 rng(5);
  for (auto g : kGenerations)
    for (DType t : {DType::kF32, DType::kBf16}) {
      const uint64_t rows = 200, cols = 1000;
      SoftmaxConfig c{rows, cols, t, DType::kF32, test::build_target(g)};
      const isa::Program p = test::built(build_softmax(c));
      Matrix x(rows, cols, t), y(rows, cols, DType::kF32);
      x.fill(rng, -30, 90);  // large values: exp without the max would overflow
      run(p, g, {&x, &y});
      const auto got = y.read();
      for (uint64_t r = 0; r < rows; ++r) {
        double mx = -1e30, sum = 0;
        for (uint64_t i = 0; i < cols; ++i) mx = std::max(mx, double(x.values[r * cols + i]));
        for (uint64_t i = 0; i < cols; ++i) sum += std::exp(double(x.values[r * cols + i]) - mx);
        for (uint64_t i = 0; i < cols; ++i) {
          const double want = std::exp(double(x.values[r * cols + i]) - mx) / sum;
          REQUIRE(std::abs(got[r * cols + i] - want) <= 1e-6 + 1e-5 * want);
        }
      }
    }
  SoftmaxConfig too_wide{128, 40000};
  too_wide.target = test::build_target(TRN_GENERATION_TRN2);
  auto r = build_softmax(too_wide);
  REQUIRE(std::holds_alternative<std::string>(r));
  CHECK_THAT(std::get<std::string>(r),
             Catch::StartsWith("softmax: rows of 40000 columns; this kernel keeps two rows in "
                               "SBUF at once and at most "));
  // The widest row it names builds.
  const std::string msg = std::get<std::string>(r);
  const size_t at = msg.find("at most ") + 8;
  too_wide.cols = std::stoull(msg.substr(at));
  CHECK(std::holds_alternative<isa::Program>(build_softmax(too_wide)));
}

TEST_CASE("kernels: layer norm and RMS norm match double-precision references", "[numerics]") {
  std::mt19937 rng(6);
  for (auto g : kGenerations)
    for (bool affine : {true, false}) {
      const uint64_t rows = 150, cols = 768;
      NormConfig c{rows, cols, DType::kF32, DType::kF32, 1e-5f, affine, test::build_target(g)};
      Matrix x(rows, cols, DType::kF32), gamma(1, cols, DType::kF32), beta(1, cols, DType::kF32),
          y(rows, cols, DType::kF32), y2(rows, cols, DType::kF32);
      x.fill(rng, -3, 5);
      gamma.fill(rng, 0.5, 1.5);
      beta.fill(rng, -1, 1);
      const isa::Program ln = test::built(build_layernorm(c));
      const isa::Program rms = test::built(build_rmsnorm(c));
      if (affine) {
        run(ln, g, {&x, &gamma, &beta, &y});
        run(rms, g, {&x, &gamma, &y2});
      } else {
        run(ln, g, {&x, &y});
        run(rms, g, {&x, &y2});
      }
      const auto got = y.read(), got2 = y2.read();
      for (uint64_t r = 0; r < rows; ++r) {
        double mean = 0, var = 0, ms = 0;
        for (uint64_t i = 0; i < cols; ++i) mean += x.values[r * cols + i];
        mean /= double(cols);
        for (uint64_t i = 0; i < cols; ++i) {
          const double d = x.values[r * cols + i] - mean;
          var += d * d;
          ms += double(x.values[r * cols + i]) * x.values[r * cols + i];
        }
        var /= double(cols);
        ms /= double(cols);
        for (uint64_t i = 0; i < cols; ++i) {
          const double gm = affine ? gamma.values[i] : 1.0, bt = affine ? beta.values[i] : 0.0;
          const double want = (x.values[r * cols + i] - mean) / std::sqrt(var + 1e-5) * gm + bt;
          const double want2 = x.values[r * cols + i] / std::sqrt(ms + 1e-5) * gm;
          REQUIRE(std::abs(got[r * cols + i] - want) <= 1e-4 * (1 + std::abs(want)));
          REQUIRE(std::abs(got2[r * cols + i] - want2) <= 1e-4 * (1 + std::abs(want2)));
        }
      }
    }
}

TEST_CASE("kernels: the norms refuse rows wider than SBUF holds, naming the widest that builds") {
  for (auto g : kGenerations)
    for (DType t : {DType::kF32, DType::kBf16})
      for (bool layer : {true, false}) {
        CAPTURE(g, isa::dtype_name(t), layer);
        NormConfig c{512, 65535, t, t, 1e-5f, true, test::build_target(g)};
        c.target.sbuf_usable_bytes = sim::core_spec(g).sbuf_bytes_per_partition - 12 * 1024;
        auto r = layer ? build_layernorm(c) : build_rmsnorm(c);
        REQUIRE(std::holds_alternative<std::string>(r));
        const std::string msg = std::get<std::string>(r);
        CHECK_THAT(msg, Catch::Contains("columns; this kernel keeps two rows in SBUF at once"));
        c.cols = std::stoull(msg.substr(msg.find("at most ") + 8));
        auto ok = layer ? build_layernorm(c) : build_rmsnorm(c);
        if (auto *e = std::get_if<std::string>(&ok)) FAIL(*e);
      }
}

TEST_CASE("kernels: reductions along either axis", "[numerics]") {
  std::mt19937 rng(7);
  const uint64_t rows = 300, cols = 5000;
  for (auto g : {TRN_GENERATION_TRN1, TRN_GENERATION_TRN2})
    for (uint32_t axis : {0u, 1u})
      for (AluOp op : {AluOp::kAdd, AluOp::kMax}) {
        CAPTURE(g, axis, isa::alu_op_name(op));
        ReduceConfig c{rows, cols, axis, DType::kF32, DType::kF32, op, test::build_target(g)};
        const isa::Program p = test::built(build_reduce(c));
        const uint64_t n = axis == 1 ? rows : cols;
        Matrix x(rows, cols, DType::kF32), out(1, n, DType::kF32);
        x.fill(rng, -100, 100, true);
        run(p, g, {&x, &out});
        const auto got = out.read();
        for (uint64_t i = 0; i < n; ++i) {
          double want = op == AluOp::kAdd ? 0 : -1e30;
          for (uint64_t j = 0; j < (axis == 1 ? cols : rows); ++j) {
            const float v = axis == 1 ? x.values[i * cols + j] : x.values[j * cols + i];
            want = op == AluOp::kAdd ? want + v : std::max(want, double(v));
          }
          REQUIRE(got[i] == float(want));
        }
      }
  ReduceConfig bad{4, 4, 2};
  CHECK(std::get<std::string>(build_reduce(bad)).find("axis 2") != std::string::npos);
  ReduceConfig not_reduction{4, 4, 1, DType::kF32, DType::kF32, AluOp::kDivide};
  CHECK(std::get<std::string>(build_reduce(not_reduction)).find("not a reduction") !=
        std::string::npos);
}

TEST_CASE("kernels: transpose is exact in f32 and bf16") {
  std::mt19937 rng(8);
  for (DType t : {DType::kF32, DType::kBf16}) {
    const uint64_t rows = 200, cols = 333;
    TransposeConfig c{rows, cols, t, test::build_target(TRN_GENERATION_TRN2)};
    const isa::Program p = test::built(build_transpose(c));
    Matrix x(rows, cols, t), out(cols, rows, t);
    x.fill(rng, -1000, 1000);
    run(p, TRN_GENERATION_TRN2, {&x, &out});
    const auto got = out.read();
    for (uint64_t r = 0; r < rows; ++r)
      for (uint64_t c2 = 0; c2 < cols; ++c2) REQUIRE(got[c2 * rows + r] == x.values[r * cols + c2]);
  }
}
