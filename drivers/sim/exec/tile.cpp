#include "exec/tile.hpp"

#include <cstring>

#include "isa/dtype.hpp"

namespace trn::sim::exec {

bool Tile::contiguous() const {
  ptrdiff_t expect = elem_size;
  for (uint32_t d = num_dims; d-- > 0;) {
    if (counts[d] > 1 && strides[d] != expect) return false;
    expect *= counts[d];
  }
  return true;
}

void load_row_f32(const Tile &t, uint32_t p, float *out) {
  for_each_run(t, p, [&](const std::byte *ptr, ptrdiff_t stride, uint32_t n, uint64_t first) {
    if (stride == ptrdiff_t{t.elem_size})
      isa::load_f32(t.dtype, ptr, out + first, n);
    else
      isa::load_f32_strided(t.dtype, ptr, stride, out + first, n);
  });
}

void store_row_f32(const Tile &t, uint32_t p, const float *in) {
  for_each_run(t, p, [&](std::byte *ptr, ptrdiff_t stride, uint32_t n, uint64_t first) {
    if (stride == ptrdiff_t{t.elem_size})
      isa::store_f32(t.dtype, in + first, ptr, n);
    else
      isa::store_f32_strided(t.dtype, in + first, ptr, stride, n);
  });
}

void load_row_raw(const Tile &t, uint32_t p, std::byte *out) {
  const size_t es = t.elem_size;
  for_each_run(t, p, [&](const std::byte *ptr, ptrdiff_t stride, uint32_t n, uint64_t first) {
    std::byte *dst = out + first * es;
    if (stride == ptrdiff_t(es)) {
      std::memcpy(dst, ptr, n * es);
      return;
    }
    for (uint32_t i = 0; i < n; ++i) std::memcpy(dst + i * es, ptr + i * stride, es);
  });
}

void store_row_raw(const Tile &t, uint32_t p, const std::byte *in) {
  const size_t es = t.elem_size;
  for_each_run(t, p, [&](std::byte *ptr, ptrdiff_t stride, uint32_t n, uint64_t first) {
    const std::byte *src = in + first * es;
    if (stride == ptrdiff_t(es)) {
      std::memmove(ptr, src, n * es);
      return;
    }
    for (uint32_t i = 0; i < n; ++i) std::memcpy(ptr + i * stride, src + i * es, es);
  });
}

}  // namespace trn::sim::exec
