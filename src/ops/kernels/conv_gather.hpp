// The implicit GEMM that conv2d's forward and its input gradient share: a convolution of an
// input that has been zero-padded and zero-interleaved,
//
//   out[n, m, y, x] = sum over k, i, j of taps(i, j)[k, m] * ext[n, k, y * s + i * d, x * s + j *
//   d]
//
// where ext is src [N, K, Hs, Ws] with element (r, c) placed at (pad + r * insert, ...) and zeros
// everywhere else. The forward is insert = 1 (pad = padding); the input gradient is the
// transposed convolution: stride 1, insert = the forward's stride, pad = d * (k - 1) - padding
// (negative pads crop) and the taps flipped.
//
// Output pixels go in blocks of up to 512 (one PSUM bank of fp32): whole output rows, or part of
// one when a row is wider. For each block and 128-row tile of K, the input rows that block reads
// (its band) are loaded once into a zeroed SBUF tile at their padded, interleaved places, and
// every tap reads it through a strided view: the matmuls sum over K tiles and taps in PSUM. With
// few channels the forward stacks taps along the partitions (TapPacking); with few rows of M,
// blocks of 128 pixels are the matmuls' rows instead and the sum is transposed back.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kbuild/kernel_builder.hpp"

namespace trn::ops::kernels {

struct GatherShape {
  uint64_t batch = 1, k = 1, src_h = 1, src_w = 1;  // src [batch, K, Hs, Ws]
  uint64_t m = 1, out_h = 1, out_w = 1;             // out [batch, M, Ho, Wo]
  uint32_t kernel_h = 1, kernel_w = 1;
  int64_t pad[2] = {0, 0};
  uint32_t insert[2] = {1, 1}, stride[2] = {1, 1}, dilation[2] = {1, 1};
};

// One block of output pixels: rows [y0, y0 + rows) and columns [x0, x0 + cols) of one image.
struct PixelBlock {
  uint64_t n = 0, y0 = 0, x0 = 0;
  uint32_t rows = 0, cols = 0;
  uint32_t size() const { return rows * cols; }
  // Where the block lies in a [batch * channels, Ho * Wo] view of the output: it is contiguous
  // there (whole rows, or part of one).
  uint64_t flat_col(uint64_t out_w) const { return y0 * out_w + x0; }
};

// Taps stacked along K: when K is small, `per_group` taps share one matmul, tap j of a group on
// partitions [j * partition_stride, j * partition_stride + K). The stride is 32 so that every
// engine access starts at an aligned partition; the partitions between are zeros.
struct TapPacking {
  uint32_t per_group = 1, partition_stride = 0;
  bool packed() const { return per_group > 1; }
  uint64_t groups(uint64_t taps) const { return (taps + per_group - 1) / per_group; }
  // Taps in group g, and the partitions its stationary and band tiles take.
  uint32_t taps_in(uint64_t g, uint64_t taps) const;
  uint32_t partitions(uint64_t g, uint64_t taps, uint64_t k) const;
};

class ConvGather {
 public:
  // How run() stacks taps for this shape (the forward only: stride-1 reads, no interleave).
  static TapPacking packing(const GatherShape &s);

  // Why this shape cannot be built with `resident_bytes` of SBUF per partition already taken
  // (the taps), if it cannot.
  static std::optional<std::string> check(const GatherShape &s, isa::DType dtype,
                                          uint64_t resident_bytes, uint64_t sbuf_bytes,
                                          bool packed = false);

  // `packed`: run() stacks taps as packing() says (its taps must be laid out so).
  ConvGather(kbuild::KernelBuilder &kb, const GatherShape &s, const kbuild::HbmTensor &src,
             bool packed = false);

  // Calls epilogue(sum, block, m0) for every output block and 128-row tile of M, with
  // sum = PSUM [rows of the M tile, block.size()] fp32 holding the convolution there. Unpacked,
  // taps[kt] is the SBUF tile [rows of K tile kt, kernel_h * kernel_w * M]: tap t =
  // i * kernel_w + j takes columns [t * M, (t + 1) * M). Packed, taps[g] is tap group g's
  // [packing().partitions(g, ...), M], tap j of the group on its partitions from
  // j * partition_stride.
  using Epilogue =
      std::function<void(const kbuild::Tile &sum, const PixelBlock &block, uint64_t m0)>;
  void run(const std::vector<kbuild::Tile> &taps, const Epilogue &epilogue);

  // Output blocks in order (shared with the weight gradient, which walks the same pixels).
  static std::vector<PixelBlock> blocks(const GatherShape &s, uint32_t max_pixels);
  // The band of `block` for K tile kt ([kt rows, band_rows * band_cols]) with its tap views.
  struct Band {
    kbuild::Tile tile;
    uint32_t rows = 0, cols = 0;  // the layout: [rows, cols], rows and cols multiples of the step
    int64_t row0 = 0, col0 = 0;   // ext position of band element (0, 0)
  };
  Band load_band(const PixelBlock &block, uint64_t kt);
  // What tap (i, j) reads from `band` for `block`: [kt rows, block.rows, 1, block.cols, 1].
  kbuild::Tile tap_view(const Band &band, const PixelBlock &block, uint32_t i, uint32_t j) const;

 private:
  // Tap group g's band: each tap's shifted window of the input on its partitions, so that tap
  // (0, 0)'s view of the whole tile reads every tap of the group.
  Band load_packed_band(const PixelBlock &block, uint64_t g);
  // The source elements of channels [k0, k0 + dst.partitions()) of image n that land in ext
  // positions [row0, row0 + rows) x [col0, col0 + cols), into dst laid out [rows, cols]; the rest
  // is zeroed unless `zeroed` says it already is.
  void place(const kbuild::Tile &dst, uint32_t rows, uint32_t cols, int64_t row0, int64_t col0,
             uint64_t n, uint64_t k0, bool zeroed);

  kbuild::KernelBuilder &kb_;
  GatherShape s_;
  kbuild::HbmTensor src_;
  isa::DType dtype_;
  TapPacking packing_;
};

}  // namespace trn::ops::kernels
