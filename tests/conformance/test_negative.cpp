// Conformance: every public function refuses bad input with the documented result and a
// trn_last_error() that says what was wrong — NULL pointers, NULL, stale, wrong-kind and garbage
// handles, uninitialised or foreign structs, malformed environment variables — and never
// crashes. After the input is fixed, the process carries on.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "support/api_helpers.hpp"
#include "support/result_printing.hpp"
#include "support/sim_env.hpp"
#include "trn/trn.h"

namespace {

using trn::test::core_at;
using trn::test::first_device;
using trn::test::last_error;

using trn::test::error_contains;

using trn::test::SimEnv;

trn_driver_t first_driver() {
  trn_driver_t driver = nullptr;
  uint32_t count = 1;
  INFO(trn_last_error());
  REQUIRE(trn_driver_get(&count, &driver) == TRN_SUCCESS);
  REQUIRE(count == 1);
  return driver;
}

template <typename Handle>
Handle handle_from(uintptr_t value) {
  return reinterpret_cast<Handle>(value);
}

template <typename To, typename From>
To recast(From handle) {
  return reinterpret_cast<To>(handle);
}

// Each public function that takes a handle, called with that handle and otherwise valid
// arguments. The name is what trn_last_error() is prefixed with.
struct Call {
  const char *name;
  std::function<trn_result_t()> run;
};

std::vector<Call> device_calls(trn_device_t device) {
  return {
      {"trn_device_get_properties",
       [=] {
         trn_device_properties_t p = TRN_DEVICE_PROPERTIES_INIT;
         return trn_device_get_properties(device, &p);
       }},
      {"trn_device_get_neighbors",
       [=] {
         uint32_t count = 0;
         return trn_device_get_neighbors(device, &count, nullptr);
       }},
      {"trn_device_get_processes",
       [=] {
         uint32_t count = 0;
         return trn_device_get_processes(device, &count, nullptr);
       }},
      {"trn_core_get",
       [=] {
         uint32_t count = 0;
         return trn_core_get(device, &count, nullptr);
       }},
      {"trn_core_get_all",
       [=] {
         uint32_t count = 0;
         return trn_core_get_all(device, &count, nullptr);
       }},
  };
}

std::vector<Call> core_calls(trn_core_t core) {
  return {
      {"trn_core_get_properties",
       [=] {
         trn_core_properties_t p = TRN_CORE_PROPERTIES_INIT;
         return trn_core_get_properties(core, &p);
       }},
      {"trn_core_acquire", [=] { return trn_core_acquire(core); }},
      {"trn_core_release", [=] { return trn_core_release(core); }},
      {"trn_core_get_owner",
       [=] {
         trn_process_info_t owner = TRN_PROCESS_INFO_INIT;
         return trn_core_get_owner(core, &owner);
       }},
  };
}

std::vector<Call> driver_calls(trn_driver_t driver) {
  return {
      {"trn_driver_get_properties",
       [=] {
         trn_driver_properties_t p = TRN_DRIVER_PROPERTIES_INIT;
         return trn_driver_get_properties(driver, &p);
       }},
  };
}

std::vector<Call> all_handle_calls(trn_driver_t driver, trn_device_t device, trn_core_t core) {
  std::vector<Call> all = driver_calls(driver);
  for (Call &call : device_calls(device)) all.push_back(std::move(call));
  for (Call &call : core_calls(core)) all.push_back(std::move(call));
  return all;
}

// Every call gives TRN_ERROR_INVALID_HANDLE naming itself and containing `detail`.
void expect_invalid_handle(const std::vector<Call> &calls, const std::string &detail) {
  for (const Call &call : calls) {
    INFO(call.name);
    const trn_result_t result = call.run();
    INFO("trn_last_error: " << trn_last_error());
    CHECK(result == TRN_ERROR_INVALID_HANDLE);
    if (result == TRN_SUCCESS) continue;  // trn_last_error() is not about this call
    CHECK(error_contains(call.name));
    CHECK(error_contains(detail));
  }
}

// The runtime fails to initialise with TRN_ERROR_INVALID_CONFIG naming the variable and text.
void expect_invalid_config(SimEnv &env, const char *variable, const char *value,
                           const std::vector<std::string> &also = {}) {
  INFO(variable << "='" << value << "'");
  env.set(variable, value);
  uint32_t count = 0;
  const trn_result_t result = trn_device_get(&count, nullptr);
  CHECK(result == TRN_ERROR_INVALID_CONFIG);
  INFO("trn_last_error: " << trn_last_error());
  if (result != TRN_SUCCESS) {
    CHECK(error_contains("trn_device_get"));
    // The variable and its text, as the user wrote them: VARIABLE='text'.
    CHECK(error_contains(std::string(variable) + "='" + value + "'"));
    for (const std::string &part : also) CHECK(error_contains(part));
  }
  // Every entry point fails the same way until the environment is fixed.
  count = 0;
  CHECK(trn_driver_get(&count, nullptr) == TRN_ERROR_INVALID_CONFIG);
  CHECK(error_contains(variable));
  // Fixed: the process recovers.
  env.set(variable, nullptr);
  count = 0;
  CHECK(trn_device_get(&count, nullptr) == TRN_SUCCESS);
  CHECK(count == 1);
}

}  // namespace

