// The assembler: a line-oriented lexer and a recursive-descent parser without recursion deeper
// than one access pattern. Errors are thrown internally as Failure (column + message) and turned
// into AsmError at the top; every number is range-checked against the field it fills.
#include "isa/assembler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "isa/asm_syntax.hpp"
#include "isa/container.hpp"
#include "isa/scalar_args.hpp"

namespace trn::isa {

std::string AsmError::to_string() const {
  return fmt::format("{}:{}:{}: error: {}", file, line, column, message);
}

namespace {

using namespace syntax;

struct Failure {
  uint32_t column;
  std::string message;
};

[[noreturn]] void fail(uint32_t column, std::string message) {
  throw Failure{column, std::move(message)};
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_ident_char(char c) {
  return is_ident_start(c) || is_digit(c);
}
bool is_hex_digit(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
uint32_t hex_value(char c) {
  if (is_digit(c)) return static_cast<uint32_t>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<uint32_t>(c - 'a' + 10);
  return static_cast<uint32_t>(c - 'A' + 10);
}

// Text of a token or name for a message: at most 40 characters, non-printables escaped.
std::string printable(std::string_view s) {
  std::string out;
  size_t n = std::min<size_t>(s.size(), 40);
  for (size_t i = 0; i < n; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f)
      out += static_cast<char>(c);
    else
      out += fmt::format("\\x{:02x}", c);
  }
  if (s.size() > n) out += "...";
  return out;
}

// Edit distance, for "did you mean" (names are short; long inputs are not compared).
size_t edit_distance(std::string_view a, std::string_view b) {
  if (a.size() > 64 || b.size() > 64) return std::numeric_limits<size_t>::max();
  std::array<size_t, 65> prev{}, cur{};
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    prev = cur;
  }
  return prev[b.size()];
}

// " (did you mean X?)" for the closest candidate within a small distance, else "".
template <typename Names>
std::string suggest(std::string_view word, const Names &candidates) {
  size_t best = std::numeric_limits<size_t>::max();
  std::string_view best_name;
  for (std::string_view c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best) {
      best = d;
      best_name = c;
    }
  }
  size_t limit = std::max<size_t>(1, std::min<size_t>(3, word.size() / 3 + 1));
  if (best_name.empty() || best > limit) return "";
  return fmt::format(" (did you mean {}?)", best_name);
}

template <typename Name, typename Enum>
std::vector<std::string_view> names_of(Name name_fn, uint32_t count) {
  std::vector<std::string_view> out;
  for (uint32_t i = 0; i < count; ++i) out.emplace_back(name_fn(static_cast<Enum>(i)));
  return out;
}

std::vector<std::string_view> dtype_names() {
  std::vector<std::string_view> out;
  for (uint32_t i = 1; i < kDTypeCount; ++i) out.emplace_back(dtype_name(static_cast<DType>(i)));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Lexer

enum class Tok : uint8_t { kEnd, kIdent, kNumber, kString, kPunct };

struct Token {
  Tok kind = Tok::kEnd;
  std::string_view text;  // as written
  uint32_t column = 1;    // 1-based
  std::string value;      // decoded string literal
};

uint32_t column_of(size_t index) {
  return static_cast<uint32_t>(std::min<size_t>(index + 1, std::numeric_limits<uint32_t>::max()));
}

std::vector<Token> lex_line(std::string_view line) {
  std::vector<Token> out;
  size_t i = 0, n = line.size(), end_col = 0;
  while (i < n) {
    char c = line[i];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
      ++i;
      continue;
    }
    if (c == ';' || c == '#') break;
    Token t;
    t.column = column_of(i);
    size_t start = i;
    if (is_ident_start(c)) {
      while (i < n && is_ident_char(line[i])) ++i;
      t.kind = Tok::kIdent;
    } else if (is_digit(c) || (c == '.' && i + 1 < n && is_digit(line[i + 1]))) {
      bool hex = c == '0' && i + 1 < n && (line[i + 1] == 'x' || line[i + 1] == 'X');
      ++i;
      while (i < n) {
        char d = line[i];
        if (is_ident_char(d) || d == '.') {
          ++i;
        } else if (!hex && (d == '+' || d == '-') && (line[i - 1] == 'e' || line[i - 1] == 'E')) {
          ++i;
        } else {
          break;
        }
      }
      t.kind = Tok::kNumber;
    } else if (c == '"') {
      ++i;
      bool closed = false;
      while (i < n) {
        char d = line[i];
        if (d == '"') {
          closed = true;
          ++i;
          break;
        }
        if (d != '\\') {
          t.value += d;
          ++i;
          continue;
        }
        if (i + 1 >= n) break;
        char e = line[i + 1];
        switch (e) {
          case '\\': t.value += '\\'; break;
          case '"': t.value += '"'; break;
          case 'n': t.value += '\n'; break;
          case 't': t.value += '\t'; break;
          case 'r': t.value += '\r'; break;
          case '0': t.value += '\0'; break;
          case 'x':
            if (i + 3 < n && is_hex_digit(line[i + 2]) && is_hex_digit(line[i + 3])) {
              t.value += static_cast<char>(hex_value(line[i + 2]) * 16 + hex_value(line[i + 3]));
              i += 2;
              break;
            }
            fail(column_of(i), "\\x in a string needs two hex digits");
          default:
            fail(column_of(i), fmt::format("unknown escape '\\{}' in string",
                                           printable(std::string_view(&e, 1))));
        }
        i += 2;
      }
      if (!closed) fail(t.column, "unterminated string");
      t.kind = Tok::kString;
    } else if (i + 1 < n && (c == '>' || c == '=' || c == '+') && line[i + 1] == '=') {
      i += 2;
      t.kind = Tok::kPunct;
    } else if (std::string_view(",[]():@.=+-").find(c) != std::string_view::npos) {
      ++i;
      t.kind = Tok::kPunct;
    } else {
      fail(column_of(i),
           fmt::format("unexpected character '{}'", printable(std::string_view(&line[i], 1))));
    }
    t.text = line.substr(start, i - start);
    end_col = i;
    out.push_back(std::move(t));
  }
  Token end;
  end.kind = Tok::kEnd;
  end.column = column_of(end_col);
  if (!out.empty()) end.column = column_of(end_col);
  out.push_back(std::move(end));
  return out;
}

std::string describe(const Token &t) {
  switch (t.kind) {
    case Tok::kEnd: return "end of line";
    case Tok::kString: return fmt::format("string \"{}\"", printable(t.value));
    case Tok::kNumber: return fmt::format("number '{}'", printable(t.text));
    case Tok::kIdent: return fmt::format("'{}'", printable(t.text));
    case Tok::kPunct: return fmt::format("'{}'", t.text);
  }
  return "token";
}

// ---------------------------------------------------------------------------------------------
// Field bookkeeping: each field may be given once per instruction.

constexpr std::array<const char *, 8> kDirectives = {"kernel", "file", "arg",    "const",
                                                     "sem",    "tile", "engine", "loc"};

// "pN" / "sN" / "qN" with N all digits (N may be empty for "p").
bool is_prefixed_number(std::string_view w, char prefix, bool allow_empty) {
  if (w.empty() || w[0] != prefix) return false;
  if (w.size() == 1) return allow_empty;
  for (size_t i = 1; i < w.size(); ++i)
    if (!is_digit(w[i])) return false;
  return true;
}

// Decimal digits (no sign) as uint64; nullopt on overflow.
std::optional<uint64_t> decimal(std::string_view s) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// ---------------------------------------------------------------------------------------------
// The assembler

class Assembler {
 public:
  explicit Assembler(AsmLineMap *lines) : line_map_(lines) {}

