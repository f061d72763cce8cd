// Test kernels, assembled from text with the project's assembler into kernel binaries (the
// binary format is part of the driver contract).
#pragma once

#include <cstddef>
#include <vector>

#include "isa/program.hpp"

namespace conformance {

struct KernelImage {
  trn::isa::Program program;
  std::vector<std::byte> image;
};

// y = x for a 4 x 8 f32 array, through SBUF, on the sync engine's DMA queue 0.
extern const char *const kCopyKernel;
// y = v everywhere for a 4 x 8 f32 array, v a scalar argument (f32) passed at launch.
extern const char *const kFillKernel;
// Its second DMA reads past the end of its 128 x 64 f32 input: faults on sync instruction 1.
extern const char *const kOverreadKernel;
// Waits for a semaphore nothing signals: a deadlock.
extern const char *const kStuckKernel;

// Assembles `text` (REQUIRE-ing success) and writes its binary.
KernelImage assemble_kernel(const char *text, const char *file_name);

}  // namespace conformance
