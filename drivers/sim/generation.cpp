#include "sim/generation.hpp"

#include <iterator>

namespace trn::sim {

namespace {

constexpr uint64_t kGiB = 1ull << 30;

// The chip's figures: docs/hardware.md §1.1 (cores, HBM), §1.7 (LNC), the NeuronLink row of §1.1
// (per-chip bandwidth, 4 links), §1.5 (reductions by DMA: half the DMA rate through the
// collective engines before trn3, the full rate on trn3). Each core's figures are the ISA's
// (isa/target.hpp).
// clang-format off
constexpr GenerationSpec kSpecs[] = {
    // generation, chip, cores, banks, HBM, HBM B/s, max LNC, NeuronLink B/s and links,
    // reductions' share of the DMA rate (percent)
    {TRN_GENERATION_TRN1, "Trainium1", 2, 2, 32 * kGiB, 820 * kGiB, 1, 384'000'000'000, 4, 50},
    {TRN_GENERATION_TRN2, "Trainium2", 8, 4, 96 * kGiB, 2'900'000'000'000, 2,
     1'280'000'000'000, 4, 50},
    {TRN_GENERATION_TRN3, "Trainium3", 8, 4, 144 * kGiB, 4'900'000'000'000, 2,
     2'560'000'000'000, 4, 100},
};
// clang-format on

// The chip table and the core table list the same generations, numbered as trn.h numbers them.
static_assert(std::size(kSpecs) == 3);
static_assert(static_cast<uint32_t>(isa::Generation::kTrn1) == TRN_GENERATION_TRN1 &&
              static_cast<uint32_t>(isa::Generation::kTrn2) == TRN_GENERATION_TRN2 &&
              static_cast<uint32_t>(isa::Generation::kTrn3) == TRN_GENERATION_TRN3);

}  // namespace

const GenerationSpec &generation_spec(trn_generation_t generation) {
  const uint32_t known = isa::is_known_generation(generation)
                             ? static_cast<uint32_t>(generation)
                             : static_cast<uint32_t>(isa::kDefaultGeneration);
  const auto wanted = static_cast<trn_generation_t>(known);
  for (const auto &spec : kSpecs)
    if (spec.generation == wanted) return spec;
  return kSpecs[0];  // unreachable: both tables list every known generation
}

std::optional<trn_generation_t> parse_generation(std::string_view name) {
  if (auto g = isa::parse_generation(name)) return static_cast<trn_generation_t>(*g);
  return std::nullopt;
}

bool is_known_generation(uint32_t value) {
  return isa::is_known_generation(value);
}

}  // namespace trn::sim
