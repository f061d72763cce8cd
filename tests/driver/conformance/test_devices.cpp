// Devices and cores: properties and device info are sane and consistent, every supported LNC's
// core layout covers the physical cores exactly once, out-of-range requests fail with
// TRN_ERROR_OUT_OF_RANGE and a message, neighbors enumerate in two calls; claims, owners and the
// process list.
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "loader_support.hpp"

using namespace conformance;

namespace {

bool power_of_two(uint64_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

}  // namespace

TEST_CASE("devices: the sim default reports devices", "[devices]") {
  Instance inst;
  char detail[TRN_DETAIL_MAX] = {};
  const trn_result_t status = ops().status(inst, detail, sizeof detail);
  INFO("status: " << detail);
  CONFORMANCE_NEED_DEVICES(inst, 1);
  CHECK(status == TRN_SUCCESS);
}

TEST_CASE("devices: properties and info are sane", "[devices]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  for (uint32_t d = 0; d < inst.device_count(); ++d) {
    INFO("device " << d);
    trn_device_properties_t p = TRN_DEVICE_PROPERTIES_INIT;
    trn_hal_device_info_t info;
    std::memset(&info, 0, sizeof info);
    Err err;
    HAL_REQUIRE_OK(ops().device_properties(inst, d, &p, &info, &err), err);
    CHECK(p.generation >= TRN_GENERATION_TRN1);
    CHECK(p.generation <= TRN_GENERATION_TRN3);
    CHECK(std::strlen(p.name) > 0);
    CHECK(p.physical_core_count > 0);
    CHECK(p.physical_core_count <= TRN_MAX_CORES_PER_DEVICE);
    CHECK(p.hbm_bank_count > 0);
    REQUIRE(p.hbm_bank_count <= TRN_MAX_HBM_BANKS);
    uint64_t sum = 0;
    for (uint32_t b = 0; b < p.hbm_bank_count; ++b) {
      INFO("bank " << b);
      CHECK(p.hbm_bank_bytes[b] > 0);
      sum += p.hbm_bank_bytes[b];
    }
    CHECK(sum == p.hbm_bytes);
    CHECK(p.hbm_bandwidth_bytes_per_s > 0);
    CHECK(p.dma_engines_per_core > 0);
    CHECK(p.tensor_clock_hz > 0);
    CHECK(p.vector_clock_hz > 0);
    CHECK(p.scalar_clock_hz > 0);
    CHECK(p.gpsimd_clock_hz > 0);
    CHECK(p.peak_bf16_flops_per_core > 0);
    CHECK(p.peak_fp32_flops_per_core > 0);
    CHECK(p.dma_engine_bytes_per_s > 0);
    CHECK(p.sbuf_partitions > 0);
    CHECK(p.sbuf_bytes_per_partition > 0);
    CHECK(p.psum_bytes_per_partition > 0);
    CHECK((info.lnc_mask & 0x2u) != 0);  // bit 1: LNC=1
    CHECK(power_of_two(info.chunk_bytes));
    for (uint32_t b = 0; b < p.hbm_bank_count; ++b)
      CHECK(p.hbm_bank_bytes[b] % info.chunk_bytes == 0);
  }
}

TEST_CASE("devices: core layouts cover the physical cores exactly once per LNC", "[devices]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  for (uint32_t d = 0; d < inst.device_count(); ++d) {
    const auto p = device_properties(inst, d);
    const auto dinfo = device_info(inst, d);
    for (uint32_t lnc = 1; lnc < 32; ++lnc) {
      if (!(dinfo.lnc_mask & (1u << lnc))) continue;
      INFO("device " << d << " LNC=" << lnc);
      CHECK(p.physical_core_count % lnc == 0);
      const uint32_t logical = p.physical_core_count / lnc;
      std::vector<int> covered(p.physical_core_count, 0);
      for (uint32_t c = 0; c < logical; ++c) {
        INFO("logical core " << c);
        trn_hal_core_info_t ci;
        std::memset(&ci, 0, sizeof ci);
        Err err;
        HAL_REQUIRE_OK(ops().core_info(inst, d, lnc, c, &ci, &err), err);
        CHECK(ci.physical_core_count == lnc);
        CHECK(ci.hbm_bank < p.hbm_bank_count);
        CHECK(ci.dma_engines > 0);
        REQUIRE(uint64_t{ci.first_physical_core} + ci.physical_core_count <= p.physical_core_count);
        uint64_t mask = 0;
        for (uint32_t k = 0; k < ci.physical_core_count; ++k) {
          covered[ci.first_physical_core + k]++;
          mask |= uint64_t{1} << (ci.first_physical_core + k);
        }
        CHECK(ci.physical_core_mask == mask);
      }
      for (uint32_t k = 0; k < p.physical_core_count; ++k) {
        INFO("physical core " << k);
        CHECK(covered[k] == 1);
      }
      // One past the last logical core.
      trn_hal_core_info_t ci;
      Err err;
      HAL_CHECK_RESULT(TRN_ERROR_OUT_OF_RANGE, ops().core_info(inst, d, lnc, logical, &ci, &err),
                       err);
    }
  }
}

