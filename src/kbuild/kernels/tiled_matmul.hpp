// A tiled, pipelined matmul kernel, written with the kernel builder (no semaphore placed by hand):
// out[M,N] = lhsT[K,M]^T @ rhs[K,N] (lhsT is the left operand stored transposed, as NKI's matmul
// kernels take it). The plan keeps a block of rhs resident in SBUF for all of K, streams lhsT tiles
// through a ring, accumulates each output block over K in PSUM (two bank sets, so evacuation
// overlaps the next block), and loads the next rhs block while the last row block of the current
// one finishes — so the Tensor engine stays busy.
#pragma once

#include <cstdint>
#include <string>
#include <variant>

#include "isa/program.hpp"
#include "kbuild/build_target.hpp"

namespace trn::kbuild {

struct MatmulConfig {
  uint64_t m = 0, n = 0, k = 0;  // multiples of 128, 512, 128
  isa::DType in_dtype = isa::DType::kBf16;
  isa::DType out_dtype = isa::DType::kBf16;
  uint32_t sbuf_bytes_per_partition = 180224;  // usable SBUF the plan may fill
  // The core (validation limits, rates); its sbuf_usable_bytes, when set, replaces the above.
  BuildTarget target{};
};

struct MatmulPlan {
  uint32_t block_m = 0, block_n = 0;  // output block
  uint32_t ring_slots = 0;            // lhsT tiles in flight
  uint64_t sbuf_bytes_used = 0;       // per partition
};

// Arguments of the program: 0 = lhsT [K,M], 1 = rhs [K,N], 2 = out [M,N]. On failure, why the
// shape cannot be planned.
std::variant<isa::Program, std::string> build_tiled_matmul(const MatmulConfig &config,
                                                           MatmulPlan *plan = nullptr);

}  // namespace trn::kbuild
