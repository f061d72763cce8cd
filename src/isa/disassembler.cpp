// The disassembler: each opcode prints in its canonical form (positional operands and named
// clauses, docs/assembly.md), then every field that form does not cover and that differs from
// its default prints as a generic clause (src1=..., imm0=..., flags=...), so nothing is lost.
#include "isa/disassembler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "isa/asm_syntax.hpp"

namespace trn::isa {

namespace {

using namespace syntax;

bool is_identifier(std::string_view s) {
  if (s.empty()) return false;
  auto start = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!start(s[0])) return false;
  for (char c : s)
    if (!start(c) && !(c >= '0' && c <= '9')) return false;
  return true;
}

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c >= 0x20 && c < 0x7f) {
      out += ch;
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  out += '"';
  return out;
}

std::string name_text(std::string_view s) {
  return is_identifier(s) ? std::string(s) : quoted(s);
}

uint32_t bits(float f) {
  return std::bit_cast<uint32_t>(f);
}

// Shortest text that reads back to the same bits.
std::string float_text(float f) {
  uint32_t b = bits(f);
  if (std::isnan(f)) {
    if (b == 0x7fc00000u) return "nan";
    if (b == 0xffc00000u) return "-nan";
    return fmt::format("nan:0x{:08x}", b);
  }
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  return fmt::format("{}", f);
}

bool ap_is_default(const AccessPattern &a) {
  if (a.space != MemSpace::kNone || a.dtype != DType::kInvalid || a.arg != 0 ||
      a.partition_start != 0 || a.partition_count != 0 || a.partition_stride != 0 ||
      a.offset != 0 || a.num_dims != 0)
    return false;
  for (const Dim &d : a.dims)
    if (d.stride != 0 || d.count != 0) return false;
  return true;
}

std::string arg_text(const Program &p, uint16_t arg) {
  if (arg == kConstantsArg) return "const";
  if (arg < p.args.size()) {
    const std::string &name = p.args[arg].name;
    if (is_identifier(name) && name != "const") {
      size_t same = 0;
      for (const Argument &a : p.args) same += a.name == name ? 1 : 0;
      if (same == 1) return name;
    }
  }
  return fmt::format("{}", arg);
}

// The operand naming the scalar argument a slot reads: its bare name when that reads back as
// the argument (an unambiguous identifier, not a reserved word), else arg(INDEX).
std::string scalar_text(const Program &p, uint16_t arg) {
  const std::string name = arg_text(p, arg);
  if (arg < p.args.size() && name == p.args[arg].name && !is_reserved(name)) return name;
  return fmt::format("arg({})", name);
}

std::string ap_text(const Program &p, const AccessPattern &a) {
  if (ap_is_default(a)) return "none";
  std::string s;
  bool on_chip = a.space == MemSpace::kSbuf || a.space == MemSpace::kPsum;
  switch (a.space) {
    case MemSpace::kNone: s = "pattern"; break;
    case MemSpace::kSbuf: s = "sbuf"; break;
    case MemSpace::kPsum: s = "psum"; break;
    case MemSpace::kHbm: s = "hbm"; break;
    default: s = fmt::format("space{}", static_cast<int>(a.space)); break;
  }
  if (a.space == MemSpace::kHbm || a.arg != 0) s += fmt::format("({})", arg_text(p, a.arg));
  if (a.dtype != DType::kInvalid) s += fmt::format(".{}", dtype_name(a.dtype));
  bool rows = a.space == MemSpace::kHbm || a.partition_stride != 0;
  bool parts = on_chip || a.partition_start != 0 || (a.partition_count != 0 && !rows);
  if (parts) s += fmt::format(" p{}:{}", a.partition_start, a.partition_count);
  if (a.offset != 0 || on_chip || a.space == MemSpace::kHbm) s += fmt::format(" @{}", a.offset);
  if (rows) s += fmt::format(" rows[{},{}]", a.partition_stride, a.partition_count);
  for (uint32_t d = 0; d < std::min(a.num_dims, kMaxFreeDims); ++d)
    s += fmt::format(" [{},{}]", a.dims[d].stride, a.dims[d].count);
  return s;
}

std::string alu_text(uint8_t v) {
  return v < kAluOpCount ? alu_op_name(static_cast<AluOp>(v)) : fmt::format("{}", v);
}

std::string sem_cmp_text(SemCmp c) {
  switch (c) {
    case SemCmp::kGe: return ">=";
    case SemCmp::kEq: return "==";
    default: return fmt::format("?{}", static_cast<int>(c));
  }
}

