// Ops with no trn kernel run on the CPU through PyTorch's boxed fallback (inputs copied to the
// host, the CPU kernel, results copied back), each recorded with a count and warned about once.
// libtrn_ops' own host runs (an op it cannot do on the device, trn_ops_get_fallbacks) are
// reported beside them as "trn_ops::<op>".
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace torch_trn {

std::vector<std::pair<std::string, uint64_t>> fallback_ops();
// Records (and the first time warns about) an op a trn kernel ran on the CPU itself, for the
// cases it has no device path for: `name` as the fallback names it, "aten::<op>.<overload>".
void record_cpu_run(const std::string &name);
void reset_fallback_ops();

}  // namespace torch_trn
