// The arithmetic of the DMA engines' reductions (TRN_HAL_COMMAND_REDUCE): out = a op b over
// elements of one dtype. F32, BF16 and F16 compute in fp32 and store with the ISA's rounding
// (nearest even), as the DMA's cast does; I32 is exact and wraps. MAX and MIN follow the ISA's
// NaN rule (isa/minmax.hpp), so a reduction gives what an elementwise kernel would.
#pragma once

#include <cstdint>

#include "trn/trn.h"

namespace trn::sim {

bool reduce_dtype_supported(uint32_t dtype);
bool reduce_op_supported(uint32_t op);
// `out` may be `a` or `b` exactly; no other overlap.
void reduce_elements(trn_dtype_t dtype, trn_reduce_op_t op, void *out, const void *a, const void *b,
                     uint64_t count);

}  // namespace trn::sim
