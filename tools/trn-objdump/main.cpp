// trn-objdump: print a kernel binary as assembly (docs/assembly.md), or a summary of it; or a
// program binary's tensors, kernels and schedule, with its kernels' assembly.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <bit>
#include <cstdio>
#include <string>
#include <vector>

#include "common/read_file.hpp"
#include "isa/container.hpp"
#include "isa/disassembler.hpp"
#include "isa/program_container.hpp"
#include "tool_common/cli_parse.hpp"

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

std::string shape_text(const std::vector<uint64_t> &shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// read_program has checked every index and range the printers below follow.
std::string ref_text(const ProgramImage &p, const TensorRef &r) {
  const std::string &name = p.tensors[r.tensor].name;
  return r.offset ? fmt::format("{}[+{}]", name, r.offset) : name;
}

// A scalar binding shows the value the kernel reads: its argument's dtype says how to take the
// bits (scalars are f32 or i32).
std::string scalar_text(const Argument &arg, uint32_t bits) {
  if (dtype_is_float(arg.dtype)) return fmt::format("{}", std::bit_cast<float>(bits));
  return fmt::format("{}", std::bit_cast<int32_t>(bits));
}

std::string step_text(const ProgramImage &p, const std::vector<Program> &kernels,
                      const ProgramStep &s) {
  switch (s.kind) {
    case StepKind::kLaunch: {
      const Program &k = kernels[s.kernel];
      std::vector<std::string> args;
      for (size_t a = 0; a < s.args.size(); ++a)
        args.push_back(fmt::format("{}={}", k.args[a].name,
                                   s.args[a].scalar ? scalar_text(k.args[a], s.args[a].scalar_bits)
                                                    : ref_text(p, s.args[a].ref)));
      return fmt::format("{}({})", k.name, fmt::join(args, ", "));
    }
    case StepKind::kCopy:
      return fmt::format("{} <- {}, {} bytes", ref_text(p, s.dst), ref_text(p, s.src), s.bytes);
    case StepKind::kMemset:
      return fmt::format("{} = 0x{:02x}, {} bytes", ref_text(p, s.dst), s.value, s.bytes);
  }
  return "?";
}

// The program's summary; unless `headers_only`, each kernel's disassembly after it.
std::string program_text(const ProgramImage &p, const std::vector<Program> &kernels,
                         bool headers_only) {
  std::string out = fmt::format("program: {}  ({} kernels, {} tensors, {} steps)\n", p.name,
                                kernels.size(), p.tensors.size(), p.steps.size());
  out += fmt::format("\ntensors: {}\n", p.tensors.size());
  if (!p.tensors.empty())
    out += fmt::format("  {:>5}  {:<24} {:<9} {:<8} {:<20} {:>14}\n", "index", "name", "role",
                       "dtype", "shape", "bytes");
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const ProgramTensor &t = p.tensors[i];
    // A constant read from a file at load names where from.
    const std::string from =
        t.from_file() ? fmt::format("  from {} '{}'", t.source_file, t.source_tensor) : "";
    out += fmt::format("  {:>5}  {:<24} {:<9} {:<8} {:<20} {:>14}{}\n", i, t.name,
                       tensor_role_name(t.role), dtype_name(t.dtype), shape_text(t.shape),
                       t.bytes(), from);
  }
  out += fmt::format("\nkernels: {}\n", kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::vector<std::string> args;
    for (const Argument &a : kernels[i].args)
      args.push_back(fmt::format("{}:{}{} {}", a.name, dtype_name(a.dtype),
                                 a.is_scalar() ? "" : shape_text(a.shape),
                                 a.is_scalar() ? "scalar" : arg_direction_name(a.direction)));
    out += fmt::format("  {:>5}  {}({})\n", i, kernels[i].name, fmt::join(args, ", "));
  }
  out += fmt::format("\nschedule: {} steps\n", p.steps.size());
  if (!p.steps.empty())
    out +=
        fmt::format("  {:>5}  {:<7} {:>4}  {:<12} {}\n", "index", "kind", "core", "deps", "what");
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const ProgramStep &s = p.steps[i];
    out +=
        fmt::format("  {:>5}  {:<7} {:>4}  {:<12} {}\n", i, step_kind_name(s.kind), s.core,
                    s.deps.empty() ? std::string("-") : fmt::format("{}", fmt::join(s.deps, ",")),
                    step_text(p, kernels, s));
  }
  if (!headers_only)
    for (size_t i = 0; i < kernels.size(); ++i)
      out += fmt::format("\n; kernel {}\n{}", i, disassemble(kernels[i]));
  return out;
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"trn-objdump: print a kernel binary (.trnk) as assembly, or a program binary"};
  app.set_help_flag("--help", "print this help and exit");
  std::string input;
  bool show_headers = false;
  app.add_option("binary", input, "kernel or program binary")->required();
  app.set_version_flag("--version", std::string("trn-objdump ") + TRN_RELEASE_STRING);
  app.add_flag("-h,--headers", show_headers,
               "print a summary: name, arguments, instructions per engine, constants size (for "
               "a program: its tables without its kernels' assembly)");
  if (auto status = trn::tools::parse_command_line(app, "trn-objdump", argc, argv)) return *status;

  std::vector<std::byte> bytes;
  if (auto err = trn::common::read_regular_file(input, trn::common::kMaxKernelFileBytes, bytes)) {
    std::fprintf(stderr, "trn-objdump: cannot read %s: %s\n", input.c_str(), err->reason.c_str());
    return 1;
  }
  if (looks_like_program(bytes)) {
    ProgramImage image;
    std::vector<Program> kernels;
    if (auto why = read_program(bytes, image, &kernels)) {
      std::fprintf(stderr, "trn-objdump: %s: not a valid program binary: %s\n", input.c_str(),
                   why->c_str());
      return 1;
    }
    std::fputs(program_text(image, kernels, show_headers).c_str(), stdout);
    return 0;
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
