#include <catch2/catch.hpp>

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