  void line(std::string_view text, uint32_t line_no) {
    toks_ = lex_line(text);
    pos_ = 0;
    line_no_ = line_no;
    if (at_end()) return;
    if (is_punct(".") && peek(1).kind == Tok::kIdent && peek(1).column == peek().column + 1) {
      directive();
    } else {
      instruction();
    }
  }

  // Without any .loc directive, every instruction's debug line is its line in the assembly text
  // (and the source file, without .file, the assembly file), so faults and profiles name it.
  Program take(std::string_view file_name) {
    if (!saw_loc_ && program_.instruction_count() != 0) {
      program_.source_lines = text_lines_;
      if (!have_file_) program_.source_file = std::string(file_name);
      for (auto &ids : file_ids_) ids.clear();
    }
    // File ids go with the lines, and only when files past the first are declared.
    for (uint32_t e = 0; e < kEngineCount; ++e) {
      auto &ids = program_.source_file_ids[e];
      if (program_.source_files.empty()) {
        ids.clear();
      } else {
        ids = std::move(file_ids_[e]);
        ids.resize(program_.source_lines[e].size(), 0);
      }
    }
    return std::move(program_);
  }

 private:
  // --- token access
  const Token &peek(size_t k = 0) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  const Token &next() {
    const Token &t = peek();
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool at_end() const { return peek().kind == Tok::kEnd; }
  bool is_punct(std::string_view p, size_t k = 0) const {
    return peek(k).kind == Tok::kPunct && peek(k).text == p;
  }
  bool is_word(std::string_view w, size_t k = 0) const {
    return peek(k).kind == Tok::kIdent && peek(k).text == w;
  }
  bool accept_punct(std::string_view p) {
    if (!is_punct(p)) return false;
    next();
    return true;
  }
  void expect_punct(std::string_view p, std::string_view context) {
    if (!is_punct(p))
      fail(peek().column, fmt::format("expected '{}' {}, found {}", p, context, describe(peek())));
    next();
  }
  const Token &expect_ident(std::string_view what) {
    if (peek().kind != Tok::kIdent)
      fail(peek().column, fmt::format("expected {}, found {}", what, describe(peek())));
    return next();
  }
  void expect_end(std::string_view context) {
    if (!at_end()) fail(peek().column, fmt::format("unexpected {} {}", describe(peek()), context));
  }

  // --- numbers
  // An integer with optional sign, as (negative, magnitude).
  std::pair<bool, uint64_t> integer(std::string_view what, uint32_t *column) {
    *column = peek().column;
    bool negative = false;
    if (is_punct("-") || is_punct("+")) negative = next().text == "-";
    const Token &t = peek();
    if (t.kind != Tok::kNumber)
      fail(t.column, fmt::format("expected {}, found {}", what, describe(t)));
    next();
    std::string_view s = t.text;
    int base = 10;
    if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
      base = 16;
      s.remove_prefix(2);
    }
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
    if (ec == std::errc::result_out_of_range)
      fail(*column,
           fmt::format("{} {}{} is out of range", what, negative ? "-" : "", printable(t.text)));
    if (ec != std::errc() || p != s.data() + s.size())
      fail(t.column, fmt::format("invalid integer '{}' for {}", printable(t.text), what));
    return {negative, v};
  }

  uint64_t unsigned_int(std::string_view what, uint64_t max) {
    uint32_t column = 0;
    auto [negative, v] = integer(what, &column);
    if ((negative && v != 0) || v > max)
      fail(column,
           fmt::format("{} {}{} is out of range (0..{})", what, negative ? "-" : "", v, max));
    return v;
  }

  int64_t signed_int(std::string_view what, int64_t min, int64_t max) {
    uint32_t column = 0;
    auto [negative, v] = integer(what, &column);
    bool ok =
        negative ? v <= static_cast<uint64_t>(-(min + 1)) + 1 : v <= static_cast<uint64_t>(max);
    if (!ok)
      fail(column,
           fmt::format("{} {}{} is out of range ({}..{})", what, negative ? "-" : "", v, min, max));
    if (!negative) return static_cast<int64_t>(v);
    if (v == static_cast<uint64_t>(-(min + 1)) + 1) return min;
    return -static_cast<int64_t>(v);
  }

  uint32_t u32(std::string_view what) {
    return static_cast<uint32_t>(unsigned_int(what, std::numeric_limits<uint32_t>::max()));
  }
  int32_t i32(std::string_view what) {
    return static_cast<int32_t>(
        signed_int(what, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()));
  }

  bool starts_float() const {
    const Token &t = peek();
    if (t.kind == Tok::kNumber) return true;
    if (t.kind == Tok::kPunct) return t.text == "-" || t.text == "+";
    return t.kind == Tok::kIdent && (t.text == "inf" || t.text == "infinity" || t.text == "nan");
  }

