// Conformance: kernels and profiles — loading kernel binaries from memory and files (and refusing
// malformed or ISA-invalid ones), their properties and argument tables, launches on compute queues
// end to end (a vector add and a tiled matmul checked bit for bit), profiles and their Chrome
// traces, core activity, kernel faults (out-of-bounds DMA, SBUF overflow, deadlock) with their
// fault records, cancellation and recovery, and every function's refusal of bad input.
#include "support/test_kernels.hpp"

#include <elf.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "isa/builder.hpp"
#include "isa/container.hpp"
#include "isa/dtype.hpp"
#include "kbuild/kernels/tiled_matmul.hpp"
#include "support/api_helpers.hpp"
#include "support/result_printing.hpp"
#include "support/sim_env.hpp"
#include "trn/trn.h"

namespace {

using trn::test::alloc;
using trn::test::fault_of;
using trn::test::make_sem;

namespace isa = trn::isa;
using isa::AluOp;
using isa::DType;
using isa::Engine;
using trn::test::core_at;
using trn::test::devices;
using trn::test::error_contains;
using trn::test::first_device;
using trn::test::last_error;
using trn::test::SimEnv;

constexpr uint64_t kSecond = 1'000'000'000;
constexpr uint64_t kLong = 10 * kSecond;  // "forever" in a test: a hang fails, never blocks

constexpr uint32_t kRows = 128;
constexpr uint32_t kCols = 512;
constexpr uint64_t kTileBytes = uint64_t{kRows} * kCols * sizeof(float);

template <typename To, typename From>
To recast(From handle) {
  return reinterpret_cast<To>(handle);
}

template <typename Handle>
Handle handle_from(uintptr_t value) {
  return reinterpret_cast<Handle>(value);
}

// ---- kernels -------------------------------------------------------------------------------

// out = a + b for [128, 512] f32, optionally with source lines 10-13 (test_kernels.hpp).
isa::Program vector_add(bool lines = false) {
  return trn::test::vector_add_program(lines);
}

// Declares `small` as f32[128] but its second DMA reads [128, 512] from it: launched with a
// binding of exactly 512 bytes, sync[1] faults. sync[1] carries source line 42.
isa::Program overread() {
  isa::ProgramBuilder b("overread");
  const auto small = b.arg("small", DType::kF32, {128}, isa::ArgDirection::kIn);
  const auto o = b.arg("out", DType::kF32, {kRows, kCols}, isa::ArgDirection::kOut);
  b.dma_copy(Engine::kSync, 0, isa::sbuf(DType::kF32, 0, 1, 0, {{1, 128}}),
             isa::hbm(small, DType::kF32, 0, 128, 1, {{1, 128}}))
      .signal_add(1)
      .line(41);
  // Waits for the first: both write partition 0 (on different queues).
  b.dma_copy(Engine::kSync, 1, isa::sbuf_tile(DType::kF32, 0, kRows, 0, kCols),
             isa::hbm_tile(small, DType::kF32, kCols, 0, kRows, 0, kCols))
      .wait_ge(1, 1)
      .signal_add(0)
      .line(42);
  b.dma_copy(Engine::kGpSimd, 2, isa::hbm_tile(o, DType::kF32, kCols, 0, kRows, 0, kCols),
             isa::sbuf_tile(DType::kF32, 0, kRows, 0, kCols))
      .wait_ge(0, 1);
  return b.finish();
}

// overread() built from two source files: the faulting DMA comes from a helper header.
isa::Program overread_from_files() {
  isa::Program p = overread();
  isa::InstrRef(p, Engine::kSync, 0).at("kernels/overread.cpp", 41);
  isa::InstrRef(p, Engine::kSync, 1).at("kernels/overread_helpers.hpp", 42);
  isa::InstrRef(p, Engine::kGpSimd, 0).at("kernels/overread.cpp", 43);
  return p;
}

// A memset on vector at 1 MiB into each SBUF partition: past the partition on every generation
// (rejected when the kernel is loaded).
isa::Program sbuf_overflow() {
  isa::ProgramBuilder b("sbuf_overflow");
  b.memset(Engine::kGpSimd, isa::sbuf_tile(DType::kF32, 0, kRows, 512, 64), 0.0f);
  b.memset(Engine::kVector, isa::sbuf_tile(DType::kF32, 0, kRows, 0, 64), 1.0f);
  b.memset(Engine::kVector, isa::sbuf_tile(DType::kF32, 0, kRows, 1u << 20, 64), 2.0f);
  return b.finish();
}

// Tensor waits on semaphore 5, which nothing signals; vector runs to the end.
isa::Program deadlock() {
  isa::ProgramBuilder b("stuck");
  b.memset(Engine::kVector, isa::sbuf_tile(DType::kF32, 0, kRows, 0, 64), 1.0f);
  b.sem_wait(Engine::kTensor, 5, 1);
  return b.finish();
}

// The tensor engine writing SBUF: well-formed bytes, but against the ISA's rules.
isa::Program tensor_writes_sbuf() {
  isa::ProgramBuilder b("bad_matmul");
  b.matmul(isa::sbuf_tile(DType::kF32, 0, 128, 0, 512),
           isa::sbuf_tile(DType::kBf16, 0, 128, 0, 128),
           isa::sbuf_tile(DType::kBf16, 0, 128, 4096, 512), true);
  return b.finish();
}

isa::Program tiled_matmul(uint64_t m, uint64_t n, uint64_t k) {
  return trn::test::tiled_matmul_program(m, n, k);
}

std::vector<std::byte> image_of(const isa::Program &program) {
  return isa::write_kernel(program);
}

trn_kernel_t load(trn_device_t device, const isa::Program &program) {
  return trn::test::load_program(device, program);
}

trn_kernel_properties_t properties_of(trn_kernel_t kernel) {
  trn_kernel_properties_t p = TRN_KERNEL_PROPERTIES_INIT;
  const trn_result_t r = trn_kernel_get_properties(kernel, &p);
  INFO(last_error());
  REQUIRE(r == TRN_SUCCESS);
  return p;
}

std::vector<trn_kernel_arg_t> args_of(trn_kernel_t kernel) {
  uint32_t count = 0;
  REQUIRE(trn_kernel_get_args(kernel, &count, nullptr) == TRN_SUCCESS);
  std::vector<trn_kernel_arg_t> list(count, TRN_KERNEL_ARG_INIT);
  REQUIRE(trn_kernel_get_args(kernel, &count, list.data()) == TRN_SUCCESS);
  REQUIRE(count == list.size());
  return list;
}

// Byte offset of an ELF section's contents, found by name.
uint64_t section_offset(const std::vector<std::byte> &image, const std::string &name) {
  Elf64_Ehdr eh;
  REQUIRE(image.size() >= sizeof eh);
  std::memcpy(&eh, image.data(), sizeof eh);
  REQUIRE(eh.e_shentsize == sizeof(Elf64_Shdr));
  auto header = [&](uint32_t i) {
    Elf64_Shdr sh;
    const uint64_t at = eh.e_shoff + uint64_t{i} * sizeof sh;
    REQUIRE(at + sizeof sh <= image.size());
    std::memcpy(&sh, image.data() + at, sizeof sh);
    return sh;
  };
  const Elf64_Shdr strtab = header(eh.e_shstrndx);
  for (uint32_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr sh = header(i);
    const char *text = reinterpret_cast<const char *>(image.data() + strtab.sh_offset + sh.sh_name);
    if (name == text) return sh.sh_offset;
  }
  FAIL("no section " << name);
  return 0;
}

// ---- memory, queues, launches ------------------------------------------------------------------

trn_core_properties_t core_properties(trn_core_t core) {
  trn_core_properties_t p = TRN_CORE_PROPERTIES_INIT;
  REQUIRE(trn_core_get_properties(core, &p) == TRN_SUCCESS);
  return p;
}

trn_pool_t make_pool(trn_device_t device, uint32_t bank,
                     trn_pool_kind_t kind = TRN_POOL_KIND_DEVICE) {
  trn_pool_desc_t desc = TRN_POOL_DESC_INIT;
  desc.kind = kind;
  desc.hbm_bank = bank;
  trn_pool_t pool = nullptr;
  const trn_result_t r = trn_pool_create(device, &desc, &pool);
  INFO(last_error());
  REQUIRE(r == TRN_SUCCESS);
  return pool;
}

template <typename T>
void write_values(trn_mem_t mem, const std::vector<T> &values) {
  REQUIRE(trn_mem_write(mem, 0, values.data(), values.size() * sizeof(T)) == TRN_SUCCESS);
}

template <typename T>
std::vector<T> read_values(trn_mem_t mem, size_t count, uint64_t offset = 0) {
  std::vector<T> values(count);
  const trn_result_t r = trn_mem_read(mem, offset, values.data(), count * sizeof(T));
  INFO(last_error());
  REQUIRE(r == TRN_SUCCESS);
  return values;
}

trn_queue_t make_queue(trn_core_t core, trn_queue_kind_t kind = TRN_QUEUE_KIND_COMPUTE) {
  trn_queue_desc_t desc = TRN_QUEUE_DESC_INIT;
  desc.core = core;
  desc.kind = kind;
  trn_queue_t queue = nullptr;
  const trn_result_t r = trn_queue_create(&desc, &queue);
  INFO(last_error());
  REQUIRE(r == TRN_SUCCESS);
  return queue;
}

trn_core_activity_t activity_of(trn_core_t core) {
  trn_core_activity_t a = TRN_CORE_ACTIVITY_INIT;
  REQUIRE(trn_core_get_activity(core, &a) == TRN_SUCCESS);
  return a;
}

trn_profile_t make_profile(uint32_t flags) {
  trn_profile_t profile = nullptr;
  const trn_result_t r = trn_profile_create(flags, &profile);
  INFO(last_error());
  REQUIRE(r == TRN_SUCCESS);
  REQUIRE(profile != nullptr);
  return profile;
}

trn_profile_summary_t summary_of(trn_profile_t profile) {
  trn_profile_summary_t s = TRN_PROFILE_SUMMARY_INIT;
  REQUIRE(trn_profile_get_summary(profile, &s) == TRN_SUCCESS);
  return s;
}

void finish(trn_queue_t queue) {
  const trn_result_t r = trn_queue_finish(queue, kLong);
  INFO(last_error());
  REQUIRE(r == TRN_SUCCESS);
}

// A launch's bindings and descriptor, kept together so the pointers stay valid.
struct Launch {
  std::vector<trn_kernel_binding_t> bindings;
  trn_launch_desc_t desc = TRN_LAUNCH_DESC_INIT;

