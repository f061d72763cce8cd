// Small helpers the conformance, multi-process and stress tests share (one copy, not one per test
// file): the last error, the
// devices and cores of the current configuration, and objects with default descriptors (failing
// the test when they cannot be had).
#pragma once

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "trn/trn.h"

namespace trn::test {

// No Catch assertion here: stress tests call it on worker threads. test_negative checks that
// trn_last_error() is never NULL.
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

// Objects with default descriptors (failing the test when they cannot be made).
inline trn_pool_t make_pool(trn_device_t device, trn_pool_kind_t kind = TRN_POOL_KIND_DEVICE) {
  trn_pool_desc_t desc = TRN_POOL_DESC_INIT;
  desc.kind = kind;
  trn_pool_t pool = nullptr;
  INFO(last_error());
  REQUIRE(trn_pool_create(device, &desc, &pool) == TRN_SUCCESS);
  return pool;
}

inline trn_sem_t make_sem(trn_device_t device) {
  trn_sem_desc_t desc = TRN_SEM_DESC_INIT;
  trn_sem_t sem = nullptr;
  INFO(last_error());
  REQUIRE(trn_sem_create(device, &desc, &sem) == TRN_SUCCESS);
  return sem;
}

inline trn_mem_t alloc(trn_pool_t pool, uint64_t size) {
  trn_mem_t mem = nullptr;
  INFO(last_error());
  REQUIRE(trn_mem_alloc(pool, size, 0, TRN_MEM_CATEGORY_TENSORS, 0, &mem) == TRN_SUCCESS);
  return mem;
}

inline trn_mem_info_t mem_info(trn_mem_t mem) {
  trn_mem_info_t info = TRN_MEM_INFO_INIT;
  INFO(last_error());
  REQUIRE(trn_mem_get_info(mem, &info) == TRN_SUCCESS);
  return info;
}

inline trn_queue_t make_queue(trn_core_t core, trn_queue_kind_t kind = TRN_QUEUE_KIND_COPY,
                              trn_queue_priority_t priority = TRN_QUEUE_PRIORITY_NORMAL) {
  trn_queue_desc_t desc = TRN_QUEUE_DESC_INIT;
  desc.core = core;
  desc.kind = kind;
  desc.priority = priority;
  trn_queue_t queue = nullptr;
  INFO(last_error());
  REQUIRE(trn_queue_create(&desc, &queue) == TRN_SUCCESS);
  return queue;
}

// A semaphore's value (a failed one's too).
inline uint64_t value_of(trn_sem_t sem) {
  uint64_t value = 0;
  const trn_result_t r = trn_sem_query(sem, &value);
  INFO(last_error());
  REQUIRE((r == TRN_SUCCESS || r == TRN_ERROR_CANCELLED));
  return value;
}

inline trn_sem_t timeline_of(trn_queue_t queue) {
  trn_sem_t sem = nullptr;
  INFO(last_error());
  REQUIRE(trn_queue_get_semaphore(queue, &sem) == TRN_SUCCESS);
  return sem;
}

inline trn_queue_fault_t fault_of(trn_queue_t queue) {
  trn_queue_fault_t fault = TRN_QUEUE_FAULT_INIT;
  INFO(last_error());
  REQUIRE(trn_queue_get_fault(queue, &fault) == TRN_SUCCESS);
  return fault;
}

}  // namespace trn::test
