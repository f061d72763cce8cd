// trn-driver-conformance: the contract of drivers/hal.h stated as tests that drive a driver's
// shared object directly (no libtrn), so that any driver can be checked against it.
//
// Run against the sim driver of this build (what ctest does, with TRN_SIM_DEVICES=2):
//   build/release/tests/driver/conformance/trn-driver-conformance
// Run against another driver (one command line):
//   TRN_CONFORMANCE_DRIVER=/path/libtrn-driver-x.so
//   build/release/tests/driver/conformance/trn-driver-conformance
// Tests that need more devices than the driver reports say so (a warning) and skip the rest.
// Each test case opens its own instance with a private TRN_SIM_ROOT.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>

#include "loader_support.hpp"

int main(int argc, char **argv) {
  Catch::Session session;
  if (const int code = session.applyCommandLine(argc, argv); code != 0) return code;
  if (!session.configData().listTests && !session.configData().listTestNamesOnly &&
      !session.configData().listTags && !session.configData().listReporters)
    std::fprintf(stderr, "driver under test: %s\n", conformance::driver_path().c_str());
  return session.run();
}
