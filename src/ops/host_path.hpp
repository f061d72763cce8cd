// Running an op on the host, in queue order: each input's bytes are read out of device memory,
// the op is computed in float64 (src/ops/host), and the outputs are written back, all as commands
// of the op's queue, so that the op is ordered with the device ops around it exactly as a kernel
// would be. The staging buffers live until the last command has run.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ops/host/reference.hpp"
#include "ops/tensor.hpp"

namespace trn::ops {

using Arrays = std::vector<host::Array>;
// From the inputs (an absent input is an empty Array) to one Array per present output.
using HostCompute = std::function<Arrays(const Arrays &inputs)>;

// Queues the op. `inputs` and `outputs` may hold absent tensors. `op` and `signature` name it in
// messages; `reason` is why it is not on the device (recorded as a fallback unless empty).
void run_on_host(trn_queue_t queue, const trn_sync_t *sync, const std::string &op,
                 const std::string &signature, const std::string &reason,
                 std::vector<Tensor> inputs, std::vector<Tensor> outputs, HostCompute compute);

// out = x (x broadcast to out's shape) with one dtype, element bytes copied as they are, so
// that int64 values beyond 2^53 stay exact.
void copy_on_host(trn_queue_t queue, const trn_sync_t *sync, const std::string &signature,
                  const std::string &reason, const Tensor &x, const Tensor &out);

// Integer ops exactly: where every tensor has an integer dtype, the values are read as int64 as
// they are (float64 would round those beyond 2^53), the op computes in int64 (src/ops/host/
// integer.hpp) and the results are stored wrapped to the output's width, as PyTorch's integer
// kernels and casts do.
bool all_integer(const std::vector<Tensor> &inputs, const Tensor &out);
// out = f(the inputs' values at each element), every input broadcast to out's shape.
using IntegerElementwise = std::function<int64_t(const int64_t *values)>;
void run_integer_elementwise(trn_queue_t queue, const trn_sync_t *sync, const std::string &op,
                             const std::string &signature, const std::string &reason,
                             std::vector<Tensor> inputs, const Tensor &out, IntegerElementwise f);
// out = the reduction of x over `dims` (empty: all of them); out holds the reduced elements in
// row-major order (keepdim or not).
void run_integer_reduce(trn_queue_t queue, const trn_sync_t *sync, const std::string &op,
                        const std::string &signature, const std::string &reason, const Tensor &x,
                        const Tensor &out, host::Reduce reduce, std::vector<int64_t> dims);

// An optional input as the host reference takes it: NULL when the tensor was absent.
inline const host::Array *optional_input(const Arrays &inputs, size_t i) {
  return inputs[i].shape.empty() && inputs[i].data.empty() ? nullptr : &inputs[i];
}

// Conversions between a tensor's bytes (its span, starting at span_begin) and float64 arrays.
host::Array gather(const Tensor &t, const std::byte *span);
void scatter(const host::Array &a, const Tensor &t, std::byte *span);

}  // namespace trn::ops
