// Kernels and profiles of the runtime: a kernel is a binary the driver has loaded for a device
// (plus the parsed argument table the API reports); a profile receives what a launch did.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "drivers/hal.h"
#include "isa/program.hpp"
#include "trn/trn.h"

namespace trn::rt {

struct Device;

struct Kernel {
  Device *device = nullptr;
  trn_hal_kernel_t *hal = nullptr;
  isa::Program program;  // for the argument table and fault reports (the driver has its own)
  ~Kernel();
};

// Parses, validates (by the driver) and loads a kernel image for `device`.
trn_result_t load_kernel(Device &device, const void *image, size_t size,
                         std::shared_ptr<Kernel> *out);

class Profile {
 public:
  explicit Profile(uint32_t flags) : flags_(flags) {}
  bool wants_trace() const { return flags_ & TRN_PROFILE_FLAG_TRACE; }

  // Records a completed run of `program` (the result's trace points into `trace`).
  void record(const isa::Program &program, const trn_hal_run_result_t &result,
              std::vector<trn_hal_trace_record_t> trace, uint64_t host_ns);
  void summary(trn_profile_summary_t *out) const;
  trn_result_t write_trace(const char *path) const;

 private:
  void summary_locked(trn_profile_summary_t *out) const;

  const uint32_t flags_;
  mutable std::mutex mu_;
  uint64_t launches_ = 0;
  std::string kernel_;
  trn_hal_run_result_t result_{};
  std::vector<trn_hal_trace_record_t> trace_;
  std::array<std::vector<uint32_t>, isa::kEngineCount> source_lines_;  // of the traced kernel
  uint64_t host_ns_ = 0;
};

}  // namespace trn::rt
