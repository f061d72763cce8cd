#include "sim/core_spec.hpp"

namespace trn::sim {

exec::CoreSpec core_spec(const GenerationSpec &g) {
  exec::CoreSpec s;
  // NeuronCore-v2 is trn1's core, v3 trn2's, v4 trn3's [docs/hardware.md §1.1].
  s.core_version = g.generation == TRN_GENERATION_TRN1   ? 2
                   : g.generation == TRN_GENERATION_TRN2 ? 3
                                                         : 4;
  s.partitions = g.sbuf_partitions;
  s.sbuf_bytes_per_partition = g.sbuf_bytes_per_partition;
  s.psum_bytes_per_partition = g.psum_bytes_per_partition;
  s.psum_banks = g.psum_banks;
  s.semaphores = g.semaphores_per_core;
  s.dma_queues = g.dma_engines_per_core;
  s.tensor_hz = g.tensor_clock_hz;
  s.vector_hz = g.vector_clock_hz;
  s.scalar_hz = g.scalar_clock_hz;
  s.gpsimd_hz = g.gpsimd_clock_hz;
  s.dma_engine_bytes_per_s = g.dma_engine_bytes_per_s;
  return s;
}

}  // namespace trn::sim
