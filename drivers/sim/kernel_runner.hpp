// Kernels on the simulated device: load (parse and validate a binary for the device's
// generation) and run (bind arguments to the device's HBM, execute on the core's executor).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "drivers/hal.h"
#include "exec/executor.hpp"
#include "isa/program.hpp"

struct trn_hal_kernel {
  trn::isa::Program program;
  trn_generation_t generation;
};

namespace trn::sim {

class DeviceState;

// One executor per physical core, created on first use; a core runs one kernel at a time.
class CoreExecutors {
 public:
  explicit CoreExecutors(trn_generation_t generation, bool race_check = true)
      : generation_(generation), race_check_(race_check) {}
  // Runs `kernel` on `core` with args already mapped to host memory.
  trn_result_t run(uint32_t core, const trn_hal_kernel &kernel,
                   std::span<const exec::HbmBinding> args, trn_hal_run_result_t *result,
                   std::string *why);

 private:
  struct Slot {
    std::mutex mu;
    std::unique_ptr<exec::Executor> executor;
  };
  trn_generation_t generation_;
  bool race_check_;  // TRN_SIM_RACE_CHECK
  std::mutex mu_;    // guards slots_
  std::vector<std::unique_ptr<Slot>> slots_;
};

// Parses and validates a kernel binary for `generation`.
trn_result_t load_kernel(const void *image, size_t size, trn_generation_t generation,
                         std::unique_ptr<trn_hal_kernel> *out, std::string *why);

}  // namespace trn::sim
