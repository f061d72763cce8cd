// Conformance: programs (API 0.3) — load, tensors, tensor sets and execution; the binding
// errors; save and load again; executions equal to the eager sequence byte for byte; many
// executions with fresh inputs; two queues at once; a fault inside a program; capture and
// replay.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "isa/assembler.hpp"
#include "isa/container.hpp"
#include "isa/program_container.hpp"
#include "support/api_helpers.hpp"
#include "support/result_printing.hpp"
#include "support/sim_env.hpp"
#include "support/temp_files.hpp"
#include "support/test_kernels.hpp"
#include "trn/trn.h"

namespace {

namespace isa = trn::isa;
using trn::test::alloc;
using trn::test::core_at;
using trn::test::error_contains;
using trn::test::first_device;
using trn::test::kAddBytes;
using trn::test::kAddCols;
using trn::test::kAddRows;
using trn::test::last_error;
using trn::test::make_pool;
using trn::test::make_queue;
using trn::test::SimEnv;

constexpr uint64_t kLong = 10'000'000'000;
constexpr size_t kElems = kAddBytes / sizeof(float);
constexpr uint64_t kFlagBytes = 64;

// y = alpha * x + beta: a kernel with scalar arguments (and source lines).
const char *const kScaleBias = R"(
.kernel scale_bias
.arg x in f32[128,512]
.arg alpha scalar f32
.arg beta scalar f32
.arg y out f32[128,512]
.tile xt = sbuf.f32 p0:128 @0 [1,512]
.tile yt = sbuf.f32 p0:128 @2048 [1,512]
.engine sync
    dma_copy q0 xt, hbm(x).f32 rows[512,128] [1,512]    signal s0 += 1
    wait s1 >= 1
    dma_copy q0 hbm(y).f32 rows[512,128] [1,512], yt
.engine scalar
    wait s0 >= 1
    activation identity yt, xt scale=alpha bias=beta   signal s1 = 1
)";

std::vector<std::byte> scale_bias_image() {
  auto r = isa::assemble(kScaleBias, "scale_bias.s");
  if (auto *e = std::get_if<isa::AsmError>(&r)) FAIL(e->to_string());
  return isa::write_kernel(std::get<isa::Program>(r));
}

std::vector<float> pattern(float base) {
  std::vector<float> v(kElems);
  for (size_t i = 0; i < kElems; ++i) v[i] = base + static_cast<float>(i % 97) * 0.25f;
  return v;
}

isa::ProgramTensor tensor(const std::string &name, isa::TensorRole role) {
  isa::ProgramTensor t;
  t.name = name;
  t.role = role;
  t.dtype = isa::DType::kF32;
  t.shape = {kAddRows, kAddCols};
  return t;
}

// out = scale_bias(a + c, 2, 1) + b, with c a constant and the sum an internal buffer; also a
// copy of the sum out (`sum`) and a memset of `flag`.
//   tensors: 0 a (in), 1 b (in), 2 c (constant), 3 t (internal), 4 u (internal), 5 out (out),
//            6 sum (out), 7 flag (out, u8[64])
isa::ProgramImage test_program() {
  isa::ProgramImage p;
  p.name = "test_program";
  p.kernels.push_back(isa::write_kernel(trn::test::vector_add_program(true)));
  p.kernels.push_back(scale_bias_image());
  p.tensors = {tensor("a", isa::TensorRole::kInput),    tensor("b", isa::TensorRole::kInput),
               tensor("c", isa::TensorRole::kConstant), tensor("t", isa::TensorRole::kInternal),
               tensor("u", isa::TensorRole::kInternal), tensor("out", isa::TensorRole::kOutput),
               tensor("sum", isa::TensorRole::kOutput), isa::ProgramTensor{}};
  const auto c = pattern(-3.0f);
  p.tensors[2].data.resize(kAddBytes);
  std::memcpy(p.tensors[2].data.data(), c.data(), kAddBytes);
  p.tensors[7].name = "flag";
  p.tensors[7].role = isa::TensorRole::kOutput;
  p.tensors[7].dtype = isa::DType::kU8;
  p.tensors[7].shape = {kFlagBytes};
  auto arg = [](uint32_t t) {
    isa::StepArg a;
    a.ref = {t, 0};
    return a;
  };
  auto scalar = [](float v) {
    isa::StepArg a;
    a.scalar = true;
    a.scalar_bits = std::bit_cast<uint32_t>(v);
    return a;
  };
  isa::ProgramStep add1;
  add1.kernel = 0;
  add1.args = {arg(0), arg(2), arg(3)};
  isa::ProgramStep scale;
  scale.kernel = 1;
  scale.args = {arg(3), scalar(2.0f), scalar(1.0f), arg(4)};
  scale.deps = {0};
  isa::ProgramStep add2;
  add2.kernel = 0;
  add2.args = {arg(4), arg(1), arg(5)};
  add2.deps = {1};
  isa::ProgramStep copy;
  copy.kind = isa::StepKind::kCopy;
  copy.dst = {6, 0};
  copy.src = {3, 0};
  copy.bytes = kAddBytes;
  copy.deps = {0};
  isa::ProgramStep set;
  set.kind = isa::StepKind::kMemset;
  set.dst = {7, 0};
  set.bytes = kFlagBytes;
  set.value = 0x5A;
  p.steps = {add1, scale, add2, copy, set};
  return p;
}

std::vector<std::byte> test_program_bytes() {
  return isa::write_program(test_program());
}

std::vector<float> read_floats(trn_mem_t mem) {
  std::vector<float> v(kElems);
  INFO(last_error());
  REQUIRE(trn_mem_read(mem, 0, v.data(), kAddBytes) == TRN_SUCCESS);
  return v;
}

void write_floats(trn_mem_t mem, const std::vector<float> &v) {
  INFO(last_error());
  REQUIRE(trn_mem_write(mem, 0, v.data(), kAddBytes) == TRN_SUCCESS);
}

