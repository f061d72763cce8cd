// Randomized: kernels of random operations over overlapping views of a few SBUF tiles (and an HBM
// scratch tensor), on engines and queues the builder picks (or random hints), run with the
// simulator's race detection on and compared with the same operations applied in program order
// on the host. Every value stays a small integer, so every result is exact.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "kbuild/kernel_builder.hpp"
#include "support/kbuild_helpers.hpp"

using namespace trn;
using namespace trn::kbuild;
using isa::DType;

namespace {

constexpr uint32_t kArenas = 3, kWidth = 256, kScratchRows = 128;
constexpr float kLimit = 1 << 20;  // results beyond this are replaced by a bounded op

struct View {
  uint32_t arena, p0, np, c0, nc;
  bool overlaps(const View &o) const {
    return arena == o.arena && p0 < o.p0 + o.np && o.p0 < p0 + np && c0 < o.c0 + o.nc &&
           o.c0 < c0 + nc;
  }
  bool operator==(const View &o) const {
    return arena == o.arena && p0 == o.p0 && np == o.np && c0 == o.c0 && nc == o.nc;
  }
};

// The host's copy of the arenas, and the operations on it.
struct Host {
  std::vector<float> arena[kArenas];
  std::vector<float> scratch = std::vector<float>(kScratchRows * kWidth, 0.0f);
  Host() {
    for (auto &a : arena) a.assign(128 * kWidth, 0.0f);
  }
  float &at(const View &v, uint32_t p, uint32_t c) {
    return arena[v.arena][(v.p0 + p) * kWidth + v.c0 + c];
  }
  std::vector<float> read(const View &v) {
    std::vector<float> out;
    for (uint32_t p = 0; p < v.np; ++p)
      for (uint32_t c = 0; c < v.nc; ++c) out.push_back(at(v, p, c));
    return out;
  }
  void write(const View &v, const std::vector<float> &values) {
    size_t i = 0;
    for (uint32_t p = 0; p < v.np; ++p)
      for (uint32_t c = 0; c < v.nc; ++c) at(v, p, c) = values[i++];
  }
};

float alu(AluOp op, float a, float b) {
  switch (op) {
    case AluOp::kAdd: return a + b;
    case AluOp::kSubtract: return a - b;
    case AluOp::kMultiply: return a * b;
    case AluOp::kMax: return std::max(a, b);
    default: return std::min(a, b);
  }
}

bool bounded(const std::vector<float> &v) {
  for (float x : v)
    if (std::abs(x) > kLimit) return false;
  return true;
}

struct Case {
  isa::Program program;
  Host host;  // the expected final state
  std::vector<float> initial[kArenas];
};

Case random_kernel(uint32_t seed, const BuildTarget &target, int ops) {
  std::mt19937 rng(seed);
  auto pick = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  KernelBuilder kb("random_" + std::to_string(seed), target);
  const HbmTensor in = kb.input("in", DType::kF32, {kArenas * 128, kWidth});
  const HbmTensor scratch = kb.inout("scratch", DType::kF32, {kScratchRows, kWidth});
  const HbmTensor out = kb.output("out", DType::kF32, {kArenas * 128, kWidth});
  Case c;
  std::vector<Tile> arenas;
  for (uint32_t a = 0; a < kArenas; ++a) {
    arenas.push_back(kb.sbuf(DType::kF32, 128, {kWidth}, "arena" + std::to_string(a)));
    c.initial[a].resize(128 * kWidth);
    for (float &v : c.initial[a]) v = float(int(pick(201)) - 100);
    c.host.arena[a] = c.initial[a];
    kb.load(arenas[a], in.tile(a * 128ull, 128, 0, kWidth));
  }
  auto tile_of = [&](const View &v) {
    return arenas[v.arena].partition_slice(v.p0, v.np).cols(v.c0, v.nc);
  };
  // A random view of a random shape, and another of the same shape.
  auto random_view = [&](uint32_t np, uint32_t nc) {
    const uint32_t p0 = np == 128 ? 0 : np == 64 ? 64 * pick(2) : 32 * pick(4);
    return View{pick(kArenas), p0, np, pick(kWidth - nc + 1), nc};
  };
  const Engine engines[] = {Engine::kVector, Engine::kGpSimd};
  for (int i = 0; i < ops; ++i) {
    const uint32_t shapes_p[] = {32, 64, 128}, shapes_c[] = {16, 64, 128, 256};
    const uint32_t np = shapes_p[pick(3)], nc = shapes_c[pick(4)];
    View dst = random_view(np, nc), a = random_view(np, nc), b = random_view(np, nc);
    // An instruction's destination is its source or apart from it (never half over it).
    if ((dst.overlaps(a) && !(dst == a)) || (dst.overlaps(b) && !(dst == b))) continue;
    Opts opts;
    if (pick(3) == 0) opts.engine = engines[pick(2)];
    const std::vector<float> va = c.host.read(a), vb = c.host.read(b);
    std::vector<float> result(va.size());
    switch (pick(6)) {
      case 0: {  // tensor_tensor
        AluOp op = std::array{AluOp::kAdd, AluOp::kSubtract, AluOp::kMax, AluOp::kMin}[pick(4)];
        for (size_t k = 0; k < va.size(); ++k) result[k] = alu(op, va[k], vb[k]);
        if (!bounded(result)) {
          op = AluOp::kMax;
          for (size_t k = 0; k < va.size(); ++k) result[k] = alu(op, va[k], vb[k]);
        }
        kb.tensor_tensor(tile_of(dst), tile_of(a), tile_of(b), op, opts);
        break;
      }
      case 1: {  // tensor_scalar: (a * k) + m, or clamped
        const float k = std::array{-1.0f, 2.0f, 3.0f}[pick(3)], m = float(int(pick(7)) - 3);
        for (size_t j = 0; j < va.size(); ++j) result[j] = va[j] * k + m;
        AluOp op1 = AluOp::kAdd;
        float operand1 = m;
        if (!bounded(result)) {
          op1 = AluOp::kMin;
          operand1 = 1000.0f;
          for (size_t j = 0; j < va.size(); ++j)
            result[j] = std::min(std::min(va[j] * k, kLimit), 1000.0f);
          if (!bounded(result)) continue;
        }
        kb.tensor_scalar(tile_of(dst), tile_of(a), AluOp::kMultiply, k, op1, operand1, false, false,
                         opts);
        break;
      }
      case 2:  // copy
        result = va;
        kb.copy(tile_of(dst), tile_of(a), opts);
        break;
      case 3: {  // memset
        const float v = float(int(pick(41)) - 20);
        result.assign(result.size(), v);
        kb.memset(tile_of(dst), v, opts);
        break;
      }
      case 4: {  // activation on the scalar engine: x * s + b
        const float s = std::array{1.0f, -1.0f, 2.0f}[pick(3)], bias = float(int(pick(5)) - 2);
        for (size_t j = 0; j < va.size(); ++j) result[j] = va[j] * s + bias;
        if (!bounded(result)) continue;
        kb.activation(tile_of(dst), tile_of(a), ActFunc::kIdentity, s, bias);
        break;
      }
      default: {  // through HBM: store a view to scratch rows, load them back into dst
        const uint32_t row = pick(kScratchRows - np + 1), col = pick(kWidth - nc + 1);
        const HbmView rows = scratch.tile(row, np, col, nc);
        Opts store_opts, load_opts;
        if (pick(2))
          store_opts.engine = std::array{Engine::kSync, Engine::kScalar, Engine::kGpSimd}[pick(3)];
        if (pick(2)) load_opts.queue = static_cast<uint8_t>(pick(16));
        kb.store(rows, tile_of(a), store_opts);
        kb.load(tile_of(dst), rows, load_opts);
        for (uint32_t p = 0; p < np; ++p)
          for (uint32_t q = 0; q < nc; ++q)
            c.host.scratch[(row + p) * kWidth + col + q] = va[p * nc + q];
        result = va;
        break;
      }
    }
    c.host.write(dst, result);
  }
  for (uint32_t a = 0; a < kArenas; ++a) kb.store(out.tile(a * 128ull, 128, 0, kWidth), arenas[a]);
  c.program = test::built(kb.finish());
  return c;
}

}  // namespace

