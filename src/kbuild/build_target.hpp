// The core a kernel is built for: the ISA limits it is validated against, the SBUF it may fill,
// and the clocks and DMA rate the builder's schedule estimate (the simulator's cost model,
// isa/cost_model.hpp) turns cycles and bytes into time with. Built for a device, it is what the
// runtime reports for that device (build_target), never the builder's own figures.
#pragma once

#include <cstdint>

#include "isa/opcodes.hpp"
#include "isa/target.hpp"
#include "trn/trn.h"

namespace trn::kbuild {

struct BuildTarget {
  // Limits, clocks and DMA rate; by default the default generation's core (isa/target.hpp).
  isa::CoreSpec core = isa::core_spec_or_default(static_cast<uint32_t>(isa::kDefaultGeneration));
  uint32_t sbuf_usable_bytes = 0;  // 0: all of core.sbuf_bytes_per_partition

  uint64_t clock_hz(isa::Engine e) const { return core.clock_hz(e); }
  // The SBUF a kernel may fill per partition: the usable bytes, never more than there are.
  uint32_t sbuf_bytes() const {
    return sbuf_usable_bytes && sbuf_usable_bytes < core.sbuf_bytes_per_partition
               ? sbuf_usable_bytes
               : core.sbuf_bytes_per_partition;
  }
};

// The target of one core of a device, from the properties the runtime reports
// (trn_device_get_properties). The NeuronCore version is the generation's (isa/target.hpp; an
// unknown generation is treated as isa::kDefaultGeneration, as the simulated device treats it);
// every other figure is the device's, or the generation's where the device reports 0.
BuildTarget build_target(const trn_device_properties_t &device);

}  // namespace trn::kbuild
