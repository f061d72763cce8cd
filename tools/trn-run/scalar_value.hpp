// The value of a scalar kernel argument as given on the command line (--scalar NAME=VALUE).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "trn/trn.h"

namespace trn::run {

// Reads `text` as a value of `dtype`: f32 takes any number strtof reads whole ("2.5", "-1e-3",
// "0x1p-3", "inf", "nan"), rounded to nearest; i32 a decimal integer in range. nullopt on
// success, else why `text` is not such a value.
std::optional<std::string> parse_scalar(std::string_view text, trn_dtype_t dtype,
                                        trn_scalar_t *out);

}  // namespace trn::run