TEST_CASE("kbuild: random kernels over overlapping tiles run race-free and exact", "[numerics]") {
  const trn_generation_t generations[] = {TRN_GENERATION_TRN1, TRN_GENERATION_TRN2};
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    const trn_generation_t g = generations[seed % 2];
    CAPTURE(seed, g);
    Case c = random_kernel(seed, test::build_target(g), 80);
    test::HostBuffer in(kArenas * 128 * kWidth * 4), scratch(kScratchRows * kWidth * 4),
        out(kArenas * 128 * kWidth * 4);
    for (uint32_t a = 0; a < kArenas; ++a)
      for (size_t i = 0; i < c.initial[a].size(); ++i)
        in.set<float>(a * 128 * kWidth + i, c.initial[a][i]);
    sim::exec::Executor ex(sim::core_spec(g));
    const auto r =
        test::run_checked(ex, c.program, {in.binding(), scratch.binding(), out.binding()});
    INFO(r.report.message);
    REQUIRE(r.report.status == sim::exec::RunStatus::kOk);
    for (uint32_t a = 0; a < kArenas; ++a)
      for (size_t i = 0; i < c.host.arena[a].size(); ++i)
        REQUIRE(out.at<float>(a * 128 * kWidth + i) == c.host.arena[a][i]);
    for (size_t i = 0; i < c.host.scratch.size(); ++i)
      REQUIRE(scratch.at<float>(i) == c.host.scratch[i]);
  }
}
