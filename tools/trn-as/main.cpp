// trn-as: assemble a text kernel (docs/assembly.md) into a kernel binary, validating it against
// a target NeuronCore generation first.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "common/read_file.hpp"
#include "isa/assembler.hpp"
#include "isa/container.hpp"
#include "isa/target.hpp"
#include "isa/validate.hpp"
#include "tool_common/cli_parse.hpp"

using namespace trn::isa;

namespace {

std::string default_output(const std::string &input) {
  size_t slash = input.rfind('/');
  size_t dot = input.rfind('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash))
    return input.substr(0, dot) + ".trnk";
  return input + ".trnk";
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"trn-as: assemble a kernel (docs/assembly.md) into a kernel binary (.trnk)"};
  std::string input, output, target_name = "trn2";
  app.add_option("input", input, "assembly source; - reads standard input (then -o is required)")
      ->required();
  app.add_option("-o,--output", output, "output binary (default: the input with .trnk)");
  app.set_version_flag("--version", std::string("trn-as ") + TRN_RELEASE_STRING);
  app.add_option("--target", target_name, "NeuronCore generation to validate for")
      ->check([](const std::string &name) -> std::string {
        return parse_generation(name) ? "" : name + " is not a generation (trn1, trn2 or trn3)";
      });
  if (auto status = trn::tools::parse_command_line(app, "trn-as", argc, argv)) return *status;

  // The generation's core, as the device that runs the kernel validates it (isa/target.hpp).
  const Target target = *core_spec(*parse_generation(target_name));

  const bool from_stdin = input == "-";
  if (from_stdin && output.empty()) {
    std::fprintf(stderr, "trn-as: reading standard input (-) needs -o FILE\n");
    return 1;
  }
  if (output.empty()) output = default_output(input);
  if (output == input) {
    std::fprintf(stderr, "trn-as: the output %s would overwrite the source: name another with -o\n",
                 output.c_str());
    return 1;
  }
  std::vector<std::byte> bytes_in;
  if (auto err = from_stdin ? trn::common::read_all(0, trn::common::kMaxKernelFileBytes, bytes_in)
                            : trn::common::read_regular_file(
                                  input, trn::common::kMaxKernelFileBytes, bytes_in)) {
    std::fprintf(stderr, "trn-as: cannot read %s: %s\n",
                 from_stdin ? "standard input" : input.c_str(), err->reason.c_str());
    return 1;
  }
  if (from_stdin) input = "<stdin>";
  const std::string text(reinterpret_cast<const char *>(bytes_in.data()), bytes_in.size());
  if (text.compare(0, 4, "\177ELF") == 0) {
    std::fprintf(stderr,
                 "trn-as: %s is a binary (ELF), not assembly text: trn-objdump prints a kernel "
                 "binary as assembly\n",
                 input.c_str());
    return 1;
  }
  AsmLineMap lines;
  auto result = assemble(text, input, &lines);
  if (auto *err = std::get_if<AsmError>(&result)) {
    std::fprintf(stderr, "%s\n", err->to_string().c_str());
    return 1;
  }
  const Program &program = std::get<Program>(result);

  // Every instruction that breaks a rule, against its source line; then whole-program rules.
  int errors = 0;
  for (uint32_t e = 0; e < kEngineCount; ++e) {
    const auto &stream = program.streams[e];
    for (size_t i = 0; i < stream.size(); ++i) {
      auto why = check_instruction(stream[i], target, &program);
      if (!why) continue;
      uint32_t line = i < lines[e].size() ? lines[e][i] : 0;
      std::fprintf(stderr, "%s:%u: error: %s: %s\n", input.c_str(), line,
                   instruction_label(static_cast<Engine>(e), i, stream[i].opcode).c_str(),
                   why->c_str());
      if (++errors >= 50) break;
    }
  }
  if (errors == 0) {
    if (auto why = validate_program(program, target)) {
      std::fprintf(stderr, "%s: error: %s\n", input.c_str(), why->c_str());
      errors = 1;
    }
  }
  if (errors) return 1;

  std::vector<std::byte> bytes = write_kernel(program);
  Program check;
  if (auto why = read_kernel(bytes, check)) {
    std::fprintf(stderr, "%s: error: the kernel cannot be encoded: %s\n", input.c_str(),
                 why->c_str());
    return 1;
  }
  errno = 0;  // what the open or the write sets, not something older
  std::ofstream out(output, std::ios::binary | std::ios::trunc);
  const int open_errno = errno;
  out.write(reinterpret_cast<const char *>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "trn-as: cannot write %s: %s\n", output.c_str(),
                 std::strerror(open_errno != 0 ? open_errno : errno));
    return 1;
  }
  return 0;
}