  float floating(std::string_view what) {
    uint32_t column = peek().column;
    bool negative = false;
    if (is_punct("-") || is_punct("+")) negative = next().text == "-";
    const Token &t = peek();
    float v = 0.0f;
    if (t.kind == Tok::kIdent && (t.text == "inf" || t.text == "infinity")) {
      next();
      v = std::numeric_limits<float>::infinity();
    } else if (t.kind == Tok::kIdent && t.text == "nan") {
      next();
      uint32_t bits = 0x7fc00000u;
      if (accept_punct(":")) {
        uint32_t bits_column = peek().column;
        bits = u32("NaN bit pattern");
        if ((bits & 0x7f800000u) != 0x7f800000u || (bits & 0x007fffffu) == 0)
          fail(bits_column, fmt::format("0x{:08x} is not the bit pattern of a NaN", bits));
      }
      v = std::bit_cast<float>(bits);
    } else if (t.kind == Tok::kNumber) {
      next();
      const char *b = t.text.data();
      const char *e = b + t.text.size();
      auto [p, ec] = std::from_chars(b, e, v, std::chars_format::general);
      if (ec == std::errc::result_out_of_range)
        fail(column, fmt::format("{} {}{} is out of range for f32", what, negative ? "-" : "",
                                 printable(t.text)));
      if (ec != std::errc() || p != e)
        fail(t.column, fmt::format("invalid number '{}' for {}", printable(t.text), what));
    } else {
      fail(t.column,
           fmt::format("expected {} (a number, inf or nan), found {}", what, describe(t)));
    }
    return negative ? -v : v;
  }

  // --- names
  std::string name_token(std::string_view what) {
    const Token &t = peek();
    if (t.kind == Tok::kIdent) return std::string(next().text);
    if (t.kind == Tok::kString) return next().value;
    fail(t.column,
         fmt::format("expected {} (a name or a quoted string), found {}", what, describe(t)));
  }

  DType dtype() {
    const Token &t = peek();
    if (t.kind != Tok::kIdent && t.kind != Tok::kNumber)
      fail(t.column, fmt::format("expected a dtype, found {}", describe(t)));
    next();
    if (auto d = parse_dtype(t.text)) return *d;
    fail(t.column, fmt::format("dtype '{}' is unknown{}; expected one of f32, bf16, f16, fp8e4m3, "
                               "fp8e5m2, i32, i16, i8, u8",
                               printable(t.text), suggest(t.text, dtype_names())));
  }

  uint16_t semaphore() {
    const Token &t = peek();
    if (t.kind != Tok::kIdent)
      fail(t.column,
           fmt::format("expected a semaphore (sN or a .sem name), found {}", describe(t)));
    next();
    if (is_prefixed_number(t.text, 's', false)) {
      auto v = decimal(t.text.substr(1));
      if (!v || *v > 0xFFFF)
        fail(t.column, fmt::format("semaphore index {} is out of range (0..65535)",
                                   printable(t.text.substr(1))));
      return static_cast<uint16_t>(*v);
    }
    auto it = sems_.find(std::string(t.text));
    if (it == sems_.end()) {
      std::vector<std::string_view> names;
      for (const auto &kv : sems_) names.emplace_back(kv.first);
      fail(t.column, fmt::format("semaphore '{}' is not declared{}", printable(t.text),
                                 suggest(t.text, names)));
    }
    return it->second;
  }

  bool is_semaphore_token(size_t k) const {
    const Token &t = peek(k);
    if (t.kind != Tok::kIdent) return false;
    return is_prefixed_number(t.text, 's', false) || sems_.count(std::string(t.text)) != 0;
  }

  uint16_t arg_ref() {
    const Token &t = peek();
    if (t.kind == Tok::kNumber) {
      uint32_t column = t.column;
      uint64_t v = unsigned_int("argument index", 0xFFFF);
      if (v >= program_.args.size())
        fail(column, fmt::format("argument index {} is out of range ({} declared)", v,
                                 program_.args.size()));
      return static_cast<uint16_t>(v);
    }
    if (t.kind != Tok::kIdent && t.kind != Tok::kString)
      fail(t.column,
           fmt::format("expected an argument name, index or 'const', found {}", describe(t)));
    next();
    if (t.kind == Tok::kIdent && t.text == "const") return kConstantsArg;
    std::string name = t.kind == Tok::kString ? t.value : std::string(t.text);
    auto it = arg_names_.find(name);
    if (it == arg_names_.end()) {
      std::vector<std::string_view> names;
      for (const auto &kv : arg_names_) names.emplace_back(kv.first);
      fail(t.column,
           fmt::format("argument '{}' is not declared{}", printable(name), suggest(name, names)));
    }
    if (it->second.size() > 1)
      fail(t.column, fmt::format("argument name '{}' is ambiguous ({} arguments have it); use its "
                                 "index",
                                 printable(name), it->second.size()));
    return it->second.front();
  }

  // --- scalar arguments standing for immediates
  // arg(NAME), arg(INDEX), arg("name"), or the bare name of a declared argument (not a tile, not
  // a reserved word).
  bool starts_scalar_ref() const {
    const Token &t = peek();
    if (t.kind != Tok::kIdent) return false;
    if (t.text == "arg" && is_punct("(", 1)) return true;
    const std::string name(t.text);
    return !is_reserved(t.text) && tiles_.count(name) == 0 && arg_names_.count(name) != 0;
  }

  // Makes `slot` read the scalar argument at the cursor; its own value becomes 0.
  void scalar_operand(Instruction &inst, ImmSlot slot, std::string_view what) {
    const uint32_t column = peek().column;
    uint16_t index = 0;
    if (is_word("arg") && is_punct("(", 1)) {
      next();
      next();
      index = arg_ref();
      expect_punct(")", "after the argument");
    } else {
      index = arg_ref();
    }
    if (index == kConstantsArg)
      fail(column,
           fmt::format("the constants block cannot stand for {}; name a scalar argument", what));
    const Argument &a = program_.args[index];
    if (!a.is_scalar())
      fail(column, fmt::format("argument '{}' is a tensor; only a scalar argument (.arg NAME "
                               "scalar f32 or i32) can stand for {}",
                               printable(a.name), what));
    const DType want = imm_slot_dtype(slot);
    if (a.dtype != want)
      fail(column,
           fmt::format("scalar argument '{}' is {}, but {} is an {} immediate; declare it "
                       "{}",
                       printable(a.name), dtype_name(a.dtype), what,
                       want == DType::kF32 ? "f32 (float)" : "i32 (integer)", dtype_name(want)));
    read_scalar_arg(inst, slot, index);
  }