  Launch(trn_kernel_t kernel, std::vector<trn_kernel_binding_t> list,
         trn_profile_t profile = nullptr)
      : bindings(std::move(list)) {
    desc.kernel = kernel;
    desc.args = bindings.empty() ? nullptr : bindings.data();
    desc.arg_count = static_cast<uint32_t>(bindings.size());
    desc.profile = profile;
  }
  const trn_launch_desc_t *get() { return &desc; }
};

trn_result_t launch(trn_queue_t queue, Launch &l, const trn_sync_t *sync = nullptr,
                    uint64_t *sequence = nullptr) {
  return trn_queue_launch(queue, l.get(), sync, sequence);
}

// One device with its first core's bank: memory, a compute queue.
struct Fixture {
  SimEnv env;
  trn_device_t device = nullptr;
  trn_core_t core = nullptr;
  trn_pool_t pool = nullptr;
  trn_queue_t queue = nullptr;
  std::vector<trn_mem_t> mems;

  // `vars`: environment variables set before the runtime starts.
  explicit Fixture(std::vector<std::pair<const char *, const char *>> vars = {}) {
    for (auto [name, value] : vars) env.set(name, value);
    device = first_device();
    core = core_at(device, 0);
    pool = make_pool(device, core_properties(core).hbm_bank);
    queue = make_queue(core);
  }
  ~Fixture() {
    trn_queue_destroy(queue);
    for (trn_mem_t m : mems) trn_mem_free(m);
    trn_pool_destroy(pool);
  }
  trn_mem_t mem(uint64_t size) {
    mems.push_back(alloc(pool, size));
    return mems.back();
  }
};

// Inputs of the vector add: a[i] = i, b[i] = (i % 7) / 2 (exact in f32).
struct VectorAddData {
  std::vector<float> a, b;
  VectorAddData() : a(uint64_t{kRows} * kCols), b(uint64_t{kRows} * kCols) {
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = static_cast<float>(i);
      b[i] = 0.5f * static_cast<float>(i % 7);
    }
  }
  bool matches(const std::vector<float> &out) const {
    for (size_t i = 0; i < a.size(); ++i)
      if (out[i] != a[i] + b[i]) {
        UNSCOPED_INFO("out[" << i << "] = " << out[i] << ", expected " << a[i] + b[i]);
        return false;
      }
    return true;
  }
};

// A [128, 512] vector add, ready to launch: its three allocations hold the inputs.
struct VectorAdd {
  VectorAddData data;
  trn_mem_t a, b, out;
  explicit VectorAdd(Fixture &f)
      : a(f.mem(kTileBytes)), b(f.mem(kTileBytes)), out(f.mem(kTileBytes)) {
    write_values(a, data.a);
    write_values(b, data.b);
    REQUIRE(trn_mem_set(out, 0, 0xEE, kTileBytes) == TRN_SUCCESS);
  }
  std::vector<trn_kernel_binding_t> bindings() const { return {{a, 0}, {b, 0}, {out, 0}}; }
  bool done() const { return data.matches(read_values<float>(out, uint64_t{kRows} * kCols)); }
};

// The trace file a test writes, removed afterwards.
std::string temp_path(const SimEnv &env, const char *name) {
  return env.root() + "/" + name;
}

nlohmann::json read_json(const std::string &path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception &e) {
    FAIL("the trace is not JSON: " << e.what());
  }
  return j;
}

}  // namespace

// ---- loading -------------------------------------------------------------------------------

TEST_CASE("kernels: load from memory reports name, instructions, constants and arguments",
          "[kernels]") {
  SimEnv env;
  trn_device_t device = first_device();
  isa::Program program = vector_add();
  program.constants.assign(96, std::byte{0x5A});
  auto image = image_of(program);
  trn_kernel_t kernel = nullptr;
  REQUIRE(trn_kernel_load(device, image.data(), image.size(), &kernel) == TRN_SUCCESS);
  REQUIRE(kernel != nullptr);
  // The image is copied: changing or freeing it afterwards does not matter.
  std::fill(image.begin(), image.end(), std::byte{0});
  image.clear();
  image.shrink_to_fit();

  const trn_kernel_properties_t p = properties_of(kernel);
  CHECK(std::string(p.name) == "vector_add");
  CHECK(p.arg_count == 3);
  CHECK(p.instructions[TRN_ENGINE_TENSOR] == 0);
  CHECK(p.instructions[TRN_ENGINE_VECTOR] == 1);
  CHECK(p.instructions[TRN_ENGINE_SCALAR] == 0);
  CHECK(p.instructions[TRN_ENGINE_GPSIMD] == 1);
  CHECK(p.instructions[TRN_ENGINE_SYNC] == 2);
  CHECK(p.constants_bytes == 96);

  // Two-call enumeration of the arguments.
  uint32_t count = 0;
  REQUIRE(trn_kernel_get_args(kernel, &count, nullptr) == TRN_SUCCESS);
  CHECK(count == 3);
  const auto args = args_of(kernel);
  REQUIRE(args.size() == 3);
  const char *names[] = {"a", "b", "out"};
  const trn_arg_direction_t dirs[] = {TRN_ARG_IN, TRN_ARG_IN, TRN_ARG_OUT};
  for (size_t i = 0; i < 3; ++i) {
    INFO("argument " << i);
    CHECK(args[i].header.type == TRN_STRUCT_KERNEL_ARG);
    CHECK(args[i].header.size == sizeof(trn_kernel_arg_t));
    CHECK(std::string(args[i].name) == names[i]);
    CHECK(args[i].dtype == TRN_DTYPE_F32);
    CHECK(args[i].direction == dirs[i]);
    CHECK(args[i].rank == 2);
    CHECK(args[i].shape[0] == kRows);
    CHECK(args[i].shape[1] == kCols);
    for (uint32_t d = 2; d < TRN_KERNEL_MAX_RANK; ++d) CHECK(args[i].shape[d] == 0);
    CHECK(args[i].bytes == kTileBytes);
  }
  // A shorter array receives the first elements; *count says how many.
  std::vector<trn_kernel_arg_t> two(2, TRN_KERNEL_ARG_INIT);
  count = 2;
  REQUIRE(trn_kernel_get_args(kernel, &count, two.data()) == TRN_SUCCESS);
  CHECK(count == 2);
  CHECK(std::string(two[1].name) == "b");
  // A longer one: *count becomes the real number.
  std::vector<trn_kernel_arg_t> five(5, TRN_KERNEL_ARG_INIT);
  count = 5;
  REQUIRE(trn_kernel_get_args(kernel, &count, five.data()) == TRN_SUCCESS);
  CHECK(count == 3);
  CHECK(std::string(five[2].name) == "out");
  CHECK(five[3].name[0] == '\0');
  // An array from a program built against 0.1, whose elements end before `kind`: the library
  // steps by the caller's size and writes nothing past each element.
  {
    struct Arg01 {
      trn_struct_header_t header;
      char name[TRN_NAME_MAX];
      trn_dtype_t dtype;
      trn_arg_direction_t direction;
      uint32_t rank, reserved;
      uint64_t shape[TRN_KERNEL_MAX_RANK];
      uint64_t bytes;
    };
    static_assert(sizeof(Arg01) == offsetof(trn_kernel_arg_t, kind));
    struct Guarded {
      Arg01 arg[3];
      uint64_t guard = 0x5a5a5a5a5a5a5a5aull;
    } old{};
    for (Arg01 &a : old.arg) a.header = {TRN_STRUCT_KERNEL_ARG, sizeof(Arg01)};
    count = 3;
    INFO(last_error());
    REQUIRE(trn_kernel_get_args(kernel, &count, reinterpret_cast<trn_kernel_arg_t *>(old.arg)) ==
            TRN_SUCCESS);
    CHECK(count == 3);
    for (size_t i = 0; i < 3; ++i) {
      CHECK(std::string(old.arg[i].name) == names[i]);
      CHECK(old.arg[i].header.size == sizeof(Arg01));
      CHECK(old.arg[i].bytes == kTileBytes);
    }
    CHECK(old.guard == 0x5a5a5a5a5a5a5a5aull);
    // Elements of different sizes are refused before anything is written, naming the element.
    old.arg[0].name[0] = '\0';
    old.arg[2].header.size = 8;
    count = 3;
    CHECK(trn_kernel_get_args(kernel, &count, reinterpret_cast<trn_kernel_arg_t *>(old.arg)) ==
          TRN_ERROR_INVALID_STRUCT);
    CHECK(error_contains("args[2] has size 8"));
    CHECK(old.arg[0].name[0] == '\0');
  }

  // Other dtypes and ranks: the matmul's bf16 inputs and f32 output.
  trn_kernel_t mm = load(device, tiled_matmul(256, 512, 128));
  const auto margs = args_of(mm);
  REQUIRE(margs.size() == 3);
  CHECK(std::string(margs[0].name) == "lhsT");
  CHECK(margs[0].dtype == TRN_DTYPE_BF16);
  CHECK(margs[0].shape[0] == 128);
  CHECK(margs[0].shape[1] == 256);
  CHECK(margs[0].bytes == 128 * 256 * 2);
  CHECK(margs[2].dtype == TRN_DTYPE_F32);
  CHECK(margs[2].direction == TRN_ARG_OUT);
  CHECK(margs[2].bytes == 256 * 512 * 4);
  CHECK(properties_of(mm).instructions[TRN_ENGINE_TENSOR] > 0);
  CHECK(properties_of(mm).constants_bytes == 0);

  // A kernel without arguments enumerates none.
  trn_kernel_t none = load(device, deadlock());
  count = 7;
  REQUIRE(trn_kernel_get_args(none, &count, nullptr) == TRN_SUCCESS);
  CHECK(count == 0);
  CHECK(properties_of(none).arg_count == 0);

  // Destroy: NULL is fine; twice is a stale handle.
  CHECK(trn_kernel_destroy(nullptr) == TRN_SUCCESS);
  CHECK(trn_kernel_destroy(kernel) == TRN_SUCCESS);
  CHECK(trn_kernel_destroy(kernel) == TRN_ERROR_INVALID_HANDLE);
  CHECK(error_contains("trn_kernel_destroy: "));
  trn_kernel_properties_t stale = TRN_KERNEL_PROPERTIES_INIT;
  CHECK(trn_kernel_get_properties(kernel, &stale) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_kernel_get_args(kernel, &count, nullptr) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_kernel_destroy(mm) == TRN_SUCCESS);
  CHECK(trn_kernel_destroy(none) == TRN_SUCCESS);
}

