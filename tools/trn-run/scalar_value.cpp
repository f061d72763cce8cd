#include "trn-run/scalar_value.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

namespace trn::run {

std::optional<std::string> parse_scalar(std::string_view text, trn_dtype_t dtype,
                                        trn_scalar_t *out) {
  const std::string s(text);  // NUL-terminated for strto*
  const bool blank = s.empty() || s.find_first_of(" \t\n") != std::string::npos;
  char *end = nullptr;
  *out = trn_scalar_t{};
  errno = 0;
  switch (dtype) {
    case TRN_DTYPE_F32: {
      const float v = blank ? 0.0f : std::strtof(s.c_str(), &end);
      if (blank || end != s.c_str() + s.size())
        return "'" + s + "' is not a number (f32: e.g. 2.5, -1e-3, inf, nan)";
      // strtof sets ERANGE for underflow too, which rounds to a subnormal or zero: a value.
      if (errno == ERANGE && std::isinf(v))
        return "'" + s + "' is out of range for f32 (at most 3.4028235e38 in magnitude)";
      out->f32 = v;
      return std::nullopt;
    }
    case TRN_DTYPE_I32: {
      const long long v = blank ? 0 : std::strtoll(s.c_str(), &end, 10);
      if (blank || end != s.c_str() + s.size()) return "'" + s + "' is not a decimal integer (i32)";
      if (errno == ERANGE || v < std::numeric_limits<int32_t>::min() ||
          v > std::numeric_limits<int32_t>::max())
        return "'" + s + "' is out of range for i32 (-2147483648..2147483647)";
      out->i32 = static_cast<int32_t>(v);
      return std::nullopt;
    }
    default:
      // The loader accepts no other scalar dtype; a driver reporting one is answered here.
      return "a scalar argument of dtype " + std::to_string(static_cast<int>(dtype)) +
             " cannot be given (scalars are f32 or i32)";
  }
}

}  // namespace trn::run
