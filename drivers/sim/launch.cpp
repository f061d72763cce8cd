#include "sim/launch.hpp"

#include <cstdio>
#include <vector>

#include "isa/opcodes.hpp"
#include "isa/program.hpp"
#include "sim/wait_primitives.hpp"

namespace trn::sim {

trn_result_t check_launch(trn_hal_instance_t &instance, DeviceRuntime &device,
                          const trn_hal_kernel_t *kernel, const trn_hal_binding_t *args,
                          uint32_t arg_count, std::string *why) {
  if (kernel == nullptr) {
    *why = "a launch names no kernel (NULL)";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  const auto &program = kernel->program;
  if (kernel->generation != device.generation()) {
    *why = "kernel '" + program.name + "' was loaded for a device of another generation";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  if (arg_count != program.args.size()) {
    *why = "kernel '" + program.name + "' takes " + std::to_string(program.args.size()) +
           " arguments, " + std::to_string(arg_count) + " were bound";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  if (arg_count != 0 && args == nullptr) {
    *why = "a launch of kernel '" + program.name + "' binds " + std::to_string(arg_count) +
           " arguments but gives no array (NULL)";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  for (uint32_t i = 0; i < arg_count; ++i) {
    if (program.args[i].is_scalar()) {
      if (args[i].bytes != 0) {
        *why = "argument '" + program.args[i].name + "' of kernel '" + program.name +
               "' is a scalar: bind its value in scalar_bits with bytes 0, not " +
               std::to_string(args[i].bytes) + " bytes of memory";
        return TRN_ERROR_INVALID_ARGUMENT;
      }
      continue;
    }
    if (args[i].bytes == 0) continue;
    MemorySpan span;
    if (trn_result_t r = resolve(instance, args[i].device_address, args[i].bytes, &span, why);
        r != TRN_SUCCESS) {
      *why = "argument '" + program.args[i].name + "' of kernel '" + program.name + "': " + *why;
      return r;
    }
  }
  return TRN_SUCCESS;
}

namespace {

void fill_activity(const trn_hal_run_result_t &result, trn_hal_core_activity_t *activity) {
  activity->kernel_ns += result.total_ps / 1000;
  for (uint32_t e = 0; e < TRN_ENGINE_COUNT; ++e) {
    activity->engine_instructions[e] += result.engine_instructions[e];
    activity->engine_busy_ns[e] += result.engine_busy_ps[e] / 1000;
  }
  activity->tensor_flops += result.flops;
  activity->dma_bytes += result.dma_bytes;
  uint64_t dma_ps = 0;
  for (uint64_t q : result.dma_busy_ps) dma_ps += q;
  activity->dma_busy_ns += dma_ps / 1000;
}

}  // namespace

LaunchOutcome run_launch(trn_hal_instance_t &instance, DeviceRuntime &device,
                         uint32_t physical_core, const trn_hal_kernel_t &kernel,
                         const trn_hal_binding_t *args, uint32_t arg_count,
                         trn_hal_run_result_t *submitted, trn_hal_core_activity_t *activity) {
  LaunchOutcome outcome;
  const auto &program = kernel.program;
  std::vector<exec::HbmBinding> bound(arg_count);
  for (uint32_t i = 0; i < arg_count; ++i) {
    if (program.args[i].is_scalar()) {
      bound[i].scalar = args[i].scalar_bits;
      continue;
    }
    if (args[i].bytes == 0) continue;
    MemorySpan span;
    std::string why;
    trn_result_t r = resolve(instance, args[i].device_address, args[i].bytes, &span, &why);
    // What the kernel may write is backed first, so a full device store is an error here.
    if (r == TRN_SUCCESS && span.hbm && program.args[i].direction != isa::ArgDirection::kIn)
      r = span.hbm->commits().commit(span.offset, span.bytes, &why);
    if (r != TRN_SUCCESS) {
      outcome.result = r;
      outcome.why = "argument '" + program.args[i].name + "': " + why;
      return outcome;
    }
    bound[i] = {reinterpret_cast<std::byte *>(span.host), span.bytes};
  }
  trn_hal_run_result_t local{};
  trn_hal_run_result_t *result = submitted ? submitted : &local;
  trn_hal_trace_record_t *trace = result->trace;
  const uint64_t trace_capacity = result->trace_capacity;
  *result = trn_hal_run_result_t{};
  result->trace = trace;
  result->trace_capacity = trace ? trace_capacity : 0;
  const uint64_t start = monotonic_ns();
  if (trn_result_t r = device.executors().run(physical_core, kernel, bound, result, &outcome.why);
      r != TRN_SUCCESS) {
    outcome.result = r;
    return outcome;
  }
  result->host_ns = monotonic_ns() - start;
  fill_activity(*result, activity);
  outcome.kernel_ns = result->total_ps / 1000;
  if (result->status == TRN_HAL_RUN_OK) {
    activity->kernels_completed += 1;
    return outcome;
  }
  // The kernel's own counters still count; the fault says where it stopped.
  activity->kernels_faulted += 1;
  outcome.engine = result->engine;
  outcome.instruction = result->index;
  outcome.source_line = result->source_line;
  std::snprintf(outcome.opcode, sizeof outcome.opcode, "%s", result->opcode);
  const bool deadlock = result->status == TRN_HAL_RUN_DEADLOCK;
  std::string where = "stopped";
  if (!deadlock) {
    where = std::string("faulted at ") +
            isa::engine_name(static_cast<isa::Engine>(result->engine)) + "[" +
            std::to_string(result->index) + "] " + result->opcode;
    // "(kernel.cpp:12)" with the instruction's source file, "(line 12)" without one.
    if (result->source_line) {
      std::string at = isa::source_location_text(
          program, static_cast<isa::Engine>(result->engine % isa::kEngineCount), result->index);
      if (at.empty()) at = "line " + std::to_string(result->source_line);
      where += " (" + at + ")";
    }
  }
  outcome.why = "kernel '" + program.name + "' " + where + ": " + result->message;
  outcome.result = deadlock ? TRN_ERROR_KERNEL_DEADLOCK : TRN_ERROR_KERNEL_FAULT;
  return outcome;
}

}  // namespace trn::sim
