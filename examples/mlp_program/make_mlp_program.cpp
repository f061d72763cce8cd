// Builds a program binary (src/isa/program_container.hpp) for a two-layer MLP forward pass,
//
//   y = softmax(gelu(x @ W1 + b1) @ W2 + b2)
//
// from the kernel builder's kernels, with its weights as constant tensors, and writes a matching
// input and the expected output as .npy files. It needs no device: the kernels are built for a
// trn2 core described by the generation's published figures.
//
//   trn-example-make-mlp-program PROGRAM.trnp X.npy EXPECTED.npy
//
// The tiled matmul computes out[M,N] = lhsT[K,M]^T @ rhs[K,N] with M, K multiples of 128 and N
// of 512. The first layer runs transposed, hT = W1^T @ xT (lhsT = W1, rhs = xT), so the hidden
// activations come out as [hidden, batch]: exactly the lhsT the second layer's matmul takes, and
// no transpose step is needed. Hence the input is xT [in, batch] and b1 is a column [hidden, 1].
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "isa/container.hpp"
#include "isa/program_container.hpp"
#include "kbuild/build_target.hpp"
#include "kbuild/kernels/elementwise.hpp"
#include "kbuild/kernels/softmax.hpp"
#include "kbuild/kernels/tiled_matmul.hpp"
#include "trn-run/npy.hpp"

using namespace trn;
using isa::DType;
using isa::TensorRole;