  // A float immediate (imm0 / imm1): a number or a scalar argument.
  void float_operand(Instruction &inst, ImmSlot slot, std::string_view what) {
    if (!starts_float() && starts_scalar_ref())
      scalar_operand(inst, slot, what);
    else
      inst.imm[static_cast<uint32_t>(slot)] = floating(what);
  }

  // An integer immediate (iimm0 / iimm1): a number or a scalar argument.
  void int_operand(Instruction &inst, ImmSlot slot, std::string_view what) {
    if (starts_scalar_ref())
      scalar_operand(inst, slot, what);
    else
      inst.iimm[static_cast<uint32_t>(slot) - 2] = i32(what);
  }

  // --- access patterns
  AccessPattern access_pattern(std::string_view role) {
    const Token &t = peek();
    if (t.kind != Tok::kIdent)
      fail(t.column, fmt::format("expected an access pattern for {}, found {}", role, describe(t)));
    AccessPattern ap;
    if (t.text == "none") {
      next();
      return ap;
    }
    if (t.text == "sbuf") {
      ap.space = MemSpace::kSbuf;
    } else if (t.text == "psum") {
      ap.space = MemSpace::kPsum;
    } else if (t.text == "hbm") {
      ap.space = MemSpace::kHbm;
    } else if (t.text == "pattern") {
      ap.space = MemSpace::kNone;
    } else {
      auto it = tiles_.find(std::string(t.text));
      if (it == tiles_.end()) {
        std::vector<std::string_view> names = {"sbuf", "psum", "hbm", "pattern", "none"};
        for (const auto &kv : tiles_) names.emplace_back(kv.first);
        fail(t.column, fmt::format("tile '{}' is not declared{} (an access pattern starts with "
                                   "sbuf, psum, hbm, pattern, none or a .tile name)",
                                   printable(t.text), suggest(t.text, names)));
      }
      next();
      return it->second;
    }
    uint32_t space_column = t.column;
    next();
    bool have_arg = false;
    if (accept_punct("(")) {
      const uint32_t arg_column = peek().column;
      ap.arg = arg_ref();
      // (Other spaces ignore the index: the disassembly prints whatever a binary holds there.)
      if (ap.space == MemSpace::kHbm && ap.arg != kConstantsArg &&
          program_.args[ap.arg].is_scalar())
        fail(arg_column, fmt::format("argument '{}' is a scalar; it stands for an immediate "
                                     "(e.g. scale={}), it is not memory to address",
                                     printable(program_.args[ap.arg].name),
                                     printable(program_.args[ap.arg].name)));
      expect_punct(")", "after the argument");
      have_arg = true;
    }
    if (ap.space == MemSpace::kHbm && !have_arg)
      fail(space_column,
           "an hbm access pattern names its argument: hbm(NAME), hbm(INDEX) or hbm(const)");
    if (accept_punct(".")) ap.dtype = dtype();
    bool have_p = false, have_rows = false, have_offset = false;
    uint32_t p_column = 0;
    for (;;) {
      const Token &c = peek();
      if (c.kind == Tok::kIdent && is_prefixed_number(c.text, 'p', true)) {
        if (have_p) fail(c.column, "partition range given twice");
        if (c.text.size() == 1 || !is_punct(":", 1))
          fail(c.column,
               fmt::format("bad partition range '{}': expected pSTART:COUNT (e.g. p0:128)",
                           printable(c.text)));
        auto start = decimal(c.text.substr(1));
        if (!start || *start > std::numeric_limits<uint32_t>::max())
          fail(c.column, fmt::format("partition start {} is out of range (0..4294967295)",
                                     printable(c.text.substr(1))));
        next();
        next();
        if (peek().kind != Tok::kNumber)
          fail(peek().column,
               fmt::format("bad partition range: expected a count after '{}:', found {}",
                           printable(c.text), describe(peek())));
        uint32_t count = u32("partition count");
        if (have_rows && count != ap.partition_count)
          fail(c.column, fmt::format("partition count {} differs from the row count {}", count,
                                     ap.partition_count));
        ap.partition_start = static_cast<uint32_t>(*start);
        ap.partition_count = count;
        have_p = true;
        p_column = c.column;
      } else if (c.kind == Tok::kIdent && c.text == "rows") {
        if (have_rows) fail(c.column, "rows given twice");
        next();
        expect_punct("[", "after rows");
        ap.partition_stride = signed_int("row stride", std::numeric_limits<int64_t>::min(),
                                         std::numeric_limits<int64_t>::max());
        expect_punct(",", "after the row stride");
        uint32_t count = u32("row count");
        expect_punct("]", "after the row count");
        if (have_p && count != ap.partition_count)
          fail(c.column, fmt::format("row count {} differs from the partition count {} (at column "
                                     "{})",
                                     count, ap.partition_count, p_column));
        ap.partition_count = count;
        have_rows = true;
      } else if (c.kind == Tok::kPunct && c.text == "@") {
        if (have_offset) fail(c.column, "offset given twice");
        next();
        ap.offset = unsigned_int("byte offset", std::numeric_limits<uint64_t>::max());
        have_offset = true;
      } else if (c.kind == Tok::kPunct && c.text == "[") {
        if (ap.num_dims >= kMaxFreeDims)
          fail(c.column,
               fmt::format("too many free dims: an access pattern has at most {}", kMaxFreeDims));
        next();
        Dim &d = ap.dims[ap.num_dims];
        d.stride = i32("dim stride");
        expect_punct(",", "after the dim stride");
        d.count = u32("dim count");
        expect_punct("]", "after the dim count");
        ++ap.num_dims;
      } else {
        break;
      }
    }
    return ap;
  }