trn_tensor_set_t make_set(std::initializer_list<std::pair<const char *, trn_mem_t>> bindings) {
  trn_tensor_set_t set = nullptr;
  INFO(last_error());
  REQUIRE(trn_tensor_set_create(&set) == TRN_SUCCESS);
  for (const auto &[name, mem] : bindings) REQUIRE(trn_tensor_set_add(set, name, mem, 0) == 0);
  return set;
}

struct Fixture {
  SimEnv env;
  trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device);
  trn_queue_t queue = make_queue(core_at(device, 0), TRN_QUEUE_KIND_COMPUTE);
  std::vector<trn_mem_t> mems;
  trn_program_t program = nullptr;

  Fixture() {
    const auto bytes = test_program_bytes();
    INFO(last_error());
    REQUIRE(trn_program_load(device, bytes.data(), bytes.size(), &program) == TRN_SUCCESS);
  }
  ~Fixture() {
    trn_queue_finish(queue, kLong);
    trn_program_destroy(program);
    for (trn_mem_t m : mems) trn_mem_free(m);
    trn_queue_destroy(queue);
    trn_pool_destroy(pool);
  }
  trn_mem_t mem(uint64_t size = kAddBytes) {
    mems.push_back(alloc(pool, size));
    return mems.back();
  }
};

// The bound memory of one execution of test_program.
struct Bound {
  trn_mem_t a, b, out, sum, flag;
  trn_tensor_set_t inputs, outputs;
  Bound(Fixture &f, float base)
      : a(f.mem()), b(f.mem()), out(f.mem()), sum(f.mem()), flag(f.mem(kFlagBytes)) {
    write_floats(a, pattern(base));
    write_floats(b, pattern(base * 2.0f + 1.0f));
    inputs = make_set({{"a", a}, {"b", b}});
    outputs = make_set({{"out", out}, {"sum", sum}, {"flag", flag}});
  }
  ~Bound() {
    trn_tensor_set_destroy(inputs);
    trn_tensor_set_destroy(outputs);
  }
};

// What test_program computes, in f32 as the device does.
void check_result(const Bound &run, float base) {
  const auto a = pattern(base), b = pattern(base * 2.0f + 1.0f), c = pattern(-3.0f);
  const auto out = read_floats(run.out), sum = read_floats(run.sum);
  size_t wrong = 0;
  for (size_t i = 0; i < kElems; ++i) {
    const float t = a[i] + c[i];
    const float u = std::fma(t, 2.0f, 1.0f);
    if (sum[i] != t || std::abs(out[i] - (u + b[i])) > 1e-5f * std::abs(u + b[i]) + 1e-6f) ++wrong;
  }
  CHECK(wrong == 0);
  std::vector<uint8_t> flag(kFlagBytes);
  REQUIRE(trn_mem_read(run.flag, 0, flag.data(), kFlagBytes) == TRN_SUCCESS);
  CHECK(std::all_of(flag.begin(), flag.end(), [](uint8_t v) { return v == 0x5A; }));
}

std::vector<std::byte> mem_bytes(trn_mem_t mem, uint64_t size) {
  std::vector<std::byte> v(size);
  REQUIRE(trn_mem_read(mem, 0, v.data(), size) == TRN_SUCCESS);
  return v;
}

std::vector<trn_program_tensor_t> tensors_of(trn_program_t program) {
  uint32_t count = 0;
  INFO(last_error());
  REQUIRE(trn_program_get_tensors(program, &count, nullptr) == TRN_SUCCESS);
  std::vector<trn_program_tensor_t> list(count, TRN_PROGRAM_TENSOR_INIT);
  REQUIRE(trn_program_get_tensors(program, &count, list.data()) == TRN_SUCCESS);
  list.resize(count);
  return list;
}

}  // namespace

