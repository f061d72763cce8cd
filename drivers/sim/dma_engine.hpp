// Moving bytes between device addresses (HBM of any device, registered host memory) and the
// host, as the device's DMA engines do: the destination is backed before it is written, chunks
// never written read as zeros, overlapping ranges move as memmove does, and large transfers are
// split across the instance's DMA helper threads. No lock is held while bytes move.
#pragma once

#include <cstdint>
#include <string>

#include "sim/dma_helpers.hpp"
#include "sim/ops_support.hpp"

namespace trn::sim {

// DMA costs from docs/hardware.md §1.5: each transfer pays the semaphore-to-start latency
// (~1.3 us) and descriptor generation (~0.6 us); engines then move data in parallel at their
// per-engine rate.
constexpr uint64_t kDmaFixedNs = 1900;

// Simulated time of a transfer of `bytes` on `engines` engines of `bytes_per_s` each.
uint64_t simulated_dma_ns(uint64_t bytes, uint64_t bytes_per_s, uint32_t engines);
// A NeuronLink hop's latency. No figure is published; this is the order of the DMA's own fixed
// cost (the semaphore-to-start latency of §1.5), an assumption docs/collectives.md states.
constexpr uint64_t kLinkHopNs = 1000;
// A DMA from one device's HBM to another's over NeuronLink: the engines' time or one link's
// (the chip's NeuronLink bandwidth over its links), whichever is longer, plus each hop's latency.
uint64_t simulated_link_ns(uint64_t bytes, uint64_t engine_bytes_per_s, uint32_t engines,
                           uint64_t link_bytes_per_s, uint32_t hops);

// Backs a range with storage (HBM; registered host memory is backed already): afterwards a store
// there cannot fault, and what was never written reads as zeros through the mapping.
trn_result_t dma_back(const MemorySpan &span, std::string *why);
trn_result_t dma_copy(DmaHelpers &helpers, const MemorySpan &destination, const MemorySpan &source,
                      std::string *why);
trn_result_t dma_fill(DmaHelpers &helpers, const MemorySpan &destination, uint8_t value,
                      std::string *why);
// destination = a op b over `count` elements (the DMA engines' reduction, reduce_math.hpp); the
// operands are backed first (never-written memory reads as zeros). The destination may be an
// operand exactly; the caller refused other overlaps.
trn_result_t dma_reduce(DmaHelpers &helpers, const MemorySpan &destination, const MemorySpan &a,
                        const MemorySpan &b, trn_dtype_t dtype, trn_reduce_op_t op,
                        std::string *why);
// Host <-> device copies (mem_write, mem_read, timestamps).
trn_result_t dma_write(DmaHelpers &helpers, const MemorySpan &destination, const void *source,
                       std::string *why);
trn_result_t dma_read(DmaHelpers &helpers, const MemorySpan &source, void *destination,
                      std::string *why);

}  // namespace trn::sim