// ---- NULL pointers -----------------------------------------------------------------------------

TEST_CASE("NULL count pointers give TRN_ERROR_NULL_POINTER", "[negative][null]") {
  SimEnv env;
  const trn_device_t device = first_device();
  const std::vector<Call> calls = {
      {"trn_driver_get", [] { return trn_driver_get(nullptr, nullptr); }},
      {"trn_device_get", [] { return trn_device_get(nullptr, nullptr); }},
      {"trn_device_get_neighbors",
       [=] { return trn_device_get_neighbors(device, nullptr, nullptr); }},
      {"trn_device_get_processes",
       [=] { return trn_device_get_processes(device, nullptr, nullptr); }},
      {"trn_core_get", [=] { return trn_core_get(device, nullptr, nullptr); }},
      {"trn_core_get_all", [=] { return trn_core_get_all(device, nullptr, nullptr); }},
  };
  for (const Call &call : calls) {
    INFO(call.name);
    const trn_result_t result = call.run();
    CHECK(result == TRN_ERROR_NULL_POINTER);
    if (result == TRN_SUCCESS) continue;  // trn_last_error() is not about this call
    INFO("trn_last_error: " << trn_last_error());
    CHECK(error_contains(call.name));
    CHECK(error_contains("count"));
  }

  // With an array but no count.
  trn_device_t devices[1];
  CHECK(trn_device_get(nullptr, devices) == TRN_ERROR_NULL_POINTER);
  trn_driver_t drivers[1];
  CHECK(trn_driver_get(nullptr, drivers) == TRN_ERROR_NULL_POINTER);
  trn_core_t cores[1];
  CHECK(trn_core_get(device, nullptr, cores) == TRN_ERROR_NULL_POINTER);
  CHECK(trn_core_get_all(device, nullptr, cores) == TRN_ERROR_NULL_POINTER);
  uint32_t indices[1];
  CHECK(trn_device_get_neighbors(device, nullptr, indices) == TRN_ERROR_NULL_POINTER);
  trn_process_info_t infos[1] = {TRN_PROCESS_INFO_INIT};
  CHECK(trn_device_get_processes(device, nullptr, infos) == TRN_ERROR_NULL_POINTER);
}

TEST_CASE("trn_last_error never returns NULL", "[negative][errors]") {
  SimEnv env;
  // On a thread that has made no call yet, and after a failure: "" or the message, never NULL.
  bool fresh_thread_null = true;
  std::thread([&] { fresh_thread_null = trn_last_error() == nullptr; }).join();
  CHECK_FALSE(fresh_thread_null);
  CHECK(trn_last_error() != nullptr);
  CHECK(trn_device_get(nullptr, nullptr) == TRN_ERROR_NULL_POINTER);
  REQUIRE(trn_last_error() != nullptr);
  CHECK(std::string(trn_last_error()).find("trn_device_get") != std::string::npos);
}

