// How an elementwise op over N-d tensors becomes launches of a 2-D expression kernel. The output
// is contiguous; each input is contiguous but for the dims it broadcasts. Dims are split at one
// point into rows and columns so that every input is, in each half, either the output's dims or
// all broadcast: [R, C], [1, C], [R, 1] or [1, 1]. With no broadcasting at all the elements are a
// flat run, laid out as 128 partitions plus a remainder row, so that every partition works.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ops/kernels/expression.hpp"
#include "ops/tensor.hpp"

namespace trn::ops {

struct Piece {
  uint64_t rows = 0, cols = 0;
  uint64_t first_element = 0;  // of the output and of every full input
};

struct ElementwisePlan {
  std::vector<kernels::Layout> layouts;  // per input
  std::vector<Piece> pieces;
};

// nullopt when the inputs broadcast in a way no single split expresses.
std::optional<ElementwisePlan> plan_elementwise(const Shape &out,
                                                const std::vector<const Tensor *> &inputs);

}  // namespace trn::ops
