// Exact integer addition and subtraction for int32 and int64 tensors, which the device's fp32
// arithmetic cannot do directly (it rounds beyond 2^24, and the ISA has no int64). Each value is
// read as 16-bit limbs (int16 elements, little-endian), each limb is taken as unsigned, and the
// limbs are added from the lowest with a carry: every partial sum is below 2^17, so fp32 holds
// it exactly, and the result wraps around on overflow as two's complement does (PyTorch's
// integer add). a - b is a + ~b + 1: each of b's limbs becomes 65535 - limb, and the first carry
// is 1.
#pragma once

#include <cstdint>
#include <string>

#include "kbuild/build_target.hpp"
#include "kbuild/kernels/tiling.hpp"

namespace trn::ops::kernels {

struct IntegerAddConfig {
  uint64_t rows = 0, cols = 0;  // elements (int32 or int64) of one piece, as a matrix
  uint32_t limbs = 4;           // 16-bit limbs per element: 2 for int32, 4 for int64
  bool tensor_b = true;         // b is a tensor of a's shape; otherwise `limbs` scalar arguments
  bool subtract = false;        // a - b (tensor b only: a scalar is negated on the host)
  kbuild::BuildTarget target{};
};

// Arguments: a, then b (tensor_b), then out, each i16 [rows, cols * limbs] (the elements' limbs);
// without tensor_b, after out one f32 scalar per limb: b's limbs as unsigned values, lowest
// first. `out` may be bound to a's memory (in place).
std::string integer_add_signature(const IntegerAddConfig &config);
kbuild::Built build_integer_add(const IntegerAddConfig &config);

}  // namespace trn::ops::kernels
