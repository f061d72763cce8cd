// Conformance: what the C API reports on the simulated device — drivers, devices, cores, the
// configuration variables that shape them, ownership within one process, and the names of
// results and generations.
#include <dlfcn.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "support/result_printing.hpp"
#include "support/sim_env.hpp"
#include "trn/trn.h"

namespace {

using trn::test::SimEnv;

constexpr uint64_t kGiB = uint64_t{1} << 30;

// Every device, through the two-call enumeration.
std::vector<trn_device_t> devices() {
  uint32_t count = 0;
  INFO(trn_last_error());
  REQUIRE(trn_device_get(&count, nullptr) == TRN_SUCCESS);
  std::vector<trn_device_t> out(count);
  if (count == 0) return out;
  uint32_t filled = count;
  REQUIRE(trn_device_get(&filled, out.data()) == TRN_SUCCESS);
  REQUIRE(filled == count);
  return out;
}

trn_device_t device(uint32_t index) {
  const std::vector<trn_device_t> all = devices();
  REQUIRE(index < all.size());
  return all[index];
}

trn_device_properties_t properties(trn_device_t handle) {
  trn_device_properties_t p = TRN_DEVICE_PROPERTIES_INIT;
  INFO(trn_last_error());
  REQUIRE(trn_device_get_properties(handle, &p) == TRN_SUCCESS);
  return p;
}

trn_core_properties_t properties(trn_core_t handle) {
  trn_core_properties_t p = TRN_CORE_PROPERTIES_INIT;
  INFO(trn_last_error());
  REQUIRE(trn_core_get_properties(handle, &p) == TRN_SUCCESS);
  return p;
}

std::vector<trn_core_t> cores(trn_device_t handle) {
  uint32_t count = 0;
  INFO(trn_last_error());
  REQUIRE(trn_core_get(handle, &count, nullptr) == TRN_SUCCESS);
  std::vector<trn_core_t> out(count);
  if (count == 0) return out;
  uint32_t filled = count;
  REQUIRE(trn_core_get(handle, &filled, out.data()) == TRN_SUCCESS);
  REQUIRE(filled == count);
  return out;
}

// Every core of the device, visible or not (trn_core_get_all).
std::vector<trn_core_t> all_cores(trn_device_t handle) {
  uint32_t count = 0;
  INFO(trn_last_error());
  REQUIRE(trn_core_get_all(handle, &count, nullptr) == TRN_SUCCESS);
  std::vector<trn_core_t> out(count);
  if (count == 0) return out;
  uint32_t filled = count;
  REQUIRE(trn_core_get_all(handle, &filled, out.data()) == TRN_SUCCESS);
  REQUIRE(filled == count);
  return out;
}

std::vector<uint32_t> neighbors(trn_device_t handle) {
  uint32_t count = 0;
  INFO(trn_last_error());
  REQUIRE(trn_device_get_neighbors(handle, &count, nullptr) == TRN_SUCCESS);
  std::vector<uint32_t> out(count);
  if (count == 0) return out;
  uint32_t filled = count;
  REQUIRE(trn_device_get_neighbors(handle, &filled, out.data()) == TRN_SUCCESS);
  REQUIRE(filled == count);
  return out;
}

std::vector<uint32_t> global_ids(const std::vector<trn_core_t> &list) {
  std::vector<uint32_t> ids;
  for (trn_core_t core : list) ids.push_back(properties(core).global_id);
  return ids;
}

std::vector<trn_process_info_t> processes(trn_device_t handle) {
  uint32_t count = 0;
  INFO(trn_last_error());
  REQUIRE(trn_device_get_processes(handle, &count, nullptr) == TRN_SUCCESS);
  std::vector<trn_process_info_t> out(count, TRN_PROCESS_INFO_INIT);
  if (count == 0) return out;
  uint32_t filled = count;
  REQUIRE(trn_device_get_processes(handle, &filled, out.data()) == TRN_SUCCESS);
  REQUIRE(filled <= count);
  out.resize(filled);
  return out;
}

trn_process_info_t owner(trn_core_t core) {
  trn_process_info_t info = TRN_PROCESS_INFO_INIT;
  INFO(trn_last_error());
  REQUIRE(trn_core_get_owner(core, &info) == TRN_SUCCESS);
  return info;
}

bool contains(const char *text, const std::string &part) {
  return std::string(text).find(part) != std::string::npos;
}

}  // namespace

// ---- drivers and devices -----------------------------------------------------------------------

