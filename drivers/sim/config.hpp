// The simulated devices' configuration, read from the environment:
//   TRN_SIM_ROOT        state directory (default /dev/shm/trn-sim-<uid>)
//   TRN_SIM_DEVICES     number of devices, 0..64 (default 1)
//   TRN_SIM_GENERATION  trn1 | trn2 | trn3 (default trn2)
//   TRN_SIM_HBM_BYTES   device memory per device, e.g. 8GiB (default: the generation's)
//   TRN_SPIN_NS         how long waits (semaphores, idle queues) spin before sleeping
//   TRN_SIM_RACE_CHECK  0 turns off the kernel race check (default 1, docs/ISA.md)
//   TRN_SIM_JITTER_NS   up to this long, a random pause or yield before each queue command runs
//                       and after each submission (default 0: none), to shake out code that
//                       assumes one interleaving
// A value the user set is "explicit": it must match devices other processes already use.
#pragma once

#include <cstdint>
#include <string>

#include "sim/generation.hpp"
#include "sim/state_layout.hpp"

namespace trn::sim {

constexpr uint32_t kMaxDevices = 64;
constexpr uint64_t kHbmBankGranule = kChunkBytes;  // bank sizes are whole chunks
// A spin check costs ~0.1 us and waking a sleeping thread ~30 us: spinning 20 us catches a
// signal from a running thread without a wake-up. 10 s is a budget, not a way to never sleep.
constexpr uint64_t kDefaultSpinNs = 20'000;
constexpr uint64_t kMaxSpinNs = 10'000'000'000;
constexpr uint64_t kMaxJitterNs = 100'000'000;

struct SimConfig {
  std::string root;
  uint32_t device_count = 1;
  bool device_count_explicit = false;
  trn_generation_t generation = TRN_GENERATION_TRN2;
  bool generation_explicit = false;
  uint64_t hbm_bytes = 0;  // 0 = the generation's
  bool hbm_explicit = false;
  uint64_t spin_ns = kDefaultSpinNs;
  bool race_check = true;  // kernels run with the race check (exec::RunOptions::race_check)
  uint64_t jitter_ns = 0;  // see TRN_SIM_JITTER_NS above

  // Device memory per device after defaults and rounding to whole bank granules.
  uint64_t effective_hbm_bytes() const;
};

// Reads the environment. On a malformed value returns TRN_ERROR_INVALID_CONFIG with `why`
// naming the variable, the bad text and what is accepted.
trn_result_t load_config(SimConfig *config, std::string *why);

}  // namespace trn::sim
