#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "exec/core_memory.hpp"
#include "exec/exec_context.hpp"
#include "exec/ops.hpp"
#include "isa/builder.hpp"
#include "isa/dtype.hpp"

using namespace trn;
using isa::DType;

namespace {

struct Core {
  sim::exec::CoreMemory mem{128, 192 * 1024, 16 * 1024};
  sim::exec::ExecContext ctx{mem, {}, {}};
};

// Address of free element `i` (row-major over the dims) of partition `p` of an on-chip pattern.
std::byte *element(Core &core, const isa::AccessPattern &ap, uint32_t p, uint64_t i) {
  int64_t off = static_cast<int64_t>(ap.offset);
  for (uint32_t d = ap.num_dims; d-- > 0;) {
    const uint64_t c = ap.dims[d].count;
    off += static_cast<int64_t>(i % c) * ap.dims[d].stride * isa::dtype_size(ap.dtype);
    i /= c;
  }
  const uint32_t part = ap.partition_start + p;
  const auto uoff = static_cast<uint64_t>(off);
  return ap.space == isa::MemSpace::kSbuf ? core.mem.sbuf(part, uoff) : core.mem.psum(part, uoff);
}

// A matrix of exact values (partitions x free elements), as doubles.
struct Values {
  uint32_t rows = 0;
  uint64_t cols = 0;
  std::vector<double> v;
  double at(uint32_t r, uint64_t c) const { return v[r * cols + c]; }
};

double to_dtype(DType t, double x) {
  const auto f = static_cast<float>(x);
  std::byte buf[4];
  float back = 0;
  isa::store_f32(t, &f, buf, 1);
  isa::load_f32(t, buf, &back, 1);
  return back;
}

// Fill the pattern with values made exact in its dtype: small integers or uniform [-2, 2).
Values fill(Core &core, const isa::AccessPattern &ap, std::mt19937 &rng, bool integers) {
  Values out{ap.partition_count, ap.free_elements(), {}};
  out.v.resize(out.rows * out.cols);
  std::uniform_int_distribution<int> ints(-8, 8);
  std::uniform_real_distribution<double> reals(-2.0, 2.0);
  for (uint32_t p = 0; p < out.rows; ++p)
    for (uint64_t i = 0; i < out.cols; ++i) {
      const double x = to_dtype(ap.dtype, integers ? ints(rng) : reals(rng));
      const auto f = static_cast<float>(x);
      isa::store_f32(ap.dtype, &f, element(core, ap, p, i), 1);
      out.v[p * out.cols + i] = x;
    }
  return out;
}

Values read(Core &core, const isa::AccessPattern &ap) {
  Values out{ap.partition_count, ap.free_elements(), {}};
  out.v.resize(out.rows * out.cols);
  for (uint32_t p = 0; p < out.rows; ++p)
    for (uint64_t i = 0; i < out.cols; ++i) {
      float f = 0;
      isa::load_f32(ap.dtype, element(core, ap, p, i), &f, 1);
      out.v[p * out.cols + i] = f;
    }
  return out;
}

void run_matmul(Core &core, const isa::AccessPattern &dst, const isa::AccessPattern &stat,
                const isa::AccessPattern &mov, bool start) {
  isa::Instruction inst;
  inst.opcode = isa::Opcode::kMatmul;
  inst.engine = isa::Engine::kTensor;
  inst.dst = dst;
  inst.src0 = stat;
  inst.src1 = mov;
  inst.flags = start ? uint32_t{isa::kFlagMatmulStart} : 0u;
  sim::exec::op_matmul(inst, core.ctx);
}

// ref += stat^T @ mov (double), and the sum of |products| per element for the tolerance.
void reference(const Values &stat, const Values &mov, std::vector<double> &ref,
               std::vector<double> &mag) {
  const uint64_t M = stat.cols, N = mov.cols;
  ref.resize(M * N, 0.0);
  mag.resize(M * N, 0.0);
  for (uint32_t k = 0; k < stat.rows; ++k)
    for (uint64_t m = 0; m < M; ++m) {
      const double a = stat.at(k, m);
      if (a == 0) continue;
      for (uint64_t n = 0; n < N; ++n) {
        ref[m * N + n] += a * mov.at(k, n);
        mag[m * N + n] += std::fabs(a * mov.at(k, n));
      }
    }
}

// Compare the dst pattern with the reference: exact, or within K * 2^-24 * sum|a*b|.
void check(Core &core, const isa::AccessPattern &dst, const std::vector<double> &ref,
           const std::vector<double> &mag, uint32_t K, bool exact) {
  const Values got = read(core, dst);
  REQUIRE(got.v.size() == ref.size());
  size_t bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double tol = exact ? 0.0 : K * std::ldexp(mag[i], -24);
    if (!(std::fabs(got.v[i] - ref[i]) <= tol)) {
      if (bad++ < 3) {
        INFO("element " << i << ": got " << got.v[i] << ", want " << ref[i] << " +- " << tol);
        CHECK(false);
      }
    }
  }
  CHECK(bad == 0);
}