TEST_CASE("NULL output structs give TRN_ERROR_NULL_POINTER", "[negative][null]") {
  SimEnv env;
  const trn_driver_t driver = first_driver();
  const trn_device_t device = first_device();
  const trn_core_t core = core_at(device, 0);

  REQUIRE(trn_driver_get_properties(driver, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(error_contains("trn_driver_get_properties"));
  CHECK(error_contains("properties"));
  REQUIRE(trn_device_get_properties(device, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(error_contains("trn_device_get_properties"));
  CHECK(error_contains("properties"));
  REQUIRE(trn_core_get_properties(core, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(error_contains("trn_core_get_properties"));
  CHECK(error_contains("properties"));
  REQUIRE(trn_core_get_owner(core, nullptr) == TRN_ERROR_NULL_POINTER);
  CHECK(error_contains("trn_core_get_owner"));
  CHECK(error_contains("owner"));
}

// ---- handles -----------------------------------------------------------------------------------

TEST_CASE("NULL handles give TRN_ERROR_INVALID_HANDLE", "[negative][handle]") {
  SimEnv env;
  expect_invalid_handle(all_handle_calls(nullptr, nullptr, nullptr), "NULL");
}

TEST_CASE("handles used after trn_runtime_shutdown are stale", "[negative][handle]") {
  SimEnv env;
  const trn_driver_t driver = first_driver();
  const trn_device_t device = first_device();
  const trn_core_t core = core_at(device, 0);
  REQUIRE(trn_runtime_shutdown() == TRN_SUCCESS);
  REQUIRE(trn_runtime_shutdown() == TRN_SUCCESS);  // shutting down twice is harmless
  expect_invalid_handle(all_handle_calls(driver, device, core), "stale");

  // Fresh handles from the new runtime work, the old ones stay stale.
  const trn_device_t fresh = first_device();
  trn_device_properties_t p = TRN_DEVICE_PROPERTIES_INIT;
  CHECK(trn_device_get_properties(fresh, &p) == TRN_SUCCESS);
  REQUIRE(trn_device_get_properties(device, &p) == TRN_ERROR_INVALID_HANDLE);
  CHECK(error_contains("stale"));
}

TEST_CASE("handles from before a configuration change are stale", "[negative][handle]") {
  SimEnv env;
  const trn_device_t device = first_device();
  const trn_core_t core = core_at(device, 0);
  REQUIRE(trn_core_acquire(core) == TRN_SUCCESS);
  env.set("TRN_VISIBLE_CORES", "0-3");  // shuts the runtime down
  expect_invalid_handle(device_calls(device), "stale");
  expect_invalid_handle(core_calls(core), "stale");
}

TEST_CASE("wrong-kind handles give TRN_ERROR_INVALID_HANDLE", "[negative][handle]") {
  SimEnv env;
  const trn_driver_t driver = first_driver();
  const trn_device_t device = first_device();
  const trn_core_t core = core_at(device, 0);

  SECTION("a core handle as a device") {
    expect_invalid_handle(device_calls(recast<trn_device_t>(core)), "core handle");
  }
  SECTION("a driver handle as a device") {
    expect_invalid_handle(device_calls(recast<trn_device_t>(driver)), "driver handle");
  }
  SECTION("a device handle as a core") {
    expect_invalid_handle(core_calls(recast<trn_core_t>(device)), "device handle");
  }
  SECTION("a driver handle as a core") {
    expect_invalid_handle(core_calls(recast<trn_core_t>(driver)), "driver handle");
  }
  SECTION("a device or core handle as a driver") {
    expect_invalid_handle(driver_calls(recast<trn_driver_t>(device)), "device handle");
    expect_invalid_handle(driver_calls(recast<trn_driver_t>(core)), "core handle");
  }
  // The real handles still work afterwards.
  trn_core_properties_t p = TRN_CORE_PROPERTIES_INIT;
  CHECK(trn_core_get_properties(core, &p) == TRN_SUCCESS);
}

TEST_CASE("garbage handles give TRN_ERROR_INVALID_HANDLE and never crash", "[negative][handle]") {
  SimEnv env;
  const trn_device_t device = first_device();
  const trn_core_t core = core_at(device, 0);
  const uintptr_t device_value = reinterpret_cast<uintptr_t>(device);
  const uintptr_t core_value = reinterpret_cast<uintptr_t>(core);

  const std::vector<uintptr_t> garbage = {
      0x1,
      0x1234,
      static_cast<uintptr_t>(-1),
      static_cast<uintptr_t>(0xdeadbeefcafef00dull),
      reinterpret_cast<uintptr_t>(&env),      // a real pointer to something else
      reinterpret_cast<uintptr_t>(&garbage),  // and another
      device_value + 1,                       // a device slot that does not exist
      device_value + 0xffffff,                // the largest slot
      core_value + 0x1000,                    // a core slot that does not exist
      device_value ^ (uintptr_t{1} << 40),    // another generation
      core_value ^ (uintptr_t{0x80} << 24),   // an unknown kind
  };
  for (uintptr_t value : garbage) {
    INFO("handle value " << std::hex << value);
    expect_invalid_handle(driver_calls(handle_from<trn_driver_t>(value)), "handle");
    expect_invalid_handle(device_calls(handle_from<trn_device_t>(value)), "handle");
    expect_invalid_handle(core_calls(handle_from<trn_core_t>(value)), "handle");
  }
  CHECK(trn_core_acquire(handle_from<trn_core_t>(static_cast<uintptr_t>(-1))) ==
        TRN_ERROR_INVALID_HANDLE);

  // The runtime is unharmed.
  trn_device_properties_t p = TRN_DEVICE_PROPERTIES_INIT;
  CHECK(trn_device_get_properties(device, &p) == TRN_SUCCESS);
  REQUIRE(trn_core_acquire(core) == TRN_SUCCESS);
  REQUIRE(trn_core_release(core) == TRN_SUCCESS);
}

// ---- versioned structs -------------------------------------------------------------------------

TEST_CASE("structs with a wrong type tag or size give TRN_ERROR_INVALID_STRUCT",
          "[negative][struct]") {
  SimEnv env;
  const trn_driver_t driver = first_driver();
  const trn_device_t device = first_device();
  const trn_core_t core = core_at(device, 0);

  struct Case {
    const char *what;
    trn_struct_type_t type;
    uint32_t size;
  };
  auto cases = [](trn_struct_type_t right, trn_struct_type_t wrong, uint32_t full) {
    return std::vector<Case>{
        {"zeroed header", static_cast<trn_struct_type_t>(0), 0},
        {"size 0", right, 0},
        {"size smaller than the header", right, sizeof(trn_struct_header_t) - 1},
        {"another struct's tag", wrong, full},
        {"garbage tag", static_cast<trn_struct_type_t>(0x7777), full},
    };
  };

  for (const Case &c : cases(TRN_STRUCT_DRIVER_PROPERTIES, TRN_STRUCT_DEVICE_PROPERTIES,
                             sizeof(trn_driver_properties_t))) {
    INFO("driver properties: " << c.what);
    trn_driver_properties_t p = TRN_DRIVER_PROPERTIES_INIT;
    p.header.type = c.type;
    p.header.size = c.size;
    const trn_result_t result = trn_driver_get_properties(driver, &p);
    CHECK(result == TRN_ERROR_INVALID_STRUCT);
    if (result == TRN_SUCCESS) continue;  // trn_last_error() is not about this call
    INFO("trn_last_error: " << trn_last_error());
    CHECK(error_contains("trn_driver_get_properties"));
    CHECK(error_contains("TRN_DRIVER_PROPERTIES_INIT"));
    CHECK(p.name[0] == '\0');
  }
  for (const Case &c : cases(TRN_STRUCT_DEVICE_PROPERTIES, TRN_STRUCT_CORE_PROPERTIES,
                             sizeof(trn_device_properties_t))) {
    INFO("device properties: " << c.what);
    trn_device_properties_t p = TRN_DEVICE_PROPERTIES_INIT;
    p.header.type = c.type;
    p.header.size = c.size;
    const trn_result_t result = trn_device_get_properties(device, &p);
    CHECK(result == TRN_ERROR_INVALID_STRUCT);
    if (result == TRN_SUCCESS) continue;  // trn_last_error() is not about this call
    INFO("trn_last_error: " << trn_last_error());
    CHECK(error_contains("trn_device_get_properties"));
    CHECK(error_contains("TRN_DEVICE_PROPERTIES_INIT"));
    CHECK(p.core_count == 0);
  }
  for (const Case &c :
       cases(TRN_STRUCT_CORE_PROPERTIES, TRN_STRUCT_PROCESS_INFO, sizeof(trn_core_properties_t))) {
    INFO("core properties: " << c.what);
    trn_core_properties_t p = TRN_CORE_PROPERTIES_INIT;
    p.header.type = c.type;
    p.header.size = c.size;
    const trn_result_t result = trn_core_get_properties(core, &p);
    CHECK(result == TRN_ERROR_INVALID_STRUCT);
    if (result == TRN_SUCCESS) continue;  // trn_last_error() is not about this call
    INFO("trn_last_error: " << trn_last_error());
    CHECK(error_contains("trn_core_get_properties"));
    CHECK(error_contains("TRN_CORE_PROPERTIES_INIT"));
  }
  for (const Case &c :
       cases(TRN_STRUCT_PROCESS_INFO, TRN_STRUCT_CORE_PROPERTIES, sizeof(trn_process_info_t))) {
    INFO("owner: " << c.what);
    trn_process_info_t owner = TRN_PROCESS_INFO_INIT;
    owner.header.type = c.type;
    owner.header.size = c.size;
    const trn_result_t result = trn_core_get_owner(core, &owner);
    CHECK(result == TRN_ERROR_INVALID_STRUCT);
    if (result == TRN_SUCCESS) continue;  // trn_last_error() is not about this call
    INFO("trn_last_error: " << trn_last_error());
    CHECK(error_contains("trn_core_get_owner"));
    CHECK(error_contains("TRN_PROCESS_INFO_INIT"));
  }
}

TEST_CASE("a process array with an uninitialised element gives TRN_ERROR_INVALID_STRUCT",
          "[negative][struct]") {
  SimEnv env;
  const trn_device_t device = first_device();
  REQUIRE(trn_core_acquire(core_at(device, 0)) == TRN_SUCCESS);  // so there is a process to list

  trn_process_info_t infos[2];
  infos[0] = TRN_PROCESS_INFO_INIT;
  std::memset(&infos[1], 0, sizeof infos[1]);
  uint32_t count = 2;
  REQUIRE(trn_device_get_processes(device, &count, infos) == TRN_ERROR_INVALID_STRUCT);
  INFO("trn_last_error: " << trn_last_error());
  CHECK(error_contains("trn_device_get_processes"));
  CHECK(error_contains("processes[1]"));
  CHECK(error_contains("TRN_PROCESS_INFO_INIT"));
  CHECK(count == 2);         // untouched on failure
  CHECK(infos[0].pid == 0);  // nothing written on failure

  // Element 0 wrong instead.
  infos[0].header.size = 0;
  infos[1] = TRN_PROCESS_INFO_INIT;
  count = 2;
  REQUIRE(trn_device_get_processes(device, &count, infos) == TRN_ERROR_INVALID_STRUCT);
  CHECK(error_contains("processes[0]"));

  // Both initialised: works.
  infos[0] = TRN_PROCESS_INFO_INIT;
  count = 2;
  CHECK(trn_device_get_processes(device, &count, infos) == TRN_SUCCESS);
  CHECK(count == 1);
}

TEST_CASE("a smaller (older) struct is filled only up to its size", "[negative][struct]") {
  SimEnv env;
  const trn_driver_t driver = first_driver();
  const trn_device_t device = first_device();
  const trn_core_t core = core_at(device, 0);
  REQUIRE(trn_core_acquire(core) == TRN_SUCCESS);

  // Everything past `size` must keep its 0xAB filling.
  auto untouched_after = [](const void *object, size_t from, size_t to) {
    const auto *bytes = static_cast<const unsigned char *>(object);
    for (size_t i = from; i < to; ++i)
      if (bytes[i] != 0xAB) return false;
    return true;
  };

  {
    trn_device_properties_t p;
    std::memset(&p, 0xAB, sizeof p);
    p.header.type = TRN_STRUCT_DEVICE_PROPERTIES;
    p.header.size = offsetof(trn_device_properties_t, name);
    REQUIRE(trn_device_get_properties(device, &p) == TRN_SUCCESS);
    CHECK(p.header.type == TRN_STRUCT_DEVICE_PROPERTIES);
    CHECK(p.header.size == offsetof(trn_device_properties_t, name));
    CHECK(p.index == 0);
    CHECK(p.generation == TRN_GENERATION_TRN2);
    CHECK(untouched_after(&p, offsetof(trn_device_properties_t, name), sizeof p));
  }
  {
    trn_device_properties_t p;
    std::memset(&p, 0xAB, sizeof p);
    p.header.type = TRN_STRUCT_DEVICE_PROPERTIES;
    p.header.size = sizeof(trn_struct_header_t);  // the header alone: nothing to write
    REQUIRE(trn_device_get_properties(device, &p) == TRN_SUCCESS);
    CHECK(untouched_after(&p, sizeof(trn_struct_header_t), sizeof p));
  }
  {
    trn_driver_properties_t p;
    std::memset(&p, 0xAB, sizeof p);
    p.header.type = TRN_STRUCT_DRIVER_PROPERTIES;
    p.header.size = offsetof(trn_driver_properties_t, hal_version);
    REQUIRE(trn_driver_get_properties(driver, &p) == TRN_SUCCESS);
    CHECK(std::string(p.name) == "sim");
    CHECK(untouched_after(&p, offsetof(trn_driver_properties_t, hal_version), sizeof p));
  }
  {
    trn_core_properties_t p;
    std::memset(&p, 0xAB, sizeof p);
    p.header.type = TRN_STRUCT_CORE_PROPERTIES;
    p.header.size = offsetof(trn_core_properties_t, global_id);
    REQUIRE(trn_core_get_properties(core, &p) == TRN_SUCCESS);
    CHECK(p.device_index == 0);
    CHECK(p.index == 0);
    CHECK(untouched_after(&p, offsetof(trn_core_properties_t, global_id), sizeof p));
  }
  {
    trn_process_info_t owner;
    std::memset(&owner, 0xAB, sizeof owner);
    owner.header.type = TRN_STRUCT_PROCESS_INFO;
    owner.header.size = offsetof(trn_process_info_t, uid);
    REQUIRE(trn_core_get_owner(core, &owner) == TRN_SUCCESS);
    CHECK(owner.pid > 0);
    CHECK(untouched_after(&owner, offsetof(trn_process_info_t, uid), sizeof owner));
  }
  {
    // An older caller's array is packed at its own (smaller) size: the library steps by it.
    constexpr size_t kOld = offsetof(trn_process_info_t, command);
    alignas(trn_process_info_t) unsigned char storage[2 * kOld + 64];
    std::memset(storage, 0xAB, sizeof storage);
    for (size_t i = 0; i < 2; ++i) {
      const trn_struct_header_t header{TRN_STRUCT_PROCESS_INFO, static_cast<uint32_t>(kOld)};
      std::memcpy(storage + i * kOld, &header, sizeof header);
    }
    auto *infos = reinterpret_cast<trn_process_info_t *>(storage);
    uint32_t count = 2;
    INFO(trn_last_error());
    REQUIRE(trn_device_get_processes(device, &count, infos) == TRN_SUCCESS);
    REQUIRE(count == 1);
    CHECK(infos[0].pid > 0);
    // The second element was not written beyond its header, nor anything past the array.
    for (size_t at = kOld + sizeof(trn_struct_header_t); at < sizeof storage; ++at)
      CHECK(storage[at] == 0xAB);
  }
}

TEST_CASE("a larger (newer) struct is accepted and its tail left alone", "[negative][struct]") {
  SimEnv env;
  const trn_device_t device = first_device();
  struct Newer {
    trn_device_properties_t known;
    unsigned char added[64];
  } newer;
  std::memset(&newer, 0xAB, sizeof newer);
  newer.known.header.type = TRN_STRUCT_DEVICE_PROPERTIES;
  newer.known.header.size = sizeof newer;
  REQUIRE(trn_device_get_properties(device, &newer.known) == TRN_SUCCESS);
  CHECK(newer.known.header.size == sizeof newer);
  CHECK(newer.known.core_count == 8);
  for (unsigned char byte : newer.added) CHECK(byte == 0xAB);
}

// ---- the last error ----------------------------------------------------------------------------

TEST_CASE("trn_last_error is per thread and only changed by failing calls", "[negative][error]") {
  SimEnv env;
  const trn_device_t device = first_device();
  REQUIRE(trn_device_get(nullptr, nullptr) == TRN_ERROR_NULL_POINTER);
  const std::string failed = last_error();
  CHECK(failed.find("trn_device_get") != std::string::npos);

  // Successful calls leave it alone.
  trn_device_properties_t p = TRN_DEVICE_PROPERTIES_INIT;
  REQUIRE(trn_device_get_properties(device, &p) == TRN_SUCCESS);
  uint32_t count = 0;
  REQUIRE(trn_core_get(device, &count, nullptr) == TRN_SUCCESS);
  CHECK(last_error() == failed);

  // Another thread starts empty, and its failures stay its own.
  std::string other_before, other_after;
  trn_result_t other_result = TRN_SUCCESS;
  std::thread thread([&] {
    const char *before = trn_last_error();
    other_before = before ? before : "(NULL)";
    other_result = trn_core_get_properties(nullptr, nullptr);
    other_after = trn_last_error();
  });
  thread.join();
  CHECK(other_before.empty());
  CHECK(other_result == TRN_ERROR_INVALID_HANDLE);
  CHECK(other_after.find("trn_core_get_properties") != std::string::npos);
  CHECK(last_error() == failed);
}

// ---- malformed environment ---------------------------------------------------------------------

TEST_CASE("malformed TRN_SPIN_NS gives TRN_ERROR_INVALID_CONFIG", "[negative][config]") {
  SimEnv env;
  for (const char *value :
       {"abc", "-1", "20us", "1e4", " 5", "10000000001", "99999999999999999999"})
    expect_invalid_config(env, "TRN_SPIN_NS", value, {"use nanoseconds", "0 to 10000000000"});
  env.set("TRN_SPIN_NS", "0");
  uint32_t count = 0;
  CHECK(trn_device_get(&count, nullptr) == TRN_SUCCESS);
  env.set("TRN_SPIN_NS", nullptr);
}

TEST_CASE("malformed TRN_SIM_JITTER_NS gives TRN_ERROR_INVALID_CONFIG", "[negative][config]") {
  SimEnv env;
  for (const char *value : {"abc", "-1", "50us", "100000001", "99999999999999999999"})
    expect_invalid_config(env, "TRN_SIM_JITTER_NS", value,
                          {"TRN_SIM_JITTER_NS='", "use nanoseconds", "100000000 (100 ms)"});
  // Jittered queues still run every command, in order.
  env.set("TRN_SIM_JITTER_NS", "200000");
  trn_device_t device = nullptr;
  uint32_t count = 1;
  REQUIRE(trn_device_get(&count, &device) == TRN_SUCCESS);
  trn_queue_desc_t desc = TRN_QUEUE_DESC_INIT;
  trn_queue_t queue = nullptr;
  uint32_t cores = 1;
  REQUIRE(trn_core_get(device, &cores, &desc.core) == TRN_SUCCESS);
  REQUIRE(trn_queue_create(&desc, &queue) == TRN_SUCCESS);
  trn_pool_t pool = nullptr;
  const trn_pool_desc_t pool_desc = TRN_POOL_DESC_INIT;
  REQUIRE(trn_pool_create(device, &pool_desc, &pool) == TRN_SUCCESS);
  trn_mem_t mem = nullptr;
  REQUIRE(trn_mem_alloc(pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem) == TRN_SUCCESS);
  for (uint32_t i = 0; i < 64; ++i)
    REQUIRE(trn_queue_memset(queue, mem, i * 64, static_cast<uint8_t>(i), 64, nullptr, nullptr) ==
            TRN_SUCCESS);
  REQUIRE(trn_queue_finish(queue, 10'000'000'000ull) == TRN_SUCCESS);
  std::vector<uint8_t> got(4096);
  REQUIRE(trn_mem_read(mem, 0, got.data(), got.size()) == TRN_SUCCESS);
  for (uint32_t i = 0; i < 64; ++i) CHECK(got[i * 64 + 63] == i);
  trn_mem_free(mem);
  trn_pool_destroy(pool);
  trn_queue_destroy(queue);
  env.set("TRN_SIM_JITTER_NS", nullptr);
}

TEST_CASE("malformed TRN_SIM_RACE_CHECK gives TRN_ERROR_INVALID_CONFIG", "[negative][config]") {
  SimEnv env;
  for (const char *value : {"yes", "off", "2", " 0", "00"})
    expect_invalid_config(env, "TRN_SIM_RACE_CHECK", value, {"use 1", "or 0"});
  for (const char *value : {"0", "1"}) {
    env.set("TRN_SIM_RACE_CHECK", value);
    uint32_t count = 0;
    CHECK(trn_device_get(&count, nullptr) == TRN_SUCCESS);
  }
  env.set("TRN_SIM_RACE_CHECK", nullptr);
}

TEST_CASE("malformed TRN_VISIBLE_CORES gives TRN_ERROR_INVALID_CONFIG", "[negative][config]") {
  SimEnv env;
  for (const char *value : {"abc", "3-1", "1,,2", "0-x", "-1", "1,", ",1", "1-2-3", " 1"}) {
    expect_invalid_config(env, "TRN_VISIBLE_CORES", value, {"use a core id"});
  }
}

TEST_CASE("TRN_VISIBLE_CORES naming a core that does not exist gives TRN_ERROR_INVALID_CONFIG",
          "[negative][config]") {
  SimEnv env;
  expect_invalid_config(env, "TRN_VISIBLE_CORES", "8", {"core 8", "8 cores"});
  expect_invalid_config(env, "TRN_VISIBLE_CORES", "0,3-9", {"core 9"});
}

TEST_CASE("malformed NEURON_RT_VISIBLE_CORES gives TRN_ERROR_INVALID_CONFIG",
          "[negative][config]") {
  SimEnv env;
  expect_invalid_config(env, "NEURON_RT_VISIBLE_CORES", "x");
}

TEST_CASE("malformed TRN_LNC gives TRN_ERROR_INVALID_CONFIG", "[negative][config]") {
  SimEnv env;
  for (const char *value : {"3", "two", "0", "-2", "2x"}) {
    expect_invalid_config(env, "TRN_LNC", value, {"use 1"});
  }
  expect_invalid_config(env, "NEURON_LOGICAL_NC_CONFIG", "4");
}

TEST_CASE("TRN_LNC=2 on trn1 gives TRN_ERROR_INVALID_CONFIG", "[negative][config]") {
  SimEnv env;
  env.set("TRN_SIM_GENERATION", "trn1");
  env.set("TRN_LNC", "2");
  uint32_t count = 0;
  REQUIRE(trn_device_get(&count, nullptr) == TRN_ERROR_INVALID_CONFIG);
  INFO("trn_last_error: " << trn_last_error());
  CHECK(error_contains("TRN_LNC=2"));
  CHECK(error_contains("trn1"));
  CHECK(error_contains("set it to 1"));
  env.set("TRN_LNC", "1");
  CHECK(trn_device_get(&count, nullptr) == TRN_SUCCESS);
  CHECK(count == 1);
}

TEST_CASE("a failed initialisation leaves no device open behind", "[negative][config]") {
  SimEnv env;
  // The sim driver opens device 0 as trn1, then the runtime refuses LNC=2 for it.
  env.set("TRN_SIM_GENERATION", "trn1");
  env.set("TRN_LNC", "2");
  uint32_t count = 0;
  REQUIRE(trn_device_get(&count, nullptr) == TRN_ERROR_INVALID_CONFIG);

  // Nobody uses the trn1 device now, so asking for trn3 re-creates it as trn3. A driver
  // instance left open by the failed attempt would hold device0.state like another process
  // and make this fail with "device 0 is in use as trn1".
  env.set("TRN_SIM_GENERATION", "trn3");
  const trn_result_t result = trn_device_get(&count, nullptr);
  INFO("trn_last_error: " << trn_last_error());
  REQUIRE(result == TRN_SUCCESS);
  trn_device_t device = nullptr;
  count = 1;
  REQUIRE(trn_device_get(&count, &device) == TRN_SUCCESS);
  trn_device_properties_t p = TRN_DEVICE_PROPERTIES_INIT;
  REQUIRE(trn_device_get_properties(device, &p) == TRN_SUCCESS);
  CHECK(p.generation == TRN_GENERATION_TRN3);
  CHECK(p.core_count == 4);
}

TEST_CASE("malformed TRN_SIM_DEVICES gives TRN_ERROR_INVALID_CONFIG", "[negative][config]") {
  SimEnv env;
  for (const char *value : {"-1", "65", "many", "1.5", "0x10", "99999999999999999999"}) {
    expect_invalid_config(env, "TRN_SIM_DEVICES", value, {"0 to 64"});
  }
}

TEST_CASE("unknown TRN_SIM_GENERATION gives TRN_ERROR_INVALID_CONFIG", "[negative][config]") {
  SimEnv env;
  for (const char *value : {"trn9", "inf2", "trn"}) {
    expect_invalid_config(env, "TRN_SIM_GENERATION", value, {"trn1, trn2 or trn3"});
  }
}

TEST_CASE("malformed TRN_SIM_HBM_BYTES gives TRN_ERROR_INVALID_CONFIG", "[negative][config]") {
  SimEnv env;
  for (const char *value : {"lots", "1", "8XiB", "GiB", "99999999999TiB"}) {
    expect_invalid_config(env, "TRN_SIM_HBM_BYTES", value, {"8GiB"});
  }
}

TEST_CASE("unknown TRN_DRIVER gives TRN_ERROR_DRIVER_NOT_FOUND", "[negative][config]") {
  SimEnv env;
  env.set("TRN_DRIVER", "nope");
  uint32_t count = 0;
  REQUIRE(trn_device_get(&count, nullptr) == TRN_ERROR_DRIVER_NOT_FOUND);
  INFO("trn_last_error: " << trn_last_error());
  CHECK(error_contains("TRN_DRIVER"));
  CHECK(error_contains("nope"));
  CHECK(error_contains("sim"));
  CHECK(trn_driver_get(&count, nullptr) == TRN_ERROR_DRIVER_NOT_FOUND);

  env.set("TRN_DRIVER", "sim");
  CHECK(trn_device_get(&count, nullptr) == TRN_SUCCESS);
  CHECK(count == 1);
  env.set("TRN_DRIVER", nullptr);
  CHECK(trn_device_get(&count, nullptr) == TRN_SUCCESS);
  CHECK(count == 1);
}

TEST_CASE("a parent's handle used in a forked child says that the process forked",
          "[negative][fork]") {
  SimEnv env;
  uint32_t count = 1;
  trn_device_t device = nullptr;
  REQUIRE(trn_device_get(&count, &device) == TRN_SUCCESS);
  trn_pool_t pool = nullptr;
  const trn_pool_desc_t desc = TRN_POOL_DESC_INIT;
  REQUIRE(trn_pool_create(device, &desc, &pool) == TRN_SUCCESS);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // No Catch macros in the child: its exit code says what went wrong.
    trn_mem_t mem = nullptr;
    if (trn_mem_alloc(pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem) != TRN_ERROR_INVALID_HANDLE)
      _exit(10);
    const std::string pool_error = trn_last_error();
    if (pool_error.find("pool handle was made before this process forked") == std::string::npos ||
        pool_error.find("trn_device_get") == std::string::npos)
      _exit(11);
    trn_device_properties_t props = TRN_DEVICE_PROPERTIES_INIT;
    if (trn_device_get_properties(device, &props) != TRN_ERROR_INVALID_HANDLE ||
        std::string(trn_last_error()).find("forked") == std::string::npos)
      _exit(12);
    // The child's own objects work.
    trn_device_t own = nullptr;
    uint32_t n = 1;
    trn_pool_t own_pool = nullptr;
    if (trn_device_get(&n, &own) != TRN_SUCCESS || n == 0 ||
        trn_pool_create(own, &desc, &own_pool) != TRN_SUCCESS ||
        trn_mem_alloc(own_pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem) != TRN_SUCCESS)
      _exit(13);
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  trn_pool_destroy(pool);
}

TEST_CASE("trn_set_last_error sets this thread's trn_last_error, which a failing call replaces",
          "[negative]") {
  SimEnv env;
  trn_set_last_error("trn_ops_unary: out is [4, 5] but x is [4, 4]");
  CHECK(std::string(trn_last_error()) == "trn_ops_unary: out is [4, 5] but x is [4, 4]");
  std::string other;
  std::thread([&] { other = trn_last_error(); }).join();
  CHECK(other.empty());  // per thread
  CHECK(trn_core_get_properties(nullptr, nullptr) == TRN_ERROR_INVALID_HANDLE);
  CHECK(std::string(trn_last_error()).find("trn_core_get_properties") == 0);
  trn_set_last_error(nullptr);
  CHECK(std::string(trn_last_error()).empty());
  trn_set_last_error("x");
  trn_set_last_error("");
  CHECK(std::string(trn_last_error()).empty());
}