  // --- instructions
  void mark(uint32_t &set, uint32_t field, uint32_t column, std::string_view name) {
    if (set & field) fail(column, fmt::format("{} given twice", name));
    set |= field;
  }

  template <typename Enum, typename NameFn, typename ParseFn>
  uint8_t enum_operand(std::string_view what, NameFn name_fn, ParseFn parse_fn, uint32_t count) {
    const Token &t = peek();
    if (t.kind == Tok::kNumber) return static_cast<uint8_t>(unsigned_int(what, 255));
    if (t.kind != Tok::kIdent)
      fail(t.column, fmt::format("expected {}, found {}", what, describe(t)));
    next();
    if (auto v = parse_fn(t.text)) return static_cast<uint8_t>(*v);
    fail(t.column, fmt::format("unknown {} '{}'{}", what, printable(t.text),
                               suggest(t.text, names_of<NameFn, Enum>(name_fn, count))));
  }
  uint8_t alu_operand(std::string_view what) {
    return enum_operand<AluOp>(what, &alu_op_name, &parse_alu_op, kAluOpCount);
  }
  uint8_t act_operand() {
    return enum_operand<ActFunc>("activation function", &act_func_name, &parse_act_func,
                                 kActFuncCount);
  }

  void wait_body(Instruction &inst) {
    inst.wait.sem = semaphore();
    if (accept_punct(">=")) {
      inst.wait.cmp = SemCmp::kGe;
    } else if (accept_punct("==")) {
      inst.wait.cmp = SemCmp::kEq;
    } else {
      fail(peek().column,
           fmt::format("expected '>=' or '==' after the semaphore, found {}", describe(peek())));
    }
    inst.wait.value = u32("semaphore value");
  }

  void signal_body(Instruction &inst) {
    inst.signal.sem = semaphore();
    if (accept_punct("+=")) {
      inst.signal.op = SemOp::kAdd;
    } else if (accept_punct("=")) {
      inst.signal.op = SemOp::kSet;
    } else {
      fail(peek().column,
           fmt::format("expected '+=' or '=' after the semaphore, found {}", describe(peek())));
    }
    inst.signal.value = u32("semaphore value");
  }

  void comma(std::string_view after) { expect_punct(",", fmt::format("after {}", after)); }

  void instruction() {
    uint32_t first_column = peek().column;
    if (!engine_)
      fail(first_column, "instruction outside an engine section (start one with .engine NAME)");
    Instruction inst;
    inst.engine = *engine_;
    uint32_t set = 0;
    if (is_word("wait") && peek(1).kind == Tok::kIdent) {
      uint32_t column = next().column;
      wait_body(inst);
      mark(set, kFWait, column, "wait");
      if (at_end()) {
        inst.opcode = Opcode::kSemWait;
        append(inst);
        return;
      }
    } else if (is_word("signal") && peek(1).kind == Tok::kIdent) {
      next();
      signal_body(inst);
      expect_end("after a signal line (a signal clause goes after an instruction's operands)");
      inst.opcode = Opcode::kSemSignal;
      append(inst);
      return;
    }
    const Token &op_tok = expect_ident("an opcode");
    auto op = parse_opcode(op_tok.text);
    if (!op)
      fail(op_tok.column, fmt::format("unknown opcode '{}'{}", printable(op_tok.text),
                                      suggest(op_tok.text, names_of<decltype(&opcode_name), Opcode>(
                                                               &opcode_name, kOpcodeCount))));
    inst.opcode = *op;
    if (inst.opcode == Opcode::kActivation) inst.imm[0] = 1.0f;
    if (peek().kind == Tok::kIdent && is_prefixed_number(peek().text, 'q', false)) {
      const Token &q = next();
      auto v = decimal(q.text.substr(1));
      if (!v || *v > 255)
        fail(q.column,
             fmt::format("queue {} is out of range (0..255)", printable(q.text.substr(1))));
      inst.queue = static_cast<uint8_t>(*v);
      set |= kFQueue;
    }
    operands(inst, set);
    clauses(inst, set);
    append(inst);
  }

