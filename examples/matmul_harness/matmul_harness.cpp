// A kernel test harness for the tiled matmul: builds out[M,N] = lhsT[K,M]^T @ rhs[K,N] with the
// kernel builder (src/kbuild) for the device it finds, loads it through the C API, runs it on
// core 0 with a trace profile, checks the result against a host reference and prints what the
// simulated core did: time, TFLOPS, MFU, engine and DMA activity. The trace opens in Perfetto.
//
//   trn-example-matmul-harness [--m M] [--n N] [--k K] [--dtype bf16|f32] [--profile PATH]
//                              [--check | --no-check] [--seed S]
//
// Exit status: 0 when the result matches, 1 on a mismatch or any failure, 2 for bad options.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "isa/container.hpp"
#include "isa/dtype.hpp"
#include "kbuild/build_target.hpp"
#include "kbuild/kernels/tiled_matmul.hpp"
#include "trn/trn.h"

namespace {

using Clock = std::chrono::steady_clock;
using trn::isa::DType;

constexpr uint64_t kFinishTimeoutNs = 1800ull * 1000 * 1000 * 1000;  // 30 min
constexpr uint64_t kFullCheckLimit = uint64_t{1} << 30;              // m*n*k up to 1024^3
constexpr size_t kSamples = 4096;
constexpr double kAtol = 1e-2, kRtol = 1e-2;

struct Options {
  uint64_t m = 1024, n = 2048, k = 1024;
  std::string dtype = "bf16";
  std::string profile = "matmul_profile.json";
  bool check = true;
  uint32_t seed = 1;
};

// A failed call: its name, result and the runtime's sentence.
bool failed(trn_result_t result, const char *what) {
  if (result == TRN_SUCCESS) return false;
  std::fprintf(stderr, "matmul_harness: %s failed: %s: %s\n", what, trn_result_name(result),
               trn_last_error());
  return true;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// "812.345 us" or "12.345 ms": simulated (or host) time in the unit that reads best.
std::string format_time(double ns) {
  char text[64];
  if (ns < 1e6)
    std::snprintf(text, sizeof text, "%.3f us", ns / 1e3);
  else if (ns < 1e9)
    std::snprintf(text, sizeof text, "%.3f ms", ns / 1e6);
  else
    std::snprintf(text, sizeof text, "%.3f s", ns / 1e9);
  return text;
}

// The runtime objects; released in reverse order of creation whatever was made.
struct Resources {
  trn_kernel_t kernel = nullptr;
  trn_pool_t pool = nullptr;
  trn_mem_t mem[3] = {nullptr, nullptr, nullptr};
  trn_queue_t queue = nullptr;
  trn_profile_t profile = nullptr;
  Resources() = default;
  Resources(const Resources &) = delete;
  Resources &operator=(const Resources &) = delete;
  ~Resources() {
    trn_profile_destroy(profile);
    trn_queue_destroy(queue);
    for (trn_mem_t m : mem) trn_mem_free(m);
    trn_pool_destroy(pool);
    trn_kernel_destroy(kernel);
    trn_runtime_shutdown();
  }
};

// out = lhsT^T @ rhs in double, blocked over rows of out so rhs is read M/16 times.
std::vector<double> reference(const std::vector<float> &lhsT, const std::vector<float> &rhs,
                              uint64_t m, uint64_t n, uint64_t k) {
  constexpr uint64_t kRows = 16;
  std::vector<double> out(m * n, 0.0);
  for (uint64_t i0 = 0; i0 < m; i0 += kRows) {
    const uint64_t i1 = std::min(m, i0 + kRows);
    for (uint64_t kk = 0; kk < k; ++kk) {
      const float *r = rhs.data() + kk * n;
      for (uint64_t i = i0; i < i1; ++i) {
        const double a = lhsT[kk * m + i];
        double *o = out.data() + i * n;
        for (uint64_t j = 0; j < n; ++j) o[j] += a * static_cast<double>(r[j]);
      }
    }
  }
  return out;
}

double dot(const std::vector<float> &lhsT, const std::vector<float> &rhs, uint64_t m, uint64_t n,
           uint64_t k, uint64_t i, uint64_t j) {
  double sum = 0;
  for (uint64_t kk = 0; kk < k; ++kk)
    sum += static_cast<double>(lhsT[kk * m + i]) * static_cast<double>(rhs[kk * n + j]);
  return sum;
}

struct CheckResult {
  uint64_t checked = 0, mismatches = 0;
  double max_abs_error = 0;
};

// Compares out against exact dot products: all of them for small shapes, else a random sample.
CheckResult check_result(const std::vector<float> &lhsT, const std::vector<float> &rhs,
                         const std::vector<float> &out, const Options &o, bool full) {
  CheckResult r;
  auto compare = [&](uint64_t i, uint64_t j, double expected) {
    const double got = out[i * o.n + j];
    const double error = std::abs(got - expected);
    ++r.checked;
    r.max_abs_error = std::max(r.max_abs_error, std::isnan(got) ? INFINITY : error);
    if (!(error <= kAtol + kRtol * std::abs(expected))) {
      if (r.mismatches++ < 5)
        std::fprintf(stderr, "matmul_harness: out[%llu,%llu] = %.6g, expected %.6g\n",
                     static_cast<unsigned long long>(i), static_cast<unsigned long long>(j), got,
                     expected);
    }
  };
  if (full) {
    const std::vector<double> ref = reference(lhsT, rhs, o.m, o.n, o.k);
    for (uint64_t i = 0; i < o.m; ++i)
      for (uint64_t j = 0; j < o.n; ++j) compare(i, j, ref[i * o.n + j]);
  } else {
    std::mt19937_64 rng(o.seed + 1);
    std::uniform_int_distribution<uint64_t> row(0, o.m - 1), col(0, o.n - 1);
    for (size_t s = 0; s < kSamples; ++s) {
      const uint64_t i = row(rng), j = col(rng);
      compare(i, j, dot(lhsT, rhs, o.m, o.n, o.k, i, j));
    }
  }
  return r;
}

int run(const Options &o) {
  const auto program_start = Clock::now();
  const DType in_dtype = o.dtype == "f32" ? DType::kF32 : DType::kBf16;

  // Device 0, core 0, and what the kernel plan may use of it.
  uint32_t count = 1;
  trn_device_t device = nullptr;
  if (failed(trn_device_get(&count, &device), "trn_device_get")) return 1;
  if (count == 0) {
    std::fprintf(stderr, "matmul_harness: no device (see trn-ls)\n");
    return 1;
  }
  trn_device_properties_t props = TRN_DEVICE_PROPERTIES_INIT;
  if (failed(trn_device_get_properties(device, &props), "trn_device_get_properties")) return 1;
  trn_core_t core = nullptr;
  count = 1;
  if (failed(trn_core_get(device, &count, &core), "trn_core_get")) return 1;
  if (count == 0) {
    std::fprintf(stderr, "matmul_harness: no core of device 0 is visible to this process\n");
    return 1;
  }
  trn_core_properties_t cp = TRN_CORE_PROPERTIES_INIT;
  if (failed(trn_core_get_properties(core, &cp), "trn_core_get_properties")) return 1;

  // The kernel: built, serialised and loaded as any kernel binary would be.
  // For the device's core (limits, clocks, the SBUF it may fill), as the runtime reports it.
  trn::kbuild::MatmulConfig config{o.m, o.n, o.k, in_dtype, DType::kF32};
  config.target = trn::kbuild::build_target(props);
  config.sbuf_bytes_per_partition = config.target.sbuf_bytes();
  trn::kbuild::MatmulPlan plan;
  auto built = trn::kbuild::build_tiled_matmul(config, &plan);
  if (const auto *why = std::get_if<std::string>(&built)) {
    std::fprintf(stderr, "matmul_harness: %s\n", why->c_str());
    return 1;
  }
  const std::vector<std::byte> image = trn::isa::write_kernel(std::get<trn::isa::Program>(built));
  Resources res;
  if (failed(trn_kernel_load(device, image.data(), image.size(), &res.kernel), "trn_kernel_load"))
    return 1;
  std::printf("matmul %llux%llux%llu (M x N x K): out[M,N] f32 = lhsT[K,M]^T @ rhs[K,N] %s\n",
              static_cast<unsigned long long>(o.m), static_cast<unsigned long long>(o.n),
              static_cast<unsigned long long>(o.k), o.dtype.c_str());
  std::printf(
      "device %u (%s), core %u; plan: %ux%u output blocks, %u lhsT ring slots, "
      "%llu of %u SBUF bytes per partition\n",
      props.index, trn_generation_name(props.generation), cp.global_id, plan.block_m, plan.block_n,
      plan.ring_slots, static_cast<unsigned long long>(plan.sbuf_bytes_used),
      config.sbuf_bytes_per_partition);

  // Inputs: uniform in [-1, 1), rounded to the kernel's dtype; the host keeps the exact values
  // the kernel sees for the reference.
  const size_t es = trn::isa::dtype_size(in_dtype);
  const size_t lhs_elems = o.k * o.m, rhs_elems = o.k * o.n, out_elems = o.m * o.n;
  std::vector<float> lhsT(lhs_elems), rhs(rhs_elems), out(out_elems);
  std::vector<std::byte> lhs_bytes(lhs_elems * es), rhs_bytes(rhs_elems * es);
  {
    std::mt19937 rng(o.seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float &v : lhsT) v = dist(rng);
    for (float &v : rhs) v = dist(rng);
    trn::isa::store_f32(in_dtype, lhsT.data(), lhs_bytes.data(), lhs_elems);
    trn::isa::store_f32(in_dtype, rhs.data(), rhs_bytes.data(), rhs_elems);
    trn::isa::load_f32(in_dtype, lhs_bytes.data(), lhsT.data(), lhs_elems);
    trn::isa::load_f32(in_dtype, rhs_bytes.data(), rhs.data(), rhs_elems);
  }

  trn_pool_desc_t pool_desc = TRN_POOL_DESC_INIT;
  pool_desc.kind = TRN_POOL_KIND_DEVICE;
  pool_desc.hbm_bank = cp.hbm_bank;
  if (failed(trn_pool_create(device, &pool_desc, &res.pool), "trn_pool_create")) return 1;
  const uint64_t sizes[3] = {lhs_bytes.size(), rhs_bytes.size(), out_elems * sizeof(float)};
  for (int i = 0; i < 3; ++i)
    if (failed(trn_mem_alloc(res.pool, sizes[i], 0, TRN_MEM_CATEGORY_TENSORS, 0, &res.mem[i]),
               "trn_mem_alloc"))
      return 1;
  if (failed(trn_mem_write(res.mem[0], 0, lhs_bytes.data(), sizes[0]), "trn_mem_write") ||
      failed(trn_mem_write(res.mem[1], 0, rhs_bytes.data(), sizes[1]), "trn_mem_write") ||
      failed(trn_mem_set(res.mem[2], 0, 0xff, sizes[2]), "trn_mem_set"))  // NaN: unwritten shows
    return 1;

  // Launch with a trace profile on a compute queue of core 0, and wait.
  trn_queue_desc_t queue_desc = TRN_QUEUE_DESC_INIT;
  queue_desc.kind = TRN_QUEUE_KIND_COMPUTE;
  queue_desc.core = core;
  if (failed(trn_queue_create(&queue_desc, &res.queue), "trn_queue_create")) return 1;
  if (failed(trn_profile_create(TRN_PROFILE_FLAG_TRACE, &res.profile), "trn_profile_create"))
    return 1;
  const trn_kernel_binding_t bindings[3] = {{res.mem[0], 0}, {res.mem[1], 0}, {res.mem[2], 0}};
  trn_launch_desc_t launch = TRN_LAUNCH_DESC_INIT;
  launch.kernel = res.kernel;
  launch.args = bindings;
  launch.arg_count = 3;
  launch.profile = res.profile;
  const auto launch_start = Clock::now();
  if (failed(trn_queue_launch(res.queue, &launch, nullptr, nullptr), "trn_queue_launch")) return 1;
  if (const trn_result_t r = trn_queue_finish(res.queue, kFinishTimeoutNs); r != TRN_SUCCESS) {
    trn_queue_fault_t fault = TRN_QUEUE_FAULT_INIT;
    if (trn_queue_get_fault(res.queue, &fault) == TRN_SUCCESS && fault.result != TRN_SUCCESS)
      std::fprintf(stderr, "matmul_harness: kernel %s faulted on %s[%u] %s: %s\n", fault.kernel,
                   fault.engine, fault.instruction, fault.opcode, fault.reason);
    failed(r, "trn_queue_finish");
    return 1;
  }
  const double launch_s = seconds_since(launch_start);
  if (failed(trn_mem_read(res.mem[2], 0, out.data(), sizes[2]), "trn_mem_read")) return 1;

  // What the simulated core did.
  trn_profile_summary_t s = TRN_PROFILE_SUMMARY_INIT;
  if (failed(trn_profile_get_summary(res.profile, &s), "trn_profile_get_summary")) return 1;
  const double flops =
      2.0 * static_cast<double>(o.m) * static_cast<double>(o.n) * static_cast<double>(o.k);
  const double sim_s = static_cast<double>(s.total_ns) * 1e-9;
  const double tflops = sim_s > 0 ? flops / sim_s / 1e12 : 0.0;
  std::printf("simulated time: %s\n", format_time(static_cast<double>(s.total_ns)).c_str());
  std::printf("throughput: %.2f TFLOPS; MFU %.1f%% of the %.1f TFLOPS bf16 peak", tflops,
              s.mfu_percent, s.peak_flops / 1e12);
  if (in_dtype == DType::kF32 && props.peak_fp32_flops_per_core)
    std::printf(" (%.1f%% of the %.1f TFLOPS fp32 peak)",
                100.0 * tflops * 1e12 / static_cast<double>(props.peak_fp32_flops_per_core),
                static_cast<double>(props.peak_fp32_flops_per_core) / 1e12);
  std::printf("\n");
  std::printf(
      "engines active: Tensor %.1f%%, Vector %.1f%%, Scalar %.1f%%, GpSimd %.1f%%, Sync %.1f%%\n",
      s.engine_active_percent[TRN_ENGINE_TENSOR], s.engine_active_percent[TRN_ENGINE_VECTOR],
      s.engine_active_percent[TRN_ENGINE_SCALAR], s.engine_active_percent[TRN_ENGINE_GPSIMD],
      s.engine_active_percent[TRN_ENGINE_SYNC]);
  std::printf("DMA: %llu transfers, %.1f MiB (%.1f GB/s), utilisation %.1f%% of 16 queues\n",
              static_cast<unsigned long long>(s.dma_transfers),
              static_cast<double>(s.dma_bytes) / (1024.0 * 1024.0),
              sim_s > 0 ? static_cast<double>(s.dma_bytes) / sim_s / 1e9 : 0.0,
              s.dma_utilization_percent);

  int status = 0;
  if (o.check) {
    const auto check_start = Clock::now();
    const bool full = o.m * o.n * o.k <= kFullCheckLimit;
    const CheckResult r = check_result(lhsT, rhs, out, o, full);
    std::printf(
        "check: %s, %llu of %llu %s elements within atol %g rtol %g "
        "(max abs error %.3g, %.2f s)\n",
        r.mismatches ? "FAILED" : "passed",
        static_cast<unsigned long long>(r.checked - r.mismatches),
        static_cast<unsigned long long>(r.checked), full ? "output" : "sampled", kAtol, kRtol,
        r.max_abs_error, seconds_since(check_start));
    if (r.mismatches) status = 1;
  } else {
    std::printf("check: skipped (--no-check)\n");
  }

  const std::string profile_path = std::filesystem::absolute(o.profile).lexically_normal();
  if (failed(trn_profile_write_trace(res.profile, profile_path.c_str()), "trn_profile_write_trace"))
    return 1;
  std::printf("host time: %.2f s simulating (%.2f s launch to finish), %.2f s in all\n",
              static_cast<double>(s.host_ns) * 1e-9, launch_s, seconds_since(program_start));
  std::printf("profile written to %s (open in https://ui.perfetto.dev or chrome://tracing)\n",
              profile_path.c_str());
  return status;
}

}  // namespace

int main(int argc, char **argv) {
  Options o;
  CLI::App app{"Builds, runs and checks the tiled matmul kernel on a (simulated) NeuronCore."};
  app.add_option("--m", o.m, "rows of out (a multiple of 128)")->capture_default_str();
  app.add_option("--n", o.n, "columns of out (a multiple of 512)")->capture_default_str();
  app.add_option("--k", o.k, "contraction length (a multiple of 128)")->capture_default_str();
  app.add_option("--dtype", o.dtype, "input dtype; the output is f32")
      ->check(CLI::IsMember({"bf16", "f32"}))
      ->capture_default_str();
  app.add_option("--profile", o.profile, "where to write the Chrome trace")->capture_default_str();
  app.add_flag("--check,!--no-check", o.check,
               "compare with a host reference (all of out up to ~1024^3, else 4096 samples)");
  app.add_option("--seed", o.seed, "seed of the random inputs")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    return run(o);
  } catch (const std::exception &e) {  // e.g. std::bad_alloc for a huge shape
    std::fprintf(stderr, "matmul_harness: %s\n", e.what());
    return 1;
  }
}
