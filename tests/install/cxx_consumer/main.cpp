// A C++ program that uses an installed trn the way a user's project would: enumerates the
// devices through libtrn, reads a safetensors header with trn::safetensors, builds a kernel with
// the installed kernel builder (trn::kbuild) and runs it, doubles the result with an eager op
// (trn::ops) and all-reduces it over two ranks (trn::comm).
#include <trn/trn.h>
#include <trn/trn_comm.h>
#include <trn/trn_ops.h>

#include <cstdio>
#include <string>
#include <trn/safetensors.hpp>
#include <variant>
#include <vector>

#include "isa/container.hpp"
#include "kbuild/build_target.hpp"
#include "kbuild/kernel_builder.hpp"

namespace {

bool failed(trn_result_t r, const char *what) {
  if (r == TRN_SUCCESS) return false;
  std::fprintf(stderr, "%s: %s\n", what, trn_last_error());
  return true;
}

constexpr uint32_t kRows = 128, kCols = 64;

// y = x * 3, written with the kernel builder.
std::variant<trn::isa::Program, std::string> build_triple(const trn::kbuild::BuildTarget &target) {
  using namespace trn::kbuild;
  KernelBuilder kb("triple", target);
  const HbmTensor x = kb.input("x", trn::isa::DType::kF32, {kRows, kCols});
  const HbmTensor y = kb.output("y", trn::isa::DType::kF32, {kRows, kCols});
  const Tile t = kb.sbuf(trn::isa::DType::kF32, kRows, {kCols}, "x");
  kb.load(t, x.tile(0, kRows, 0, kCols));
  kb.tensor_scalar(t, t, AluOp::kMultiply, 3.0f);
  kb.store(y.tile(0, kRows, 0, kCols), t);
  return kb.finish();
}

}  // namespace