  void operands(Instruction &inst, uint32_t &set) {
    switch (inst.opcode) {
      case Opcode::kNop:
      case Opcode::kBarrier: break;
      case Opcode::kSemWait:
        if (is_semaphore_token(0) && (is_punct(">=", 1) || is_punct("==", 1))) {
          mark(set, kFWait, peek().column, "wait");
          wait_body(inst);
        }
        break;
      case Opcode::kSemSignal:
        if (is_semaphore_token(0) && (is_punct("+=", 1) || is_punct("=", 1))) {
          set |= kFSignal;
          signal_body(inst);
        }
        break;
      case Opcode::kDmaCopy:
      case Opcode::kTranspose:
      case Opcode::kTensorCopy:
        inst.dst = access_pattern("dst");
        comma("dst");
        inst.src0 = access_pattern("src");
        set |= kFDst | kFSrc0;
        break;
      case Opcode::kMatmul:
        inst.dst = access_pattern("dst");
        comma("dst");
        inst.src0 = access_pattern("stationary");
        comma("stationary");
        inst.src1 = access_pattern("moving");
        set |= kFDst | kFSrc0 | kFSrc1;
        break;
      case Opcode::kActivation:
        inst.func = act_operand();
        inst.dst = access_pattern("dst");
        comma("dst");
        inst.src0 = access_pattern("src");
        set |= kFFunc | kFDst | kFSrc0;
        break;
      case Opcode::kTensorTensor:
        inst.func = alu_operand("ALU operator");
        inst.dst = access_pattern("dst");
        comma("dst");
        inst.src0 = access_pattern("src0");
        comma("src0");
        inst.src1 = access_pattern("src1");
        set |= kFFunc | kFDst | kFSrc0 | kFSrc1;
        break;
      case Opcode::kTensorScalar:
        inst.dst = access_pattern("dst");
        comma("dst");
        inst.src0 = access_pattern("src");
        comma("src");
        inst.func = alu_operand("ALU operator");
        set |= kFFunc | kFDst | kFSrc0;
        if (starts_float() || starts_scalar_ref()) {
          float_operand(inst, ImmSlot::kImm0, "operand0");
          set |= kFImm0;
        } else {
          inst.src1 = access_pattern("operand0");
          inst.flags |= kFlagOperand0Tile;
          set |= kFSrc1;
        }
        if (accept_punct(",")) {
          inst.func2 = alu_operand("ALU operator");
          set |= kFFunc2;
          if (starts_float() || starts_scalar_ref()) {
            float_operand(inst, ImmSlot::kImm1, "operand1");
            set |= kFImm1;
          } else {
            inst.src2 = access_pattern("operand1");
            inst.flags |= kFlagOperand1Tile;
            set |= kFSrc2;
          }
        }
        break;
      case Opcode::kTensorReduce:
        inst.func = alu_operand("ALU operator");
        inst.dst = access_pattern("dst");
        comma("dst");
        inst.src0 = access_pattern("src");
        set |= kFFunc | kFDst | kFSrc0;
        break;
      case Opcode::kMemset:
        inst.dst = access_pattern("dst");
        comma("dst");
        float_operand(inst, ImmSlot::kImm0, "value");
        set |= kFDst | kFImm0;
        break;
      case Opcode::kIota:
        inst.dst = access_pattern("dst");
        comma("dst");
        inst.src0 = access_pattern("pattern");
        comma("pattern");
        int_operand(inst, ImmSlot::kIimm0, "offset");
        comma("offset");
        int_operand(inst, ImmSlot::kIimm1, "channel multiplier");
        set |= kFDst | kFSrc0 | kFIimm0 | kFIimm1;
        break;
      case Opcode::kAffineSelect:
        inst.func = alu_operand("comparison");
        inst.dst = access_pattern("dst");
        comma("dst");
        inst.src0 = access_pattern("pattern");
        comma("pattern");
        int_operand(inst, ImmSlot::kIimm0, "offset");
        comma("offset");
        int_operand(inst, ImmSlot::kIimm1, "channel multiplier");
        comma("channel multiplier");
        inst.src1 = access_pattern("on_true");
        comma("on_true");
        float_operand(inst, ImmSlot::kImm0, "on_false value");
        set |= kFFunc | kFDst | kFSrc0 | kFIimm0 | kFIimm1 | kFSrc1 | kFImm0;
        break;
    }
  }

  void clauses(Instruction &inst, uint32_t &set) {
    while (!at_end()) {
      const Token &k = peek();
      if (k.kind != Tok::kIdent)
        fail(k.column, fmt::format("unexpected {} after the operands of {}", describe(k),
                                   opcode_name(inst.opcode)));
      std::string_view w = k.text;
      uint32_t column = k.column;
      bool has_value = is_punct("=", 1);
      if (w == "wait") {
        next();
        mark(set, kFWait, column, "wait");
        wait_body(inst);
        continue;
      }
      if (w == "signal") {
        next();
        mark(set, kFSignal, column, "signal");
        signal_body(inst);
        continue;
      }
      if (!has_value) {
        bool found = false;
        for (const FlagName &f : kFlagNames) {
          if (w == f.name) {
            inst.flags |= f.bit;
            found = true;
          }
        }
        if (!found) unknown_clause(k, inst.opcode);
        next();
        continue;
      }
      next();
      next();  // '='
      auto only_for = [&](Opcode op) {
        if (inst.opcode != op)
          fail(column, fmt::format("'{}' applies only to {}", w, opcode_name(op)));
      };
      if (w == "scale" || w == "bias") {
        only_for(Opcode::kActivation);
        bool scale = w == "scale";
        // A scale (bias) is a value or a tile, given once: either form marks both fields.
        const uint32_t value_field = scale ? kFImm0 : kFImm1, tile_field = scale ? kFSrc2 : kFSrc1;
        if (set & (value_field | tile_field))
          fail(column, fmt::format("{} given twice (as {}); an activation has one {}", w,
                                   (set & value_field) ? "a value" : "a tile", w));
        if (starts_float() || starts_scalar_ref()) {
          mark(set, value_field, column, scale ? "scale value (imm0)" : "bias value (imm1)");
          float_operand(inst, scale ? ImmSlot::kImm0 : ImmSlot::kImm1, w);
        } else {
          mark(set, tile_field, column, scale ? "scale tile (src2)" : "bias tile (src1)");
          (scale ? inst.src2 : inst.src1) = access_pattern(w);
          inst.flags |= scale ? kFlagScaleTile : kFlagBiasTile;
        }
      } else if (w == "accumulate") {
        only_for(Opcode::kActivation);
        mark(set, kFDst2, column, "accumulate tile (dst2)");
        inst.dst2 = access_pattern("accumulate");
        inst.flags |= kFlagAccumulate;
      } else if (w == "axes") {
        only_for(Opcode::kTensorReduce);
        mark(set, kFIimm0, column, "axes (iimm0)");
        inst.iimm[0] = i32("axes");
      } else if (w == "dst" || w == "dst2" || w == "src0" || w == "src1" || w == "src2") {
        static constexpr std::array<std::pair<const char *, uint32_t>, 5> kAps = {
            {{"dst", kFDst},
             {"dst2", kFDst2},
             {"src0", kFSrc0},
             {"src1", kFSrc1},
             {"src2", kFSrc2}}};
        AccessPattern *slots[5] = {&inst.dst, &inst.dst2, &inst.src0, &inst.src1, &inst.src2};
        for (size_t i = 0; i < kAps.size(); ++i) {
          if (w == kAps[i].first) {
            mark(set, kAps[i].second, column, w);
            *slots[i] = access_pattern(w);
          }
        }
      } else if (w == "imm0" || w == "imm1") {
        size_t i = w == "imm0" ? 0 : 1;
        mark(set, i == 0 ? kFImm0 : kFImm1, column, w);
        float_operand(inst, i == 0 ? ImmSlot::kImm0 : ImmSlot::kImm1, w);
      } else if (w == "iimm0" || w == "iimm1") {
        size_t i = w == "iimm0" ? 0 : 1;
        mark(set, i == 0 ? kFIimm0 : kFIimm1, column, w);
        int_operand(inst, i == 0 ? ImmSlot::kIimm0 : ImmSlot::kIimm1, w);
      } else if (w == "func" || w == "func2") {
        mark(set, w == "func" ? kFFunc : kFFunc2, column, w);
        (w == "func" ? inst.func : inst.func2) = static_cast<uint8_t>(unsigned_int(w, 255));
      } else if (w == "flags") {
        inst.flags |= static_cast<uint32_t>(unsigned_int("flags", 0xFFFFFFFFu));
      } else if (w == "engine") {
        mark(set, kFEngine, column, "engine");
        if (peek().kind == Tok::kNumber) {
          inst.engine = static_cast<Engine>(unsigned_int("engine", 255));
        } else {
          inst.engine = engine_name_operand();
        }
      } else {
        unknown_clause(k, inst.opcode);
      }
    }
  }

