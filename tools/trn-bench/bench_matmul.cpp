// trn-bench matmul: host cost of simulating a tiled matmul kernel on one NeuronCore against the
// host cost of the bare math (one oneDNN bf16 GEMM, or OpenBLAS sgemm for fp32) in the same run.
// The ratio says how much the simulation costs on top of the arithmetic it must do anyway.
#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench.hpp"
#include "exec/executor.hpp"
#include "isa/dtype.hpp"
#include "isa/validate.hpp"
#include "kbuild/tiled_matmul.hpp"
#include "sim/core_spec.hpp"

extern "C" dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t M, dnnl_dim_t N,
                                               dnnl_dim_t K, float alpha, const void *A,
                                               dnnl_dim_t lda, const void *B, dnnl_dim_t ldb,
                                               float beta, float *C, dnnl_dim_t ldc);
extern "C" void openblas_set_num_threads(int threads);  // libopenblas; not in every cblas.h

namespace trn::bench {

namespace {

using isa::DType;

struct Case {
  uint64_t size;
  DType dtype;
};

int run_case(const Case &c, trn_generation_t generation, int runs) {
  const uint64_t n = c.size;
  const auto spec = sim::core_spec(generation);
  kbuild::MatmulConfig cfg{n, n, n, c.dtype, DType::kF32, spec.sbuf_bytes_per_partition};
  kbuild::MatmulPlan plan;
  auto built = kbuild::build_tiled_matmul(cfg, &plan);
  if (auto *err = std::get_if<std::string>(&built)) {
    std::fprintf(stderr, "trn-bench matmul: %s\n", err->c_str());
    return 1;
  }
  const auto &program = std::get<isa::Program>(built);
  if (auto err = isa::validate_program(program, spec.target())) {
    std::fprintf(stderr, "trn-bench matmul: invalid kernel: %s\n", err->c_str());
    return 1;
  }

  // Inputs: lhsT [K,M] and rhs [K,N] in the kernel's dtype, plus fp32 copies for sgemm.
  const size_t es = isa::dtype_size(c.dtype), elems = n * n;
  std::vector<std::byte> lhs(elems * es), rhs(elems * es), out(elems * 4);
  std::vector<float> lhs32(elems), rhs32(elems), ref(elems);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (size_t i = 0; i < elems; ++i) {
    lhs32[i] = dist(rng);
    rhs32[i] = dist(rng);
  }
  isa::store_f32(c.dtype, lhs32.data(), lhs.data(), elems);
  isa::store_f32(c.dtype, rhs32.data(), rhs.data(), elems);
  isa::load_f32(c.dtype, lhs.data(), lhs32.data(), elems);  // the values the kernel sees
  isa::load_f32(c.dtype, rhs.data(), rhs32.data(), elems);

  sim::exec::Executor executor(spec);
  const std::vector<sim::exec::HbmBinding> args = {
      {lhs.data(), lhs.size()}, {rhs.data(), rhs.size()}, {out.data(), out.size()}};
  sim::exec::RunResult last;
  const double sim_ns = median_ns_per_op(runs, 1, [&] { last = executor.run(program, args); });
  if (last.report.status != sim::exec::RunStatus::kOk) {
    std::fprintf(stderr, "trn-bench matmul: kernel stopped: %s\n", last.report.message.c_str());
    return 1;
  }

  // Baselines: the same product, C[M,N] = lhsT^T @ rhs, in one library call, on one thread (as
  // the simulator computes) and on every thread.
  const auto m = static_cast<dnnl_dim_t>(n);
  const int all_threads = omp_get_max_threads();
  const bool fp32 = c.dtype == DType::kF32;
  auto baseline = [&](int threads) {
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    const double ns = median_ns_per_op(runs, 1, [&] {
      if (fp32)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(n),
                    static_cast<int>(n), static_cast<int>(n), 1.0f, lhs32.data(),
                    static_cast<int>(n), rhs32.data(), static_cast<int>(n), 0.0f, ref.data(),
                    static_cast<int>(n));
      else
        dnnl_gemm_bf16bf16f32('T', 'N', m, m, m, 1.0f, lhs.data(), m, rhs.data(), m, 0.0f,
                              ref.data(), m);
    });
    omp_set_num_threads(all_threads);
    openblas_set_num_threads(all_threads);
    return ns;
  };
  const std::string lib = fp32 ? "OpenBLAS sgemm" : "oneDNN bf16 gemm";
  const double base1_ns = baseline(1), base_all_ns = baseline(all_threads);
  // The simulated kernel computed the same numbers (up to fp32 summation order).
  double worst = 0;
  for (size_t i = 0; i < elems; ++i) {
    float v;
    std::memcpy(&v, out.data() + i * 4, 4);
    worst = std::max(worst, static_cast<double>(std::abs(v - ref[i])));
  }
  if (worst > 1e-2) {
    std::fprintf(stderr, "trn-bench matmul: result differs from the baseline by %g\n", worst);
    return 1;
  }

  const std::string name = std::to_string(n) + "^3 " + isa::dtype_name(c.dtype);
  print({"matmul", name + " host time", "ms", sim_ns / 1e6, base1_ns / 1e6, lib + " 1 thread",
         false});
  print({"matmul", name + " host time", "ms", sim_ns / 1e6, base_all_ns / 1e6,
         lib + " " + std::to_string(all_threads) + " threads", false});
  const double flops = 2.0 * double(n) * double(n) * double(n);
  const double sim_s = double(last.counters.total_ps) * 1e-12;
  const double peak =
      double(spec.tensor_hz) * 2.0 * 128 * 128 / (c.dtype == DType::kF32 ? 4.0 : 1.0);
  Result mfu{
      "matmul",    name + " simulated TFLOPS (" + sim::generation_spec(generation).name + ")",
      "TFLOPS",    flops / sim_s / 1e12,
      peak / 1e12, "Tensor engine peak",
      true};
  print(mfu);
  return 0;
}

}  // namespace

int bench_matmul(int argc, char **argv) {
  bool quick = false;
  trn_generation_t gen = TRN_GENERATION_TRN2;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    if (!std::strcmp(argv[i], "--trn1")) gen = TRN_GENERATION_TRN1;
    if (!std::strcmp(argv[i], "--trn3")) gen = TRN_GENERATION_TRN3;
  }
  const uint64_t n = quick ? 512 : 2048;
  const int runs = quick ? 3 : 5;
  for (DType t : {DType::kBf16, DType::kF32})
    if (int rc = run_case({n, t}, gen, runs)) return rc;
  return 0;
}

}  // namespace trn::bench
