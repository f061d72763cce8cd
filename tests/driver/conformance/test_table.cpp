// The table: the entry point's table of interface version 2 (this release's minor or later, as
// the runtime accepts), large enough, named, every operation present; open refuses NULL
// arguments cleanly, close accepts NULL, and instances open and close repeatedly.
#include <catch2/catch.hpp>
#include <cstring>

#include "loader_support.hpp"

using namespace conformance;

TEST_CASE("table: version 2, this release's minor or later, large enough, named", "[table]") {
  const trn_hal_ops_t &t = table();
  INFO("driver " << driver_path() << " version 0x" << std::hex << t.version);
  CHECK(TRN_HAL_VERSION_MAJOR(t.version) == 2u);
  CHECK(TRN_HAL_VERSION_MINOR(t.version) >= TRN_HAL_VERSION_MINOR(TRN_HAL_VERSION));
  CHECK(t.size >= sizeof(trn_hal_ops_t));
  REQUIRE(t.name != nullptr);
  CHECK(std::strlen(t.name) > 0);
}

TEST_CASE("table: every operation is present", "[table]") {
  for (const auto &[name, fn] : operations(table())) {
    INFO("operation " << name);
    CHECK(fn != nullptr);
  }
}

TEST_CASE("table: open refuses NULL arguments cleanly", "[table]") {
  PrivateRoot root;
  const trn_hal_process_identity_t identity{"trn-driver-conformance", "0.2.0"};
  Err err;
  HAL_CHECK_FAILS(ops().open(&identity, nullptr, &err), err);
  trn_hal_instance_t *instance = nullptr;
  HAL_CHECK_FAILS(ops().open(nullptr, &instance, &err), err);
  CHECK(instance == nullptr);
  ops().close(instance);
}

TEST_CASE("table: close accepts NULL", "[table]") {
  ops().close(nullptr);
  SUCCEED("close(NULL) returned");
}

TEST_CASE("table: open and close repeatedly", "[table]") {
  PrivateRoot root;
  const trn_hal_process_identity_t identity{"trn-driver-conformance", "0.2.0"};
  uint32_t first_count = UINT32_MAX;
  for (int i = 0; i < 8; ++i) {
    INFO("round " << i);
    Err err;
    trn_hal_instance_t *instance = nullptr;
    HAL_REQUIRE_OK(ops().open(&identity, &instance, &err), err);
    REQUIRE(instance != nullptr);
    const uint32_t count = ops().device_count(instance);
    if (first_count == UINT32_MAX) first_count = count;
    CHECK(count == first_count);
    char detail[TRN_DETAIL_MAX] = {};
    const trn_result_t status = ops().status(instance, detail, sizeof detail);
    INFO("status detail: " << detail);
    if (count > 0)
      CHECK(status == TRN_SUCCESS);
    else
      CHECK(status != TRN_SUCCESS);
    CHECK(std::strlen(detail) > 0);
    ops().close(instance);
  }
}
