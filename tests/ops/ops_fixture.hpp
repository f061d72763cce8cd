// What the op tests share: a simulated device with a compute queue and a pool, a private kernel
// cache directory, tensors made from and read back into float64 values, the float64 host
// reference to compare with (src/ops/host, tested on its own against hand values and finite
// differences), and per-dtype tolerances.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "isa/dtype.hpp"
#include "ops/host/reference.hpp"
#include "support/api_helpers.hpp"
#include "support/sim_env.hpp"
#include "support/temp_files.hpp"
#include "trn/trn_ops.h"

namespace trn::test {

using host_array = ops::host::Array;
using Shape = std::vector<int64_t>;

// A tensor in device memory of its own allocation.
struct DeviceTensor {
  trn_mem_t mem = nullptr;
  trn_ops_tensor_t t{};
  const trn_ops_tensor_t *get() const { return &t; }
};

inline uint32_t element_size(trn_dtype_t d) {
  return trn_dtype_size(d);
}

inline void encode(trn_dtype_t d, double v, std::byte *p) {
  if (d == TRN_DTYPE_F64) {
    std::memcpy(p, &v, 8);
  } else if (d == TRN_DTYPE_I64) {
    const auto i = static_cast<int64_t>(v);
    std::memcpy(p, &i, 8);
  } else if (d == TRN_DTYPE_I32) {
    const auto i = static_cast<int32_t>(v);
    std::memcpy(p, &i, 4);
  } else {
    const auto f = static_cast<float>(v);
    isa::store_f32(static_cast<isa::DType>(d), &f, p, 1);
  }
}

inline double decode(trn_dtype_t d, const std::byte *p) {
  if (d == TRN_DTYPE_F64) {
    double v;
    std::memcpy(&v, p, 8);
    return v;
  }
  if (d == TRN_DTYPE_I64) {
    int64_t v;
    std::memcpy(&v, p, 8);
    return static_cast<double>(v);
  }
  if (d == TRN_DTYPE_I32) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  float f;
  isa::load_f32(static_cast<isa::DType>(d), p, &f, 1);
  return f;
}

// The value a dtype holds for v (what a tensor made from v contains).
inline double as_dtype(trn_dtype_t d, double v) {
  std::byte b[8];
  encode(d, v, b);
  return decode(d, b);
}

// Absolute and relative tolerance of a result in `d` against a float64 reference: the device
// computes in fp32 and rounds once to the output dtype.
inline double tolerance(trn_dtype_t d) {
  switch (d) {
    case TRN_DTYPE_BF16: return 1.6e-2;
    case TRN_DTYPE_F16: return 2e-3;
    case TRN_DTYPE_F64: return 1e-12;
    default: return 2e-5;
  }
}

class OpsFixture {
 public:
  OpsFixture() {
    trn_ops_config_t c = TRN_OPS_CONFIG_INIT;
    cache_dir_ = files_.file("cache");
    c.cache_dir = cache_dir_.c_str();
    REQUIRE(trn_ops_configure(&c) == TRN_SUCCESS);
    REQUIRE(trn_ops_cache_clear() == TRN_SUCCESS);
    REQUIRE(trn_ops_reset_fallbacks() == TRN_SUCCESS);
    device_ = first_device();
    pool_ = make_pool(device_);
    queue_ = make_queue(core_at(device_, 0), TRN_QUEUE_KIND_COMPUTE);
  }
  ~OpsFixture() {
    trn_queue_destroy(queue_);
    for (trn_mem_t m : mems_) trn_mem_free(m);
    trn_pool_destroy(pool_);
    trn_ops_configure(nullptr);
  }
  OpsFixture(const OpsFixture &) = delete;
  OpsFixture &operator=(const OpsFixture &) = delete;

  trn_queue_t queue() const { return queue_; }
  trn_device_t device() const { return device_; }
  trn_pool_t pool() const { return pool_; }
  const std::string &cache_dir() const { return cache_dir_; }
  const TempDir &files() const { return files_; }

  // Reconfigure with `flags`, keeping the private cache directory.
  void configure(uint32_t flags, uint64_t memory_bytes = 0) {
    trn_ops_config_t c = TRN_OPS_CONFIG_INIT;
    c.cache_dir = cache_dir_.c_str();
    c.flags = flags;
    c.memory_cache_bytes = memory_bytes;
    REQUIRE(trn_ops_configure(&c) == TRN_SUCCESS);
  }