// One start matmul with contiguous tiles at the given places, checked against the reference.
void matmul_case(DType ta, DType tb, uint32_t K, uint32_t M, uint32_t N, bool integers,
                 uint32_t pstart = 0, uint64_t psum_offset = 0) {
  INFO(isa::dtype_name(ta) << " x " << isa::dtype_name(tb) << " K=" << K << " M=" << M << " N=" << N
                           << " pstart=" << pstart);
  Core core;
  std::mt19937 rng(K * 131 + M * 7 + N);
  const auto stat = isa::sbuf_tile(ta, pstart, K, 1024, M);
  const auto mov = isa::sbuf_tile(tb, pstart, K, 8192, N);
  const auto dst = isa::psum_tile(DType::kF32, 0, M, psum_offset, N);
  const Values a = fill(core, stat, rng, integers), b = fill(core, mov, rng, integers);
  run_matmul(core, dst, stat, mov, true);
  std::vector<double> ref, mag;
  reference(a, b, ref, mag);
  check(core, dst, ref, mag, K, integers);
}

const DType kPairs[][2] = {
    {DType::kBf16, DType::kBf16},       {DType::kF16, DType::kF16},
    {DType::kFp8E4m3, DType::kFp8E4m3}, {DType::kFp8E5m2, DType::kFp8E5m2},
    {DType::kF32, DType::kF32},         {DType::kFp8E4m3, DType::kBf16},
    {DType::kBf16, DType::kFp8E5m2},    {DType::kFp8E4m3, DType::kFp8E5m2},
    {DType::kF16, DType::kBf16},        {DType::kFp8E5m2, DType::kF16},
};

}  // namespace

TEST_CASE("tensor ops: matmul of small integers is exact for every input dtype", "[numerics]") {
  for (const auto &pair : kPairs) matmul_case(pair[0], pair[1], 128, 128, 512, true);
}

TEST_CASE("tensor ops: matmul of random values is within fp32 accumulation error", "[numerics]") {
  for (const auto &pair : kPairs) matmul_case(pair[0], pair[1], 128, 128, 512, false);
}

TEST_CASE("tensor ops: matmul odd sizes and partition starts", "[numerics]") {
  for (DType t : {DType::kBf16, DType::kF32, DType::kF16, DType::kFp8E4m3}) {
    matmul_case(t, t, 1, 128, 512, true);
    matmul_case(t, t, 37, 5, 77, true);
    matmul_case(t, t, 37, 1, 1, false);
    matmul_case(t, t, 128, 3, 512, false);
    for (uint32_t start : {32u, 64u, 96u}) matmul_case(t, t, 32, 17, 100, true, start);
    matmul_case(t, t, 64, 128, 129, false, 64);
  }
}

TEST_CASE("tensor ops: matmul writes at an offset inside a PSUM bank") {
  matmul_case(DType::kBf16, DType::kBf16, 128, 64, 256, true, 0, 2048 * 3 + 1024);
  matmul_case(DType::kF32, DType::kF32, 16, 128, 512, false, 0, 2048 * 3);
  // Neighbours of the written range stay untouched.
  Core core;
  std::mt19937 rng(5);
  for (uint32_t p = 0; p < 128; ++p) std::memset(core.mem.psum(p), 0x7f, 16 * 1024);
  const auto stat = isa::sbuf_tile(DType::kBf16, 0, 16, 0, 128);
  const auto mov = isa::sbuf_tile(DType::kBf16, 0, 16, 4096, 100);
  fill(core, stat, rng, true);
  fill(core, mov, rng, true);
  run_matmul(core, isa::psum_tile(DType::kF32, 0, 128, 2048 * 3 + 40, 100), stat, mov, true);
  for (uint32_t p = 0; p < 128; ++p) {
    CHECK(std::to_integer<int>(*core.mem.psum(p, 2048 * 3 + 39)) == 0x7f);
    CHECK(std::to_integer<int>(*core.mem.psum(p, 2048 * 3 + 440)) == 0x7f);
  }
  for (uint32_t p = 0; p < 128; ++p) CHECK(std::to_integer<int>(*core.mem.psum(p, 0)) == 0x7f);
}

