#include "kbuild/build_target.hpp"

#include <algorithm>

namespace trn::kbuild {

// The ISA numbers generations as the C API does, so a device's generation names its core.
static_assert(static_cast<uint32_t>(isa::Generation::kTrn1) == TRN_GENERATION_TRN1 &&
              static_cast<uint32_t>(isa::Generation::kTrn2) == TRN_GENERATION_TRN2 &&
              static_cast<uint32_t>(isa::Generation::kTrn3) == TRN_GENERATION_TRN3);

namespace {

template <typename T>
void take(T &field, T reported) {
  if (reported) field = reported;
}

}  // namespace

BuildTarget build_target(const trn_device_properties_t &d) {
  BuildTarget t;
  t.core = isa::core_spec_or_default(static_cast<uint32_t>(d.generation));
  isa::CoreSpec &c = t.core;
  take(c.partitions, d.sbuf_partitions);
  take(c.sbuf_bytes_per_partition, d.sbuf_bytes_per_partition);
  take(c.sbuf_usable_bytes_per_partition, d.sbuf_usable_bytes_per_partition);
  take(c.psum_bytes_per_partition, d.psum_bytes_per_partition);
  take(c.psum_banks, d.psum_banks);
  take(c.semaphores, d.semaphores_per_core);
  // The builder's agents have room for isa::kMaxDmaQueues queues.
  take(c.dma_queues, std::min(d.dma_engines_per_core, isa::kMaxDmaQueues));
  take(c.tensor_hz, d.tensor_clock_hz);
  take(c.vector_hz, d.vector_clock_hz);
  take(c.scalar_hz, d.scalar_clock_hz);
  take(c.gpsimd_hz, d.gpsimd_clock_hz);
  take(c.dma_engine_bytes_per_s, d.dma_engine_bytes_per_s);
  t.sbuf_usable_bytes = c.sbuf_usable_bytes_per_partition;  // all a compiler may fill
  return t;
}

}  // namespace trn::kbuild
