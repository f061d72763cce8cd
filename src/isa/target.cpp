#include "isa/target.hpp"

#include "isa/instruction.hpp"

namespace trn::isa {

namespace {

constexpr uint32_t kKiB = 1u << 10;

struct Entry {
  Generation generation;
  const char *name;
  CoreSpec core;
};

constexpr CoreSpec make(uint32_t version, uint32_t sbuf_kib, uint32_t usable, uint64_t tensor,
                        uint64_t vector, uint64_t scalar, uint64_t gpsimd, uint64_t dma) {
  CoreSpec s;
  s.core_version = version;
  s.partitions = kPartitions;  // 128 on every generation [§1.3]
  s.sbuf_bytes_per_partition = sbuf_kib * kKiB;
  s.psum_bytes_per_partition = 16 * kKiB;  // 8 banks of 2 KiB on every generation [§1.3]
  s.psum_banks = 8;
  s.semaphores = 256;            // [§1.5, §1.6]
  s.dma_queues = kMaxDmaQueues;  // 16 DMA engines per core on v2-v4 [§1.5]
  s.sbuf_usable_bytes_per_partition = usable;
  s.tensor_hz = tensor;
  s.vector_hz = vector;
  s.scalar_hz = scalar;
  s.gpsimd_hz = gpsimd;
  s.dma_engine_bytes_per_s = dma;
  return s;
}

// §1.1 (NeuronCore version), §1.2 (clocks), §1.3 (SBUF and the usable bytes per partition the
// compiler assumes), §1.5 (per-engine DMA rate). Constant-initialised (constexpr), so that objects
// initialised before main() may read it.
// clang-format off
constexpr Entry kEntries[] = {
    // generation, name, {NC version, SBUF KiB/partition, usable bytes,
    //                    Tensor, Vector, Scalar, GpSimd clocks, DMA engine B/s}
    {Generation::kTrn1, "trn1", make(2, 192, 180224,
                                     2'800'000'000, 1'120'000'000, 1'400'000'000, 1'400'000'000,
                                     17'000'000'000)},
    {Generation::kTrn2, "trn2", make(3, 224, 212984,
                                     2'400'000'000, 960'000'000, 1'200'000'000, 1'200'000'000,
                                     23'000'000'000)},
    {Generation::kTrn3, "trn3", make(4, 256, 245752,
                                     2'400'000'000, 1'200'000'000, 1'200'000'000, 1'200'000'000,
                                     33'000'000'000)},
};
// clang-format on

// Every per-queue array (isa::kMaxDmaQueues long) holds every core's queues.
static_assert([] {
  for (const Entry &e : kEntries)
    if (e.core.dma_queues > kMaxDmaQueues) return false;
  return true;
}());

const Entry *entry(uint32_t generation) {
  for (const Entry &e : kEntries)
    if (static_cast<uint32_t>(e.generation) == generation) return &e;
  return nullptr;
}

}  // namespace

uint64_t CoreSpec::clock_hz(Engine e) const {
  switch (e) {
    case Engine::kTensor: return tensor_hz;
    case Engine::kVector: return vector_hz;
    case Engine::kGpSimd: return gpsimd_hz;
    case Engine::kScalar:
    case Engine::kSync: break;
  }
  return scalar_hz;
}

const CoreSpec *core_spec(Generation g) {
  const Entry *e = entry(static_cast<uint32_t>(g));
  return e ? &e->core : nullptr;
}

const CoreSpec &core_spec_or_default(uint32_t generation) {
  const Entry *e = entry(generation);
  return e ? e->core : *core_spec(kDefaultGeneration);
}

const char *generation_name(Generation g) {
  const Entry *e = entry(static_cast<uint32_t>(g));
  return e ? e->name : nullptr;
}

std::optional<Generation> parse_generation(std::string_view name) {
  for (const Entry &e : kEntries)
    if (name == e.name) return e.generation;
  return std::nullopt;
}

bool is_known_generation(uint32_t value) {
  return entry(value) != nullptr;
}

}  // namespace trn::isa
