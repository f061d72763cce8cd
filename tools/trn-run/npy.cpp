#include "trn-run/npy.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "common/read_file.hpp"

namespace trn::tools::npy {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr size_t kMaxDepth = 16;

// The subset of Python literals a header holds.
struct Value {
  enum class Kind { kString, kBool, kNone, kInt, kSequence, kDict } kind = Kind::kNone;
  std::string text;                                    // kString
  bool flag = false;                                   // kBool; kInt: negative
  uint64_t magnitude = 0;                              // kInt
  std::vector<Value> items;                            // kSequence
  std::vector<std::pair<std::string, Value>> entries;  // kDict (string keys only)
};

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  std::optional<std::string> parse_header(Value &out) {
    if (auto err = value(out, 0)) return err;
    skip_space();
    if (pos_ != text_.size()) return at("unexpected text after the header dictionary");
    if (out.kind != Value::Kind::kDict) return std::string("the header is not a dictionary");
    return std::nullopt;
  }

 private:
  std::string at(const std::string &what) const {
    return "malformed header: " + what + " at byte " + std::to_string(pos_);
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool eat_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    const size_t end = pos_ + word.size();
    if (end < text_.size() &&
        (std::isalnum(static_cast<unsigned char>(text_[end])) || text_[end] == '_'))
      return false;
    pos_ = end;
    return true;
  }

  std::optional<std::string> string(std::string &out) {
    const char quote = text_[pos_++];
    out.clear();
    while (pos_ < text_.size()) {
      char c = text_[pos_++];
      if (c == quote) return std::nullopt;
      if (c == '\n') break;
      if (c == '\\') {
        if (pos_ >= text_.size()) break;
        c = text_[pos_++];
        switch (c) {
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          case '0': c = '\0'; break;
          case '\\':
          case '\'':
          case '"': break;
          default: return at("unsupported string escape");
        }
      }
      out.push_back(c);
    }
    return at("unterminated string");
  }

  std::optional<std::string> integer(Value &out) {
    out.kind = Value::Kind::kInt;
    if (text_[pos_] == '-' || text_[pos_] == '+') out.flag = text_[pos_++] == '-';
    const size_t start = pos_;
    uint64_t v = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const auto digit = static_cast<uint64_t>(text_[pos_] - '0');
      if (v > (std::numeric_limits<uint64_t>::max() - digit) / 10)
        return at("integer out of range");
      v = v * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) return at("expected a value");
    if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2 long
    out.magnitude = v;
    return std::nullopt;
  }

  std::optional<std::string> value(Value &out, size_t depth) {
    if (depth > kMaxDepth) return at("nesting too deep");
    skip_space();
    if (pos_ >= text_.size()) return at("unexpected end of header");
    const char c = text_[pos_];
    if (c == '\'' || c == '"') {
      out.kind = Value::Kind::kString;
      return string(out.text);
    }
    if (c == '(' || c == '[') {
      const char close = c == '(' ? ')' : ']';
      ++pos_;
      out.kind = Value::Kind::kSequence;
      while (true) {
        if (eat(close)) return std::nullopt;
        Value item;
        if (auto err = value(item, depth + 1)) return err;
        out.items.push_back(std::move(item));
        if (eat(',')) continue;
        if (eat(close)) return std::nullopt;
        return at(std::string("expected ',' or '") + close + "'");
      }
    }
    if (c == '{') {
      ++pos_;
      out.kind = Value::Kind::kDict;
      while (true) {
        if (eat('}')) return std::nullopt;
        skip_space();
        if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"'))
          return at("expected a string key");
        std::string key;
        if (auto err = string(key)) return err;
        if (!eat(':')) return at("expected ':' after key '" + key + "'");
        for (const auto &entry : out.entries)
          if (entry.first == key) return at("duplicate key '" + key + "'");
        Value item;
        if (auto err = value(item, depth + 1)) return err;
        out.entries.emplace_back(std::move(key), std::move(item));
        if (eat(',')) continue;
        if (eat('}')) return std::nullopt;
        return at("expected ',' or '}'");
      }
    }
    if (eat_word("True")) {
      out.kind = Value::Kind::kBool;
      out.flag = true;
      return std::nullopt;
    }
    if (eat_word("False")) {
      out.kind = Value::Kind::kBool;
      out.flag = false;
      return std::nullopt;
    }
    if (eat_word("None")) {
      out.kind = Value::Kind::kNone;
      return std::nullopt;
    }
    if (c == '-' || c == '+' || (c >= '0' && c <= '9')) return integer(out);
    return at("unexpected character");
  }

  std::string_view text_;
  size_t pos_ = 0;
};

