// A kernel written with the kernel builder, end to end: a numerically stable row softmax as
// tiles and operations (docs/kbuild.md walks through it), built for the device it finds, loaded
// and launched through the C API, and checked against the host.
//
//   trn-example-kbuild-softmax [--rows R] [--cols C] [--save PATH]
//
// --save writes the kernel binary (trn-objdump prints it; trn-run runs it). Exit status: 0 when
// the result matches, 1 on a mismatch or any failure, 2 for bad options.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <vector>

#include "isa/container.hpp"
#include "kbuild/kernel_builder.hpp"
#include "trn/trn.h"

using namespace trn::kbuild;
using trn::isa::DType;

// y[r, :] = exp(x[r, :] - max(x[r, :])) / sum(exp(x[r, :] - max(x[r, :])))
std::variant<trn::isa::Program, std::string> build_softmax(const BuildTarget &target, uint64_t rows,
                                                           uint32_t cols) {
  KernelBuilder kb("softmax", target);
  const HbmTensor x = kb.input("x", DType::kF32, {rows, cols});
  const HbmTensor y = kb.output("y", DType::kF32, {rows, cols});
  for (uint64_t r = 0; r < rows; r += 128) {
    const auto p = static_cast<uint32_t>(std::min<uint64_t>(128, rows - r));
    // A tile per row block: the builder places it (the next block's lands elsewhere, so its load
    // overlaps this block's compute) and frees it when `t` goes out of scope.
    const Tile t = kb.sbuf(DType::kF32, p, {cols}, "x");
    kb.load(t, x.tile(r, p, 0, cols));
    const Tile neg_max = kb.sbuf(DType::kF32, p, {1}, "-max");
    kb.reduce(neg_max, t, AluOp::kMax, 0, /*negate=*/true);  // vector engine
    const Tile sum = kb.sbuf(DType::kF32, p, {1}, "sum");
    // exp(x - max) in place, and its row sum, in one scalar-engine instruction.
    kb.activation(t, t, ActFunc::kExp, 1.0f, neg_max, sum);
    kb.tensor_scalar(t, t, AluOp::kDivide, sum);  // whichever engine is free
    kb.store(y.tile(r, p, 0, cols), t);           // waits for the division: the builder knows
  }
  return kb.finish();
}

namespace {

bool failed(trn_result_t result, const char *what) {
  if (result == TRN_SUCCESS) return false;
  std::fprintf(stderr, "kbuild_softmax: %s failed: %s: %s\n", what, trn_result_name(result),
               trn_last_error());
  return true;
}

}  // namespace

