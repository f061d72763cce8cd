// Pinned host memory (pin_memory(), DataLoader(pin_memory=True), the staging of non_blocking
// copies to the CPU): page-aligned host memory registered with every trn device the process sees
// (trn_mem_register_host, as cudaHostAlloc pins), so that the device's DMA engines reach it.
#pragma once

#include <c10/core/Allocator.h>

namespace torch_trn {

c10::Allocator *pinned_allocator();
// Whether `data` lies in a live pinned allocation of ours.
bool is_pinned(const void *data);

}  // namespace torch_trn
