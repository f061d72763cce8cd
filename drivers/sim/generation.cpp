#include "sim/generation.hpp"

namespace trn::sim {

namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint32_t kKiB = 1u << 10;

// docs/hardware.md §1.1 (cores, HBM), §1.2 (clocks), §1.3 (SBUF/PSUM and the usable bytes per
// partition the compiler assumes), §1.5 (16 DMA engines and 256 semaphores per core), §1.7 (LNC),
// the NeuronLink row of §1.1 (per-chip bandwidth, 4 links), §1.5 (reductions by DMA: half the
// DMA rate through the collective engines before trn3, the full rate on trn3).
// clang-format off
constexpr GenerationSpec kSpecs[] = {
    // generation, name, chip, cores, banks, HBM, HBM B/s, DMA engines, semaphores,
    // partitions, SBUF/partition, usable, PSUM/partition, PSUM banks,
    // Tensor, Vector, Scalar, GpSimd clocks, max LNC, DMA engine B/s, NeuronLink B/s and links,
    // reductions' share of the DMA rate (percent)
    {TRN_GENERATION_TRN1, "trn1", "Trainium1", 2, 2, 32 * kGiB, 820 * kGiB, 16, 256,
     128, 192 * kKiB, 180224, 16 * kKiB, 8,
     2'800'000'000, 1'120'000'000, 1'400'000'000, 1'400'000'000, 1, 17'000'000'000,
     384'000'000'000, 4, 50},
    {TRN_GENERATION_TRN2, "trn2", "Trainium2", 8, 4, 96 * kGiB, 2'900'000'000'000, 16, 256,
     128, 224 * kKiB, 212984, 16 * kKiB, 8,
     2'400'000'000, 960'000'000, 1'200'000'000, 1'200'000'000, 2, 23'000'000'000,
     1'280'000'000'000, 4, 50},
    {TRN_GENERATION_TRN3, "trn3", "Trainium3", 8, 4, 144 * kGiB, 4'900'000'000'000, 16, 256,
     128, 256 * kKiB, 245752, 16 * kKiB, 8,
     2'400'000'000, 1'200'000'000, 1'200'000'000, 1'200'000'000, 2, 33'000'000'000,
     2'560'000'000'000, 4, 100},
};
// clang-format on

}  // namespace

const GenerationSpec &generation_spec(trn_generation_t generation) {
  for (const auto &spec : kSpecs)
    if (spec.generation == generation) return spec;
  return kSpecs[1];
}

std::optional<trn_generation_t> parse_generation(std::string_view name) {
  for (const auto &spec : kSpecs)
    if (name == spec.name) return spec.generation;
  return std::nullopt;
}

bool is_known_generation(uint32_t value) {
  for (const auto &spec : kSpecs)
    if (static_cast<uint32_t>(spec.generation) == value) return true;
  return false;
}

}  // namespace trn::sim