TEST_CASE("programs: properties and external tensors", "[programs]") {
  Fixture f;
  trn_program_properties_t props = TRN_PROGRAM_PROPERTIES_INIT;
  REQUIRE(trn_program_get_properties(f.program, &props) == TRN_SUCCESS);
  CHECK(std::string(props.name) == "test_program");
  CHECK(props.kernel_count == 2);
  CHECK(props.tensor_count == 5);
  CHECK(props.step_count == 5);
  CHECK(props.constant_bytes == kAddBytes);
  CHECK(props.internal_bytes == 2 * kAddBytes);
  const auto list = tensors_of(f.program);
  REQUIRE(list.size() == 5);
  CHECK(std::string(list[0].name) == "a");
  CHECK(list[0].direction == TRN_ARG_IN);
  CHECK(list[0].dtype == TRN_DTYPE_F32);
  CHECK(list[0].rank == 2);
  CHECK(list[0].shape[0] == kAddRows);
  CHECK(list[0].shape[1] == kAddCols);
  CHECK(list[0].bytes == kAddBytes);
  CHECK(std::string(list[2].name) == "out");
  CHECK(list[2].direction == TRN_ARG_OUT);
  CHECK(std::string(list[4].name) == "flag");
  CHECK(list[4].dtype == TRN_DTYPE_U8);
  CHECK(list[4].bytes == kFlagBytes);
  // Two-call: a short array gets what fits.
  uint32_t two = 2;
  std::vector<trn_program_tensor_t> short_list(2, TRN_PROGRAM_TENSOR_INIT);
  REQUIRE(trn_program_get_tensors(f.program, &two, short_list.data()) == TRN_SUCCESS);
  CHECK(two == 2);
  CHECK(std::string(short_list[1].name) == "b");
  trn_program_tensor_t bad{};
  uint32_t one = 1;
  CHECK(trn_program_get_tensors(f.program, &one, &bad) == TRN_ERROR_INVALID_STRUCT);
  CHECK(trn_program_get_tensors(f.program, nullptr, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(trn_program_get_properties(nullptr, &props) == TRN_ERROR_INVALID_HANDLE);
}

TEST_CASE("programs: an execution computes the schedule", "[programs]") {
  Fixture f;
  Bound run(f, 1.5f);
  uint64_t seq = 0;
  INFO(last_error());
  REQUIRE(trn_queue_execute(f.queue, f.program, run.inputs, run.outputs, nullptr, &seq) ==
          TRN_SUCCESS);
  CHECK(seq == 1);
  REQUIRE(trn_queue_finish(f.queue, kLong) == TRN_SUCCESS);
  check_result(run, 1.5f);
}

TEST_CASE("programs: execution equals the eager sequence byte for byte", "[programs]") {
  Fixture f;
  Bound run(f, 0.75f);
  REQUIRE(trn_queue_execute(f.queue, f.program, run.inputs, run.outputs, nullptr, nullptr) ==
          TRN_SUCCESS);
  REQUIRE(trn_queue_finish(f.queue, kLong) == TRN_SUCCESS);

  // The same steps issued one by one.
  trn_kernel_t add = trn::test::load_program(f.device, trn::test::vector_add_program(true));
  const auto sb = scale_bias_image();
  trn_kernel_t scale = nullptr;
  REQUIRE(trn_kernel_load(f.device, sb.data(), sb.size(), &scale) == TRN_SUCCESS);
  trn_mem_t c = f.mem(), t = f.mem(), u = f.mem(), out = f.mem(), sum = f.mem(),
            flag = f.mem(kFlagBytes);
  write_floats(c, pattern(-3.0f));
  auto launch = [&](trn_kernel_t k, std::vector<trn_kernel_binding_t> args) {
    trn_launch_desc_t d = TRN_LAUNCH_DESC_INIT;
    d.kernel = k;
    d.args = args.data();
    d.arg_count = static_cast<uint32_t>(args.size());
    INFO(last_error());
    REQUIRE(trn_queue_launch(f.queue, &d, nullptr, nullptr) == TRN_SUCCESS);
  };
  auto mem = [](trn_mem_t m) {
    trn_kernel_binding_t b{};
    b.mem = m;
    return b;
  };
  auto f32 = [](float v) {
    trn_kernel_binding_t b{};
    b.value.f32 = v;
    return b;
  };
  launch(add, {mem(run.a), mem(c), mem(t)});
  launch(scale, {mem(t), f32(2.0f), f32(1.0f), mem(u)});
  launch(add, {mem(u), mem(run.b), mem(out)});
  REQUIRE(trn_queue_copy(f.queue, sum, 0, t, 0, kAddBytes, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_memset(f.queue, flag, 0, 0x5A, kFlagBytes, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_finish(f.queue, kLong) == TRN_SUCCESS);
  CHECK(mem_bytes(out, kAddBytes) == mem_bytes(run.out, kAddBytes));
  CHECK(mem_bytes(sum, kAddBytes) == mem_bytes(run.sum, kAddBytes));
  CHECK(mem_bytes(flag, kFlagBytes) == mem_bytes(run.flag, kFlagBytes));
  trn_kernel_destroy(add);
  trn_kernel_destroy(scale);
}

TEST_CASE("programs: many executions with fresh inputs reuse one internal set", "[programs]") {
  Fixture f;
  std::vector<std::unique_ptr<Bound>> runs;
  for (int i = 0; i < 12; ++i) {
    runs.push_back(std::make_unique<Bound>(f, static_cast<float>(i) * 0.5f - 2.0f));
    INFO(last_error());
    REQUIRE(trn_queue_execute(f.queue, f.program, runs.back()->inputs, runs.back()->outputs,
                              nullptr, nullptr) == TRN_SUCCESS);
  }
  REQUIRE(trn_queue_finish(f.queue, kLong) == TRN_SUCCESS);
  for (int i = 0; i < 12; ++i) check_result(*runs[i], static_cast<float>(i) * 0.5f - 2.0f);
  // Sequential executions on one queue gave their internal set back each time: the program's
  // pool holds the constants and few sets, not one per execution.
  // Executions in flight together on one queue share one set (the queue runs them in order).
  trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
  REQUIRE(trn_device_get_memory_stats(f.device, 0, &stats) == TRN_SUCCESS);
  CHECK(stats.by_category[TRN_MEM_CATEGORY_SCRATCH].current_bytes == 2 * kAddBytes);
}

TEST_CASE("programs: concurrent executions on two queues", "[programs]") {
  Fixture f;
  trn_queue_t second = make_queue(core_at(f.device, 1), TRN_QUEUE_KIND_COMPUTE);
  Bound one(f, 1.0f), two(f, -4.0f);
  // Catch2's assertions are for one thread: the other one counts its failures.
  std::atomic<int> other_failures{0};
  std::thread other([&] {
    for (int i = 0; i < 4; ++i)
      if (trn_queue_execute(second, f.program, two.inputs, two.outputs, nullptr, nullptr) !=
          TRN_SUCCESS)
        ++other_failures;
  });
  for (int i = 0; i < 4; ++i)
    CHECK(trn_queue_execute(f.queue, f.program, one.inputs, one.outputs, nullptr, nullptr) ==
          TRN_SUCCESS);
  other.join();
  CHECK(other_failures == 0);
  REQUIRE(trn_queue_finish(f.queue, kLong) == TRN_SUCCESS);
  REQUIRE(trn_queue_finish(second, kLong) == TRN_SUCCESS);
  check_result(one, 1.0f);
  check_result(two, -4.0f);
  trn_queue_destroy(second);
}

TEST_CASE("programs: binding errors name the tensor and queue nothing", "[programs][negative]") {
  Fixture f;
  Bound run(f, 1.0f);
  trn_mem_t small = f.mem(kAddBytes - 4);
  auto refused = [&](trn_tensor_set_t in, trn_tensor_set_t out, const char *part) {
    uint64_t seq = 99;
    CHECK(trn_queue_execute(f.queue, f.program, in, out, nullptr, &seq) ==
          TRN_ERROR_INVALID_ARGUMENT);
    INFO(last_error());
    CHECK(error_contains(part));
    CHECK(seq == 99);
  };
  trn_tensor_set_t missing = make_set({{"a", run.a}});
  refused(missing, run.outputs, "input tensor 'b'");
  refused(nullptr, run.outputs, "input tensor 'a' of program 'test_program' is not bound");
  trn_tensor_set_t extra = make_set({{"a", run.a}, {"b", run.b}, {"typo", run.b}});
  refused(extra, run.outputs, "'typo'");
  trn_tensor_set_t sized = make_set({{"a", small}, {"b", run.b}});
  refused(sized, run.outputs, "needs 262144 bytes");
  trn_tensor_set_t offset = nullptr;
  REQUIRE(trn_tensor_set_create(&offset) == TRN_SUCCESS);
  REQUIRE(trn_tensor_set_add(offset, "a", run.a, 8) == TRN_SUCCESS);
  REQUIRE(trn_tensor_set_add(offset, "b", run.b, 0) == TRN_SUCCESS);
  refused(offset, run.outputs, "from offset 8");
  trn_tensor_set_t wrong_side =
      make_set({{"out", run.out}, {"sum", run.sum}, {"flag", run.flag}, {"a", run.a}});
  refused(run.inputs, wrong_side, "bound in both");
  trn_tensor_set_t outputs_in = make_set({{"a", run.a}, {"b", run.b}, {"out", run.out}});
  trn_tensor_set_t rest = make_set({{"sum", run.sum}, {"flag", run.flag}});
  refused(outputs_in, rest, "output tensor 'out' is bound in inputs");
  // A freed allocation is named too.
  trn_mem_t gone = f.mem();
  trn_tensor_set_t freed = make_set({{"a", gone}, {"b", run.b}});
  REQUIRE(trn_mem_free(gone) == TRN_SUCCESS);
  f.mems.erase(std::find(f.mems.begin(), f.mems.end(), gone));
  refused(freed, run.outputs, "input tensor 'a'");
  // The set itself.
  CHECK(trn_tensor_set_add(missing, "a", run.a, 0) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("already"));
  CHECK(trn_tensor_set_add(missing, nullptr, run.a, 0) == TRN_ERROR_NULL_POINTER);
  CHECK(trn_tensor_set_add(missing, "", run.a, 0) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(trn_tensor_set_add(missing, "x", nullptr, 0) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_tensor_set_add(nullptr, "x", run.a, 0) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_tensor_set_create(nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(trn_queue_execute(f.queue, nullptr, run.inputs, run.outputs, nullptr, nullptr) ==
        TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_queue_execute(f.queue, f.program, missing, run.outputs, nullptr, nullptr) ==
        TRN_ERROR_INVALID_ARGUMENT);
  trn_queue_t copy_queue = make_queue(core_at(f.device, 0), TRN_QUEUE_KIND_COPY);
  CHECK(trn_queue_execute(copy_queue, f.program, run.inputs, run.outputs, nullptr, nullptr) ==
        TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("compute queues"));
  trn_queue_destroy(copy_queue);
  for (trn_tensor_set_t s : {missing, extra, sized, offset, wrong_side, outputs_in, rest, freed})
    CHECK(trn_tensor_set_destroy(s) == TRN_SUCCESS);
  CHECK(trn_tensor_set_destroy(missing) == TRN_ERROR_INVALID_HANDLE);
  // Nothing was queued: the queue is idle and clean.
  REQUIRE(trn_queue_finish(f.queue, kLong) == TRN_SUCCESS);
}

TEST_CASE("programs: malformed images and files are refused with the reason",
          "[programs][negative]") {
  SimEnv env;
  trn_device_t device = first_device();
  trn_program_t program = nullptr;
  auto bytes = test_program_bytes();
  // Every truncation fails cleanly.
  for (size_t n : {size_t{0}, size_t{10}, size_t{64}, bytes.size() / 2, bytes.size() - 1}) {
    CHECK(trn_program_load(device, bytes.data(), n, &program) == TRN_ERROR_INVALID_PROGRAM);
    CHECK(program == nullptr);
  }
  // A kernel is not a program, and says so.
  const auto kernel = isa::write_kernel(trn::test::vector_add_program());
  CHECK(trn_program_load(device, kernel.data(), kernel.size(), &program) ==
        TRN_ERROR_INVALID_PROGRAM);
  CHECK(error_contains("this is a kernel"));
  // A step writing an input.
  auto image = test_program();
  image.steps[2].args[2].ref.tensor = 0;
  const auto writes_input = isa::write_program(image);
  CHECK(trn_program_load(device, writes_input.data(), writes_input.size(), &program) ==
        TRN_ERROR_INVALID_PROGRAM);
  CHECK(error_contains("writes input tensor 'a'"));
  CHECK(trn_program_load(device, nullptr, 0, &program) == TRN_ERROR_NULL_POINTER);
  CHECK(trn_program_load(device, bytes.data(), bytes.size(), nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(trn_program_load(nullptr, bytes.data(), bytes.size(), &program) ==
        TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_program_load_file(device, "/nonexistent/dir/p.trnp", &program) == TRN_ERROR_FILE);
  CHECK(error_contains("does not exist"));
  trn::test::TempDir dir;
  const std::string path = dir.path() + "/bad.trnp";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char *>(bytes.data()), 100);
  CHECK(trn_program_load_file(device, path.c_str(), &program) == TRN_ERROR_INVALID_PROGRAM);
  CHECK(error_contains(path));
  CHECK(trn_program_destroy(nullptr) == TRN_SUCCESS);
}

TEST_CASE("programs: save and load again round-trips", "[programs]") {
  Fixture f;
  trn::test::TempDir dir;
  const std::string path = dir.path() + "/saved.trnp";
  INFO(last_error());
  REQUIRE(trn_program_save(f.program, path.c_str()) == TRN_SUCCESS);
  std::ifstream in(path, std::ios::binary);
  std::vector<char> saved((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto original = test_program_bytes();
  REQUIRE(saved.size() == original.size());
  CHECK(std::memcmp(saved.data(), original.data(), saved.size()) == 0);
  trn_program_t loaded = nullptr;
  REQUIRE(trn_program_load_file(f.device, path.c_str(), &loaded) == TRN_SUCCESS);
  Bound run(f, 2.0f);
  REQUIRE(trn_queue_execute(f.queue, loaded, run.inputs, run.outputs, nullptr, nullptr) ==
          TRN_SUCCESS);
  REQUIRE(trn_queue_finish(f.queue, kLong) == TRN_SUCCESS);
  check_result(run, 2.0f);
  CHECK(trn_program_save(f.program, (dir.path() + "/no/such/dir/p.trnp").c_str()) ==
        TRN_ERROR_FILE);
  CHECK(trn_program_save(f.program, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(trn_program_destroy(loaded) == TRN_SUCCESS);
  CHECK(trn_program_destroy(loaded) == TRN_ERROR_INVALID_HANDLE);
}

TEST_CASE("programs: a program destroyed while executions are queued completes them",
          "[programs]") {
  Fixture f;
  Bound run(f, 3.0f);
  trn_sem_t gate = trn::test::make_sem(f.device);
  trn_sem_point_t point{gate, 1};
  trn_sync_t sync{&point, 1, nullptr, 0};
  REQUIRE(trn_queue_execute(f.queue, f.program, run.inputs, run.outputs, &sync, nullptr) ==
          TRN_SUCCESS);
  REQUIRE(trn_program_destroy(f.program) == TRN_SUCCESS);
  f.program = nullptr;
  REQUIRE(trn_sem_signal(gate, 1) == TRN_SUCCESS);
  REQUIRE(trn_queue_finish(f.queue, kLong) == TRN_SUCCESS);
  check_result(run, 3.0f);
  trn_sem_destroy(gate);
}

TEST_CASE("programs: a fault inside a program names the kernel, instruction and source line",
          "[programs][fault]") {
  SimEnv env;
  trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device);
  trn_queue_t queue = make_queue(core_at(device, 0), TRN_QUEUE_KIND_COMPUTE);
  // A vector_add whose first input reads a whole tile from a 512-byte tensor.
  isa::Program k = trn::test::vector_add_program(true);
  k.name = "overreading_add";
  k.args[0].shape = {128};
  isa::ProgramImage image;
  image.name = "faulty";
  image.kernels.push_back(isa::write_kernel(k));
  isa::ProgramTensor small = tensor("small", isa::TensorRole::kInput);
  small.shape = {128};
  image.tensors = {small, tensor("b", isa::TensorRole::kInput),
                   tensor("out", isa::TensorRole::kOutput)};
  isa::ProgramStep s;
  s.args.resize(3);
  for (uint32_t i = 0; i < 3; ++i) s.args[i].ref = {i, 0};
  image.steps = {s};
  const auto bytes = isa::write_program(image);
  trn_program_t program = nullptr;
  INFO(last_error());
  REQUIRE(trn_program_load(device, bytes.data(), bytes.size(), &program) == TRN_SUCCESS);
  trn_mem_t a = alloc(pool, 512), b = alloc(pool, kAddBytes), out = alloc(pool, kAddBytes);
  trn_tensor_set_t in = make_set({{"small", a}, {"b", b}}), outs = make_set({{"out", out}});
  uint64_t seq = 0;
  REQUIRE(trn_queue_execute(queue, program, in, outs, nullptr, &seq) == TRN_SUCCESS);
  CHECK(trn_queue_finish(queue, kLong) == TRN_ERROR_KERNEL_FAULT);
  trn_queue_fault_t fault = TRN_QUEUE_FAULT_INIT;
  REQUIRE(trn_queue_get_fault(queue, &fault) == TRN_SUCCESS);
  CHECK(fault.result == TRN_ERROR_KERNEL_FAULT);
  CHECK(fault.sequence == seq);
  CHECK(std::string(fault.command) == "execute");
  CHECK(std::string(fault.kernel) == "overreading_add");
  CHECK(std::string(fault.engine) == "sync");
  CHECK(fault.instruction == 0);
  CHECK(fault.source_line == 10);
  CHECK(std::string(fault.reason).find("(step 0, a launch, in program 'faulty')") !=
        std::string::npos);
  REQUIRE(trn_queue_reset(queue) == TRN_SUCCESS);
  trn_tensor_set_destroy(in);
  trn_tensor_set_destroy(outs);
  trn_program_destroy(program);
  for (trn_mem_t m : {a, b, out}) trn_mem_free(m);
  trn_queue_destroy(queue);
  trn_pool_destroy(pool);
}

TEST_CASE("programs: capture records a queue's work and replays it", "[programs][capture]") {
  Fixture f;
  trn_kernel_t add = trn::test::load_program(f.device, trn::test::vector_add_program(true));
  const auto sb = scale_bias_image();
  trn_kernel_t scale = nullptr;
  REQUIRE(trn_kernel_load(f.device, sb.data(), sb.size(), &scale) == TRN_SUCCESS);
  trn_mem_t x = f.mem(), y = f.mem(), t = f.mem(), out = f.mem(), flag = f.mem(kFlagBytes);
  auto binding = [](trn_mem_t m) {
    trn_kernel_binding_t b{};
    b.mem = m;
    return b;
  };
  auto launch = [&](trn_kernel_t k, std::vector<trn_kernel_binding_t> args, uint64_t *seq) {
    trn_launch_desc_t d = TRN_LAUNCH_DESC_INIT;
    d.kernel = k;
    d.args = args.data();
    d.arg_count = static_cast<uint32_t>(args.size());
    INFO(last_error());
    return trn_queue_launch(f.queue, &d, nullptr, seq);
  };
  trn_kernel_binding_t alpha{}, beta{};
  alpha.value.f32 = 3.0f;
  beta.value.f32 = -0.5f;

  REQUIRE(trn_queue_begin_capture(f.queue) == TRN_SUCCESS);
  CHECK(trn_queue_begin_capture(f.queue) == TRN_ERROR_INVALID_ARGUMENT);
  uint64_t seq = 7;
  REQUIRE(launch(add, {binding(x), binding(y), binding(t)}, &seq) == TRN_SUCCESS);
  CHECK(seq == 0);
  REQUIRE(launch(scale, {binding(t), alpha, beta, binding(out)}, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_memset(f.queue, flag, 0, 0x11, kFlagBytes, nullptr, nullptr) == TRN_SUCCESS);
  // What cannot be recorded is refused, and the capture goes on.
  float host[4] = {};
  CHECK(trn_queue_write(f.queue, x, 0, host, sizeof host, nullptr, nullptr) ==
        TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("cannot be captured"));
  trn_sem_t sem = trn::test::make_sem(f.device);
  trn_sem_point_t point{sem, 1};
  trn_sync_t signal{nullptr, 0, &point, 1};
  CHECK(trn_queue_memset(f.queue, flag, 0, 0, 4, &signal, nullptr) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("semaphores"));
  CHECK(trn_queue_execute(f.queue, f.program, nullptr, nullptr, nullptr, nullptr) != TRN_SUCCESS);
  trn_program_t captured = nullptr;
  INFO(last_error());
  REQUIRE(trn_queue_end_capture(f.queue, &captured) == TRN_SUCCESS);
  CHECK(trn_queue_end_capture(f.queue, &captured) == TRN_ERROR_INVALID_ARGUMENT);
  // Nothing ran while capturing.
  REQUIRE(trn_queue_finish(f.queue, kLong) == TRN_SUCCESS);
  std::vector<uint8_t> flag_now(kFlagBytes);
  REQUIRE(trn_mem_read(flag, 0, flag_now.data(), kFlagBytes) == TRN_SUCCESS);
  CHECK(flag_now[0] == 0);

  const auto list = tensors_of(captured);
  REQUIRE(list.size() == 5);
  CHECK(std::string(list[0].name) == "a");  // the first kernel argument bound to it
  CHECK(list[0].direction == TRN_ARG_IN);
  CHECK(list[0].dtype == TRN_DTYPE_F32);
  CHECK(std::string(list[1].name) == "b");
  CHECK(std::string(list[2].name) == "out");  // vector_add's out, then read by scale_bias
  CHECK(list[2].direction == TRN_ARG_INOUT);
  CHECK(std::string(list[3].name) == "y");
  CHECK(list[3].direction == TRN_ARG_OUT);
  CHECK(std::string(list[4].name) == "mem4");
  CHECK(list[4].dtype == TRN_DTYPE_U8);
  CHECK(list[4].bytes == kFlagBytes);

  // Replay on fresh memory equals the work issued eagerly.
  trn_mem_t x2 = f.mem(), y2 = f.mem(), t2 = f.mem(), out2 = f.mem(), flag2 = f.mem(kFlagBytes);
  write_floats(x, pattern(1.0f));
  write_floats(y, pattern(-2.0f));
  write_floats(x2, pattern(1.0f));
  write_floats(y2, pattern(-2.0f));
  REQUIRE(launch(add, {binding(x), binding(y), binding(t)}, nullptr) == TRN_SUCCESS);
  REQUIRE(launch(scale, {binding(t), alpha, beta, binding(out)}, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_memset(f.queue, flag, 0, 0x11, kFlagBytes, nullptr, nullptr) == TRN_SUCCESS);
  trn_tensor_set_t in = make_set({{"a", x2}, {"b", y2}, {"out", t2}});
  trn_tensor_set_t outs = make_set({{"y", out2}, {"mem4", flag2}});
  REQUIRE(trn_queue_execute(f.queue, captured, in, outs, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_finish(f.queue, kLong) == TRN_SUCCESS);
  CHECK(mem_bytes(out2, kAddBytes) == mem_bytes(out, kAddBytes));
  CHECK(mem_bytes(t2, kAddBytes) == mem_bytes(t, kAddBytes));
  CHECK(mem_bytes(flag2, kFlagBytes) == mem_bytes(flag, kFlagBytes));

  // Saved and loaded again, it runs the same.
  trn::test::TempDir dir;
  const std::string path = dir.path() + "/captured.trnp";
  REQUIRE(trn_program_save(captured, path.c_str()) == TRN_SUCCESS);
  trn_program_t reloaded = nullptr;
  REQUIRE(trn_program_load_file(f.device, path.c_str(), &reloaded) == TRN_SUCCESS);
  REQUIRE(trn_queue_memset(f.queue, out2, 0, 0, kAddBytes, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_execute(f.queue, reloaded, in, outs, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_finish(f.queue, kLong) == TRN_SUCCESS);
  CHECK(mem_bytes(out2, kAddBytes) == mem_bytes(out, kAddBytes));

  CHECK(trn_queue_end_capture(f.queue, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(trn_queue_begin_capture(nullptr) == TRN_ERROR_INVALID_HANDLE);
  trn_tensor_set_destroy(in);
  trn_tensor_set_destroy(outs);
  trn_program_destroy(captured);
  trn_program_destroy(reloaded);
  trn_sem_destroy(sem);
  trn_kernel_destroy(add);
  trn_kernel_destroy(scale);
}

namespace {

// A safetensors file holding `tensors` (name, dtype name, shape, bytes), in order.
struct StTensor {
  std::string name, dtype;
  std::vector<uint64_t> shape;
  std::vector<std::byte> data;
};
void write_safetensors(const std::string &path, const std::vector<StTensor> &tensors) {
  std::string json = "{";
  uint64_t at = 0;
  for (const auto &t : tensors) {
    std::string shape;
    for (uint64_t s : t.shape) shape += (shape.empty() ? "" : ",") + std::to_string(s);
    json += (json.size() > 1 ? "," : "") + std::string("\"") + t.name + "\":{\"dtype\":\"" +
            t.dtype + "\",\"shape\":[" + shape + "],\"data_offsets\":[" + std::to_string(at) + "," +
            std::to_string(at + t.data.size()) + "]}";
    at += t.data.size();
  }
  json += "}";
  while (json.size() % 8) json += ' ';
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = json.size();
  out.write(reinterpret_cast<const char *>(&n), 8);
  out.write(json.data(), static_cast<std::streamsize>(json.size()));
  for (const auto &t : tensors)
    out.write(reinterpret_cast<const char *>(t.data.data()),
              static_cast<std::streamsize>(t.data.size()));
}

std::vector<std::byte> float_bytes(const std::vector<float> &v) {
  std::vector<std::byte> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

void write_file(const std::string &path, const std::vector<std::byte> &bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char *>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

TEST_CASE("programs: constants read from a safetensors file beside the program",
          "[programs][safetensors]") {
  Fixture f;
  trn::test::TempDir dir;
  // c comes from the file (with another tensor before it, so its data is not at offset 0).
  write_safetensors(dir.path() + "/weights.safetensors",
                    {{"other", "F32", {4}, float_bytes({1, 2, 3, 4})},
                     {"layers.0.c", "F32", {kAddRows, kAddCols}, float_bytes(pattern(-3.0f))}});
  auto image = test_program();
  image.tensors[2].data.clear();
  image.tensors[2].source_file = "weights.safetensors";
  image.tensors[2].source_tensor = "layers.0.c";
  const auto bytes = isa::write_program(image);
  const std::string path = dir.path() + "/program.trnp";
  write_file(path, bytes);
  trn_program_t program = nullptr;
  INFO(last_error());
  REQUIRE(trn_program_load_file(f.device, path.c_str(), &program) == TRN_SUCCESS);
  Bound run(f, 0.25f);
  REQUIRE(trn_queue_execute(f.queue, program, run.inputs, run.outputs, nullptr, nullptr) ==
          TRN_SUCCESS);
  REQUIRE(trn_queue_finish(f.queue, kLong) == TRN_SUCCESS);
  check_result(run, 0.25f);
  // Saved, it still names the file.
  const std::string saved = dir.path() + "/saved.trnp";
  REQUIRE(trn_program_save(program, saved.c_str()) == TRN_SUCCESS);
  std::ifstream in(saved, std::ios::binary);
  std::vector<char> back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(back.size() == bytes.size());
  CHECK(std::memcmp(back.data(), bytes.data(), bytes.size()) == 0);
  // Only a regular file is replaced: never a FIFO, a directory, a link or (run as root) a device
  // node, which stay as they were.
  REQUIRE(mkfifo((dir.path() + "/fifo.trnp").c_str(), 0600) == 0);
  REQUIRE(mkdir((dir.path() + "/dir.trnp").c_str(), 0700) == 0);
  REQUIRE(symlink(saved.c_str(), (dir.path() + "/link.trnp").c_str()) == 0);
  std::vector<std::pair<std::string, std::string>> targets = {{"fifo.trnp", "a pipe (FIFO)"},
                                                              {"dir.trnp", "a directory"},
                                                              {"link.trnp", "a symbolic link"}};
  if (geteuid() == 0 &&
      mknod((dir.path() + "/null.trnp").c_str(), S_IFCHR | 0600, makedev(1, 3)) == 0)
    targets.push_back({"null.trnp", "a character device"});
  for (const auto &[name, kind] : targets) {
    const std::string target = dir.path() + "/" + name;
    INFO(target);
    struct stat before {};
    REQUIRE(lstat(target.c_str(), &before) == 0);
    CHECK(trn_program_save(program, target.c_str()) == TRN_ERROR_FILE);
    CHECK(error_contains("it is " + kind + ", not a regular file"));
    struct stat after {};
    REQUIRE(lstat(target.c_str(), &after) == 0);
    CHECK((after.st_mode & S_IFMT) == (before.st_mode & S_IFMT));
  }
  trn_program_destroy(program);

  // From memory, a relative path is the current directory's: not found here.
  CHECK(trn_program_load(f.device, bytes.data(), bytes.size(), &program) == TRN_ERROR_FILE);
  CHECK(error_contains("tensor 'layers.0.c' of weights.safetensors"));
  CHECK(error_contains("cannot open the file"));
  // The tensor missing, another shape, a file that is not safetensors: each named.
  auto refused = [&](isa::ProgramImage bad, trn_result_t want, const std::string &part) {
    write_file(path, isa::write_program(bad));
    CHECK(trn_program_load_file(f.device, path.c_str(), &program) == want);
    INFO(last_error());
    CHECK(error_contains(part));
  };
  auto missing = image;
  missing.tensors[2].source_tensor = "layers.1.c";
  refused(missing, TRN_ERROR_INVALID_PROGRAM, "the file has no tensor of that name");
  write_safetensors(dir.path() + "/wrong.safetensors",
                    {{"layers.0.c", "F32", {kAddCols, kAddRows}, float_bytes(pattern(0))}});
  auto shape = image;
  shape.tensors[2].source_file = "wrong.safetensors";
  refused(shape, TRN_ERROR_INVALID_PROGRAM,
          "the file has it as F32 of shape [" + std::to_string(kAddCols) + ", " +
              std::to_string(kAddRows) + "]");
  CHECK(error_contains("the program needs f32 of shape [" + std::to_string(kAddRows) + ", " +
                       std::to_string(kAddCols) + "]"));
  write_file(dir.path() + "/junk.safetensors", std::vector<std::byte>(64, std::byte{0x7f}));
  auto junk = image;
  junk.tensors[2].source_file = "junk.safetensors";
  refused(junk, TRN_ERROR_FILE, "not a valid safetensors file");
  // A FIFO (which open() would wait on for a writer for ever), a directory or a device in place
  // of the file: refused at once, saying what it is.
  REQUIRE(mkfifo((dir.path() + "/fifo.safetensors").c_str(), 0600) == 0);
  REQUIRE(mkdir((dir.path() + "/dir.safetensors").c_str(), 0700) == 0);
  for (const auto &[file, kind] :
       std::vector<std::pair<std::string, std::string>>{{"fifo.safetensors", "a pipe (FIFO)"},
                                                        {"dir.safetensors", "a directory"},
                                                        {"/dev/zero", "a character device"}}) {
    INFO(file);
    auto odd = image;
    odd.tensors[2].source_file = file;
    const auto start = std::chrono::steady_clock::now();
    refused(odd, TRN_ERROR_FILE, "it is " + kind + ", not a regular file");
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  }
  // An absolute path works from anywhere.
  auto absolute = image;
  absolute.tensors[2].source_file = dir.path() + "/weights.safetensors";
  const auto abs_bytes = isa::write_program(absolute);
  REQUIRE(trn_program_load(f.device, abs_bytes.data(), abs_bytes.size(), &program) == TRN_SUCCESS);
  trn_program_destroy(program);
}

TEST_CASE("programs: loading and destroying gives every byte back to the device", "[programs]") {
  Fixture f;
  Bound run(f, 1.0f);
  REQUIRE(trn_queue_execute(f.queue, f.program, run.inputs, run.outputs, nullptr, nullptr) ==
          TRN_SUCCESS);
  REQUIRE(trn_queue_finish(f.queue, kLong) == TRN_SUCCESS);
  REQUIRE(trn_program_destroy(f.program) == TRN_SUCCESS);
  f.program = nullptr;
  trn_mem_stats_t before = TRN_MEM_STATS_INIT, after = TRN_MEM_STATS_INIT;
  REQUIRE(trn_device_get_memory_stats(f.device, 0, &before) == TRN_SUCCESS);
  const auto bytes = test_program_bytes();
  for (int i = 0; i < 8; ++i) {
    trn_program_t p = nullptr;
    REQUIRE(trn_program_load(f.device, bytes.data(), bytes.size(), &p) == TRN_SUCCESS);
    REQUIRE(trn_queue_execute(f.queue, p, run.inputs, run.outputs, nullptr, nullptr) ==
            TRN_SUCCESS);
    REQUIRE(trn_program_destroy(p) == TRN_SUCCESS);  // with its execution in flight
    REQUIRE(trn_queue_finish(f.queue, kLong) == TRN_SUCCESS);
  }
  REQUIRE(trn_device_get_memory_stats(f.device, 0, &after) == TRN_SUCCESS);
  CHECK(after.reserved_bytes == before.reserved_bytes);
  CHECK(after.allocated_bytes == before.allocated_bytes);
  check_result(run, 1.0f);
}

TEST_CASE("programs: one tensor set may bind inputs and outputs alike", "[programs]") {
  Fixture f;
  Bound run(f, -1.0f);
  trn_tensor_set_t all = make_set(
      {{"a", run.a}, {"b", run.b}, {"out", run.out}, {"sum", run.sum}, {"flag", run.flag}});
  INFO(last_error());
  REQUIRE(trn_queue_execute(f.queue, f.program, all, all, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_finish(f.queue, kLong) == TRN_SUCCESS);
  check_result(run, -1.0f);
  trn_tensor_set_destroy(all);
}

TEST_CASE("programs: a captured tensor starts at its allocation's start", "[programs][capture]") {
  Fixture f;
  trn_mem_t m = f.mem(1024), m2 = f.mem(1024);
  REQUIRE(trn_queue_begin_capture(f.queue) == TRN_SUCCESS);
  REQUIRE(trn_queue_memset(f.queue, m, 256, 0xAA, 64, nullptr, nullptr) == TRN_SUCCESS);
  // Host memory cannot be a program's tensor: refused, and the recording stays as it was.
  trn_pool_t host_pool = make_pool(f.device, TRN_POOL_KIND_HOST);
  trn_mem_t host = alloc(host_pool, 1024);
  CHECK(trn_queue_copy(f.queue, m, 0, host, 0, 64, nullptr, nullptr) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(error_contains("host memory"));
  trn_program_t captured = nullptr;
  REQUIRE(trn_queue_end_capture(f.queue, &captured) == TRN_SUCCESS);
  const auto list = tensors_of(captured);
  REQUIRE(list.size() == 1);
  CHECK(list[0].bytes == 320);
  CHECK(list[0].direction == TRN_ARG_OUT);
  trn_tensor_set_t out = make_set({{list[0].name, m2}});
  REQUIRE(trn_queue_execute(f.queue, captured, nullptr, out, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_finish(f.queue, kLong) == TRN_SUCCESS);
  std::vector<uint8_t> bytes(1024);
  REQUIRE(trn_mem_read(m2, 0, bytes.data(), bytes.size()) == TRN_SUCCESS);
  for (size_t i = 0; i < bytes.size(); ++i) {
    INFO("byte " << i);
    CHECK(bytes[i] == (i >= 256 && i < 320 ? 0xAA : 0));
    if (bytes[i] != (i >= 256 && i < 320 ? 0xAA : 0)) break;
  }
  trn_tensor_set_destroy(out);
  trn_program_destroy(captured);
  trn_mem_free(host);
  trn_pool_destroy(host_pool);
}
