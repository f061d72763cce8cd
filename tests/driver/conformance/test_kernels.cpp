// Kernels: binaries from the project's assembler load, report the properties and argument table
// of their source, and run on compute queues with the expected output and run result; invalid
// binaries are TRN_ERROR_INVALID_KERNEL with a reason; a kernel that faults or deadlocks leaves
// a fault record naming the engine and instruction; launches with the wrong argument count or on
// copy queues are refused at submission.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "kernels.hpp"
#include "loader_support.hpp"

using namespace conformance;

namespace {

class Kernel {
 public:
  Kernel(trn_hal_instance_t *instance, uint32_t device, const KernelImage &k)
      : instance_(instance) {
    Err err;
    HAL_REQUIRE_OK(
        ops().kernel_load(instance, device, k.image.data(), k.image.size(), &kernel_, &err), err);
    REQUIRE(kernel_ != nullptr);
  }
  ~Kernel() { ops().kernel_unload(instance_, kernel_); }
  Kernel(const Kernel &) = delete;
  Kernel &operator=(const Kernel &) = delete;
  trn_hal_kernel_t *get() const { return kernel_; }
  operator trn_hal_kernel_t *() const { return kernel_; }

 private:
  trn_hal_instance_t *instance_;
  trn_hal_kernel_t *kernel_ = nullptr;
};

trn_hal_run_result_t blank_result() {
  trn_hal_run_result_t r;
  std::memset(&r, 0, sizeof r);
  r.status = 0xFFFFFFFFu;
  return r;
}

}  // namespace

TEST_CASE("kernels: properties and arguments match the source", "[kernels]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const auto k = assemble_kernel(kCopyKernel, "copy.s");
  Kernel kernel(inst, 0, k);
  trn_kernel_properties_t p = TRN_KERNEL_PROPERTIES_INIT;
  ops().kernel_properties(kernel, &p);
  CHECK(p.header.type == TRN_STRUCT_KERNEL_PROPERTIES);  // header untouched
  CHECK(p.header.size == sizeof p);
  CHECK(std::string(p.name) == "conformance_copy");
  CHECK(p.arg_count == 2);
  for (uint32_t e = 0; e < TRN_ENGINE_COUNT; ++e) {
    INFO("engine " << e);
    CHECK(p.instructions[e] == k.program.streams[e].size());
  }
  CHECK(p.instructions[TRN_ENGINE_SYNC] > 0);

  const char *names[] = {"x", "y"};
  const trn_arg_direction_t directions[] = {TRN_ARG_IN, TRN_ARG_OUT};
  for (uint32_t i = 0; i < 2; ++i) {
    INFO("argument " << i);
    trn_kernel_arg_t a = TRN_KERNEL_ARG_INIT;
    REQUIRE(ops().kernel_arg(kernel, i, &a) == TRN_SUCCESS);
    CHECK(a.header.type == TRN_STRUCT_KERNEL_ARG);
    CHECK(a.header.size == sizeof a);
    CHECK(std::string(a.name) == names[i]);
    CHECK(a.direction == directions[i]);
    CHECK(a.dtype == TRN_DTYPE_F32);
    CHECK(a.rank == 2);
    CHECK(a.shape[0] == 4);
    CHECK(a.shape[1] == 8);
    CHECK(a.bytes == 4 * 8 * 4);
  }
  trn_kernel_arg_t past = TRN_KERNEL_ARG_INIT;
  CHECK(ops().kernel_arg(kernel, 2, &past) == TRN_ERROR_OUT_OF_RANGE);
  CHECK(ops().kernel_arg(kernel, UINT32_MAX, &past) == TRN_ERROR_OUT_OF_RANGE);
  ops().kernel_unload(inst, nullptr);  // accepts NULL
}