  [[noreturn]] void unknown_clause(const Token &k, Opcode op) {
    std::vector<std::string_view> names(kClauseWords.begin(), kClauseWords.end());
    for (const FlagName &f : kFlagNames) names.emplace_back(f.name);
    names.emplace_back("engine");
    fail(k.column, fmt::format("unknown clause '{}' after the operands of {}{}", printable(k.text),
                               opcode_name(op), suggest(k.text, names)));
  }

  Engine engine_name_operand() {
    const Token &t = expect_ident("an engine name");
    if (auto e = parse_engine(t.text)) return *e;
    fail(t.column, fmt::format("unknown engine '{}'{}; expected tensor, vector, scalar, gpsimd or "
                               "sync",
                               printable(t.text),
                               suggest(t.text, names_of<decltype(&engine_name), Engine>(
                                                   &engine_name, kEngineCount))));
  }

  void append(const Instruction &inst) {
    auto e = static_cast<uint32_t>(*engine_);
    auto &stream = program_.streams[e];
    auto &lines = program_.source_lines[e];
    auto &ids = file_ids_[e];  // kept the same size as lines
    if (loc_) {
      lines.resize(stream.size(), 0);
      ids.resize(stream.size(), 0);
      lines.push_back(loc_->line);
      ids.push_back(loc_->file);
    } else if (!lines.empty()) {
      lines.push_back(0);
      ids.push_back(0);
    }
    stream.push_back(inst);
    text_lines_[e].push_back(line_no_);
    if (line_map_) (*line_map_)[e].push_back(line_no_);
  }

  // --- directives
  void declare_check(const Token &t, std::string_view kind) {
    if (is_reserved(t.text))
      fail(t.column,
           fmt::format("'{}' is a reserved word and cannot name a {}", printable(t.text), kind));
    std::string key(t.text);
    if (tiles_.count(key) || sems_.count(key))
      fail(t.column, fmt::format("'{}' is already declared", printable(t.text)));
    if (kind == "tile" && scalar_names_.count(key))
      fail(t.column, fmt::format("'{}' is already declared as a scalar argument; a tile of that "
                                 "name would make operands ambiguous",
                                 printable(t.text)));
  }

  void directive() {
    next();  // '.'
    const Token &d = next();
    std::string_view w = d.text;
    if (w == "kernel") {
      if (have_kernel_) fail(d.column, ".kernel given twice");
      program_.name = name_token("a kernel name");
      have_kernel_ = true;
    } else if (w == "file") {
      if (peek().kind == Tok::kNumber) {
        numbered_file_directive();
      } else {
        if (have_file_) fail(d.column, ".file given twice");
        program_.source_file = name_token("a source file name");
        have_file_ = true;
      }
    } else if (w == "arg") {
      arg_directive(d);
    } else if (w == "const") {
      const_directive();
    } else if (w == "sem") {
      const Token &n = expect_ident("a semaphore name");
      declare_check(n, "semaphore");
      accept_punct("=");
      auto v = static_cast<uint16_t>(unsigned_int("semaphore index", 0xFFFF));
      sems_.emplace(std::string(n.text), v);
    } else if (w == "tile") {
      const Token &n = expect_ident("a tile name");
      declare_check(n, "tile");
      accept_punct("=");
      AccessPattern ap = access_pattern(n.text);
      tiles_.emplace(std::string(n.text), ap);
    } else if (w == "engine") {
      engine_ = engine_name_operand();
    } else if (w == "loc") {
      saw_loc_ = true;
      if (is_word("none")) {
        next();
        loc_.reset();
      } else {
        // ".loc LINE" (file 0) or ".loc FILE LINE".
        const uint32_t column = peek().column;
        Loc loc{0, u32("source line")};
        if (peek().kind == Tok::kNumber) {
          loc.file = loc.line;
          if (loc.file > program_.source_files.size())
            fail(column, fmt::format("source file {} is not declared (declare it first with .file "
                                     "{} \"name\")",
                                     loc.file, loc.file));
          loc.line = u32("source line");
        }
        loc_ = loc;
      }
    } else {
      std::vector<std::string_view> names;
      for (const char *n : kDirectives) names.emplace_back(n);
      fail(d.column, fmt::format("unknown directive '.{}'{}", printable(w), suggest(w, names)));
    }
    expect_end(fmt::format("after the .{} directive", w));
  }

  // ".file N name": source file N (N >= 1; file 0 is the one ".file name" names). Files are
  // numbered 1, 2, 3, ... in the order they are declared.
  void numbered_file_directive() {
    const uint32_t column = peek().column;
    const uint64_t n = unsigned_int("source file number", kMaxSourceFiles);
    const size_t count = program_.source_files.size();
    if (n == 0)
      fail(column, "source file 0 is the one '.file \"name\"' names; number the others from 1");
    if (n <= count) fail(column, fmt::format("source file {} is already declared", n));
    if (n != count + 1)
      fail(column, fmt::format("source file {} is declared before file {}; number the files 1, "
                               "2, 3, ... in order",
                               n, count + 1));
    const uint32_t name_column = peek().column;
    std::string name = name_token("a source file name");
    if (name.empty()) fail(name_column, "a source file name cannot be empty");
    program_.source_files.push_back(std::move(name));
  }

