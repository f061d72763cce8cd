// Ranks as threads of this process: n ranks on consecutive visible cores, joined with
// trn_comm_init_all, and a way to run a body on one thread per rank.
#pragma once

#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "comm_world.hpp"

namespace trn::test {

struct ThreadWorld {
  std::vector<RankResources> ranks;
  std::vector<trn_comm_t> comms;

  ThreadWorld() = default;
  // n ranks from the first_core-th visible core on (two devices of 4 logical cores each).
  explicit ThreadWorld(uint32_t n, uint64_t chunk_bytes = 4096, uint64_t timeout_ms = 30'000,
                       uint32_t first_core = 0) {
    const std::string why = open(n, chunk_bytes, timeout_ms, first_core);
    INFO(why);
    REQUIRE(why.empty());
  }
  // The same without Catch's macros, which only the test's main thread may use: what failed, or
  // empty.
  std::string open(uint32_t n, uint64_t chunk_bytes = 4096, uint64_t timeout_ms = 30'000,
                   uint32_t first_core = 0) {
    std::vector<trn_core_t> cores;
    uint32_t count = 0;
    if (trn_device_get(&count, nullptr) != TRN_SUCCESS) return trn_last_error();
    std::vector<trn_device_t> devices(count);
    if (trn_device_get(&count, devices.data()) != TRN_SUCCESS) return trn_last_error();
    for (trn_device_t device : devices) {
      uint32_t k = 0;
      if (trn_core_get(device, &k, nullptr) != TRN_SUCCESS) return trn_last_error();
      std::vector<trn_core_t> list(k);
      if (trn_core_get(device, &k, list.data()) != TRN_SUCCESS) return trn_last_error();
      cores.insert(cores.end(), list.begin(), list.end());
    }
    if (cores.size() < first_core + n)
      return std::to_string(cores.size()) + " cores, fewer than " + std::to_string(first_core + n);
    ranks.resize(n);
    std::vector<trn_core_t> mine;
    for (uint32_t i = 0; i < n; ++i) {
      std::string why;
      if (!ranks[i].open(cores[first_core + i], &why)) return why;
      mine.push_back(cores[first_core + i]);
    }
    trn_comm_desc_t desc = TRN_COMM_DESC_INIT;
    desc.chunk_bytes = chunk_bytes;
    desc.timeout_ns = timeout_ms == UINT64_MAX ? UINT64_MAX : timeout_ms * 1'000'000ull;
    comms.resize(n);
    if (trn_comm_init_all(n, mine.data(), &desc, comms.data()) != TRN_SUCCESS) return comm_error();
    return "";
  }
  ~ThreadWorld() {
    for (trn_comm_t comm : comms) trn_comm_destroy(comm);
    for (auto &rank : ranks) rank.close();
  }
  ThreadWorld(const ThreadWorld &) = delete;
  ThreadWorld &operator=(const ThreadWorld &) = delete;
  // Runs body(rank) on one thread per rank; returns the failures.
  std::vector<std::string> each(const std::function<std::string(uint32_t)> &body) {
    std::vector<std::string> failures(ranks.size());
    std::vector<std::thread> threads;
    for (uint32_t r = 0; r < ranks.size(); ++r)
      threads.emplace_back([&, r] { failures[r] = body(r); });
    for (auto &t : threads) t.join();
    std::vector<std::string> out;
    for (auto &f : failures)
      if (!f.empty()) out.push_back(f);
    return out;
  }
};

}  // namespace trn::test