TEST_CASE("kernels: invalid images are INVALID_KERNEL with a reason", "[kernels]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const auto k = assemble_kernel(kCopyKernel, "copy.s");
  struct Case {
    const char *what;
    std::vector<std::byte> image;
  };
  std::vector<Case> cases;
  cases.push_back({"garbage", std::vector<std::byte>(256, std::byte{0x5A})});
  cases.push_back({"a truncated image",
                   std::vector<std::byte>(k.image.begin(), k.image.begin() + k.image.size() / 2)});
  auto bad_magic = k.image;
  bad_magic[0] = std::byte{'X'};
  cases.push_back({"a bad ELF magic", bad_magic});
  auto trailing = k.image;
  trailing.resize(trailing.size() + 8);
  cases.push_back({"trailing bytes", trailing});
  cases.push_back({"one byte", std::vector<std::byte>(1, std::byte{0x7F})});
  for (const Case &c : cases) {
    INFO(c.what);
    Err err;
    trn_hal_kernel_t *kernel = nullptr;
    HAL_CHECK_RESULT(TRN_ERROR_INVALID_KERNEL,
                     ops().kernel_load(inst, 0, c.image.data(), c.image.size(), &kernel, &err),
                     err);
    CHECK(kernel == nullptr);
  }
  Err err;
  trn_hal_kernel_t *kernel = nullptr;
  HAL_CHECK_FAILS(ops().kernel_load(inst, 0, nullptr, 0, &kernel, &err), err);
  CHECK(kernel == nullptr);
}

TEST_CASE("kernels: a launch copies its input to its output", "[kernels]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const auto core = first_core(inst, 0);
  Claim claim(inst, 0, core.first_physical_core, core.physical_core_count);
  const auto k = assemble_kernel(kCopyKernel, "copy.s");
  Kernel kernel(inst, 0, k);
  Range r(inst, 0, 1 << 20, core.hbm_bank);
  const uint64_t bytes = 4 * 8 * 4;
  const auto input = pattern(bytes, 31);
  write_device(inst, 0, r.address(), input);
  Sem done(inst, 0, 0);
  Queue q(inst, 0, TRN_HAL_QUEUE_COMPUTE, 8, core.first_physical_core, core.physical_core_count);
  const trn_hal_binding_t args[] = {{r.address(), bytes}, {r.address() + 4096, bytes}};
  auto result = blank_result();
  q.submit({launch_command(kernel, args, 2, &result), signal_command(done, 1)}, "launch", 1);
  const trn_result_t waited = ops().sem_wait(done, 1, kLong);
  const auto st = q.status();
  INFO("fault: " << st.fault.reason << "; run: " << result.message);
  REQUIRE(waited == TRN_SUCCESS);
  CHECK(st.fault.result == TRN_SUCCESS);
  CHECK(result.status == TRN_HAL_RUN_OK);
  CHECK(result.total_ps > 0);
  CHECK(result.engine_instructions[TRN_ENGINE_SYNC] == k.program.streams[TRN_ENGINE_SYNC].size());
  CHECK(result.dma_bytes >= 2 * bytes);
  CHECK(first_difference(read_device(inst, 0, r.address() + 4096, bytes), input) == -1);
  CHECK(read_device(inst, 0, r.address() + 4096 + bytes, 1)[0] == 0);

  // Again, with the arguments elsewhere: the binding is per launch.
  auto again = blank_result();
  const trn_hal_binding_t moved[] = {{r.address() + 4096, bytes}, {r.address() + 8192, bytes}};
  q.submit({launch_command(kernel, moved, 2, &again), signal_command(done, 2)}, "again", 2);
  REQUIRE(ops().sem_wait(done, 2, kLong) == TRN_SUCCESS);
  CHECK(again.status == TRN_HAL_RUN_OK);
  CHECK(again.total_ps > 0);
  CHECK(first_difference(read_device(inst, 0, r.address() + 8192, bytes), input) == -1);
}

