// conv2d forward and backward for the op library, written with the kernel builder as implicit
// GEMMs (sums over kernel taps of matmuls, fp32 in PSUM), with PyTorch's semantics (cross-
// correlation, zero padding, stride, dilation; groups = 1 only, others are refused).
//
// Forward, arguments in launch order:
//   0  x     [N, C, H, W], in_dtype
//   1  w     [O, C, kh, kw], in_dtype
//   2  bias  [O], bias_dtype (only with bias)
//   .  out   [N, O, Ho, Wo], out_dtype
// out = sum over c, i, j of w[o, c, i, j] * x[n, c, ho * s - p + i * d, wo * s - p + j * d]
// (+ bias[o]): channels on partitions (128 at a time) as the contraction, output channels as
// the matmul's rows, up to 512 output pixels as its columns; with few channels (a first layer's
// 3), up to four taps share a matmul, stacked along the partitions.
//
// Backward, arguments in launch order (each gradient optional, at least one wanted):
//   0  grad_out   [N, O, Ho, Wo], in_dtype
//   .  x          [N, C, H, W], in_dtype (only with grad_w)
//   .  w          [O, C, kh, kw], in_dtype (only with grad_x)
//   .  grad_x     [N, C, H, W], grad_x_dtype
//   .  grad_w     [O, C, kh, kw], grad_w_dtype
//   .  grad_bias  [O], grad_bias_dtype
// grad_x is the transposed convolution (grad_out interleaved with stride - 1 zeros, padded by
// d * (k - 1) - p, against the flipped taps); grad_w sums grad_out ⊗ x patches over the batch and
// the output pixels (pixels on partitions, through tensor-engine transposes); grad_bias sums
// grad_out over the batch and the pixels.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "isa/program.hpp"
#include "kbuild/build_target.hpp"

namespace trn::ops::kernels {

struct Conv2dShape {
  uint64_t batch = 1, channels = 1, height = 1, width = 1, out_channels = 1;
  uint32_t kernel_h = 1, kernel_w = 1;
  uint32_t stride[2] = {1, 1}, padding[2] = {0, 0}, dilation[2] = {1, 1};
  uint32_t groups = 1;  // only 1 is built
  // The output's height and width (0 when the dilated kernel does not fit the padded input).
  uint64_t out_h() const;
  uint64_t out_w() const;
};

struct Conv2dConfig {
  Conv2dShape shape;
  isa::DType in_dtype = isa::DType::kF32;   // x and w: f32, bf16 or f16
  isa::DType out_dtype = isa::DType::kF32;  // any float dtype
  bool bias = false;
  isa::DType bias_dtype = isa::DType::kF32;  // any float dtype
  kbuild::BuildTarget target{};
};

struct Conv2dBackwardConfig {
  Conv2dShape shape;
  isa::DType in_dtype = isa::DType::kF32;  // grad_out, x and w: f32, bf16 or f16
  bool grad_x = true, grad_w = true, grad_bias = false;
  isa::DType grad_x_dtype = isa::DType::kF32, grad_w_dtype = isa::DType::kF32,
             grad_bias_dtype = isa::DType::kF32;  // any float dtypes
  kbuild::BuildTarget target{};
};

// The program, or why this configuration cannot be built.
std::variant<isa::Program, std::string> build_conv2d(const Conv2dConfig &config);
std::variant<isa::Program, std::string> build_conv2d_backward(const Conv2dBackwardConfig &config);

}  // namespace trn::ops::kernels
