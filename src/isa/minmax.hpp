// The ISA's max and min of two fp32 values, shared by every place that computes them (the
// engines' ALU, the DMA engines' reductions): NaN propagates; between equal operands (+0 and -0
// included) the second is returned.
#pragma once

namespace trn::isa {

inline float max_nan(float a, float b) {
  const float r = a > b ? a : b;
  return (a != a || b != b) ? a + b : r;
}
inline float min_nan(float a, float b) {
  const float r = a < b ? a : b;
  return (a != a || b != b) ? a + b : r;
}

}  // namespace trn::isa
