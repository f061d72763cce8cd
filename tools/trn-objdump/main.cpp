// trn-objdump: print a kernel binary as assembly (docs/assembly.md), or a summary of it.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "common/read_file.hpp"
#include "isa/container.hpp"
#include "isa/disassembler.hpp"

using namespace trn::isa;

namespace {

std::string headers(const Program &p) {
  std::string out = fmt::format("kernel: {}\n", p.name);
  if (!p.source_file.empty()) out += fmt::format("source: {}\n", p.source_file);
  for (size_t f = 0; f < p.source_files.size(); ++f)
    out += fmt::format("source {}: {}\n", f + 1, p.source_files[f]);
  out += fmt::format("\narguments: {}\n", p.args.size());
  if (!p.args.empty()) {
    out += fmt::format("  {:>5}  {:<24} {:<6} {:<8} {:<20} {:>14}\n", "index", "name", "dir",
                       "dtype", "shape", "bytes");
    for (size_t i = 0; i < p.args.size(); ++i) {
      const Argument &a = p.args[i];
      out += fmt::format(
          "  {:>5}  {:<24} {:<6} {:<8} {:<20} {:>14}\n", i, a.name, arg_direction_name(a.direction),
          dtype_name(a.dtype),
          a.is_scalar() ? std::string("scalar") : fmt::format("[{}]", fmt::join(a.shape, ",")),
          a.bytes());
    }
  }
  out += fmt::format("\ninstructions: {}\n", p.instruction_count());
  for (uint32_t e = 0; e < kEngineCount; ++e) {
    const auto &stream = p.streams[e];
    std::array<size_t, kOpcodeCount> per_op{};
    for (const Instruction &in : stream)
      if (static_cast<uint32_t>(in.opcode) < kOpcodeCount)
        ++per_op[static_cast<uint32_t>(in.opcode)];
    std::string ops;
    for (uint32_t o = 0; o < kOpcodeCount; ++o)
      if (per_op[o])
        ops += fmt::format("{}{} {}", ops.empty() ? "" : ", ", per_op[o],
                           opcode_name(static_cast<Opcode>(o)));
    out += fmt::format("  {:<7} {:>8}{}{}{}\n", engine_name(static_cast<Engine>(e)), stream.size(),
                       ops.empty() ? "" : "  (", ops, ops.empty() ? "" : ")");
  }
  out += fmt::format("\nconstants: {} bytes\n", p.constants.size());
  bool debug = false;
  for (const auto &l : p.source_lines) debug = debug || !l.empty();
  out += fmt::format("debug lines: {}\n", debug ? "yes" : "no");
  return out;
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"trn-objdump: print a kernel binary (.trnk) as assembly"};
  app.set_help_flag("--help", "print this help and exit");
  std::string input;
  bool show_headers = false;
  app.add_option("kernel", input, "kernel binary")->required();
  app.add_flag("-h,--headers", show_headers,
               "print a summary: name, arguments, instructions per engine, constants size");
  CLI11_PARSE(app, argc, argv);

  std::vector<std::byte> bytes;
  if (auto err = trn::common::read_regular_file(input, trn::common::kMaxKernelFileBytes, bytes)) {
    std::fprintf(stderr, "trn-objdump: cannot read %s: %s\n", input.c_str(), err->reason.c_str());
    return 1;
  }
  Program program;
  if (auto why = read_kernel(bytes, program)) {
    std::fprintf(stderr, "trn-objdump: %s: not a valid kernel binary: %s\n", input.c_str(),
                 why->c_str());
    return 1;
  }
  std::fputs((show_headers ? headers(program) : disassemble(program)).c_str(), stdout);
  return 0;
}
