// Kernels and profiles of the runtime: a kernel is a binary the driver has loaded for a device
// (with the argument table the driver reports); a profile receives what a launch did.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "drivers/hal.h"
#include "trn/trn.h"

namespace trn::rt {

struct Device;

// What the driver parsed, as the API reports it: the runtime never parses a binary itself.
struct Kernel {
  Device *device = nullptr;
  trn_hal_kernel_t *hal = nullptr;
  trn_kernel_properties_t properties = TRN_KERNEL_PROPERTIES_INIT;
  std::vector<trn_kernel_arg_t> args;
  uint64_t instruction_count = 0;  // all engines
  // The binary as loaded: a captured program (trn_queue_end_capture) carries its kernels.
  std::vector<std::byte> image;
  std::string name() const { return properties.name; }
  ~Kernel();
};

// Loads (the driver parses and validates) a kernel image for `device`.
trn_result_t load_kernel(Device &device, const void *image, size_t size,
                         std::shared_ptr<Kernel> *out);

class Profile {
 public:
  explicit Profile(uint32_t flags) : flags_(flags) {}
  bool wants_trace() const { return flags_ & TRN_PROFILE_FLAG_TRACE; }

  // Records a run of `kernel` (the result's trace points into `trace`).
  void record(const Kernel &kernel, const trn_hal_run_result_t &result,
              std::vector<trn_hal_trace_record_t> trace);
  void summary(trn_profile_summary_t *out) const;
  trn_result_t write_trace(const char *path) const;

 private:
  void summary_locked(trn_profile_summary_t *out) const;

  const uint32_t flags_;
  mutable std::mutex mu_;
  uint64_t launches_ = 0;
  std::string kernel_;
  trn_hal_run_result_t result_{};
  uint32_t dma_queues_ = 1;  // of the recorded kernel's core
  std::vector<trn_hal_trace_record_t> trace_;
  std::vector<uint32_t> trace_lines_;  // each record's source line (0: unknown)
  // Each record's source file, an index into trace_file_names_ (whose entry 0 is "": unknown).
  std::vector<uint32_t> trace_files_;
  std::vector<std::string> trace_file_names_;
};

}  // namespace trn::rt
