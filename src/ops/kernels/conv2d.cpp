#include "ops/kernels/conv2d.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kbuild/kernel_builder.hpp"
#include "kbuild/kernels/tiling.hpp"
#include "ops/kernels/conv_gather.hpp"
#include "ops/kernels/rows.hpp"

namespace trn::ops::kernels {

namespace {

using isa::AluOp;
using isa::DType;
using kbuild::HbmTensor;
using kbuild::KernelBuilder;
using kbuild::kRowTile;
using kbuild::Tile;

constexpr uint32_t kReduceCols = 8192;  // grad_bias: columns of grad_out summed per instruction
constexpr uint32_t kTapGroup = 16;      // grad_w: taps accumulated in PSUM in one pass

bool is_float(DType t) {
  return t == DType::kF32 || t == DType::kBf16 || t == DType::kF16 || t == DType::kFp8E4m3 ||
         t == DType::kFp8E5m2;
}

uint64_t out_size(uint64_t in, uint32_t kernel, uint32_t stride, uint32_t padding,
                  uint32_t dilation) {
  const uint64_t span = uint64_t{dilation} * (kernel - 1) + 1, padded = in + 2ull * padding;
  return padded < span || stride == 0 ? 0 : (padded - span) / stride + 1;
}

uint64_t taps(const Conv2dShape &s) {
  return uint64_t{s.kernel_h} * s.kernel_w;
}

uint64_t k_tiles(uint64_t k) {
  return (k + kRowTile - 1) / kRowTile;
}

std::optional<std::string> check_shape(const char *what, const Conv2dShape &s, DType in,
                                       std::initializer_list<DType> outs) {
  if (!s.batch || !s.channels || !s.height || !s.width || !s.out_channels || !s.kernel_h ||
      !s.kernel_w)
    return fmt::format("{}: an empty shape (x [{}, {}, {}, {}], w [{}, {}, {}, {}])", what, s.batch,
                       s.channels, s.height, s.width, s.out_channels, s.channels, s.kernel_h,
                       s.kernel_w);
  if (s.groups != 1)
    return fmt::format("{}: groups = {}; the kernel builds groups = 1 only", what, s.groups);
  for (int i = 0; i < 2; ++i)
    if (!s.stride[i] || !s.dilation[i])
      return fmt::format("{}: stride and dilation must be at least 1", what);
  if (!s.out_h() || !s.out_w())
    return fmt::format("{}: the kernel {}x{} (dilated) is larger than the padded input {}x{}", what,
                       s.kernel_h, s.kernel_w, s.height, s.width);
  if (s.height * s.width > UINT32_MAX || s.out_h() * s.out_w() > UINT32_MAX)
    return fmt::format("{}: planes of 2^32 elements or more", what);
  if (in != DType::kF32 && in != DType::kBf16 && in != DType::kF16)
    return fmt::format("{}: inputs of {}; f32, bf16 and f16 are supported", what,
                       isa::dtype_name(in));
  for (DType t : outs)
    if (!is_float(t))
      return fmt::format("{}: a result of {}; results must be float dtypes", what,
                         isa::dtype_name(t));
  return std::nullopt;
}

std::string shape_name(const Conv2dShape &s, DType in) {
  return fmt::format("{}_n{}_c{}_{}x{}_o{}_k{}x{}_s{}x{}_p{}x{}_d{}x{}", isa::dtype_name(in),
                     s.batch, s.channels, s.height, s.width, s.out_channels, s.kernel_h, s.kernel_w,
                     s.stride[0], s.stride[1], s.padding[0], s.padding[1], s.dilation[0],
                     s.dilation[1]);
}

// The forward as a gather: x itself, padded, read with the stride.
GatherShape forward_gather(const Conv2dShape &s) {
  GatherShape g;
  g.batch = s.batch, g.k = s.channels, g.src_h = s.height, g.src_w = s.width;
  g.m = s.out_channels, g.out_h = s.out_h(), g.out_w = s.out_w();
  g.kernel_h = s.kernel_h, g.kernel_w = s.kernel_w;
  for (int i = 0; i < 2; ++i) {
    g.pad[i] = s.padding[i];
    g.stride[i] = s.stride[i];
    g.dilation[i] = s.dilation[i];
  }
  return g;
}

// The input gradient as a gather: grad_out interleaved with stride - 1 zeros and padded by
// d * (k - 1) - p, read with stride 1 (the taps are flipped by the caller).
GatherShape input_grad_gather(const Conv2dShape &s) {
  GatherShape g;
  g.batch = s.batch, g.k = s.out_channels, g.src_h = s.out_h(), g.src_w = s.out_w();
  g.m = s.channels, g.out_h = s.height, g.out_w = s.width;
  g.kernel_h = s.kernel_h, g.kernel_w = s.kernel_w;
  const uint32_t kernel[2] = {s.kernel_h, s.kernel_w};
  for (int i = 0; i < 2; ++i) {
    g.pad[i] = int64_t{s.dilation[i]} * (kernel[i] - 1) - s.padding[i];
    g.insert[i] = s.stride[i];
    g.dilation[i] = s.dilation[i];
  }
  return g;
}

// SBUF bytes per partition the gather's taps take: every K tile holds all taps of all of M.
uint64_t taps_bytes(const GatherShape &g, DType t) {
  return k_tiles(g.k) * g.kernel_h * g.kernel_w * g.m * isa::dtype_size(t);
}

// w's rows [o0, o0 + rows) as stored: [rows, C * kh * kw], output channels on partitions.
Tile load_weight_rows(KernelBuilder &kb, const HbmTensor &w, const Conv2dShape &s, uint64_t o0,
                      uint32_t rows) {
  const uint64_t cols = s.channels * taps(s);
  const Tile t = kb.sbuf(w.dtype(), rows, {static_cast<uint32_t>(cols)}, "w rows");
  kb.load(t, w.as_matrix(s.out_channels, cols).tile(o0, rows, 0, cols));
  return t;
}

// The forward's taps: taps[kt][c, t * O + o] = w[o, kt * 128 + c, t]. Channels must lie on
// partitions, so each tap's [O, C] slice of w goes through a tensor-engine transpose.
std::vector<Tile> forward_taps(KernelBuilder &kb, const HbmTensor &w, const Conv2dShape &s) {
  const uint64_t t_count = taps(s), o = s.out_channels;
  std::vector<Tile> out;
  for (uint64_t kt = 0; kt < k_tiles(s.channels); ++kt)
    out.push_back(kb.sbuf(
        w.dtype(), static_cast<uint32_t>(std::min<uint64_t>(kRowTile, s.channels - kt * kRowTile)),
        {static_cast<uint32_t>(t_count * o)}, "taps"));
  kbuild::for_row_tiles(o, [&](uint64_t o0, uint32_t rows) {
    const Tile by_tap =
        load_weight_rows(kb, w, s, o0, rows)
            .reshape({static_cast<uint32_t>(s.channels), static_cast<uint32_t>(t_count)});
    for (uint64_t kt = 0; kt < out.size(); ++kt) {
      const uint32_t cn = out[kt].partitions();
      for (uint64_t t = 0; t < t_count; ++t) {
        const Tile flipped = kb.psum(w.dtype(), cn, {rows}, "w^T");
        kb.transpose(flipped, by_tap.slice(0, static_cast<uint32_t>(kt * kRowTile), cn)
                                  .slice(1, static_cast<uint32_t>(t), 1));
        kb.copy(out[kt].cols(static_cast<uint32_t>(t * o + o0), rows), flipped);
      }
    }
  });
  return out;
}

// The forward's taps stacked for ConvGather's packing (C of at most 32): group g's tile holds
// tap j of the group on partitions [j * stride, j * stride + C), zeros between. Each tap's
// transpose writes its partitions of the PSUM tile directly (aligned starts), and the copy out
// keeps them, so no engine moves data across partitions.
std::vector<Tile> packed_forward_taps(KernelBuilder &kb, const HbmTensor &w, const Conv2dShape &s,
                                      const TapPacking &pk) {
  const uint64_t t_count = taps(s), o = s.out_channels;
  const auto c = static_cast<uint32_t>(s.channels);
  std::vector<Tile> out;
  for (uint64_t g = 0; g < pk.groups(t_count); ++g) {
    out.push_back(
        kb.sbuf(w.dtype(), pk.partitions(g, t_count, c), {static_cast<uint32_t>(o)}, "taps"));
    kb.memset(out.back(), 0.0f);
  }
  kbuild::for_row_tiles(o, [&](uint64_t o0, uint32_t rows) {
    const Tile by_tap =
        load_weight_rows(kb, w, s, o0, rows).reshape({c, static_cast<uint32_t>(t_count)});
    for (uint64_t g = 0; g < out.size(); ++g) {
      const Tile flipped = kb.psum(w.dtype(), out[g].partitions(), {rows}, "w^T");
      for (uint32_t j = 0; j < pk.taps_in(g, t_count); ++j) {
        const uint32_t p0 = j * pk.partition_stride;
        kb.transpose(flipped.partition_slice(p0, c),
                     by_tap.slice(1, static_cast<uint32_t>(g * pk.per_group + j), 1));
        kb.copy(out[g].partition_slice(p0, c).cols(static_cast<uint32_t>(o0), rows),
                flipped.partition_slice(p0, c));
      }
    }
  });
  return out;
}

// The input gradient's taps: taps[kt][o, t * C + c] = w[kt * 128 + o, c, T - 1 - t] (flipped).
// Output channels are already on partitions as w is stored: strided copies, no transposes.
std::vector<Tile> input_grad_taps(KernelBuilder &kb, const HbmTensor &w, const Conv2dShape &s) {
  const uint64_t t_count = taps(s), c = s.channels;
  std::vector<Tile> out;
  kbuild::for_row_tiles(s.out_channels, [&](uint64_t o0, uint32_t rows) {
    const Tile by_tap = load_weight_rows(kb, w, s, o0, rows)
                            .reshape({static_cast<uint32_t>(c), static_cast<uint32_t>(t_count)});
    const Tile t = kb.sbuf(w.dtype(), rows, {static_cast<uint32_t>(t_count * c)}, "taps");
    for (uint64_t tap = 0; tap < t_count; ++tap)
      kb.copy(t.cols(static_cast<uint32_t>(tap * c), static_cast<uint32_t>(c)),
              by_tap.slice(1, static_cast<uint32_t>(t_count - 1 - tap), 1));
    out.push_back(t);
  });
  return out;
}

// Stores sum (+ a per-row bias column) to rows [row0, ...) of `out` seen as [rows, Ho * Wo].
void store_block(KernelBuilder &kb, const HbmTensor &out, uint64_t rows, uint64_t plane,
                 uint64_t row0, const Tile &sum, const PixelBlock &b, uint64_t out_w,
                 const Tile &bias) {
  const Tile result = kb.sbuf(out.dtype(), sum.partitions(), {b.size()}, "out");
  if (bias.valid())
    kb.tensor_scalar(result, sum, AluOp::kAdd, bias);
  else
    kb.copy(result, sum);
  kb.store(out.as_matrix(rows, plane).tile(row0, sum.partitions(), b.flat_col(out_w), b.size()),
           result);
}

// grad_bias[o] = sum over n and pixels of grad_out[n, o, :, :], in fp32.
void bias_grad(KernelBuilder &kb, const HbmTensor &grad_out, const HbmTensor &grad_bias,
               const Conv2dShape &s) {
  const uint64_t plane = s.out_h() * s.out_w(), o = s.out_channels;
  kbuild::for_row_tiles(o, [&](uint64_t o0, uint32_t rows) {
    const Tile total = kb.sbuf(DType::kF32, rows, {1}, "grad_bias");
    kb.memset(total, 0.0f);
    for (uint64_t n = 0; n < s.batch; ++n)
      kbuild::for_col_chunks(plane, kReduceCols, [&](uint64_t c0, uint32_t cols) {
        const Tile g = kb.sbuf(grad_out.dtype(), rows, {cols}, "grad_out");
        kb.load(g, grad_out.as_matrix(s.batch * o, plane).tile(n * o + o0, rows, c0, cols));
        const Tile part = kb.sbuf(DType::kF32, rows, {1}, "part");
        kb.reduce(part, g, AluOp::kAdd);
        kb.tensor_tensor(total, total, part, AluOp::kAdd);
      });
    kb.store(rows_of(grad_bias, {o0, rows}), total);
  });
}

// grad_w[o, c, t] = sum over n and pixels of grad_out[n, o, pixel] * x patch t [n, c, pixel].
// The contraction runs over pixels, so blocks of up to 128 pixels of grad_out and of each tap's
// x patch are transposed onto partitions; each pass accumulates up to kTapGroup taps in PSUM.
void weight_grad(KernelBuilder &kb, const HbmTensor &grad_out, const HbmTensor &x,
                 const HbmTensor &grad_w, const Conv2dShape &s) {
  const GatherShape gs = forward_gather(s);
  ConvGather gather(kb, gs, x);
  const std::vector<PixelBlock> blocks = ConvGather::blocks(gs, kRowTile);
  const uint64_t t_count = taps(s), o = s.out_channels, plane = s.out_h() * s.out_w();
  const DType in = x.dtype();
  for (uint64_t kt = 0; kt < k_tiles(s.channels); ++kt) {
    const auto cn = static_cast<uint32_t>(std::min<uint64_t>(kRowTile, s.channels - kt * kRowTile));
    kbuild::for_row_tiles(o, [&](uint64_t o0, uint32_t rows) {
      // grad_w rows [o0, ...) and channels of this K tile, every tap: [rows, cn * T] as stored.
      const Tile result =
          kb.sbuf(DType::kF32, rows, {static_cast<uint32_t>(cn * t_count)}, "grad_w");
      const Tile by_tap = result.reshape({cn, static_cast<uint32_t>(t_count)});
      for (uint64_t t0 = 0; t0 < t_count; t0 += kTapGroup) {
        const uint64_t group = std::min<uint64_t>(kTapGroup, t_count - t0);
        std::vector<Tile> acc;
        for (uint64_t t = 0; t < group; ++t) acc.push_back(kb.psum(DType::kF32, rows, {cn}, "acc"));
        for (size_t bi = 0; bi < blocks.size(); ++bi) {
          const PixelBlock &b = blocks[bi];
          const Tile g = kb.sbuf(in, rows, {b.size()}, "grad_out");
          kb.load(g, grad_out.as_matrix(s.batch * o, plane)
                         .tile(b.n * o + o0, rows, b.flat_col(s.out_w()), b.size()));
          const Tile g_flipped = kb.psum(in, b.size(), {rows}, "grad_out^T");
          kb.transpose(g_flipped, g);
          const Tile g_t = kb.sbuf(in, b.size(), {rows}, "grad_out^T");
          kb.copy(g_t, g_flipped);
          const ConvGather::Band band = gather.load_band(b, kt);
          for (uint64_t t = 0; t < group; ++t) {
            const uint64_t tap = t0 + t;
            const Tile x_flipped = kb.psum(in, b.size(), {cn}, "x^T");
            kb.transpose(x_flipped,
                         gather.tap_view(band, b, static_cast<uint32_t>(tap / s.kernel_w),
                                         static_cast<uint32_t>(tap % s.kernel_w)));
            const Tile x_t = kb.sbuf(in, b.size(), {cn}, "x^T");
            kb.copy(x_t, x_flipped);
            kb.matmul(acc[t], g_t, x_t, /*accumulate=*/bi != 0);
          }
        }
        for (uint64_t t = 0; t < group; ++t)
          kb.copy(by_tap.slice(1, static_cast<uint32_t>(t0 + t), 1), acc[t]);
      }
      kb.store(grad_w.as_matrix(o, s.channels * t_count)
                   .tile(o0, rows, kt * kRowTile * t_count, cn * t_count),
               result);
    });
  }
}

}  // namespace

uint64_t Conv2dShape::out_h() const {
  return out_size(height, kernel_h, stride[0], padding[0], dilation[0]);
}

uint64_t Conv2dShape::out_w() const {
  return out_size(width, kernel_w, stride[1], padding[1], dilation[1]);
}

std::variant<isa::Program, std::string> build_conv2d(const Conv2dConfig &c) {
  const Conv2dShape &s = c.shape;
  if (auto e = check_shape("conv2d", s, c.in_dtype, {c.out_dtype, c.bias_dtype})) return *e;
  const GatherShape gs = forward_gather(s);
  // The taps, and w's rows while they are rearranged.
  const uint64_t resident = taps_bytes(gs, c.in_dtype) +
                            s.channels * taps(s) * isa::dtype_size(c.in_dtype) + (c.bias ? 4 : 0);
  // Taps stacked along K when the shape allows and their bands fit; one per matmul otherwise.
  TapPacking pk = ConvGather::packing(gs);
  if (pk.packed() && ConvGather::check(gs, c.in_dtype, resident, c.target.sbuf_bytes(), true))
    pk = {};
  if (auto e = ConvGather::check(gs, c.in_dtype, resident, c.target.sbuf_bytes(), pk.packed()))
    return *e;

  std::string name = "conv2d_" + shape_name(s, c.in_dtype);
  if (c.bias) name += "_bias";
  if (c.out_dtype != c.in_dtype) name += fmt::format("_to_{}", isa::dtype_name(c.out_dtype));
  KernelBuilder kb(name, c.target);
  const HbmTensor x = kb.input("x", c.in_dtype, {s.batch, s.channels, s.height, s.width});
  const HbmTensor w =
      kb.input("w", c.in_dtype, {s.out_channels, s.channels, s.kernel_h, s.kernel_w});
  HbmTensor bias;
  if (c.bias) bias = kb.input("bias", c.bias_dtype, {s.out_channels});
  const HbmTensor out =
      kb.output("out", c.out_dtype, {s.batch, s.out_channels, s.out_h(), s.out_w()});

  // The bias as fp32 columns, one value per output channel (partition).
  std::vector<Tile> bias_cols;
  if (c.bias)
    kbuild::for_row_tiles(s.out_channels, [&](uint64_t o0, uint32_t rows) {
      bias_cols.push_back(kb.sbuf(DType::kF32, rows, {1}, "bias"));
      kb.load(bias_cols.back(), rows_of(bias, {o0, rows}));
    });
  const std::vector<Tile> tap_tiles =
      pk.packed() ? packed_forward_taps(kb, w, s, pk) : forward_taps(kb, w, s);
  ConvGather gather(kb, gs, x, pk.packed());
  const uint64_t plane = s.out_h() * s.out_w();
  gather.run(tap_tiles, [&](const Tile &sum, const PixelBlock &b, uint64_t m0) {
    store_block(kb, out, s.batch * s.out_channels, plane, b.n * s.out_channels + m0, sum, b,
                s.out_w(), c.bias ? bias_cols[m0 / kRowTile] : Tile{});
  });
  return kb.finish();
}

std::variant<isa::Program, std::string> build_conv2d_backward(const Conv2dBackwardConfig &c) {
  const Conv2dShape &s = c.shape;
  if (auto e = check_shape("conv2d_backward", s, c.in_dtype,
                           {c.grad_x_dtype, c.grad_w_dtype, c.grad_bias_dtype}))
    return *e;
  if (!c.grad_x && !c.grad_w && !c.grad_bias)
    return std::string("conv2d_backward: no gradient is wanted");
  const uint64_t sbuf = c.target.sbuf_bytes();
  const GatherShape gx = input_grad_gather(s);
  if (c.grad_x) {
    const uint64_t resident =
        taps_bytes(gx, c.in_dtype) + s.channels * taps(s) * isa::dtype_size(c.in_dtype);
    if (auto e = ConvGather::check(gx, c.in_dtype, resident, sbuf)) return *e;
  }
  if (c.grad_w)  // the fp32 result rows and the transposed blocks beside the bands
    if (auto e = ConvGather::check(forward_gather(s), c.in_dtype,
                                   s.channels * taps(s) * 4 + 4 * kRowTile * 4, sbuf))
      return *e;

  std::string name = "conv2d_backward_" + shape_name(s, c.in_dtype);
  if (c.grad_x) name += "_dx";
  if (c.grad_w) name += "_dw";
  if (c.grad_bias) name += "_db";
  KernelBuilder kb(name, c.target);
  const std::vector<uint64_t> x_shape = {s.batch, s.channels, s.height, s.width},
                              w_shape = {s.out_channels, s.channels, s.kernel_h, s.kernel_w};
  const HbmTensor grad_out =
      kb.input("grad_out", c.in_dtype, {s.batch, s.out_channels, s.out_h(), s.out_w()});
  HbmTensor x, w, grad_x, grad_w, grad_bias;
  if (c.grad_w) x = kb.input("x", c.in_dtype, x_shape);
  if (c.grad_x) w = kb.input("w", c.in_dtype, w_shape);
  if (c.grad_x) grad_x = kb.output("grad_x", c.grad_x_dtype, x_shape);
  if (c.grad_w) grad_w = kb.output("grad_w", c.grad_w_dtype, w_shape);
  if (c.grad_bias) grad_bias = kb.output("grad_bias", c.grad_bias_dtype, {s.out_channels});

  if (c.grad_bias) bias_grad(kb, grad_out, grad_bias, s);
  if (c.grad_x) {
    const std::vector<Tile> tap_tiles = input_grad_taps(kb, w, s);
    ConvGather gather(kb, gx, grad_out);
    const uint64_t plane = s.height * s.width;
    gather.run(tap_tiles, [&](const Tile &sum, const PixelBlock &b, uint64_t m0) {
      store_block(kb, grad_x, s.batch * s.channels, plane, b.n * s.channels + m0, sum, b, s.width,
                  Tile{});
    });
  }
  if (c.grad_w) weight_grad(kb, grad_out, x, grad_w, s);
  return kb.finish();
}

}  // namespace trn::ops::kernels