namespace {

// batch is the matmul's N in the first layer (a multiple of 512) and its M in the second.
constexpr uint64_t kBatch = 512, kIn = 128, kHidden = 256, kOut = 512;

// A trn2 core (NeuronCore-v3). The program is made without a device: build_target takes every
// figure a device would report from the generation's core (isa/target.hpp), which the simulated
// device reports too.
kbuild::BuildTarget trn2_target() {
  trn_device_properties_t p = TRN_DEVICE_PROPERTIES_INIT;
  p.generation = TRN_GENERATION_TRN2;
  return kbuild::build_target(p);
}

// Uniform in [-scale, scale), from mt19937's raw output (specified bit for bit by the standard,
// unlike the distributions), so the files are the same on every platform.
std::vector<float> random_values(std::mt19937 &rng, size_t n, float scale) {
  std::vector<float> v(n);
  for (float &x : v) x = scale * (static_cast<float>(rng() >> 8) * 0x1p-23f - 1.0f);
  return v;
}

std::vector<std::byte> bytes_of(const std::vector<float> &v) {
  std::vector<std::byte> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// The expected y in float64 from the f32 inputs, rounded once to f32 at the end. gelu is the
// erf form the kernel's activation uses.
std::vector<float> reference(const std::vector<float> &xT, const std::vector<float> &w1,
                             const std::vector<float> &b1, const std::vector<float> &w2,
                             const std::vector<float> &b2) {
  std::vector<double> gT(kHidden * kBatch);  // [hidden, batch]
  for (uint64_t j = 0; j < kHidden; ++j)
    for (uint64_t b = 0; b < kBatch; ++b) {
      double h = b1[j];
      for (uint64_t i = 0; i < kIn; ++i) h += double(w1[i * kHidden + j]) * xT[i * kBatch + b];
      gT[j * kBatch + b] = 0.5 * h * std::erfc(-h / std::sqrt(2.0));
    }
  std::vector<float> y(kBatch * kOut);
  std::vector<double> z(kOut);
  for (uint64_t b = 0; b < kBatch; ++b) {
    double max = -INFINITY, sum = 0.0;
    for (uint64_t o = 0; o < kOut; ++o) {
      z[o] = b2[o];
      for (uint64_t j = 0; j < kHidden; ++j) z[o] += gT[j * kBatch + b] * w2[j * kOut + o];
      max = std::max(max, z[o]);
    }
    for (double &v : z) sum += (v = std::exp(v - max));
    for (uint64_t o = 0; o < kOut; ++o) y[b * kOut + o] = static_cast<float>(z[o] / sum);
  }
  return y;
}

// Appends a built kernel to the image; the builder's error otherwise.
std::variant<uint32_t, std::string> add_kernel(isa::ProgramImage &image,
                                               std::variant<isa::Program, std::string> built) {
  if (auto *err = std::get_if<std::string>(&built)) return *err;
  image.kernels.push_back(isa::write_kernel(std::get<isa::Program>(built)));
  return static_cast<uint32_t>(image.kernels.size() - 1);
}

uint32_t add_tensor(isa::ProgramImage &image, std::string name, TensorRole role,
                    std::vector<uint64_t> shape, const std::vector<float> *data = nullptr) {
  isa::ProgramTensor t;
  t.name = std::move(name);
  t.role = role;
  t.dtype = DType::kF32;
  t.shape = std::move(shape);
  if (data) t.data = bytes_of(*data);
  image.tensors.push_back(std::move(t));
  return static_cast<uint32_t>(image.tensors.size() - 1);
}

// A launch of `kernel` with its tensor arguments in order, after the previous step.
void add_launch(isa::ProgramImage &image, uint32_t kernel, std::vector<uint32_t> tensors) {
  isa::ProgramStep s;
  s.kind = isa::StepKind::kLaunch;
  s.kernel = kernel;
  if (!image.steps.empty()) s.deps = {static_cast<uint32_t>(image.steps.size() - 1)};
  for (uint32_t t : tensors) {
    isa::StepArg arg;
    arg.ref.tensor = t;
    s.args.push_back(arg);
  }
  image.steps.push_back(std::move(s));
}

bool write_bytes(const std::string &path, const std::vector<std::byte> &bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(f.flush());
}

}  // namespace

int main(int argc, char **argv) {
  std::string program_path, x_path, expected_path;
  CLI::App app{"Build the MLP forward program, its input and its expected output"};
  app.add_option("program", program_path, "program binary to write (.trnp)")->required();
  app.add_option("x", x_path, "input xT [in, batch] to write (.npy)")->required();
  app.add_option("expected", expected_path, "expected y [batch, out] to write (.npy)")->required();
  CLI11_PARSE(app, argc, argv);

  // Small weights (scaled by 1/sqrt(fan-in)) keep the logits near 1, so the softmax is not
  // one-hot and the check compares every probability.
  std::mt19937 rng(20240611);
  const std::vector<float> xT = random_values(rng, kIn * kBatch, 1.0f);
  const std::vector<float> w1 = random_values(rng, kIn * kHidden, 1.0f / std::sqrt(float(kIn)));
  const std::vector<float> b1 = random_values(rng, kHidden, 0.1f);
  const std::vector<float> w2 =
      random_values(rng, kHidden * kOut, 2.0f / std::sqrt(float(kHidden)));
  const std::vector<float> b2 = random_values(rng, kOut, 0.1f);

  isa::ProgramImage image;
  image.name = "mlp_forward";
  const uint32_t x = add_tensor(image, "xT", TensorRole::kInput, {kIn, kBatch});
  const uint32_t w1_t = add_tensor(image, "w1", TensorRole::kConstant, {kIn, kHidden}, &w1);
  const uint32_t b1_t = add_tensor(image, "b1", TensorRole::kConstant, {kHidden, 1}, &b1);
  const uint32_t w2_t = add_tensor(image, "w2", TensorRole::kConstant, {kHidden, kOut}, &w2);
  const uint32_t b2_t = add_tensor(image, "b2", TensorRole::kConstant, {1, kOut}, &b2);
  const uint32_t hT = add_tensor(image, "hT", TensorRole::kInternal, {kHidden, kBatch});
  const uint32_t hT_bias = add_tensor(image, "hT_bias", TensorRole::kInternal, {kHidden, kBatch});
  const uint32_t gT = add_tensor(image, "gT", TensorRole::kInternal, {kHidden, kBatch});
  const uint32_t z = add_tensor(image, "logits", TensorRole::kInternal, {kBatch, kOut});
  const uint32_t z_bias = add_tensor(image, "logits_bias", TensorRole::kInternal, {kBatch, kOut});
  const uint32_t y = add_tensor(image, "y", TensorRole::kOutput, {kBatch, kOut});

  const kbuild::BuildTarget target = trn2_target();
  kbuild::MatmulConfig mm1;
  mm1.m = kHidden;
  mm1.n = kBatch;
  mm1.k = kIn;
  mm1.in_dtype = mm1.out_dtype = DType::kF32;
  mm1.target = target;
  kbuild::MatmulConfig mm2 = mm1;
  mm2.m = kBatch;
  mm2.n = kOut;
  mm2.k = kHidden;
  kbuild::BinaryConfig bias1;  // b1 [hidden, 1] broadcast along the batch columns
  bias1.rows = bias1.b_rows = kHidden;
  bias1.cols = kBatch;
  bias1.b_cols = 1;
  bias1.target = target;
  kbuild::BinaryConfig bias2;  // b2 [1, out] broadcast along the batch rows
  bias2.rows = kBatch;
  bias2.cols = bias2.b_cols = kOut;
  bias2.b_rows = 1;
  bias2.target = target;
  kbuild::UnaryConfig gelu;
  gelu.rows = kHidden;
  gelu.cols = kBatch;
  gelu.op = kbuild::UnaryOp::activation(isa::ActFunc::kGelu);
  gelu.target = target;
  kbuild::SoftmaxConfig softmax;
  softmax.rows = kBatch;
  softmax.cols = kOut;
  softmax.target = target;

  // Each step reads the previous one's output.
  const std::vector<std::pair<std::variant<isa::Program, std::string>, std::vector<uint32_t>>>
      steps = {{kbuild::build_tiled_matmul(mm1), {w1_t, x, hT}},
               {kbuild::build_binary(bias1), {hT, b1_t, hT_bias}},
               {kbuild::build_unary(gelu), {hT_bias, gT}},
               {kbuild::build_tiled_matmul(mm2), {gT, w2_t, z}},
               {kbuild::build_binary(bias2), {z, b2_t, z_bias}},
               {kbuild::build_softmax(softmax), {z_bias, y}}};
  for (const auto &[built, args] : steps) {
    auto kernel = add_kernel(image, built);
    if (auto *err = std::get_if<std::string>(&kernel)) {
      std::fprintf(stderr, "make_mlp_program: %s\n", err->c_str());
      return 1;
    }
    add_launch(image, std::get<uint32_t>(kernel), args);
  }

  const std::vector<std::byte> bytes = isa::write_program(image);
  isa::ProgramImage check;
  if (auto why = isa::read_program(bytes, check)) {
    std::fprintf(stderr, "make_mlp_program: the program is not valid: %s\n", why->c_str());
    return 1;
  }
  if (!write_bytes(program_path, bytes)) {
    std::fprintf(stderr, "make_mlp_program: cannot write %s\n", program_path.c_str());
    return 1;
  }
  const std::vector<float> expected = reference(xT, w1, b1, w2, b2);
  for (const auto &[path, shape, values] :
       {std::tuple{x_path, std::vector<uint64_t>{kIn, kBatch}, &xT},
        std::tuple{expected_path, std::vector<uint64_t>{kBatch, kOut}, &expected}}) {
    if (auto why = tools::npy::write_file(path, "<f4", shape, bytes_of(*values))) {
      std::fprintf(stderr, "make_mlp_program: cannot write %s: %s\n", path.c_str(), why->c_str());
      return 1;
    }
  }
  return 0;
}
