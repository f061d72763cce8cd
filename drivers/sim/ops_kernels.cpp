// Kernels: load, unload, and what the runtime shows of them.
#include <algorithm>
#include <cstddef>
#include <cstdio>

#include "sim/kernel_runner.hpp"
#include "sim/ops_support.hpp"
#include "sim/ops_table.hpp"

namespace trn::sim {
namespace {

trn_result_t sim_kernel_load(trn_hal_instance_t *instance, uint32_t device, const void *image,
                             size_t size, trn_hal_kernel_t **kernel, trn_hal_error_t *err) {
  return with_device(instance, device, err, [&](DeviceRuntime &runtime, std::string *why) {
    if (image == nullptr || kernel == nullptr) {
      *why = "kernel_load needs an image and somewhere to put the kernel (NULL)";
      return TRN_ERROR_NULL_POINTER;
    }
    std::unique_ptr<trn_hal_kernel> loaded;
    trn_result_t r = load_kernel(image, size, runtime.generation(), &loaded, why);
    if (r == TRN_SUCCESS) *kernel = instance->kernels.adopt(std::move(loaded));
    return r;
  });
}

void sim_kernel_unload(trn_hal_instance_t *instance, trn_hal_kernel_t *kernel) {
  if (instance && kernel) instance->kernels.destroy(kernel);
}

// The public structs' headers (type, size) are the caller's: everything after them is filled.
void sim_kernel_properties(const trn_hal_kernel_t *kernel, trn_kernel_properties_t *p) {
  if (!kernel || !p) return;
  const auto &program = kernel->program;
  std::snprintf(p->name, sizeof p->name, "%s", program.name.c_str());
  p->arg_count = static_cast<uint32_t>(program.args.size());
  p->reserved = 0;
  for (uint32_t e = 0; e < TRN_ENGINE_COUNT; ++e) p->instructions[e] = program.streams[e].size();
  p->constants_bytes = program.constants.size();
}

trn_result_t sim_kernel_arg(const trn_hal_kernel_t *kernel, uint32_t index, trn_kernel_arg_t *a) {
  if (!kernel || !a) return TRN_ERROR_NULL_POINTER;
  const auto &list = kernel->program.args;
  if (index >= list.size()) return TRN_ERROR_OUT_OF_RANGE;
  const auto &arg = list[index];
  std::snprintf(a->name, sizeof a->name, "%s", arg.name.c_str());
  a->dtype = static_cast<trn_dtype_t>(arg.dtype);
  a->direction = static_cast<trn_arg_direction_t>(arg.direction);
  a->rank = static_cast<uint32_t>(std::min<size_t>(arg.shape.size(), TRN_KERNEL_MAX_RANK));
  a->reserved = 0;
  for (uint32_t d = 0; d < TRN_KERNEL_MAX_RANK; ++d) a->shape[d] = d < a->rank ? arg.shape[d] : 0;
  a->bytes = arg.bytes();
  // Filled only up to the caller's size: kind came after the first fields (API 0.2).
  if (a->header.size >= offsetof(trn_kernel_arg_t, kind) + sizeof a->kind)
    a->kind = arg.is_scalar() ? TRN_ARG_KIND_SCALAR : TRN_ARG_KIND_TENSOR;
  return TRN_SUCCESS;
}

uint32_t sim_kernel_source_line(const trn_hal_kernel_t *kernel, uint32_t engine, uint32_t index) {
  if (!kernel || engine >= TRN_ENGINE_COUNT) return 0;
  const auto &lines = kernel->program.source_lines[engine];
  return index < lines.size() ? lines[index] : 0;
}

const char *sim_kernel_source_file(const trn_hal_kernel_t *kernel, uint32_t engine,
                                   uint32_t index) {
  if (!kernel || engine >= TRN_ENGINE_COUNT) return "";
  const auto &lines = kernel->program.source_lines[engine];
  if (index >= lines.size()) return "";
  return kernel->program
      .source_file_name(kernel->program.source_file_id(static_cast<isa::Engine>(engine), index))
      .c_str();
}

}  // namespace

void fill_kernel_ops(trn_hal_ops_t *ops) {
  ops->kernel_load = sim_kernel_load;
  ops->kernel_unload = sim_kernel_unload;
  ops->kernel_properties = sim_kernel_properties;
  ops->kernel_arg = sim_kernel_arg;
  ops->kernel_source_line = sim_kernel_source_line;
  ops->kernel_source_file = sim_kernel_source_file;
}

}  // namespace trn::sim
