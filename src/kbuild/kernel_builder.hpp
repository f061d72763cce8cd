// The kernel builder: write a NeuronCore kernel as tiles and operations, in the spirit of NKI
// (`nki.language` / `nki.isa`), and get a program with engines assigned, buffers placed and every
// engine synchronised. docs/kbuild.md shows how to write a kernel.
//
//   KernelBuilder kb("add", target);
//   HbmTensor x = kb.input("x", DType::kF32, {1024, 512}), y = kb.output("y", ...);
//   for (uint64_t r = 0; r < 1024; r += 128) {
//     Tile t = kb.sbuf(DType::kF32, 128, {512});      // placed by the builder
//     kb.load(t, x.tile(r, 128, 0, 512));             // DMA queue chosen by the builder
//     kb.tensor_scalar(t, t, AluOp::kMultiply, 2.0f); // engine chosen by the builder
//     kb.store(y.tile(r, 128, 0, 512), t);            // waits for the multiply, automatically
//   }
//   auto program = kb.finish();                       // or the first error, with its call site
//
// What the builder does for you:
// - Placement: tiles live in SBUF or PSUM for as long as a view of them exists; a buffer whose
//   last view is gone may be reused. Placement is next-fit, so a tile taken in every iteration of
//   a loop rotates through free space (multi-buffering); `ring()` makes the rotation explicit.
// - Synchronisation: every read-after-write, write-after-read and write-after-write between
//   engines and DMA queues gets a semaphore wait unless the two are already ordered; waits that
//   other waits imply are left out (overlap is judged on bounding byte ranges per partition, so
//   interleaved strided views may get a wait they do not strictly need). One semaphore per agent
//   (engine, or issuing engine and queue). Arguments must not alias; inputs are never written.
// - Engines: each operation goes to the engine that can run it and is estimated to be free
//   first (or to the one you name in Opts::engine); loads are issued from the sync engine and
//   stores from gpsimd unless told otherwise, split across DMA queues when they are large.
// - Source locations: every instruction records the C++ line that built it; faults, race
//   reports, profiles and the builder's own errors name it.
//
// Errors (a shape that does not match, a tile that does not fit, an operation no engine can run)
// are recorded with the call site; the first one is what finish() returns, and later calls do
// nothing. Not thread safe: one builder per thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <variant>
#include <vector>

#include "isa/program.hpp"
#include "isa/target.hpp"
#include "kbuild/build_target.hpp"
#include "kbuild/tile.hpp"

namespace trn::kbuild {

using isa::ActFunc;
using isa::AluOp;
using isa::Engine;
using Where = std::source_location;

// Per-call choices the builder would otherwise make.
struct Opts {
  std::optional<Engine> engine = std::nullopt;  // compute: the engine; DMA: the issuing engine
  std::optional<uint8_t> queue = std::nullopt;  // DMA: this queue, and no split
  uint32_t dma_parts = 0;                       // DMA: split into this many transfers (0: by size)
};

// An immediate operand: a constant, a per-partition column tile [P, 1], or a scalar argument.
using Operand = std::variant<float, Tile, ScalarArg>;

class KernelBuilder {
 public:
  KernelBuilder(std::string name, const BuildTarget &target);
  ~KernelBuilder();
  KernelBuilder(const KernelBuilder &) = delete;
  KernelBuilder &operator=(const KernelBuilder &) = delete;

  // Kernel arguments, in launch order.
  HbmTensor input(std::string name, DType dtype, std::vector<uint64_t> shape,
                  Where where = Where::current());
  HbmTensor output(std::string name, DType dtype, std::vector<uint64_t> shape,
                   Where where = Where::current());
  HbmTensor inout(std::string name, DType dtype, std::vector<uint64_t> shape,
                  Where where = Where::current());
  ScalarArg scalar(std::string name, DType dtype = DType::kF32, Where where = Where::current());

  // On-chip tiles: [partitions, free...], row-major in each partition.
  Tile sbuf(DType dtype, uint32_t partitions, std::vector<uint32_t> free, std::string name = {},
            Where where = Where::current());
  Tile psum(DType dtype, uint32_t partitions, std::vector<uint32_t> free, std::string name = {},
            Where where = Where::current());
  TileRing ring(Memory memory, DType dtype, uint32_t partitions, std::vector<uint32_t> free,
                uint32_t buffers, std::string name = {}, Where where = Where::current());

