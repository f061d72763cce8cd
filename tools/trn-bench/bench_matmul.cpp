// trn-bench matmul: host cost of running a tiled matmul kernel on one simulated NeuronCore,
// through the C API (load, launch on a compute queue, finish), against the host cost of the bare
// math (one oneDNN bf16 GEMM, or OpenBLAS sgemm for fp32) in the same run. The ratio says how
// much the simulation costs on top of the arithmetic it must do anyway.
#include <cblas.h>
#include <dlfcn.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench.hpp"
#include "isa/container.hpp"
#include "isa/dtype.hpp"
#include "kbuild/kernels/tiled_matmul.hpp"
#include "trn/trn.h"

extern "C" dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t M, dnnl_dim_t N,
                                               dnnl_dim_t K, float alpha, const void *A,
                                               dnnl_dim_t lda, const void *B, dnnl_dim_t ldb,
                                               float beta, float *C, dnnl_dim_t ldc);
extern "C" void openblas_set_num_threads(int threads);  // libopenblas; not in every cblas.h

namespace trn::bench {

namespace {

// OpenBLAS, loaded by this benchmark only. Linked into trn-bench, it would start its thread pool
// when the program starts, and on a small machine those threads spin (sched_yield) for their
// first ~0.1 s of idleness: every other benchmark, which measures hand-offs between two threads
// against a raw baseline, would share the cores with them.
struct OpenBlas {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&openblas_set_num_threads) set_num_threads = nullptr;
};

// Null (having said what to install) when OpenBLAS cannot be loaded.
const OpenBlas *open_blas() {
  static const OpenBlas loaded = [] {
    OpenBlas blas;
    void *library = nullptr;
    for (const char *name : {"libopenblas.so.0", TRN_OPENBLAS_BUILD_PATH})
      if ((library = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    if (library == nullptr) {
      std::fprintf(stderr,
                   "trn-bench matmul: cannot load OpenBLAS (%s): run scripts/install-deps\n",
                   dlerror());
      return blas;
    }
    blas.sgemm = reinterpret_cast<decltype(&cblas_sgemm)>(dlsym(library, "cblas_sgemm"));
    blas.set_num_threads = reinterpret_cast<decltype(&openblas_set_num_threads)>(
        dlsym(library, "openblas_set_num_threads"));
    if (blas.sgemm == nullptr || blas.set_num_threads == nullptr)
      std::fprintf(stderr,
                   "trn-bench matmul: the OpenBLAS found lacks cblas_sgemm or "
                   "openblas_set_num_threads: install Debian's libopenblas0\n");
    return blas;
  }();
  return loaded.sgemm && loaded.set_num_threads ? &loaded : nullptr;
}

using isa::DType;

struct Case {
  uint64_t size;
  DType dtype;
};

constexpr uint64_t kFinishTimeoutNs = 600ull * 1000 * 1000 * 1000;

int run_case(const Case &c, const Context &ctx, int runs) {
  const uint64_t n = c.size;
  trn_device_properties_t props = TRN_DEVICE_PROPERTIES_INIT;
  check(trn_device_get_properties(ctx.device, &props), "trn_device_get_properties");
  trn_core_properties_t core_props = TRN_CORE_PROPERTIES_INIT;
  check(trn_core_get_properties(ctx.core, &core_props), "trn_core_get_properties");
  kbuild::MatmulConfig cfg{n, n, n, c.dtype, DType::kF32, props.sbuf_usable_bytes_per_partition};
  cfg.target = kbuild::build_target(props);  // the device's core, not the default generation's
  kbuild::MatmulPlan plan;
  auto built = kbuild::build_tiled_matmul(cfg, &plan);
  if (auto *err = std::get_if<std::string>(&built)) {
    std::fprintf(stderr, "trn-bench matmul: %s\n", err->c_str());
    return 1;
  }
  const std::vector<std::byte> image = isa::write_kernel(std::get<isa::Program>(built));
  trn_kernel_t kernel = nullptr;
  check(trn_kernel_load(ctx.device, image.data(), image.size(), &kernel), "trn_kernel_load");

  // Inputs: lhsT [K,M] and rhs [K,N] in the kernel's dtype, plus fp32 copies for sgemm.
  const size_t es = isa::dtype_size(c.dtype), elems = n * n;
  std::vector<std::byte> lhs(elems * es), rhs(elems * es);
  std::vector<float> lhs32(elems), rhs32(elems), ref(elems), out(elems);
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

  trn_pool_desc_t pool_desc = TRN_POOL_DESC_INIT;
  pool_desc.hbm_bank = core_props.hbm_bank;
  trn_pool_t pool = nullptr;
  check(trn_pool_create(ctx.device, &pool_desc, &pool), "trn_pool_create");
  trn_mem_t mem[3];
  const uint64_t sizes[3] = {lhs.size(), rhs.size(), elems * sizeof(float)};
  for (int i = 0; i < 3; ++i)
    check(trn_mem_alloc(pool, sizes[i], 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem[i]), "trn_mem_alloc");
  check(trn_mem_write(mem[0], 0, lhs.data(), sizes[0]), "trn_mem_write");
  check(trn_mem_write(mem[1], 0, rhs.data(), sizes[1]), "trn_mem_write");

  trn_queue_desc_t queue_desc = TRN_QUEUE_DESC_INIT;
  queue_desc.kind = TRN_QUEUE_KIND_COMPUTE;
  queue_desc.core = ctx.core;
  trn_queue_t queue = nullptr;
  check(trn_queue_create(&queue_desc, &queue), "trn_queue_create");
  trn_profile_t profile = nullptr;  // counters only: a trace would add host time
  check(trn_profile_create(0, &profile), "trn_profile_create");
  const trn_kernel_binding_t bindings[3] = {{mem[0], 0}, {mem[1], 0}, {mem[2], 0}};
  trn_launch_desc_t launch = TRN_LAUNCH_DESC_INIT;
  launch.kernel = kernel;
  launch.args = bindings;
  launch.arg_count = 3;
  launch.profile = profile;
  const double sim_ns = median_ns_per_op(runs, 1, [&] {
    check(trn_queue_launch(queue, &launch, nullptr, nullptr), "trn_queue_launch");
    check(trn_queue_finish(queue, kFinishTimeoutNs), "trn_queue_finish");
  });
  check(trn_mem_read(mem[2], 0, out.data(), sizes[2]), "trn_mem_read");
  trn_profile_summary_t summary = TRN_PROFILE_SUMMARY_INIT;
  check(trn_profile_get_summary(profile, &summary), "trn_profile_get_summary");
  trn_profile_destroy(profile);
  trn_queue_destroy(queue);
  for (trn_mem_t m : mem) trn_mem_free(m);
  trn_pool_destroy(pool);
  trn_kernel_destroy(kernel);

  // Baselines: the same product, C[M,N] = lhsT^T @ rhs, in one library call, on one thread (as
  // the simulator computes) and on every thread.
  const auto m = static_cast<dnnl_dim_t>(n);
  const int all_threads = omp_get_max_threads();
  const bool fp32 = c.dtype == DType::kF32;
  const OpenBlas *blas = fp32 ? open_blas() : nullptr;
  if (fp32 && blas == nullptr) return 1;
  auto baseline = [&](int threads) {
    omp_set_num_threads(threads);
    if (blas) blas->set_num_threads(threads);
    const double ns = median_ns_per_op(runs, 1, [&] {
      if (fp32)
        blas->sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(n),
                    static_cast<int>(n), static_cast<int>(n), 1.0f, lhs32.data(),
                    static_cast<int>(n), rhs32.data(), static_cast<int>(n), 0.0f, ref.data(),
                    static_cast<int>(n));
      else
        dnnl_gemm_bf16bf16f32('T', 'N', m, m, m, 1.0f, lhs.data(), m, rhs.data(), m, 0.0f,
                              ref.data(), m);
    });
    omp_set_num_threads(all_threads);
    if (blas) blas->set_num_threads(all_threads);
    return ns;
  };
  const std::string lib = fp32 ? "OpenBLAS sgemm" : "oneDNN bf16 gemm";
  const double base1_ns = baseline(1), base_all_ns = baseline(all_threads);
  // The simulated kernel computed the same numbers (up to fp32 summation order).
  double worst = 0;
  for (size_t i = 0; i < elems; ++i)
    worst = std::max(worst, static_cast<double>(std::abs(out[i] - ref[i])));
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
  const double sim_s = double(summary.total_ns) * 1e-9;
  const double peak = double(c.dtype == DType::kF32 ? props.peak_fp32_flops_per_core
                                                    : props.peak_bf16_flops_per_core);
  Result mfu{
      "matmul",    name + " simulated TFLOPS (" + trn_generation_name(props.generation) + ")",
      "TFLOPS",    flops / sim_s / 1e12,
      peak / 1e12, "Tensor engine peak",
      true};
  print(mfu);
  return 0;
}

}  // namespace

int bench_matmul(int argc, char **argv) {
  const bool quick = has_flag(argc, argv, "--quick");
  select_generation(argc, argv);
  const Context ctx = open_device();
  const uint64_t n = quick ? 512 : 2048;
  const int runs = quick ? 3 : 5;
  for (DType t : {DType::kBf16, DType::kF32})
    if (int rc = run_case({n, t}, ctx, runs)) return rc;
  return 0;
}

}  // namespace trn::bench
