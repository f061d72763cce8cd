// What each Trainium generation is made of, as the simulated device models it. Every number is
// from docs/hardware.md (its section, and its source key in brackets) or derived from those.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "trn/trn.h"

namespace trn::sim {

struct GenerationSpec {
  trn_generation_t generation;
  const char *name;       // "trn2"
  const char *chip_name;  // "Trainium2"
  uint32_t physical_cores;
  uint32_t hbm_banks;
  uint64_t hbm_bytes;
  uint64_t hbm_bandwidth_bytes_per_s;
  uint32_t dma_engines_per_core;
  uint32_t semaphores_per_core;
  uint32_t sbuf_partitions;
  uint32_t sbuf_bytes_per_partition;
  uint32_t sbuf_usable_bytes_per_partition;
  uint32_t psum_bytes_per_partition;
  uint32_t psum_banks;
  uint64_t tensor_clock_hz;
  uint64_t vector_clock_hz;
  uint64_t scalar_clock_hz;
  uint64_t gpsimd_clock_hz;
  uint32_t max_lnc;                 // largest logical-core grouping the generation supports
  uint64_t dma_engine_bytes_per_s;  // achievable per-engine rate, §1.5 (17/23/33 B/ns)
  uint64_t neuronlink_bytes_per_s;  // the chip's NeuronLink bandwidth over all its links, §1.1
  uint32_t neuronlink_links;        // links per chip (one per torus neighbour)
  // What reductions by DMA (B = A op B as the data moves) get of the DMA rate: half through the
  // collective engines on trn1/trn2, all of it in trn3's DMA engines (§1.5 [A3]).
  uint32_t dma_reduce_rate_percent;
};

const GenerationSpec &generation_spec(trn_generation_t generation);
std::optional<trn_generation_t> parse_generation(std::string_view name);
bool is_known_generation(uint32_t value);

// Dense flops per TensorE cycle: a 128x128 stationary times a 128x512 moving tile (2*128*128*512
// flops) takes 512 cycles in bf16 and four times that in fp32 [§1.2, §3.1].
constexpr uint64_t kBf16FlopsPerTensorCycle = 2ull * 128 * 128;
constexpr uint64_t kFp32FlopsPerTensorCycle = kBf16FlopsPerTensorCycle / 4;

}  // namespace trn::sim
