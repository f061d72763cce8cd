// An elementwise op as an expression kernel: its inputs, steps and outputs, run over the pieces
// of its elementwise plan, each piece's kernel found in (or built into) the kernel cache.
#pragma once

#include <string>
#include <vector>

#include "ops/elementwise_plan.hpp"
#include "ops/kernels/expression.hpp"
#include "ops/submit.hpp"

namespace trn::ops {

struct ExpressionOp {
  struct Output {
    const Tensor *tensor = nullptr;
    uint16_t value = 0;
    int16_t input = -1;  // in place: the input it writes back
  };
  std::string name;
  std::vector<const Tensor *> inputs;
  std::vector<kernels::ExprStep> steps;
  std::vector<Output> outputs;
  std::vector<float> scalars;

  // Values for steps: inputs are 0..n-1; each added step returns its value's number.
  uint16_t act(isa::ActFunc f, uint16_t a);
  uint16_t alu(isa::AluOp op, uint16_t a, uint16_t b);
  uint16_t alu_constant(isa::AluOp op, uint16_t a, float constant, bool reverse = false);
  uint16_t alu_scalar(isa::AluOp op, uint16_t a, int16_t scalar, bool reverse = false);
  uint16_t scalar_value(int16_t scalar);
  uint16_t index();
  uint16_t select(uint16_t cond, uint16_t on_true, uint16_t on_false);
};

// Adds the op's launches (one per piece of the plan) to `commands`.
void add_expression(Commands &commands, const ExpressionOp &op, const ElementwisePlan &plan);
// Queues the op alone: the plan's pieces, each a launch on `queue`, under one sync.
void launch_expression(trn_queue_t queue, const trn_sync_t *sync, const ExpressionOp &op,
                       const ElementwisePlan &plan);

}  // namespace trn::ops
