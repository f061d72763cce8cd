// Conformance: scalar kernel arguments (API 0.2) — values passed by value at launch and read by
// instructions in place of immediates, so one loaded kernel gives y = alpha * x + beta for every
// alpha and beta; the argument table's kind; the binding layout; and the launch-time refusals.
#include <bit>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include "isa/assembler.hpp"
#include "isa/builder.hpp"
#include "isa/container.hpp"
#include "support/api_helpers.hpp"
#include "support/result_printing.hpp"
#include "support/sim_env.hpp"
#include "trn/trn.h"

// The binding keeps API 0.1's layout: arrays of bindings from older callers still read right.
static_assert(sizeof(trn_kernel_binding_t) == 16);
static_assert(offsetof(trn_kernel_binding_t, mem) == 0);
static_assert(offsetof(trn_kernel_binding_t, offset) == 8);
static_assert(offsetof(trn_kernel_binding_t, value) == 8);
static_assert(sizeof(trn_scalar_t) == 8);
// The argument table grew at its end only.
static_assert(offsetof(trn_kernel_arg_t, kind) == offsetof(trn_kernel_arg_t, bytes) + 8);

namespace {

namespace isa = trn::isa;
using trn::test::core_at;
using trn::test::error_contains;
using trn::test::first_device;
using trn::test::last_error;
using trn::test::make_pool;
using trn::test::SimEnv;

constexpr uint64_t kLong = 10'000'000'000;
constexpr size_t kRows = 128, kCols = 64, kElems = kRows * kCols;

// y = alpha * x + beta through the Scalar engine's activation (identity, scale, bias).
const char *const kScaleBias = R"(
.kernel scale_bias
.arg x in f32[128,64]
.arg alpha scalar f32
.arg beta scalar f32
.arg y out f32[128,64]
.tile xt = sbuf.f32 p0:128 @0 [1,64]
.tile yt = sbuf.f32 p0:128 @256 [1,64]
.engine sync
    dma_copy q0 xt, hbm(x).f32 rows[64,128] [1,64]    signal s0 += 1
    wait s1 >= 1
    dma_copy q0 hbm(y).f32 rows[64,128] [1,64], yt
.engine scalar
    wait s0 >= 1
    activation identity yt, xt scale=alpha bias=beta   signal s1 = 1
)";

// Columns 0-3: memset with v. 4-7: iota base + 4p + i. 8-11: affine_select of shift + p - i >= 0
// ? v : fill (a causal mask whose diagonal moves with shift). All on GpSimd, in order.
const char *const kFill = R"(
.kernel fill
.arg v scalar f32
.arg base scalar i32
.arg shift scalar i32
.arg fill scalar f32
.arg out out f32[128,12]
.engine gpsimd
    memset sbuf.f32 p0:128 @0 [1,4], v
    iota sbuf.f32 p0:128 @16 [1,4], pattern [1,4], base, 4
    affine_select greater_equal sbuf.f32 p0:128 @32 [1,4], pattern [-1,4], shift, 1, sbuf.f32 p0:128 @0 [1,4], fill
    dma_copy q0 hbm(out).f32 rows[12,128] [1,12], sbuf.f32 p0:128 @0 [1,12]
)";

std::vector<std::byte> image_of(const char *text) {
  auto r = isa::assemble(text, "kernel.s");
  if (auto *e = std::get_if<isa::AsmError>(&r)) FAIL(e->to_string());
  return isa::write_kernel(std::get<isa::Program>(r));
}

uint32_t bits(float f) {
  return std::bit_cast<uint32_t>(f);
}

trn_kernel_binding_t tensor(trn_mem_t mem) {
  trn_kernel_binding_t b{};
  b.mem = mem;
  b.offset = 0;
  return b;
}
trn_kernel_binding_t f32(float v) {
  trn_kernel_binding_t b{};
  b.value.f32 = v;
  return b;
}
trn_kernel_binding_t i32(int32_t v) {
  trn_kernel_binding_t b{};
  b.value.i32 = v;
  return b;
}

trn_queue_t make_compute_queue(trn_core_t core) {
  trn_queue_desc_t desc = TRN_QUEUE_DESC_INIT;
  desc.core = core;
  desc.kind = TRN_QUEUE_KIND_COMPUTE;
  trn_queue_t queue = nullptr;
  INFO(last_error());
  REQUIRE(trn_queue_create(&desc, &queue) == TRN_SUCCESS);
  return queue;
}

