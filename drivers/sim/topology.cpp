#include "sim/topology.hpp"

#include <algorithm>

namespace trn::sim {

TorusShape torus_shape(uint32_t device_count) {
  uint32_t rows = 1;
  for (uint32_t r = 1; r * r <= device_count; ++r)
    if (device_count % r == 0) rows = r;
  return {rows, device_count == 0 ? 0 : device_count / rows};
}

std::vector<uint32_t> torus_neighbors(uint32_t device, uint32_t device_count) {
  std::vector<uint32_t> out;
  if (device >= device_count) return out;
  const TorusShape shape = torus_shape(device_count);
  const uint32_t row = device / shape.cols;
  const uint32_t col = device % shape.cols;
  const uint32_t candidates[] = {
      ((row + shape.rows - 1) % shape.rows) * shape.cols + col,
      ((row + 1) % shape.rows) * shape.cols + col,
      row * shape.cols + (col + shape.cols - 1) % shape.cols,
      row * shape.cols + (col + 1) % shape.cols,
  };
  for (uint32_t c : candidates)
    if (c != device) out.push_back(c);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

uint32_t torus_hops(uint32_t a, uint32_t b, uint32_t device_count) {
  if (a >= device_count || b >= device_count) return 0;
  const TorusShape shape = torus_shape(device_count);
  auto ring_distance = [](uint32_t x, uint32_t y, uint32_t size) {
    const uint32_t d = x > y ? x - y : y - x;
    return std::min(d, size - d);
  };
  return ring_distance(a / shape.cols, b / shape.cols, shape.rows) +
         ring_distance(a % shape.cols, b % shape.cols, shape.cols);
}

}  // namespace trn::sim
