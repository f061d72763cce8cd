// trn-objdump on program binaries: the MLP forward program that the build makes
// (examples/mlp_program), which also passes the program reader with the tensors and schedule the
// example documents; a truncated copy of it, refused with the reader's reason; and a small
// program with every kind of step, ranges at offsets and scalars of both dtypes.
#include <sys/wait.h>

#include <bit>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/read_file.hpp"
#include "isa/assembler.hpp"
#include "isa/container.hpp"
#include "isa/program_container.hpp"
#include "support/sim_env.hpp"
#include "support/subprocess.hpp"
#include "support/temp_files.hpp"

using namespace trn;
using isa::TensorRole;

namespace {

constexpr int kTimeoutMs = 60000;

struct Result {
  int code = -1;
  std::string output;
};

Result objdump(const std::vector<std::string> &args) {
  std::vector<std::string> argv{TRN_OBJDUMP_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  int status = 0;
  Result r;
  r.output = test::run_command(argv, kTimeoutMs, &status);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::vector<std::byte> program_bytes() {
  std::vector<std::byte> bytes;
  auto err = common::read_regular_file(TRN_MLP_PROGRAM, common::kMaxKernelFileBytes, bytes);
  INFO((err ? err->reason : std::string()));
  REQUIRE_FALSE(err);
  return bytes;
}

struct Expected {
  const char *name;
  TensorRole role;
  std::vector<uint64_t> shape;
};

const std::vector<Expected> kTensors = {
    {"xT", TensorRole::kInput, {128, 512}},
    {"w1", TensorRole::kConstant, {128, 256}},
    {"b1", TensorRole::kConstant, {256, 1}},
    {"w2", TensorRole::kConstant, {256, 512}},
    {"b2", TensorRole::kConstant, {1, 512}},
    {"hT", TensorRole::kInternal, {256, 512}},
    {"hT_bias", TensorRole::kInternal, {256, 512}},
    {"gT", TensorRole::kInternal, {256, 512}},
    {"logits", TensorRole::kInternal, {512, 512}},
    {"logits_bias", TensorRole::kInternal, {512, 512}},
    {"y", TensorRole::kOutput, {512, 512}},
};

}  // namespace

TEST_CASE("mlp program: the reader accepts it, with its tensors, roles and a chained schedule",
          "[tools]") {
  const std::vector<std::byte> bytes = program_bytes();
  REQUIRE(isa::looks_like_program(bytes));
  isa::ProgramImage image;
  std::vector<isa::Program> kernels;
  const auto why = isa::read_program(bytes, image, &kernels);
  INFO((why ? *why : std::string()));
  REQUIRE_FALSE(why);
  CHECK(image.name == "mlp_forward");

  REQUIRE(image.tensors.size() == kTensors.size());
  for (size_t i = 0; i < kTensors.size(); ++i) {
    const isa::ProgramTensor &t = image.tensors[i];
    INFO(t.name);
    CHECK(t.name == kTensors[i].name);
    CHECK(t.role == kTensors[i].role);
    CHECK(t.dtype == isa::DType::kF32);
    CHECK(t.shape == kTensors[i].shape);
    CHECK(t.data.size() == (t.role == TensorRole::kConstant ? t.bytes() : 0));
  }

  // matmul, bias add, gelu, matmul, bias add, softmax, each after the one before.
  const std::vector<std::string> prefixes = {"matmul_", "binary_add_", "unary_gelu_",
                                             "matmul_", "binary_add_", "softmax_"};
  REQUIRE(image.steps.size() == prefixes.size());
  for (size_t i = 0; i < image.steps.size(); ++i) {
    const isa::ProgramStep &s = image.steps[i];
    INFO("step " << i);
    CHECK(s.kind == isa::StepKind::kLaunch);
    CHECK(kernels.at(s.kernel).name.rfind(prefixes[i], 0) == 0);
    CHECK(s.deps == (i == 0 ? std::vector<uint32_t>{} : std::vector<uint32_t>{uint32_t(i - 1)}));
  }
  CHECK(image.steps.back().args.back().ref.tensor == image.tensors.size() - 1);  // writes y
}

TEST_CASE("mlp program: trn-objdump prints its tensors, kernels and schedule", "[tools]") {
  const Result headers = objdump({"-h", TRN_MLP_PROGRAM});
  INFO(headers.output);
  REQUIRE(headers.code == 0);
  CHECK_THAT(headers.output, Catch::StartsWith("program: mlp_forward  (6 kernels, 11 tensors, "
                                               "6 steps)"));
  for (const Expected &t : kTensors) CHECK_THAT(headers.output, Catch::Contains(t.name));
  CHECK_THAT(headers.output, Catch::Contains("xT                       input     f32      "
                                             "[128, 512]                   262144"));
  CHECK_THAT(headers.output, Catch::Contains("schedule: 6 steps"));
  CHECK_THAT(headers.output, Catch::Contains("softmax_512x512_f32(x=logits_bias, y=y)"));
  CHECK_THAT(headers.output, Catch::Contains("(lhsT=w1, rhs=xT, out=hT)"));
  CHECK_THAT(headers.output, !Catch::Contains(".kernel"));

  // Without -h, each kernel's assembly follows the tables.
  const Result full = objdump({TRN_MLP_PROGRAM});
  REQUIRE(full.code == 0);
  CHECK_THAT(full.output, Catch::StartsWith(headers.output));
  CHECK_THAT(full.output, Catch::Contains("\n; kernel 5\n.kernel softmax_512x512_f32\n"));
}

TEST_CASE("mlp program: trn-objdump refuses a truncated copy", "[tools]") {
  const std::vector<std::byte> bytes = program_bytes();
  test::TempDir dir;
  const std::string cut = dir.file("cut.trnp");
  const auto *begin = reinterpret_cast<const uint8_t *>(bytes.data());
  test::Fd written(test::create_file(cut, std::vector<uint8_t>(begin, begin + bytes.size() / 2)));
  const Result r = objdump({cut});
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::StartsWith("trn-objdump: " + cut + ": not a valid program binary: "));
  CHECK_THAT(r.output, !Catch::Contains("program: mlp_forward"));
}

TEST_CASE("objdump program: memset, copy, offsets and scalars as the kernel declares them",
          "[tools]") {
  // y = alpha * x + beta, with an i32 scalar besides, which the kernel does not read.
  auto assembled = isa::assemble(R"(.kernel scale_bias
.arg x in f32[128,64]
.arg alpha scalar f32
.arg n scalar i32
.arg y out f32[128,64]
.tile xt = sbuf.f32 p0:128 @0 [1,64]
.engine sync
    dma_copy q0 xt, hbm(x).f32 rows[64,128] [1,64]
    dma_copy q0 hbm(y).f32 rows[64,128] [1,64], xt
)",
                                 "scale_bias.s");
  if (auto *err = std::get_if<isa::AsmError>(&assembled)) FAIL(err->to_string());
  isa::ProgramImage image;
  image.name = "steps";
  image.kernels.push_back(isa::write_kernel(std::get<isa::Program>(assembled)));
  image.tensors.resize(4);
  image.tensors[0].name = "in";
  image.tensors[0].role = TensorRole::kInput;
  image.tensors[0].dtype = isa::DType::kF32;
  image.tensors[0].shape = {128, 64};
  image.tensors[1].name = "out";
  image.tensors[1].role = TensorRole::kOutput;
  image.tensors[1].dtype = isa::DType::kF32;
  image.tensors[1].shape = {256, 64};
  image.tensors[2].name = "scratch";
  image.tensors[2].role = TensorRole::kInternal;
  image.tensors[2].dtype = isa::DType::kU8;
  image.tensors[2].shape = {64};
  image.tensors[3].name = "w";  // read from a safetensors file when loaded
  image.tensors[3].role = TensorRole::kConstant;
  image.tensors[3].dtype = isa::DType::kF32;
  image.tensors[3].shape = {4};
  image.tensors[3].source_file = "weights.safetensors";
  image.tensors[3].source_tensor = "layers.0.w";
  image.steps.resize(3);
  image.steps[0].kind = isa::StepKind::kMemset;
  image.steps[0].dst = {2, 16};
  image.steps[0].bytes = 48;
  image.steps[0].value = 0x7f;
  isa::ProgramStep &launch = image.steps[1];
  launch.deps = {0};
  launch.args.resize(4);
  launch.args[0].ref = {0, 0};
  launch.args[1].scalar = true;
  launch.args[1].scalar_bits = std::bit_cast<uint32_t>(2.5f);
  launch.args[2].scalar = true;
  launch.args[2].scalar_bits = std::bit_cast<uint32_t>(int32_t{-3});
  launch.args[3].ref = {1, 32768};
  image.steps[2].kind = isa::StepKind::kCopy;
  image.steps[2].core = 1;
  image.steps[2].deps = {0, 1};
  image.steps[2].dst = {1, 0};
  image.steps[2].src = {0, 0};
  image.steps[2].bytes = 32768;
  const std::vector<std::byte> bytes = isa::write_program(image);
  isa::ProgramImage check;
  const auto why = isa::read_program(bytes, check);
  INFO((why ? *why : std::string()));
  REQUIRE_FALSE(why);

