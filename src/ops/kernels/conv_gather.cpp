#include "ops/kernels/conv_gather.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kbuild/kernels/tiling.hpp"

namespace trn::ops::kernels {

using isa::DType;
using kbuild::kRowTile;
using kbuild::Memory;
using kbuild::Tile;

namespace {

constexpr uint32_t kBlockPixels = 512;  // one PSUM bank of fp32
constexpr uint32_t kAccumulators = 4;   // PSUM banks: one accumulates while others drain
// Pixel-major matmuls for M of at most this many rows, when a block takes at least this many
// matmuls (the transpose back is worth it).
constexpr uint64_t kPixelMajorRows = 32, kPixelMajorMatmuls = 8;

int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
int64_t ceil_div(int64_t a, int64_t b) {
  return -floor_div(-a, b);
}
uint64_t round_up(uint64_t a, uint64_t b) {
  return (a + b - 1) / b * b;
}
uint64_t k_tiles(uint64_t k) {
  return (k + kRowTile - 1) / kRowTile;
}

// The band's layout step along one axis: the reading stride or the interleave, whichever is not
// 1 (the two transforms never use both), so that either can be addressed as a strided view.
uint32_t step(uint32_t stride, uint32_t insert) {
  return std::max(stride, insert);
}

// The ext positions [lo, lo + extent) one axis of a band covers for output positions
// [o0, o0 + count): lo aligned down to the step, the extent rounded up to it.
struct Span {
  int64_t lo = 0;
  uint32_t extent = 0;
};
Span span(uint64_t o0, uint32_t count, uint32_t stride, uint32_t dilation, uint32_t kernel,
          uint32_t f) {
  const uint64_t first = o0 * stride,
                 last = (o0 + count - 1) * stride + uint64_t{kernel - 1} * dilation;
  const uint64_t lo = first / f * f;
  return {static_cast<int64_t>(lo), static_cast<uint32_t>(round_up(last + 1 - lo, f))};
}

// Positions r0 + i * row_step (i < rows) and c0 + j * col_step (j < cols) of a band laid out
// [band_rows, band_cols], as a view [P, rows, 1, cols, 1]. The steps divide the band's sizes.
Tile grid(const Tile &band, uint32_t band_rows, uint32_t band_cols, uint32_t row_step,
          uint32_t col_step, uint64_t r0, uint32_t rows, uint64_t c0, uint32_t cols) {
  return band.reshape({band_rows / row_step, row_step, band_cols / col_step, col_step})
      .slice(0, static_cast<uint32_t>(r0 / row_step), rows)
      .slice(1, static_cast<uint32_t>(r0 % row_step), 1)
      .slice(2, static_cast<uint32_t>(c0 / col_step), cols)
      .slice(3, static_cast<uint32_t>(c0 % col_step), 1);
}

// The source elements [first, first + count) that land in ext positions [lo, lo + extent) of one
// axis, where element r sits at pad + r * insert.
struct Valid {
  int64_t first = 0, count = 0;
};
Valid valid(int64_t lo, uint32_t extent, int64_t pad, uint32_t insert, uint64_t size) {
  const int64_t first = std::max<int64_t>(0, ceil_div(lo - pad, insert));
  const int64_t last =
      std::min<int64_t>(static_cast<int64_t>(size) - 1, floor_div(lo + extent - 1 - pad, insert));
  return {first, std::max<int64_t>(0, last - first + 1)};
}

}  // namespace

uint32_t TapPacking::taps_in(uint64_t g, uint64_t taps) const {
  return static_cast<uint32_t>(std::min<uint64_t>(per_group, taps - g * per_group));
}

uint32_t TapPacking::partitions(uint64_t g, uint64_t taps, uint64_t k) const {
  return static_cast<uint32_t>((taps_in(g, taps) - 1) * uint64_t{partition_stride} + k);
}

TapPacking ConvGather::packing(const GatherShape &s) {
  constexpr uint32_t kStride = 32;
  const uint64_t taps = uint64_t{s.kernel_h} * s.kernel_w;
  if (s.k > kStride || taps == 1 || s.insert[0] > 1 || s.insert[1] > 1) return {};
  // A packed band loads each tap's window on its own, a descriptor per channel and row, to save
  // a matmul of up to 512 columns per tap: worth it while those descriptors are few (a first
  // layer's 3 channels), not for 32 channels of many rows.
  if (s.k * blocks(s, kBlockPixels).front().rows > 256) return {};
  return {static_cast<uint32_t>(std::min<uint64_t>(kRowTile / kStride, taps)), kStride};
}

std::vector<PixelBlock> ConvGather::blocks(const GatherShape &s, uint32_t max_pixels) {
  const auto cols = static_cast<uint32_t>(std::min<uint64_t>(s.out_w, max_pixels));
  const auto rows =
      static_cast<uint32_t>(cols < s.out_w ? 1 : std::min<uint64_t>(s.out_h, max_pixels / s.out_w));
  std::vector<PixelBlock> out;
  for (uint64_t n = 0; n < s.batch; ++n)
    for (uint64_t y0 = 0; y0 < s.out_h; y0 += rows)
      for (uint64_t x0 = 0; x0 < s.out_w; x0 += cols)
        out.push_back({n, y0, x0, static_cast<uint32_t>(std::min<uint64_t>(rows, s.out_h - y0)),
                       static_cast<uint32_t>(std::min<uint64_t>(cols, s.out_w - x0))});
  return out;
}

std::optional<std::string> ConvGather::check(const GatherShape &s, DType dtype,
                                             uint64_t resident_bytes, uint64_t sbuf_bytes,
                                             bool packed) {
  const PixelBlock b = blocks(s, kBlockPixels).front();
  const uint32_t fh = step(s.stride[0], s.insert[0]), fw = step(s.stride[1], s.insert[1]);
  // The widest band any block takes: the first one's, plus a step for the alignment (packed:
  // one band per tap group, without the kernel's halo but as wide as a padded input row with
  // the taps' shifts).
  const TapPacking pk = packed ? packing(s) : TapPacking{};
  const uint32_t kh = pk.packed() ? 1 : s.kernel_h, kw = pk.packed() ? 1 : s.kernel_w;
  const uint64_t rows = span(0, b.rows, s.stride[0], s.dilation[0], kh, fh).extent + uint64_t{fh};
  const uint64_t cols =
      (pk.packed() ? 0 : span(0, b.cols, s.stride[1], s.dilation[1], kw, fw).extent) +
      uint64_t{fw} + (pk.packed() ? uint64_t{s.kernel_w} * s.dilation[1] + s.pad[1] + s.src_w : 0);
  const uint64_t units = pk.packed() ? pk.groups(uint64_t{s.kernel_h} * s.kernel_w) : k_tiles(s.k);
  if (cols * fh > 32767)
    return fmt::format("conv2d: input rows of {} elements in SBUF; strides must fit 16 bits",
                       cols * fh);
  // Two blocks' bands in flight (every K tile's, with their staging rows when interleaved), the
  // resident taps and two output blocks.
  const uint64_t interleaved = s.insert[0] > 1 || s.insert[1] > 1 ? 2 : 1;
  const uint64_t band = interleaved * rows * cols * isa::dtype_size(dtype) * units;
  const uint64_t need = 2 * band + resident_bytes + 4 * kBlockPixels * 4;
  if (need > sbuf_bytes)
    return fmt::format(
        "conv2d: {} bytes per SBUF partition needed ({} for the resident weights, {} for each "
        "band of input rows); {} are available",
        need, resident_bytes, band, sbuf_bytes);
  return std::nullopt;
}

ConvGather::ConvGather(kbuild::KernelBuilder &kb, const GatherShape &s,
                       const kbuild::HbmTensor &src, bool packed)
    : kb_(kb),
      s_(s),
      src_(src),
      dtype_(src.dtype()),
      packing_(packed ? packing(s) : TapPacking{}) {}

ConvGather::Band ConvGather::load_band(const PixelBlock &b, uint64_t kt) {
  const uint32_t fh = step(s_.stride[0], s_.insert[0]), fw = step(s_.stride[1], s_.insert[1]);
  const Span sr = span(b.y0, b.rows, s_.stride[0], s_.dilation[0], s_.kernel_h, fh);
  const Span sc = span(b.x0, b.cols, s_.stride[1], s_.dilation[1], s_.kernel_w, fw);
  const uint64_t k0 = kt * kRowTile;
  const auto p = static_cast<uint32_t>(std::min<uint64_t>(kRowTile, s_.k - k0));
  Band band{kb_.sbuf(dtype_, p, {sr.extent * sc.extent}, "band"), sr.extent, sc.extent, sr.lo,
            sc.lo};
  place(band.tile, band.rows, band.cols, sr.lo, sc.lo, b.n, k0, false);
  return band;
}

ConvGather::Band ConvGather::load_packed_band(const PixelBlock &b, uint64_t g) {
  const uint64_t taps = uint64_t{s_.kernel_h} * s_.kernel_w;
  const Span sr = span(b.y0, b.rows, s_.stride[0], 1, 1, s_.stride[0]);
  const Span sc = span(b.x0, b.cols, s_.stride[1], 1, 1, s_.stride[1]);
  // A block of whole output rows gets bands as wide as the padded input rows, with a margin for
  // the taps' column shifts, so that each tap's window holds whole source rows: one transfer per
  // tap rather than one per row (a transfer reads whole rows or a part of one).
  int64_t margin = 0;
  uint32_t cols = sc.extent;
  if (b.x0 == 0 && b.cols == s_.out_w) {
    margin = std::max<int64_t>(0, int64_t{s_.kernel_w - 1} * s_.dilation[1] - s_.pad[1]);
    const uint64_t reach = std::max<uint64_t>(static_cast<uint64_t>(s_.pad[1]) + s_.src_w,
                                              uint64_t{b.cols - 1} * s_.stride[1] + 1);
    cols = static_cast<uint32_t>(round_up(static_cast<uint64_t>(margin) + reach, s_.stride[1]));
  }
  Band band{kb_.sbuf(dtype_, packing_.partitions(g, taps, s_.k), {sr.extent * cols}, "band"),
            sr.extent, cols, sr.lo, sc.lo - margin};
  // Zeros between the taps' partitions too: the stationary's zeros there must not meet NaNs.
  kb_.memset(band.tile, 0.0f);
  const auto k = static_cast<uint32_t>(s_.k);
  for (uint32_t j = 0; j < packing_.taps_in(g, taps); ++j) {
    const uint64_t tap = g * packing_.per_group + j;
    const auto i = static_cast<uint32_t>(tap / s_.kernel_w),
               jj = static_cast<uint32_t>(tap % s_.kernel_w);
    place(band.tile.partition_slice(j * packing_.partition_stride, k), band.rows, band.cols,
          sr.lo + int64_t{i} * s_.dilation[0], band.col0 + int64_t{jj} * s_.dilation[1], b.n, 0,
          true);
  }
  return band;
}

void ConvGather::place(const Tile &dst, uint32_t rows, uint32_t cols, int64_t row0, int64_t col0,
                       uint64_t n, uint64_t k0, bool zeroed) {
  const uint32_t p = dst.partitions();
  const Valid vr = valid(row0, rows, s_.pad[0], s_.insert[0], s_.src_h);
  const Valid vc = valid(col0, cols, s_.pad[1], s_.insert[1], s_.src_w);
  // Zeros where no source element lands: padding, interleaved gaps, rows past the input.
  const bool covered = s_.insert[0] == 1 && s_.insert[1] == 1 && s_.pad[0] + vr.first == row0 &&
                       vr.count == rows && s_.pad[1] + vc.first == col0 && vc.count == cols;
  if (!covered && !zeroed) kb_.memset(dst, 0.0f);
  if (vr.count == 0 || vc.count == 0) return;
  const Tile at = grid(dst, rows, cols, s_.insert[0], s_.insert[1],
                       static_cast<uint64_t>(s_.pad[0] + vr.first * s_.insert[0] - row0),
                       static_cast<uint32_t>(vr.count),
                       static_cast<uint64_t>(s_.pad[1] + vc.first * s_.insert[1] - col0),
                       static_cast<uint32_t>(vc.count));
  const kbuild::HbmView planes = src_.as_matrix(s_.batch * s_.k, s_.src_h * s_.src_w);
  const uint64_t row = n * s_.k + k0, w = s_.src_w;
  const auto nr = static_cast<uint32_t>(vr.count), nc = static_cast<uint32_t>(vc.count);
  // Interleaved places are one element apart at best: a DMA writing them would move an element
  // per descriptor. The rows land contiguous in a staging tile instead, and one engine copy
  // spreads them out.
  const bool interleaved = s_.insert[0] > 1 || s_.insert[1] > 1;
  const Tile landing = interleaved ? kb_.sbuf(dtype_, p, {nr, nc}, "rows") : at;
  if (vc.first == 0 && static_cast<uint64_t>(vc.count) == w) {
    // Whole source rows: one transfer of consecutive rows of each channel.
    kb_.load(landing, planes.tile(row, p, vr.first * w, vr.count * w));
  } else {
    for (uint32_t r = 0; r < nr; ++r)
      kb_.load(landing.slice(0, r, 1), planes.tile(row, p, (vr.first + r) * w + vc.first, nc));
  }
  if (interleaved) kb_.copy(at, landing);
}

Tile ConvGather::tap_view(const Band &band, const PixelBlock &b, uint32_t i, uint32_t j) const {
  const int64_t r0 = static_cast<int64_t>(b.y0 * s_.stride[0] + i * s_.dilation[0]) - band.row0;
  const int64_t c0 = static_cast<int64_t>(b.x0 * s_.stride[1] + j * s_.dilation[1]) - band.col0;
  return grid(band.tile, band.rows, band.cols, s_.stride[0], s_.stride[1],
              static_cast<uint64_t>(r0), b.rows, static_cast<uint64_t>(c0), b.cols);
}

void ConvGather::run(const std::vector<Tile> &taps, const Epilogue &epilogue) {
  kbuild::TileRing acc =
      kb_.ring(Memory::kPsum, DType::kF32, kRowTile, {kBlockPixels}, kAccumulators, "acc");
  const uint64_t taps_count = uint64_t{s_.kernel_h} * s_.kernel_w;
  // A band per K tile, or (packed) per tap group.
  const uint64_t units = packing_.packed() ? packing_.groups(taps_count) : k_tiles(s_.k);
  // Few rows of M use few columns of the tensor engine, and each matmul still costs its 512
  // pixels. Pixel-major, 128 pixels are the matmul's rows and M its columns (a matmul costs
  // about 64 cycles then), and the sum is transposed back once per block.
  const bool pixel_major =
      s_.m <= kPixelMajorRows && !packing_.packed() && taps_count * units >= kPixelMajorMatmuls;
  const std::vector<PixelBlock> all = blocks(s_, pixel_major ? kRowTile : kBlockPixels);
  struct Loaded {
    PixelBlock block;
    std::vector<Band> bands;
  };
  // The next block's bands are loaded before this block's matmuls are emitted, so that their
  // loads (and zeroing) are not queued behind this block's epilogue.
  kbuild::pipelined(
      all.size(),
      [&](uint64_t i) {
        Loaded l{all[i], {}};
        for (uint64_t u = 0; u < units; ++u)
          l.bands.push_back(packing_.packed() ? load_packed_band(all[i], u) : load_band(all[i], u));
        return l;
      },
      [&](const Loaded &l) {
        if (pixel_major) {
          const auto m = static_cast<uint32_t>(s_.m);
          const Tile flipped = acc.next().partition_slice(0, l.block.size()).cols(0, m);
          for (uint64_t kt = 0; kt < units; ++kt)
            for (uint32_t i = 0; i < s_.kernel_h; ++i)
              for (uint32_t j = 0; j < s_.kernel_w; ++j) {
                const uint64_t tap = uint64_t{i} * s_.kernel_w + j;
                kb_.matmul(flipped, tap_view(l.bands[kt], l.block, i, j),
                           taps[kt].cols(static_cast<uint32_t>(tap * s_.m), m),
                           /*accumulate=*/kt != 0 || tap != 0);
              }
          const Tile staged = kb_.sbuf(DType::kF32, l.block.size(), {m}, "sum^T");
          kb_.copy(staged, flipped);
          const Tile sum = acc.next().partition_slice(0, m).cols(0, l.block.size());
          kb_.transpose(sum, staged);
          epilogue(sum, l.block, 0);
          return;
        }
        for (uint64_t m0 = 0; m0 < s_.m; m0 += kRowTile) {
          const auto mt = static_cast<uint32_t>(std::min<uint64_t>(kRowTile, s_.m - m0));
          const Tile sum = acc.next().partition_slice(0, mt).cols(0, l.block.size());
          bool first = true;
          if (packing_.packed())
            for (uint64_t g = 0; g < units; ++g) {
              kb_.matmul(sum, taps[g].cols(static_cast<uint32_t>(m0), mt),
                         tap_view(l.bands[g], l.block, 0, 0), /*accumulate=*/!first);
              first = false;
            }
          else
            for (uint64_t kt = 0; kt < units; ++kt)
              for (uint32_t i = 0; i < s_.kernel_h; ++i)
                for (uint32_t j = 0; j < s_.kernel_w; ++j) {
                  const uint64_t tap = uint64_t{i} * s_.kernel_w + j;
                  kb_.matmul(sum, taps[kt].cols(static_cast<uint32_t>(tap * s_.m + m0), mt),
                             tap_view(l.bands[kt], l.block, i, j), /*accumulate=*/!first);
                  first = false;
                }
          epilogue(sum, l.block, m0);
        }
      });
}

}  // namespace trn::ops::kernels
