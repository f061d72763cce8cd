// trn-bench graph: host time to issue a captured sequence of 100 small ops as one program
// (trn_queue_execute) against issuing the same ops one by one, as CUDA graphs are measured
// against stream launches. Only issuing is timed: completion is the simulated device's work,
// the same either way.
#include <cstdio>
#include <string>
#include <variant>
#include <vector>

#include "bench.hpp"
#include "isa/container.hpp"
#include "kbuild/build_target.hpp"
#include "kbuild/kernels/elementwise.hpp"
#include "trn/trn.h"

namespace trn::bench {

namespace {

constexpr int kOps = 100;
constexpr uint64_t kRows = 128, kCols = 64, kBytes = kRows * kCols * sizeof(float);
constexpr uint64_t kLong = 60'000'000'000;

}  // namespace

int bench_graph(int argc, char **argv) {
  const bool quick = has_flag(argc, argv, "--quick");
  const Context ctx = open_device();
  trn_device_properties_t props = TRN_DEVICE_PROPERTIES_INIT;
  check(trn_device_get_properties(ctx.device, &props), "trn_device_get_properties");
  const auto built =
      kbuild::build_vector_add(kRows, kCols, isa::DType::kF32, kbuild::build_target(props));
  if (const auto *why = std::get_if<std::string>(&built)) {
    std::fprintf(stderr, "trn-bench graph: building the kernel: %s\n", why->c_str());
    return 1;
  }
  const auto image = isa::write_kernel(std::get<isa::Program>(built));
  trn_kernel_t add = nullptr;
  check(trn_kernel_load(ctx.device, image.data(), image.size(), &add), "trn_kernel_load");

  trn_pool_desc_t pool_desc = TRN_POOL_DESC_INIT;
  trn_pool_t pool = nullptr;
  check(trn_pool_create(ctx.device, &pool_desc, &pool), "trn_pool_create");
  // x, y, z: the launches' a, b and out; w: copies of z; v: memsets.
  std::vector<trn_mem_t> mems(5);
  for (auto &m : mems)
    check(trn_mem_alloc(pool, kBytes, 0, TRN_MEM_CATEGORY_TENSORS, 0, &m), "trn_mem_alloc");
  trn_queue_desc_t queue_desc = TRN_QUEUE_DESC_INIT;
  queue_desc.core = ctx.core;
  queue_desc.kind = TRN_QUEUE_KIND_COMPUTE;
  trn_queue_t queue = nullptr;
  check(trn_queue_create(&queue_desc, &queue), "trn_queue_create");

  trn_kernel_binding_t bindings[3] = {{mems[0], 0}, {mems[1], 0}, {mems[2], 0}};
  trn_launch_desc_t launch = TRN_LAUNCH_DESC_INIT;
  launch.kernel = add;
  launch.args = bindings;
  launch.arg_count = 3;
  // Two launches, a copy and a memset, 25 times: small ops of every kind a capture records.
  auto issue_ops = [&] {
    for (int i = 0; i < kOps; ++i) {
      switch (i % 4) {
        case 0:
        case 1:
          check(trn_queue_launch(queue, &launch, nullptr, nullptr), "trn_queue_launch");
          break;
        case 2:
          check(trn_queue_copy(queue, mems[3], 0, mems[2], 0, kBytes, nullptr, nullptr),
                "trn_queue_copy");
          break;
        case 3:
          check(trn_queue_memset(queue, mems[4], 0, 0, kBytes, nullptr, nullptr),
                "trn_queue_memset");
          break;
      }
    }
  };
  check(trn_queue_begin_capture(queue), "trn_queue_begin_capture");
  issue_ops();
  trn_program_t program = nullptr;
  check(trn_queue_end_capture(queue, &program), "trn_queue_end_capture");
  // The captured tensors are the allocations in the order the ops first used them.
  uint32_t count = 0;
  check(trn_program_get_tensors(program, &count, nullptr), "trn_program_get_tensors");
  std::vector<trn_program_tensor_t> tensors(count, TRN_PROGRAM_TENSOR_INIT);
  check(trn_program_get_tensors(program, &count, tensors.data()), "trn_program_get_tensors");
  trn_tensor_set_t inputs = nullptr, outputs = nullptr;
  check(trn_tensor_set_create(&inputs), "trn_tensor_set_create");
  check(trn_tensor_set_create(&outputs), "trn_tensor_set_create");
  for (uint32_t i = 0; i < count && i < mems.size(); ++i)
    check(trn_tensor_set_add(tensors[i].direction == TRN_ARG_OUT ? outputs : inputs,
                             tensors[i].name, mems[i], 0),
          "trn_tensor_set_add");

  const int runs = quick ? 5 : 41;
  // Interleaved, so that both see the same machine; the first of each is a warm-up.
  std::vector<double> one_by_one, replay;
  for (int r = 0; r < runs + 1; ++r) {
    double t0 = now_ns();
    issue_ops();
    double t1 = now_ns();
    check(trn_queue_finish(queue, kLong), "trn_queue_finish");
    if (r > 0) one_by_one.push_back(t1 - t0);
    t0 = now_ns();
    check(trn_queue_execute(queue, program, inputs, outputs, nullptr, nullptr),
          "trn_queue_execute");
    t1 = now_ns();
    check(trn_queue_finish(queue, kLong), "trn_queue_finish");
    if (r > 0) replay.push_back(t1 - t0);
  }
  const double one_us = median(one_by_one) / 1e3, replay_us = median(replay) / 1e3;
  print({"graph", "replay_100_small_ops", "us", replay_us, one_us,
         "the same 100 ops issued one by one (trn_queue_launch/_copy/_memset)", false});
  print({"graph", "replay_per_op", "us/op", replay_us / kOps, one_us / kOps,
         "one op issued on its own", false});

  trn_tensor_set_destroy(inputs);
  trn_tensor_set_destroy(outputs);
  trn_program_destroy(program);
  trn_queue_destroy(queue);
  for (auto m : mems) trn_mem_free(m);
  trn_pool_destroy(pool);
  trn_kernel_destroy(add);
  return 0;
}

}  // namespace trn::bench
