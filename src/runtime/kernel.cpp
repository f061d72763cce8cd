#include "runtime/kernel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "isa/opcodes.hpp"
#include "runtime/driver_error.hpp"
#include "runtime/error.hpp"
#include "runtime/session.hpp"

namespace trn::rt {

Kernel::~Kernel() {
  if (hal && device && device->driver->ops.kernel_unload)
    device->driver->ops.kernel_unload(device->driver->instance, hal);
}

trn_result_t load_kernel(Device &device, const void *image, size_t size,
                         std::shared_ptr<Kernel> *out) {
  auto kernel = std::make_shared<Kernel>();
  kernel->device = &device;
  const trn_hal_ops_t &ops = device.driver->ops;
  DriverError err;
  if (trn_result_t r = ops.kernel_load(device.driver->instance, device.driver_index, image, size,
                                       &kernel->hal, &err);
      r != TRN_SUCCESS)
    return fail(r, err.message);
  ops.kernel_properties(kernel->hal, &kernel->properties);
  for (uint64_t n : kernel->properties.instructions) kernel->instruction_count += n;
  kernel->args.resize(kernel->properties.arg_count, TRN_KERNEL_ARG_INIT);
  for (uint32_t i = 0; i < kernel->properties.arg_count; ++i)
    if (trn_result_t r = ops.kernel_arg(kernel->hal, i, &kernel->args[i]); r != TRN_SUCCESS)
      return fail(TRN_ERROR_DRIVER, "the " + std::string(ops.name) + " driver reports " +
                                        std::to_string(kernel->properties.arg_count) +
                                        " arguments but has no argument " + std::to_string(i));
  // A driver that predates scalar arguments leaves `kind` 0: all its arguments are tensors.
  for (trn_kernel_arg_t &a : kernel->args)
    if (a.kind != TRN_ARG_KIND_SCALAR) a.kind = TRN_ARG_KIND_TENSOR;
  const auto *bytes = static_cast<const std::byte *>(image);
  kernel->image.assign(bytes, bytes + size);
  *out = std::move(kernel);
  return TRN_SUCCESS;
}

void Profile::record(const Kernel &kernel, const trn_hal_run_result_t &result,
                     std::vector<trn_hal_trace_record_t> trace) {
  std::vector<uint32_t> lines, files;
  std::vector<std::string> file_names{std::string()};
  if (wants_trace()) {
    const trn_hal_ops_t &ops = kernel.device->driver->ops;
    lines.reserve(trace.size());
    files.reserve(trace.size());
    for (const auto &r : trace) {
      const uint32_t line = ops.kernel_source_line(kernel.hal, r.engine, r.index);
      lines.push_back(line);
      const char *file = line ? ops.kernel_source_file(kernel.hal, r.engine, r.index) : nullptr;
      uint32_t id = 0;
      if (file && *file) {
        // A kernel names few files: a linear search is enough.
        id = static_cast<uint32_t>(std::find(file_names.begin(), file_names.end(), file) -
                                   file_names.begin());
        if (id == file_names.size()) file_names.emplace_back(file);
      }
      files.push_back(id);
    }
  }
  std::lock_guard lock(mu_);
  ++launches_;
  kernel_ = kernel.name();
  // The queues a kernel of this device can use: what its utilisation is a share of.
  dma_queues_ =
      std::clamp<uint32_t>(kernel.device->properties.dma_engines_per_core, 1, TRN_HAL_DMA_QUEUES);
  result_ = result;
  result_.trace = nullptr;
  trace_ = std::move(trace);
  trace_lines_ = std::move(lines);
  trace_files_ = std::move(files);
  trace_file_names_ = std::move(file_names);
}

namespace {

double percent(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

std::string json_escape(const std::string &text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += fmt::format("\\{}", c);
    else if (static_cast<unsigned char>(c) < 0x20)
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    else
      out += c;
  }
  return out;
}

}  // namespace

void Profile::summary(trn_profile_summary_t *out) const {
  std::lock_guard lock(mu_);
  summary_locked(out);
}

void Profile::summary_locked(trn_profile_summary_t *out) const {
  const auto &r = result_;
  out->launches = launches_;
  out->total_ns = r.total_ps / 1000;
  for (uint32_t e = 0; e < TRN_ENGINE_COUNT; ++e) {
    out->engine_instructions[e] = r.engine_instructions[e];
    out->engine_busy_ns[e] = r.engine_busy_ps[e] / 1000;
    out->engine_wait_ns[e] = r.engine_wait_ps[e] / 1000;
    out->engine_active_percent[e] = percent(r.engine_busy_ps[e], r.total_ps);
  }
  out->tensor_flops = r.flops;
  out->peak_flops = r.peak_flops;
  const double seconds = static_cast<double>(r.total_ps) * 1e-12;
  out->mfu_percent = seconds > 0 && r.peak_flops > 0
                         ? 100.0 * static_cast<double>(r.flops) / (seconds * r.peak_flops)
                         : 0.0;
  out->dma_transfers = r.dma_transfers;
  out->dma_bytes = r.dma_bytes;
  uint64_t dma_busy = 0;
  for (uint64_t q : r.dma_busy_ps) dma_busy += q;
  out->dma_utilization_percent = percent(dma_busy, r.total_ps * dma_queues_);
  out->host_ns = r.host_ns;
}

trn_result_t Profile::write_trace(const char *path) const {
  std::lock_guard lock(mu_);
  if (!wants_trace() || launches_ == 0)
    return fail(TRN_ERROR_INVALID_ARGUMENT, launches_ == 0
                                                ? "the profile has recorded no launch yet"
                                                : "the profile records no trace: create it with "
                                                  "TRN_PROFILE_FLAG_TRACE");
  std::FILE *f = std::fopen(path, "w");
  if (!f)
    return fail(TRN_ERROR_FILE,
                fmt::format("cannot write the trace to {}: {}", path, std::strerror(errno)));
  // Chrome trace-event JSON: one process (the core), one thread (track) per engine and per DMA
  // queue, complete ("X") events in microseconds of simulated time.
  static const char *const kEngines[] = {"Tensor (PE)", "Vector (DVE)", "Scalar (ACT)",
                                         "GpSimd (POOL)", "Sync (SP)"};
  std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  out += fmt::format(
      "{{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"process_name\",\"args\":{{\"name\":"
      "\"NeuronCore: {}\"}}}}",
      json_escape(kernel_));
  for (uint32_t t = 0; t < TRN_ENGINE_COUNT + TRN_HAL_DMA_QUEUES; ++t) {
    const std::string name =
        t < TRN_ENGINE_COUNT ? kEngines[t] : fmt::format("DMA queue {}", t - TRN_ENGINE_COUNT);
    out += fmt::format(
        ",\n{{\"ph\":\"M\",\"pid\":1,\"tid\":{},\"name\":\"thread_name\",\"args\":{{\"name\":"
        "\"{}\"}}}},\n{{\"ph\":\"M\",\"pid\":1,\"tid\":{},\"name\":\"thread_sort_index\","
        "\"args\":{{\"sort_index\":{}}}}}",
        t + 1, name, t + 1, t);
  }
  for (size_t i = 0; i < trace_.size(); ++i) {
    const trn_hal_trace_record_t &r = trace_[i];
    const char *op = isa::opcode_name(static_cast<isa::Opcode>(r.opcode));
    // The instruction's source line, when the kernel has one ("line" is then in args), and
    // with its file "source": "file:line" (isa::source_location_text's form).
    const uint32_t line = i < trace_lines_.size() ? trace_lines_[i] : 0;
    const uint32_t file = i < trace_files_.size() ? trace_files_[i] : 0;
    std::string where;
    if (line) {
      where = fmt::format("\"line\":{},", line);
      if (file != 0 && file < trace_file_names_.size())
        where += fmt::format("\"source\":\"{}:{}\",", json_escape(trace_file_names_[file]), line);
    }
    out += fmt::format(
        ",\n{{\"ph\":\"X\",\"pid\":1,\"tid\":{},\"name\":\"{}\",\"cat\":\"{}\",\"ts\":{:.6f},"
        "\"dur\":{:.6f},\"args\":{{\"engine\":\"{}\",\"index\":{},{}\"wait_ns\":{:.3f},"
        "\"bytes\":{},\"flops\":{}}}}}",
        r.track + 1, op, r.track < TRN_ENGINE_COUNT ? "instruction" : "dma",
        static_cast<double>(r.start_ps) * 1e-6, static_cast<double>(r.end_ps - r.start_ps) * 1e-6,
        isa::engine_name(static_cast<isa::Engine>(r.engine)), r.index, where,
        static_cast<double>(r.wait_ps) * 1e-3, r.bytes, r.flops);
  }
  trn_profile_summary_t s = TRN_PROFILE_SUMMARY_INIT;
  summary_locked(&s);
  out += fmt::format(
      "\n],\n\"otherData\":{{\"kernel\":\"{}\",\"total_ns\":{},\"mfu_percent\":{:.3f},"
      "\"dma_utilization_percent\":{:.3f},\"tensor_active_percent\":{:.3f},"
      "\"vector_active_percent\":{:.3f},\"scalar_active_percent\":{:.3f},"
      "\"gpsimd_active_percent\":{:.3f},\"sync_active_percent\":{:.3f},\"records\":{},"
      "\"records_dropped\":{}}}}}\n",
      json_escape(kernel_), s.total_ns, s.mfu_percent, s.dma_utilization_percent,
      s.engine_active_percent[0], s.engine_active_percent[1], s.engine_active_percent[2],
      s.engine_active_percent[3], s.engine_active_percent[4], trace_.size(),
      result_.trace_count > trace_.size() ? result_.trace_count - trace_.size() : 0);
  const bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size();
  if (std::fclose(f) != 0 || !ok)
    return fail(TRN_ERROR_FILE,
                fmt::format("writing the trace to {} failed: {}", path, std::strerror(errno)));
  return TRN_SUCCESS;
}

}  // namespace trn::rt