  void arg_directive(const Token &d) {
    if (program_.args.size() >= 0xFFFF) fail(d.column, "too many arguments (at most 65535)");
    Argument a;
    const uint32_t name_column = peek().column;
    a.name = name_token("an argument name");
    const Token &dir = expect_ident("a direction (in, out or inout) or scalar");
    if (dir.text == "scalar") {
      scalar_arg_directive(std::move(a), name_column);
      return;
    }
    if (dir.text == "in") {
      a.direction = ArgDirection::kIn;
    } else if (dir.text == "out") {
      a.direction = ArgDirection::kOut;
    } else if (dir.text == "inout") {
      a.direction = ArgDirection::kInOut;
    } else {
      fail(dir.column,
           fmt::format(
               "unknown direction '{}'{}; expected in, out or inout (or scalar)",
               printable(dir.text),
               suggest(dir.text, std::array<std::string_view, 4>{"in", "out", "inout", "scalar"})));
    }
    a.dtype = dtype();
    expect_punct("[", "before the argument's shape");
    if (!is_punct("]")) {
      for (;;) {
        a.shape.push_back(unsigned_int("shape dimension", std::numeric_limits<uint64_t>::max()));
        if (!accept_punct(",")) break;
      }
    }
    expect_punct("]", "after the argument's shape");
    arg_names_[a.name].push_back(static_cast<uint16_t>(program_.args.size()));
    program_.args.push_back(std::move(a));
  }

  // .arg NAME scalar f32|i32: one value passed at launch, read where an immediate is.
  void scalar_arg_directive(Argument a, uint32_t name_column) {
    a.kind = ArgKind::kScalar;
    a.direction = ArgDirection::kIn;
    const uint32_t dtype_column = peek().column;
    a.dtype = dtype();
    if (!is_scalar_dtype(a.dtype))
      fail(dtype_column, fmt::format("a scalar argument is f32 or i32 (what an immediate holds), "
                                     "not {}",
                                     dtype_name(a.dtype)));
    if (is_punct("[")) fail(peek().column, "a scalar argument has no shape (it is one value)");
    if (tiles_.count(a.name))
      fail(name_column, fmt::format("'{}' is already declared as a tile; a scalar argument of "
                                    "that name would make operands ambiguous",
                                    printable(a.name)));
    scalar_names_.insert(a.name);
    arg_names_[a.name].push_back(static_cast<uint16_t>(program_.args.size()));
    program_.args.push_back(std::move(a));
  }

  void const_directive() {
    auto &bytes = program_.constants;
    // A value list starts with one of the supported dtypes (none of their names is an even
    // number of hex digits, so they never read as hex bytes).
    auto value_type = [&]() -> std::optional<DType> {
      if (peek().kind != Tok::kIdent) return std::nullopt;
      auto t = parse_dtype(peek().text);
      if (t && (*t == DType::kF32 || *t == DType::kI32 || *t == DType::kI16 || *t == DType::kI8 ||
                *t == DType::kU8))
        return t;
      return std::nullopt;
    };
    if (auto vt = value_type()) {
      const Token &t = next();
      DType type = *vt;
      auto put = [&](uint64_t v, uint32_t size) {
        for (uint32_t i = 0; i < size; ++i)
          bytes.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xFF));
      };
      bool first = true;
      while (!at_end()) {
        if (!first) accept_punct(",");
        first = false;
        switch (type) {
          case DType::kF32: put(std::bit_cast<uint32_t>(floating("f32 constant")), 4); break;
          case DType::kI32: put(static_cast<uint32_t>(i32("i32 constant")), 4); break;
          case DType::kI16:
            put(static_cast<uint16_t>(signed_int("i16 constant", -32768, 32767)), 2);
            break;
          case DType::kI8:
            put(static_cast<uint8_t>(signed_int("i8 constant", -128, 127)), 1);
            break;
          case DType::kU8: put(unsigned_int("u8 constant", 255), 1); break;
          default:
            fail(t.column, fmt::format(".const {} is not supported; use f32, i32, i16, i8, u8 or "
                                       "hex bytes",
                                       dtype_name(type)));
        }
      }
      return;
    }
    while (!at_end()) {
      const Token &t = next();
      bool ok = (t.kind == Tok::kIdent || t.kind == Tok::kNumber) && t.text.size() % 2 == 0;
      for (char c : t.text) ok = ok && is_hex_digit(c);
      if (!ok)
        fail(t.column, fmt::format("expected hex bytes (an even number of hex digits) or a dtype "
                                   "after .const, found {}",
                                   describe(t)));
      for (size_t i = 0; i < t.text.size(); i += 2)
        bytes.push_back(
            static_cast<std::byte>(hex_value(t.text[i]) * 16 + hex_value(t.text[i + 1])));
    }
  }

  Program program_;
  AsmLineMap *line_map_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  uint32_t line_no_ = 0;
  std::optional<Engine> engine_;
  struct Loc {
    uint32_t file = 0, line = 0;
  };
  std::optional<Loc> loc_;
  bool saw_loc_ = false;
  AsmLineMap file_ids_;    // the file of every line in program_.source_lines
  AsmLineMap text_lines_;  // the text line of every instruction
  bool have_kernel_ = false, have_file_ = false;
  std::unordered_map<std::string, std::vector<uint16_t>> arg_names_;
  std::unordered_set<std::string> scalar_names_;
  std::unordered_map<std::string, AccessPattern> tiles_;
  std::unordered_map<std::string, uint16_t> sems_;
};

}  // namespace

std::variant<Program, AsmError> assemble(std::string_view text, std::string_view file_name,
                                         AsmLineMap *lines) {
  if (lines)
    for (auto &l : *lines) l.clear();
  Assembler as(lines);
  uint32_t line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    if (line_no == std::numeric_limits<uint32_t>::max())
      return AsmError{std::string(file_name), line_no, 1, "too many lines"};
    ++line_no;
    try {
      as.line(text.substr(pos, eol - pos), line_no);
    } catch (const Failure &f) {
      return AsmError{std::string(file_name), line_no, f.column, f.message};
    } catch (const std::bad_alloc &) {
      return AsmError{std::string(file_name), line_no, 1, "out of memory"};
    }
    pos = eol + 1;
  }
  return as.take(file_name);
}

}  // namespace trn::isa