uint32_t read_le(const std::byte *p, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

// Why a dtype descr is refused, and how to re-save the array.
std::string unsupported_descr(const std::string &descr) {
  const size_t at = !descr.empty() && std::strchr("<>|=", descr[0]) ? 1 : 0;
  const char kind = at < descr.size() ? descr[at] : '?';
  std::string why = "unsupported dtype descr '" + descr + "': ";
  if (kind == 'c')
    return why +
           "complex arrays have no trn dtype; save the parts as two float arrays "
           "(np.save(path, a.real) and a.imag)";
  if (kind == 'O')
    return why +
           "an object array holds Python objects, not numbers; save a numeric one "
           "(np.save(path, np.asarray(a, dtype=np.float32)))";
  return why +
         "trn-run reads float (f2, f4, f8, bfloat16, fp8), integer (i1-i8, u1-u8) and bool "
         "arrays; convert it (np.save(path, a.astype(np.float32)))";
}

}  // namespace

std::optional<DType> parse_descr(const std::string &descr, std::string *error) {
  auto fail = [&](const std::string &why) -> std::optional<DType> {
    if (error) *error = why;
    return std::nullopt;
  };
  if (descr.empty()) return fail("empty dtype descr");
  std::string body = descr;
  char order = '=';
  if (body[0] == '<' || body[0] == '>' || body[0] == '|' || body[0] == '=') {
    order = body[0];
    body = body.substr(1);
  }
  DType t;
  for (const char *name : {"bfloat16", "float8_e4m3fn", "float8_e5m2"}) {
    if (body == name) {
      t.kind = 'n';
      t.name = name;
      t.itemsize = body == "bfloat16" ? 2 : 1;
      if (order == '>' && t.itemsize > 1) break;
      return t;
    }
  }
  if (t.kind == 0) {
    if (body.size() < 2 || body.size() > 3) return fail(unsupported_descr(descr));
    const char kind = body[0];
    size_t size = 0;
    for (size_t i = 1; i < body.size(); ++i) {
      if (body[i] < '0' || body[i] > '9') return fail(unsupported_descr(descr));
      size = size * 10 + static_cast<size_t>(body[i] - '0');
    }
    const bool ok =
        (kind == 'f' && (size == 2 || size == 4 || size == 8)) ||
        ((kind == 'i' || kind == 'u') && (size == 1 || size == 2 || size == 4 || size == 8)) ||
        (kind == 'b' && size == 1) || (kind == 'V' && size >= 1 && size <= 8);
    if (!ok) return fail(unsupported_descr(descr));
    t.kind = kind;
    t.itemsize = size;
  }
  if (order == '>' && t.itemsize > 1)
    return fail("big-endian data ('" + descr +
                "') is not supported; save the array little-endian, e.g. "
                "np.save(path, a.astype(a.dtype.newbyteorder('<')))");
  return t;
}

uint64_t Array::elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

