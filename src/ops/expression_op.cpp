#include "ops/expression_op.hpp"

#include <algorithm>

#include "ops/device.hpp"
#include "ops/kernel_cache.hpp"
#include "ops/submit.hpp"

namespace trn::ops {

namespace {

using Kind = kernels::ExprStep::Kind;

uint16_t add_step(ExpressionOp &op, kernels::ExprStep s) {
  op.steps.push_back(s);
  return static_cast<uint16_t>(op.inputs.size() + op.steps.size() - 1);
}

isa::DType device_dtype(trn_dtype_t t) {
  return static_cast<isa::DType>(t);
}

}  // namespace

uint16_t ExpressionOp::act(isa::ActFunc f, uint16_t a) {
  return add_step(*this, {.kind = Kind::kActivation, .func = f, .a = a});
}

uint16_t ExpressionOp::alu(isa::AluOp o, uint16_t a, uint16_t b) {
  return add_step(*this, {.kind = Kind::kAlu, .op = o, .a = a, .b = b});
}

uint16_t ExpressionOp::alu_constant(isa::AluOp o, uint16_t a, float constant, bool reverse) {
  return add_step(
      *this, {.kind = Kind::kAluScalar, .op = o, .a = a, .constant = constant, .reverse = reverse});
}

uint16_t ExpressionOp::alu_scalar(isa::AluOp o, uint16_t a, int16_t scalar, bool reverse) {
  return add_step(
      *this, {.kind = Kind::kAluScalar, .op = o, .a = a, .scalar = scalar, .reverse = reverse});
}

uint16_t ExpressionOp::scalar_value(int16_t scalar) {
  return add_step(*this, {.kind = Kind::kScalar, .scalar = scalar});
}

uint16_t ExpressionOp::select(uint16_t cond, uint16_t on_true, uint16_t on_false) {
  return add_step(*this, {.kind = Kind::kSelect, .a = cond, .b = on_true, .c = on_false});
}

uint16_t ExpressionOp::index() {
  return add_step(*this, {.kind = Kind::kIndex});
}

void launch_expression(trn_queue_t queue, const trn_sync_t *sync, const ExpressionOp &op,
                       const ElementwisePlan &plan) {
  Commands commands(queue, sync);
  add_expression(commands, op, plan);
  commands.submit();
}

void add_expression(Commands &commands, const ExpressionOp &op, const ElementwisePlan &plan) {
  const Tensor &first = *op.outputs.front().tensor;
  const Device dev = device(first.device_index);
  for (const Piece &piece : plan.pieces) {
    kernels::ExprConfig c;
    c.name = op.name;
    c.rows = piece.rows;
    c.cols = piece.cols;
    for (size_t i = 0; i < op.inputs.size(); ++i)
      c.inputs.push_back({device_dtype(op.inputs[i]->dtype), plan.layouts[i]});
    c.steps = op.steps;
    for (const ExpressionOp::Output &o : op.outputs) {
      const bool int64 = o.tensor->dtype == TRN_DTYPE_I64;
      c.outputs.push_back(
          {o.value, int64 ? isa::DType::kI32 : device_dtype(o.tensor->dtype), o.input, int64});
    }
    c.scalars = static_cast<uint32_t>(op.scalars.size());
    const bool indexed = std::any_of(op.steps.begin(), op.steps.end(), [](const auto &s) {
      return s.kind == kernels::ExprStep::Kind::kIndex;
    });
    if (indexed) c.index_base = piece.first_element;
    const std::string signature = kernels::expression_signature(c);
    KernelPtr kernel = get_kernel(dev, signature, [c](const kbuild::BuildTarget &target) mutable {
      c.target = target;
      return kernels::build_expression(c);
    });
    std::vector<trn_kernel_binding_t> args;
    auto bind = [&](const Tensor &t, bool full) {
      args.push_back(
          tensor_binding(t.mem, t.offset + (full ? piece.first_element * t.element_size() : 0)));
    };
    for (size_t i = 0; i < op.inputs.size(); ++i)
      bind(*op.inputs[i], plan.layouts[i] == kernels::Layout::kFull);
    for (const ExpressionOp::Output &o : op.outputs)
      if (o.input < 0) bind(*o.tensor, true);
    for (float s : op.scalars) args.push_back(scalar_f32(s));
    commands.launch(kernel, std::move(args));
  }
}

}  // namespace trn::ops