std::string sem_op_text(SemOp o) {
  switch (o) {
    case SemOp::kAdd: return "+=";
    case SemOp::kSet: return "=";
    default: return fmt::format("?{}", static_cast<int>(o));
  }
}

}  // namespace

std::string disassemble_instruction(const Program &p, Engine stream, const Instruction &in) {
  std::string s = opcode_name(in.opcode);
  uint32_t covered = 0, flags_covered = 0;
  auto ap = [&](const AccessPattern &a) { return ap_text(p, a); };
  auto is_arg = [&](ImmSlot slot) { return in.scalar_arg[uint32_t(slot)] != kNoScalarArg; };
  // An immediate as written: its value, or the scalar argument it reads.
  auto imm = [&](uint32_t i) {
    return is_arg(ImmSlot(i)) ? scalar_text(p, in.scalar_arg[i]) : float_text(in.imm[i]);
  };
  auto iimm = [&](uint32_t i) {
    return is_arg(ImmSlot(i + 2)) ? scalar_text(p, in.scalar_arg[i + 2])
                                  : fmt::format("{}", in.iimm[i]);
  };
  if (in.opcode == Opcode::kDmaCopy || in.queue != 0) s += fmt::format(" q{}", in.queue);
  switch (in.opcode) {
    case Opcode::kNop:
    case Opcode::kBarrier: break;
    case Opcode::kSemWait:
      if (in.wait.cmp != SemCmp::kNone) {
        s += fmt::format(" s{} {} {}", in.wait.sem, sem_cmp_text(in.wait.cmp), in.wait.value);
        covered |= kFWait;
      }
      break;
    case Opcode::kSemSignal:
      if (in.signal.op != SemOp::kNone) {
        s += fmt::format(" s{} {} {}", in.signal.sem, sem_op_text(in.signal.op), in.signal.value);
        covered |= kFSignal;
      }
      break;
    case Opcode::kDmaCopy:
    case Opcode::kTranspose:
    case Opcode::kTensorCopy:
      s += fmt::format(" {}, {}", ap(in.dst), ap(in.src0));
      covered |= kFDst | kFSrc0;
      break;
    case Opcode::kMatmul:
      s += fmt::format(" {}, {}, {}", ap(in.dst), ap(in.src0), ap(in.src1));
      covered |= kFDst | kFSrc0 | kFSrc1;
      break;
    case Opcode::kActivation: {
      std::string func = in.func < kActFuncCount ? act_func_name(static_cast<ActFunc>(in.func))
                                                 : fmt::format("{}", in.func);
      s += fmt::format(" {} {}, {}", func, ap(in.dst), ap(in.src0));
      covered |= kFFunc | kFDst | kFSrc0;
      if (in.flags & kFlagScaleTile) {
        s += fmt::format(" scale={}", ap(in.src2));
        covered |= kFSrc2;
        flags_covered |= kFlagScaleTile;
      } else {
        if (is_arg(ImmSlot::kImm0) || bits(in.imm[0]) != bits(1.0f))
          s += fmt::format(" scale={}", imm(0));
        covered |= kFImm0;
      }
      if (in.flags & kFlagBiasTile) {
        s += fmt::format(" bias={}", ap(in.src1));
        covered |= kFSrc1;
        flags_covered |= kFlagBiasTile;
      } else {
        if (is_arg(ImmSlot::kImm1) || bits(in.imm[1]) != 0) s += fmt::format(" bias={}", imm(1));
        covered |= kFImm1;
      }
      if (in.flags & kFlagAccumulate) {
        s += fmt::format(" accumulate={}", ap(in.dst2));
        covered |= kFDst2;
        flags_covered |= kFlagAccumulate;
      }
      break;
    }
    case Opcode::kTensorTensor:
      s += fmt::format(" {} {}, {}, {}", alu_text(in.func), ap(in.dst), ap(in.src0), ap(in.src1));
      covered |= kFFunc | kFDst | kFSrc0 | kFSrc1;
      break;
    case Opcode::kTensorScalar: {
      s += fmt::format(" {}, {}, {} ", ap(in.dst), ap(in.src0), alu_text(in.func));
      covered |= kFFunc | kFDst | kFSrc0;
      if (in.flags & kFlagOperand0Tile) {
        s += ap(in.src1);
        covered |= kFSrc1;
        flags_covered |= kFlagOperand0Tile;
      } else {
        s += imm(0);
        covered |= kFImm0;
      }
      if (in.func2 != 0 || bits(in.imm[1]) != 0 || is_arg(ImmSlot::kImm1) ||
          (in.flags & kFlagOperand1Tile)) {
        s += fmt::format(", {} ", alu_text(in.func2));
        covered |= kFFunc2;
        if (in.flags & kFlagOperand1Tile) {
          s += ap(in.src2);
          covered |= kFSrc2;
          flags_covered |= kFlagOperand1Tile;
        } else {
          s += imm(1);
          covered |= kFImm1;
        }
      }
      break;
    }
    case Opcode::kTensorReduce:
      s += fmt::format(" {} {}, {}", alu_text(in.func), ap(in.dst), ap(in.src0));
      if (in.iimm[0] != 0) s += fmt::format(" axes={}", in.iimm[0]);
      covered |= kFFunc | kFDst | kFSrc0 | kFIimm0;
      break;
    case Opcode::kMemset:
      s += fmt::format(" {}, {}", ap(in.dst), imm(0));
      covered |= kFDst | kFImm0;
      break;
    case Opcode::kIota:
      s += fmt::format(" {}, {}, {}, {}", ap(in.dst), ap(in.src0), iimm(0), iimm(1));
      covered |= kFDst | kFSrc0 | kFIimm0 | kFIimm1;
      break;
    case Opcode::kAffineSelect:
      s += fmt::format(" {} {}, {}, {}, {}, {}, {}", alu_text(in.func), ap(in.dst), ap(in.src0),
                       iimm(0), iimm(1), ap(in.src1), imm(0));
      covered |= kFFunc | kFDst | kFSrc0 | kFIimm0 | kFIimm1 | kFSrc1 | kFImm0;
      break;
  }

  // Generic clauses for what the canonical form did not print.
  if (in.engine != stream) {
    auto e = static_cast<uint32_t>(in.engine);
    s += e < kEngineCount ? fmt::format(" engine={}", engine_name(in.engine))
                          : fmt::format(" engine={}", e);
  }
  if (!(covered & kFFunc) && in.func != 0) s += fmt::format(" func={}", in.func);
  if (!(covered & kFFunc2) && in.func2 != 0) s += fmt::format(" func2={}", in.func2);
  const std::pair<const char *, const AccessPattern *> aps[] = {{"dst", &in.dst},
                                                                {"dst2", &in.dst2},
                                                                {"src0", &in.src0},
                                                                {"src1", &in.src1},
                                                                {"src2", &in.src2}};
  for (size_t i = 0; i < 5; ++i)
    if (!(covered & (kFDst << i)) && !ap_is_default(*aps[i].second))
      s += fmt::format(" {}={}", aps[i].first, ap(*aps[i].second));
  float imm0_default = in.opcode == Opcode::kActivation ? 1.0f : 0.0f;
  if (!(covered & kFImm0) && (is_arg(ImmSlot::kImm0) || bits(in.imm[0]) != bits(imm0_default)))
    s += fmt::format(" imm0={}", imm(0));
  if (!(covered & kFImm1) && (is_arg(ImmSlot::kImm1) || bits(in.imm[1]) != 0))
    s += fmt::format(" imm1={}", imm(1));
  if (!(covered & kFIimm0) && (is_arg(ImmSlot::kIimm0) || in.iimm[0] != 0))
    s += fmt::format(" iimm0={}", iimm(0));
  if (!(covered & kFIimm1) && (is_arg(ImmSlot::kIimm1) || in.iimm[1] != 0))
    s += fmt::format(" iimm1={}", iimm(1));
  for (const FlagName &f : kFlagNames)
    if ((in.flags & f.bit) && !(flags_covered & f.bit)) s += fmt::format(" {}", f.name);
  if (in.flags & ~kFlagsKnown) s += fmt::format(" flags=0x{:x}", in.flags & ~kFlagsKnown);
  if (!(covered & kFWait) && in.wait.cmp != SemCmp::kNone)
    s += fmt::format(" wait s{} {} {}", in.wait.sem, sem_cmp_text(in.wait.cmp), in.wait.value);
  if (!(covered & kFSignal) && in.signal.op != SemOp::kNone)
    s +=
        fmt::format(" signal s{} {} {}", in.signal.sem, sem_op_text(in.signal.op), in.signal.value);
  return s;
}

