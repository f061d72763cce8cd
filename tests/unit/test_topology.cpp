#include <catch2/catch.hpp>

#include "sim/dma_engine.hpp"
#include "sim/topology.hpp"

using trn::sim::torus_neighbors;
using trn::sim::torus_shape;
using V = std::vector<uint32_t>;

TEST_CASE("16 devices form the 4x4 torus of trn2.48xlarge") {
  CHECK(torus_shape(16).rows == 4);
  CHECK(torus_shape(16).cols == 4);
  CHECK(torus_neighbors(0, 16) == V{1, 3, 4, 12});
  CHECK(torus_neighbors(5, 16) == V{1, 4, 6, 9});
  CHECK(torus_neighbors(15, 16) == V{3, 11, 12, 14});
  for (uint32_t d = 0; d < 16; ++d) {
    const auto n = torus_neighbors(d, 16);
    CHECK(n.size() == 4);
    for (uint32_t other : n) {  // links are symmetric
      const auto back = torus_neighbors(other, 16);
      CHECK(std::find(back.begin(), back.end(), d) != back.end());
    }
  }
}

TEST_CASE("small and odd device counts") {
  CHECK(torus_neighbors(0, 1).empty());
  CHECK(torus_neighbors(0, 2) == V{1});
  CHECK(torus_neighbors(0, 4) == V{1, 2});
  CHECK(torus_shape(6).rows == 2);
  CHECK(torus_shape(6).cols == 3);
  CHECK(torus_neighbors(0, 6) == V{1, 2, 3});
  CHECK(torus_neighbors(0, 7) == V{1, 6});  // a prime count is a ring
  CHECK(torus_neighbors(3, 2).empty());     // out of range
}

TEST_CASE("hops over the torus: neighbours one, the far corner of a 4x4 torus four") {
  using trn::sim::torus_hops;
  CHECK(torus_hops(0, 0, 16) == 0);
  for (uint32_t d = 0; d < 16; ++d)
    for (uint32_t n : torus_neighbors(d, 16)) CHECK(torus_hops(d, n, 16) == 1);
  CHECK(torus_hops(0, 10, 16) == 4);  // two rows and two columns away, either way round
  CHECK(torus_hops(0, 15, 16) == 2);  // wrap-around in both dimensions
  CHECK(torus_hops(0, 3, 7) == 3);    // a ring of 7
  CHECK(torus_hops(0, 9, 4) == 0);    // out of range
}

TEST_CASE("a copy to another device costs a link's time and each hop's latency") {
  using namespace trn::sim;
  // trn2: 1.28 TB/s over 4 links is 320 GB/s a link; 64 MiB over it is about 210 us, slower than
  // 16 DMA engines at 23 GB/s (368 GB/s), and each further hop adds its latency.
  const uint64_t bytes = 64ull << 20;
  const uint64_t link = 320'000'000'000ull;
  const uint64_t one = simulated_link_ns(bytes, 23'000'000'000ull, 16, link, 1);
  CHECK(one == kDmaFixedNs + bytes * 1'000'000'000ull / link + kLinkHopNs);
  CHECK(simulated_link_ns(bytes, 23'000'000'000ull, 16, link, 3) == one + 2 * kLinkHopNs);
  CHECK(one > simulated_dma_ns(bytes, 23'000'000'000ull, 16));
  // With one DMA engine the engine is the bottleneck, not the link.
  CHECK(simulated_link_ns(bytes, 23'000'000'000ull, 1, link, 1) ==
        simulated_dma_ns(bytes, 23'000'000'000ull, 1) + kLinkHopNs);
}
