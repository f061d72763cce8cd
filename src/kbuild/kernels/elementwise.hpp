// Elementwise kernels over row-major matrices: y = f(x) (an activation function or up to two ALU
// operators with constants), and y = a op b with numpy-style broadcasting of either input along
// the rows (partitions; shape [1, cols]) or the columns (the free axis; shape [rows, 1]).
// Arithmetic is in fp32 on the engines; inputs and output may be any dtype.
#pragma once

#include <cstdint>

#include "isa/opcodes.hpp"
#include "kbuild/build_target.hpp"
#include "kbuild/kernels/tiling.hpp"

namespace trn::kbuild {

// What a unary kernel computes per element.
struct UnaryOp {
  enum class Kind : uint8_t { kActivation, kAlu };
  Kind kind = Kind::kActivation;
  isa::ActFunc func = isa::ActFunc::kIdentity;  // activation: func(x * scale + bias)
  float scale = 1.0f, bias = 0.0f;
  isa::AluOp op0 = isa::AluOp::kBypass, op1 = isa::AluOp::kBypass;  // alu: (x op0 a) op1 b
  float operand0 = 0.0f, operand1 = 0.0f;

  static UnaryOp activation(isa::ActFunc f, float scale = 1.0f, float bias = 0.0f) {
    return {Kind::kActivation, f, scale, bias};
  }
  static UnaryOp alu(isa::AluOp op0, float operand0, isa::AluOp op1 = isa::AluOp::kBypass,
                     float operand1 = 0.0f) {
    return {Kind::kAlu, isa::ActFunc::kIdentity, 1.0f, 0.0f, op0, op1, operand0, operand1};
  }
};

struct UnaryConfig {
  uint64_t rows = 0, cols = 0;
  isa::DType dtype = isa::DType::kF32, out_dtype = isa::DType::kF32;
  UnaryOp op;
  BuildTarget target{};
};
// Arguments: 0 = x [rows, cols], 1 = y [rows, cols].
Built build_unary(const UnaryConfig &config);

struct BinaryConfig {
  uint64_t rows = 0, cols = 0;  // the output's shape
  // Each input's shape: rows or 1, by cols or 1.
  uint64_t a_rows = 0, a_cols = 0, b_rows = 0, b_cols = 0;  // 0: as the output
  isa::DType dtype = isa::DType::kF32, out_dtype = isa::DType::kF32;
  isa::AluOp op = isa::AluOp::kAdd;
  BuildTarget target{};
};
// Arguments: 0 = a, 1 = b, 2 = out [rows, cols].
Built build_binary(const BinaryConfig &config);

// out = a + b, [rows, cols] (the classic first kernel).
Built build_vector_add(uint64_t rows, uint64_t cols, isa::DType dtype, const BuildTarget &target);

}  // namespace trn::kbuild
