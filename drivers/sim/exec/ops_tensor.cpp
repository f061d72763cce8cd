// Tensor engine: nc_matmul and nc_transpose (docs/ISA.md).
//
// nc_matmul runs on oneDNN's BLAS-like GEMMs, straight on SBUF and PSUM memory whenever the
// tiles' free elements are contiguous (the partition pitch is the leading dimension; the
// stationary tile [K,M] stored partition-major is the transposed-A view). Products are exact
// and accumulate in fp32:
//   * bf16 and fp8 (either kind, mixed freely with bf16): every value is exact in bf16, so both
//     operands go through dnnl_gemm_bf16bf16f32 (fp32 accumulation, fp32 C).
//   * f16 (with any 16/8-bit partner): converted to fp32 and run through dnnl_sgemm; a product
//     of two such values has at most 22 significant bits, exact in fp32.
//   * f32 with f32: dnnl_sgemm (FMA: exact product, rounded accumulate).
// oneDNN's bf16 kernels (vdpbf16ps) treat bf16 subnormal inputs as zero and flush subnormal
// fp32 results to zero; the fp32 path keeps subnormals.
#include <fmt/format.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <vector>

#include "exec/ops.hpp"
#include "isa/dtype.hpp"

// Exported by libdnnl (DNNL_API) but declared only in oneDNN's internal headers; row-major
// like dnnl_sgemm. The pointers are bf16 (uint16_t bit patterns).
extern "C" dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t M, dnnl_dim_t N,
                                               dnnl_dim_t K, float alpha, const void *A,
                                               dnnl_dim_t lda, const void *B, dnnl_dim_t ldb,
                                               float beta, float *C, dnnl_dim_t ldc);

namespace trn::sim::exec {

namespace {

using isa::DType;

// fp8 bit pattern -> bf16 bit pattern (exact: bf16 has fp32's exponent range and 7 fraction
// bits, fp8 at most 3).
struct Fp8ToBf16 {
  std::array<uint16_t, 256> e4m3{}, e5m2{};
  Fp8ToBf16() {
    for (uint32_t i = 0; i < 256; ++i) {
      const auto b = static_cast<uint8_t>(i);
      e4m3[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(isa::fp8e4m3_to_f32(b)) >> 16);
      e5m2[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(isa::fp8e5m2_to_f32(b)) >> 16);
    }
  }
};

const Fp8ToBf16 &fp8_tables() {
  static const Fp8ToBf16 tables;
  return tables;
}

bool is_fp8(DType t) {
  return t == DType::kFp8E4m3 || t == DType::kFp8E5m2;
}
bool bf16_path_dtype(DType t) {
  return t == DType::kBf16 || is_fp8(t);
}

bool aligned(const std::byte *p, size_t to) {
  return reinterpret_cast<uintptr_t>(p) % to == 0;
}

// A row-major matrix view: rows = partitions, row i at ptr + i * ld elements.
struct Matrix {
  const void *ptr = nullptr;
  int64_t ld = 0;
};

// Can the tile be handed to a GEMM as is, as a matrix of `elem_size` elements?
bool direct(const Tile &t, DType want) {
  return t.dtype == want && t.contiguous() && aligned(t.base, t.elem_size) &&
         t.partition_pitch % static_cast<ptrdiff_t>(t.elem_size) == 0 &&
         t.partition_pitch / static_cast<ptrdiff_t>(t.elem_size) >=
             static_cast<ptrdiff_t>(std::max<uint64_t>(t.free_elements, 1));
}

// Reusable packing buffers for the bf16 path, one per operand.
std::vector<uint16_t> &bf16_scratch(unsigned slot, size_t n) {
  thread_local std::array<std::vector<uint16_t>, 2> buffers;
  auto &v = buffers[slot];
  if (v.size() < n) v.resize(n);
  return v;
}

// The tile (bf16 or fp8) as a bf16 matrix: in place when it is contiguous bf16, else packed.
Matrix as_bf16(const Tile &t, unsigned slot) {
  if (direct(t, DType::kBf16)) return {t.base, t.partition_pitch / 2};
  const size_t cols = t.free_elements;
  uint16_t *out = bf16_scratch(slot, t.partitions * cols).data();
  if (t.dtype == DType::kBf16) {
    for (uint32_t p = 0; p < t.partitions; ++p)
      load_row_raw(t, p, reinterpret_cast<std::byte *>(out + p * cols));
  } else {
    const auto &lut = t.dtype == DType::kFp8E4m3 ? fp8_tables().e4m3 : fp8_tables().e5m2;
    const bool contiguous = t.contiguous();
    thread_local std::vector<std::byte> row;
    if (!contiguous && row.size() < cols) row.resize(cols);
    for (uint32_t p = 0; p < t.partitions; ++p) {
      const std::byte *src = t.partition(p);
      if (!contiguous) {
        load_row_raw(t, p, row.data());
        src = row.data();
      }
      uint16_t *dst = out + p * cols;
      for (size_t i = 0; i < cols; ++i) dst[i] = lut[static_cast<uint8_t>(src[i])];
    }
  }
  return {out, static_cast<int64_t>(cols)};
}

// The tile as an fp32 matrix: in place when it is contiguous f32, else converted into scratch.
Matrix as_f32(const Tile &t, unsigned slot, ExecContext &ctx) {
  if (direct(t, DType::kF32)) return {t.base, t.partition_pitch / 4};
  const size_t cols = t.free_elements;
  float *out = ctx.scratch(slot, t.partitions * cols);
  for (uint32_t p = 0; p < t.partitions; ++p) load_row_f32(t, p, out + p * cols);
  return {out, static_cast<int64_t>(cols)};
}

void check_status(dnnl_status_t s, const char *what) {
  if (s != dnnl_success)
    throw ExecFault(
        fmt::format("nc_matmul: oneDNN {} failed (status {})", what, static_cast<int>(s)));
}

}  // namespace

namespace {

// One matmul instruction (at most 128x128x512) is too small to split across threads: OpenMP's
// hand-offs cost more than the math, milliseconds when the machine is busy. Each runs on the
// calling thread; the caller's OpenMP setting is restored for its own code.
class SingleThreadedGemm {
 public:
  SingleThreadedGemm() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~SingleThreadedGemm() { omp_set_num_threads(saved_); }
  SingleThreadedGemm(const SingleThreadedGemm &) = delete;
  SingleThreadedGemm &operator=(const SingleThreadedGemm &) = delete;

