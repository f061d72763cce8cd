// What a program is validated against: the limits of one NeuronCore generation that the ISA
// rules depend on (filled by the device from its generation table).
#pragma once

#include <cstdint>

namespace trn::isa {

struct Target {
  uint32_t core_version = 3;  // NeuronCore-v2 (trn1), v3 (trn2), v4 (trn3)
  uint32_t partitions = 128;
  uint32_t sbuf_bytes_per_partition = 224 * 1024;
  uint32_t psum_bytes_per_partition = 16 * 1024;
  uint32_t psum_banks = 8;
  uint32_t semaphores = 256;
  uint32_t dma_queues = 16;
};

}  // namespace trn::isa