TEST_CASE("kernels: load from a file", "[kernels]") {
  SimEnv env;
  trn_device_t device = first_device();
  const std::string path = temp_path(env, "vector_add.trnk");
  {
    const auto image = image_of(vector_add(true));
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char *>(image.data()),
              static_cast<std::streamsize>(image.size()));
    REQUIRE(out.good());
  }
  trn_kernel_t kernel = nullptr;
  const trn_result_t r = trn_kernel_load_file(device, path.c_str(), &kernel);
  INFO(last_error());
  REQUIRE(r == TRN_SUCCESS);
  CHECK(std::string(properties_of(kernel).name) == "vector_add");
  CHECK(properties_of(kernel).arg_count == 3);
  CHECK(args_of(kernel)[2].bytes == kTileBytes);
  // The same file loads again as a separate kernel.
  trn_kernel_t again = nullptr;
  REQUIRE(trn_kernel_load_file(device, path.c_str(), &again) == TRN_SUCCESS);
  CHECK(again != kernel);
  CHECK(trn_kernel_destroy(kernel) == TRN_SUCCESS);
  CHECK(std::string(properties_of(again).name) == "vector_add");
  CHECK(trn_kernel_destroy(again) == TRN_SUCCESS);

  // A missing file.
  trn_kernel_t missing = nullptr;
  const std::string nowhere = temp_path(env, "no-such-kernel.trnk");
  CHECK(trn_kernel_load_file(device, nowhere.c_str(), &missing) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(missing == nullptr);
  CHECK(error_contains("trn_kernel_load_file: "));
  CHECK(error_contains(nowhere));
  CHECK(error_contains("does not exist"));

  // A file that is not a kernel, and an empty one.
  const std::string junk = temp_path(env, "junk.trnk");
  {
    std::ofstream out(junk, std::ios::binary);
    out << "#!/bin/sh\necho not a kernel\n";
  }
  CHECK(trn_kernel_load_file(device, junk.c_str(), &missing) == TRN_ERROR_INVALID_KERNEL);
  CHECK(error_contains("malformed kernel binary"));
  const std::string empty = temp_path(env, "empty.trnk");
  { std::ofstream out(empty, std::ios::binary); }
  CHECK(trn_kernel_load_file(device, empty.c_str(), &missing) == TRN_ERROR_INVALID_KERNEL);
  // A directory is not a kernel either (and must not be mistaken for a huge file).
  const trn_result_t dir = trn_kernel_load_file(device, env.root().c_str(), &missing);
  INFO(last_error());
  CHECK((dir == TRN_ERROR_INVALID_ARGUMENT || dir == TRN_ERROR_INVALID_KERNEL));
  CHECK(missing == nullptr);

  // NULL pointers and bad devices.
  CHECK(trn_kernel_load_file(device, nullptr, &missing) == TRN_ERROR_NULL_POINTER);
  CHECK(trn_kernel_load_file(device, path.c_str(), nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(trn_kernel_load_file(nullptr, path.c_str(), &missing) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_kernel_load_file(handle_from<trn_device_t>(0x1234), path.c_str(), &missing) ==
        TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_kernel_load_file(recast<trn_device_t>(core_at(device, 0)), path.c_str(), &missing) ==
        TRN_ERROR_INVALID_HANDLE);
  CHECK(missing == nullptr);
}

TEST_CASE("kernels: malformed binaries give TRN_ERROR_INVALID_KERNEL with a reason",
          "[kernels][negative]") {
  SimEnv env;
  trn_device_t device = first_device();
  const auto good = image_of(vector_add(true));
  trn_kernel_t kernel = nullptr;

  auto refused = [&](const void *data, size_t size, const std::string &what) {
    INFO(what);
    kernel = nullptr;
    CHECK(trn_kernel_load(device, data, size, &kernel) == TRN_ERROR_INVALID_KERNEL);
    CHECK(kernel == nullptr);
    INFO("trn_last_error: " << last_error());
    CHECK(last_error().rfind("trn_kernel_load: ", 0) == 0);
    CHECK(error_contains("malformed kernel binary: "));
    // A reason follows the prefix.
    CHECK(last_error().size() > std::string("trn_kernel_load: malformed kernel binary: ").size());
  };

  // Empty (a valid pointer, no bytes).
  refused(good.data(), 0, "empty");
  // Truncated: at every interesting length.
  for (size_t size :
       {size_t{1}, size_t{16}, size_t{63}, size_t{64}, good.size() / 2, good.size() - 1})
    refused(good.data(), size, "truncated to " + std::to_string(size));
  // One byte too many.
  {
    auto longer = good;
    longer.push_back(std::byte{0});
    refused(longer.data(), longer.size(), "a trailing byte");
  }
  // Random bytes, and random bytes behind a valid ELF header.
  std::mt19937 rng(1234);
  std::vector<std::byte> noise(4096);
  for (auto &b : noise) b = static_cast<std::byte>(rng() & 0xFF);
  refused(noise.data(), noise.size(), "random bytes");
  {
    auto body = good;
    for (size_t i = 64; i < body.size(); ++i) body[i] = static_cast<std::byte>(rng() & 0xFF);
    refused(body.data(), body.size(), "a valid ELF header before random bytes");
  }
  // A valid kernel with one byte flipped in an instruction (the reserved byte 7 of vector[0]).
  {
    auto flipped = good;
    const uint64_t text = section_offset(flipped, ".trn.text.vector");
    flipped[text + 7] ^= std::byte{0x01};
    refused(flipped.data(), flipped.size(), "a flipped instruction byte");
    CHECK(error_contains("reserved byte 7"));
    // The opcode byte of sync[1] set past the last opcode.
    flipped = good;
    const uint64_t sync = section_offset(flipped, ".trn.text.sync");
    flipped[sync + isa::kInstructionRecordSize] = std::byte{0xEE};
    refused(flipped.data(), flipped.size(), "an unknown opcode");
    CHECK(error_contains("unknown opcode 238"));
  }
  // Every single-byte truncation and flip of the header region is refused or loads; none
  // crashes (a flipped name byte may still be a valid kernel).
  for (size_t i = 0; i < 64; ++i) {
    auto flipped = good;
    flipped[i] ^= std::byte{0xFF};
    trn_kernel_t k = nullptr;
    const trn_result_t r = trn_kernel_load(device, flipped.data(), flipped.size(), &k);
    INFO("byte " << i);
    CHECK((r == TRN_ERROR_INVALID_KERNEL || r == TRN_SUCCESS));
    if (r == TRN_SUCCESS) CHECK(trn_kernel_destroy(k) == TRN_SUCCESS);
  }
  // The good image still loads after all that.
  trn_kernel_t ok = load(device, vector_add(true));
  CHECK(trn_kernel_destroy(ok) == TRN_SUCCESS);
}

TEST_CASE("kernels: a kernel that breaks an ISA rule is refused naming the instruction",
          "[kernels][negative]") {
  SimEnv env;
  trn_device_t device = first_device();
  const auto image = image_of(tensor_writes_sbuf());
  trn_kernel_t kernel = nullptr;
  CHECK(trn_kernel_load(device, image.data(), image.size(), &kernel) == TRN_ERROR_INVALID_KERNEL);
  CHECK(kernel == nullptr);
  INFO(last_error());
  CHECK(error_contains("trn_kernel_load: "));
  CHECK(error_contains("bad_matmul"));
  CHECK(error_contains("tensor[0] nc_matmul"));
  CHECK(error_contains("SBUF"));

  // An instruction in the wrong engine's stream is caught by the reader.
  isa::Program wrong_engine = vector_add();
  wrong_engine.streams[TRN_ENGINE_VECTOR][0].engine = Engine::kScalar;
  const auto bad = image_of(wrong_engine);
  CHECK(trn_kernel_load(device, bad.data(), bad.size(), &kernel) == TRN_ERROR_INVALID_KERNEL);
  CHECK(error_contains("vector"));

  // A DMA that writes an 'in' argument.
  isa::ProgramBuilder b("writes_input");
  const auto x = b.arg("x", DType::kF32, {kRows, kCols}, isa::ArgDirection::kIn);
  b.dma_copy(Engine::kSync, 0, isa::hbm_tile(x, DType::kF32, kCols, 0, kRows, 0, kCols),
             isa::sbuf_tile(DType::kF32, 0, kRows, 0, kCols));
  const auto writes_in = image_of(b.finish());
  CHECK(trn_kernel_load(device, writes_in.data(), writes_in.size(), &kernel) ==
        TRN_ERROR_INVALID_KERNEL);
  CHECK(error_contains("sync[0] dma_copy"));
  CHECK(error_contains("'x'"));
}

TEST_CASE("kernels: load, properties and args refuse NULL pointers, bad handles and structs",
          "[kernels][negative]") {
  SimEnv env;
  trn_device_t device = first_device();
  const auto image = image_of(vector_add());
  trn_kernel_t kernel = nullptr;
  CHECK(trn_kernel_load(device, nullptr, image.size(), &kernel) == TRN_ERROR_NULL_POINTER);
  CHECK(error_contains("trn_kernel_load: "));
  CHECK(trn_kernel_load(device, image.data(), image.size(), nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(trn_kernel_load(nullptr, image.data(), image.size(), &kernel) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_kernel_load(handle_from<trn_device_t>(0xdeadbeef), image.data(), image.size(),
                        &kernel) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_kernel_load(recast<trn_device_t>(core_at(device, 0)), image.data(), image.size(),
                        &kernel) == TRN_ERROR_INVALID_HANDLE);
  CHECK(kernel == nullptr);

  kernel = load(device, vector_add());
  trn_profile_t profile = make_profile(0);

  trn_kernel_properties_t p = TRN_KERNEL_PROPERTIES_INIT;
  CHECK(trn_kernel_get_properties(kernel, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(error_contains("trn_kernel_get_properties: "));
  p.header.type = TRN_STRUCT_KERNEL_ARG;
  CHECK(trn_kernel_get_properties(kernel, &p) == TRN_ERROR_INVALID_STRUCT);
  CHECK(error_contains("TRN_KERNEL_PROPERTIES_INIT"));
  p = TRN_KERNEL_PROPERTIES_INIT;
  p.header.size = 2;
  CHECK(trn_kernel_get_properties(kernel, &p) == TRN_ERROR_INVALID_STRUCT);
  p = TRN_KERNEL_PROPERTIES_INIT;
  CHECK(trn_kernel_get_properties(nullptr, &p) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_kernel_get_properties(handle_from<trn_kernel_t>(0x1234), &p) ==
        TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_kernel_get_properties(recast<trn_kernel_t>(profile), &p) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_kernel_get_properties(recast<trn_kernel_t>(device), &p) == TRN_ERROR_INVALID_HANDLE);

  // An older, shorter struct receives only what it has room for.
  struct {
    trn_struct_header_t header;
    char name[TRN_NAME_MAX];
    uint32_t arg_count;
    uint32_t guard;
  } older{};
  older.header = TRN_KERNEL_PROPERTIES_INIT.header;
  older.header.size = static_cast<uint32_t>(offsetof(trn_kernel_properties_t, reserved));
  older.guard = 0xA5A5A5A5u;
  REQUIRE(trn_kernel_get_properties(kernel, reinterpret_cast<trn_kernel_properties_t *>(&older)) ==
          TRN_SUCCESS);
  CHECK(std::string(older.name) == "vector_add");
  CHECK(older.arg_count == 3);
  CHECK(older.guard == 0xA5A5A5A5u);

  uint32_t count = 3;
  std::vector<trn_kernel_arg_t> args(3, TRN_KERNEL_ARG_INIT);
  CHECK(trn_kernel_get_args(kernel, nullptr, args.data()) == TRN_ERROR_NULL_POINTER);
  CHECK(error_contains("trn_kernel_get_args: "));
  CHECK(trn_kernel_get_args(nullptr, &count, args.data()) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_kernel_get_args(recast<trn_kernel_t>(profile), &count, nullptr) ==
        TRN_ERROR_INVALID_HANDLE);
  args[1].header.type = TRN_STRUCT_KERNEL_PROPERTIES;
  CHECK(trn_kernel_get_args(kernel, &count, args.data()) == TRN_ERROR_INVALID_STRUCT);
  CHECK(error_contains("TRN_KERNEL_ARG_INIT"));

  // Wrong-kind handles are refused by destroy and leave both objects alive.
  CHECK(trn_kernel_destroy(recast<trn_kernel_t>(profile)) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_profile_destroy(recast<trn_profile_t>(kernel)) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_kernel_destroy(handle_from<trn_kernel_t>(0x1234)) == TRN_ERROR_INVALID_HANDLE);
  CHECK(std::string(properties_of(kernel).name) == "vector_add");
  CHECK(summary_of(profile).launches == 0);

  // A runtime shutdown makes every kernel handle stale.
  trn_runtime_shutdown();
  CHECK(trn_kernel_get_properties(kernel, &p) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_kernel_destroy(kernel) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_profile_destroy(profile) == TRN_ERROR_INVALID_HANDLE);
}

// ---- launches ------------------------------------------------------------------------------

TEST_CASE("kernels: a vector add runs end to end with a profile and a trace", "[kernels][launch]") {
  Fixture f;
  VectorAdd data(f);
  trn_kernel_t kernel = load(f.device, vector_add(true));
  trn_profile_t profile = make_profile(TRN_PROFILE_FLAG_TRACE);
  const trn_profile_summary_t empty = summary_of(profile);
  CHECK(empty.launches == 0);
  CHECK(empty.total_ns == 0);
  // No launch yet: no trace to write.
  const std::string trace = temp_path(f.env, "trace.json");
  CHECK(trn_profile_write_trace(profile, trace.c_str()) == TRN_ERROR_INVALID_ARGUMENT);

  Launch l(kernel, data.bindings(), profile);
  uint64_t seq = 0;
  const trn_result_t r = launch(f.queue, l, nullptr, &seq);
  INFO(last_error());
  REQUIRE(r == TRN_SUCCESS);
  CHECK(seq == 1);
  finish(f.queue);
  CHECK(data.done());

  const trn_profile_summary_t s = summary_of(profile);
  CHECK(s.launches == 1);
  CHECK(s.total_ns > 0);
  CHECK(s.engine_instructions[TRN_ENGINE_TENSOR] == 0);
  CHECK(s.engine_instructions[TRN_ENGINE_VECTOR] == 1);
  CHECK(s.engine_instructions[TRN_ENGINE_SCALAR] == 0);
  CHECK(s.engine_instructions[TRN_ENGINE_GPSIMD] == 1);
  CHECK(s.engine_instructions[TRN_ENGINE_SYNC] == 2);
  CHECK(s.engine_busy_ns[TRN_ENGINE_VECTOR] > 0);
  CHECK(s.engine_busy_ns[TRN_ENGINE_TENSOR] == 0);
  CHECK(s.engine_busy_ns[TRN_ENGINE_VECTOR] <= s.total_ns);
  // The add waited for both loads.
  CHECK(s.engine_wait_ns[TRN_ENGINE_VECTOR] > 0);
  for (uint32_t e = 0; e < TRN_ENGINE_COUNT; ++e) {
    INFO("engine " << e);
    CHECK(s.engine_active_percent[e] >= 0.0);
    CHECK(s.engine_active_percent[e] <= 100.0);
  }
  CHECK(s.engine_active_percent[TRN_ENGINE_VECTOR] > 0.0);
  CHECK(s.tensor_flops == 0);
  CHECK(s.mfu_percent == 0.0);
  CHECK(s.dma_transfers == 3);
  CHECK(s.dma_bytes == 3 * kTileBytes);
  CHECK(s.dma_utilization_percent > 0.0);
  CHECK(s.dma_utilization_percent <= 100.0);
  CHECK(s.peak_flops > 0.0);
  CHECK(s.host_ns > 0);

  // The trace: Chrome trace-event JSON with engine and DMA-queue tracks.
  const trn_result_t w = trn_profile_write_trace(profile, trace.c_str());
  INFO(last_error());
  REQUIRE(w == TRN_SUCCESS);
  const nlohmann::json j = read_json(trace);
  REQUIRE(j.contains("traceEvents"));
  REQUIRE(j["traceEvents"].is_array());
  std::map<int, std::string> track_names;
  std::set<int> instruction_tids, dma_tids;
  size_t instructions = 0, transfers = 0;
  std::map<std::string, size_t> per_engine;
  for (const auto &ev : j["traceEvents"]) {
    REQUIRE(ev.contains("ph"));
    const std::string ph = ev["ph"].get<std::string>();
    if (ph == "M" && ev["name"] == "thread_name")
      track_names[ev["tid"].get<int>()] = ev["args"]["name"].get<std::string>();
    if (ph != "X") continue;
    REQUIRE(ev.contains("ts"));
    REQUIRE(ev.contains("dur"));
    CHECK(ev["ts"].get<double>() >= 0.0);
    CHECK(ev["dur"].get<double>() >= 0.0);
    CHECK(ev["ts"].get<double>() + ev["dur"].get<double>() <= double(s.total_ns) * 1e-3 + 1e-3);
    const int tid = ev["tid"].get<int>();
    if (ev["cat"] == "dma") {
      ++transfers;
      dma_tids.insert(tid);
      CHECK(ev["name"] == "dma_copy");
      CHECK(ev["args"]["bytes"].get<uint64_t>() == kTileBytes);
    } else {
      ++instructions;
      instruction_tids.insert(tid);
      ++per_engine[ev["args"]["engine"].get<std::string>()];
    }
  }
  CHECK(instructions == 4);
  CHECK(transfers == 3);
  CHECK(per_engine["sync"] == 2);
  CHECK(per_engine["vector"] == 1);
  CHECK(per_engine["gpsimd"] == 1);
  // Instructions sit on engine tracks, transfers on DMA-queue tracks (queues 0, 1 and 2).
  for (int tid : instruction_tids) {
    INFO("tid " << tid);
    REQUIRE(track_names.count(tid) == 1);
    CHECK(track_names[tid].find("DMA") == std::string::npos);
  }
  CHECK(dma_tids.size() == 3);
  for (int tid : dma_tids) {
    INFO("tid " << tid);
    REQUIRE(track_names.count(tid) == 1);
    CHECK(track_names[tid].find("DMA queue") == 0);
  }
  CHECK(track_names.size() >= 5 + 3);
  if (j.contains("otherData")) CHECK(j["otherData"]["kernel"] == "vector_add");

  // The profile holds the latest launch; launches counts them all.
  REQUIRE(launch(f.queue, l) == TRN_SUCCESS);
  finish(f.queue);
  CHECK(summary_of(profile).launches == 2);
  CHECK(summary_of(profile).engine_instructions[TRN_ENGINE_SYNC] == 2);

  // A profile without the trace flag has a summary but no trace.
  trn_profile_t plain = make_profile(0);
  Launch pl(kernel, data.bindings(), plain);
  REQUIRE(launch(f.queue, pl) == TRN_SUCCESS);
  finish(f.queue);
  CHECK(summary_of(plain).launches == 1);
  CHECK(summary_of(plain).dma_bytes == 3 * kTileBytes);
  const std::string plain_trace = temp_path(f.env, "plain.json");
  CHECK(trn_profile_write_trace(plain, plain_trace.c_str()) == TRN_ERROR_INVALID_ARGUMENT);
  INFO(last_error());
  CHECK(error_contains("trn_profile_write_trace: "));
  CHECK(error_contains("TRN_PROFILE_FLAG_TRACE"));

  // Without a profile at all.
  Launch bare(kernel, data.bindings());
  REQUIRE(launch(f.queue, bare) == TRN_SUCCESS);
  finish(f.queue);
  CHECK(data.done());

  // Core activity counts the kernels and their engines.
  const trn_core_activity_t a = activity_of(f.core);
  CHECK(a.kernels_completed == 4);
  CHECK(a.kernels_faulted == 0);
  CHECK(a.kernel_ns >= 4 * s.total_ns - 4);
  CHECK(a.engine_instructions[TRN_ENGINE_SYNC] == 8);
  CHECK(a.engine_instructions[TRN_ENGINE_VECTOR] == 4);
  CHECK(a.engine_instructions[TRN_ENGINE_GPSIMD] == 4);
  CHECK(a.engine_instructions[TRN_ENGINE_TENSOR] == 0);
  CHECK(a.engine_busy_ns[TRN_ENGINE_VECTOR] > 0);
  CHECK(a.tensor_flops == 0);
  CHECK(a.commands_completed == 4);
  CHECK(a.dma_bytes >= 4 * 3 * kTileBytes);

  CHECK(trn_profile_destroy(plain) == TRN_SUCCESS);
  CHECK(trn_profile_destroy(profile) == TRN_SUCCESS);
  CHECK(trn_kernel_destroy(kernel) == TRN_SUCCESS);
}

TEST_CASE("kernels: profile functions refuse bad input", "[kernels][negative]") {
  SimEnv env;
  trn_profile_t profile = nullptr;
  CHECK(trn_profile_create(0, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(error_contains("trn_profile_create: "));
  CHECK(trn_profile_create(0x2, &profile) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(trn_profile_create(0x80000000u | TRN_PROFILE_FLAG_TRACE, &profile) ==
        TRN_ERROR_INVALID_ARGUMENT);
  CHECK(profile == nullptr);
  profile = make_profile(TRN_PROFILE_FLAG_TRACE);

  trn_profile_summary_t s = TRN_PROFILE_SUMMARY_INIT;
  CHECK(trn_profile_get_summary(profile, nullptr) == TRN_ERROR_NULL_POINTER);
  s.header.type = TRN_STRUCT_KERNEL_ARG;
  CHECK(trn_profile_get_summary(profile, &s) == TRN_ERROR_INVALID_STRUCT);
  CHECK(error_contains("TRN_PROFILE_SUMMARY_INIT"));
  s = TRN_PROFILE_SUMMARY_INIT;
  CHECK(trn_profile_get_summary(nullptr, &s) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_profile_get_summary(handle_from<trn_profile_t>(0x4321), &s) ==
        TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_profile_get_summary(recast<trn_profile_t>(first_device()), &s) ==
        TRN_ERROR_INVALID_HANDLE);

  const std::string path = temp_path(env, "t.json");
  CHECK(trn_profile_write_trace(profile, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(trn_profile_write_trace(nullptr, path.c_str()) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_profile_write_trace(handle_from<trn_profile_t>(0x4321), path.c_str()) ==
        TRN_ERROR_INVALID_HANDLE);

  CHECK(trn_profile_destroy(nullptr) == TRN_SUCCESS);
  CHECK(trn_profile_destroy(profile) == TRN_SUCCESS);
  CHECK(trn_profile_destroy(profile) == TRN_ERROR_INVALID_HANDLE);
  CHECK(error_contains("trn_profile_destroy: "));
  CHECK(trn_profile_get_summary(profile, &s) == TRN_ERROR_INVALID_HANDLE);
  CHECK(trn_profile_write_trace(profile, path.c_str()) == TRN_ERROR_INVALID_HANDLE);
}

TEST_CASE("kernels: a trace path that cannot be written gives TRN_ERROR_FILE",
          "[kernels][negative]") {
  Fixture f;
  VectorAdd data(f);
  trn_kernel_t kernel = load(f.device, vector_add());
  trn_profile_t profile = make_profile(TRN_PROFILE_FLAG_TRACE);
  Launch l(kernel, data.bindings(), profile);
  REQUIRE(launch(f.queue, l) == TRN_SUCCESS);
  finish(f.queue);
  const std::string bad = temp_path(f.env, "no-such-dir/trace.json");
  CHECK(trn_profile_write_trace(profile, bad.c_str()) == TRN_ERROR_FILE);
  INFO(last_error());
  CHECK(error_contains(bad));
  CHECK(error_contains("No such file or directory"));
  // A directory is not a file either.
  const std::string directory = temp_path(f.env, "");
  CHECK(trn_profile_write_trace(profile, directory.c_str()) == TRN_ERROR_FILE);
  CHECK(error_contains(directory));
  // The profile still writes elsewhere.
  const std::string good = temp_path(f.env, "trace.json");
  CHECK(trn_profile_write_trace(profile, good.c_str()) == TRN_SUCCESS);
  CHECK(read_json(good)["traceEvents"].is_array());
  trn_profile_destroy(profile);
  trn_kernel_destroy(kernel);
}

TEST_CASE("kernels: a tiled bf16 matmul matches exact integer math and counts its flops",
          "[kernels][launch]") {
  Fixture f;
  constexpr uint64_t M = 256, N = 512, K = 256;
  trn_kernel_t kernel = load(f.device, tiled_matmul(M, N, K));
  const auto args = args_of(kernel);
  REQUIRE(args.size() == 3);
  CHECK(args[0].bytes == K * M * 2);
  CHECK(args[1].bytes == K * N * 2);
  CHECK(args[2].bytes == M * N * 4);

  std::mt19937 rng(5);
  std::uniform_int_distribution<int> small(-8, 8);
  std::vector<int> lhs_v(K * M), rhs_v(K * N);
  std::vector<uint16_t> lhs(K * M), rhs(K * N);
  for (size_t i = 0; i < lhs.size(); ++i)
    lhs[i] = isa::f32_to_bf16(static_cast<float>(lhs_v[i] = small(rng)));
  for (size_t i = 0; i < rhs.size(); ++i)
    rhs[i] = isa::f32_to_bf16(static_cast<float>(rhs_v[i] = small(rng)));
  trn_mem_t lhs_mem = f.mem(args[0].bytes);
  trn_mem_t rhs_mem = f.mem(args[1].bytes);
  trn_mem_t out_mem = f.mem(args[2].bytes);
  write_values(lhs_mem, lhs);
  write_values(rhs_mem, rhs);

  trn_profile_t profile = make_profile(0);
  Launch l(kernel, {{lhs_mem, 0}, {rhs_mem, 0}, {out_mem, 0}}, profile);
  const trn_result_t r = launch(f.queue, l);
  INFO(last_error());
  REQUIRE(r == TRN_SUCCESS);
  finish(f.queue);

  const auto out = read_values<float>(out_mem, M * N);
  size_t wrong = 0;
  for (uint64_t m = 0; m < M; ++m)
    for (uint64_t n = 0; n < N; ++n) {
      long ref = 0;
      for (uint64_t k = 0; k < K; ++k) ref += long{lhs_v[k * M + m]} * rhs_v[k * N + n];
      if (out[m * N + n] != static_cast<float>(ref) && wrong++ < 5)
        UNSCOPED_INFO("out[" << m << "," << n << "] = " << out[m * N + n] << ", expected " << ref);
    }
  CHECK(wrong == 0);

  const trn_profile_summary_t s = summary_of(profile);
  CHECK(s.tensor_flops == 2 * M * N * K);
  CHECK(s.engine_instructions[TRN_ENGINE_TENSOR] ==
        properties_of(kernel).instructions[TRN_ENGINE_TENSOR]);
  CHECK(s.mfu_percent > 0.0);
  CHECK(s.mfu_percent <= 100.0);
  CHECK(s.engine_active_percent[TRN_ENGINE_TENSOR] > 0.0);
  CHECK(s.engine_active_percent[TRN_ENGINE_TENSOR] <= 100.0);

  const trn_core_activity_t a = activity_of(f.core);
  CHECK(a.kernels_completed >= 1);
  CHECK(a.kernels_faulted == 0);
  CHECK(a.tensor_flops == 2 * M * N * K);
  CHECK(a.kernel_ns > 0);
  CHECK(a.kernel_ns == s.total_ns);
  const trn_kernel_properties_t p = properties_of(kernel);
  for (uint32_t e = 0; e < TRN_ENGINE_COUNT; ++e) {
    INFO("engine " << e);
    CHECK(a.engine_instructions[e] == p.instructions[e]);
  }
  // Another core saw none of it.
  const trn_core_activity_t other = activity_of(core_at(f.device, 1));
  CHECK(other.kernels_completed == 0);
  CHECK(other.tensor_flops == 0);

  // A second launch on the same core adds up.
  REQUIRE(launch(f.queue, l) == TRN_SUCCESS);
  finish(f.queue);
  CHECK(activity_of(f.core).tensor_flops == 2 * 2 * M * N * K);
  CHECK(activity_of(f.core).kernels_completed == 2);

  trn_profile_destroy(profile);
  trn_kernel_destroy(kernel);
}

TEST_CASE("kernels: one kernel launches on several queues and cores at once", "[kernels][launch]") {
  Fixture f;
  trn_kernel_t kernel = load(f.device, vector_add());
  trn_core_t core1 = core_at(f.device, 1);
  trn_queue_t q1 = make_queue(core1);
  trn_queue_t q0b = make_queue(f.core);
  std::vector<std::unique_ptr<VectorAdd>> runs;
  for (int i = 0; i < 3; ++i) runs.push_back(std::make_unique<VectorAdd>(f));
  Launch l0(kernel, runs[0]->bindings()), l1(kernel, runs[1]->bindings()),
      l2(kernel, runs[2]->bindings());
  for (int round = 0; round < 3; ++round) {
    REQUIRE(launch(f.queue, l0) == TRN_SUCCESS);
    REQUIRE(launch(q1, l1) == TRN_SUCCESS);
    REQUIRE(launch(q0b, l2) == TRN_SUCCESS);
  }
  finish(f.queue);
  finish(q1);
  finish(q0b);
  for (auto &run : runs) CHECK(run->done());
  CHECK(activity_of(f.core).kernels_completed == 6);
  CHECK(activity_of(core1).kernels_completed == 3);
  trn_queue_destroy(q1);
  trn_queue_destroy(q0b);
  trn_kernel_destroy(kernel);
}

TEST_CASE("kernels: trn_queue_launch refuses bad descriptors, bindings and queues at submission",
          "[kernels][launch][negative]") {
  Fixture f;
  VectorAdd data(f);
  trn_kernel_t kernel = load(f.device, vector_add());
  trn_sem_t timeline = nullptr;
  REQUIRE(trn_queue_get_semaphore(f.queue, &timeline) == TRN_SUCCESS);

  auto refused = [&](Launch &l, trn_result_t expected, const std::string &detail,
                     trn_queue_t queue = nullptr) {
    uint64_t seq = 99;
    const trn_result_t r = trn_queue_launch(queue ? queue : f.queue, l.get(), nullptr, &seq);
    CHECK(r == expected);
    INFO("trn_last_error: " << last_error());
    CHECK(last_error().rfind("trn_queue_launch: ", 0) == 0);
    CHECK(error_contains(detail));
    CHECK(seq == 99);
  };

  // Wrong argument count (fewer, more, none).
  {
    Launch l(kernel, {{data.a, 0}, {data.b, 0}});
    refused(l, TRN_ERROR_INVALID_KERNEL_ARG, "takes 3 arguments but desc.arg_count is 2");
    Launch more(kernel, {{data.a, 0}, {data.b, 0}, {data.out, 0}, {data.out, 0}});
    refused(more, TRN_ERROR_INVALID_KERNEL_ARG, "desc.arg_count is 4");
    Launch none(kernel, {});
    refused(none, TRN_ERROR_INVALID_KERNEL_ARG, "desc.arg_count is 0");
  }
  // NULL args with a count.
  {
    Launch l(kernel, data.bindings());
    l.desc.args = nullptr;
    refused(l, TRN_ERROR_NULL_POINTER, "desc.args");
  }
  // A binding too small: the remainder after the offset is below the argument's bytes.
  {
    Launch l(kernel, {{data.a, 0}, {data.b, 512}, {data.out, 0}});
    refused(l, TRN_ERROR_INVALID_KERNEL_ARG, "'b'");
    CHECK(error_contains(std::to_string(kTileBytes)));
    Launch past(kernel, {{data.a, 0}, {data.b, 0}, {data.out, kTileBytes + 512}});
    refused(past, TRN_ERROR_INVALID_KERNEL_ARG, "'out'");
    Launch huge(kernel, {{data.a, UINT64_MAX}, {data.b, 0}, {data.out, 0}});
    refused(huge, TRN_ERROR_INVALID_KERNEL_ARG, "'a'");
    trn_mem_t short_mem = f.mem(kTileBytes - 4);
    Launch shorter(kernel, {{data.a, 0}, {short_mem, 0}, {data.out, 0}});
    refused(shorter, TRN_ERROR_INVALID_KERNEL_ARG, "'b'");
  }
  // Host pool memory cannot be bound.
  {
    trn_pool_t host = make_pool(f.device, 0, TRN_POOL_KIND_HOST);
    trn_mem_t host_mem = alloc(host, kTileBytes);
    Launch l(kernel, {{data.a, 0}, {data.b, 0}, {host_mem, 0}});
    refused(l, TRN_ERROR_INVALID_KERNEL_ARG, "'out'");
    CHECK(error_contains("device memory"));
    trn_mem_free(host_mem);
    trn_pool_destroy(host);
  }
  // Bad memory handles in a binding.
  {
    Launch l(kernel, {{data.a, 0}, {nullptr, 0}, {data.out, 0}});
    refused(l, TRN_ERROR_INVALID_HANDLE, "'b'");
    trn_mem_t freed = alloc(f.pool, kTileBytes);
    REQUIRE(trn_mem_free(freed) == TRN_SUCCESS);
    Launch stale(kernel, {{freed, 0}, {data.b, 0}, {data.out, 0}});
    refused(stale, TRN_ERROR_INVALID_HANDLE, "'a'");
    Launch wrong(kernel, {{data.a, 0}, {data.b, 0}, {recast<trn_mem_t>(f.pool), 0}});
    refused(wrong, TRN_ERROR_INVALID_HANDLE, "'out'");
  }
  // A copy queue does not run kernels.
  {
    trn_queue_t copy = make_queue(core_at(f.device, 1), TRN_QUEUE_KIND_COPY);
    Launch l(kernel, data.bindings());
    refused(l, TRN_ERROR_INVALID_ARGUMENT, "TRN_QUEUE_KIND_COMPUTE", copy);
    trn_queue_destroy(copy);
  }
  // A stale (destroyed) kernel, NULL and garbage kernels.
  {
    trn_kernel_t gone = load(f.device, vector_add());
    REQUIRE(trn_kernel_destroy(gone) == TRN_SUCCESS);
    Launch l(gone, data.bindings());
    refused(l, TRN_ERROR_INVALID_HANDLE, "desc.kernel");
    Launch null_kernel(nullptr, data.bindings());
    refused(null_kernel, TRN_ERROR_INVALID_HANDLE, "desc.kernel");
    Launch wrong_kind(recast<trn_kernel_t>(f.pool), data.bindings());
    refused(wrong_kind, TRN_ERROR_INVALID_HANDLE, "desc.kernel");
  }
  // A bad profile handle.
  {
    trn_profile_t profile = make_profile(0);
    REQUIRE(trn_profile_destroy(profile) == TRN_SUCCESS);
    Launch l(kernel, data.bindings(), profile);
    refused(l, TRN_ERROR_INVALID_HANDLE, "desc.profile");
    Launch wrong(kernel, data.bindings(), recast<trn_profile_t>(kernel));
    refused(wrong, TRN_ERROR_INVALID_HANDLE, "desc.profile");
  }
  // The descriptor itself: NULL, wrong tag, size too small.
  {
    CHECK(trn_queue_launch(f.queue, nullptr, nullptr, nullptr) == TRN_ERROR_NULL_POINTER);
    Launch l(kernel, data.bindings());
    l.desc.header.type = TRN_STRUCT_QUEUE_DESC;
    refused(l, TRN_ERROR_INVALID_STRUCT, "TRN_LAUNCH_DESC_INIT");
    Launch tiny(kernel, data.bindings());
    tiny.desc.header.size = 1;
    refused(tiny, TRN_ERROR_INVALID_STRUCT, "TRN_LAUNCH_DESC_INIT");
  }
  // Bad queue handles and sync lists.
  {
    Launch l(kernel, data.bindings());
    CHECK(trn_queue_launch(nullptr, l.get(), nullptr, nullptr) == TRN_ERROR_INVALID_HANDLE);
    CHECK(trn_queue_launch(recast<trn_queue_t>(kernel), l.get(), nullptr, nullptr) ==
          TRN_ERROR_INVALID_HANDLE);
    trn_sync_t sync{};
    sync.wait_count = 1;
    CHECK(trn_queue_launch(f.queue, l.get(), &sync, nullptr) == TRN_ERROR_NULL_POINTER);
    trn_sem_point_t point{timeline, 1};
    sync = {nullptr, 0, &point, 1};
    CHECK(trn_queue_launch(f.queue, l.get(), &sync, nullptr) == TRN_ERROR_INVALID_ARGUMENT);
  }

  // Nothing was submitted by any of that; a good launch is sequence 1.
  Launch good(kernel, data.bindings());
  uint64_t seq = 0;
  REQUIRE(launch(f.queue, good, nullptr, &seq) == TRN_SUCCESS);
  CHECK(seq == 1);
  finish(f.queue);
  CHECK(data.done());
  CHECK(activity_of(f.core).kernels_completed == 1);
  trn_kernel_destroy(kernel);
}

TEST_CASE("kernels: a kernel loaded for one device does not launch on another",
          "[kernels][launch][negative]") {
  SimEnv env;
  env.set("TRN_SIM_DEVICES", "2");
  const auto list = devices();
  REQUIRE(list.size() == 2);
  trn_core_t core0 = core_at(list[0], 0);
  trn_core_t core1 = core_at(list[1], 0);
  trn_pool_t pool1 = make_pool(list[1], core_properties(core1).hbm_bank);
  trn_mem_t a = alloc(pool1, kTileBytes), b = alloc(pool1, kTileBytes),
            out = alloc(pool1, kTileBytes);
  trn_kernel_t kernel0 = load(list[0], vector_add());
  trn_queue_t queue1 = make_queue(core1);
  Launch l(kernel0, {{a, 0}, {b, 0}, {out, 0}});
  CHECK(trn_queue_launch(queue1, l.get(), nullptr, nullptr) == TRN_ERROR_INVALID_ARGUMENT);
  INFO(last_error());
  CHECK(error_contains("load it for this device"));
  // Memory of another device is refused as well.
  trn_queue_t queue0 = make_queue(core0);
  CHECK(trn_queue_launch(queue0, l.get(), nullptr, nullptr) == TRN_ERROR_INVALID_KERNEL_ARG);
  CHECK(error_contains("'a'"));
  // Loaded for device 1, it runs there.
  trn_kernel_t kernel1 = load(list[1], vector_add());
  Launch ok(kernel1, {{a, 0}, {b, 0}, {out, 0}});
  REQUIRE(trn_queue_launch(queue1, ok.get(), nullptr, nullptr) == TRN_SUCCESS);
  finish(queue1);
  trn_queue_destroy(queue0);
  trn_queue_destroy(queue1);
  trn_kernel_destroy(kernel0);
  trn_kernel_destroy(kernel1);
  trn_mem_free(a);
  trn_mem_free(b);
  trn_mem_free(out);
  trn_pool_destroy(pool1);
}

// ---- faults --------------------------------------------------------------------------------

TEST_CASE("kernels: a DMA past its argument faults the queue with a full record, then resets",
          "[kernels][fault]") {
  Fixture f;
  VectorAdd data(f);
  trn_kernel_t bad = load(f.device, overread());
  trn_kernel_t good = load(f.device, vector_add());
  const auto args = args_of(bad);
  REQUIRE(args.size() == 2);
  REQUIRE(args[0].bytes == 512);
  trn_mem_t small = f.mem(512);  // exactly the declared size: the binding is accepted
  trn_mem_t out = f.mem(kTileBytes);
  trn_sem_t gate = make_sem(f.device);
  trn_sem_t after = make_sem(f.device);

  // #1 waits on the gate, #2 faults, #3 and #4 are cancelled.
  trn_sem_point_t gate_point{gate, 1};
  trn_sync_t gated{&gate_point, 1, nullptr, 0};
  REQUIRE(trn_queue_barrier(f.queue, &gated, nullptr) == TRN_SUCCESS);
  Launch faulting(bad, {{small, 0}, {out, 0}});
  uint64_t fault_seq = 0;
  const trn_result_t r = launch(f.queue, faulting, nullptr, &fault_seq);
  INFO(last_error());
  REQUIRE(r == TRN_SUCCESS);
  CHECK(fault_seq == 2);
  Launch next(good, data.bindings());
  REQUIRE(launch(f.queue, next) == TRN_SUCCESS);
  trn_sem_point_t after_point{after, 1};
  trn_sync_t signal_after{nullptr, 0, &after_point, 1};
  REQUIRE(trn_queue_barrier(f.queue, &signal_after, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_sem_signal(gate, 1) == TRN_SUCCESS);

  CHECK(trn_queue_finish(f.queue, kLong) == TRN_ERROR_KERNEL_FAULT);
  CHECK(error_contains("overread"));
  const trn_queue_fault_t fault = fault_of(f.queue);
  CHECK(fault.result == TRN_ERROR_KERNEL_FAULT);
  CHECK(fault.sequence == 2);
  CHECK(std::string(fault.command) == "launch");
  CHECK(std::string(fault.kernel) == "overread");
  CHECK(std::string(fault.engine) == "sync");
  CHECK(fault.instruction == 1);
  CHECK(fault.source_line == 42);
  CHECK(std::string(fault.opcode) == "dma_copy");
  const std::string reason = fault.reason;
  INFO("reason: " << reason);
  CHECK(reason.find("argument 0") != std::string::npos);
  CHECK(reason.find("512 bytes") != std::string::npos);
  CHECK(reason.find("sync[1] dma_copy") != std::string::npos);
  CHECK(reason.find("line 42") != std::string::npos);
  CHECK(fault.cancelled == 2);
  // The cancelled commands did not run; their signals failed.
  CHECK(trn_sem_wait(after, 1, kLong) == TRN_ERROR_CANCELLED);
  CHECK(read_values<uint32_t>(data.out, 1)[0] == 0xEEEEEEEEu);

  const trn_core_activity_t a = activity_of(f.core);
  CHECK(a.kernels_faulted == 1);
  CHECK(a.kernels_completed == 0);
  CHECK(a.commands_failed >= 1);
  // The faulting kernel's own counters still count: sync issued its first DMA at least.
  CHECK(a.engine_instructions[TRN_ENGINE_SYNC] >= 1);

  // Reset: the record clears and a good launch succeeds.
  REQUIRE(trn_queue_reset(f.queue) == TRN_SUCCESS);
  CHECK(fault_of(f.queue).result == TRN_SUCCESS);
  CHECK(fault_of(f.queue).kernel[0] == '\0');
  CHECK(fault_of(f.queue).engine[0] == '\0');
  uint64_t seq = 0;
  REQUIRE(launch(f.queue, next, nullptr, &seq) == TRN_SUCCESS);
  CHECK(seq == 5);
  finish(f.queue);
  CHECK(data.done());
  CHECK(activity_of(f.core).kernels_completed == 1);

  // A larger binding makes the same kernel run: the check is against the bound memory.
  trn_mem_t big = f.mem(kTileBytes);
  Launch fits(bad, {{big, 0}, {out, 0}});
  REQUIRE(launch(f.queue, fits) == TRN_SUCCESS);
  finish(f.queue);
  CHECK(activity_of(f.core).kernels_completed == 2);

  // Again, faulting: kernels_faulted grows.
  REQUIRE(launch(f.queue, faulting) == TRN_SUCCESS);
  CHECK(trn_queue_finish(f.queue, kLong) == TRN_ERROR_KERNEL_FAULT);
  CHECK(activity_of(f.core).kernels_faulted == 2);
  REQUIRE(trn_queue_reset(f.queue) == TRN_SUCCESS);
  trn_sem_destroy(gate);
  trn_sem_destroy(after);
  trn_kernel_destroy(bad);
  trn_kernel_destroy(good);
}

TEST_CASE("kernels: trace events name each instruction's source file and line",
          "[kernels][launch]") {
  Fixture f;
  VectorAdd data(f);
  isa::Program p = vector_add(true);
  isa::InstrRef(p, Engine::kSync, 0).at("kernels/vector_add.cpp", 10);
  isa::InstrRef(p, Engine::kSync, 1).at("kernels/vector_add.cpp", 11);
  isa::InstrRef(p, Engine::kVector, 0).at("kernels/add_helpers.hpp", 12);
  isa::InstrRef(p, Engine::kGpSimd, 0).at("kernels/vector_add.cpp", 13);
  REQUIRE(p.source_files.size() == 1);
  trn_kernel_t kernel = load(f.device, p);
  trn_profile_t profile = make_profile(TRN_PROFILE_FLAG_TRACE);
  Launch l(kernel, data.bindings(), profile);
  REQUIRE(launch(f.queue, l) == TRN_SUCCESS);
  finish(f.queue);
  const std::string trace = temp_path(f.env, "trace.json");
  REQUIRE(trn_profile_write_trace(profile, trace.c_str()) == TRN_SUCCESS);
  const nlohmann::json j = read_json(trace);
  std::map<std::string, std::set<std::string>> sources;  // engine -> "file:line"
  for (const auto &ev : j["traceEvents"]) {
    if (ev["ph"] != "X" || ev["cat"] != "instruction") continue;
    INFO(ev.dump());
    REQUIRE(ev["args"].contains("source"));
    const std::string source = ev["args"]["source"].get<std::string>();
    CHECK_THAT(source, Catch::EndsWith(":" + std::to_string(ev["args"]["line"].get<uint32_t>())));
    sources[ev["args"]["engine"].get<std::string>()].insert(source);
  }
  CHECK(sources["sync"] ==
        std::set<std::string>{"kernels/vector_add.cpp:10", "kernels/vector_add.cpp:11"});
  CHECK(sources["vector"] == std::set<std::string>{"kernels/add_helpers.hpp:12"});
  CHECK(sources["gpsimd"] == std::set<std::string>{"kernels/vector_add.cpp:13"});
  trn_profile_destroy(profile);
  trn_kernel_destroy(kernel);
}

TEST_CASE("kernels: a fault names the source file and line of the faulting instruction",
          "[kernels][fault]") {
  Fixture f;
  trn_kernel_t bad = load(f.device, overread_from_files());
  trn_mem_t small = f.mem(512);
  trn_mem_t out = f.mem(kTileBytes);
  Launch faulting(bad, {{small, 0}, {out, 0}});
  REQUIRE(launch(f.queue, faulting) == TRN_SUCCESS);
  CHECK(trn_queue_finish(f.queue, kLong) == TRN_ERROR_KERNEL_FAULT);
  INFO(last_error());
  CHECK(error_contains("sync[1] dma_copy (kernels/overread_helpers.hpp:42)"));
  const trn_queue_fault_t fault = fault_of(f.queue);
  CHECK(fault.source_line == 42);
  const std::string reason = fault.reason;
  INFO("reason: " << reason);
  CHECK(reason.find("sync[1] dma_copy (kernels/overread_helpers.hpp:42)") != std::string::npos);
  REQUIRE(trn_queue_reset(f.queue) == TRN_SUCCESS);
  trn_kernel_destroy(bad);
}

TEST_CASE("kernels: a rejected instruction names its source file and line at load",
          "[kernels][negative]") {
  Fixture f;
  isa::Program p = sbuf_overflow();
  isa::InstrRef(p, Engine::kVector, 0).at("kernels/overflow.cpp", 7);
  isa::InstrRef(p, Engine::kVector, 1).at("kernels/overflow_helpers.hpp", 8);
  const auto image = image_of(p);
  trn_kernel_t kernel = nullptr;
  CHECK(trn_kernel_load(f.device, image.data(), image.size(), &kernel) == TRN_ERROR_INVALID_KERNEL);
  INFO(last_error());
  CHECK(error_contains("vector[1] memset (kernels/overflow_helpers.hpp:8): dst reaches"));
}

TEST_CASE("kernels: an SBUF overflow is rejected at load naming the engine and instruction",
          "[kernels][negative]") {
  Fixture f;
  const auto image = image_of(sbuf_overflow());
  trn_kernel_t kernel = nullptr;
  CHECK(trn_kernel_load(f.device, image.data(), image.size(), &kernel) == TRN_ERROR_INVALID_KERNEL);
  CHECK(kernel == nullptr);
  INFO(last_error());
  CHECK(error_contains("sbuf_overflow"));
  CHECK(error_contains("vector[1] memset"));
  CHECK(error_contains("dst reaches bytes [1048576, 1048832) of each SBUF partition"));
  CHECK(activity_of(f.core).kernels_faulted == 0);
}

TEST_CASE("kernels: an unsynchronized access faults the launch, TRN_SIM_RACE_CHECK=0 runs it",
          "[kernels][fault]") {
  // The add waits for one load but reads both tiles.
  isa::Program racy = vector_add(true);
  racy.stream(Engine::kVector)[0].wait.value = 1;
  {
    Fixture f;
    VectorAdd data(f);
    trn_kernel_t k = load(f.device, racy);
    Launch l(k, data.bindings());
    REQUIRE(launch(f.queue, l) == TRN_SUCCESS);
    CHECK(trn_queue_finish(f.queue, kLong) == TRN_ERROR_KERNEL_FAULT);
    const trn_queue_fault_t fault = fault_of(f.queue);
    const std::string reason = fault.reason;
    INFO("reason: " << reason);
    CHECK(fault.result == TRN_ERROR_KERNEL_FAULT);
    CHECK(std::string(fault.engine) == "vector");
    CHECK(fault.instruction == 0);
    CHECK(fault.source_line == 12);
    CHECK(reason.find("unsynchronized access: vector[0] tensor_tensor (line 12) reads SBUF "
                      "p0-127 [2048,4096) while sync[1] dma_copy on queue 1 (line 11) writes "
                      "it; no semaphore orders them") != std::string::npos);
    REQUIRE(trn_queue_reset(f.queue) == TRN_SUCCESS);
    // In place (out bound to a's memory) is ordered: the store follows the add, which read a.
    trn_kernel_t good = load(f.device, vector_add());
    Launch in_place(good, {{data.a, 0}, {data.b, 0}, {data.a, 0}});
    REQUIRE(launch(f.queue, in_place) == TRN_SUCCESS);
    finish(f.queue);
    const auto sum = read_values<float>(data.a, uint64_t{kRows} * kCols);
    CHECK(data.data.matches(sum));
    trn_kernel_destroy(good);
    trn_kernel_destroy(k);
  }
  {
    Fixture f(std::vector<std::pair<const char *, const char *>>{{"TRN_SIM_RACE_CHECK", "0"}});
    VectorAdd data(f);
    trn_kernel_t k = load(f.device, racy);
    Launch l(k, data.bindings());
    REQUIRE(launch(f.queue, l) == TRN_SUCCESS);
    finish(f.queue);
    CHECK(data.done());
    trn_kernel_destroy(k);
  }
}

TEST_CASE("kernels: a deadlock between engines is TRN_ERROR_KERNEL_DEADLOCK and the queue recovers",
          "[kernels][fault]") {
  Fixture f;
  VectorAdd data(f);
  trn_kernel_t stuck = load(f.device, deadlock());
  trn_kernel_t good = load(f.device, vector_add());
  Launch l(stuck, {});
  REQUIRE(launch(f.queue, l) == TRN_SUCCESS);
  // The simulated deadlock is detected, not waited out.
  CHECK(trn_queue_finish(f.queue, kLong) == TRN_ERROR_KERNEL_DEADLOCK);
  const trn_queue_fault_t fault = fault_of(f.queue);
  const std::string reason = fault.reason;
  INFO("reason: " << reason);
  CHECK(fault.result == TRN_ERROR_KERNEL_DEADLOCK);
  CHECK(std::string(fault.kernel) == "stuck");
  CHECK(std::string(fault.engine) == "tensor");
  CHECK(fault.instruction == 0);
  CHECK(std::string(fault.opcode) == "sem_wait");
  CHECK(reason.find("tensor[0] sem_wait") != std::string::npos);
  CHECK(reason.find("semaphore 5") != std::string::npos);
  CHECK(reason.find("deadlock") != std::string::npos);
  CHECK(activity_of(f.core).kernels_faulted == 1);

  REQUIRE(trn_queue_reset(f.queue) == TRN_SUCCESS);
  Launch ok(good, data.bindings());
  REQUIRE(launch(f.queue, ok) == TRN_SUCCESS);
  finish(f.queue);
  CHECK(data.done());
  CHECK(activity_of(f.core).kernels_completed == 1);
  trn_kernel_destroy(stuck);
  trn_kernel_destroy(good);
}

TEST_CASE("kernels: a kernel destroyed while its launch is queued still runs",
          "[kernels][launch]") {
  Fixture f;
  VectorAdd data(f);
  trn_kernel_t kernel = load(f.device, vector_add());
  trn_profile_t profile = make_profile(TRN_PROFILE_FLAG_TRACE);
  trn_sem_t gate = make_sem(f.device);
  trn_sem_point_t gate_point{gate, 1};
  trn_sync_t gated{&gate_point, 1, nullptr, 0};
  REQUIRE(trn_queue_barrier(f.queue, &gated, nullptr) == TRN_SUCCESS);
  Launch l(kernel, data.bindings(), profile);
  REQUIRE(launch(f.queue, l) == TRN_SUCCESS);
  REQUIRE(trn_kernel_destroy(kernel) == TRN_SUCCESS);
  // The handle is gone at once.
  trn_kernel_properties_t p = TRN_KERNEL_PROPERTIES_INIT;
  CHECK(trn_kernel_get_properties(kernel, &p) == TRN_ERROR_INVALID_HANDLE);
  CHECK(launch(f.queue, l) == TRN_ERROR_INVALID_HANDLE);
  REQUIRE(trn_sem_signal(gate, 1) == TRN_SUCCESS);
  finish(f.queue);
  CHECK(data.done());
  CHECK(summary_of(profile).launches == 1);
  const std::string trace = temp_path(f.env, "after-destroy.json");
  REQUIRE(trn_profile_write_trace(profile, trace.c_str()) == TRN_SUCCESS);
  CHECK(read_json(trace)["otherData"]["kernel"] == "vector_add");
  CHECK(activity_of(f.core).kernels_completed == 1);
  trn_sem_destroy(gate);
  trn_profile_destroy(profile);
}

TEST_CASE("kernels: bindings at offsets, in other banks and aliased run correctly, with sync",
          "[kernels][launch]") {
  Fixture f;
  VectorAdd data(f);
  trn_kernel_t kernel = load(f.device, vector_add());
  // `out` 4 KiB into a larger allocation of another bank: the bytes around it stay as they were.
  const uint32_t other_bank = (core_properties(f.core).hbm_bank + 1) % 4;
  trn_pool_t far = make_pool(f.device, other_bank);
  trn_mem_t wide = alloc(far, kTileBytes + 8192);
  REQUIRE(trn_mem_set(wide, 0, 0x3C, kTileBytes + 8192) == TRN_SUCCESS);
  trn_sem_t gate = make_sem(f.device);
  trn_sem_t done = make_sem(f.device);
  trn_sem_point_t wait_point{gate, 1};
  trn_sem_point_t signal_point{done, 7};
  trn_sync_t sync{&wait_point, 1, &signal_point, 1};
  Launch l(kernel, {{data.a, 0}, {data.b, 0}, {wide, 4096}});
  REQUIRE(launch(f.queue, l, &sync) == TRN_SUCCESS);
  // It waits for the gate.
  CHECK(trn_sem_wait(done, 7, 50'000'000) == TRN_TIMEOUT);
  REQUIRE(trn_sem_signal(gate, 1) == TRN_SUCCESS);
  CHECK(trn_sem_wait(done, 7, kLong) == TRN_SUCCESS);
  finish(f.queue);
  const auto before = read_values<uint8_t>(wide, 4096);
  const auto after = read_values<uint8_t>(wide, 4096, 4096 + kTileBytes);
  CHECK(std::all_of(before.begin(), before.end(), [](uint8_t b) { return b == 0x3C; }));
  CHECK(std::all_of(after.begin(), after.end(), [](uint8_t b) { return b == 0x3C; }));
  CHECK(data.data.matches(read_values<float>(wide, uint64_t{kRows} * kCols, 4096)));

  // `out` aliasing `a`: a += b in place.
  Launch in_place(kernel, {{data.a, 0}, {data.b, 0}, {data.a, 0}});
  REQUIRE(launch(f.queue, in_place) == TRN_SUCCESS);
  finish(f.queue);
  CHECK(data.data.matches(read_values<float>(data.a, uint64_t{kRows} * kCols)));
  trn_sem_destroy(gate);
  trn_sem_destroy(done);
  trn_mem_free(wide);
  trn_pool_destroy(far);
  trn_kernel_destroy(kernel);
}

TEST_CASE("kernels: memory freed while its launch is queued faults the queue naming the argument",
          "[kernels][fault]") {
  Fixture f;
  trn_kernel_t kernel = load(f.device, vector_add());
  trn_mem_t a = alloc(f.pool, kTileBytes), b = alloc(f.pool, kTileBytes);
  trn_mem_t out = f.mem(kTileBytes);
  trn_sem_t gate = make_sem(f.device);
  trn_sem_point_t gate_point{gate, 1};
  trn_sync_t gated{&gate_point, 1, nullptr, 0};
  Launch l(kernel, {{a, 0}, {b, 0}, {out, 0}});
  REQUIRE(launch(f.queue, l, &gated) == TRN_SUCCESS);
  REQUIRE(trn_mem_free(b) == TRN_SUCCESS);
  REQUIRE(trn_sem_signal(gate, 1) == TRN_SUCCESS);
  CHECK(trn_queue_finish(f.queue, kLong) == TRN_ERROR_INVALID_HANDLE);
  const trn_queue_fault_t fault = fault_of(f.queue);
  INFO("reason: " << fault.reason);
  CHECK(fault.result == TRN_ERROR_INVALID_HANDLE);
  CHECK(std::string(fault.command) == "launch");
  CHECK(std::string(fault.kernel) == "vector_add");
  CHECK(std::string(fault.reason).find("'b'") != std::string::npos);
  CHECK(std::string(fault.reason).find("freed") != std::string::npos);
  CHECK(activity_of(f.core).kernels_completed == 0);
  REQUIRE(trn_queue_reset(f.queue) == TRN_SUCCESS);
  trn_mem_free(a);
  trn_sem_destroy(gate);
  trn_kernel_destroy(kernel);
}

TEST_CASE("kernels: threads load, launch and destroy kernels at once", "[kernels][launch]") {
  Fixture f;
  std::vector<std::unique_ptr<VectorAdd>> runs;
  for (int i = 0; i < 4; ++i) runs.push_back(std::make_unique<VectorAdd>(f));
  std::vector<trn_queue_t> queues;
  for (uint32_t i = 0; i < 4; ++i)
    queues.push_back(i == 0 ? f.queue : make_queue(core_at(f.device, i)));
  const auto image = image_of(vector_add());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        trn_kernel_t k = nullptr;
        if (trn_kernel_load(f.device, image.data(), image.size(), &k) != TRN_SUCCESS) {
          ++failures;
          return;
        }
        Launch l(k, runs[t]->bindings());
        if (trn_queue_launch(queues[t], l.get(), nullptr, nullptr) != TRN_SUCCESS) ++failures;
        if (trn_kernel_destroy(k) != TRN_SUCCESS) ++failures;
        if (trn_queue_finish(queues[t], kLong) != TRN_SUCCESS) ++failures;
      }
    });
  for (auto &t : threads) t.join();
  CHECK(failures.load() == 0);
  for (auto &run : runs) CHECK(run->done());
  for (size_t i = 1; i < queues.size(); ++i) trn_queue_destroy(queues[i]);
}

TEST_CASE("kernels: memory only a kernel wrote reads back on the host", "[kernels][launch]") {
  // 8 MiB in and out: the output spans several device-memory chunks that the host never wrote
  // (or set) before the launch, so only the kernel's writes can fill them.
  constexpr uint32_t kWide = 16384;
  constexpr uint64_t kBytes = uint64_t{128} * kWide * sizeof(float);
  isa::ProgramBuilder b("copy_wide");
  const auto x = b.arg("x", isa::DType::kF32, {128, kWide}, isa::ArgDirection::kIn);
  const auto y = b.arg("y", isa::DType::kF32, {128, kWide}, isa::ArgDirection::kOut);
  constexpr uint32_t kChunk = 4096;  // columns per SBUF pass (16 KiB per partition)
  for (uint32_t c = 0; c < kWide / kChunk; ++c) {
    b.dma_copy(isa::Engine::kSync, static_cast<uint8_t>(c),
               isa::sbuf_tile(isa::DType::kF32, 0, 128, uint64_t{c} * kChunk * 4, kChunk),
               isa::hbm_tile(x, isa::DType::kF32, kWide, 0, 128, uint64_t{c} * kChunk, kChunk))
        .signal_add(static_cast<uint16_t>(c));
    b.dma_copy(isa::Engine::kGpSimd, static_cast<uint8_t>(8 + c),
               isa::hbm_tile(y, isa::DType::kF32, kWide, 0, 128, uint64_t{c} * kChunk, kChunk),
               isa::sbuf_tile(isa::DType::kF32, 0, 128, uint64_t{c} * kChunk * 4, kChunk))
        .wait_ge(static_cast<uint16_t>(c), 1);
  }
  Fixture f;
  trn_kernel_t kernel = load(f.device, b.finish());
  trn_mem_t in = f.mem(kBytes), out = f.mem(kBytes);
  std::vector<float> values(uint64_t{128} * kWide);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 100003) + 0.25f;
  write_values(in, values);
  Launch l(kernel, {{in, 0}, {out, 0}});
  REQUIRE(launch(f.queue, l) == TRN_SUCCESS);
  finish(f.queue);
  CHECK(read_values<float>(out, values.size()) == values);
  trn_kernel_destroy(kernel);
}