int main(int argc, char **argv) {
  uint64_t rows = 1000;
  uint32_t cols = 2048;
  std::string save;
  CLI::App app{"A row softmax written with the kernel builder, run on device 0"};
  app.add_option("--rows", rows, "rows of x")->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  app.add_option("--cols", cols, "columns of x")->check(CLI::Range(1u, 12288u));
  app.add_option("--save", save, "write the kernel binary here");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  uint32_t count = 1;
  trn_device_t device = nullptr;
  if (failed(trn_device_get(&count, &device), "trn_device_get")) return 1;
  if (count == 0) {
    std::fprintf(stderr, "kbuild_softmax: no device\n");
    return 1;
  }
  trn_device_properties_t props = TRN_DEVICE_PROPERTIES_INIT;
  if (failed(trn_device_get_properties(device, &props), "trn_device_get_properties")) return 1;

  auto built = build_softmax(build_target(props), rows, cols);
  if (auto *err = std::get_if<std::string>(&built)) {
    std::fprintf(stderr, "kbuild_softmax: %s\n", err->c_str());
    return 1;
  }
  const std::vector<std::byte> image = trn::isa::write_kernel(std::get<trn::isa::Program>(built));
  if (!save.empty()) {
    std::ofstream(save, std::ios::binary)
        .write(reinterpret_cast<const char *>(image.data()),
               static_cast<std::streamsize>(image.size()));
    std::printf("kernel written to %s\n", save.c_str());
  }

  trn_kernel_t kernel = nullptr;
  if (failed(trn_kernel_load(device, image.data(), image.size(), &kernel), "trn_kernel_load"))
    return 1;
  count = 1;
  trn_core_t core = nullptr;
  if (failed(trn_core_get(device, &count, &core), "trn_core_get")) return 1;
  trn_pool_desc_t pool_desc = TRN_POOL_DESC_INIT;
  trn_pool_t pool = nullptr;
  if (failed(trn_pool_create(device, &pool_desc, &pool), "trn_pool_create")) return 1;
  const size_t n = rows * cols;
  trn_mem_t x = nullptr, y = nullptr;
  if (failed(trn_mem_alloc(pool, n * 4, 0, TRN_MEM_CATEGORY_TENSORS, 0, &x), "trn_mem_alloc") ||
      failed(trn_mem_alloc(pool, n * 4, 0, TRN_MEM_CATEGORY_TENSORS, 0, &y), "trn_mem_alloc"))
    return 1;
  std::vector<float> host(n), out(n);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-20.0f, 20.0f);
  for (float &v : host) v = dist(rng);
  if (failed(trn_mem_write(x, 0, host.data(), n * 4), "trn_mem_write")) return 1;

  trn_queue_desc_t queue_desc = TRN_QUEUE_DESC_INIT;
  queue_desc.kind = TRN_QUEUE_KIND_COMPUTE;
  queue_desc.core = core;
  trn_queue_t queue = nullptr;
  if (failed(trn_queue_create(&queue_desc, &queue), "trn_queue_create")) return 1;
  trn_profile_t profile = nullptr;
  if (failed(trn_profile_create(0, &profile), "trn_profile_create")) return 1;
  const trn_kernel_binding_t bindings[2] = {{x, 0}, {y, 0}};
  trn_launch_desc_t launch = TRN_LAUNCH_DESC_INIT;
  launch.kernel = kernel;
  launch.args = bindings;
  launch.arg_count = 2;
  launch.profile = profile;
  if (failed(trn_queue_launch(queue, &launch, nullptr, nullptr), "trn_queue_launch") ||
      failed(trn_queue_finish(queue, 60ull * 1000 * 1000 * 1000), "trn_queue_finish") ||
      failed(trn_mem_read(y, 0, out.data(), n * 4), "trn_mem_read"))
    return 1;
  trn_profile_summary_t summary = TRN_PROFILE_SUMMARY_INIT;
  if (failed(trn_profile_get_summary(profile, &summary), "trn_profile_get_summary")) return 1;

  double worst = 0;
  for (uint64_t r = 0; r < rows; ++r) {
    double mx = -INFINITY, sum = 0;
    for (uint32_t c = 0; c < cols; ++c) mx = std::max(mx, double(host[r * cols + c]));
    for (uint32_t c = 0; c < cols; ++c) sum += std::exp(double(host[r * cols + c]) - mx);
    for (uint32_t c = 0; c < cols; ++c) {
      const double want = std::exp(double(host[r * cols + c]) - mx) / sum;
      worst = std::max(worst, std::abs(out[r * cols + c] - want) / (want + 1e-30));
    }
  }
  std::printf(
      "softmax [%llu, %u] f32 on %s: %.3f us simulated; engines active: vector %.1f%%, "
      "scalar %.1f%%, gpsimd %.1f%%; DMA %.1f%%\n",
      static_cast<unsigned long long>(rows), cols, trn_generation_name(props.generation),
      double(summary.total_ns) / 1e3, summary.engine_active_percent[TRN_ENGINE_VECTOR],
      summary.engine_active_percent[TRN_ENGINE_SCALAR],
      summary.engine_active_percent[TRN_ENGINE_GPSIMD], summary.dma_utilization_percent);
  const bool ok = worst < 1e-5;
  std::printf("check: %s (worst relative error %.2g)\n", ok ? "ok" : "MISMATCH", worst);
  trn_profile_destroy(profile);
  trn_queue_destroy(queue);
  trn_mem_free(x);
  trn_mem_free(y);
  trn_pool_destroy(pool);
  trn_kernel_destroy(kernel);
  return ok ? 0 : 1;
}