std::string disassemble(const Program &p) {
  std::string out = fmt::format(".kernel {}\n", name_text(p.name));
  if (!p.source_file.empty()) out += fmt::format(".file {}\n", quoted(p.source_file));
  for (size_t f = 0; f < p.source_files.size(); ++f)
    out += fmt::format(".file {} {}\n", f + 1, quoted(p.source_files[f]));
  for (const Argument &a : p.args) {
    if (a.is_scalar()) {
      out += fmt::format(".arg {} scalar {}\n", name_text(a.name), dtype_name(a.dtype));
      continue;
    }
    std::string shape;
    for (size_t i = 0; i < a.shape.size(); ++i)
      shape += fmt::format("{}{}", i ? "," : "", a.shape[i]);
    out += fmt::format(".arg {} {} {}[{}]\n", name_text(a.name), arg_direction_name(a.direction),
                       dtype_name(a.dtype), shape);
  }
  for (size_t i = 0; i < p.constants.size(); i += 32) {
    out += ".const ";
    for (size_t j = i; j < std::min(i + 32, p.constants.size()); ++j)
      out += fmt::format("{:02x}", static_cast<unsigned>(p.constants[j]));
    out += '\n';
  }
  // The assembler's sticky .loc state. The first instruction always gets a .loc (none when
  // there are no lines): without any .loc the assembler would record the listing's own lines.
  // A location is (file, line); file 0 is written as ".loc LINE", as without other files.
  struct Loc {
    bool has = false;  // false: .loc none
    uint32_t file = 0, line = 0;
    bool operator==(const Loc &) const = default;
  };
  Loc loc;
  bool loc_written = false;
  for (uint32_t e = 0; e < kEngineCount; ++e) {
    const auto &stream = p.streams[e];
    if (stream.empty()) continue;
    const auto &lines = p.source_lines[e];
    out += fmt::format("\n.engine {}\n", engine_name(static_cast<Engine>(e)));
    for (size_t i = 0; i < stream.size(); ++i) {
      Loc want;
      if (!lines.empty())
        want = {true, p.source_files.empty() ? 0 : p.source_file_id(static_cast<Engine>(e), i),
                i < lines.size() ? lines[i] : 0};
      if (!(want == loc) || !loc_written) {
        if (!want.has)
          out += ".loc none\n";
        else if (want.file == 0)
          out += fmt::format(".loc {}\n", want.line);
        else
          out += fmt::format(".loc {} {}\n", want.file, want.line);
        loc = want;
        loc_written = true;
      }
      out += "    ";
      out += disassemble_instruction(p, static_cast<Engine>(e), stream[i]);
      out += '\n';
    }
  }
  return out;
}

