// libFuzzer target: assemble arbitrary text; when it assembles, the disassembly must assemble
// to the same program field for field (and print the same text again).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "isa/assembler.hpp"
#include "isa/disassembler.hpp"

using namespace trn::isa;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  auto first = assemble(text, "fuzz.s");
  if (auto *err = std::get_if<AsmError>(&first)) {
    (void)err->to_string();
    return 0;
  }
  const Program &p = std::get<Program>(first);
  std::string listing = disassemble(p);
  auto second = assemble(listing, "roundtrip.s");
  if (auto *err = std::get_if<AsmError>(&second)) {
    std::fprintf(stderr, "disassembly does not assemble: %s\n--- listing:\n%s\n",
                 err->to_string().c_str(), listing.c_str());
    std::abort();
  }
  const Program &q = std::get<Program>(second);
  if (auto diff = program_difference(p, q)) {
    std::fprintf(stderr, "round trip changed the program: %s\n--- listing:\n%s\n", diff->c_str(),
                 listing.c_str());
    std::abort();
  }
  if (disassemble(q) != listing) {
    std::fprintf(stderr, "disassembly is not stable\n--- listing:\n%s\n", listing.c_str());
    std::abort();
  }
  return 0;
}
