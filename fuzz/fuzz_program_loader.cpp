// libFuzzer target for the program reader: read_program must never crash, hang or read out of
// bounds, and what it accepts must survive a write/read round trip unchanged and be exactly
// what write_program writes for it: the reader takes only the canonical layout, so no byte of a
// file can hide from it (abort otherwise).
// The kernels inside are read_kernel's to check, and fuzz_kernel_loader takes them further
// (validation, disassembly); here they only need to come back byte for byte.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "isa/program_container.hpp"
#include "round_trip.hpp"

using namespace trn::isa;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte *>(data), size);
  ProgramImage p;
  if (read_program(bytes, p)) return 0;  // rejected with a reason: fine
  const auto written = trn::fuzz::check_round_trip(
      p, [](std::span<const std::byte> b, ProgramImage &q) { return read_program(b, q); },
      write_program, [](const ProgramImage &a, const ProgramImage &b) { return a == b; },
      "program");
  if (!std::equal(written.begin(), written.end(), bytes.begin(), bytes.end())) {
    std::fprintf(stderr, "the reader accepted a file that is not what the writer writes\n");
    std::abort();
  }
  return 0;
}