// One device, device memory and a compute queue on its first core; kernels and memory freed at the
// end.
struct Fixture {
  SimEnv env;
  trn_device_t device = first_device();
  trn_pool_t pool = make_pool(device);
  trn_queue_t queue = make_compute_queue(core_at(device, 0));
  std::vector<trn_mem_t> mems;
  std::vector<trn_kernel_t> kernels;

  ~Fixture() {
    trn_queue_destroy(queue);
    for (trn_kernel_t k : kernels) trn_kernel_destroy(k);
    for (trn_mem_t m : mems) trn_mem_free(m);
    trn_pool_destroy(pool);
  }
  trn_kernel_t load(const std::vector<std::byte> &image) {
    trn_kernel_t k = nullptr;
    INFO(last_error());
    REQUIRE(trn_kernel_load(device, image.data(), image.size(), &k) == TRN_SUCCESS);
    kernels.push_back(k);
    return k;
  }
  trn_mem_t mem(uint64_t bytes) {
    trn_mem_t m = nullptr;
    INFO(last_error());
    REQUIRE(trn_mem_alloc(pool, bytes, 0, TRN_MEM_CATEGORY_TENSORS, 0, &m) == TRN_SUCCESS);
    mems.push_back(m);
    return m;
  }
  trn_result_t launch(trn_kernel_t kernel, const std::vector<trn_kernel_binding_t> &args) {
    trn_launch_desc_t desc = TRN_LAUNCH_DESC_INIT;
    desc.kernel = kernel;
    desc.args = args.data();
    desc.arg_count = static_cast<uint32_t>(args.size());
    return trn_queue_launch(queue, &desc, nullptr, nullptr);
  }
  void finish() {
    INFO(last_error());
    REQUIRE(trn_queue_finish(queue, kLong) == TRN_SUCCESS);
  }
  std::vector<float> read(trn_mem_t m, size_t count) {
    std::vector<float> v(count);
    REQUIRE(trn_mem_read(m, 0, v.data(), count * sizeof(float)) == TRN_SUCCESS);
    return v;
  }
};

std::vector<trn_kernel_arg_t> args_of(trn_kernel_t kernel) {
  uint32_t count = 0;
  REQUIRE(trn_kernel_get_args(kernel, &count, nullptr) == TRN_SUCCESS);
  std::vector<trn_kernel_arg_t> args(count, TRN_KERNEL_ARG_INIT);
  REQUIRE(trn_kernel_get_args(kernel, &count, args.data()) == TRN_SUCCESS);
  return args;
}

}  // namespace