TEST_CASE("kernels: a scalar argument is reported as one and passed by value", "[kernels]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const auto core = first_core(inst, 0);
  Claim claim(inst, 0, core.first_physical_core, core.physical_core_count);
  const auto k = assemble_kernel(kFillKernel, "fill.s");
  Kernel kernel(inst, 0, k);
  trn_kernel_arg_t a = TRN_KERNEL_ARG_INIT;
  REQUIRE(ops().kernel_arg(kernel, 0, &a) == TRN_SUCCESS);
  CHECK(std::string(a.name) == "v");
  CHECK(a.kind == TRN_ARG_KIND_SCALAR);
  CHECK(a.dtype == TRN_DTYPE_F32);
  CHECK(a.direction == TRN_ARG_IN);
  CHECK(a.rank == 0);
  CHECK(a.bytes == 4);
  REQUIRE(ops().kernel_arg(kernel, 1, &a) == TRN_SUCCESS);
  CHECK(a.kind == TRN_ARG_KIND_TENSOR);

  Range r(inst, 0, 1 << 20, core.hbm_bank);
  Sem done(inst, 0, 0);
  Queue q(inst, 0, TRN_HAL_QUEUE_COMPUTE, 8, core.first_physical_core, core.physical_core_count);
  const uint64_t bytes = 4 * 8 * 4;
  uint64_t signalled = 0;
  for (const float v : {3.5f, -0.0f, 1e-40f}) {
    INFO("v = " << v);
    trn_hal_binding_t args[2] = {};
    uint32_t v_bits = 0;
    std::memcpy(&v_bits, &v, sizeof v_bits);
    args[0].scalar_bits = v_bits;
    args[0].bytes = 0;
    args[1] = {{r.address()}, bytes};
    auto result = blank_result();
    q.submit({launch_command(kernel, args, 2, &result), signal_command(done, ++signalled)}, "fill",
             signalled);
    REQUIRE(ops().sem_wait(done, signalled, kLong) == TRN_SUCCESS);
    CHECK(result.status == TRN_HAL_RUN_OK);
    std::vector<uint8_t> want(bytes);
    for (size_t i = 0; i < bytes; i += 4) std::memcpy(&want[i], &v_bits, 4);
    CHECK(first_difference(read_device(inst, 0, r.address(), bytes), want) == -1);
  }
  // A scalar's binding carries no memory: bytes other than 0 are refused at submission.
  trn_hal_binding_t wrong[2] = {{{r.address()}, 4}, {{r.address() + 4096}, bytes}};
  Err err;
  HAL_CHECK_RESULT(TRN_ERROR_INVALID_ARGUMENT,
                   q.try_submit({launch_command(kernel, wrong, 2, nullptr)}, err), err);
  CHECK_THAT(std::string(err.message),
             Catch::Contains("argument 'v' of kernel 'conformance_fill' is a scalar"));
}

