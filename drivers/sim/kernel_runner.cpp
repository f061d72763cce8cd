#include "sim/kernel_runner.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "isa/container.hpp"
#include "isa/validate.hpp"
#include "sim/core_spec.hpp"

namespace trn::sim {

trn_result_t load_kernel(const void *image, size_t size, trn_generation_t generation,
                         std::unique_ptr<trn_hal_kernel> *out, std::string *why) {
  auto kernel = std::make_unique<trn_hal_kernel>();
  kernel->generation = generation;
  const std::span<const std::byte> bytes(static_cast<const std::byte *>(image), size);
  if (auto err = isa::read_kernel(bytes, kernel->program)) {
    *why = "malformed kernel binary: " + *err;
    return TRN_ERROR_INVALID_KERNEL;
  }
  const auto &spec = generation_spec(generation);
  if (auto err = isa::validate_program(kernel->program, spec.core().target())) {
    *why = "kernel '" + kernel->program.name + "' is not valid on " + spec.name() + ": " + *err;
    return TRN_ERROR_INVALID_KERNEL;
  }
  *out = std::move(kernel);
  return TRN_SUCCESS;
}

namespace {

void fill_result(const exec::RunResult &run, const trn_hal_kernel &kernel,
                 const exec::CoreSpec &spec, trn_hal_run_result_t *out) {
  const auto &r = run.report;
  out->status = r.status == exec::RunStatus::kOk      ? TRN_HAL_RUN_OK
                : r.status == exec::RunStatus::kFault ? TRN_HAL_RUN_FAULT
                                                      : TRN_HAL_RUN_DEADLOCK;
  out->engine = static_cast<uint32_t>(r.engine);
  out->index = r.index;
  out->source_line = 0;
  const auto &lines = kernel.program.source_lines[out->engine % isa::kEngineCount];
  if (r.status != exec::RunStatus::kOk && r.index < lines.size()) out->source_line = lines[r.index];
  std::snprintf(out->opcode, sizeof out->opcode, "%s", isa::opcode_name(r.opcode));
  std::snprintf(out->message, sizeof out->message, "%s", r.message.c_str());
  const auto &c = run.counters;
  for (uint32_t e = 0; e < isa::kEngineCount; ++e) {
    out->engine_instructions[e] = c.engines[e].instructions;
    out->engine_busy_ps[e] = c.engines[e].busy_ps;
    out->engine_wait_ps[e] = c.engines[e].wait_ps;
  }
  // The HAL's per-queue array has room for as many queues as the executor's.
  static_assert(TRN_HAL_DMA_QUEUES == exec::kDmaQueues);
  for (uint32_t q = 0; q < exec::kDmaQueues; ++q) out->dma_busy_ps[q] = c.dma_busy_ps[q];
  out->dma_transfers = c.dma_transfers;
  out->dma_bytes = c.dma_bytes;
  out->flops = c.flops;
  out->total_ps = c.total_ps;
  out->peak_flops = double(spec.tensor_hz * isa::kBf16FlopsPerTensorCycle);
  out->trace_count = run.trace.size();
  if (out->trace) {
    const size_t n = std::min<uint64_t>(run.trace.size(), out->trace_capacity);
    for (size_t i = 0; i < n; ++i) {
      const auto &t = run.trace[i];
      out->trace[i] = {t.track,  t.engine,  static_cast<uint8_t>(t.opcode),
                       0,        t.index,   t.start_ps,
                       t.end_ps, t.wait_ps, t.bytes,
                       t.flops};
    }
  }
}

}  // namespace

trn_result_t CoreExecutors::run(uint32_t core, const trn_hal_kernel &kernel,
                                std::span<const exec::HbmBinding> args,
                                trn_hal_run_result_t *result, std::string *why) {
  if (kernel.generation != generation_) {
    *why = "the kernel was loaded for another generation of device";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  Slot *slot = nullptr;
  {
    std::lock_guard lock(mu_);
    if (slots_.size() <= core) slots_.resize(core + 1);
    if (!slots_[core]) slots_[core] = std::make_unique<Slot>();
    slot = slots_[core].get();
  }
  std::lock_guard lock(slot->mu);
  const exec::CoreSpec spec = core_spec(generation_);
  if (!slot->executor) slot->executor = std::make_unique<exec::Executor>(spec);
  exec::RunOptions options;
  options.trace = result->trace != nullptr;
  options.race_check = race_check_;
  const exec::RunResult run = slot->executor->run(kernel.program, args, options);
  fill_result(run, kernel, spec, result);
  return TRN_SUCCESS;
}

}  // namespace trn::sim
