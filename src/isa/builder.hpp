// A small C++ API that builds programs instruction by instruction: the base of the kernel
// builder, and how tests and benchmarks write kernels until they come from binaries.
//
//   ProgramBuilder b("add");
//   auto x = b.arg("x", DType::kF32, {128, 512}, ArgDirection::kIn);
//   b.dma_copy(Engine::kSync, 0, sbuf(DType::kF32, 0, 128, 0, {{1, 512}}),
//              hbm(x, DType::kF32, 0, 512, 128, {{1, 512}})).signal_add(0, 1);
//   b.tensor_tensor(Engine::kVector, ...).wait_ge(0, 1);
//
// A scalar argument stands for an immediate, so one binary serves every value (y = alpha * x):
//   auto alpha = b.scalar_arg("alpha", DType::kF32);
//   b.activation(dst, src, ActFunc::kIdentity).read_scalar(ImmSlot::kImm0, alpha);
//
// at() records where an instruction came from, the C++ call site by default, so that faults,
// validation errors and profiles name "softmax.cpp:57"; a kernel whose instructions come from
// several files (its .cpp and helper headers) keeps a table of them (Program::source_files):
//   b.memset(Engine::kVector, tile, 0.0f).at();                    // this file and line
//   b.memset(Engine::kVector, tile, 0.0f).at("softmax.cpp", 57);  // a given one
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>
#include <version>
#if defined(__cpp_lib_source_location)
#include <source_location>
#endif

#include "isa/program.hpp"

namespace trn::isa {

// Access pattern constructors. Dims are {stride, count} pairs in elements, outermost first.
AccessPattern sbuf(DType t, uint32_t partition_start, uint32_t partitions, uint64_t offset,
                   std::initializer_list<Dim> dims);
AccessPattern psum(DType t, uint32_t partition_start, uint32_t partitions, uint64_t offset,
                   std::initializer_list<Dim> dims);
AccessPattern hbm(uint16_t arg, DType t, uint64_t offset, int64_t row_stride, uint32_t rows,
                  std::initializer_list<Dim> dims);
// A pattern without memory (iota / affine_select): {step, count} pairs.
AccessPattern pattern(std::initializer_list<Dim> dims);
// Contiguous [partitions, free] tiles.
AccessPattern sbuf_tile(DType t, uint32_t partition_start, uint32_t partitions, uint64_t offset,
                        uint32_t free);
AccessPattern psum_tile(DType t, uint32_t partition_start, uint32_t partitions, uint64_t offset,
                        uint32_t free);
// Rows [row, row + rows) x columns [col, col + cols) of a row-major HBM matrix with `ld`
// elements per row.
AccessPattern hbm_tile(uint16_t arg, DType t, uint64_t ld, uint64_t row, uint32_t rows,
                       uint64_t col, uint32_t cols);

class ProgramBuilder;

// A handle on the instruction just added, to attach a semaphore wait or update.
class InstrRef {
 public:
  InstrRef(Program &program, Engine engine, size_t index)
      : program_(&program), engine_(engine), index_(index) {}
  InstrRef &wait_ge(uint16_t sem, uint32_t value);
  InstrRef &wait_eq(uint16_t sem, uint32_t value);
  InstrRef &signal_add(uint16_t sem, uint32_t value = 1);
  InstrRef &signal_set(uint16_t sem, uint32_t value);
  InstrRef &line(uint32_t source_line);
  // The instruction came from `file` at `line`, the call site by default (the file is added to
  // the program's table of source files when it is new): faults, validation errors and
  // profiles then name "file:line". The builtins stand in for std::source_location, which not
  // every supported standard library has (clang 14 with libstdc++ 12 lacks it).
  InstrRef &at(std::string_view file = __builtin_FILE(), uint32_t line = __builtin_LINE());
#if defined(__cpp_lib_source_location)
  InstrRef &at(const std::source_location &loc);
#endif
  // The instruction's `slot` reads scalar argument `arg` at launch (its own value becomes 0).
  InstrRef &read_scalar(ImmSlot slot, uint16_t arg);
  Instruction &get();
  size_t index() const {
    return index_;
  }

 private:
  Program *program_;
  Engine engine_;
  size_t index_;
};

class ProgramBuilder {
 public:
  explicit ProgramBuilder(std::string name);

  uint16_t arg(std::string name, DType dtype, std::vector<uint64_t> shape, ArgDirection dir);
  // A scalar argument (f32 for float immediates, i32 for integer ones), passed at launch.
  uint16_t scalar_arg(std::string name, DType dtype);

  InstrRef dma_copy(Engine issuer, uint8_t queue, const AccessPattern &dst,
                    const AccessPattern &src);
  // dst[M,N] (PSUM) = stationary[K,M]^T @ moving[K,N]; `start` overwrites, else accumulates.
  InstrRef matmul(const AccessPattern &dst, const AccessPattern &stationary,
                  const AccessPattern &moving, bool start);
  InstrRef transpose(Engine engine, const AccessPattern &dst, const AccessPattern &src);
  InstrRef activation(const AccessPattern &dst, const AccessPattern &src, ActFunc func,
                      float scale = 1.0f, float bias = 0.0f);
  InstrRef tensor_tensor(Engine engine, const AccessPattern &dst, const AccessPattern &a,
                         const AccessPattern &b, AluOp op);
  InstrRef tensor_scalar(Engine engine, const AccessPattern &dst, const AccessPattern &src,
                         AluOp op0, float operand0, AluOp op1 = AluOp::kBypass,
                         float operand1 = 0.0f);
  InstrRef tensor_reduce(const AccessPattern &dst, const AccessPattern &src, AluOp op,
                         uint32_t axes = 0, bool negate = false);
  InstrRef tensor_copy(Engine engine, const AccessPattern &dst, const AccessPattern &src);
  InstrRef memset(Engine engine, const AccessPattern &dst, float value);
  InstrRef iota(const AccessPattern &dst, const AccessPattern &pattern, int32_t offset,
                int32_t channel_multiplier);
  InstrRef affine_select(const AccessPattern &dst, const AccessPattern &pattern, int32_t offset,
                         int32_t channel_multiplier, AluOp cmp, const AccessPattern &on_true,
                         float on_false);
  InstrRef sem_wait(Engine engine, uint16_t sem, uint32_t value);
  InstrRef sem_signal(Engine engine, uint16_t sem, uint32_t value = 1);
  // One barrier instruction on every engine.
  void barrier();
  // Any instruction, as is.
  InstrRef add(const Instruction &inst);

  Program &program() { return program_; }
  Program finish() { return std::move(program_); }

 private:
  Program program_;
};

}  // namespace trn::isa