  // DMA between HBM and SBUF (with a dtype cast when they differ).
  void load(const Tile &dst, const HbmView &src, Opts opts = {}, Where where = Where::current());
  void store(const HbmView &dst, const Tile &src, Opts opts = {}, Where where = Where::current());

  // dst[M,N] (PSUM, fp32) = stationary[K,M]^T @ moving[K,N]; accumulate adds to dst.
  void matmul(const Tile &dst, const Tile &stationary, const Tile &moving, bool accumulate,
              Opts opts = {}, Where where = Where::current());
  // dst[F,P] = src[P,F].
  void transpose(const Tile &dst, const Tile &src, Opts opts = {}, Where where = Where::current());
  // dst = func(src * scale + bias); with `reduce_into` ([P,1]), also the sum of dst along the
  // free dims.
  void activation(const Tile &dst, const Tile &src, ActFunc func, Operand scale = 1.0f,
                  Operand bias = 0.0f, const Tile &reduce_into = {}, Opts opts = {},
                  Where where = Where::current());
  void tensor_tensor(const Tile &dst, const Tile &a, const Tile &b, AluOp op, Opts opts = {},
                     Where where = Where::current());
  // dst = (src op0 operand0) op1 operand1; `reverse0/1` put the operand first.
  void tensor_scalar(const Tile &dst, const Tile &src, AluOp op0, Operand operand0,
                     AluOp op1 = AluOp::kBypass, Operand operand1 = 0.0f, bool reverse0 = false,
                     bool reverse1 = false, Opts opts = {}, Where where = Where::current());
  // dst = op-reduce of src over its last `axes` free dims (0: all), negated if asked.
  void reduce(const Tile &dst, const Tile &src, AluOp op, uint32_t axes = 0, bool negate = false,
              Opts opts = {}, Where where = Where::current());
  // dst = src, converting dtypes.
  void copy(const Tile &dst, const Tile &src, Opts opts = {}, Where where = Where::current());
  void memset(const Tile &dst, float value, Opts opts = {}, Where where = Where::current());
  // dst = offset + p * channel_multiplier + sum(step_d * i_d) over `steps` ({step, count} per
  // free dim of dst).
  void iota(const Tile &dst, std::vector<isa::Dim> steps, int32_t offset,
            int32_t channel_multiplier, Opts opts = {}, Where where = Where::current());
  // dst = cmp(value, 0) ? on_true : on_false, value as for iota.
  void select(const Tile &dst, std::vector<isa::Dim> steps, int32_t offset,
              int32_t channel_multiplier, AluOp cmp, const Tile &on_true, float on_false,
              Opts opts = {}, Where where = Where::current());

  // The first error so far (with its call site), if any.
  const std::optional<std::string> &error() const { return error_; }
  // The program, validated for the target, or the first error.
  std::variant<isa::Program, std::string> finish();

  // What the builder decided, for tests and tools.
  struct Stats {
    uint64_t waits = 0;            // semaphore waits inserted
    uint32_t semaphores = 0;       // semaphores used
    uint64_t dma_transfers = 0;    // after splitting
    uint64_t sbuf_peak_bytes = 0;  // per partition
    // The schedule estimate's cost of what was emitted, by the simulator's cost model: busy
    // cycles per engine (in trn_engine_t order) and busy picoseconds per DMA queue.
    std::array<uint64_t, isa::kEngineCount> engine_cycles{};
    std::array<uint64_t, isa::kMaxDmaQueues> dma_busy_ps{};
  };
  Stats stats() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
  std::optional<std::string> error_;

  bool fail(const Where &where, std::string message);
  HbmTensor argument(std::string name, DType dtype, std::vector<uint64_t> shape,
                     isa::ArgDirection dir, const Where &where);
  Tile allocate(Memory memory, DType dtype, uint32_t partitions, std::vector<uint32_t> free,
                std::string name, const Where &where);
  void dma(const isa::AccessPattern &dst, const isa::AccessPattern &src, bool load, Opts opts,
           const Where &where, const std::string &what);
  void compute(isa::Instruction inst, std::vector<Engine> engines, Opts opts, const Where &where);
};

}  // namespace trn::kbuild
