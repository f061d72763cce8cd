// The core a kernel is built for: the ISA limits it is validated against, the SBUF it may fill,
// and the rates the builder's schedule estimate uses to pick engines and DMA queues.
#pragma once

#include <cstdint>

#include "isa/opcodes.hpp"
#include "isa/target.hpp"
#include "trn/trn.h"

namespace trn::kbuild {

struct BuildTarget {
  isa::Target isa;
  uint32_t sbuf_usable_bytes = 0;  // 0: all of isa.sbuf_bytes_per_partition
  uint64_t tensor_hz = 2'800'000'000, vector_hz = 960'000'000, scalar_hz = 1'400'000'000,
           gpsimd_hz = 1'400'000'000;
  uint64_t dma_bytes_per_s = 23'000'000'000;  // one DMA engine

  uint64_t clock_hz(isa::Engine e) const;
  // The SBUF a kernel may fill per partition: the usable bytes, never more than there are.
  uint32_t sbuf_bytes() const {
    return sbuf_usable_bytes && sbuf_usable_bytes < isa.sbuf_bytes_per_partition
               ? sbuf_usable_bytes
               : isa.sbuf_bytes_per_partition;
  }
};

// The target of one core of a device, from the properties the runtime reports.
BuildTarget build_target(const trn_device_properties_t &device);

}  // namespace trn::kbuild