TEST_CASE("tensor ops: matmul start overwrites and later matmuls accumulate", "[numerics]") {
  for (DType t : {DType::kBf16, DType::kF32, DType::kF16, DType::kFp8E5m2}) {
    for (bool integers : {true, false}) {
      INFO(isa::dtype_name(t) << (integers ? " integers" : " random"));
      Core core;
      std::mt19937 rng(17);
      const auto dst = isa::psum_tile(DType::kF32, 0, 128, 2048, 512);
      // Garbage (NaN) in PSUM must not leak into a start matmul.
      for (uint32_t p = 0; p < 128; ++p) std::memset(core.mem.psum(p), 0xff, 16 * 1024);
      std::vector<double> ref, mag;
      // K = 256 as two K = 128 halves, then one more accumulation with K = 37.
      for (int step = 0; step < 3; ++step) {
        const uint32_t K = step == 2 ? 37 : 128;
        const auto stat = isa::sbuf_tile(t, 0, K, 0, 128);
        const auto mov = isa::sbuf_tile(t, 0, K, 1024, 512);
        const Values a = fill(core, stat, rng, integers), b = fill(core, mov, rng, integers);
        run_matmul(core, dst, stat, mov, step == 0);
        reference(a, b, ref, mag);
      }
      check(core, dst, ref, mag, 3 * 128, integers);
    }
  }
}

TEST_CASE("tensor ops: matmul with strided operands takes the packing path", "[numerics]") {
  for (DType t : {DType::kBf16, DType::kF32, DType::kFp8E4m3, DType::kF16}) {
    for (bool integers : {true, false}) {
      INFO(isa::dtype_name(t) << (integers ? " integers" : " random"));
      Core core;
      std::mt19937 rng(99);
      const uint32_t K = 96;
      // Stationary: every other element; moving: [4 x 100] blocks 128 apart (no flattening);
      // dst: stride 2 in PSUM; plus a contiguous two-dim moving tile that flattens.
      const auto stat = isa::sbuf(t, 0, K, 64, {{2, 120}});
      const auto mov = isa::sbuf(t, 0, K, 4096, {{128, 4}, {1, 100}});
      const auto dst = isa::psum(DType::kF32, 0, 120, 2048, {{2, 400}});
      const Values a = fill(core, stat, rng, integers), b = fill(core, mov, rng, integers);
      run_matmul(core, dst, stat, mov, true);
      std::vector<double> ref, mag;
      reference(a, b, ref, mag);
      check(core, dst, ref, mag, K, integers);
      // Accumulate into the strided dst from flattening (contiguous) multi-dim tiles.
      const auto stat2 = isa::sbuf(t, 0, K, 32768, {{60, 2}, {1, 60}});
      const auto mov2 = isa::sbuf(t, 0, K, 40960, {{100, 4}, {1, 100}});
      const Values a2 = fill(core, stat2, rng, integers), b2 = fill(core, mov2, rng, integers);
      run_matmul(core, dst, stat2, mov2, false);
      reference(a2, b2, ref, mag);
      check(core, dst, ref, mag, 2 * K, integers);
      // Negative stride on the moving tile.
      const auto mov3 = isa::sbuf(t, 0, K, 60000, {{-1, 400}});
      const Values b3 = fill(core, mov3, rng, integers);
      run_matmul(core, dst, stat, mov3, false);
      reference(a, b3, ref, mag);
      check(core, dst, ref, mag, 3 * K, integers);
    }
  }
}

