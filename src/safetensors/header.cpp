// The safetensors header: every rule of the format checked, each failure its own message naming
// the tensor and the field. Uses no trn function (the fuzz target compiles it alone).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>

#include "trn/safetensors.hpp"

namespace trn::safetensors {

namespace {

using nlohmann::json;

struct DtypeName {
  const char *name;
  trn_dtype_t dtype;  // what holds it on trn; kNoDtype: its bytes only
  uint32_t bits;      // per element
};

// Every dtype of the format. A trn dtype appears once before any other name that loads as it
// ("U8" before "BOOL"), so that dtype_to_name gives its own name.
constexpr DtypeName kDtypes[] = {
    {"F32", TRN_DTYPE_F32, 32},
    {"BF16", TRN_DTYPE_BF16, 16},
    {"F16", TRN_DTYPE_F16, 16},
    {"F8_E4M3", TRN_DTYPE_FP8_E4M3, 8},
    {"F8_E5M2", TRN_DTYPE_FP8_E5M2, 8},
    {"I32", TRN_DTYPE_I32, 32},
    {"I16", TRN_DTYPE_I16, 16},
    {"I8", TRN_DTYPE_I8, 8},
    {"U8", TRN_DTYPE_U8, 8},
    {"F64", TRN_DTYPE_F64, 64},  // host dtypes of trn (trn_ops computes them on the host)
    {"I64", TRN_DTYPE_I64, 64},
    // 0 or 1 in a byte, as PyTorch stores bool (and trn's PyTorch backend holds it in U8).
    {"BOOL", TRN_DTYPE_U8, 8},
    // No trn type holds these: they load as their bytes.
    {"U16", kNoDtype, 16},
    {"U32", kNoDtype, 32},
    {"U64", kNoDtype, 64},
    {"F8_E8M0", kNoDtype, 8},
    {"C64", kNoDtype, 64},
    {"F4", kNoDtype, 4},
    {"F6_E2M3", kNoDtype, 6},
    {"F6_E3M2", kNoDtype, 6},
};

const DtypeName *find_dtype(std::string_view name) {
  for (const auto &d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

constexpr const char *kDtypeNames =
    "F32, BF16, F16, F8_E4M3, F8_E5M2, F8_E8M0, I64, I32, I16, I8, U64, U32, U16, U8, BOOL, F64, "
    "C64, F4, F6_E2M3 or F6_E3M2";

// JSON nests three deep in a valid header (object, tensor, shape): deeper input is refused while
// it is parsed, so no input makes the parser or the document recurse far.
constexpr int kMaxDepth = 3;

std::string in_quotes(const std::string &name) {
  return "'" + name + "'";
}

std::string unknown_dtype(std::string_view name) {
  return "dtype " + in_quotes(std::string(name)) + " is not a safetensors dtype (" + kDtypeNames +
         ")";
}

[[noreturn]] void refuse(const std::string &what) {
  throw Error("safetensors header: " + what);
}

[[noreturn]] void refuse_tensor(const std::string &name, const std::string &what) {
  refuse("tensor " + in_quotes(name) + ": " + what);
}

std::string offsets_text(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

TensorInfo parse_tensor(const std::string &name, const json &entry) {
  TensorInfo t;
  t.name = name;
  if (!entry.is_object())
    refuse("tensor " + in_quotes(name) + " is a JSON " + entry.type_name() +
           ", not an object with dtype, shape and data_offsets");
  for (const auto &[key, value] : entry.items()) {
    (void)value;
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      refuse_tensor(name, "unknown field " + in_quotes(key) +
                              " (a tensor has dtype, shape and data_offsets)");
  }
  const auto dtype = entry.find("dtype");
  if (dtype == entry.end()) refuse_tensor(name, "dtype is missing");
  if (!dtype->is_string()) refuse_tensor(name, "dtype is not a string");
  t.dtype_name = dtype->get<std::string>();
  const DtypeName *type = find_dtype(t.dtype_name);
  if (!type) refuse_tensor(name, unknown_dtype(t.dtype_name));
  t.dtype = type->dtype;
  const auto shape = entry.find("shape");
  if (shape == entry.end()) refuse_tensor(name, "shape is missing");
  if (!shape->is_array()) refuse_tensor(name, "shape is not an array");
  for (size_t i = 0; i < shape->size(); ++i) {
    const json &d = (*shape)[i];
    if (!d.is_number_unsigned())
      refuse_tensor(name, "shape[" + std::to_string(i) + "] is not a non-negative integer");
    t.shape.push_back(d.get<uint64_t>());
  }
  const auto offsets = entry.find("data_offsets");
  if (offsets == entry.end()) refuse_tensor(name, "data_offsets is missing");
  if (!offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned())
    refuse_tensor(name, "data_offsets is not [begin, end] (two non-negative integers)");
  t.begin = (*offsets)[0].get<uint64_t>();
  t.end = (*offsets)[1].get<uint64_t>();
  if (t.end < t.begin)
    refuse_tensor(name, "data_offsets " + offsets_text(t.begin, t.end) + " end before they begin");
  uint64_t bytes = 0;
  try {
    bytes = tensor_bytes(t.shape, t.dtype_name);
  } catch (const Error &e) {
    refuse_tensor(name, e.what());
  }
  if (bytes != t.bytes())
    refuse_tensor(name, "shape " + shape_text(t.shape) + " of " + t.dtype_name + " is " +
                            std::to_string(bytes) + " bytes but data_offsets " +
                            offsets_text(t.begin, t.end) + " hold " + std::to_string(t.bytes()));
  return t;
}

void parse_metadata(const json &entry, std::map<std::string, std::string> *out) {
  if (entry.is_null()) return;  // no metadata, as the reference reader takes it
  if (!entry.is_object())
    refuse(std::string("__metadata__ is a JSON ") + entry.type_name() +
           ", not an object of strings");
  for (const auto &[key, value] : entry.items()) {
    if (!value.is_string())
      refuse("__metadata__ entry " + in_quotes(key) + " is a JSON " + value.type_name() +
             ", not a string");
    (*out)[key] = value.get<std::string>();
  }
}

// One pass over the header's JSON through the parser's event interface, in memory that grows
// with the tensors' descriptions, not with the JSON: each top-level entry is built as a small
// document of its own, checked and turned into its TensorInfo (or the metadata), and let go. A
// document of the whole header took about eight times its text (a million tensors: over 1 GB),
// and its callback walked the whole top-level object each time an entry ended (quadratic: 40,000
// tensors took 13 s). It also refuses what a document would let pass: nesting deeper than a
// header's, and a field given twice in one object (JSON allows it, and the parser keeps the last:
// a broken writer, not a choice). A tensor named twice is found once every entry is in
// (check_names).
class HeaderReader final : public nlohmann::json_sax<json> {
 public:
  explicit HeaderReader(Header *header) : h_(header) {}
  // Why the text is not JSON, once the pass returned false.
  const std::string &syntax_error() const { return syntax_error_; }

  bool null() override {
    return scalar([](Dom &d) { return d.null(); });
  }
  bool boolean(bool v) override {
    return scalar([&](Dom &d) { return d.boolean(v); });
  }
  bool number_integer(number_integer_t v) override {
    return scalar([&](Dom &d) { return d.number_integer(v); });
  }
  bool number_unsigned(number_unsigned_t v) override {
    return scalar([&](Dom &d) { return d.number_unsigned(v); });
  }
  bool number_float(number_float_t v, const string_t &text) override {
    return scalar([&](Dom &d) { return d.number_float(v, text); });
  }
  bool string(string_t &v) override {
    return scalar([&](Dom &d) { return d.string(v); });
  }
  bool binary(binary_t &v) override {
    return scalar([&](Dom &d) { return d.binary(v); });
  }
  bool start_object(std::size_t n) override {
    const bool entry = open_ == 1;
    enter();
    if (open_ == 1) return true;  // the header itself
    if (entry) begin_entry();
    keys_[open_].clear();
    return dom_->start_object(n);
  }
  bool key(string_t &key) override {
    value();
    if (open_ == 1) {  // an entry's name
      name_ = key;
      return true;
    }
    if (!keys_[open_].insert(key).second)
      refuse(in_quotes(name_) + ": field " + in_quotes(key) + " appears twice");
    return dom_->key(key);
  }
  bool end_object() override {
    if (--open_ == 0) return true;
    dom_->end_object();
    if (open_ == 1) end_entry();
    return true;
  }
  bool start_array(std::size_t n) override {
    const bool entry = open_ == 1;
    enter();
    if (entry) begin_entry();
    return dom_->start_array(n);
  }
  bool end_array() override {
    --open_;
    dom_->end_array();
    if (open_ == 1) end_entry();
    return true;
  }
  bool parse_error(std::size_t, const std::string &,
                   const nlohmann::detail::exception &e) override {
    syntax_error_ = e.what();
    return false;
  }

 private:
  using Dom = nlohmann::detail::json_sax_dom_parser<json>;

  // Depth counts the containers open around an event, the top-level object's keys being at 1.
  void value() {
    if (open_ > kMaxDepth) refuse("the JSON nests deeper than a header does");
  }
  void enter() {
    value();
    ++open_;
  }
  template <typename F>
  bool scalar(F event) {
    value();
    if (open_ != 1) return event(*dom_);
    begin_entry();  // an entry that is a plain value (refused by parse_tensor, by name)
    event(*dom_);
    end_entry();
    return true;
  }
  void begin_entry() {
    entry_ = json();
    dom_.emplace(entry_, true);
  }
  void end_entry() {
    dom_.reset();
    if (name_ == "__metadata__") {
      if (metadata_seen_) refuse("__metadata__ appears twice");
      metadata_seen_ = true;
      parse_metadata(entry_, &h_->metadata);
    } else {
      h_->tensors.push_back(parse_tensor(name_, entry_));
    }
    entry_ = json();
  }

  Header *h_;
  int open_ = 0;
  std::set<std::string> keys_[kMaxDepth + 2];  // per depth from 2, the open object's fields
  std::string name_;                           // the entry being read
  json entry_;
  std::optional<Dom> dom_;
  bool metadata_seen_ = false;
  std::string syntax_error_;
};

// A name given to two tensors (JSON allows a key twice; a header may not).
void check_names(Header *h) {
  std::sort(h->tensors.begin(), h->tensors.end(),
            [](const TensorInfo &a, const TensorInfo &b) { return a.name < b.name; });
  const auto twice =
      std::adjacent_find(h->tensors.begin(), h->tensors.end(),
                         [](const TensorInfo &a, const TensorInfo &b) { return a.name == b.name; });
  if (twice != h->tensors.end()) refuse("tensor " + in_quotes(twice->name) + " appears twice");
}

// Sorted by begin (then end, then name: the names are unique by now, so the order is total and
// the sort needs no memory of its own), the ranges must tile the data section exactly.
void check_layout(Header *h) {
  std::sort(h->tensors.begin(), h->tensors.end(), [](const TensorInfo &a, const TensorInfo &b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.name < b.name;
  });
  uint64_t at = 0;
  const TensorInfo *reach = nullptr;  // the tensor that ends at `at`
  for (const TensorInfo &t : h->tensors) {
    if (t.end > h->data_bytes)
      refuse_tensor(t.name, "data_offsets " + offsets_text(t.begin, t.end) +
                                " run past the data section (" + std::to_string(h->data_bytes) +
                                " bytes)");
    if (reach && t.begin < at)
      refuse("tensors " + in_quotes(reach->name) + " and " + in_quotes(t.name) + " overlap: " +
             offsets_text(reach->begin, reach->end) + " and " + offsets_text(t.begin, t.end));
    if (t.begin > at)
      refuse("bytes " + std::to_string(at) + " to " + std::to_string(t.begin) +
             " of the data section belong to no tensor (before " + in_quotes(t.name) + ")");
    at = t.end;
    reach = &t;
  }
  if (at != h->data_bytes)
    refuse("the data section has " + std::to_string(h->data_bytes) +
           " bytes but the tensors end at " + std::to_string(at) +
           " (trailing bytes belong to no tensor)");
}

}  // namespace

std::string shape_text(const std::vector<uint64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

bool dtype_from_name(std::string_view name, trn_dtype_t *dtype) {
  const DtypeName *d = find_dtype(name);
  if (!d || d->dtype == kNoDtype) return false;
  *dtype = d->dtype;
  return true;
}

uint32_t dtype_bits(std::string_view name) {
  const DtypeName *d = find_dtype(name);
  return d ? d->bits : 0;
}

uint64_t tensor_bytes(const std::vector<uint64_t> &shape, std::string_view dtype_name) {
  const uint32_t bits = dtype_bits(dtype_name);
  if (bits == 0) throw Error(unknown_dtype(dtype_name));
  for (uint64_t d : shape)
    if (d == 0) return 0;
  auto refuse_shape = [&](const std::string &why) {
    throw Error("shape " + shape_text(shape) + " of " + std::string(dtype_name) + why);
  };
  // Overflow-safe: the product stops growing past what any file can hold. Whole-byte dtypes
  // count bytes; the packed ones (F4, F6) count bits, which must come to whole bytes.
  const bool whole_bytes = bits % 8 == 0;
  uint64_t total = whole_bytes ? bits / 8 : bits;
  for (uint64_t d : shape) {
    if (d > UINT64_MAX / total)
      refuse_shape(whole_bytes ? " has more than 2^64 bytes" : " has more than 2^64 bits");
    total *= d;
  }
  if (whole_bytes) return total;
  if (total % 8 != 0)
    refuse_shape(" is " + std::to_string(total) + " bits, not a whole number of bytes");
  return total / 8;
}

const char *dtype_to_name(trn_dtype_t dtype) {
  for (const auto &d : kDtypes)
    if (d.dtype == dtype && dtype != kNoDtype) return d.name;
  return nullptr;
}

const TensorInfo *Header::find(std::string_view name) const {
  for (const TensorInfo &t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

Header parse_header(const uint8_t *bytes, size_t size, uint64_t file_size) {
  if (file_size < 8 || size < 8)
    refuse("the file is " + std::to_string(file_size) +
           " bytes: a safetensors file starts with an 8-byte header length");
  Header h;
  for (int i = 7; i >= 0; --i) h.header_bytes = h.header_bytes << 8 | bytes[i];
  if (h.header_bytes > kMaxHeaderBytes)
    refuse("the header length " + std::to_string(h.header_bytes) + " is above the limit of " +
           std::to_string(kMaxHeaderBytes) + " bytes (is this a safetensors file?)");
  if (h.header_bytes < 2)
    refuse("the header length " + std::to_string(h.header_bytes) +
           " is too small for a JSON object");
  if (h.header_bytes > file_size - 8)
    refuse("the header length " + std::to_string(h.header_bytes) +
           " runs past the end of the file (" + std::to_string(file_size) + " bytes)");
  if (size - 8 < h.header_bytes)
    refuse("only " + std::to_string(size - 8) + " of the header's " +
           std::to_string(h.header_bytes) + " bytes were given");
  h.data_offset = 8 + h.header_bytes;
  h.data_bytes = file_size - h.data_offset;
  const char *text = reinterpret_cast<const char *>(bytes + 8);
  if (text[0] != '{') refuse("the header does not start with '{' (it must be a JSON object)");
  // The parser takes a NUL for the end of its input and would ignore what follows it.
  if (const void *nul = std::memchr(text, '\0', h.header_bytes))
    refuse("the header has a NUL byte at offset " +
           std::to_string(static_cast<const char *>(nul) - text) +
           " (JSON text has none; pad a header with spaces)");
  // Room for every tensor at once (an entry names data_offsets once; a count too high only
  // reserves a little more): the vector never holds two copies of its tensors while it grows.
  const std::string_view body(text, h.header_bytes);
  size_t entries = 0;
  for (size_t at = body.find("\"data_offsets\""); at != std::string_view::npos;
       at = body.find("\"data_offsets\"", at + 1))
    ++entries;
  h.tensors.reserve(entries);
  HeaderReader reader(&h);
  bool parsed = false;
  try {
    parsed = json::sax_parse(text, text + h.header_bytes, &reader);
  } catch (const json::exception &e) {  // the reader's own documents; kept so nothing escapes
    refuse(std::string("the header is not valid JSON: ") + e.what());
  }
  if (!parsed) refuse("the header is not valid JSON: " + reader.syntax_error());
  check_names(&h);
  check_layout(&h);
  return h;
}

Header read_header(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw Error(std::string("safetensors: cannot stat the file: ") + std::strerror(errno),
                TRN_ERROR_FILE);
  if (!S_ISREG(st.st_mode))
    throw Error(std::string("safetensors: not a regular file (") +
                    (S_ISDIR(st.st_mode)    ? "a directory"
                     : S_ISFIFO(st.st_mode) ? "a pipe"
                                            : "a device or socket") +
                    "): a checkpoint is read at its tensors' offsets",
                TRN_ERROR_FILE);
  const auto file_size = static_cast<uint64_t>(st.st_size);
  auto read_at = [&](void *out, uint64_t n, uint64_t at) {
    uint64_t done = 0;
    while (done < n) {
      const ssize_t got =
          ::pread(fd, static_cast<char *>(out) + done, n - done, static_cast<off_t>(at + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0)
        throw Error(std::string("safetensors: cannot read the header: ") +
                        (got == 0 ? "end of file" : std::strerror(errno)),
                    TRN_ERROR_FILE);
      done += static_cast<uint64_t>(got);
    }
  };
  std::vector<uint8_t> bytes(8, 0);
  if (file_size >= 8) read_at(bytes.data(), 8, 0);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | bytes[i];
  // Only a length the checks would accept is read.
  if (file_size >= 8 && n <= kMaxHeaderBytes && n <= file_size - 8) {
    bytes.resize(8 + n);
    read_at(bytes.data() + 8, n, 8);
  }
  return parse_header(bytes.data(), bytes.size(), file_size);
}

}  // namespace trn::safetensors