TEST_CASE("kernels: a faulting kernel leaves a fault record naming the instruction", "[kernels]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const auto core = first_core(inst, 0);
  Claim claim(inst, 0, core.first_physical_core, core.physical_core_count);
  const auto k = assemble_kernel(kOverreadKernel, "overread.s");
  Kernel kernel(inst, 0, k);
  const uint64_t bytes = 128 * 64 * 4;
  Range r(inst, 0, 1 << 20, core.hbm_bank);
  Sem out(inst, 0, 0);
  HostCalls calls;
  Queue q(inst, 0, TRN_HAL_QUEUE_COMPUTE, 8, core.first_physical_core, core.physical_core_count);
  const trn_hal_binding_t args[] = {{r.address(), bytes}, {r.address() + 65536, bytes}};
  auto result = blank_result();
  q.submit({calls.command(0), launch_command(kernel, args, 2, &result), signal_command(out, 1),
            calls.command(1)},
           "launch", 44);
  REQUIRE(q.wait_retired(1));
  REQUIRE(calls.wait_count(2));
  const auto st = q.status();
  INFO("fault: " << st.fault.reason << "; run: " << result.message);
  CHECK(st.fault.result == TRN_ERROR_KERNEL_FAULT);
  REQUIRE(st.fault.label != nullptr);
  CHECK(std::string(st.fault.label) == "launch");
  CHECK(st.fault.tag == 44);
  CHECK(st.fault.command_index == 1);
  CHECK(st.fault.command_kind == TRN_HAL_COMMAND_LAUNCH);
  CHECK(st.fault.kernel == kernel.get());
  CHECK(st.fault.engine == TRN_ENGINE_SYNC);
  CHECK(st.fault.instruction == 1);
  CHECK(std::strlen(st.fault.opcode) > 0);
  CHECK(std::strlen(st.fault.reason) > 0);
  CHECK(result.status == TRN_HAL_RUN_FAULT);
  CHECK(result.engine == TRN_ENGINE_SYNC);
  CHECK(result.index == 1);
  CHECK(std::strlen(result.message) > 0);
  CHECK(calls.calls()[1].status == TRN_ERROR_KERNEL_FAULT);
  const auto o = out.state();
  CHECK(o.failed != 0);
  INFO("semaphore reason: " << o.reason);
  CHECK(std::string(o.reason).rfind("launch #44 failed: ", 0) == 0);
}

TEST_CASE("kernels: a deadlocked kernel is a fault of its launch", "[kernels]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const auto core = first_core(inst, 0);
  Claim claim(inst, 0, core.first_physical_core, core.physical_core_count);
  const auto k = assemble_kernel(kStuckKernel, "stuck.s");
  Kernel kernel(inst, 0, k);
  Range r(inst, 0, 1 << 20, core.hbm_bank);
  Queue q(inst, 0, TRN_HAL_QUEUE_COMPUTE, 8, core.first_physical_core, core.physical_core_count);
  const trn_hal_binding_t args[] = {{r.address(), 128}};
  auto result = blank_result();
  q.submit({launch_command(kernel, args, 1, &result)}, "stuck", 66);
  REQUIRE(q.wait_retired(1));
  const auto st = q.status();
  INFO("fault: " << st.fault.reason << "; run: " << result.message);
  CHECK(st.fault.result == TRN_ERROR_KERNEL_DEADLOCK);
  REQUIRE(st.fault.label != nullptr);
  CHECK(std::string(st.fault.label) == "stuck");
  CHECK(st.fault.tag == 66);
  CHECK(st.fault.command_kind == TRN_HAL_COMMAND_LAUNCH);
  CHECK(st.fault.kernel == kernel.get());
  CHECK(st.fault.engine == TRN_ENGINE_SYNC);
  CHECK(st.fault.instruction == 0);
  CHECK(result.status == TRN_HAL_RUN_DEADLOCK);
  CHECK(result.engine == TRN_ENGINE_SYNC);
}

