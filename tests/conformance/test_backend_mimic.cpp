// Conformance: the shape of a framework backend on trn.h alone — a caching allocator that hands
// out device addresses and finds its allocations again with trn_mem_lookup, two streams with
// priorities on one core driven by two threads, many small host-pointer copies interleaved with
// kernel launches, stream-ordered frees, and events timed with timestamps. Run under ASan and
// TSan like every conformance test.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/api_helpers.hpp"
#include "support/result_printing.hpp"
#include "support/sim_env.hpp"
#include "support/test_kernels.hpp"
#include "trn/trn.h"

namespace {

using trn::test::core_at;
using trn::test::first_device;
using trn::test::last_error;
using trn::test::SimEnv;

constexpr uint64_t kLong = 20'000'000'000;

// Failures are counted, not REQUIREd: Catch2's assertions are not for other threads.
struct Failures {
  std::mutex mu;
  std::vector<std::string> messages;
  void add(const std::string &what) {
    std::lock_guard lock(mu);
    messages.push_back(what + ": " + last_error());
  }
};

// PyTorch's shape of a device allocator: addresses out, blocks cached by size, a block freed on
// a stream reused by that stream at once (its queue orders the uses), and empty_cache() giving
// cached blocks back in stream order.
class CachingAllocator {
 public:
  CachingAllocator(trn_device_t device, trn_pool_t pool) : device_(device), pool_(pool) {}

  uint64_t malloc(uint64_t size, trn_queue_t stream) {
    const uint64_t rounded = round(size);
    std::lock_guard lock(mu_);
    auto &cached = free_[{stream, rounded}];
    if (!cached.empty()) {
      const uint64_t address = cached.back();
      cached.pop_back();
      return address;
    }
    trn_mem_t mem = nullptr;
    if (trn_mem_alloc(pool_, rounded, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem) != TRN_SUCCESS)
      return 0;
    trn_mem_info_t info = TRN_MEM_INFO_INIT;
    if (trn_mem_get_info(mem, &info) != TRN_SUCCESS) return 0;
    sizes_[info.device_address] = rounded;
    return info.device_address;
  }
  void free(uint64_t address, trn_queue_t stream) {
    std::lock_guard lock(mu_);
    free_[{stream, sizes_.at(address)}].push_back(address);
  }
  // Every cached block of the stream goes back to the device after the stream's work.
  bool empty_cache(trn_queue_t stream) {
    std::lock_guard lock(mu_);
    for (auto &[key, addresses] : free_) {
      if (key.first != stream) continue;
      for (uint64_t address : addresses) {
        trn_mem_t mem = nullptr;
        if (trn_mem_lookup(device_, address, &mem, nullptr) != TRN_SUCCESS) return false;
        if (trn_queue_free(stream, mem, nullptr, nullptr) != TRN_SUCCESS) return false;
        sizes_.erase(address);
        ++returned_;
      }
      addresses.clear();
    }
    return true;
  }
  uint64_t returned() {
    std::lock_guard lock(mu_);
    return returned_;
  }

