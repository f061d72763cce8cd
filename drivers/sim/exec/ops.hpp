// Functional semantics of every opcode (docs/ISA.md). Each executes one already-validated
// instruction completely; faults throw ExecFault. Timing is the cost model's job, not theirs.
#pragma once

#include "exec/exec_context.hpp"
#include "isa/instruction.hpp"

namespace trn::sim::exec {

// Data movement (DMA engines; also used for tensor_copy).
void op_dma_copy(const isa::Instruction &inst, ExecContext &ctx);
// Tensor engine.
void op_matmul(const isa::Instruction &inst, ExecContext &ctx);
void op_transpose(const isa::Instruction &inst, ExecContext &ctx);
// Vector / Scalar / GpSimd engines.
void op_activation(const isa::Instruction &inst, ExecContext &ctx);
void op_tensor_tensor(const isa::Instruction &inst, ExecContext &ctx);
void op_tensor_scalar(const isa::Instruction &inst, ExecContext &ctx);
void op_tensor_reduce(const isa::Instruction &inst, ExecContext &ctx);
void op_tensor_copy(const isa::Instruction &inst, ExecContext &ctx);
void op_memset(const isa::Instruction &inst, ExecContext &ctx);
void op_iota(const isa::Instruction &inst, ExecContext &ctx);
void op_affine_select(const isa::Instruction &inst, ExecContext &ctx);

}  // namespace trn::sim::exec