TEST_CASE("tensor ops: matmul into a bf16 PSUM tile rounds the fp32 sum to nearest even") {
  Core core;
  std::mt19937 rng(3);
  const uint32_t K = 128, M = 64, N = 300;
  const auto dst = isa::psum_tile(DType::kBf16, 0, M, 4096, N);
  std::vector<double> ref, mag;
  for (int step = 0; step < 3; ++step) {
    const auto stat = isa::sbuf_tile(DType::kBf16, 0, K, 0, M);
    const auto mov = isa::sbuf_tile(DType::kFp8E4m3, 0, K, 1024, N);
    const Values a = fill(core, stat, rng, true), b = fill(core, mov, rng, true);
    std::vector<double> prod, pmag;
    reference(a, b, prod, pmag);
    if (step == 0) ref.assign(prod.size(), 0.0);
    // Each step: the stored bf16 value plus the exact product sum, rounded once to bf16.
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = to_dtype(DType::kBf16, ref[i] + prod[i]);
    run_matmul(core, dst, stat, mov, step == 0);
  }
  check(core, dst, ref, ref, K, true);
}

TEST_CASE("tensor ops: matmul keeps fp32 subnormals on the fp32 path") {
  Core core;
  const auto stat = isa::sbuf_tile(DType::kF32, 0, 2, 0, 1);
  const auto mov = isa::sbuf_tile(DType::kF32, 0, 2, 64, 1);
  const auto dst = isa::psum_tile(DType::kF32, 0, 1, 0, 1);
  const float vals[4] = {std::ldexp(1.0f, -140), 0.5f, 1.0f, std::ldexp(1.0f, -141)};
  for (uint32_t k = 0; k < 2; ++k) {
    std::memcpy(core.mem.sbuf(k, 0), &vals[k], 4);
    std::memcpy(core.mem.sbuf(k, 64), &vals[2 + k], 4);
  }
  run_matmul(core, dst, stat, mov, true);
  float got = 0;
  std::memcpy(&got, core.mem.psum(0), 4);
  CHECK(got == std::ldexp(1.0f, -140) + std::ldexp(1.0f, -142));
}

TEST_CASE("tensor ops: matmul rejects operands whose shapes do not match") {
  Core core;
  const auto stat = isa::sbuf_tile(DType::kBf16, 0, 64, 0, 128);
  const auto mov = isa::sbuf_tile(DType::kBf16, 0, 32, 1024, 512);
  CHECK_THROWS_AS(run_matmul(core, isa::psum_tile(DType::kF32, 0, 128, 0, 512), stat, mov, true),
                  sim::exec::ExecFault);
  const auto mov64 = isa::sbuf_tile(DType::kBf16, 0, 64, 1024, 512);
  CHECK_THROWS_AS(run_matmul(core, isa::psum_tile(DType::kF32, 0, 64, 0, 512), stat, mov64, true),
                  sim::exec::ExecFault);
  CHECK_THROWS_AS(run_matmul(core, isa::psum_tile(DType::kF32, 0, 128, 0, 512), stat,
                             isa::sbuf_tile(DType::kF32, 0, 64, 1024, 512), true),
                  sim::exec::ExecFault);
}