TEST_CASE("scalar args: one kernel launched with several alpha and beta gives each result exactly",
          "[kernels][launch][scalar]") {
  Fixture f;
  trn_kernel_t kernel = f.load(image_of(kScaleBias));
  std::vector<float> x(kElems);
  for (size_t i = 0; i < kElems; ++i) x[i] = static_cast<float>(i % 101) * 0.37f - 17.0f;
  trn_mem_t xm = f.mem(kElems * 4);
  REQUIRE(trn_mem_write(xm, 0, x.data(), kElems * 4) == TRN_SUCCESS);
  const std::vector<std::pair<float, float>> values = {
      {2.5f, 0.0f}, {-1.0f, 0.5f}, {0.0f, -3.25f}, {3.0e-3f, 1e30f}, {1.0f / 3.0f, -0.1f}};
  // All launches are queued before any runs: each keeps the values it was given.
  std::vector<trn_mem_t> ys;
  for (const auto &[alpha, beta] : values) {
    ys.push_back(f.mem(kElems * 4));
    INFO(last_error());
    REQUIRE(f.launch(kernel, {tensor(xm), f32(alpha), f32(beta), tensor(ys.back())}) ==
            TRN_SUCCESS);
  }
  f.finish();
  for (size_t k = 0; k < values.size(); ++k) {
    const auto [alpha, beta] = values[k];
    INFO("alpha " << alpha << ", beta " << beta);
    const std::vector<float> y = f.read(ys[k], kElems);
    size_t wrong = 0;
    for (size_t i = 0; i < kElems; ++i) {
      volatile float product = x[i] * alpha;  // rounded on its own, as the engine does (no FMA)
      const float want = product + beta;
      if (bits(y[i]) != bits(want) && wrong++ < 3)
        UNSCOPED_INFO("y[" << i << "] = " << y[i] << ", expected " << want);
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("scalar args: memset, iota and affine_select read f32 and i32 scalars",
          "[kernels][launch][scalar]") {
  Fixture f;
  trn_kernel_t kernel = f.load(image_of(kFill));
  struct Values {
    float v;
    int32_t base, shift;
    float fill;
  };
  for (const Values &s : {Values{1.5f, 0, 0, -1e9f}, Values{-7.0f, -1000, 2, 0.25f},
                          Values{0.0f, 123456, -130, 8.0f}}) {
    INFO("v " << s.v << ", base " << s.base << ", shift " << s.shift << ", fill " << s.fill);
    trn_mem_t out = f.mem(kRows * 12 * 4);
    INFO(last_error());
    REQUIRE(f.launch(kernel, {f32(s.v), i32(s.base), i32(s.shift), f32(s.fill), tensor(out)}) ==
            TRN_SUCCESS);
    f.finish();
    const std::vector<float> got = f.read(out, kRows * 12);
    size_t wrong = 0;
    for (int32_t p = 0; p < static_cast<int32_t>(kRows); ++p)
      for (int32_t i = 0; i < 4; ++i) {
        const float want[3] = {s.v, static_cast<float>(s.base + 4 * p + i),
                               s.shift + p - i >= 0 ? s.v : s.fill};
        for (int c = 0; c < 3; ++c) {
          const float g = got[static_cast<size_t>(p * 12 + c * 4 + i)];
          if (bits(g) != bits(want[c]) && wrong++ < 3)
            UNSCOPED_INFO("row " << p << " column " << c * 4 + i << ": " << g << ", expected "
                                 << want[c]);
        }
      }
    CHECK(wrong == 0);
  }
}

TEST_CASE("scalar args: an f32 scalar may be NaN or infinite, only its first 4 bytes are read",
          "[kernels][launch][scalar]") {
  Fixture f;
  trn_kernel_t kernel = f.load(image_of(kFill));
  trn_mem_t out = f.mem(kRows * 12 * 4);
  trn_kernel_binding_t v = f32(0.0f);
  v.value.bits = 0xDEADBEEF'7FC00001ull;  // a NaN payload, and junk in the unused high bytes
  REQUIRE(f.launch(kernel, {v, i32(0), i32(-1000), f32(-INFINITY), tensor(out)}) == TRN_SUCCESS);
  f.finish();
  const std::vector<float> got = f.read(out, kRows * 12);
  CHECK(bits(got[0]) == 0x7FC00001u);      // memset keeps the NaN's bits
  CHECK(bits(got[8]) == bits(-INFINITY));  // shift -1000: every element is the fill
}

TEST_CASE("scalar args: trn_kernel_get_args reports kind, dtype, rank 0 and the dtype's bytes",
          "[kernels][scalar]") {
  Fixture f;
  trn_kernel_t kernel = f.load(image_of(kFill));
  const std::vector<trn_kernel_arg_t> args = args_of(kernel);
  REQUIRE(args.size() == 5);
  CHECK(std::string(args[0].name) == "v");
  CHECK(args[0].kind == TRN_ARG_KIND_SCALAR);
  CHECK(args[0].dtype == TRN_DTYPE_F32);
  CHECK(args[0].rank == 0);
  CHECK(args[0].bytes == 4);
  CHECK(args[0].direction == TRN_ARG_IN);
  CHECK(args[1].kind == TRN_ARG_KIND_SCALAR);
  CHECK(args[1].dtype == TRN_DTYPE_I32);
  CHECK(args[1].bytes == 4);
  CHECK(args[4].kind == TRN_ARG_KIND_TENSOR);
  CHECK(args[4].rank == 2);
  CHECK(args[4].bytes == kRows * 12 * 4);
  // A kernel without scalars reports tensors.
  trn_kernel_t plain = f.load(image_of(kScaleBias));
  for (const trn_kernel_arg_t &a : args_of(plain))
    CHECK(a.kind == (std::string(a.name) == "alpha" || std::string(a.name) == "beta"
                         ? TRN_ARG_KIND_SCALAR
                         : TRN_ARG_KIND_TENSOR));
}

TEST_CASE("scalar args: a caller built against API 0.1 gets its smaller trn_kernel_arg_t filled",
          "[kernels][scalar]") {
  Fixture f;
  trn_kernel_t kernel = f.load(image_of(kFill));
  // API 0.1's struct ended with `bytes`: such a caller's elements (and header.size) stop before
  // `kind`, so its array is packed at that size.
  constexpr size_t kOldSize = offsetof(trn_kernel_arg_t, kind);
  alignas(trn_kernel_arg_t) unsigned char storage[5 * kOldSize + 16];
  std::memset(storage, 0xA5, sizeof storage);
  auto element = [&](size_t i) {
    return reinterpret_cast<trn_kernel_arg_t *>(storage + i * kOldSize);
  };
  for (size_t i = 0; i < 5; ++i) {
    trn_struct_header_t header = TRN_KERNEL_ARG_INIT.header;
    header.size = static_cast<uint32_t>(kOldSize);
    std::memcpy(storage + i * kOldSize, &header, sizeof header);
  }
  uint32_t count = 5;
  INFO(last_error());
  REQUIRE(trn_kernel_get_args(kernel, &count, element(0)) == TRN_SUCCESS);
  CHECK(count == 5);
  auto bytes_of = [&](size_t i) {
    uint64_t bytes = 0;
    std::memcpy(&bytes, storage + i * kOldSize + offsetof(trn_kernel_arg_t, bytes), sizeof bytes);
    return bytes;
  };
  CHECK(std::string(reinterpret_cast<const char *>(storage + offsetof(trn_kernel_arg_t, name))) ==
        "v");
  CHECK(bytes_of(0) == 4);
  CHECK(bytes_of(4) == kRows * 12 * 4);
  // Past the caller's last element: untouched.
  for (size_t i = 5 * kOldSize; i < sizeof storage; ++i) CHECK(storage[i] == 0xA5);
}

TEST_CASE("scalar args: launch refuses memory for a scalar, NULL for a tensor, wrong counts",
          "[kernels][launch][scalar][negative]") {
  Fixture f;
  trn_kernel_t kernel = f.load(image_of(kScaleBias));
  trn_mem_t x = f.mem(kElems * 4), y = f.mem(kElems * 4);
  // Memory bound to a scalar.
  CHECK(f.launch(kernel, {tensor(x), tensor(y), f32(1), tensor(y)}) ==
        TRN_ERROR_INVALID_KERNEL_ARG);
  CHECK(error_contains(
      "desc.args[1] ('alpha') is a scalar argument (f32): its mem must be NULL; pass the value in "
      ".value (.f32)"));
  // No memory bound to a tensor (the error of API 0.1, with a reason).
  CHECK(f.launch(kernel, {f32(1), f32(1), f32(1), tensor(y)}) == TRN_ERROR_INVALID_HANDLE);
  CHECK(
      error_contains("desc.args[0] ('x') is a tensor argument (f32, 32768 bytes) but its mem is "
                     "NULL: bind device memory to it"));
  // Too few and too many bindings.
  CHECK(f.launch(kernel, {tensor(x), f32(1), f32(1)}) == TRN_ERROR_INVALID_KERNEL_ARG);
  CHECK(error_contains("takes 4 arguments but desc.arg_count is 3"));
  CHECK(f.launch(kernel, {tensor(x), f32(1), f32(1), tensor(y), f32(1)}) ==
        TRN_ERROR_INVALID_KERNEL_ARG);
  CHECK(error_contains("takes 4 arguments but desc.arg_count is 5"));
  // Nothing was queued by the refusals; a correct launch still runs.
  REQUIRE(f.launch(kernel, {tensor(x), f32(1), f32(0), tensor(y)}) == TRN_SUCCESS);
  f.finish();
}

TEST_CASE("scalar args: a binary whose slot reads a tensor or a missing argument is refused",
          "[kernels][scalar][negative]") {
  Fixture f;
  isa::ProgramBuilder b("bad");
  const auto x = b.arg("x", isa::DType::kF32, {128, 4}, isa::ArgDirection::kIn);
  b.scalar_arg("alpha", isa::DType::kF32);
  auto set = b.memset(isa::Engine::kGpSimd, isa::sbuf_tile(isa::DType::kF32, 0, 128, 0, 4), 0);
  set.read_scalar(isa::ImmSlot::kImm0, x);
  isa::Program p = b.finish();
  auto load = [&](const isa::Program &program) {
    const auto image = isa::write_kernel(program);
    trn_kernel_t k = nullptr;
    return trn_kernel_load(f.device, image.data(), image.size(), &k);
  };
  CHECK(load(p) == TRN_ERROR_INVALID_KERNEL);
  CHECK(error_contains("gpsimd[0]: imm0 reads argument 0 ('x'), which is a tensor"));
  p.stream(isa::Engine::kGpSimd)[0].scalar_arg[0] = 7;
  CHECK(load(p) == TRN_ERROR_INVALID_KERNEL);
  CHECK(error_contains("imm0 reads argument 7, but the kernel has 2"));
  p.stream(isa::Engine::kGpSimd)[0].scalar_arg[2] = 1;  // memset has no integer immediate
  p.stream(isa::Engine::kGpSimd)[0].scalar_arg[0] = 1;
  p.args[1].dtype = isa::DType::kI32;
  CHECK(load(p) == TRN_ERROR_INVALID_KERNEL);
  CHECK(error_contains("imm0 reads scalar argument 'alpha' of dtype i32; imm0 holds f32"));
}