TEST_CASE("devices: unsupported LNC, core past the end, device past the end", "[devices]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const auto p = device_properties(inst, 0);
  const auto dinfo = device_info(inst, 0);
  trn_hal_core_info_t ci;
  Err err;
  uint32_t unsupported = 0;
  for (uint32_t lnc = 2; lnc < 32; ++lnc)
    if (!(dinfo.lnc_mask & (1u << lnc))) {
      unsupported = lnc;
      break;
    }
  REQUIRE(unsupported != 0);
  INFO("unsupported LNC " << unsupported);
  HAL_CHECK_RESULT(TRN_ERROR_OUT_OF_RANGE, ops().core_info(inst, 0, unsupported, 0, &ci, &err),
                   err);
  HAL_CHECK_RESULT(TRN_ERROR_OUT_OF_RANGE, ops().core_info(inst, 0, 0, 0, &ci, &err), err);
  HAL_CHECK_RESULT(TRN_ERROR_OUT_OF_RANGE,
                   ops().core_info(inst, 0, 1, p.physical_core_count, &ci, &err), err);
  HAL_CHECK_RESULT(TRN_ERROR_OUT_OF_RANGE, ops().core_info(inst, 0, 1, UINT32_MAX, &ci, &err), err);

  const uint32_t past = inst.device_count();
  trn_device_properties_t props = TRN_DEVICE_PROPERTIES_INIT;
  trn_hal_device_info_t info;
  HAL_CHECK_FAILS(ops().device_properties(inst, past, &props, &info, &err), err);
  HAL_CHECK_FAILS(ops().core_info(inst, past, 1, 0, &ci, &err), err);
  uint32_t count = 0;
  HAL_CHECK_FAILS(ops().device_neighbors(inst, past, &count, nullptr, &err), err);
  uint64_t address = 0;
  HAL_CHECK_FAILS(ops().mem_reserve(inst, past, 0, dinfo.chunk_bytes, &address, &err), err);
  uint32_t busy = 0;
  HAL_CHECK_FAILS(ops().core_claim(inst, past, 0, 1, &busy, &err), err);
  trn_hal_sem_t *sem = nullptr;
  uint32_t record = 0;
  uint64_t id = 0;
  HAL_CHECK_FAILS(ops().sem_create(inst, past, 0, 0, &sem, &record, &id, &err), err);
  CHECK(sem == nullptr);
}

TEST_CASE("devices: neighbors enumerate in two calls", "[devices]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  for (uint32_t d = 0; d < inst.device_count(); ++d) {
    INFO("device " << d);
    const auto p = device_properties(inst, d);
    uint32_t count = UINT32_MAX;
    Err err;
    HAL_REQUIRE_OK(ops().device_neighbors(inst, d, &count, nullptr, &err), err);
    CHECK(count == p.neighbor_count);
    CHECK(count < inst.device_count());
    std::vector<uint32_t> neighbors(count + 1, UINT32_MAX);
    uint32_t got = count;
    HAL_REQUIRE_OK(ops().device_neighbors(inst, d, &got, neighbors.data(), &err), err);
    CHECK(got == count);
    for (uint32_t i = 0; i < got; ++i) {
      CHECK(neighbors[i] < inst.device_count());
      CHECK(neighbors[i] != d);
    }
    CHECK(neighbors[count] == UINT32_MAX);  // nothing written past `count`
  }
}

