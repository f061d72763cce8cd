// Reduction of a row-major [rows, cols] matrix along one axis with an ALU operator (add, max,
// min, multiply, ...): axis 1 gives [rows] (along each row: the vector engine reduces each
// partition's chunk, partial results combine in fp32); axis 0 gives [cols] (down each column:
// 128-column blocks are transposed on the tensor engine so that columns become partitions).
#pragma once

#include <cstdint>

#include "isa/opcodes.hpp"
#include "kbuild/build_target.hpp"
#include "kbuild/kernels/tiling.hpp"

namespace trn::kbuild {

struct ReduceConfig {
  uint64_t rows = 0, cols = 0;
  uint32_t axis = 1;
  isa::DType dtype = isa::DType::kF32, out_dtype = isa::DType::kF32;
  isa::AluOp op = isa::AluOp::kAdd;
  BuildTarget target{};
};
// Arguments: 0 = x [rows, cols], 1 = out [rows] (axis 1) or [cols] (axis 0).
Built build_reduce(const ReduceConfig &config);

}  // namespace trn::kbuild
