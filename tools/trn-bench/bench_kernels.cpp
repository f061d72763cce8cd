// trn-bench kernels: the kernels written with the kernel builder, each run once on a simulated
// core through the C API, against its roofline: the larger of the compute-bound time (Tensor
// engine peak for matmul; for the rest, every elementwise pass the math needs spread over the
// 128 lanes of the Vector, Scalar and GpSimd engines at once) and the HBM-bound time (every
// argument read or written once at the core's share of the device's HBM bandwidth). The ratio
// is roofline time / simulated time; `activity` says where the simulated time went.
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench.hpp"
#include "isa/container.hpp"
#include "isa/dtype.hpp"
#include "kbuild/kernels/elementwise.hpp"
#include "kbuild/kernels/norms.hpp"
#include "kbuild/kernels/softmax.hpp"
#include "kbuild/kernels/tiled_matmul.hpp"
#include "kbuild/kernels/transpose.hpp"

namespace trn::bench {

namespace {

using isa::DType;
constexpr uint64_t kFinishTimeoutNs = 600ull * 1000 * 1000 * 1000;

struct KernelCase {
  std::string name;
  kbuild::Built built;
  double flops = 0;           // Tensor engine work (matmul)
  double element_passes = 0;  // elementwise work: elements x passes the math needs
  bool fp32 = false;
};

// Simulated time of one launch of `program` on the bench's core, with random inputs; fills the
// profile summary.
double simulated_seconds(const Context &ctx, const isa::Program &program,
                         trn_profile_summary_t *summary) {
  const std::vector<std::byte> image = isa::write_kernel(program);
  trn_kernel_t kernel = nullptr;
  check(trn_kernel_load(ctx.device, image.data(), image.size(), &kernel), "trn_kernel_load");
  trn_core_properties_t core_props = TRN_CORE_PROPERTIES_INIT;
  check(trn_core_get_properties(ctx.core, &core_props), "trn_core_get_properties");
  trn_pool_desc_t pool_desc = TRN_POOL_DESC_INIT;
  pool_desc.hbm_bank = core_props.hbm_bank;
  trn_pool_t pool = nullptr;
  check(trn_pool_create(ctx.device, &pool_desc, &pool), "trn_pool_create");
  std::vector<trn_mem_t> mems;
  std::vector<trn_kernel_binding_t> bindings;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const isa::Argument &a : program.args) {
    trn_mem_t m = nullptr;
    check(trn_mem_alloc(pool, a.bytes(), 0, TRN_MEM_CATEGORY_TENSORS, 0, &m), "trn_mem_alloc");
    std::vector<float> values(a.elements());
    for (float &v : values) v = dist(rng);
    std::vector<std::byte> bytes(a.bytes());
    isa::store_f32(a.dtype, values.data(), bytes.data(), values.size());
    check(trn_mem_write(m, 0, bytes.data(), bytes.size()), "trn_mem_write");
    mems.push_back(m);
    bindings.push_back({m, 0});
  }
  trn_queue_desc_t queue_desc = TRN_QUEUE_DESC_INIT;
  queue_desc.kind = TRN_QUEUE_KIND_COMPUTE;
  queue_desc.core = ctx.core;
  trn_queue_t queue = nullptr;
  check(trn_queue_create(&queue_desc, &queue), "trn_queue_create");
  trn_profile_t profile = nullptr;
  check(trn_profile_create(0, &profile), "trn_profile_create");
  trn_launch_desc_t launch = TRN_LAUNCH_DESC_INIT;
  launch.kernel = kernel;
  launch.args = bindings.data();
  launch.arg_count = static_cast<uint32_t>(bindings.size());
  launch.profile = profile;
  check(trn_queue_launch(queue, &launch, nullptr, nullptr), "trn_queue_launch");
  check(trn_queue_finish(queue, kFinishTimeoutNs), "trn_queue_finish");
  check(trn_profile_get_summary(profile, summary), "trn_profile_get_summary");
  trn_profile_destroy(profile);
  trn_queue_destroy(queue);
  for (trn_mem_t m : mems) trn_mem_free(m);
  trn_pool_destroy(pool);
  trn_kernel_destroy(kernel);
  return double(summary->total_ns) * 1e-9;
}

uint64_t argument_bytes(const isa::Program &p) {
  uint64_t n = 0;
  for (const isa::Argument &a : p.args) n += a.bytes();
  return n;
}

std::vector<KernelCase> cases(const kbuild::BuildTarget &target, bool quick) {
  std::vector<KernelCase> out;
  const uint64_t mm = quick ? 1024 : 4096, rows = quick ? 1024 : 4096, cols = quick ? 2048 : 4096;
  for (DType t : {DType::kBf16, DType::kF32}) {
    const std::string dt = isa::dtype_name(t);
    const double elements = double(rows) * double(cols);
    kbuild::MatmulConfig m{mm, mm, mm, t, DType::kF32};
    m.target = target;
    out.push_back({"matmul " + std::to_string(mm) + "^3 " + dt, kbuild::build_tiled_matmul(m),
                   2.0 * double(mm) * double(mm) * double(mm), 0, t == DType::kF32});
    out.push_back(
        {"elementwise add " + std::to_string(rows) + "x" + std::to_string(cols) + " " + dt,
         kbuild::build_vector_add(rows, cols, t, target), 0, elements});
    kbuild::UnaryConfig u{rows,  cols, t, t, kbuild::UnaryOp::activation(isa::ActFunc::kGelu),
                          target};
    out.push_back(
        {"elementwise gelu " + std::to_string(rows) + "x" + std::to_string(cols) + " " + dt,
         kbuild::build_unary(u), 0, elements});
    kbuild::SoftmaxConfig s{rows, cols, t, t, target};
    // max, exp (with its sum), divide: three passes.
    out.push_back({"softmax " + std::to_string(rows) + "x" + std::to_string(cols) + " " + dt,
                   kbuild::build_softmax(s), 0, 3 * elements});
    kbuild::NormConfig n{rows, cols, t, t, 1e-5f, true, target};
    // mean, centre, square-sum, scale, gamma, beta: six passes; RMS: square-sum, scale, gamma.
    out.push_back({"layernorm " + std::to_string(rows) + "x" + std::to_string(cols) + " " + dt,
                   kbuild::build_layernorm(n), 0, 6 * elements});
    out.push_back({"rmsnorm " + std::to_string(rows) + "x" + std::to_string(cols) + " " + dt,
                   kbuild::build_rmsnorm(n), 0, 3 * elements});
    kbuild::TransposeConfig tr{rows, cols, t, target};
    out.push_back({"transpose " + std::to_string(rows) + "x" + std::to_string(cols) + " " + dt,
                   kbuild::build_transpose(tr), 0, elements});
  }
  return out;
}

}  // namespace