TEST_CASE("claims: claim, owner, unclaim", "[devices][claims]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const auto p = device_properties(inst, 0);
  Err err;
  trn_hal_process_t owner;
  std::memset(&owner, 0, sizeof owner);
  HAL_REQUIRE_OK(ops().core_owner(inst, 0, 0, &owner, &err), err);
  CHECK(owner.pid == 0);

  uint32_t busy = UINT32_MAX;
  HAL_REQUIRE_OK(ops().core_claim(inst, 0, 0, 1, &busy, &err), err);
  std::memset(&owner, 0, sizeof owner);
  HAL_REQUIRE_OK(ops().core_owner(inst, 0, 0, &owner, &err), err);
  CHECK(owner.pid == getpid());
  CHECK((owner.physical_core_mask & 1u) != 0);
  CHECK(owner.since_unix_ns > 0);
  if (p.physical_core_count > 1) {
    std::memset(&owner, 0, sizeof owner);
    HAL_REQUIRE_OK(ops().core_owner(inst, 0, 1, &owner, &err), err);
    CHECK(owner.pid == 0);
  }
  HAL_REQUIRE_OK(ops().core_unclaim(inst, 0, 0, 1, &err), err);
  std::memset(&owner, 0, sizeof owner);
  HAL_REQUIRE_OK(ops().core_owner(inst, 0, 0, &owner, &err), err);
  CHECK(owner.pid == 0);

  // All of them at once, then none.
  HAL_REQUIRE_OK(ops().core_claim(inst, 0, 0, p.physical_core_count, &busy, &err), err);
  for (uint32_t c = 0; c < p.physical_core_count; ++c) {
    INFO("core " << c);
    HAL_REQUIRE_OK(ops().core_owner(inst, 0, c, &owner, &err), err);
    CHECK(owner.pid == getpid());
  }
  HAL_REQUIRE_OK(ops().core_unclaim(inst, 0, 0, p.physical_core_count, &err), err);
}

TEST_CASE("claims: bad ranges are rejected and claim nothing", "[devices][claims]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const uint32_t n = device_properties(inst, 0).physical_core_count;
  Err err;
  uint32_t busy = 0;
  HAL_CHECK_FAILS(ops().core_claim(inst, 0, n, 1, &busy, &err), err);
  HAL_CHECK_FAILS(ops().core_claim(inst, 0, 0, n + 1, &busy, &err), err);
  HAL_CHECK_FAILS(ops().core_claim(inst, 0, n - 1, 2, &busy, &err), err);
  HAL_CHECK_FAILS(ops().core_claim(inst, 0, UINT32_MAX, 2, &busy, &err), err);
  HAL_CHECK_FAILS(ops().core_unclaim(inst, 0, n, 1, &err), err);
  trn_hal_process_t owner;
  HAL_CHECK_FAILS(ops().core_owner(inst, 0, n, &owner, &err), err);
  // All or none: the failed n-1..n+1 claim left core n-1 free.
  std::memset(&owner, 0, sizeof owner);
  HAL_REQUIRE_OK(ops().core_owner(inst, 0, n - 1, &owner, &err), err);
  CHECK(owner.pid == 0);
}

TEST_CASE("claims: the process list includes this process", "[devices][claims]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  uint32_t count = 0;
  Err err;
  HAL_REQUIRE_OK(ops().process_list(inst, 0, &count, nullptr, &err), err);
  REQUIRE(count >= 1);
  std::vector<trn_hal_process_t> list(count);
  uint32_t got = count;
  HAL_REQUIRE_OK(ops().process_list(inst, 0, &got, list.data(), &err), err);
  REQUIRE(got <= count);
  bool found = false;
  for (uint32_t i = 0; i < got; ++i) {
    if (list[i].pid != getpid()) continue;
    found = true;
    CHECK((list[i].physical_core_mask & 1u) != 0);
    CHECK(list[i].attached_unix_ns > 0);
    CHECK(std::string(list[i].command).find("trn-driver-conformance") != std::string::npos);
    CHECK(std::string(list[i].runtime_version) == "0.2.0");
  }
  CHECK(found);
}

