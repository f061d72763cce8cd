#include "common/parse.hpp"

#include <cctype>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <set>

namespace trn::common {

std::optional<std::string> env(const char *name) {
  const char *value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::optional<uint64_t> parse_uint(std::string_view text) {
  if (text.empty()) return std::nullopt;
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

}  // namespace

std::optional<uint64_t> parse_bytes(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  auto number = parse_uint(text.substr(0, digits));
  if (!number) return std::nullopt;
  std::string_view suffix = text.substr(digits);
  while (!suffix.empty() && suffix.front() == ' ') suffix.remove_prefix(1);
  static constexpr struct {
    const char *short_name;
    const char *long_name;
    unsigned shift;
  } kUnits[] = {{"K", "KiB", 10}, {"M", "MiB", 20}, {"G", "GiB", 30}, {"T", "TiB", 40}};
  unsigned shift = 0;
  if (!suffix.empty() && !iequals(suffix, "B")) {
    bool found = false;
    for (const auto &unit : kUnits) {
      if (iequals(suffix, unit.short_name) || iequals(suffix, unit.long_name)) {
        shift = unit.shift;
        found = true;
      }
    }
    if (!found) return std::nullopt;
  }
  if (shift != 0 && *number > (UINT64_MAX >> shift)) return std::nullopt;
  return *number << shift;
}

std::optional<std::vector<uint32_t>> parse_index_list(std::string_view text, std::string *why) {
  auto fail = [&](std::string reason) -> std::optional<std::vector<uint32_t>> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  if (text.empty()) return fail("the value is empty");
  constexpr uint64_t kMaxIndex = 1u << 20;
  std::set<uint32_t> indices;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string_view item = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (item.empty()) return fail("an empty item between commas");
    size_t dash = item.find('-');
    auto first = parse_uint(item.substr(0, dash));
    auto last = dash == std::string_view::npos ? first : parse_uint(item.substr(dash + 1));
    if (!first || !last)
      return fail("'" + std::string(item) + "' is not an index or an inclusive range like 0-3");
    if (*first > *last) return fail("the range '" + std::string(item) + "' ends before it starts");
    if (*last >= kMaxIndex) return fail("the index in '" + std::string(item) + "' is too large");
    for (uint64_t i = *first; i <= *last; ++i) indices.insert(static_cast<uint32_t>(i));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return std::vector<uint32_t>(indices.begin(), indices.end());
}

std::string format_bytes(uint64_t bytes) {
  static constexpr const char *kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  unsigned unit = 0;
  while (unit + 1 < std::size(kUnits) && bytes >= (uint64_t{1} << (10 * (unit + 1)))) ++unit;
  char text[32];
  if (unit == 0) {
    std::snprintf(text, sizeof text, "%" PRIu64 " B", bytes);
  } else {
    const double value =
        static_cast<double>(bytes) / static_cast<double>(uint64_t{1} << (10 * unit));
    if (bytes % (uint64_t{1} << (10 * unit)) == 0)
      std::snprintf(text, sizeof text, "%.0f %s", value, kUnits[unit]);
    else
      std::snprintf(text, sizeof text, "%.1f %s", value, kUnits[unit]);
  }
  return text;
}

std::string format_index_list(const std::vector<uint32_t> &indices) {
  std::string out;
  for (size_t i = 0; i < indices.size();) {
    size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(indices[i]);
    if (j > i) out += '-' + std::to_string(indices[j]);
    i = j + 1;
  }
  return out;
}

std::string format_unix_time(uint64_t unix_ns) {
  const time_t seconds = static_cast<time_t>(unix_ns / 1000000000u);
  struct tm local {};
  localtime_r(&seconds, &local);
  char text[32];
  // With the zone's offset: a message read on another machine, or in a log, is unambiguous.
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S %z", &local);
  return text;
}

uint64_t unix_now_ns() {
  struct timespec now {};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec);
}

}  // namespace trn::common
