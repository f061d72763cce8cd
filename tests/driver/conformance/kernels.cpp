#include "kernels.hpp"

#include <catch2/catch.hpp>
#include <variant>

#include "isa/assembler.hpp"
#include "isa/container.hpp"

namespace conformance {

const char *const kCopyKernel = R"(
.kernel conformance_copy
.arg x in f32[4,8]
.arg y out f32[4,8]

.sem loaded = 0
.tile t = sbuf.f32 p0:4 @0 [1,8]

.engine sync
    dma_copy q0 t, hbm(x).f32 rows[8,4] [1,8]    signal loaded += 1
    wait loaded >= 1
    dma_copy q0 hbm(y).f32 rows[8,4] [1,8], t
)";

const char *const kFillKernel = R"(
.kernel conformance_fill
.arg v scalar f32
.arg y out f32[4,8]

.tile t = sbuf.f32 p0:4 @0 [1,8]

.engine gpsimd
    memset t, v
    dma_copy q0 hbm(y).f32 rows[8,4] [1,8], t
)";

const char *const kOverreadKernel = R"(
.kernel overread
.arg a in f32[128,64]
.arg out out f32[128,64]

.tile x = sbuf.f32 p0:128 @0 [1,64]

.engine sync
    dma_copy q0 x, hbm(a).f32 rows[64,128] [1,64]
    dma_copy q1 x, hbm(a).f32 @16384 rows[64,128] [1,64]
    dma_copy q0 hbm(out).f32 rows[64,128] [1,64], x
)";

const char *const kStuckKernel = R"(
.kernel stuck
.arg out out f32[4,8]
.sem never = 3

.engine sync
    wait never >= 1
)";

KernelImage assemble_kernel(const char *text, const char *file_name) {
  auto assembled = trn::isa::assemble(text, file_name);
  if (auto *e = std::get_if<trn::isa::AsmError>(&assembled)) FAIL(e->to_string());
  KernelImage k;
  k.program = std::get<trn::isa::Program>(std::move(assembled));
  k.image = trn::isa::write_kernel(k.program);
  return k;
}

}  // namespace conformance
