// What the container fuzz targets demand of anything their reader accepts: writing it and reading
// that back succeeds and gives an equal value, and writing that gives the same bytes. A failure
// aborts, so that libFuzzer keeps the input.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

namespace trn::fuzz {

// `read(bytes, T&)` returns an optional error string; `write(const T&)` the bytes; `same(a, b)`
// whether two values are equal. Returns the written bytes.
template <class T, class Read, class Write, class Same>
std::vector<std::byte> check_round_trip(const T &accepted, Read read, Write write, Same same,
                                        const char *what) {
  std::vector<std::byte> written = write(accepted);
  T again{};
  if (const auto err = read(std::span<const std::byte>(written), again)) {
    std::fprintf(stderr, "re-reading a written %s failed: %s\n", what, err->c_str());
    std::abort();
  }
  if (!same(accepted, again)) {
    std::fprintf(stderr, "the re-read %s differs from the one written\n", what);
    std::abort();
  }
  if (write(again) != written) {
    std::fprintf(stderr, "writing the re-read %s gave different bytes\n", what);
    std::abort();
  }
  return written;
}

}  // namespace trn::fuzz