TEST_CASE("kernels: launches with a wrong argument count or on a copy queue are refused",
          "[kernels]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const auto core = first_core(inst, 0);
  Claim claim(inst, 0, core.first_physical_core, core.physical_core_count);
  const auto k = assemble_kernel(kCopyKernel, "copy.s");
  Kernel kernel(inst, 0, k);
  Range r(inst, 0, 1 << 20, core.hbm_bank);
  HostCalls calls;
  Sem done(inst, 0, 0);
  Queue compute(inst, 0, TRN_HAL_QUEUE_COMPUTE, 8, core.first_physical_core,
                core.physical_core_count);
  Queue copy(inst, 0, TRN_HAL_QUEUE_COPY, 8, core.first_physical_core, core.physical_core_count);
  const trn_hal_binding_t args[] = {
      {r.address(), 128}, {r.address() + 4096, 128}, {r.address() + 8192, 128}};
  Err err;
  for (const uint32_t count : {0u, 1u, 3u}) {
    INFO("arg_count " << count);
    HAL_CHECK_RESULT(
        TRN_ERROR_INVALID_ARGUMENT,
        compute.try_submit(
            {calls.command(count), launch_command(kernel, count ? args : nullptr, count, nullptr)},
            err),
        err);
  }
  HAL_CHECK_RESULT(TRN_ERROR_INVALID_ARGUMENT,
                   compute.try_submit({launch_command(nullptr, args, 2, nullptr)}, err), err);
  HAL_CHECK_RESULT(
      TRN_ERROR_INVALID_ARGUMENT,
      copy.try_submit({calls.command(9), launch_command(kernel, args, 2, nullptr)}, err), err);
  // A binding that is not device memory.
  const trn_hal_binding_t outside[] = {{8, 128}, {r.address(), 128}};
  HAL_CHECK_RESULT(TRN_ERROR_INVALID_ARGUMENT,
                   compute.try_submit({launch_command(kernel, outside, 2, nullptr)}, err), err);
  // Device memory this process does not hold: a released range, past the end of a range.
  uint64_t released = 0;
  {
    Range gone(inst, 0, 1 << 20, core.hbm_bank);
    released = gone.address();
  }
  const trn_hal_binding_t freed[] = {{r.address(), 128}, {released, 128}};
  HAL_CHECK_RESULT(TRN_ERROR_INVALID_ARGUMENT,
                   compute.try_submit({launch_command(kernel, freed, 2, nullptr)}, err), err);
  const trn_hal_binding_t past[] = {{r.address() + r.bytes() - 64, 128}, {r.address(), 128}};
  HAL_CHECK_RESULT(TRN_ERROR_INVALID_ARGUMENT,
                   compute.try_submit({launch_command(kernel, past, 2, nullptr)}, err), err);
  CHECK(compute.status().submitted == 0);
  CHECK(copy.status().submitted == 0);
  CHECK(calls.count() == 0);
  // The right count runs.
  compute.submit({launch_command(kernel, args, 2, nullptr), signal_command(done, 1)});
  CHECK(ops().sem_wait(done, 1, kLong) == TRN_SUCCESS);
}

TEST_CASE("kernels: source lines of instructions", "[kernels]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const auto k = assemble_kernel(kStuckKernel, "stuck.s");
  Kernel kernel(inst, 0, k);
  // Without .loc the assembler records the text line; past the end is unknown (0).
  CHECK(ops().kernel_source_line(kernel, TRN_ENGINE_SYNC, 1000) == 0);
  CHECK(ops().kernel_source_line(kernel, TRN_ENGINE_TENSOR, 0) == 0);
  // The file of a line (interface 2.1): "" where the line is unknown, else the .s file.
  CHECK(std::string(ops().kernel_source_file(kernel, TRN_ENGINE_SYNC, 1000)).empty());
  CHECK(std::string(ops().kernel_source_file(kernel, TRN_ENGINE_TENSOR, 0)).empty());
  CHECK(std::string(ops().kernel_source_file(kernel, TRN_ENGINE_COUNT, 0)).empty());
  if (ops().kernel_source_line(kernel, TRN_ENGINE_SYNC, 0) != 0)
    CHECK(std::string(ops().kernel_source_file(kernel, TRN_ENGINE_SYNC, 0)) == "stuck.s");
}