TEST_CASE("claims: the process record shows reservations and accounted allocations",
          "[devices][claims]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const auto p = device_properties(inst, 0);
  const uint32_t bank = p.hbm_bank_count - 1;
  Range r(inst, 0, 1, bank);
  ops().mem_account(inst, 0, bank, TRN_MEM_CATEGORY_SCRATCH, 4096, 1);
  ops().mem_account(inst, 0, bank, TRN_MEM_CATEGORY_SCRATCH, 8192, 2);
  ops().mem_account(inst, 0, bank, TRN_MEM_CATEGORY_SCRATCH, -4096, -1);
  uint32_t count = 0;
  Err err;
  HAL_REQUIRE_OK(ops().process_list(inst, 0, &count, nullptr, &err), err);
  std::vector<trn_hal_process_t> list(count);
  HAL_REQUIRE_OK(ops().process_list(inst, 0, &count, list.data(), &err), err);
  bool found = false;
  for (uint32_t i = 0; i < count; ++i) {
    if (list[i].pid != getpid()) continue;
    found = true;
    CHECK(list[i].hbm_reserved_bytes[bank] == r.bytes());
    CHECK(list[i].hbm_allocated_bytes[bank][TRN_MEM_CATEGORY_SCRATCH] == 8192);
    CHECK(list[i].hbm_allocation_count[bank][TRN_MEM_CATEGORY_SCRATCH] == 2);
    CHECK(list[i].hbm_peak_bytes[bank][TRN_MEM_CATEGORY_SCRATCH] == 12288);
    CHECK(list[i].hbm_allocated_bytes[bank][TRN_MEM_CATEGORY_TENSORS] == 0);
  }
  CHECK(found);
}

TEST_CASE("claims: a core held by another process is CORE_BUSY and names the core",
          "[devices][claims]") {
  PrivateRoot root;
  // The other process: opens the driver, claims core 1, reports, and waits to be told to exit.
  int up[2], down[2];
  REQUIRE(pipe(up) == 0);
  REQUIRE(pipe(down) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(up[0]);
    close(down[1]);
    const trn_hal_process_identity_t identity{"conformance-holder", "0.2.0"};
    trn_hal_error_t err{};
    trn_hal_instance_t *inst = nullptr;
    char status = 'E';
    uint32_t busy = 0;
    if (table().open(&identity, &inst, &err) == TRN_SUCCESS && table().device_count(inst) > 0 &&
        table().core_claim(inst, 0, 1, 1, &busy, &err) == TRN_SUCCESS)
      status = 'K';
    if (write(up[1], &status, 1) != 1) _exit(2);
    char go = 0;
    if (read(down[0], &go, 1) < 0) _exit(3);
    table().close(inst);
    _exit(0);
  }
  close(up[1]);
  close(down[0]);
  struct Reap {
    pid_t pid;
    int fd;
    ~Reap() {
      if (fd >= 0) close(fd);  // the child exits on end-of-file
      int status = 0;
      if (pid > 0) waitpid(pid, &status, 0);
    }
  } reap{child, down[1]};
  pollfd p{up[0], POLLIN, 0};
  REQUIRE(poll(&p, 1, 10000) == 1);
  char status = 0;
  REQUIRE(read(up[0], &status, 1) == 1);
  close(up[0]);
  if (status != 'K') {
    // The child could not open or claim: the driver has no device or a second core.
    const trn_hal_process_identity_t identity{"trn-driver-conformance", "0.2.0"};
    Err err;
    trn_hal_instance_t *inst = nullptr;
    HAL_REQUIRE_OK(ops().open(&identity, &inst, &err), err);
    const uint32_t devices = ops().device_count(inst);
    const uint32_t cores = devices ? device_properties(inst, 0).physical_core_count : 0;
    ops().close(inst);
    if (devices == 0 || cores < 2) {
      WARN("skipped: needs a device with two cores");
      return;
    }
    FAIL("another process could not open the driver and claim core 1");
  }

  const trn_hal_process_identity_t identity{"trn-driver-conformance", "0.2.0"};
  Err err;
  trn_hal_instance_t *raw = nullptr;
  HAL_REQUIRE_OK(ops().open(&identity, &raw, &err), err);
  struct Close {
    trn_hal_instance_t *i;
    ~Close() { ops().close(i); }
  } closer{raw};
  uint32_t busy = UINT32_MAX;
  HAL_CHECK_RESULT(TRN_ERROR_CORE_BUSY, ops().core_claim(raw, 0, 0, 2, &busy, &err), err);
  CHECK(busy == 1);
  // All or none: core 0 stayed free.
  trn_hal_process_t owner;
  std::memset(&owner, 0, sizeof owner);
  HAL_REQUIRE_OK(ops().core_owner(raw, 0, 0, &owner, &err), err);
  CHECK(owner.pid == 0);
  std::memset(&owner, 0, sizeof owner);
  HAL_REQUIRE_OK(ops().core_owner(raw, 0, 1, &owner, &err), err);
  CHECK(owner.pid == child);
  CHECK(std::string(owner.command) == "conformance-holder");
  // Core 0 alone is free; unclaiming the other process's core does not take its claim away.
  HAL_CHECK_OK(ops().core_claim(raw, 0, 0, 1, &busy, &err), err);
  ops().core_unclaim(raw, 0, 1, 1, &err);
  std::memset(&owner, 0, sizeof owner);
  HAL_REQUIRE_OK(ops().core_owner(raw, 0, 1, &owner, &err), err);
  CHECK(owner.pid == child);
  // Compute queues need this process's claim: none on the other process's core. Its DMA
  // engines are shared: a copy queue is fine.
  trn_hal_queue_t *q = nullptr;
  HAL_CHECK_FAILS(ops().queue_create(raw, 0, 1, 1, TRN_HAL_QUEUE_COMPUTE, 4, 0, &q, &err), err);
  CHECK(q == nullptr);
  HAL_CHECK_OK(ops().queue_create(raw, 0, 1, 1, TRN_HAL_QUEUE_COPY, 4, 0, &q, &err), err);
  CHECK(q != nullptr);
  ops().queue_destroy(raw, q);

  // Once the other process is gone, its core is free.
  close(reap.fd);
  reap.fd = -1;
  int wstatus = 0;
  REQUIRE(waitpid(child, &wstatus, 0) == child);
  reap.pid = -1;
  CHECK(WIFEXITED(wstatus));
  HAL_CHECK_OK(ops().core_claim(raw, 0, 1, 1, &busy, &err), err);
}