 private:
  int saved_;
};

}  // namespace

void op_matmul(const isa::Instruction &inst, ExecContext &ctx) {
  const Tile stat = ctx.resolve(inst.src0, "src0");
  const Tile mov = ctx.resolve(inst.src1, "src1");
  const Tile dst = ctx.resolve(inst.dst, "dst");
  const uint32_t K = stat.partitions;
  const uint64_t M = stat.free_elements, N = mov.free_elements;
  if (mov.partitions != K || dst.partitions != M || dst.free_elements != N)
    throw ExecFault(fmt::format(
        "nc_matmul: shapes do not match: stationary [{},{}], moving [{},{}], dst [{},{}]", K, M,
        mov.partitions, N, dst.partitions, dst.free_elements));
  if (K > isa::kPartitions || M > 128 || N > 512)
    throw ExecFault(fmt::format("nc_matmul: K={} M={} N={} exceed 128 x 128 x 512", K, M, N));
  if (dst.dtype != DType::kF32 && dst.dtype != DType::kBf16)
    throw ExecFault(
        fmt::format("nc_matmul: dst is {}, not f32 or bf16", isa::dtype_name(dst.dtype)));
  const bool start = (inst.flags & isa::kFlagMatmulStart) != 0;
  if (M == 0 || N == 0) return;

  // Output: PSUM itself when it is contiguous fp32, else an fp32 copy.
  const bool dst_direct = direct(dst, DType::kF32);
  float *c = nullptr;
  int64_t ldc = 0;
  if (dst_direct) {
    c = reinterpret_cast<float *>(dst.base);
    ldc = dst.partition_pitch / 4;
  } else {
    c = ctx.scratch(2, M * N);
    ldc = static_cast<int64_t>(N);
    if (!start)
      for (uint32_t m = 0; m < M; ++m) load_row_f32(dst, m, c + m * N);
  }

  if (K == 0) {
    if (start)
      for (uint32_t m = 0; m < M; ++m) std::fill_n(c + m * ldc, N, 0.0f);
  } else {
    const SingleThreadedGemm single_threaded;
    const float beta = start ? 0.0f : 1.0f;
    const auto m = static_cast<dnnl_dim_t>(M), n = static_cast<dnnl_dim_t>(N),
               k = static_cast<dnnl_dim_t>(K);
    const bool f32_a = stat.dtype == DType::kF32, f32_b = mov.dtype == DType::kF32;
    if (f32_a != f32_b)
      throw ExecFault(fmt::format("nc_matmul: {} with {}: fp32 operands go only with fp32",
                                  isa::dtype_name(stat.dtype), isa::dtype_name(mov.dtype)));
    bool done = false;
    if (bf16_path_dtype(stat.dtype) && bf16_path_dtype(mov.dtype)) {
      const Matrix a = as_bf16(stat, 0), b = as_bf16(mov, 1);
      // Unimplemented on CPUs without AVX512 bf16 support in oneDNN: fall back to fp32 below.
      done = dnnl_gemm_bf16bf16f32('T', 'N', m, n, k, 1.0f, a.ptr, a.ld, b.ptr, b.ld, beta, c,
                                   ldc) == dnnl_success;
    }
    if (!done) {
      for (const Tile *t : {&stat, &mov})
        if (!isa::dtype_is_float(t->dtype))
          throw ExecFault(
              fmt::format("nc_matmul: {} is not a float type", isa::dtype_name(t->dtype)));
      const Matrix a = as_f32(stat, 0, ctx), b = as_f32(mov, 1, ctx);
      check_status(dnnl_sgemm('T', 'N', m, n, k, 1.0f, static_cast<const float *>(a.ptr), a.ld,
                              static_cast<const float *>(b.ptr), b.ld, beta, c, ldc),
                   "sgemm");
    }
  }

  if (!dst_direct)
    for (uint32_t r = 0; r < M; ++r) store_row_f32(dst, r, c + r * N);
}

// nc_transpose: dst[F,P] <- src[P,F]. Same dtype: bit-exact moves; otherwise through fp32.
void op_transpose(const isa::Instruction &inst, ExecContext &ctx) {
  const Tile src = ctx.resolve(inst.src0, "src0");
  const Tile dst = ctx.resolve(inst.dst, "dst");
  const uint32_t P = src.partitions;
  const uint64_t F = src.free_elements;
  if (dst.partitions != F || dst.free_elements != P)
    throw ExecFault(fmt::format("nc_transpose: src [{},{}] does not transpose into dst [{},{}]", P,
                                F, dst.partitions, dst.free_elements));
  const uint32_t limit = inst.engine == isa::Engine::kVector ? 32 : 128;
  if (P > limit || F > limit)
    throw ExecFault(
        fmt::format("nc_transpose: [{},{}] exceeds {} x {} on this engine", P, F, limit, limit));
  if (P == 0 || F == 0) return;
  const size_t total = size_t{P} * F;
  if (src.dtype == dst.dtype) {
    const size_t es = src.elem_size;
    auto *in = reinterpret_cast<std::byte *>(ctx.scratch(0, (total * es + 3) / 4));
    auto *out = reinterpret_cast<std::byte *>(ctx.scratch(1, (total * es + 3) / 4));
    for (uint32_t p = 0; p < P; ++p) load_row_raw(src, p, in + p * F * es);
    for (size_t f = 0; f < F; ++f)
      for (uint32_t p = 0; p < P; ++p)
        std::memcpy(out + (f * P + p) * es, in + (p * F + f) * es, es);
    for (uint32_t f = 0; f < F; ++f) store_row_raw(dst, f, out + f * P * es);
  } else {
    float *in = ctx.scratch(0, total), *out = ctx.scratch(1, total);
    for (uint32_t p = 0; p < P; ++p) load_row_f32(src, p, in + p * F);
    for (size_t f = 0; f < F; ++f)
      for (uint32_t p = 0; p < P; ++p) out[f * P + p] = in[p * F + f];
    for (uint32_t f = 0; f < F; ++f) store_row_f32(dst, f, out + f * P);
  }
}

}  // namespace trn::sim::exec