  test::TempDir dir;
  const std::string path = dir.file("steps.trnp");
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char *>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  const Result r = objdump({"-h", path});
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("from weights.safetensors 'layers.0.w'"));
  CHECK_THAT(r.output, Catch::Contains(
                           "      0  scale_bias(x:f32[128, 64] in, alpha:f32 scalar, n:i32 scalar, "
                           "y:f32[128, 64] out)\n"));
  CHECK_THAT(r.output, Catch::Contains(
                           "      0  memset     0  -            scratch[+16] = 0x7f, 48 bytes\n"));
  CHECK_THAT(r.output, Catch::Contains("      1  launch     0  0            scale_bias(x=in, "
                                       "alpha=2.5, n=-3, y=out[+32768])\n"));
  CHECK_THAT(r.output,
             Catch::Contains("      2  copy       1  0,1          out <- in, 32768 bytes\n"));
}

TEST_CASE("trn-run finds a program's safetensors weights beside the program, from anywhere",
          "[tools]") {
  // docs/programs.md: a relative path in a constant is the program file's directory's.
  test::SimEnv env;
  test::TempDir dir;
  const float weights[4] = {1.5f, -2.0f, 3.25f, 0.0f};
  {
    std::string header = R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
    while (header.size() % 8) header += ' ';
    std::ofstream out(dir.file("weights.safetensors"), std::ios::binary);
    const uint64_t n = header.size();
    out.write(reinterpret_cast<const char *>(&n), 8);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char *>(weights), sizeof weights);
  }
  isa::ProgramImage image;
  image.name = "from_weights";
  image.tensors.resize(2);
  image.tensors[0].name = "w";
  image.tensors[0].role = TensorRole::kConstant;
  image.tensors[0].dtype = isa::DType::kF32;
  image.tensors[0].shape = {4};
  image.tensors[0].source_file = "weights.safetensors";
  image.tensors[0].source_tensor = "w";
  image.tensors[1].name = "out";
  image.tensors[1].role = TensorRole::kOutput;
  image.tensors[1].dtype = isa::DType::kF32;
  image.tensors[1].shape = {4};
  image.steps.resize(1);
  image.steps[0].kind = isa::StepKind::kCopy;
  image.steps[0].dst = {1, 0};
  image.steps[0].src = {0, 0};
  image.steps[0].bytes = sizeof weights;
  const std::vector<std::byte> bytes = isa::write_program(image);
  const std::string program = dir.file("model.trnp");
  std::ofstream(program, std::ios::binary)
      .write(reinterpret_cast<const char *>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  const std::string out = dir.file("out.npy");
  // The tests run in the build directory, not beside the program.
  int status = 0;
  const std::string output =
      test::run_command({TRN_RUN_PATH, program, "--out", "out=" + out}, kTimeoutMs, &status);
  INFO(output);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  std::ifstream in(out, std::ios::binary);
  const std::vector<char> npy((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
  REQUIRE(npy.size() > sizeof weights);
  CHECK(std::memcmp(npy.data() + npy.size() - sizeof weights, weights, sizeof weights) == 0);
}
