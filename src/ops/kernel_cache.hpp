// Compile on first use, cached: the kernel for a signature is looked up in memory (per device,
// least recently used let go first, bounded by the binaries' bytes), then on disk (shared by
// processes, docs/ops.md), and built with the kernel builder only when neither has it. The key is
// the op's signature, the core's target, the ISA's version and the kernels' build fingerprint (a
// hash of the sources of the ISA, the kernel builder and the kernels: any change to them misses
// the old entries). The disk cache is used only in a directory of the user's own that nobody
// else can write; its entries are 0600 in a 0700 directory.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "isa/program.hpp"
#include "ops/device.hpp"
#include "trn/trn_ops.h"

namespace trn::ops {

// A loaded kernel. Destroying it while launches are in flight is safe (they keep it alive).
struct LoadedKernel {
  trn_kernel_t kernel = nullptr;
  std::vector<std::byte> image;
  uint32_t device_index = 0;
  LoadedKernel() = default;
  LoadedKernel(const LoadedKernel &) = delete;
  LoadedKernel &operator=(const LoadedKernel &) = delete;
  ~LoadedKernel() { trn_kernel_destroy(kernel); }
};
using KernelPtr = std::shared_ptr<LoadedKernel>;

using BuildFn = std::function<std::variant<isa::Program, std::string>(const kbuild::BuildTarget &)>;

// The kernel for `signature` on `device`; `build` makes it on a miss. A build error throws
// DeviceRefused with the builder's message.
KernelPtr get_kernel(const Device &device, const std::string &signature, const BuildFn &build);
// Drops a kernel whose handle went stale, so that the next get loads it again.
void forget_kernel(const KernelPtr &kernel);

trn_ops_cache_stats_t cache_stats();
void cache_clear();
// Lets go of kernels beyond the configured memory bound.
void cache_trim();

}  // namespace trn::ops