namespace {

template <typename T>
std::optional<std::string> diff(const std::string &what, const T &a, const T &b) {
  if (a == b) return std::nullopt;
  return fmt::format("{}: {} != {}", what, a, b);
}

std::optional<std::string> diff_ap(const std::string &w, const AccessPattern &a,
                                   const AccessPattern &b) {
  if (auto d = diff(w + ".space", static_cast<int>(a.space), static_cast<int>(b.space))) return d;
  if (auto d = diff(w + ".dtype", static_cast<int>(a.dtype), static_cast<int>(b.dtype))) return d;
  if (auto d = diff(w + ".arg", a.arg, b.arg)) return d;
  if (auto d = diff(w + ".partition_start", a.partition_start, b.partition_start)) return d;
  if (auto d = diff(w + ".partition_count", a.partition_count, b.partition_count)) return d;
  if (auto d = diff(w + ".partition_stride", a.partition_stride, b.partition_stride)) return d;
  if (auto d = diff(w + ".offset", a.offset, b.offset)) return d;
  if (auto d = diff(w + ".num_dims", a.num_dims, b.num_dims)) return d;
  for (size_t i = 0; i < kMaxFreeDims; ++i) {
    if (auto d = diff(fmt::format("{}.dims[{}].stride", w, i), a.dims[i].stride, b.dims[i].stride))
      return d;
    if (auto d = diff(fmt::format("{}.dims[{}].count", w, i), a.dims[i].count, b.dims[i].count))
      return d;
  }
  return std::nullopt;
}

std::optional<std::string> diff_inst(const std::string &w, const Instruction &a,
                                     const Instruction &b) {
  if (auto d = diff(w + ".opcode", static_cast<int>(a.opcode), static_cast<int>(b.opcode)))
    return d;
  if (auto d = diff(w + ".engine", static_cast<int>(a.engine), static_cast<int>(b.engine)))
    return d;
  if (auto d = diff(w + ".func", a.func, b.func)) return d;
  if (auto d = diff(w + ".func2", a.func2, b.func2)) return d;
  if (auto d = diff(w + ".queue", a.queue, b.queue)) return d;
  if (auto d = diff(w + ".flags", a.flags, b.flags)) return d;
  if (auto d = diff_ap(w + ".dst", a.dst, b.dst)) return d;
  if (auto d = diff_ap(w + ".dst2", a.dst2, b.dst2)) return d;
  if (auto d = diff_ap(w + ".src0", a.src0, b.src0)) return d;
  if (auto d = diff_ap(w + ".src1", a.src1, b.src1)) return d;
  if (auto d = diff_ap(w + ".src2", a.src2, b.src2)) return d;
  for (size_t i = 0; i < 2; ++i) {
    if (auto d = diff(fmt::format("{}.imm[{}] bits", w, i), bits(a.imm[i]), bits(b.imm[i])))
      return d;
    if (auto d = diff(fmt::format("{}.iimm[{}]", w, i), a.iimm[i], b.iimm[i])) return d;
  }
  for (size_t i = 0; i < kImmSlotCount; ++i)
    if (auto d = diff(fmt::format("{}.scalar_arg[{}]", w, i), a.scalar_arg[i], b.scalar_arg[i]))
      return d;
  if (auto d = diff(w + ".wait.cmp", static_cast<int>(a.wait.cmp), static_cast<int>(b.wait.cmp)))
    return d;
  if (auto d = diff(w + ".wait.sem", a.wait.sem, b.wait.sem)) return d;
  if (auto d = diff(w + ".wait.value", a.wait.value, b.wait.value)) return d;
  if (auto d = diff(w + ".signal.op", static_cast<int>(a.signal.op), static_cast<int>(b.signal.op)))
    return d;
  if (auto d = diff(w + ".signal.sem", a.signal.sem, b.signal.sem)) return d;
  if (auto d = diff(w + ".signal.value", a.signal.value, b.signal.value)) return d;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> program_difference(const Program &a, const Program &b) {
  if (auto d = diff(std::string("name"), a.name, b.name)) return d;
  if (auto d = diff(std::string("source_file"), a.source_file, b.source_file)) return d;
  if (auto d =
          diff(std::string("source_files.size()"), a.source_files.size(), b.source_files.size()))
    return d;
  for (size_t f = 0; f < a.source_files.size(); ++f)
    if (auto d = diff(fmt::format("source_files[{}]", f), a.source_files[f], b.source_files[f]))
      return d;
  if (auto d = diff(std::string("args.size()"), a.args.size(), b.args.size())) return d;
  for (size_t i = 0; i < a.args.size(); ++i) {
    const Argument &x = a.args[i], &y = b.args[i];
    std::string w = fmt::format("args[{}]", i);
    if (auto d = diff(w + ".name", x.name, y.name)) return d;
    if (auto d = diff(w + ".dtype", static_cast<int>(x.dtype), static_cast<int>(y.dtype))) return d;
    if (auto d =
            diff(w + ".direction", static_cast<int>(x.direction), static_cast<int>(y.direction)))
      return d;
    if (auto d = diff(w + ".kind", static_cast<int>(x.kind), static_cast<int>(y.kind))) return d;
    if (x.shape != y.shape)
      return fmt::format("{}.shape: [{}] != [{}]", w, fmt::join(x.shape, ","),
                         fmt::join(y.shape, ","));
  }
  if (auto d = diff(std::string("constants.size()"), a.constants.size(), b.constants.size()))
    return d;
  for (size_t i = 0; i < a.constants.size(); ++i)
    if (auto d = diff(fmt::format("constants[{}]", i), static_cast<unsigned>(a.constants[i]),
                      static_cast<unsigned>(b.constants[i])))
      return d;
  for (uint32_t e = 0; e < kEngineCount; ++e) {
    const char *en = engine_name(static_cast<Engine>(e));
    const auto &sa = a.streams[e];
    const auto &sb = b.streams[e];
    if (auto d = diff(fmt::format("{} stream size", en), sa.size(), sb.size())) return d;
    for (size_t i = 0; i < sa.size(); ++i)
      if (auto d = diff_inst(fmt::format("{}[{}]", en, i), sa[i], sb[i])) return d;
    if (a.source_lines[e] != b.source_lines[e])
      return fmt::format("{} source_lines: [{}] != [{}]", en, fmt::join(a.source_lines[e], ","),
                         fmt::join(b.source_lines[e], ","));
    // The file of each instruction (an absent id is file 0).
    for (size_t i = 0; i < sa.size(); ++i)
      if (auto d = diff(fmt::format("{}[{}] source file id", en, i),
                        a.source_file_id(static_cast<Engine>(e), i),
                        b.source_file_id(static_cast<Engine>(e), i)))
        return d;
  }
  return std::nullopt;
}

}  // namespace trn::isa
