// Parsing and formatting of the small values that come from environment variables and config:
// shared by the runtime and the drivers so every variable is read the same way and every
// malformed value is reported the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trn::common {

// The value of an environment variable, or nullopt when unset. An empty value counts as unset.
std::optional<std::string> env(const char *name);

// A decimal unsigned integer without sign, spaces or trailing text.
std::optional<uint64_t> parse_uint(std::string_view text);

// A byte count: a decimal number with an optional binary suffix (K, KiB, M, MiB, G, GiB, T, TiB;
// case-insensitive). "96GiB" = 96 << 30. Overflow is rejected.
std::optional<uint64_t> parse_bytes(std::string_view text);

// A set of indices: "3", "0-3" (inclusive), or a comma list of those, "0,2-3". Returns the sorted,
// de-duplicated indices, or nullopt with `why` set to what is wrong.
std::optional<std::vector<uint32_t>> parse_index_list(std::string_view text, std::string *why);

// "96 GiB", "512 MiB", "1.5 KiB", "12 B": the largest binary unit that keeps the number >= 1.
std::string format_bytes(uint64_t bytes);

// "0-3,6,8-9": indices collapsed into ranges.
std::string format_index_list(const std::vector<uint32_t> &indices);

// Local time of a Unix time in nanoseconds with its UTC offset, "2026-11-29 12:03:11 +0100".
std::string format_unix_time(uint64_t unix_ns);

// Now, in Unix nanoseconds (CLOCK_REALTIME).
uint64_t unix_now_ns();

}  // namespace trn::common