 private:
  static uint64_t round(uint64_t size) {
    uint64_t r = 512;
    while (r < size) r <<= 1;
    return r;
  }
  const trn_device_t device_;
  const trn_pool_t pool_;
  std::mutex mu_;
  std::map<std::pair<trn_queue_t, uint64_t>, std::vector<uint64_t>> free_;
  std::map<uint64_t, uint64_t> sizes_;
  uint64_t returned_ = 0;
};

// The handle behind an address, as a backend's copy and launch paths find it.
trn_mem_t handle_of(trn_device_t device, uint64_t address, uint64_t *offset) {
  trn_mem_t mem = nullptr;
  return trn_mem_lookup(device, address, &mem, offset) == TRN_SUCCESS ? mem : nullptr;
}

// One step's host buffers, kept until the stream has passed the step.
struct Step {
  std::vector<float> a, b, out;
  trn_timestamp_t start{}, end{};
  uint64_t done = 0;  // the stream's sequence number after the step
};

void drive_stream(int id, trn_device_t device, trn_queue_t stream, trn_kernel_t add,
                  CachingAllocator &allocator, int steps, Failures &failures,
                  std::atomic<uint64_t> &checked, std::atomic<uint64_t> &timed_ns) {
  constexpr uint64_t kElements = trn::test::kAddBytes / sizeof(float);
  constexpr uint64_t kChunk = 32 * 1024;  // small copies: 16 per input
  trn_sem_t timeline = nullptr;
  if (trn_queue_get_semaphore(stream, &timeline) != TRN_SUCCESS) return failures.add("timeline");
  std::vector<std::unique_ptr<Step>> in_flight;
  auto retire = [&](size_t keep) {
    while (in_flight.size() > keep) {
      Step &step = *in_flight.front();
      if (trn_sem_wait(timeline, step.done, kLong) != TRN_SUCCESS) return failures.add("wait");
      for (uint64_t i = 0; i < kElements; ++i)
        if (step.out[i] != step.a[i] + step.b[i])
          return failures.add("stream " + std::to_string(id) + ": element " + std::to_string(i));
      if (step.end.device_ns <= step.start.device_ns) return failures.add("event times");
      timed_ns += step.end.device_ns - step.start.device_ns;
      ++checked;
      in_flight.erase(in_flight.begin());
    }
  };
  for (int s = 0; s < steps; ++s) {
    auto step = std::make_unique<Step>();
    step->a.resize(kElements);
    step->b.resize(kElements);
    step->out.assign(kElements, -1.0f);
    for (uint64_t i = 0; i < kElements; ++i) {
      step->a[i] = static_cast<float>((i * 3 + s) % 1000);
      step->b[i] = static_cast<float>(id * 10000 + (i % 77));
    }
    const uint64_t a = allocator.malloc(trn::test::kAddBytes, stream);
    const uint64_t b = allocator.malloc(trn::test::kAddBytes, stream);
    const uint64_t out = allocator.malloc(trn::test::kAddBytes, stream);
    if (!a || !b || !out) return failures.add("malloc");
    uint64_t offset = 0;
    trn_mem_t ma = handle_of(device, a, &offset), mb = handle_of(device, b, &offset),
              mo = handle_of(device, out, &offset);
    if (!ma || !mb || !mo || offset != 0) return failures.add("lookup");
    const auto *bytes_a = reinterpret_cast<const char *>(step->a.data());
    const auto *bytes_b = reinterpret_cast<const char *>(step->b.data());
    for (uint64_t at = 0; at < trn::test::kAddBytes; at += kChunk)
      if (trn_queue_write(stream, ma, at, bytes_a + at, kChunk, nullptr, nullptr) != TRN_SUCCESS ||
          trn_queue_write(stream, mb, at, bytes_b + at, kChunk, nullptr, nullptr) != TRN_SUCCESS)
        return failures.add("write");
    if (trn_queue_write_timestamp(stream, &step->start, nullptr, nullptr) != TRN_SUCCESS)
      return failures.add("timestamp");
    trn_kernel_binding_t bindings[3]{};
    bindings[0].mem = ma;
    bindings[1].mem = mb;
    bindings[2].mem = mo;
    trn_launch_desc_t launch = TRN_LAUNCH_DESC_INIT;
    launch.kernel = add;
    launch.args = bindings;
    launch.arg_count = 3;
    if (trn_queue_launch(stream, &launch, nullptr, nullptr) != TRN_SUCCESS)
      return failures.add("launch");
    if (trn_queue_write_timestamp(stream, &step->end, nullptr, nullptr) != TRN_SUCCESS ||
        trn_queue_read(stream, step->out.data(), mo, 0, trn::test::kAddBytes, nullptr,
                       &step->done) != TRN_SUCCESS)
      return failures.add("read");
    // Back to the cache at once: the stream orders the next user after this step's commands.
    allocator.free(a, stream);
    allocator.free(b, stream);
    allocator.free(out, stream);
    if (s % 4 == 3 && !allocator.empty_cache(stream)) return failures.add("empty_cache");
    in_flight.push_back(std::move(step));
    retire(3);
  }
  retire(0);
  if (!allocator.empty_cache(stream)) failures.add("empty_cache");
}

}  // namespace

TEST_CASE("a backend's allocator, streams, copies, launches, frees and events work together",
          "[backend][mimic]") {
  SimEnv env;
  trn_device_t device = first_device();
  trn_core_t core = core_at(device, 0);
  trn_queue_t streams[2] = {};
  const trn_queue_priority_t priorities[2] = {TRN_QUEUE_PRIORITY_HIGH, TRN_QUEUE_PRIORITY_LOW};
  for (int i = 0; i < 2; ++i) {
    trn_queue_desc_t desc = TRN_QUEUE_DESC_INIT;
    desc.core = core;
    desc.kind = TRN_QUEUE_KIND_COMPUTE;
    desc.priority = priorities[i];
    INFO(last_error());
    REQUIRE(trn_queue_create(&desc, &streams[i]) == TRN_SUCCESS);
  }
  trn_pool_t pool = trn::test::make_pool(device);
  trn_kernel_t add = trn::test::load_program(device, trn::test::vector_add_program());
  CachingAllocator allocator(device, pool);
  Failures failures;
  std::atomic<uint64_t> checked{0}, timed_ns{0};
  constexpr int kSteps = 24;
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back(drive_stream, i, device, streams[i], add, std::ref(allocator), kSteps,
                         std::ref(failures), std::ref(checked), std::ref(timed_ns));
  for (auto &t : threads) t.join();
  for (const auto &message : failures.messages) FAIL_CHECK(message);
  CHECK(checked == 2 * kSteps);
  CHECK(timed_ns > 0);
  CHECK(allocator.returned() > 0);
  INFO(last_error());
  REQUIRE(trn_device_synchronize(device, kLong) == TRN_SUCCESS);
  // Every block went back to the pool through the streams, none faulted.
  trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
  REQUIRE(trn_pool_get_stats(pool, &stats) == TRN_SUCCESS);
  CHECK(stats.allocation_count == 0);
  for (trn_queue_t stream : streams) {
    trn_queue_fault_t fault = TRN_QUEUE_FAULT_INIT;
    REQUIRE(trn_queue_get_fault(stream, &fault) == TRN_SUCCESS);
    CHECK(fault.result == TRN_SUCCESS);
    REQUIRE(trn_queue_destroy(stream) == TRN_SUCCESS);
  }
  REQUIRE(trn_kernel_destroy(add) == TRN_SUCCESS);
  REQUIRE(trn_pool_destroy(pool) == TRN_SUCCESS);
}
