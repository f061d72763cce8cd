// Small helpers the conformance, multi-process and stress tests share: the last error, and the
// devices and cores of the current configuration (failing the test when they cannot be had).
#pragma once

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "trn/trn.h"

namespace trn::test {

inline std::string last_error() {
  return trn_last_error();
}

inline bool error_contains(const std::string &part) {
  return last_error().find(part) != std::string::npos;
}

inline std::vector<trn_device_t> devices() {
  uint32_t count = 0;
  INFO(last_error());
  REQUIRE(trn_device_get(&count, nullptr) == TRN_SUCCESS);
  std::vector<trn_device_t> list(count);
  REQUIRE(trn_device_get(&count, list.data()) == TRN_SUCCESS);
  list.resize(count);
  return list;
}

inline trn_device_t first_device() {
  auto list = devices();
  REQUIRE(!list.empty());
  return list[0];
}

inline trn_core_t core_at(trn_device_t device, uint32_t index) {
  uint32_t count = 0;
  INFO(last_error());
  REQUIRE(trn_core_get(device, &count, nullptr) == TRN_SUCCESS);
  std::vector<trn_core_t> cores(count);
  REQUIRE(trn_core_get(device, &count, cores.data()) == TRN_SUCCESS);
  REQUIRE(index < count);
  return cores[index];
}

}  // namespace trn::test
