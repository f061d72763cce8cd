// Catch2 prints trn_result_t values by name: "TRN_ERROR_CORE_BUSY (202)".
#pragma once

#include <catch2/catch.hpp>
#include <string>

#include "trn/trn.h"

namespace Catch {
template <>
struct StringMaker<trn_result_t> {
  static std::string convert(trn_result_t result) {
    return std::string(trn_result_name(result)) + " (" + std::to_string(result) + ")";
  }
};
}  // namespace Catch