TEST_CASE("default configuration is one trn2 device from the sim driver", "[enumeration]") {
  SimEnv env;
  uint32_t driver_count = 0;
  REQUIRE(trn_driver_get(&driver_count, nullptr) == TRN_SUCCESS);
  REQUIRE(driver_count >= 1);
  std::vector<trn_driver_t> drivers(driver_count);
  REQUIRE(trn_driver_get(&driver_count, drivers.data()) == TRN_SUCCESS);

  bool found_sim = false;
  for (trn_driver_t driver : drivers) {
    trn_driver_properties_t dp = TRN_DRIVER_PROPERTIES_INIT;
    REQUIRE(trn_driver_get_properties(driver, &dp) == TRN_SUCCESS);
    CHECK(dp.header.type == TRN_STRUCT_DRIVER_PROPERTIES);
    CHECK(dp.header.size == sizeof dp);
    if (std::string(dp.name) != "sim") continue;
    found_sim = true;
    CHECK(dp.status == TRN_SUCCESS);
    CHECK(dp.device_count == 1);
    CHECK(dp.hal_version != 0);
    CHECK(std::strlen(dp.status_detail) > 0);
    CHECK(contains(dp.status_detail, env.root()));
  }
  CHECK(found_sim);

  const std::vector<trn_device_t> all = devices();
  REQUIRE(all.size() == 1);
  const trn_device_properties_t p = properties(all[0]);
  CHECK(p.header.type == TRN_STRUCT_DEVICE_PROPERTIES);
  CHECK(p.header.size == sizeof p);
  CHECK(p.index == 0);
  CHECK(p.generation == TRN_GENERATION_TRN2);
  CHECK(std::string(p.name) == "Trainium2 (simulated)");
  CHECK(std::string(p.driver) == "sim");
  CHECK(std::strlen(p.pci_bdf) > 0);
  CHECK(p.logical_core_config == 1);
  CHECK(p.physical_core_count == 8);
  CHECK(p.core_count == 8);
  CHECK(p.first_core_id == 0);
  CHECK(p.visible_core_count == 8);
  CHECK(p.hbm_bytes == 96 * kGiB);
  CHECK(p.hbm_bank_count == 4);
  for (uint32_t bank = 0; bank < TRN_MAX_HBM_BANKS; ++bank) {
    INFO("bank " << bank);
    CHECK(p.hbm_bank_bytes[bank] == (bank < 4 ? 24 * kGiB : 0));
  }
  CHECK(p.hbm_bandwidth_bytes_per_s > 0);
  CHECK(p.dma_engines_per_core == 16);
  CHECK(p.semaphores_per_core == 256);
  CHECK(p.sbuf_partitions == 128);
  CHECK(p.sbuf_bytes_per_partition == 224 * 1024);
  CHECK(p.sbuf_usable_bytes_per_partition > 0);
  CHECK(p.sbuf_usable_bytes_per_partition <= p.sbuf_bytes_per_partition);
  CHECK(p.psum_bytes_per_partition == 16 * 1024);
  CHECK(p.psum_banks == 8);
  CHECK(p.tensor_clock_hz > 0);
  CHECK(p.peak_bf16_flops_per_core > p.peak_fp32_flops_per_core);
  CHECK(p.neighbor_count == 0);
  CHECK(neighbors(all[0]).empty());
}

TEST_CASE("default device has 8 cores with ids 0-7 and nothing owned", "[enumeration]") {
  SimEnv env;
  const std::vector<trn_core_t> list = cores(device(0));
  REQUIRE(list.size() == 8);
  for (uint32_t i = 0; i < list.size(); ++i) {
    INFO("core " << i);
    const trn_core_properties_t p = properties(list[i]);
    CHECK(p.header.type == TRN_STRUCT_CORE_PROPERTIES);
    CHECK(p.header.size == sizeof p);
    CHECK(p.device_index == 0);
    CHECK(p.index == i);
    CHECK(p.global_id == i);
    CHECK(p.first_physical_core == i);
    CHECK(p.physical_core_count == 1);
    CHECK(p.hbm_bank < 4);
    CHECK(p.dma_engines == 16);
    CHECK(p.owned == 0);
    CHECK(owner(list[i]).pid == 0);
  }
  // Listing claims nothing: no process is attached.
  CHECK(processes(device(0)).empty());
}

TEST_CASE("TRN_SIM_DEVICES=16 gives 16 devices in a 4x4 torus", "[enumeration]") {
  SimEnv env;
  env.set("TRN_SIM_DEVICES", "16");
  const std::vector<trn_device_t> all = devices();
  REQUIRE(all.size() == 16);
  for (uint32_t i = 0; i < all.size(); ++i) {
    INFO("device " << i);
    const trn_device_properties_t p = properties(all[i]);
    CHECK(p.index == i);
    CHECK(p.first_core_id == 8 * i);
    CHECK(p.neighbor_count == 4);
    const std::vector<uint32_t> n = neighbors(all[i]);
    REQUIRE(n.size() == 4);
    // A 4x4 torus: up, down, left and right, wrapping around.
    const uint32_t row = i / 4, col = i % 4;
    const std::set<uint32_t> expected = {((row + 3) % 4) * 4 + col, ((row + 1) % 4) * 4 + col,
                                         row * 4 + (col + 3) % 4, row * 4 + (col + 1) % 4};
    CHECK(std::set<uint32_t>(n.begin(), n.end()) == expected);
    CHECK(std::set<uint32_t>(n.begin(), n.end()).count(i) == 0);
  }
  const std::vector<uint32_t> n0 = neighbors(all[0]);
  CHECK(std::set<uint32_t>(n0.begin(), n0.end()) == std::set<uint32_t>{1, 3, 4, 12});
  const std::vector<uint32_t> n5 = neighbors(all[5]);
  CHECK(std::set<uint32_t>(n5.begin(), n5.end()) == std::set<uint32_t>{1, 4, 6, 9});

  // Core ids continue across devices.
  CHECK(global_ids(cores(all[1])) == std::vector<uint32_t>{8, 9, 10, 11, 12, 13, 14, 15});

  trn_driver_t driver = nullptr;
  uint32_t driver_count = 1;
  REQUIRE(trn_driver_get(&driver_count, &driver) == TRN_SUCCESS);
  REQUIRE(driver_count == 1);
  trn_driver_properties_t dp = TRN_DRIVER_PROPERTIES_INIT;
  REQUIRE(trn_driver_get_properties(driver, &dp) == TRN_SUCCESS);
  CHECK(dp.device_count == 16);
  CHECK(dp.status == TRN_SUCCESS);
}

