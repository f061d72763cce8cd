// Helpers for tests of builder kernels: the build target of a simulated core, and running a
// kernel on one with HBM buffers as host vectors.
#pragma once

#include <variant>

#include "exec_helpers.hpp"
#include "kbuild/kernel_builder.hpp"

namespace trn::test {

// The builder target of a simulated core of generation `g`: the core the simulator runs it on, with
// all of its SBUF to fill.
inline kbuild::BuildTarget build_target(trn_generation_t g) {
  kbuild::BuildTarget t;
  t.core = sim::core_spec(g);
  return t;
}

// The program, or the test fails with the builder's error.
inline isa::Program built(std::variant<isa::Program, std::string> result) {
  if (auto *err = std::get_if<std::string>(&result)) FAIL(*err);
  return std::move(std::get<isa::Program>(result));
}

// Loads `src` into `dst` and doubles it: a helper in another file than the kernel that calls it,
// so that the kernel's instructions come from two source files.
inline void load_doubled(kbuild::KernelBuilder &kb, const kbuild::Tile &dst,
                         const kbuild::HbmView &src) {
  kb.load(dst, src);
  kb.tensor_scalar(dst, dst, isa::AluOp::kMultiply, 2.0f);
}

}  // namespace trn::test
