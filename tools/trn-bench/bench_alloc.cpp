// trn-bench alloc: the cost of trn_mem_alloc + trn_mem_free against glibc malloc + free for the
// same sizes, and the fragmentation of a training-like allocation trace.
#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "bench.hpp"
#include "trn/trn.h"

namespace trn::bench {

namespace {

// Log-uniform sizes between 512 B and `max_bytes`: many small tensors, fewer large ones.
std::vector<uint64_t> size_mix(size_t count, uint64_t max_bytes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> exponent(9.0, std::log2(static_cast<double>(max_bytes)));
  std::vector<uint64_t> sizes(count);
  for (auto &size : sizes) size = static_cast<uint64_t>(std::exp2(exponent(rng)));
  return sizes;
}

struct Device {
  trn_device_t device = nullptr;
  trn_pool_t pool = nullptr;
};

Device open_pool() {
  Device d;
  d.device = open_device().device;
  trn_pool_desc_t desc = TRN_POOL_DESC_INIT;
  check(trn_pool_create(d.device, &desc, &d.pool), "trn_pool_create");
  return d;
}

void bench_pairs(const Device &d, int runs, size_t count, uint64_t max_bytes, const char *label) {
  const auto sizes = size_mix(count, max_bytes, 42);
  const double trn = median_ns_per_op(runs, count, [&] {
    for (uint64_t size : sizes) {
      trn_mem_t mem;
      check(trn_mem_alloc(d.pool, size, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem), "trn_mem_alloc");
      check(trn_mem_free(mem), "trn_mem_free");
    }
  });
  const double glibc = median_ns_per_op(runs, count, [&] {
    for (uint64_t size : sizes) {
      void *volatile p = std::malloc(size);
      std::free(p);
    }
  });
  print({"alloc", std::string("alloc+free pairs, ") + label, "ns/pair", trn, glibc,
         "glibc malloc+free", false});
}

void bench_live_set(const Device &d, int runs, size_t count, size_t live, uint64_t max_bytes,
                    const char *label) {
  const auto sizes = size_mix(count, max_bytes, 7);
  std::mt19937_64 rng(3);
  std::vector<size_t> victims(count);
  for (auto &v : victims) v = rng() % live;
  std::vector<trn_mem_t> mems(live, nullptr);
  const double trn = median_ns_per_op(runs, count, [&] {
    for (size_t i = 0; i < count; ++i) {
      trn_mem_t &slot = mems[victims[i]];
      check(trn_mem_free(slot), "trn_mem_free");
      check(trn_mem_alloc(d.pool, sizes[i], 0, TRN_MEM_CATEGORY_TENSORS, 0, &slot),
            "trn_mem_alloc");
    }
  });
  for (auto &m : mems) trn_mem_free(m);
  std::vector<void *> blocks(live, nullptr);
  const double glibc = median_ns_per_op(runs, count, [&] {
    for (size_t i = 0; i < count; ++i) {
      void *&slot = blocks[victims[i]];
      std::free(slot);
      slot = std::malloc(sizes[i]);
    }
  });
  for (void *b : blocks) std::free(b);
  print({"alloc", std::string("free+alloc with ") + std::to_string(live) + " live, " + label,
         "ns/pair", trn, glibc, "glibc malloc+free", false});
}

// A transformer training step, repeated with a changing number of tokens per batch: weights,
// gradients and optimizer state live throughout; each layer's activations live from the forward
// to the backward pass; temporaries come and go. Sizes in bf16/fp32 bytes.
void bench_training_trace(const Device &d, int steps) {
  constexpr uint64_t kHidden = 2048, kLayers = 16;
  const uint64_t weight_sizes[] = {
      3 * kHidden * kHidden * 2, kHidden * kHidden * 2, 4 * kHidden * kHidden * 2,
      4 * kHidden * kHidden * 2, kHidden * 2,           kHidden * 2};
  std::vector<trn_mem_t> persistent;
  auto alloc = [&](uint64_t size, trn_mem_category_t category) {
    trn_mem_t mem;
    check(trn_mem_alloc(d.pool, size, 0, category, 0, &mem), "trn_mem_alloc");
    return mem;
  };
  for (uint64_t layer = 0; layer < kLayers; ++layer)
    for (uint64_t size : weight_sizes) {
      persistent.push_back(alloc(size, TRN_MEM_CATEGORY_CONSTANTS));    // bf16 weights
      persistent.push_back(alloc(size, TRN_MEM_CATEGORY_TENSORS));      // bf16 gradients
      persistent.push_back(alloc(size * 2, TRN_MEM_CATEGORY_TENSORS));  // fp32 Adam m
      persistent.push_back(alloc(size * 2, TRN_MEM_CATEGORY_TENSORS));  // fp32 Adam v
    }
  std::mt19937_64 rng(11);
  for (int step = 0; step < steps; ++step) {
    const uint64_t tokens = 128 * (24 + rng() % 41);  // 3072..8192 tokens, varying per batch
    const uint64_t act = tokens * kHidden * 2;
    std::vector<std::vector<trn_mem_t>> saved(kLayers);
    for (uint64_t layer = 0; layer < kLayers; ++layer) {
      for (uint64_t scale : {1, 3, 1, 4, 1})
        saved[layer].push_back(alloc(act * scale, TRN_MEM_CATEGORY_TENSORS));
      trn_mem_t softmax_stats = alloc(tokens * 16 * 4, TRN_MEM_CATEGORY_SCRATCH);
      trn_mem_t temp = alloc(act * 4, TRN_MEM_CATEGORY_SCRATCH);
      trn_mem_free(temp);
      saved[layer].push_back(softmax_stats);
    }
    trn_mem_t logits = alloc(tokens * 32000 * 2, TRN_MEM_CATEGORY_TENSORS);
    trn_mem_free(logits);
    for (uint64_t layer = kLayers; layer-- > 0;) {
      trn_mem_t grad_in = alloc(act * 4, TRN_MEM_CATEGORY_SCRATCH);
      trn_mem_t grad_out = alloc(act, TRN_MEM_CATEGORY_SCRATCH);
      trn_mem_free(grad_in);
      for (trn_mem_t m : saved[layer]) trn_mem_free(m);
      trn_mem_free(grad_out);
    }
    for (uint64_t layer = 0; layer < kLayers; ++layer) {
      trn_mem_t update = alloc(4 * kHidden * kHidden * 4, TRN_MEM_CATEGORY_SCRATCH);
      trn_mem_free(update);
    }
  }
  trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
  check(trn_pool_get_stats(d.pool, &stats), "trn_pool_get_stats");
  const double fragmentation = static_cast<double>(stats.peak_reserved_bytes) /
                               static_cast<double>(stats.peak_allocated_bytes);
  print({"alloc",
         "training trace fragmentation (peak reserved / peak allocated, " +
             std::to_string(stats.peak_allocated_bytes >> 20) + " MiB peak allocated, " +
             std::to_string(steps) + " steps)",
         "ratio", fragmentation, 1.0, "ideal: reserved = allocated", false});
  for (trn_mem_t m : persistent) trn_mem_free(m);
}

}  // namespace

int bench_alloc(int argc, char **argv) {
  const bool quick = has_flag(argc, argv, "--quick");
  const int runs = quick ? 3 : 7;
  const size_t count = quick ? 20000 : 200000;
  {
    Device d = open_pool();
    bench_pairs(d, runs, count, 1ull << 20, "512 B-1 MiB");
    bench_pairs(d, runs, count, 64ull << 20, "512 B-64 MiB");
    bench_live_set(d, runs, count, 1024, 1ull << 20, "512 B-1 MiB");
    check(trn_pool_destroy(d.pool), "trn_pool_destroy");
  }
  {
    Device d = open_pool();
    bench_training_trace(d, quick ? 4 : 20);
    check(trn_pool_destroy(d.pool), "trn_pool_destroy");
  }
  return 0;
}

}  // namespace trn::bench