TEST_CASE("two-call enumeration: a short array receives the first elements", "[enumeration]") {
  SimEnv env;
  env.set("TRN_SIM_DEVICES", "16");
  uint32_t count = 0;
  REQUIRE(trn_device_get(&count, nullptr) == TRN_SUCCESS);
  REQUIRE(count == 16);

  trn_device_t sentinel = reinterpret_cast<trn_device_t>(uintptr_t{0x5e5e});
  trn_device_t some[3] = {sentinel, sentinel, sentinel};
  count = 1;
  REQUIRE(trn_device_get(&count, some) == TRN_SUCCESS);
  CHECK(count == 1);
  CHECK(some[0] != sentinel);
  CHECK(some[1] == sentinel);  // nothing written past *count
  CHECK(properties(some[0]).index == 0);

  // A longer array than needed: *count becomes the number written.
  std::vector<trn_device_t> many(20, sentinel);
  count = 20;
  REQUIRE(trn_device_get(&count, many.data()) == TRN_SUCCESS);
  CHECK(count == 16);
  CHECK(many[15] != sentinel);
  CHECK(many[16] == sentinel);

  // The same for cores and neighbours.
  trn_core_t core_sentinel = reinterpret_cast<trn_core_t>(uintptr_t{0x5e5e});
  trn_core_t two_cores[3] = {core_sentinel, core_sentinel, core_sentinel};
  count = 2;
  REQUIRE(trn_core_get(some[0], &count, two_cores) == TRN_SUCCESS);
  CHECK(count == 2);
  CHECK(properties(two_cores[0]).index == 0);
  CHECK(properties(two_cores[1]).index == 1);
  CHECK(two_cores[2] == core_sentinel);

  uint32_t one_neighbor[2] = {999, 999};
  count = 1;
  REQUIRE(trn_device_get_neighbors(some[0], &count, one_neighbor) == TRN_SUCCESS);
  CHECK(count == 1);
  CHECK(one_neighbor[0] == 1);  // neighbours come sorted: {1, 3, 4, 12}
  CHECK(one_neighbor[1] == 999);

  trn_driver_t driver_sentinel = reinterpret_cast<trn_driver_t>(uintptr_t{0x5e5e});
  trn_driver_t drivers[2] = {driver_sentinel, driver_sentinel};
  count = 8;
  REQUIRE(trn_driver_get(&count, drivers) == TRN_SUCCESS);
  CHECK(count == 1);
  CHECK(drivers[0] != driver_sentinel);
  CHECK(drivers[1] == driver_sentinel);
}

TEST_CASE("TRN_SIM_GENERATION=trn1 gives 2 cores and 32 GiB", "[enumeration]") {
  SimEnv env;
  env.set("TRN_SIM_GENERATION", "trn1");
  const trn_device_properties_t p = properties(device(0));
  CHECK(p.generation == TRN_GENERATION_TRN1);
  CHECK(std::string(p.name) == "Trainium1 (simulated)");
  CHECK(p.physical_core_count == 2);
  CHECK(p.core_count == 2);
  CHECK(p.visible_core_count == 2);
  CHECK(p.hbm_bytes == 32 * kGiB);
  CHECK(p.hbm_bank_count >= 1);
  uint64_t bank_total = 0;
  for (uint32_t bank = 0; bank < p.hbm_bank_count; ++bank) bank_total += p.hbm_bank_bytes[bank];
  CHECK(bank_total == 32 * kGiB);
  CHECK(cores(device(0)).size() == 2);
}

TEST_CASE("TRN_SIM_GENERATION=trn3 gives 8 cores and 144 GiB", "[enumeration]") {
  SimEnv env;
  env.set("TRN_SIM_GENERATION", "trn3");
  const trn_device_properties_t p = properties(device(0));
  CHECK(p.generation == TRN_GENERATION_TRN3);
  CHECK(std::string(p.name) == "Trainium3 (simulated)");
  CHECK(p.physical_core_count == 8);
  CHECK(p.core_count == 8);
  CHECK(p.hbm_bytes == 144 * kGiB);
  CHECK(p.sbuf_bytes_per_partition == 256 * 1024);
  CHECK(cores(device(0)).size() == 8);
}