  DeviceTensor tensor(trn_dtype_t d, const Shape &shape) {
    DeviceTensor t;
    uint64_t n = 1;
    for (int64_t s : shape) n *= static_cast<uint64_t>(s);
    t.mem = alloc(pool_, std::max<uint64_t>(n * element_size(d), 1));
    mems_.push_back(t.mem);
    REQUIRE(trn_ops_tensor_init(&t.t, t.mem, 0, d, static_cast<uint32_t>(shape.size()),
                                shape.data()) == TRN_SUCCESS);
    return t;
  }
  DeviceTensor tensor(trn_dtype_t d, const host_array &values) {
    DeviceTensor t = tensor(d, values.shape);
    write(t, values);
    return t;
  }
  void write(const DeviceTensor &t, const host_array &values) {
    std::vector<std::byte> bytes(values.data.size() * element_size(t.t.dtype));
    for (size_t i = 0; i < values.data.size(); ++i)
      encode(t.t.dtype, values.data[i], bytes.data() + i * element_size(t.t.dtype));
    REQUIRE(trn_mem_write(t.mem, t.t.offset, bytes.data(), bytes.size()) == TRN_SUCCESS);
  }
  // Waits for the queue, then the tensor's (contiguous) values.
  host_array read(const DeviceTensor &t) {
    finish();
    host_array a{Shape(t.t.shape, t.t.shape + t.t.rank), {}};
    const uint64_t n = trn_ops_tensor_numel(&t.t);
    std::vector<std::byte> bytes(n * element_size(t.t.dtype));
    if (n) REQUIRE(trn_mem_read(t.mem, t.t.offset, bytes.data(), bytes.size()) == TRN_SUCCESS);
    for (uint64_t i = 0; i < n; ++i)
      a.data.push_back(decode(t.t.dtype, bytes.data() + i * element_size(t.t.dtype)));
    return a;
  }
  void finish() {
    INFO(last_error());
    REQUIRE(trn_queue_finish(queue_, 30'000'000'000ull) == TRN_SUCCESS);
  }

 private:
  SimEnv env_;
  TempDir files_;
  std::string cache_dir_;
  trn_device_t device_ = nullptr;
  trn_pool_t pool_ = nullptr;
  trn_queue_t queue_ = nullptr;
  std::vector<trn_mem_t> mems_;
};

// Random values in [lo, hi], rounded to what `d` holds.
inline host_array random_array(std::mt19937 &rng, const Shape &shape, trn_dtype_t d,
                               double lo = -2.0, double hi = 2.0) {
  host_array a = host_array::zeros(shape);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (double &v : a.data) v = as_dtype(d, dist(rng));
  return a;
}

// Every element within tolerance: |got - want| <= tol * (1 + |want|); NaNs must match.
inline void require_close(const host_array &got, const host_array &want, double tol,
                          const std::string &what) {
  INFO(what);
  REQUIRE(got.shape == want.shape);
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < want.data.size(); ++i) {
    const double g = got.data[i], w = want.data[i];
    const bool ok = (std::isnan(w) && std::isnan(g)) || (std::isinf(w) && g == w) ||
                    std::fabs(g - w) <= tol * (1.0 + std::fabs(w));
    if (!ok && bad++ == 0) first = i;
  }
  INFO("first mismatch at " << first << ": got " << (bad ? got.data[first] : 0.0) << ", want "
                            << (bad ? want.data[first] : 0.0) << " (" << bad << " of "
                            << want.data.size() << " differ)");
  CHECK(bad == 0);
}

inline std::string ops_error() {
  return trn_ops_last_error();
}

inline uint64_t fallback_count(const char *op) {
  uint32_t n = 0;
  REQUIRE(trn_ops_get_fallbacks(&n, nullptr) == TRN_SUCCESS);
  std::vector<trn_ops_fallback_t> list(n, TRN_OPS_FALLBACK_INIT);
  REQUIRE(trn_ops_get_fallbacks(&n, list.data()) == TRN_SUCCESS);
  uint64_t count = 0;
  for (uint32_t i = 0; i < n; ++i)
    if (std::string(list[i].op) == op) count += list[i].count;
  return count;
}

inline trn_ops_cache_stats_t cache_stats() {
  trn_ops_cache_stats_t s = TRN_OPS_CACHE_STATS_INIT;
  REQUIRE(trn_ops_get_cache_stats(&s) == TRN_SUCCESS);
  return s;
}

}  // namespace trn::test