int bench_kernels(int argc, char **argv) {
  const bool quick = has_flag(argc, argv, "--quick");
  select_generation(argc, argv);
  const Context ctx = open_device();
  trn_device_properties_t props = TRN_DEVICE_PROPERTIES_INIT;
  check(trn_device_get_properties(ctx.device, &props), "trn_device_get_properties");
  const kbuild::BuildTarget target = kbuild::build_target(props);
  // One NeuronCore's share of the device's HBM bandwidth; its engines' elementwise rate.
  const double hbm_per_core =
      double(props.hbm_bandwidth_bytes_per_s) / double(std::max(1u, props.physical_core_count));
  const double lanes_per_s =
      128.0 * double(props.vector_clock_hz + props.scalar_clock_hz + props.gpsimd_clock_hz);
  for (KernelCase &c : cases(target, quick)) {
    if (auto *err = std::get_if<std::string>(&c.built)) {
      std::fprintf(stderr, "trn-bench kernels: %s: %s\n", c.name.c_str(), err->c_str());
      return 1;
    }
    const isa::Program &program = std::get<isa::Program>(c.built);
    trn_profile_summary_t summary = TRN_PROFILE_SUMMARY_INIT;
    const double sim_s = simulated_seconds(ctx, program, &summary);
    const double bytes = double(argument_bytes(program));
    const double peak =
        double(c.fp32 ? props.peak_fp32_flops_per_core : props.peak_bf16_flops_per_core);
    const double compute_s = c.flops / peak + c.element_passes / lanes_per_s;
    const double roofline_s = std::max(compute_s, bytes / hbm_per_core);
    const bool matmul = c.flops > 0;
    const double work = matmul ? c.flops / 1e12 : bytes / 1e9;
    Result r{"kernels",
             c.name + " (" + trn_generation_name(props.generation) + ")",
             matmul ? "TFLOPS" : "GB/s",
             work / sim_s,
             work / roofline_s,
             "roofline",
             true};
    Activity activity;
    static const char *kEngines[] = {"tensor", "vector", "scalar", "gpsimd", "sync"};
    activity.push_back({"simulated_us", sim_s * 1e6});
    activity.push_back({"roofline_us", roofline_s * 1e6});
    for (int e = 0; e < TRN_ENGINE_COUNT && e < 5; ++e)
      activity.push_back(
          {std::string(kEngines[e]) + "_active_percent", summary.engine_active_percent[e]});
    activity.push_back({"dma_utilization_percent", summary.dma_utilization_percent});
    print(r, activity);
  }
  return 0;
}

}  // namespace trn::bench
