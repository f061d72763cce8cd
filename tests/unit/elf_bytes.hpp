// Reading and patching an encoded ELF image (kernel or program) in place, at offsets the
// tests compute from the documented layouts: the section header table and named sections.
#pragma once

#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace trn::test {

using Bytes = std::vector<std::byte>;

inline uint64_t get_le(const Bytes &b, size_t off, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= uint64_t{std::to_integer<uint8_t>(b.at(off + i))} << (8 * i);
  return v;
}

inline void put_le(Bytes &b, size_t off, size_t n, uint64_t v) {
  for (size_t i = 0; i < n; ++i) b.at(off + i) = static_cast<std::byte>(v >> (8 * i));
}

inline size_t shoff(const Bytes &b) {
  return static_cast<size_t>(get_le(b, 40, 8));
}
inline size_t shnum(const Bytes &b) {
  return static_cast<size_t>(get_le(b, 60, 2));
}
inline size_t shdr(const Bytes &b, size_t index) {
  return shoff(b) + index * 64;
}

// Offset of the section header of the section called `name`.
inline size_t header_of(const Bytes &b, const std::string &name) {
  const size_t strtab = shdr(b, get_le(b, 62, 2));
  const size_t names = static_cast<size_t>(get_le(b, strtab + 24, 8));
  for (size_t i = 1; i < shnum(b); ++i) {
    const size_t h = shdr(b, i);
    const size_t at = names + static_cast<size_t>(get_le(b, h, 4));
    std::string s;
    for (size_t k = at; b.at(k) != std::byte{0}; ++k) s.push_back(static_cast<char>(b[k]));
    if (s == name) return h;
  }
  FAIL("no section " << name);
  return 0;
}
inline size_t offset_of(const Bytes &b, const std::string &name) {
  return static_cast<size_t>(get_le(b, header_of(b, name) + 24, 8));
}
inline size_t size_of(const Bytes &b, const std::string &name) {
  return static_cast<size_t>(get_le(b, header_of(b, name) + 32, 8));
}

}  // namespace trn::test

// Checks that the image is rejected for `reason`: the including file defines
// `std::string read_error(const Bytes &)` for the reader it tests.
#define CHECK_REJECTS(bytes, reason)                     \
  do {                                                   \
    const std::string why_ = read_error(bytes);          \
    INFO("reason: " << why_);                            \
    CHECK_THAT(why_, Catch::Matchers::Contains(reason)); \
  } while (0)
