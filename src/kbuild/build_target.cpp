#include "kbuild/build_target.hpp"

namespace trn::kbuild {

uint64_t BuildTarget::clock_hz(isa::Engine e) const {
  switch (e) {
    case isa::Engine::kTensor: return tensor_hz;
    case isa::Engine::kVector: return vector_hz;
    case isa::Engine::kGpSimd: return gpsimd_hz;
    case isa::Engine::kScalar:
    case isa::Engine::kSync: break;
  }
  return scalar_hz;
}

BuildTarget build_target(const trn_device_properties_t &d) {
  BuildTarget t;
  // NeuronCore-v2 is trn1's, v3 trn2's, v4 trn3's.
  t.isa.core_version = d.generation == TRN_GENERATION_TRN1   ? 2
                       : d.generation == TRN_GENERATION_TRN3 ? 4
                                                             : 3;
  if (d.sbuf_partitions) t.isa.partitions = d.sbuf_partitions;
  if (d.sbuf_bytes_per_partition) t.isa.sbuf_bytes_per_partition = d.sbuf_bytes_per_partition;
  if (d.psum_bytes_per_partition) t.isa.psum_bytes_per_partition = d.psum_bytes_per_partition;
  if (d.psum_banks) t.isa.psum_banks = d.psum_banks;
  if (d.semaphores_per_core) t.isa.semaphores = d.semaphores_per_core;
  t.sbuf_usable_bytes = d.sbuf_usable_bytes_per_partition;
  if (d.tensor_clock_hz) t.tensor_hz = d.tensor_clock_hz;
  if (d.vector_clock_hz) t.vector_hz = d.vector_clock_hz;
  if (d.scalar_clock_hz) t.scalar_hz = d.scalar_clock_hz;
  if (d.gpsimd_clock_hz) t.gpsimd_hz = d.gpsimd_clock_hz;
  if (d.dma_engine_bytes_per_s) t.dma_bytes_per_s = d.dma_engine_bytes_per_s;
  return t;
}

}  // namespace trn::kbuild
