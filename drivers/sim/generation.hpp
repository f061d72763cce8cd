// What each Trainium generation is made of, as the simulated device models it: the chip (cores,
// HBM, NeuronLink) here, each NeuronCore's figures in isa/target.hpp (the one definition that the
// cost model and the kernel builder use too). Every number is from docs/hardware.md (its section,
// and its source key in brackets) or derived from those.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "isa/target.hpp"
#include "trn/trn.h"

namespace trn::sim {

struct GenerationSpec {
  trn_generation_t generation;
  const char *chip_name;  // "Trainium2"
  uint32_t physical_cores;
  uint32_t hbm_banks;
  uint64_t hbm_bytes;
  uint64_t hbm_bandwidth_bytes_per_s;
  uint32_t max_lnc;                 // largest logical-core grouping the generation supports
  uint64_t neuronlink_bytes_per_s;  // the chip's NeuronLink bandwidth over all its links, §1.1
  uint32_t neuronlink_links;        // links per chip (one per torus neighbour)
  // What reductions by DMA (B = A op B as the data moves) get of the DMA rate: half through the
  // collective engines on trn1/trn2, all of it in trn3's DMA engines (§1.5 [A3]).
  uint32_t dma_reduce_rate_percent;

  // One NeuronCore of the chip.
  const isa::CoreSpec &core() const { return isa::core_spec_or_default(generation); }
  const char *name() const {
    return isa::generation_name(static_cast<isa::Generation>(generation));
  }
};

// The spec of a generation; an unknown one is treated as isa::kDefaultGeneration.
const GenerationSpec &generation_spec(trn_generation_t generation);
std::optional<trn_generation_t> parse_generation(std::string_view name);
bool is_known_generation(uint32_t value);

}  // namespace trn::sim
