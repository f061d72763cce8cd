// A small reader and writer for numpy .npy files (format versions 1.0, 2.0 and 3.0): the
// header dictionary ('descr', 'fortran_order', 'shape') and the raw array data in C order.
//
// Only little-endian (or byte-order-free) data in C order is accepted; big-endian data and
// fortran_order True are rejected with a message saying how to re-save the array. The parser
// never reads outside the bytes it is given and never crashes on malformed input: every failure
// is a one-line message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace trn::tools::npy {

// The element type of a descr, as far as this reader understands it.
struct DType {
  char kind = 0;        // 'f' float, 'i' signed, 'u' unsigned, 'b' bool, 'V' raw bytes,
                        // 'n' a named (ml_dtypes-style) type: see `name`
  size_t itemsize = 0;  // bytes per element
  std::string name;     // 'n' kinds: "bfloat16", "float8_e4m3fn", "float8_e5m2"
};

// Parses a descr string: "<f4", "|u1", "=i2", "bfloat16", ... nullopt and a message in `error`
// when it is not a supported little-endian scalar type.
std::optional<DType> parse_descr(const std::string &descr, std::string *error);

struct Array {
  std::string descr;            // as written in the header ("<f4")
  DType dtype;                  // parsed descr
  std::vector<uint64_t> shape;  // () for a scalar
  std::vector<std::byte> data;  // elements() * dtype.itemsize bytes, C order
  uint64_t elements() const;    // product of shape (1 for a scalar)
};

// Largest header accepted (numpy itself refuses more than 10000 bytes by default).
constexpr size_t kMaxHeaderBytes = 1u << 20;

// Decodes a whole .npy file. nullopt on success; otherwise why it is not a usable .npy file
// ("truncated: the header says 4096 data bytes, the file has 100").
std::optional<std::string> parse(std::span<const std::byte> bytes, Array &out);
// Reads and decodes a file: a regular file of at most common::kMaxArrayFileBytes (16 GiB). The
// message names the problem, not the path.
std::optional<std::string> read_file(const std::string &path, Array &out);

// The .npy file for an array: version 1.0 (2.0 if the header needs it), the header padded to
// 64 bytes. `descr` must be a simple typestr such as "<f4"; data.size() must match the shape.
std::vector<std::byte> serialize(const std::string &descr, const std::vector<uint64_t> &shape,
                                 std::span<const std::byte> data);
// Writes serialize(...) to `path`. nullopt on success, else why not (strerror text).
std::optional<std::string> write_file(const std::string &path, const std::string &descr,
                                      const std::vector<uint64_t> &shape,
                                      std::span<const std::byte> data);

// "(128, 512)", "(5,)", "()": a shape as numpy prints it.
std::string format_shape(const std::vector<uint64_t> &shape);

}  // namespace trn::tools::npy