TEST_CASE("TRN_LNC=2 on trn2 pairs physical cores into 4 logical cores", "[enumeration]") {
  SimEnv env;
  env.set("TRN_LNC", "2");
  const trn_device_properties_t p = properties(device(0));
  CHECK(p.logical_core_config == 2);
  CHECK(p.physical_core_count == 8);
  CHECK(p.core_count == 4);
  CHECK(p.visible_core_count == 4);
  const std::vector<trn_core_t> list = cores(device(0));
  REQUIRE(list.size() == 4);
  for (uint32_t i = 0; i < list.size(); ++i) {
    INFO("core " << i);
    const trn_core_properties_t cp = properties(list[i]);
    CHECK(cp.index == i);
    CHECK(cp.global_id == i);
    CHECK(cp.physical_core_count == 2);
    CHECK(cp.first_physical_core == 2 * i);
    CHECK(cp.dma_engines == 32);
  }

  // Ownership is reported in logical cores.
  REQUIRE(trn_core_acquire(list[1]) == TRN_SUCCESS);
  CHECK(owner(list[1]).pid == getpid());
  CHECK(owner(list[0]).pid == 0);
  CHECK(owner(list[2]).pid == 0);
  const std::vector<trn_process_info_t> attached = processes(device(0));
  REQUIRE(attached.size() == 1);
  CHECK(attached[0].core_mask == 0x2);
  REQUIRE(trn_core_release(list[1]) == TRN_SUCCESS);
}

TEST_CASE("NEURON_LOGICAL_NC_CONFIG=2 works like TRN_LNC=2", "[enumeration]") {
  SimEnv env;
  env.set("NEURON_LOGICAL_NC_CONFIG", "2");
  const trn_device_properties_t p = properties(device(0));
  CHECK(p.logical_core_config == 2);
  CHECK(p.core_count == 4);
}

TEST_CASE("TRN_SIM_HBM_BYTES=8GiB gives 8 GiB of device memory", "[enumeration]") {
  SimEnv env;
  env.set("TRN_SIM_HBM_BYTES", "8GiB");
  const trn_device_properties_t p = properties(device(0));
  CHECK(p.hbm_bytes == 8 * kGiB);
  CHECK(p.hbm_bank_count == 4);
  for (uint32_t bank = 0; bank < 4; ++bank) CHECK(p.hbm_bank_bytes[bank] == 2 * kGiB);
}

TEST_CASE("TRN_SIM_DEVICES=0 gives no devices and says why", "[enumeration]") {
  SimEnv env;
  env.set("TRN_SIM_DEVICES", "0");
  uint32_t count = 99;
  REQUIRE(trn_device_get(&count, nullptr) == TRN_SUCCESS);
  CHECK(count == 0);

  uint32_t driver_count = 0;
  REQUIRE(trn_driver_get(&driver_count, nullptr) == TRN_SUCCESS);
  REQUIRE(driver_count >= 1);
  std::vector<trn_driver_t> drivers(driver_count);
  REQUIRE(trn_driver_get(&driver_count, drivers.data()) == TRN_SUCCESS);
  bool found_sim = false;
  for (trn_driver_t driver : drivers) {
    trn_driver_properties_t dp = TRN_DRIVER_PROPERTIES_INIT;
    REQUIRE(trn_driver_get_properties(driver, &dp) == TRN_SUCCESS);
    if (std::string(dp.name) != "sim") continue;
    found_sim = true;
    CHECK(dp.device_count == 0);
    CHECK(dp.status == TRN_ERROR_NO_DEVICE);
    CHECK(contains(dp.status_detail, "TRN_SIM_DEVICES"));
  }
  CHECK(found_sim);

  // Back to the default: one device again.
  env.set("TRN_SIM_DEVICES", nullptr);
  CHECK(devices().size() == 1);
}

// ---- visible cores -----------------------------------------------------------------------------

TEST_CASE("TRN_VISIBLE_CORES=1,3-4 restricts the listed cores", "[enumeration]") {
  SimEnv env;
  env.set("TRN_VISIBLE_CORES", "1,3-4");
  const trn_device_t dev = device(0);
  const std::vector<trn_core_t> list = cores(dev);
  REQUIRE(list.size() == 3);
  CHECK(global_ids(list) == std::vector<uint32_t>{1, 3, 4});
  CHECK(properties(list[0]).index == 1);
  const trn_device_properties_t p = properties(dev);
  CHECK(p.visible_core_count == 3);
  CHECK(p.core_count == 8);  // the device still has 8 cores; this process sees 3
}

TEST_CASE("NEURON_RT_VISIBLE_CORES is honoured when TRN_VISIBLE_CORES is unset", "[enumeration]") {
  SimEnv env;
  env.set("NEURON_RT_VISIBLE_CORES", "1,3-4");
  const trn_device_t dev = device(0);
  CHECK(global_ids(cores(dev)) == std::vector<uint32_t>{1, 3, 4});
  CHECK(properties(dev).visible_core_count == 3);
}

TEST_CASE("TRN_VISIBLE_CORES wins over NEURON_RT_VISIBLE_CORES", "[enumeration]") {
  SimEnv env;
  env.set("NEURON_RT_VISIBLE_CORES", "2");
  env.set("TRN_VISIBLE_CORES", "5-6");
  CHECK(global_ids(cores(device(0))) == std::vector<uint32_t>{5, 6});
}

