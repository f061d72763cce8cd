// Helpers for tests that run programs on one simulated core: HBM buffers as host vectors.
#pragma once

#include <cstring>
#include <vector>

#include "exec/executor.hpp"
#include "isa/builder.hpp"
#include "isa/dtype.hpp"
#include "isa/validate.hpp"
#include "sim/core_spec.hpp"

namespace trn::test {

struct HostBuffer {
  std::vector<std::byte> bytes;
  explicit HostBuffer(size_t n) : bytes(n) {}
  sim::exec::HbmBinding binding() { return {bytes.data(), bytes.size()}; }
  template <typename T>
  T at(size_t i) const {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    return v;
  }
  template <typename T>
  void set(size_t i, T v) {
    std::memcpy(bytes.data() + i * sizeof(T), &v, sizeof(T));
  }
};

// Validates then runs; the program must be valid for the core.
inline sim::exec::RunResult run_checked(sim::exec::Executor &ex, const isa::Program &p,
                                        std::vector<sim::exec::HbmBinding> args,
                                        bool trace = false) {
  if (auto err = isa::validate_program(p, ex.spec().target())) FAIL(*err);
  sim::exec::RunOptions opt;
  opt.trace = trace;
  return ex.run(p, args, opt);
}

}  // namespace trn::test
