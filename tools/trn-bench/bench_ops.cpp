// trn-bench ops: the eager op library (libtrn_ops).
// - dispatch: host time to issue an op whose kernel is cached (the library's work per call:
//   checking tensors, the signature, the cache lookup, the launch), against computing the same op
//   on the host CPU (one thread, plain loops), the baseline a framework's CPU eager mode has.
// - first use: building an op's kernel against loading it from the disk cache, per op class.
// - large ops: each op's simulated time against its roofline (compute- or HBM-bound, the larger).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench.hpp"
#include "trn/trn_ops.h"

namespace trn::bench {

namespace {

constexpr uint64_t kLong = 120'000'000'000;

void ops_check(trn_result_t r, const char *what) {
  if (r != TRN_SUCCESS) {
    std::fprintf(stderr, "trn-bench ops: %s: %s (%s)\n", what, trn_result_name(r),
                 trn_ops_last_error());
    std::exit(1);
  }
}

struct Tensors {
  trn_pool_t pool = nullptr;
  std::vector<trn_mem_t> mems;

  trn_ops_tensor_t make(trn_dtype_t d, std::vector<int64_t> shape, float value) {
    uint64_t n = 1;
    for (int64_t s : shape) n *= static_cast<uint64_t>(s);
    trn_mem_t m = nullptr;
    check(trn_mem_alloc(pool, n * trn_dtype_size(d), 0, TRN_MEM_CATEGORY_TENSORS, 0, &m),
          "trn_mem_alloc");
    mems.push_back(m);
    trn_ops_tensor_t t{};
    ops_check(trn_ops_tensor_init(&t, m, 0, d, static_cast<uint32_t>(shape.size()), shape.data()),
              "trn_ops_tensor_init");
    if (d == TRN_DTYPE_F32) {
      std::vector<float> v(n, value);
      check(trn_mem_write(m, 0, v.data(), v.size() * 4), "trn_mem_write");
    }
    return t;
  }
  ~Tensors() {
    for (trn_mem_t m : mems) trn_mem_free(m);
  }
};

trn_ops_cache_stats_t stats() {
  trn_ops_cache_stats_t s = TRN_OPS_CACHE_STATS_INIT;
  ops_check(trn_ops_get_cache_stats(&s), "trn_ops_get_cache_stats");
  return s;
}

struct OpCase {
  std::string name;
  std::function<void()> issue;  // issues the op once (asynchronously)
  std::function<void()> host;   // the same op computed on the host CPU
};

// The simulated time of `issue` between two queue timestamps, in seconds.
double simulated_seconds(trn_queue_t q, const std::function<void()> &issue) {
  trn_timestamp_t t0{}, t1{};
  check(trn_queue_write_timestamp(q, &t0, nullptr, nullptr), "trn_queue_write_timestamp");
  issue();
  check(trn_queue_write_timestamp(q, &t1, nullptr, nullptr), "trn_queue_write_timestamp");
  check(trn_queue_finish(q, kLong), "trn_queue_finish");
  return double(t1.device_ns - t0.device_ns) * 1e-9;
}

}  // namespace

int bench_ops(int argc, char **argv) {
  const bool quick = has_flag(argc, argv, "--quick");
  // A private disk cache, so that first use really builds and the disk case really reads it.
  const char *tmp = std::getenv("TMPDIR");
  std::string dir_template = std::string(tmp && *tmp ? tmp : "/tmp") + "/trn-bench-ops-XXXXXX";
  if (!mkdtemp(dir_template.data())) {
    std::perror("trn-bench ops: mkdtemp");
    return 1;
  }
  const std::string cache_dir = dir_template;
  trn_ops_config_t config = TRN_OPS_CONFIG_INIT;
  config.cache_dir = cache_dir.c_str();
  ops_check(trn_ops_configure(&config), "trn_ops_configure");

  const Context ctx = open_device();
  trn_device_properties_t props = TRN_DEVICE_PROPERTIES_INIT;
  check(trn_device_get_properties(ctx.device, &props), "trn_device_get_properties");
  trn_pool_desc_t pool_desc = TRN_POOL_DESC_INIT;
  Tensors t;
  check(trn_pool_create(ctx.device, &pool_desc, &t.pool), "trn_pool_create");
  trn_queue_desc_t queue_desc = TRN_QUEUE_DESC_INIT;
  queue_desc.core = ctx.core;
  queue_desc.kind = TRN_QUEUE_KIND_COMPUTE;
  trn_queue_t q = nullptr;
  check(trn_queue_create(&queue_desc, &q), "trn_queue_create");

  // Small ops, as an eager model issues them: [128, 64] f32 (8192 elements), a 128^3 matmul,
  // an Adam step of a 64K-element parameter.
  const int64_t rows = 128, cols = 64;
  trn_ops_tensor_t a = t.make(TRN_DTYPE_F32, {rows, cols}, 1.5f),
                   b = t.make(TRN_DTYPE_F32, {rows, cols}, 0.5f),
                   y = t.make(TRN_DTYPE_F32, {rows, cols}, 0.0f),
                   m1 = t.make(TRN_DTYPE_F32, {128, 128}, 0.25f),
                   m2 = t.make(TRN_DTYPE_F32, {128, 128}, 0.5f),
                   mo = t.make(TRN_DTYPE_F32, {128, 128}, 0.0f),
                   p = t.make(TRN_DTYPE_F32, {256, 256}, 1.0f),
                   g = t.make(TRN_DTYPE_F32, {256, 256}, 0.01f),
                   s1 = t.make(TRN_DTYPE_F32, {256, 256}, 0.0f),
                   s2 = t.make(TRN_DTYPE_F32, {256, 256}, 0.0f);
  std::vector<float> ha(rows * cols, 1.5f), hb(rows * cols, 0.5f), hy(rows * cols);
  std::vector<float> hm1(128 * 128, 0.25f), hm2(128 * 128, 0.5f), hmo(128 * 128);
  std::vector<float> hp(256 * 256, 1.0f), hg(256 * 256, 0.01f), hs1(256 * 256), hs2(256 * 256);
  trn_ops_adam_params_t adam{1e-3, 0.9, 0.999, 1e-8, 0.01, 1, 0, 0, 0};
  int64_t step = 1;
  std::vector<OpCase> cases = {
      {"add", [&] { ops_check(trn_ops_binary(q, TRN_OPS_ADD, &y, &a, &b, nullptr), "add"); },
       [&] {
         for (size_t i = 0; i < ha.size(); ++i) hy[i] = ha[i] + hb[i];
       }},
      {"mul_scalar",
       [&] {
         ops_check(trn_ops_binary_scalar(q, TRN_OPS_MUL, &y, &a, 0.5, 0, nullptr), "mul_scalar");
       },
       [&] {
         for (size_t i = 0; i < ha.size(); ++i) hy[i] = ha[i] * 0.5f;
       }},
      {"gelu", [&] { ops_check(trn_ops_unary(q, TRN_OPS_GELU, &y, &a, nullptr), "gelu"); },
       [&] {
         for (size_t i = 0; i < ha.size(); ++i)
           hy[i] = 0.5f * ha[i] * (1.0f + std::erf(ha[i] * 0.70710678f));
       }},
      {"softmax", [&] { ops_check(trn_ops_softmax(q, &y, &a, -1, 0, nullptr), "softmax"); },
       [&] {
         for (int64_t r = 0; r < rows; ++r) {
           float mx = -INFINITY, sum = 0;
           for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, ha[r * cols + c]);
           for (int64_t c = 0; c < cols; ++c)
             sum += hy[r * cols + c] = std::exp(ha[r * cols + c] - mx);
           for (int64_t c = 0; c < cols; ++c) hy[r * cols + c] /= sum;
         }
       }},
      {"matmul_128", [&] { ops_check(trn_ops_matmul(q, &mo, &m1, &m2, 0, nullptr), "matmul"); },
       [&] {
         for (int i = 0; i < 128; ++i)
           for (int j = 0; j < 128; ++j) {
             float acc = 0;
             for (int k = 0; k < 128; ++k) acc += hm1[i * 128 + k] * hm2[k * 128 + j];
             hmo[i * 128 + j] = acc;
           }
       }},
      {"adamw_64k",
       [&] {
         ops_check(trn_ops_adam_step(q, &p, &g, &s1, &s2, nullptr, step++, &adam, nullptr), "adam");
       },
       [&] {
         const float b1 = 0.9f, b2 = 0.999f, lr = 1e-3f;
         for (size_t i = 0; i < hp.size(); ++i) {
           hp[i] *= 1 - lr * 0.01f;
           hs1[i] = b1 * hs1[i] + (1 - b1) * hg[i];
           hs2[i] = b2 * hs2[i] + (1 - b2) * hg[i] * hg[i];
           hp[i] -= lr / (1 - b1) * hs1[i] / (std::sqrt(hs2[i] / (1 - b2)) + 1e-8f);
         }
       }},
  };