TEST_CASE("an empty TRN_VISIBLE_CORES counts as unset", "[enumeration]") {
  SimEnv env;
  env.set("TRN_VISIBLE_CORES", "");
  CHECK(cores(device(0)).size() == 8);
  CHECK(properties(device(0)).visible_core_count == 8);
}

TEST_CASE("visible cores are global ids across devices", "[enumeration]") {
  SimEnv env;
  env.set("TRN_SIM_DEVICES", "2");
  env.set("TRN_VISIBLE_CORES", "7-9");
  const std::vector<trn_device_t> all = devices();
  REQUIRE(all.size() == 2);
  CHECK(global_ids(cores(all[0])) == std::vector<uint32_t>{7});
  CHECK(global_ids(cores(all[1])) == std::vector<uint32_t>{8, 9});
  CHECK(properties(all[0]).visible_core_count == 1);
  CHECK(properties(all[1]).visible_core_count == 2);
  const std::vector<trn_core_t> second = cores(all[1]);
  CHECK(properties(second[0]).index == 0);
  CHECK(properties(second[0]).device_index == 1);
}

TEST_CASE("visible cores are renumbered: element 0 is the first visible core", "[enumeration]") {
  SimEnv env;
  env.set("TRN_VISIBLE_CORES", "3,6");
  const std::vector<trn_core_t> list = cores(device(0));
  REQUIRE(list.size() == 2);
  CHECK(properties(list[0]).index == 3);  // properties keep the physical numbering
  CHECK(properties(list[0]).global_id == 3);
  CHECK(properties(list[1]).index == 6);
  CHECK(properties(list[0]).visible == 1);
  CHECK(trn_core_acquire(list[0]) == TRN_SUCCESS);
  CHECK(properties(list[0]).owned == 1);
  CHECK(trn_core_release(list[0]) == TRN_SUCCESS);
}

TEST_CASE("trn_core_get_all lists every core, the hidden ones can be watched, not used",
          "[enumeration]") {
  SimEnv env;
  env.set("TRN_VISIBLE_CORES", "3");
  const trn_device_t dev = device(0);
  const std::vector<trn_core_t> all = all_cores(dev);
  REQUIRE(all.size() == 8);
  for (uint32_t i = 0; i < all.size(); ++i) {
    const trn_core_properties_t p = properties(all[i]);
    CHECK(p.index == i);
    CHECK(p.global_id == i);
    CHECK(p.visible == (i == 3 ? 1u : 0u));
  }
  // The visible one is the same core trn_core_get lists, and usable.
  REQUIRE(cores(dev).size() == 1);
  CHECK(all[3] == cores(dev)[0]);
  CHECK(trn_core_acquire(all[3]) == TRN_SUCCESS);
  CHECK(trn_core_release(all[3]) == TRN_SUCCESS);

  // A hidden core: its figures can be read, but it cannot be acquired or given a queue.
  trn_core_activity_t activity = TRN_CORE_ACTIVITY_INIT;
  CHECK(trn_core_get_activity(all[0], &activity) == TRN_SUCCESS);
  trn_process_info_t owner = TRN_PROCESS_INFO_INIT;
  CHECK(trn_core_get_owner(all[0], &owner) == TRN_SUCCESS);
  CHECK(owner.pid == 0);
  CHECK(trn_core_acquire(all[0]) == TRN_ERROR_INVALID_ARGUMENT);
  const std::string why = trn_last_error();
  CHECK_THAT(why, Catch::Contains("core id 0") && Catch::Contains("not visible") &&
                      Catch::Contains("TRN_VISIBLE_CORES"));
  CHECK(properties(all[0]).owned == 0);
  trn_queue_desc_t desc = TRN_QUEUE_DESC_INIT;
  desc.core = all[0];
  trn_queue_t queue = nullptr;
  CHECK(trn_queue_create(&desc, &queue) == TRN_ERROR_INVALID_ARGUMENT);
  CHECK(queue == nullptr);

  // Two-call enumeration with a short array.
  trn_core_t two[2] = {};
  uint32_t count = 2;
  REQUIRE(trn_core_get_all(dev, &count, two) == TRN_SUCCESS);
  CHECK(count == 2);
  CHECK(two[1] == all[1]);
}

TEST_CASE("without TRN_VISIBLE_CORES, trn_core_get_all and trn_core_get agree", "[enumeration]") {
  SimEnv env;
  const trn_device_t dev = device(0);
  CHECK(all_cores(dev) == cores(dev));
  for (trn_core_t core : all_cores(dev)) CHECK(properties(core).visible == 1);
}

// ---- ownership within one process ---------------------------------------------------------------