namespace {

// Random bit patterns (NaN payloads, subnormals, infinities included) must move bit-exactly.
void transpose_case(isa::Engine engine, const isa::AccessPattern &src,
                    const isa::AccessPattern &dst, uint32_t seed) {
  INFO("engine " << isa::engine_name(engine) << ", " << isa::dtype_name(src.dtype) << " -> "
                 << isa::dtype_name(dst.dtype) << " [" << src.partition_count << ","
                 << src.free_elements() << "]");
  Core core;
  std::mt19937 rng(seed);
  const uint32_t P = src.partition_count;
  const uint64_t F = src.free_elements();
  const uint32_t es = isa::dtype_size(src.dtype);
  const bool same = src.dtype == dst.dtype;
  std::vector<uint8_t> bits(P * F * es);
  for (uint32_t p = 0; p < P; ++p)
    for (uint64_t f = 0; f < F; ++f) {
      uint8_t *b = &bits[(p * F + f) * es];
      for (uint32_t i = 0; i < es; ++i) b[i] = static_cast<uint8_t>(rng());
      if (!same) {  // finite values only when converting
        float v = 0;
        std::byte tmp[4];
        std::memcpy(tmp, b, es);
        isa::load_f32(src.dtype, tmp, &v, 1);
        if (!std::isfinite(v)) b[es - 1] = 0;
      }
      std::memcpy(element(core, src, p, f), b, es);
    }
  isa::Instruction inst;
  inst.opcode = isa::Opcode::kTranspose;
  inst.engine = engine;
  inst.dst = dst;
  inst.src0 = src;
  sim::exec::op_transpose(inst, core.ctx);
  const uint32_t des = isa::dtype_size(dst.dtype);
  size_t bad = 0;
  for (uint64_t f = 0; f < F; ++f)
    for (uint32_t p = 0; p < P; ++p) {
      const std::byte *got = element(core, dst, static_cast<uint32_t>(f), p);
      std::byte want[4];
      std::memcpy(want, &bits[(p * F + f) * es], es);
      if (!same) {
        float v = 0;
        isa::load_f32(src.dtype, want, &v, 1);
        isa::store_f32(dst.dtype, &v, want, 1);
      }
      if (std::memcmp(got, want, des) != 0) ++bad;
    }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("tensor ops: transpose on the tensor engine is bit-exact") {
  const auto tensor = isa::Engine::kTensor;
  for (DType t : {DType::kBf16, DType::kF32, DType::kF16, DType::kFp8E4m3, DType::kFp8E5m2}) {
    transpose_case(tensor, isa::sbuf_tile(t, 0, 128, 512, 128),
                   isa::psum_tile(t, 0, 128, 2048, 128), 1);
    transpose_case(tensor, isa::sbuf_tile(t, 64, 37, 0, 100), isa::psum_tile(t, 0, 100, 0, 37), 2);
  }
  // Widening to fp32 (exact), and a strided source with two free dims.
  for (DType t : {DType::kBf16, DType::kF16, DType::kFp8E4m3, DType::kFp8E5m2})
    transpose_case(tensor, isa::sbuf_tile(t, 0, 128, 0, 128),
                   isa::psum_tile(DType::kF32, 0, 128, 0, 128), 3);
  transpose_case(tensor, isa::sbuf(DType::kBf16, 32, 16, 100, {{40, 3}, {2, 20}}),
                 isa::psum(DType::kBf16, 0, 60, 6144, {{2, 16}}), 4);
}

TEST_CASE("tensor ops: transpose on the vector engine moves 32x32 blocks bit-exactly") {
  const auto vec = isa::Engine::kVector;
  for (DType t : {DType::kBf16, DType::kF32, DType::kI32, DType::kU8, DType::kFp8E4m3}) {
    transpose_case(vec, isa::sbuf_tile(t, 0, 32, 0, 32), isa::sbuf_tile(t, 32, 32, 4096, 32), 5);
    transpose_case(vec, isa::psum_tile(t, 96, 32, 0, 17), isa::sbuf_tile(t, 0, 17, 0, 32), 6);
    transpose_case(vec, isa::sbuf_tile(t, 0, 7, 0, 32), isa::psum_tile(t, 64, 32, 512, 7), 7);
  }
  transpose_case(vec, isa::sbuf_tile(DType::kF16, 0, 32, 0, 32),
                 isa::sbuf_tile(DType::kF32, 0, 32, 8192, 32), 8);
  // In place: the whole source is read before anything is written.
  transpose_case(vec, isa::sbuf_tile(DType::kBf16, 0, 32, 0, 32),
                 isa::sbuf_tile(DType::kBf16, 0, 32, 0, 32), 9);
}

TEST_CASE("tensor ops: transpose rejects mismatched shapes and oversized vector tiles") {
  Core core;
  isa::Instruction inst;
  inst.opcode = isa::Opcode::kTranspose;
  inst.engine = isa::Engine::kTensor;
  inst.src0 = isa::sbuf_tile(DType::kBf16, 0, 64, 0, 32);
  inst.dst = isa::psum_tile(DType::kBf16, 0, 64, 0, 32);
  CHECK_THROWS_AS(sim::exec::op_transpose(inst, core.ctx), sim::exec::ExecFault);
  inst.engine = isa::Engine::kVector;
  inst.dst = isa::psum_tile(DType::kBf16, 0, 32, 0, 64);
  CHECK_THROWS_AS(sim::exec::op_transpose(inst, core.ctx), sim::exec::ExecFault);
}
