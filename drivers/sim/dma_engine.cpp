#include "sim/dma_engine.hpp"

#include <algorithm>
#include <cstring>

#include "isa/dtype.hpp"
#include "isa/target.hpp"
#include "sim/reduce_math.hpp"

namespace trn::sim {

namespace {

// Transfers from this size up are split across host threads, as the engines split them: below
// it waking the helpers costs more than they save.
constexpr uint64_t kParallelBytes = 8ull << 20;

// Runs part(offset, bytes, why) over [0, bytes), on the helpers too for large transfers; the
// first failure is the result.
template <typename Part>
trn_result_t parallel_parts(DmaHelpers &helpers, uint64_t bytes, std::string *why, Part part) {
  if (bytes < kParallelBytes) return part(0, bytes, why);
  return helpers.run(bytes, part, why);
}

bool overlap(const MemorySpan &a, const MemorySpan &b) {
  return a.host < b.host + b.bytes && b.host < a.host + a.bytes;
}

// Copies part [at, at+bytes) of `source` to `out`.
trn_result_t read_part(const MemorySpan &source, uint64_t at, char *out, uint64_t bytes,
                       std::string *why) {
  if (!source.hbm) {
    std::memcpy(out, source.host + at, bytes);
    return TRN_SUCCESS;
  }
  return source.hbm->commits().read(source.host + at, source.offset + at, out, bytes, why);
}

}  // namespace

trn_result_t dma_back(const MemorySpan &span, std::string *why) {
  return span.hbm ? span.hbm->commits().commit(span.offset, span.bytes, why) : TRN_SUCCESS;
}

uint64_t simulated_dma_ns(uint64_t bytes, uint64_t bytes_per_s, uint32_t engines) {
  const uint64_t per_engine =
      bytes_per_s ? bytes_per_s
                  : isa::core_spec_or_default(static_cast<uint32_t>(isa::kDefaultGeneration))
                        .dma_engine_bytes_per_s;
  const double rate = static_cast<double>(per_engine) * std::max(1u, engines) / 1e9;  // per ns
  return kDmaFixedNs + static_cast<uint64_t>(static_cast<double>(bytes) / rate);
}

uint64_t simulated_link_ns(uint64_t bytes, uint64_t engine_bytes_per_s, uint32_t engines,
                           uint64_t link_bytes_per_s, uint32_t hops) {
  const uint64_t engine_ns = simulated_dma_ns(bytes, engine_bytes_per_s, engines);
  if (link_bytes_per_s == 0) return engine_ns;
  const double link_ns = static_cast<double>(bytes) / (static_cast<double>(link_bytes_per_s) / 1e9);
  return std::max(engine_ns, kDmaFixedNs + static_cast<uint64_t>(link_ns)) + hops * kLinkHopNs;
}

trn_result_t dma_copy(DmaHelpers &helpers, const MemorySpan &destination, const MemorySpan &source,
                      std::string *why) {
  const uint64_t bytes = std::min(destination.bytes, source.bytes);
  if (bytes == 0) return TRN_SUCCESS;
  if (trn_result_t r = dma_back(destination, why); r != TRN_SUCCESS) return r;
  if (overlap(destination, source)) {
    // The same memory: back the source too (what was never written is then zeros in the
    // mapping) and move it whole.
    if (trn_result_t r = dma_back(source, why); r != TRN_SUCCESS) return r;
    std::memmove(destination.host, source.host, bytes);
    return TRN_SUCCESS;
  }
  return parallel_parts(helpers, bytes, why,
                        [&](uint64_t at, uint64_t part, std::string *part_why) {
                          return read_part(source, at, destination.host + at, part, part_why);
                        });
}

trn_result_t dma_fill(DmaHelpers &helpers, const MemorySpan &destination, uint8_t value,
                      std::string *why) {
  if (destination.bytes == 0) return TRN_SUCCESS;
  if (trn_result_t r = dma_back(destination, why); r != TRN_SUCCESS) return r;
  return parallel_parts(helpers, destination.bytes, why,
                        [&](uint64_t at, uint64_t part, std::string *) {
                          std::memset(destination.host + at, value, part);
                          return TRN_SUCCESS;
                        });
}

trn_result_t dma_reduce(DmaHelpers &helpers, const MemorySpan &destination, const MemorySpan &a,
                        const MemorySpan &b, trn_dtype_t dtype, trn_reduce_op_t op,
                        std::string *why) {
  if (destination.bytes == 0) return TRN_SUCCESS;
  for (const MemorySpan *span : {&destination, &a, &b})
    if (trn_result_t r = dma_back(*span, why); r != TRN_SUCCESS) return r;
  const uint64_t element = isa::dtype_size(static_cast<isa::DType>(dtype));
  // Parts split at multiples of 4096 bytes: whole elements of every reducible dtype.
  return parallel_parts(
      helpers, destination.bytes, why, [&](uint64_t at, uint64_t part, std::string *) {
        reduce_elements(dtype, op, destination.host + at, a.host + at, b.host + at, part / element);
        return TRN_SUCCESS;
      });
}

trn_result_t dma_write(DmaHelpers &helpers, const MemorySpan &destination, const void *source,
                       std::string *why) {
  const MemorySpan from{static_cast<char *>(const_cast<void *>(source)), nullptr, 0,
                        destination.bytes};
  return dma_copy(helpers, destination, from, why);
}

trn_result_t dma_read(DmaHelpers &helpers, const MemorySpan &source, void *destination,
                      std::string *why) {
  const MemorySpan to{static_cast<char *>(destination), nullptr, 0, source.bytes};
  return dma_copy(helpers, to, source, why);
}

}  // namespace trn::sim