TEST_CASE("acquire, owner and release within one process", "[enumeration][ownership]") {
  SimEnv env;
  const std::vector<trn_core_t> list = cores(device(0));
  REQUIRE(list.size() == 8);
  trn_core_t core = list[2];

  REQUIRE(trn_core_acquire(core) == TRN_SUCCESS);
  trn_process_info_t info = owner(core);
  CHECK(info.header.type == TRN_STRUCT_PROCESS_INFO);
  CHECK(info.pid == getpid());
  CHECK(info.uid == geteuid());
  CHECK(info.since_unix_ns > 0);
  CHECK(contains(info.command, "trn-conformance-tests"));
  CHECK(std::string(info.runtime_version) == trn_get_version_string());
  CHECK(properties(core).owned == 1);
  CHECK(properties(list[3]).owned == 0);
  CHECK(owner(list[3]).pid == 0);

  // Acquiring a core this process already owns succeeds.
  REQUIRE(trn_core_acquire(core) == TRN_SUCCESS);
  CHECK(owner(core).pid == getpid());

  REQUIRE(trn_core_release(core) == TRN_SUCCESS);
  CHECK(properties(core).owned == 0);
  CHECK(owner(core).pid == 0);

  REQUIRE(trn_core_release(core) == TRN_ERROR_NOT_OWNER);
  CHECK(contains(trn_last_error(), "trn_core_release"));
  CHECK(contains(trn_last_error(), "NeuronCore 2"));
  CHECK(contains(trn_last_error(), "acquire"));
  CHECK(owner(core).pid == 0);

  // A released core can be acquired again.
  REQUIRE(trn_core_acquire(core) == TRN_SUCCESS);
  CHECK(owner(core).pid == getpid());
  REQUIRE(trn_core_release(core) == TRN_SUCCESS);
}

TEST_CASE("releasing a core never acquired gives TRN_ERROR_NOT_OWNER", "[enumeration][ownership]") {
  SimEnv env;
  const std::vector<trn_core_t> list = cores(device(0));
  REQUIRE(trn_core_release(list[5]) == TRN_ERROR_NOT_OWNER);
  CHECK(contains(trn_last_error(), "NeuronCore 5 on device 0"));
}

TEST_CASE("trn_device_get_processes lists this process and its cores", "[enumeration][ownership]") {
  SimEnv env;
  const trn_device_t dev = device(0);
  const std::vector<trn_core_t> list = cores(dev);
  REQUIRE(trn_core_acquire(list[0]) == TRN_SUCCESS);
  REQUIRE(trn_core_acquire(list[6]) == TRN_SUCCESS);

  const std::vector<trn_process_info_t> attached = processes(dev);
  REQUIRE(attached.size() == 1);
  const trn_process_info_t &me = attached[0];
  CHECK(me.header.type == TRN_STRUCT_PROCESS_INFO);
  CHECK(me.header.size == sizeof me);
  CHECK(me.pid == getpid());
  CHECK(me.uid == geteuid());
  CHECK(me.attached_unix_ns > 0);
  CHECK(me.core_mask == ((uint64_t{1} << 0) | (uint64_t{1} << 6)));
  CHECK(contains(me.command, "trn-conformance-tests"));
  CHECK(std::string(me.runtime_version) == trn_get_version_string());

  REQUIRE(trn_core_release(list[6]) == TRN_SUCCESS);
  const std::vector<trn_process_info_t> after = processes(dev);
  REQUIRE(after.size() == 1);
  CHECK(after[0].core_mask == 0x1);
}

TEST_CASE("trn_runtime_shutdown releases the cores this process owns", "[enumeration][ownership]") {
  SimEnv env;
  REQUIRE(trn_core_acquire(cores(device(0))[4]) == TRN_SUCCESS);
  REQUIRE(trn_runtime_shutdown() == TRN_SUCCESS);
  const std::vector<trn_core_t> list = cores(device(0));
  CHECK(owner(list[4]).pid == 0);
  CHECK(properties(list[4]).owned == 0);
  // And it can be acquired again by the new runtime.
  REQUIRE(trn_core_acquire(list[4]) == TRN_SUCCESS);
  CHECK(owner(list[4]).pid == getpid());
}

// ---- names and versions ------------------------------------------------------------------------