  const int runs = quick ? 5 : 21, per_run = quick ? 20 : 100;
  for (OpCase &c : cases) {
    // First use: built and written to disk; then, memory let go, loaded from disk.
    ops_check(trn_ops_cache_clear(), "trn_ops_cache_clear");
    c.issue();
    check(trn_queue_finish(q, kLong), "trn_queue_finish");
    const trn_ops_cache_stats_t built = stats();
    ops_check(trn_ops_cache_clear(), "trn_ops_cache_clear");
    c.issue();
    check(trn_queue_finish(q, kLong), "trn_queue_finish");
    const trn_ops_cache_stats_t loaded = stats();
    if (built.builds && loaded.disk_hits) {
      const double build_ms = double(built.build_ns) / 1e6 / double(built.builds);
      const double load_ms = double(loaded.disk_load_ns) / 1e6 / double(loaded.disk_hits);
      print({"ops", c.name + "_first_use_build", "ms", build_ms, load_ms,
             "loading the same kernel from the disk cache", false});
      print({"ops", c.name + "_disk_cache_load", "ms", load_ms, build_ms, "building it (first use)",
             false});
    }
    // Dispatch: the kernel is cached in memory now; only issuing is timed, completion is the
    // simulated device's work. The queue is drained between runs.
    const double issue_ns = median_ns_between(
        runs, nullptr,
        [&] {
          for (int i = 0; i < per_run; ++i) c.issue();
        },
        [&] { check(trn_queue_finish(q, kLong), "trn_queue_finish"); });
    const double host_ns = median_ns_per_op(runs, 1, c.host);
    print({"ops", c.name + "_dispatch", "us/op", issue_ns / per_run / 1e3, host_ns / 1e3,
           "the same op computed on the host CPU (1 thread)", false});
  }