std::optional<std::string> parse(std::span<const std::byte> bytes, Array &out) {
  if (bytes.size() < kMagicSize || std::memcmp(bytes.data(), kMagic, kMagicSize) != 0)
    return std::string("not a .npy file (bad magic: it does not start with \\x93NUMPY)");
  if (bytes.size() < kMagicSize + 2) return std::string("truncated: no format version");
  const auto major = static_cast<unsigned>(bytes[6]);
  const auto minor = static_cast<unsigned>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0)
    return "unsupported .npy format version " + std::to_string(major) + "." +
           std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)";
  const size_t length_size = major == 1 ? 2 : 4;
  const size_t prefix = kMagicSize + 2 + length_size;
  if (bytes.size() < prefix) return std::string("truncated: no header length");
  const size_t header_length = read_le(bytes.data() + kMagicSize + 2, length_size);
  if (header_length > kMaxHeaderBytes)
    return "the header length " + std::to_string(header_length) + " is larger than the " +
           std::to_string(kMaxHeaderBytes) + " bytes accepted";
  if (bytes.size() - prefix < header_length)
    return "truncated: the header is " + std::to_string(header_length) + " bytes, the file has " +
           std::to_string(bytes.size() - prefix) + " after the prefix";
  const std::string_view header(reinterpret_cast<const char *>(bytes.data() + prefix),
                                header_length);

  Value dict;
  if (auto err = Parser(header).parse_header(dict)) return err;
  const Value *descr = nullptr, *fortran = nullptr, *shape = nullptr;
  for (const auto &[key, value] : dict.entries) {
    if (key == "descr")
      descr = &value;
    else if (key == "fortran_order")
      fortran = &value;
    else if (key == "shape")
      shape = &value;
    else
      return "malformed header: unexpected key '" + key + "'";
  }
  if (!descr || !fortran || !shape)
    return std::string("malformed header: it needs the keys 'descr', 'fortran_order' and 'shape'");
  if (descr->kind == Value::Kind::kSequence)
    return std::string(
        "structured dtypes (a list descr) are not supported; save each field as an array of "
        "its own (np.save(path, a['name']))");
  if (descr->kind != Value::Kind::kString)
    return std::string("malformed header: 'descr' is not a string");
  if (fortran->kind != Value::Kind::kBool)
    return std::string("malformed header: 'fortran_order' is not True or False");
  if (fortran->flag)
    return std::string(
        "fortran_order True is not supported; save a C-order array "
        "(np.save(path, np.ascontiguousarray(a)))");
  if (shape->kind != Value::Kind::kSequence)
    return std::string("malformed header: 'shape' is not a tuple");

  Array result;
  result.descr = descr->text;
  std::string why;
  auto dtype = parse_descr(result.descr, &why);
  if (!dtype) return why;
  result.dtype = *dtype;
  if (shape->items.size() > 64) return std::string("malformed header: more than 64 dimensions");
  bool has_zero = false;
  for (const Value &dim : shape->items) {
    if (dim.kind != Value::Kind::kInt || (dim.flag && dim.magnitude != 0))
      return std::string("malformed header: 'shape' holds something other than sizes >= 0");
    result.shape.push_back(dim.magnitude);
    has_zero = has_zero || dim.magnitude == 0;
  }
  uint64_t data_bytes = has_zero ? 0 : result.dtype.itemsize;
  for (uint64_t dim : result.shape) {
    if (has_zero) break;
    if (data_bytes > std::numeric_limits<uint64_t>::max() / dim)
      return "the shape " + format_shape(result.shape) + " is too large";
    data_bytes *= dim;
  }
  const size_t available = bytes.size() - prefix - header_length;
  if (available < data_bytes)
    return "truncated: shape " + format_shape(result.shape) + " of '" + result.descr + "' needs " +
           std::to_string(data_bytes) + " data bytes, the file has " + std::to_string(available);
  if (available > data_bytes)
    return "the file has " + std::to_string(available - data_bytes) +
           " bytes after the array data (shape " + format_shape(result.shape) + " of '" +
           result.descr + "')";
  const std::byte *data = bytes.data() + prefix + header_length;
  result.data.assign(data, data + data_bytes);
  out = std::move(result);
  return std::nullopt;
}

std::optional<std::string> read_file(const std::string &path, Array &out) {
  std::vector<std::byte> bytes;
  if (auto err = common::read_regular_file(path, common::kMaxArrayFileBytes, bytes))
    return err->reason;
  return parse(bytes, out);
}

std::string format_shape(const std::vector<uint64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

std::vector<std::byte> serialize(const std::string &descr, const std::vector<uint64_t> &shape,
                                 std::span<const std::byte> data) {
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + format_shape(shape) + ", }";
  size_t prefix = kMagicSize + 2 + 2;
  unsigned major = 1;
  if (header.size() + 1 + 64 > 0xffff) {
    prefix = kMagicSize + 2 + 4;
    major = 2;
  }
  const size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header.push_back('\n');

  std::vector<std::byte> out;
  out.reserve(total + data.size());
  for (size_t i = 0; i < kMagicSize; ++i) out.push_back(static_cast<std::byte>(kMagic[i]));
  out.push_back(static_cast<std::byte>(major));
  out.push_back(std::byte{0});
  for (size_t i = 0; i < prefix - kMagicSize - 2; ++i)
    out.push_back(static_cast<std::byte>((header.size() >> (8 * i)) & 0xff));
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::optional<std::string> write_file(const std::string &path, const std::string &descr,
                                      const std::vector<uint64_t> &shape,
                                      std::span<const std::byte> data) {
  const std::vector<std::byte> bytes = serialize(descr, shape, data);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return std::string(std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string why = std::strerror(errno);
      ::close(fd);
      return why;
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return std::string(std::strerror(errno));
  return std::nullopt;
}

}  // namespace trn::tools::npy
