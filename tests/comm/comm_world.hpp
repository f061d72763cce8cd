// Ranks for the collectives tests: one core, queue and pool per rank, communicators made with
// trn_comm_init_all (threads) or per process, the data every test writes, and the host
// reference each operation is checked against.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "trn/trn.h"
#include "trn/trn_comm.h"

namespace trn::test {

inline std::string comm_error() {
  return trn_comm_last_error();
}

// Every visible core of every device, in order.
inline std::vector<trn_core_t> all_cores() {
  uint32_t count = 0;
  REQUIRE(trn_device_get(&count, nullptr) == TRN_SUCCESS);
  std::vector<trn_device_t> devices(count);
  REQUIRE(trn_device_get(&count, devices.data()) == TRN_SUCCESS);
  std::vector<trn_core_t> cores;
  for (trn_device_t device : devices) {
    uint32_t n = 0;
    REQUIRE(trn_core_get(device, &n, nullptr) == TRN_SUCCESS);
    std::vector<trn_core_t> list(n);
    REQUIRE(trn_core_get(device, &n, list.data()) == TRN_SUCCESS);
    cores.insert(cores.end(), list.begin(), list.end());
  }
  return cores;
}

// One rank's device objects: a compute queue on its core and a pool on the core's bank.
struct RankResources {
  trn_core_t core = nullptr;
  trn_device_t device = nullptr;
  trn_queue_t queue = nullptr;
  trn_pool_t pool = nullptr;

  // Returns false (with the reason in *why) instead of failing, so forked children can use it.
  bool open(trn_core_t on, std::string *why) {
    core = on;
    trn_core_properties_t props = TRN_CORE_PROPERTIES_INIT;
    trn_core_get_properties(core, &props);
    uint32_t count = 0;
    trn_device_get(&count, nullptr);
    std::vector<trn_device_t> devices(count);
    trn_device_get(&count, devices.data());
    for (trn_device_t d : devices) {
      trn_device_properties_t dp = TRN_DEVICE_PROPERTIES_INIT;
      trn_device_get_properties(d, &dp);
      if (dp.index == props.device_index) device = d;
    }
    trn_queue_desc_t qd = TRN_QUEUE_DESC_INIT;
    qd.kind = TRN_QUEUE_KIND_COMPUTE;
    qd.core = core;
    trn_pool_desc_t pd = TRN_POOL_DESC_INIT;
    pd.hbm_bank = props.hbm_bank;
    if (trn_queue_create(&qd, &queue) != TRN_SUCCESS ||
        trn_pool_create(device, &pd, &pool) != TRN_SUCCESS) {
      *why = trn_last_error();
      return false;
    }
    return true;
  }
  void close() {
    if (queue) trn_queue_finish(queue, 10'000'000'000ull);
    trn_queue_destroy(queue);
    trn_pool_destroy(pool);
    queue = nullptr;
    pool = nullptr;
  }
};

// Small integers, so that every order of summation (and products of +-1, 2) is exact in every
// dtype: results are compared bit for bit.
inline double input_value(uint32_t rank, uint64_t i, trn_comm_red_op_t op) {
  if (op == TRN_COMM_PROD) {
    const uint64_t k = (i + rank) % 3;
    return k == 0 ? 2.0 : (k == 1 ? 1.0 : -1.0);
  }
  return static_cast<double>(static_cast<int64_t>((i * 7 + rank * 3) % 5) - 2);
}

inline double reduce_values(trn_comm_red_op_t op, uint32_t ranks, uint64_t i, trn_dtype_t dtype) {
  double acc = input_value(0, i, op);
  for (uint32_t r = 1; r < ranks; ++r) {
    const double v = input_value(r, i, op);
    switch (op) {
      case TRN_COMM_PROD: acc *= v; break;
      case TRN_COMM_MAX: acc = std::max(acc, v); break;
      case TRN_COMM_MIN: acc = std::min(acc, v); break;
      default: acc += v; break;
    }
  }
  if (op == TRN_COMM_AVG) {
    acc /= ranks;
    if (dtype == TRN_DTYPE_I32) acc = std::trunc(acc);
  }
  return acc;
}

inline void encode(trn_dtype_t dtype, double value, void *out) {
  switch (dtype) {
    case TRN_DTYPE_F32: {
      const float f = static_cast<float>(value);
      std::memcpy(out, &f, 4);
      break;
    }
    case TRN_DTYPE_BF16: {
      const float f = static_cast<float>(value);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      bits += 0x7fff + ((bits >> 16) & 1);  // round to nearest even
      const uint16_t top = static_cast<uint16_t>(bits >> 16);
      std::memcpy(out, &top, 2);
      break;
    }
    case TRN_DTYPE_F16: {
      const _Float16 h = static_cast<_Float16>(value);
      std::memcpy(out, &h, 2);
      break;
    }
    default: {
      const int32_t v = static_cast<int32_t>(value);
      std::memcpy(out, &v, 4);
      break;
    }
  }
}

inline double decode(trn_dtype_t dtype, const void *in) {
  switch (dtype) {
    case TRN_DTYPE_F32: {
      float f;
      std::memcpy(&f, in, 4);
      return f;
    }
    case TRN_DTYPE_BF16: {
      uint16_t top;
      std::memcpy(&top, in, 2);
      const uint32_t bits = static_cast<uint32_t>(top) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case TRN_DTYPE_F16: {
      _Float16 h;
      std::memcpy(&h, in, 2);
      return static_cast<double>(h);
    }
    default: {
      int32_t v;
      std::memcpy(&v, in, 4);
      return v;
    }
  }
}

// The value `expected` rounded to the dtype, as the device stores it.
inline double in_dtype(trn_dtype_t dtype, double expected) {
  uint8_t bytes[4];
  encode(dtype, expected, bytes);
  return decode(dtype, bytes);
}

}  // namespace trn::test