int main() {
  if (trn_get_version() < TRN_API_VERSION) {
    std::fprintf(stderr, "library API %u.%u is older than the header's\n",
                 TRN_VERSION_MAJOR(trn_get_version()), TRN_VERSION_MINOR(trn_get_version()));
    return 1;
  }
  uint32_t count = 0;
  if (trn_device_get(&count, nullptr) != TRN_SUCCESS || count == 0) {
    std::fprintf(stderr, "no device: %s\n", trn_last_error());
    return 1;
  }
  std::vector<trn_device_t> devices(count);
  if (trn_device_get(&count, devices.data()) != TRN_SUCCESS) return 1;
  trn_device_t device = devices[0];
  trn_device_properties_t p = TRN_DEVICE_PROPERTIES_INIT;
  if (trn_device_get_properties(device, &p) != TRN_SUCCESS) return 1;
  std::printf("trn %s: %u device(s), device 0 is %s with %u cores; %s is %u bytes\n",
              trn_get_version_string(), count, trn_generation_name(p.generation), p.core_count,
              trn_dtype_name(TRN_DTYPE_BF16), trn_dtype_size(TRN_DTYPE_BF16));
  const std::string header = R"({"w":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})";
  std::vector<uint8_t> file(8);
  file[0] = static_cast<uint8_t>(header.size());
  file.insert(file.end(), header.begin(), header.end());
  file.resize(file.size() + 4);
  try {
    const auto h = trn::safetensors::parse_header(file.data(), file.size(), file.size());
    std::printf("safetensors: %zu tensor, '%s' of %s\n", h.tensors.size(),
                h.tensors.at(0).name.c_str(), h.tensors.at(0).dtype_name.c_str());
  } catch (const trn::safetensors::Error &e) {
    std::fprintf(stderr, "safetensors: %s\n", e.what());
    return 1;
  }

  // The kernel builder's kernel, run on core 0.
  auto built = build_triple(trn::kbuild::build_target(p));
  if (auto *why = std::get_if<std::string>(&built)) {
    std::fprintf(stderr, "kernel builder: %s\n", why->c_str());
    return 1;
  }
  const std::vector<std::byte> image = trn::isa::write_kernel(std::get<trn::isa::Program>(built));
  trn_kernel_t kernel = nullptr;
  if (failed(trn_kernel_load(device, image.data(), image.size(), &kernel), "trn_kernel_load"))
    return 1;
  uint32_t core_count = 2;
  trn_core_t cores[2] = {nullptr, nullptr};
  if (failed(trn_core_get(device, &core_count, cores), "trn_core_get") || core_count < 2) return 1;
  trn_queue_t queues[2] = {nullptr, nullptr};
  trn_mem_t x[2] = {nullptr, nullptr}, y[2] = {nullptr, nullptr};
  trn_pool_t pool = nullptr;
  const trn_pool_desc_t pool_desc = TRN_POOL_DESC_INIT;
  if (failed(trn_pool_create(device, &pool_desc, &pool), "trn_pool_create")) return 1;
  const uint64_t n = kRows * kCols;
  std::vector<float> host(n);
  for (uint64_t i = 0; i < n; ++i) host[i] = static_cast<float>(i % 100);
  for (uint32_t r = 0; r < 2; ++r) {
    trn_queue_desc_t queue_desc = TRN_QUEUE_DESC_INIT;
    queue_desc.kind = TRN_QUEUE_KIND_COMPUTE;
    queue_desc.core = cores[r];
    if (failed(trn_queue_create(&queue_desc, &queues[r]), "trn_queue_create") ||
        failed(trn_mem_alloc(pool, n * 4, 0, TRN_MEM_CATEGORY_TENSORS, 0, &x[r]), "alloc") ||
        failed(trn_mem_alloc(pool, n * 4, 0, TRN_MEM_CATEGORY_TENSORS, 0, &y[r]), "alloc") ||
        failed(trn_mem_write(x[r], 0, host.data(), n * 4), "trn_mem_write"))
      return 1;
    const trn_kernel_binding_t bindings[2] = {{x[r], 0}, {y[r], 0}};
    trn_launch_desc_t launch = TRN_LAUNCH_DESC_INIT;
    launch.kernel = kernel;
    launch.args = bindings;
    launch.arg_count = 2;
    if (failed(trn_queue_launch(queues[r], &launch, nullptr, nullptr), "trn_queue_launch"))
      return 1;
    // Doubled by an eager op: y = 2 * y.
    trn_ops_tensor_t t{};
    const int64_t shape[1] = {static_cast<int64_t>(n)};
    if (trn_ops_tensor_init(&t, y[r], 0, TRN_DTYPE_F32, 1, shape) != TRN_SUCCESS ||
        trn_ops_binary_scalar(queues[r], TRN_OPS_MUL, &t, &t, 2.0, 0, nullptr) != TRN_SUCCESS) {
      std::fprintf(stderr, "trn_ops: %s\n", trn_last_error());
      return 1;
    }
  }
  // Summed over two ranks on cores 0 and 1: every element is 2 * 2 * 3 * x.
  trn_comm_t comms[2] = {nullptr, nullptr};
  if (trn_comm_init_all(2, cores, nullptr, comms) != TRN_SUCCESS) {
    std::fprintf(stderr, "trn_comm_init_all: %s\n", trn_comm_last_error());
    return 1;
  }
  for (uint32_t r = 0; r < 2; ++r)
    if (trn_comm_all_reduce(comms[r], queues[r], {y[r], 0}, {y[r], 0}, n, TRN_DTYPE_F32,
                            TRN_COMM_SUM, nullptr, nullptr) != TRN_SUCCESS) {
      std::fprintf(stderr, "trn_comm_all_reduce: %s\n", trn_comm_last_error());
      return 1;
    }
  std::vector<float> out(n);
  for (uint32_t r = 0; r < 2; ++r) {
    if (trn_comm_synchronize(comms[r], 60'000'000'000ull) != TRN_SUCCESS) {
      std::fprintf(stderr, "trn_comm_synchronize: %s\n", trn_comm_last_error());
      return 1;
    }
    if (failed(trn_mem_read(y[r], 0, out.data(), n * 4), "trn_mem_read")) return 1;
    for (uint64_t i = 0; i < n; ++i)
      if (out[i] != 12.0f * host[i]) {
        std::fprintf(stderr, "rank %u element %llu is %g, not %g\n", r,
                     static_cast<unsigned long long>(i), out[i], 12.0f * host[i]);
        return 1;
      }
  }
  std::printf("kernel builder, ops and comm: %llu elements of 2 ranks correct\n",
              static_cast<unsigned long long>(n));
  for (uint32_t r = 0; r < 2; ++r) {
    trn_comm_destroy(comms[r]);
    trn_queue_destroy(queues[r]);
    trn_mem_free(x[r]);
    trn_mem_free(y[r]);
  }
  trn_kernel_destroy(kernel);
  trn_pool_destroy(pool);
  return 0;
}
