// Little-endian byte writing and bounds-checked reading, shared by the kernel and program
// containers: every record is written and read field by field, never a struct copy.
#pragma once

#include <fmt/format.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace trn::isa::bytes {

using Error = std::optional<std::string>;

constexpr uint64_t pad_to(uint64_t n, uint64_t align) {
  return (n + align - 1) / align * align;
}

// a + b <= limit, without wrapping.
inline bool fits(uint64_t offset, uint64_t size, uint64_t limit) {
  return offset <= limit && size <= limit - offset;
}

class Out {
 public:
  void u8(uint8_t v) { b_.push_back(static_cast<std::byte>(v)); }
  void u16(uint16_t v) { le(v, 2); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void f32(float v) { u32(std::bit_cast<uint32_t>(v)); }
  void str(std::string_view s) {
    for (char c : s) u8(static_cast<uint8_t>(c));
  }
  void bytes(std::span<const std::byte> s) { b_.insert(b_.end(), s.begin(), s.end()); }
  void pad(uint64_t align) { b_.resize(pad_to(b_.size(), align), std::byte{0}); }
  size_t size() const { return b_.size(); }
  std::vector<std::byte> &data() { return b_; }

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<std::byte> b_;
};

// Sequential little-endian reads within one span. Callers check has() first; a read past the end
// anyway yields 0 and is remembered (overrun()), never touches memory outside the span.
class Cursor {
 public:
  explicit Cursor(std::span<const std::byte> d) : d_(d) {}
  bool has(uint64_t n) const { return n <= d_.size() - pos_; }
  size_t pos() const { return pos_; }
  size_t remaining() const { return d_.size() - pos_; }
  bool overrun() const { return overrun_; }

  uint8_t u8() { return static_cast<uint8_t>(le(1)); }
  uint16_t u16() { return static_cast<uint16_t>(le(2)); }
  uint32_t u32() { return static_cast<uint32_t>(le(4)); }
  uint64_t u64() { return le(8); }
  int32_t i32() { return static_cast<int32_t>(u32()); }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  float f32() { return std::bit_cast<float>(u32()); }
  std::span<const std::byte> take(uint64_t n) {
    if (!has(n)) {
      overrun_ = true;
      pos_ = d_.size();
      return {};
    }
    auto s = d_.subspan(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }

 private:
  uint64_t le(int n) {
    if (!has(static_cast<uint64_t>(n))) {
      overrun_ = true;
      pos_ = d_.size();
      return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < n; ++i)
      v |= uint64_t{std::to_integer<uint8_t>(d_[pos_ + static_cast<size_t>(i)])} << (8 * i);
    pos_ += static_cast<size_t>(n);
    return v;
  }

  std::span<const std::byte> d_;
  size_t pos_ = 0;
  bool overrun_ = false;
};

// A NUL-terminated string of exactly `len` bytes at the cursor (followed by its NUL).
inline Error read_cstring(Cursor &c, uint64_t len, uint64_t max_len, std::string_view what,
                          std::string &out) {
  if (len > max_len) return fmt::format("{} is {} bytes long; at most {}", what, len, max_len);
  if (!c.has(len + 1))
    return fmt::format("{} ({} bytes and its NUL) runs past the end of the section", what, len);
  auto s = c.take(len + 1);
  if (s[static_cast<size_t>(len)] != std::byte{0})
    return fmt::format("{} is not NUL-terminated", what);
  out.clear();
  out.reserve(static_cast<size_t>(len));
  for (size_t i = 0; i < len; ++i) {
    const auto ch = std::to_integer<uint8_t>(s[i]);
    if (ch == 0) return fmt::format("{} contains a NUL byte at position {}", what, i);
    out.push_back(static_cast<char>(ch));
  }
  return std::nullopt;
}

// Zero padding up to a multiple of `align` within the section.
inline Error read_padding(Cursor &c, uint64_t align, std::string_view what) {
  const uint64_t n = pad_to(c.pos(), align) - c.pos();
  if (!c.has(n)) return fmt::format("{}: padding runs past the end of the section", what);
  for (std::byte b : c.take(n))
    if (b != std::byte{0}) return fmt::format("{}: padding byte is not zero", what);
  return std::nullopt;
}

}  // namespace trn::isa::bytes
