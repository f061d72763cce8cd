// Number checks for CLI11 options that print readable limits (CLI11's own NonNegativeNumber and
// PositiveNumber print DBL_MAX in full, 309 digits) and refuse NaN, which CLI11's range checks
// let through.
#pragma once

#include <CLI/CLI.hpp>
#include <cmath>
#include <string>

namespace trn::tools {

// A finite number >= 0 (a tolerance).
inline CLI::Validator non_negative_finite() {
  return CLI::Validator(
      [](std::string &text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v)) return "'" + text + "' is not a number";
        if (!std::isfinite(v) || v < 0) return "'" + text + "' is not a finite number >= 0";
        return {};
      },
      "NUMBER >= 0");
}

// A number of seconds > 0; inf (or anything past what a 64-bit nanosecond count holds) means no
// limit.
inline CLI::Validator positive_seconds() {
  return CLI::Validator(
      [](std::string &text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v)) return "'" + text + "' is not a number";
        if (std::isnan(v) || v <= 0)
          return "'" + text + "' is not a number of seconds > 0 (inf: no limit)";
        return {};
      },
      "SECONDS > 0");
}

// seconds -> nanoseconds, saturating: UINT64_MAX (wait forever) for inf and anything as large.
inline uint64_t seconds_to_ns(double seconds) {
  const double ns = seconds * 1e9;
  if (!(ns < 18446744073709549568.0)) return UINT64_MAX;  // the largest double below 2^64
  return ns <= 0 ? 0 : static_cast<uint64_t>(ns);
}

}  // namespace trn::tools