TEST_CASE("every result has a distinct name and description", "[enumeration][names]") {
  SimEnv env;
#define TRN_RESULT_ENTRY(value) \
  { value, #value }
  const std::vector<std::pair<trn_result_t, const char *>> results = {
      TRN_RESULT_ENTRY(TRN_SUCCESS),
      TRN_RESULT_ENTRY(TRN_NOT_READY),
      TRN_RESULT_ENTRY(TRN_TIMEOUT),
      TRN_RESULT_ENTRY(TRN_ERROR_INVALID_ARGUMENT),
      TRN_RESULT_ENTRY(TRN_ERROR_INVALID_HANDLE),
      TRN_RESULT_ENTRY(TRN_ERROR_NULL_POINTER),
      TRN_RESULT_ENTRY(TRN_ERROR_INVALID_ENUM),
      TRN_RESULT_ENTRY(TRN_ERROR_OUT_OF_RANGE),
      TRN_RESULT_ENTRY(TRN_ERROR_INVALID_STRUCT),
      TRN_RESULT_ENTRY(TRN_ERROR_INVALID_CONFIG),
      TRN_RESULT_ENTRY(TRN_ERROR_UNSUPPORTED),
      TRN_RESULT_ENTRY(TRN_ERROR_INVALID_KERNEL_ARG),
      TRN_RESULT_ENTRY(TRN_ERROR_NOT_FOUND),
      TRN_RESULT_ENTRY(TRN_ERROR_OUT_OF_HOST_MEMORY),
      TRN_RESULT_ENTRY(TRN_ERROR_OUT_OF_DEVICE_MEMORY),
      TRN_RESULT_ENTRY(TRN_ERROR_CORE_BUSY),
      TRN_RESULT_ENTRY(TRN_ERROR_NOT_OWNER),
      TRN_RESULT_ENTRY(TRN_ERROR_QUEUE_FULL),
      TRN_RESULT_ENTRY(TRN_ERROR_TOO_MANY_PROCESSES),
      TRN_RESULT_ENTRY(TRN_ERROR_HANDLE_IN_USE),
      TRN_RESULT_ENTRY(TRN_ERROR_NO_DEVICE),
      TRN_RESULT_ENTRY(TRN_ERROR_PERMISSION_DENIED),
      TRN_RESULT_ENTRY(TRN_ERROR_STATE_VERSION_MISMATCH),
      TRN_RESULT_ENTRY(TRN_ERROR_STATE_CORRUPT),
      TRN_RESULT_ENTRY(TRN_ERROR_DRIVER),
      TRN_RESULT_ENTRY(TRN_ERROR_DEVICE_LOST),
      TRN_RESULT_ENTRY(TRN_ERROR_DEVICE_FAULTED),
      TRN_RESULT_ENTRY(TRN_ERROR_DRIVER_NOT_FOUND),
      TRN_RESULT_ENTRY(TRN_ERROR_DRIVER_INCOMPATIBLE),
      TRN_RESULT_ENTRY(TRN_ERROR_FILE),
      TRN_RESULT_ENTRY(TRN_ERROR_INVALID_KERNEL),
      TRN_RESULT_ENTRY(TRN_ERROR_KERNEL_FAULT),
      TRN_RESULT_ENTRY(TRN_ERROR_INVALID_PROGRAM),
      TRN_RESULT_ENTRY(TRN_ERROR_KERNEL_DEADLOCK),
      TRN_RESULT_ENTRY(TRN_ERROR_CANCELLED),
      TRN_RESULT_ENTRY(TRN_ERROR_COLLECTIVE),
      TRN_RESULT_ENTRY(TRN_ERROR_INTERNAL),
  };
#undef TRN_RESULT_ENTRY
  const std::string unknown_text = trn_result_string(static_cast<trn_result_t>(12345));
  std::set<std::string> names, texts;
  for (const auto &[value, spelling] : results) {
    INFO(spelling);
    const char *name = trn_result_name(value);
    const char *text = trn_result_string(value);
    REQUIRE(name != nullptr);
    REQUIRE(text != nullptr);
    CHECK(std::string(name) == spelling);
    CHECK(std::string(name) != "TRN_RESULT_UNKNOWN");
    CHECK(std::strlen(text) > 0);
    CHECK(std::string(text) != unknown_text);
    CHECK(std::string(text).find("unknown") == std::string::npos);
    names.insert(name);
    texts.insert(text);
  }
  CHECK(names.size() == results.size());
  CHECK(texts.size() == results.size());

  for (int value : {12345, 99, 199, 999, 0x7fffffff}) {
    INFO("value " << value);
    const auto result = static_cast<trn_result_t>(value);
    CHECK(std::string(trn_result_name(result)) == "TRN_RESULT_UNKNOWN");
    REQUIRE(trn_result_string(result) != nullptr);
    CHECK(std::strlen(trn_result_string(result)) > 0);
  }
}

TEST_CASE("version and generation names", "[enumeration][names]") {
  SimEnv env;
  CHECK(trn_get_version() == TRN_API_VERSION);
  CHECK(TRN_VERSION_MAJOR(trn_get_version()) == TRN_VERSION_MAJOR(TRN_API_VERSION));
  CHECK(TRN_VERSION_MINOR(trn_get_version()) == TRN_VERSION_MINOR(TRN_API_VERSION));
  const char *release = trn_get_version_string();
  REQUIRE(release != nullptr);
  CHECK(std::strlen(release) > 0);
  CHECK((release[0] >= '0' && release[0] <= '9'));

  CHECK(std::string(trn_generation_name(TRN_GENERATION_TRN1)) == "trn1");
  CHECK(std::string(trn_generation_name(TRN_GENERATION_TRN2)) == "trn2");
  CHECK(std::string(trn_generation_name(TRN_GENERATION_TRN3)) == "trn3");
  CHECK(std::string(trn_generation_name(static_cast<trn_generation_t>(0))) == "unknown");
  CHECK(std::string(trn_generation_name(static_cast<trn_generation_t>(4))) == "unknown");
  CHECK(std::string(trn_generation_name(static_cast<trn_generation_t>(99))) == "unknown");
}

TEST_CASE("the API version, the release string and the symbol nodes agree",
          "[enumeration][names]") {
  // 0.2 added trn_core_get_all, trn_dtype_name, trn_dtype_size and trn_engine_name; 0.3 the
  // programs; 0.4 trn_sem_fail; 0.5 trn_set_last_error and trn_reduce_op_name; the release is
  // 0.5.x.
  CHECK(TRN_API_VERSION == TRN_MAKE_VERSION(0, 5));
  const std::string release = trn_get_version_string();
  CHECK(release.rfind("0.5.", 0) == 0);
  // A function of 0.1 and one of 0.2 resolve under their nodes, as a program linked against
  // each release would look them up.
  void *library = dlopen("libtrn.so.0.1", RTLD_NOW | RTLD_NOLOAD);
  if (!library) library = dlopen(nullptr, RTLD_NOW);
  REQUIRE(library != nullptr);
  CHECK(dlvsym(library, "trn_device_get", "TRN_0.1") != nullptr);
  CHECK(dlvsym(library, "trn_dtype_name", "TRN_0.2") != nullptr);
  CHECK(dlvsym(library, "trn_engine_name", "TRN_0.2") != nullptr);
  CHECK(dlvsym(library, "trn_core_get_all", "TRN_0.2") != nullptr);
  CHECK(dlvsym(library, "trn_dtype_name", "TRN_0.1") == nullptr);
  CHECK(dlvsym(library, "trn_queue_execute", "TRN_0.3") != nullptr);
  CHECK(dlvsym(library, "trn_program_load_file", "TRN_0.3") != nullptr);
  CHECK(dlvsym(library, "trn_queue_execute", "TRN_0.2") == nullptr);
  CHECK(dlvsym(library, "trn_sem_fail", "TRN_0.4") != nullptr);
  CHECK(dlvsym(library, "trn_sem_fail", "TRN_0.3") == nullptr);
  CHECK(dlvsym(library, "trn_set_last_error", "TRN_0.5") != nullptr);
  CHECK(dlvsym(library, "trn_set_last_error", "TRN_0.4") == nullptr);
  CHECK(dlvsym(library, "trn_reduce_op_name", "TRN_0.5") != nullptr);
  CHECK(dlvsym(library, "trn_reduce_op_name", "TRN_0.4") == nullptr);
}

TEST_CASE("data type and engine names and sizes", "[enumeration][names]") {
  const struct {
    trn_dtype_t dtype;
    const char *name;
    uint32_t size;
  } dtypes[] = {{TRN_DTYPE_F32, "f32", 4},
                {TRN_DTYPE_BF16, "bf16", 2},
                {TRN_DTYPE_F16, "f16", 2},
                {TRN_DTYPE_FP8_E4M3, "fp8e4m3", 1},
                {TRN_DTYPE_FP8_E5M2, "fp8e5m2", 1},
                {TRN_DTYPE_I32, "i32", 4},
                {TRN_DTYPE_I16, "i16", 2},
                {TRN_DTYPE_I8, "i8", 1},
                {TRN_DTYPE_U8, "u8", 1},
                {TRN_DTYPE_F64, "f64", 8},
                {TRN_DTYPE_I64, "i64", 8}};
  for (const auto &d : dtypes) {
    INFO(d.name);
    CHECK(std::string(trn_dtype_name(d.dtype)) == d.name);
    CHECK(trn_dtype_size(d.dtype) == d.size);
  }
  for (int bad : {0, 10, 63, 66, 255, 0x7ffffffe}) {
    INFO("dtype " << bad);
    CHECK(std::string(trn_dtype_name(static_cast<trn_dtype_t>(bad))) == "unknown");
    CHECK(trn_dtype_size(static_cast<trn_dtype_t>(bad)) == 0);
  }
  const char *engines[] = {"tensor", "vector", "scalar", "gpsimd", "sync"};
  for (int e = 0; e < TRN_ENGINE_COUNT; ++e)
    CHECK(std::string(trn_engine_name(static_cast<trn_engine_t>(e))) == engines[e]);
  for (int bad : {5, 6, 0x7ffffffe})
    CHECK(std::string(trn_engine_name(static_cast<trn_engine_t>(bad))) == "unknown");
}

TEST_CASE("reduction op names: one enum for the queue, the collectives and the ops",
          "[enumeration][names]") {
  const char *names[] = {"sum", "prod", "max", "min", "avg", "argmax", "argmin"};
  static_assert(TRN_REDUCE_SUM == 0 && TRN_REDUCE_PROD == 1 && TRN_REDUCE_MAX == 2 &&
                TRN_REDUCE_MIN == 3 && TRN_REDUCE_AVG == 4 && TRN_REDUCE_ARGMAX == 5 &&
                TRN_REDUCE_ARGMIN == 6);
  for (int op = TRN_REDUCE_SUM; op <= TRN_REDUCE_ARGMIN; ++op)
    CHECK(std::string(trn_reduce_op_name(static_cast<trn_reduce_op_t>(op))) == names[op]);
  for (int bad : {7, 99, 0x40000000, 0x7fffffff}) {
    INFO("op " << bad);
    CHECK(std::string(trn_reduce_op_name(static_cast<trn_reduce_op_t>(bad))) == "unknown");
  }
}