TEST_CASE("kernels: a launch fills the trace buffer it is given", "[kernels]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const auto core = first_core(inst, 0);
  Claim claim(inst, 0, core.first_physical_core, core.physical_core_count);
  const auto k = assemble_kernel(kCopyKernel, "copy.s");
  Kernel kernel(inst, 0, k);
  Range r(inst, 0, 1 << 20, core.hbm_bank);
  const uint64_t bytes = 4 * 8 * 4;
  Sem done(inst, 0, 0);
  Queue q(inst, 0, TRN_HAL_QUEUE_COMPUTE, 8, core.first_physical_core, core.physical_core_count);
  const trn_hal_binding_t args[] = {{r.address(), bytes}, {r.address() + 4096, bytes}};
  std::vector<trn_hal_trace_record_t> trace(64);
  auto result = blank_result();
  result.trace = trace.data();
  result.trace_capacity = trace.size();
  // A second run with room for one record: the rest are dropped, and counted.
  std::vector<trn_hal_trace_record_t> small(1);
  auto cut = blank_result();
  cut.trace = small.data();
  cut.trace_capacity = 1;
  q.submit({launch_command(kernel, args, 2, &result), launch_command(kernel, args, 2, &cut),
            signal_command(done, 1)});
  REQUIRE(ops().sem_wait(done, 1, kLong) == TRN_SUCCESS);
  REQUIRE(q.wait_retired(1));
  REQUIRE(result.status == TRN_HAL_RUN_OK);
  const uint64_t instructions = k.program.instruction_count();
  INFO("trace_count " << result.trace_count << " for " << instructions << " instructions");
  CHECK(result.trace_count >= instructions);
  REQUIRE(result.trace_count <= trace.size());
  uint64_t sync_records = 0;
  for (uint64_t i = 0; i < result.trace_count; ++i) {
    const auto &t = trace[i];
    INFO("record " << i << ": track " << int{t.track} << " engine " << int{t.engine});
    CHECK(t.end_ps >= t.start_ps);
    CHECK(t.end_ps <= result.total_ps);
    CHECK(t.engine < TRN_ENGINE_COUNT);
    CHECK(t.track < TRN_ENGINE_COUNT + TRN_HAL_DMA_QUEUES);
    if (t.track == TRN_ENGINE_SYNC) ++sync_records;
  }
  CHECK(sync_records == k.program.streams[TRN_ENGINE_SYNC].size());
  CHECK(cut.status == TRN_HAL_RUN_OK);
  CHECK(cut.trace_count == result.trace_count);
}

TEST_CASE("kernels: a launch on a logical core of two physical cores", "[kernels]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  if (!(device_info(inst, 0).lnc_mask & (1u << 2))) {
    WARN("skipped: the device does not support LNC=2");
    return;
  }
  trn_hal_core_info_t core;
  std::memset(&core, 0, sizeof core);
  Err err;
  HAL_REQUIRE_OK(ops().core_info(inst, 0, 2, 0, &core, &err), err);
  REQUIRE(core.physical_core_count == 2);
  const auto k = assemble_kernel(kCopyKernel, "copy.s");
  Kernel kernel(inst, 0, k);
  Range r(inst, 0, 1 << 20, core.hbm_bank);
  {
    // Claiming one of the two is not enough.
    Claim half(inst, 0, core.first_physical_core, 1);
    trn_hal_queue_t *q = nullptr;
    HAL_CHECK_FAILS(ops().queue_create(inst, 0, core.first_physical_core, 2, TRN_HAL_QUEUE_COMPUTE,
                                       8, 0, &q, &err),
                    err);
    CHECK(q == nullptr);
  }
  Claim claim(inst, 0, core.first_physical_core, 2);
  const uint64_t bytes = 4 * 8 * 4;
  const auto input = pattern(bytes, 77);
  write_device(inst, 0, r.address(), input);
  Sem done(inst, 0, 0);
  Queue q(inst, 0, TRN_HAL_QUEUE_COMPUTE, 8, core.first_physical_core, 2);
  const trn_hal_binding_t args[] = {{r.address(), bytes}, {r.address() + 4096, bytes}};
  auto result = blank_result();
  q.submit({launch_command(kernel, args, 2, &result), signal_command(done, 1)});
  REQUIRE(ops().sem_wait(done, 1, kLong) == TRN_SUCCESS);
  REQUIRE(q.wait_retired(1));
  CHECK(result.status == TRN_HAL_RUN_OK);
  CHECK(first_difference(read_device(inst, 0, r.address() + 4096, bytes), input) == -1);
}
