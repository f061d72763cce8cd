// libFuzzer target for the kernel loader: read_kernel must never crash or read out of bounds;
// what it accepts must pass through validate_program without crashing and survive a
// write/read round trip unchanged; what it and validate_program accept (what trn_kernel_load
// accepts) must survive disassembly and assembly (trn-objdump | trn-as) byte for byte (abort
// otherwise).
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <variant>

#include "isa/assembler.hpp"
#include "isa/container.hpp"
#include "isa/disassembler.hpp"
#include "isa/target.hpp"
#include "isa/validate.hpp"
#include "round_trip.hpp"

namespace {

using namespace trn::isa;

bool same_ap(const AccessPattern &a, const AccessPattern &b) {
  if (a.space != b.space || a.dtype != b.dtype || a.arg != b.arg ||
      a.partition_start != b.partition_start || a.partition_count != b.partition_count ||
      a.partition_stride != b.partition_stride || a.offset != b.offset || a.num_dims != b.num_dims)
    return false;
  for (size_t d = 0; d < kMaxFreeDims; ++d)
    if (a.dims[d].stride != b.dims[d].stride || a.dims[d].count != b.dims[d].count) return false;
  return true;
}

bool same_instruction(const Instruction &a, const Instruction &b) {
  return a.opcode == b.opcode && a.engine == b.engine && a.func == b.func && a.func2 == b.func2 &&
         a.queue == b.queue && a.flags == b.flags && same_ap(a.dst, b.dst) &&
         same_ap(a.dst2, b.dst2) && same_ap(a.src0, b.src0) && same_ap(a.src1, b.src1) &&
         same_ap(a.src2, b.src2) &&
         std::bit_cast<uint32_t>(a.imm[0]) == std::bit_cast<uint32_t>(b.imm[0]) &&
         std::bit_cast<uint32_t>(a.imm[1]) == std::bit_cast<uint32_t>(b.imm[1]) &&
         a.iimm == b.iimm && a.wait.cmp == b.wait.cmp && a.wait.sem == b.wait.sem &&
         a.wait.value == b.wait.value && a.signal.op == b.signal.op &&
         a.signal.sem == b.signal.sem && a.signal.value == b.signal.value;
}

bool same_program(const Program &a, const Program &b) {
  if (a.name != b.name || a.args.size() != b.args.size() || a.constants != b.constants ||
      a.source_file != b.source_file || a.source_files != b.source_files)
    return false;
  for (size_t i = 0; i < a.args.size(); ++i)
    if (a.args[i].name != b.args[i].name || a.args[i].dtype != b.args[i].dtype ||
        a.args[i].shape != b.args[i].shape || a.args[i].direction != b.args[i].direction)
      return false;
  for (uint32_t e = 0; e < kEngineCount; ++e) {
    if (a.streams[e].size() != b.streams[e].size() || a.source_lines[e] != b.source_lines[e] ||
        a.source_file_ids[e] != b.source_file_ids[e])
      return false;
    for (size_t i = 0; i < a.streams[e].size(); ++i)
      if (!same_instruction(a.streams[e][i], b.streams[e][i])) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte *>(data), size);
  Program p;
  if (read_kernel(bytes, p)) return 0;  // rejected with a reason: fine
  const bool valid = !validate_program(p, *core_spec(kDefaultGeneration));
  const auto written = trn::fuzz::check_round_trip(
      p, [](std::span<const std::byte> b, Program &q) { return read_kernel(b, q); },
      [](const Program &q) { return write_kernel(q); }, same_program, "kernel");
  if (!valid) return 0;
  const std::string listing = disassemble(p);
  auto again = assemble(listing, "listing.s");
  if (auto *err = std::get_if<AsmError>(&again)) {
    std::fprintf(stderr, "the disassembly does not assemble: %s\n--- listing:\n%s\n",
                 err->to_string().c_str(), listing.c_str());
    std::abort();
  }
  if (write_kernel(std::get<Program>(again)) != written) {
    std::fprintf(stderr, "disassembly and assembly changed the kernel\n--- listing:\n%s\n",
                 listing.c_str());
    std::abort();
  }
  return 0;
}
