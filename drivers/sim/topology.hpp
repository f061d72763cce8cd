// How simulated devices are linked. Like trn1.32xlarge and trn2.48xlarge, whose 16 chips form a
// 4x4 2D torus [docs/hardware.md §1.8], N devices form a rows x cols torus with rows the largest
// divisor of N not above its square root; each device links to its row and column neighbours,
// with wrap-around.
#pragma once

#include <cstdint>
#include <vector>

namespace trn::sim {

struct TorusShape {
  uint32_t rows;
  uint32_t cols;
};

TorusShape torus_shape(uint32_t device_count);
// Sorted, without duplicates or the device itself.
std::vector<uint32_t> torus_neighbors(uint32_t device, uint32_t device_count);
// Links a transfer from device `a` to `b` crosses: dimension-order routing, each dimension the
// shorter way round (0 for the same device).
uint32_t torus_hops(uint32_t a, uint32_t b, uint32_t device_count);

}  // namespace trn::sim