  // Large ops against their roofline on one core: HBM bytes over the core's share of the
  // bandwidth, or Tensor-engine flops over its peak, whichever is larger.
  const double hbm_per_core =
      double(props.hbm_bandwidth_bytes_per_s) / double(std::max(1u, props.physical_core_count));
  const int64_t n = quick ? 1024 : 2048;
  trn_ops_tensor_t big_a = t.make(TRN_DTYPE_BF16, {n, n}, 0),
                   big_b = t.make(TRN_DTYPE_BF16, {n, n}, 0),
                   big_o = t.make(TRN_DTYPE_BF16, {n, n}, 0);
  trn_ops_tensor_t fa = t.make(TRN_DTYPE_F32, {n, n}, 1.0f),
                   fb = t.make(TRN_DTYPE_F32, {n, n}, 2.0f),
                   fo = t.make(TRN_DTYPE_F32, {n, n}, 0.0f);
  // A mid-size convolution (ResNet-like: 8 x 64 channels, 32 x 32, 3 x 3, padding 1), bf16.
  const int64_t cn = 8, cc = 64, hw = 32;
  trn_ops_tensor_t cx = t.make(TRN_DTYPE_BF16, {cn, cc, hw, hw}, 0),
                   cw = t.make(TRN_DTYPE_BF16, {cc, cc, 3, 3}, 0),
                   co = t.make(TRN_DTYPE_BF16, {cn, cc, hw, hw}, 0);
  const trn_ops_conv2d_params_t conv = {{1, 1}, {1, 1}, {1, 1}, 1};
  struct Large {
    std::string name;
    std::function<void()> issue;
    double flops, bytes;
  };
  const double nn = double(n) * double(n);
  const std::vector<Large> large = {
      {"matmul_" + std::to_string(n) + "_bf16",
       [&] { ops_check(trn_ops_matmul(q, &big_o, &big_a, &big_b, 0, nullptr), "matmul"); },
       2.0 * nn * double(n), 3 * nn * 2},
      {"conv2d_8x64x32x32_3x3_bf16",
       [&] { ops_check(trn_ops_conv2d(q, &co, &cx, &cw, nullptr, &conv, nullptr), "conv2d"); },
       2.0 * double(cn * cc * hw * hw) * double(cc * 9), double(2 * cn * cc * hw * hw * 2)},
      {"add_" + std::to_string(n) + "x" + std::to_string(n) + "_f32",
       [&] { ops_check(trn_ops_binary(q, TRN_OPS_ADD, &fo, &fa, &fb, nullptr), "add"); }, 0,
       3 * nn * 4},
      {"softmax_" + std::to_string(n) + "x" + std::to_string(n) + "_f32",
       [&] { ops_check(trn_ops_softmax(q, &fo, &fa, -1, 0, nullptr), "softmax"); }, 0, 2 * nn * 4},
      {"layer_norm_" + std::to_string(n) + "x" + std::to_string(n) + "_f32",
       [&] {
         ops_check(
             trn_ops_layer_norm(q, &fo, nullptr, nullptr, &fa, nullptr, nullptr, 1, 1e-5, nullptr),
             "layer_norm");
       },
       0, 2 * nn * 4},
  };
  for (const Large &l : large) {
    l.issue();  // first use builds the kernel
    check(trn_queue_finish(q, kLong), "trn_queue_finish");
    const double sim_s = simulated_seconds(q, l.issue);
    const double peak = double(props.peak_bf16_flops_per_core);
    const double roofline_s = std::max(l.flops / peak, l.bytes / hbm_per_core);
    const bool matmul = l.flops > 0;
    const double work = matmul ? l.flops / 1e12 : l.bytes / 1e9;
    print({"ops", l.name + " (" + trn_generation_name(props.generation) + ")",
           matmul ? "TFLOPS" : "GB/s", work / sim_s, work / roofline_s, "roofline", true},
          {{"simulated_us", sim_s * 1e6}, {"roofline_us", roofline_s * 1e6}});
  }

  trn_queue_destroy(q);
  std::string rm = "rm -rf '" + cache_dir + "'";
  if (std::system(rm.c_str()) != 0)
    std::fprintf(stderr, "trn-bench ops: cannot remove %s\n", cache_dir.c_str());
  return 0;
}

}  // namespace trn::bench