TEST_CASE("fork: a child abandons the instance it inherited, the parent keeps what it holds",
          "[devices][fork]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  Claim claim(inst, 0, 0, 1);
  Sem shared(inst, 0, 3, TRN_HAL_SEM_SHAREABLE);
  Queue queue(inst, 0, TRN_HAL_QUEUE_COPY);
  // The child gives up the inherited instance without touching it otherwise, opens its own and
  // finds the parent's claim and semaphore still held: 'K' when all of that holds.
  ChildProcess child([&]() -> char {
    ops().abandon(inst);
    const trn_hal_process_identity_t identity{"conformance-child", "0.2.0"};
    trn_hal_error_t err{};
    trn_hal_instance_t *own = nullptr;
    if (ops().open(&identity, &own, &err) != TRN_SUCCESS) return 'O';
    uint32_t busy = UINT32_MAX;
    if (ops().core_claim(own, 0, 0, 1, &busy, &err) != TRN_ERROR_CORE_BUSY || busy != 0) return 'C';
    trn_hal_sem_t *imported = nullptr;
    if (ops().sem_import(own, 0, shared.record(), shared.id(), &imported, &err) != TRN_SUCCESS)
      return 'S';
    if (ops().sem_value(imported) != 3) return 'V';
    ops().sem_destroy(own, imported);
    ops().close(own);
    return 'K';
  });
  CHECK(child.status() == 'K');
  CHECK(child.release());
  // After the child is gone: the claim, the semaphore and the queue are the parent's still.
  trn_hal_process_t owner{};
  Err err;
  HAL_REQUIRE_OK(ops().core_owner(inst, 0, 0, &owner, &err), err);
  CHECK(owner.pid == getpid());
  ops().sem_signal(shared, 4, 0);
  CHECK(shared.value() == 4);
  Sem done(inst, 0, 0);
  queue.submit({signal_command(done, 1)}, "after-fork", 1);
  CHECK(ops().sem_wait(done, 1, 10'000'000'000ull) == TRN_SUCCESS);
}
